"""The inspector shows what the service holds, not an approximation of it (issue 41 item 11),
in Debian's Chromium (tests/browser/trust.mjs does the clicking) against a live
`session-memory serve` (SQLite, auth off on loopback) that embeds with the local stand-in
embedder (tests/support/fake_llm.py), so search by meaning and recall answer:

- the timeline pairs each tool output with the call the projection pairs it with (Gemini calls
  without an id share a derived call id turn after turn);
- search hits of tool outputs, Responses reasoning and untyped items show their text;
- the budget bar has a recall segment (the recall block is not "format overhead");
- a snapshot's "Diff with now" compares like with like (an item kept in a provider format is
  unchanged) and shows the fields of an item that did change.

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

from tests.browser.seed import seed_trust_session
from tests.browser.test_inspector import ARTIFACTS, HERE, _chromium
from tests.support.fake_llm import FakeLLMServer
from tests.support.services import ServerProcess

SESSION = "inspector-trust"


@pytest.fixture(scope="module")
def embedding_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("inspector-trust")
    with FakeLLMServer() as embedder:
        server = ServerProcess(
            env={
                "DATABASE_URL": f"sqlite+aiosqlite:///{root / 'trust.db'}",
                "REDIS_URL": "",
                "LOG_LEVEL": "warning",
                "AUTH__MODE": "auto",  # loopback: off
                "EMBEDDINGS__PROVIDER": "openai",
                "EMBEDDINGS__BASE_URL": embedder.base_url,
                "EMBEDDINGS__MODEL": "fake-trust",
                "EMBEDDINGS__DIMENSIONS": "256",
                "EMBEDDINGS__RETRIES": "0",
            },
            log_path=root / "server.log",
        )
        server.start(timeout=120)
        try:
            yield server
        finally:
            server.stop()


def _indexed(base_url: str, session_id: str) -> None:
    deadline = time.monotonic() + 60
    while True:
        index = httpx.get(f"{base_url}/v1/sessions/{session_id}").json()["search_index"]
        if index["pending"] == 0:
            return
        assert time.monotonic() < deadline, index
        time.sleep(0.2)


def _tokens(legend: dict[str, str], segment: str) -> int:
    found = re.search(r": ([\d,]+) tokens", legend[segment])
    assert found, legend
    return int(found.group(1).replace(",", ""))


def test_the_inspector_pairs_searches_spends_and_diffs_as_the_service_does(
    embedding_server: ServerProcess,
) -> None:
    base = embedding_server.url
    seed_trust_session(base, SESSION)
    _indexed(base, SESSION)
    items = httpx.get(f"{base}/v1/sessions/{SESSION}/items").json()["items"]
    calls = [i for i in items if i.get("type") == "function_call"]
    outputs = [i for i in items if i.get("type") == "function_call_output"]
    assert len(calls) == 2 and len({i["call_id"] for i in calls + outputs}) == 1

    ARTIFACTS.mkdir(exist_ok=True)
    config = {
        "chromium": _chromium(),
        "url": base,
        "sessionId": SESSION,
        "artifacts": str(ARTIFACTS),
    }
    run = subprocess.run(
        ["node", str(HERE / "trust.mjs"), json.dumps(config)],
        cwd=HERE,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    seen: dict[str, Any] = json.loads(run.stdout)
    steps = seen["steps"]
    assert "failure" not in seen, seen["failure"] + "\n" + json.dumps(steps, indent=1)[:3000]
    assert not seen["errors"], seen["errors"]
    assert all(u.startswith(base + "/") for u in seen["requests"] if not u.startswith("data:"))

    # Each output under its own turn's call, none under another's, none left alone.
    assert steps["pairs"] == [
        {"call": c["seq"], "outputs": [o["seq"]]} for c, o in zip(calls, outputs, strict=True)
    ]
    assert steps["loneOutputs"] == []

    # Search by meaning: every hit shows its text (no snippet: no words were matched).
    search = steps["search"]
    assert search["answered"] == "semantic"
    kinds = {hit["kind"] for hit in search["hits"]}
    assert {"function_call_output", "reasoning", "item"} <= kinds, search
    for hit in search["hits"]:
        assert "zebra" in hit["text"], hit

    # The recall block has a segment of its own, the tokens the report gives its entries; the
    # format's overhead stays what it was without recall, give or take the block's framing.
    with_recall, without = steps["budget"]["withRecall"], steps["budget"]["without"]
    recalled = with_recall["report"]["recalled"]
    assert recalled, json.dumps(with_recall["report"])
    assert _tokens(with_recall["legend"], "recall") == sum(e["tokens"] for e in recalled)
    assert "recall" not in without["legend"]
    overhead = _tokens(with_recall["legend"], "format overhead")
    before = _tokens(without["legend"], "format overhead")
    assert overhead - before < sum(e["tokens"] for e in recalled), (overhead, before)
    assert steps["budget"]["recalledMarked"] == sorted(
        e["seq"] for e in recalled if e["session_id"] == SESSION
    )

    # Diff with now: the items written in Gemini and Responses are unchanged; the one item
    # replaced under its own id is shown with the field that changed, before and after.
    diff = steps["diff"]
    assert f"{len(items) - 1} item(s) unchanged" in diff["text"], diff["text"]
    assert diff["changed"] == [
        {
            "fields": ["content"],
            "before": "What did the zebra files hold?",
            "after": "What did the okapi files hold?",
        }
    ]
    assert "Only in the snapshot (gone now): 0" in diff["text"]
    assert "New since the snapshot: 0" in diff["text"]
    for name in ("trust-timeline", "trust-search", "trust-budget", "trust-diff"):
        assert (ARTIFACTS / f"{name}.png").stat().st_size > 5000, name
