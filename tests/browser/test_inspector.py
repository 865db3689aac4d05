"""The inspector in a real browser: Debian's Chromium driven by playwright-core (both installed
by scripts/bootstrap; nothing is downloaded here) against two live `session-memory serve`
processes: Postgres + Redis with auth on, and the embedded default (SQLite, auth off on
loopback). tests/browser/inspector.mjs does the clicking and reports what the page showed;
this test compares it with what the API itself answers.

Screenshots are kept in tests/browser/artifacts/ (ignored by git)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.browser.seed import seed_session
from tests.support.services import REDIS_URL, ServerProcess

HERE = Path(__file__).resolve().parent
ARTIFACTS = HERE / "artifacts"
KEY = "sm-inspector-tests-" + "0123456789abcdef" * 2
SESSION = "inspector-demo"
BUDGET = {"format": "openai-chat", "max_tokens": 3000, "max_recent_tool_results": 3}
CLEARED = re.compile(r"\[tool result cleared: [^\]\n]*?\(([^()\]\n]+)\)\]")


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    assert found, "Debian's chromium is not installed: run scripts/bootstrap"
    return found


@pytest.fixture(scope="module")
def servers(
    pg_database: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    logs = tmp_path_factory.mktemp("inspector-logs")
    auth_on = ServerProcess(
        env={
            "DATABASE_URL": pg_database,
            "REDIS_URL": REDIS_URL,
            "AUTO_MIGRATE": "false",
            "LOG_LEVEL": "warning",
            "AUTH__MODE": "on",
            "AUTH__BOOTSTRAP_KEY": KEY,
        },
        log_path=logs / "auth-on.log",
    )
    sqlite = tmp_path_factory.mktemp("inspector-sqlite") / "embedded.db"
    auth_off = ServerProcess(
        env={
            "DATABASE_URL": f"sqlite+aiosqlite:///{sqlite}",
            "REDIS_URL": "",
            "LOG_LEVEL": "warning",
            "AUTH__MODE": "auto",  # what `serve` on loopback means: off
        },
        log_path=logs / "auth-off.log",
    )
    t0 = time.monotonic()
    # Both start at once (each waits for its own /healthz); a loaded machine is slow to boot.
    with ThreadPoolExecutor(2) as pool:
        for started in [pool.submit(s.start, timeout=120) for s in (auth_on, auth_off)]:
            started.result()
    print(f"servers up in {time.monotonic() - t0:.1f} s")
    try:
        yield auth_on, auth_off
    finally:
        auth_on.stop()
        auth_off.stop()


CHAT_SESSION = "inspector-chat"


def _seed_chat_session(base_url: str) -> None:
    """A session written in openai-chat (one canonical item among them), whose user message
    carries two images: one at a web address, one at a `javascript:` URL."""
    r = httpx.post(base_url + "/v1/sessions", json={"id": CHAT_SESSION})
    assert r.status_code == 201, r.text
    r = httpx.post(base_url + f"/v1/sessions/{CHAT_SESSION}/items", json={"format": "canonical", "items": [
        {"type": "message", "role": "system", "content": "Be brief."}]})
    assert r.status_code == 201, r.text
    images = [
        {"type": "text", "text": "What is in these?"},
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}},
        {"type": "image_url", "image_url": {"url": "javascript:alert(document.domain)"}},
    ]
    r = httpx.post(base_url + f"/v1/sessions/{CHAT_SESSION}/items", json={"format": "openai-chat", "items": [
        {"role": "user", "content": images},
        {"role": "assistant", "content": "A cat, and something that is not an image."},
        {"role": "user", "content": "Thanks."}]})
    assert r.status_code == 201, r.text


def _seq_set(ranges: list[list[int]]) -> set[int]:
    return {s for first, last in ranges for s in range(first, last + 1)}


def test_the_inspector_shows_what_the_api_holds(
    servers: tuple[ServerProcess, ServerProcess],
) -> None:
    auth_on, auth_off = servers
    node_modules = HERE / "node_modules" / "playwright-core"
    assert node_modules.is_dir(), "tests/browser/node_modules is missing: run scripts/bootstrap"
    full = {"Authorization": f"Bearer {KEY}"}
    assert seed_session(auth_on.url, SESSION, headers=full) == 200
    _seed_chat_session(auth_off.url)  # before SESSION: the sessions list shows SESSION first
    assert seed_session(auth_off.url, SESSION) == 200
    r = httpx.post(
        auth_on.url + "/v1/admin/keys",
        json={"name": "inspector-reader", "scopes": ["read"]},
        headers=full,
    )
    assert r.status_code == 201, r.text
    read_key = r.json()["secret"]

    ARTIFACTS.mkdir(exist_ok=True)
    config = {
        "chromium": _chromium(),
        "authOn": {"url": auth_on.url, "key": KEY, "readKey": read_key},
        "authOff": {"url": auth_off.url},
        "sessionId": SESSION,
        "chatSessionId": CHAT_SESSION,
        "budget": BUDGET,
        "artifacts": str(ARTIFACTS),
    }
    started = time.monotonic()
    run = subprocess.run(
        ["node", str(HERE / "inspector.mjs"), json.dumps(config)],
        cwd=HERE,
        capture_output=True,
        text=True,
        timeout=240,
    )
    elapsed = time.monotonic() - started
    assert run.returncode == 0, run.stderr[-3000:]
    seen: dict[str, Any] = json.loads(run.stdout)
    steps = seen["steps"]
    assert "failure" not in seen, seen["failure"] + "\n" + json.dumps(steps, indent=1)[:3000]
    # Nothing left this machine: every request went to one of the two local servers.
    local = (auth_on.url + "/", auth_off.url + "/")
    outside = [
        u
        for u in seen["requests"]
        if not u.startswith(local) and not u.startswith(("data:", "blob:http://127.0.0.1:"))
    ]
    assert outside == [], outside
    assert all(
        u.startswith("http://127.0.0.1:")
        for u in seen["requests"]
        if not u.startswith(("data:", "blob:http://127.0.0.1:"))
    )
    # The only errors allowed: the 401s of the key prompt (a request without, then a wrong key).
    errors = [e for e in seen["errors"] if "status of 401" not in e]
    assert not errors, (errors, seen["requests"])
    print(f"browser run: {elapsed:.1f} s, {len(seen['requests'])} requests; {seen['timings']}")

    # Auth on: a key prompt first, a wrong key refused, then the tab remembers the key.
    assert steps["keyPromptShown"] and steps["sessionsBeforeKey"] == 0
    assert "unknown or revoked" in steps["wrongKeyError"]
    assert steps["sessionRows"] == 1 and "admin, read, write" in steps["who"]
    assert steps["keyFormAfterReload"] == 0
    # The sessions list is asked of the server newest first, a page at a time (issue 34
    # item 11): no read of every id to sort them in the page.
    lists = [u for u in seen["requests"] if "/v1/sessions?" in u]
    assert lists and all("order=updated" in u and "limit=1000" not in u for u in lists), lists

    # Working memory: 200 entries, 39 call/output pairs shown together, the image inline.
    assert steps["memoryEntries"] == 200
    assert steps["pairs"] == 40
    assert steps["images"] == 1 and steps["imageLoaded"] is True

    # What the model gets equals GET /context for the same budget (byte for byte as JSON).
    # (GET /context was asked right after the page showed its view, before any write.)
    api_context = steps["apiContext"]
    assert api_context["format"] == BUDGET["format"] and api_context["report"]["dropped_items"]
    assert steps["contextResponse"] == api_context
    payload = {k: v for k, v in api_context.items() if k not in ("format", "version", "report")}
    assert steps["prompt"] == payload
    # The budget form offers exactly the fields the server's context request accepts.
    spec = httpx.get(auth_on.url + "/openapi.json").json()
    accepted = spec["components"]["schemas"]["ContextRequest"]["properties"]
    assert set(steps["budgetFields"]) == set(accepted) >= {"format", "max_tokens", "tokenizer"}
    report = api_context["report"]
    # The greyed-out items are exactly the report's dropped ranges...
    dropped = _seq_set(report["dropped_ranges"])
    assert dropped and set(steps["droppedSeqs"]) == dropped
    shown = ", ".join(f"{a}–{b}" if a != b else f"{a}" for a, b in report["dropped_ranges"])
    assert steps["droppedShown"] == shown
    # ...and the cleared outputs are those the prompt carries as placeholders.
    items = steps["apiItems"]
    assert len(items) == 200
    cleared_calls = set(CLEARED.findall(json.dumps(payload)))
    cleared = {
        i["seq"]
        for i in items
        if i["type"] == "function_call_output" and i["call_id"] in cleared_calls
    }
    assert cleared and set(steps["clearedSeqs"]) == cleared
    assert {"messages", "tool outputs", "system"} <= set(steps["barSegments"])

    # A dry-run compaction is previewed and commits nothing.
    assert steps["commitDisabledBeforePreview"] and steps["commitEnabledAfterPreview"]
    assert steps["previewCompacted"] > 100 and steps["itemsAfterPreview"] == 200

    # Snapshot, diff and restore through the page; the undo snapshot is named and exists.
    assert "unchanged" in steps["diff"]
    assert steps["undoSnapshot"].startswith("snp_") and steps["undoOffered"] == 1
    r = httpx.get(
        f"{auth_on.url}/v1/sessions/{SESSION}/snapshots/{steps['undoSnapshot']}", headers=full
    )
    assert r.status_code == 200 and len(r.json()["items"]) == 200
    session = httpx.get(f"{auth_on.url}/v1/sessions/{SESSION}", headers=full).json()
    assert session["item_count"] == 200 and session["summary"] is None  # nothing was compacted
    compactions = httpx.get(f"{auth_on.url}/v1/sessions/{SESSION}/compactions", headers=full)
    assert compactions.json()["items"] == []
    assert {"created", "appended", "snapshot_created", "restored"} <= set(steps["eventTypes"])
    assert steps["sessionSearchHits"] >= 1 and steps["tenantSearchSessions"] == [SESSION]
    # The mode switch starts on hybrid; this server has no embedder, so full text answered,
    # and the hit shows both rankers' scores (meaning: none).
    modes = steps["searchModes"]
    assert modes["chosen"] == "hybrid" and modes["answered"] == "fulltext", modes
    assert re.search(r"words \d", modes["scores"]) and "meaning –" in modes["scores"], modes

    # A read-only key sees everything and is offered no write.
    assert steps["readOnly"] == {
        "badge": 1,
        "snapshotForm": 0,
        "restoreButtons": 0,
        "diffButtons": 2,
        "compactForm": 0,
    }

    # Auth off on loopback: no prompt; keyboard only: skip link, then into a session.
    assert steps["authOffKeyForm"] == 0 and "Auth off" in steps["authOffWho"]
    assert steps["firstTab"] == "skip"
    assert steps["keyboardReachedSession"] and steps["keyboardOpened"] == f"/ui/sessions/{SESSION}"
    assert steps["phoneOverflow"] <= 0

    # A session written in openai-chat opens in openai-chat, named as the provider's; canonical
    # is offered, and says what it is. Hints render their `code` (no raw backticks). The
    # javascript: image is shown as text; only the https one is a link.
    chat = steps["chat"]
    assert chat["openingFormat"] == chat["responseFormat"] == "openai-chat", chat
    assert "canonical" in chat["formatOptions"]
    assert chat["promptTitle"] == "The prompt, as OpenAI Chat Completions receives it"
    assert "no provider receives this" in chat["canonicalTitle"]
    assert chat["hintsWithBackticks"] == 0 and chat["hintCodes"] > 0
    assert chat["imageLinks"] == ["https://example.com/cat.png"]
    assert len(chat["refusedImages"]) == 1 and "javascript:" in chat["refusedImages"][0]
    assert chat["compactPlaceholders"] == ["LLM only", "LLM only"]

    # /docs and /redoc render from the package's own files.
    assert steps["docsOperations"] >= 20
    assert steps["redocTitle"].startswith("Session Memory Service")
    for name in (
        "sessions",
        "inspector",
        "compaction-preview",
        "snapshots",
        "phone-context",
        "docs",
        "redoc",
    ):
        assert (ARTIFACTS / f"{name}.png").stat().st_size > 5000, name
