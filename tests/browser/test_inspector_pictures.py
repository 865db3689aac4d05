"""Issue 46, the inspector part, in Debian's Chromium (tests/browser/pictures.mjs does the
clicking) against a live `session-memory serve` (SQLite, auth off on loopback) that embeds with
the local stand-in embedder (tests/support/fake_llm.py), so recall answers:

- a new server's list shows how to make the first session, and the commands it shows work;
- at 1400x900 every session tab's own content starts on the first screen (summary, metadata
  and config folded); metadata is formatted JSON; a legend only where its marks occur;
- "What the model gets" charts working memory's tokens at every version (as the usage route
  replays them), the budget the form is set to, the compactions and the reads the tab made;
- a second read shows what the prompt gained and lost since the first, its stable prefix
  marked;
- the recall table shows each entry's text as the prompt carries it, and the API's score with
  what it means.

Screenshots are kept in tests/browser/artifacts/ (ignored by git)."""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.browser.seed import session_items
from tests.browser.test_inspector import ARTIFACTS, HERE, _chromium
from tests.support.fake_llm import FakeLLMServer
from tests.support.services import ServerProcess

SESSION = "inspector-pictures"
METADATA = {"agent": "coder", "team": "inspector", "limits": {"files": 4, "tags": ["a", "b"]}}
BUDGET = "format=openai-chat&max_tokens=1200&cut=stable"
RECALL_BUDGET = "format=openai-chat&max_tokens=900&recall=300"
RECALL_LINE = re.compile(r"^\[(?:session (.+?), )?seq (\d+)(?:-\d+)?, [^\]]*\] (.*)$")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("inspector-pictures")
    with FakeLLMServer() as embedder:
        process = ServerProcess(
            env={
                "DATABASE_URL": f"sqlite+aiosqlite:///{root / 'pictures.db'}",
                "REDIS_URL": "",
                "LOG_LEVEL": "warning",
                "AUTH__MODE": "auto",  # loopback: off
                "EMBEDDINGS__PROVIDER": "openai",
                "EMBEDDINGS__BASE_URL": embedder.base_url,
                "EMBEDDINGS__MODEL": "fake-pictures",
                "EMBEDDINGS__DIMENSIONS": "256",
                "EMBEDDINGS__RETRIES": "0",
            },
            log_path=root / "server.log",
        )
        process.start(timeout=120)
        try:
            yield process
        finally:
            process.stop()


def _drive(base: str, phase: str) -> dict[str, Any]:
    ARTIFACTS.mkdir(exist_ok=True)
    config = {
        "chromium": _chromium(),
        "url": base,
        "phase": phase,
        "sessionId": SESSION,
        "budget": BUDGET,
        "recallBudget": RECALL_BUDGET,
        "artifacts": str(ARTIFACTS),
    }
    run = subprocess.run(
        ["node", str(HERE / "pictures.mjs"), json.dumps(config)],
        cwd=HERE,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    seen: dict[str, Any] = json.loads(run.stdout)
    assert "failure" not in seen, seen["failure"] + "\n" + json.dumps(seen["steps"])[:3000]
    assert not seen["errors"], seen["errors"]
    assert all(u.startswith(base + "/") for u in seen["requests"] if not u.startswith("data:"))
    return seen["steps"]


def _seed(base: str) -> list[int]:
    """Turns appended in batches, a compaction, more turns: the versions the chart draws.
    Returns the compactions' versions."""
    with httpx.Client(base_url=base, timeout=30) as c:
        c.post("/v1/sessions", json={"id": SESSION, "metadata": METADATA}).raise_for_status()
        items = session_items(turns=12)
        for start in range(0, len(items), 20):
            c.post(f"/v1/sessions/{SESSION}/items", json={"items": items[start : start + 20]})
        r = c.post(
            f"/v1/sessions/{SESSION}/compact", json={"policy": "window", "keep_last_items": 20}
        )
        r.raise_for_status()
        compacted = [c.get(f"/v1/sessions/{SESSION}").json()["version"]]
        more = [
            {"type": "message", "role": "assistant", "content": "README.md is read."},
            {
                "type": "message",
                "role": "user",
                "content": "Turn 13: please look at README.md again and tell me what it does.",
            },
        ]
        c.post(f"/v1/sessions/{SESSION}/items", json={"items": more}).raise_for_status()
        deadline = time.monotonic() + 60
        while c.get(f"/v1/sessions/{SESSION}").json()["search_index"]["pending"]:
            assert time.monotonic() < deadline
            time.sleep(0.2)
    return compacted


def _lcs(a: list[str], b: list[str]) -> int:
    row = [0] * (len(b) + 1)
    for x in a:
        prev = 0
        for j, y in enumerate(b):
            prev, row[j + 1] = row[j + 1], prev + 1 if x == y else max(row[j + 1], row[j])
    return row[-1]


def test_a_new_server_shows_how_to_make_the_first_session(server: ServerProcess) -> None:
    steps = _drive(server.url, "empty")
    empty = steps["empty"]
    assert empty["tables"] == 0 and "No sessions yet" in empty["text"]
    # The commands shown are the ones to paste: run as shown, they make a session with an item.
    shown = empty["commands"]
    assert server.url + "/v1/sessions" in shown
    run = subprocess.run(["bash", "-c", shown], capture_output=True, text=True, timeout=30)
    assert run.returncode == 0, run.stderr
    demo = httpx.get(f"{server.url}/v1/sessions/demo").json()
    assert demo["item_count"] == 1
    assert empty["docs"].startswith("/docs#/sessions/")
    assert httpx.get(server.url + "/docs").status_code == 200
    assert (ARTIFACTS / "empty-state.png").stat().st_size > 5000
    httpx.delete(f"{server.url}/v1/sessions/demo").raise_for_status()


def test_the_session_page_draws_memory_over_time_diffs_reads_and_explains_recall(
    server: ServerProcess,
) -> None:
    base = server.url
    compacted = _seed(base)
    steps = _drive(base, "session")

    # The tab comes first: at 1400x900 each tab's own content starts on the first screen.
    assert all(0 < top < 900 for top in steps["panelTops"].values()), steps["panelTops"]
    assert steps["detailsOpen"] is False and steps["configFolded"] is True
    assert json.loads(steps["metadata"]) == METADATA and "\n  " in steps["metadata"]
    # The legend only where its marks occur: none in plain working memory.
    assert steps["memoryLegend"] == 0 and "\nnull\n" not in steps["memoryText"]

    # The chart: working memory at every version, as the server replays it.
    usage = httpx.get(f"{base}/ui/api/sessions/{SESSION}/usage").json()
    first, second = steps["first"], steps["second"]
    at = [{"version": p["version"], "tokens": p["tokens"]} for p in usage["points"]]
    assert first["chart"]["points"] == [
        p for p in at if p["version"] <= first["response"]["version"]
    ]
    assert second["chart"]["points"] == at
    assert (
        first["chart"]["compactions"] == compacted == [c["version"] for c in usage["compactions"]]
    )
    assert first["chart"]["budget"] == "1200"
    assert first["none"] == 1
    first_report = first["response"]["report"]
    assert first["chart"]["reads"] == [
        {
            "version": first["response"]["version"],
            "tokens": first_report["projected_tokens"],
            "share": round(first_report["projected_tokens"] / first_report["source_tokens"], 3),
        }
    ]
    # The second read (after two more items) is charted beside the first, one version on.
    reads = second["chart"]["reads"]
    assert [r["version"] for r in reads] == [
        first["response"]["version"],
        second["response"]["version"],
    ]
    assert reads[1]["tokens"] == second["response"]["report"]["projected_tokens"]
    assert (
        second["chart"]["points"][-1]["tokens"]
        == httpx.get(f"{base}/v1/sessions/{SESSION}").json()["token_count"]
    )
    assert (
        f"This read sent {second['response']['report']['projected_tokens']:,} of" in second["share"]
    )

    # The read-to-read diff: exactly what a longest common subsequence of the two prompts'
    # messages leaves over on each side.
    before = [json.dumps(m, sort_keys=True) for m in first["response"]["messages"]]
    after = [json.dumps(m, sort_keys=True) for m in second["response"]["messages"]]
    common = _lcs(before, after)
    assert len(second["added"]) == len(after) - common >= 2, second
    assert len(second["removed"]) == len(before) - common, second
    assert any("Fix test_budget, then run the whole suite." in line for line in second["added"])
    # The stable prefix (cut: stable) is marked where it ends, and the previous one held.
    stable = second["response"]["report"]["stable_prefix"]
    assert stable > 0
    assert second["stableEnd"] and f"the first {stable} entries" in second["stableEnd"][0]
    assert sum(int(b.split()[0]) for b in second["stableBadges"] if b[0].isdigit()) == stable
    assert "is sent again unchanged" in second["stableHeld"], second["stableHeld"]
    # The context view's legend names the marks that occur, no other.
    assert "dropped" in second["legend"] and "compacted" not in second["legend"]

    # Recall: each entry's text, as the prompt's recall block carries it, and the API's score.
    recall = steps["recall"]
    recalled = recall["response"]["report"]["recalled"]
    assert recalled, recall["response"]["report"]
    block = next(
        m["content"] for m in recall["response"]["messages"] if "(recalled, oldest first)" in str(m)
    )
    lines = {int(m[2]): m[3] for m in map(RECALL_LINE.match, block.split("\n")[1:]) if m}
    assert [r["seq"] for r in recall["rows"]] == [e["seq"] for e in recalled]
    for row, entry in zip(recall["rows"], recalled, strict=True):
        assert row["text"] == lines[entry["seq"]] and row["text"]
        assert float(row["score"]) == entry["score"]
    spec = httpx.get(base + "/openapi.json").json()["components"]["schemas"]
    meaning = spec["RecalledRead"]["properties"]["score"]["description"].rstrip(".")
    assert meaning in recall["meaning"] and "higher was a better match" in recall["meaning"]
    assert "docs/semantic-search.md" in recall["meaning"]
    assert recall["link"] == "/docs#/context/postContext"
    for name in ("session-tab-first", "session-details", "over-time", "read-diff", "recall-table"):
        assert (ARTIFACTS / f"{name}.png").stat().st_size > 5000, name
