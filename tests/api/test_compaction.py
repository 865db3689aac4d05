"""Compaction over HTTP on both backends: policies, the LLM policy against a real local stand-in
server in every misbehaving mode, commit atomicity and conflicts, and automatic compaction."""

from __future__ import annotations

import asyncio
import json
import statistics
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import datetime
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from fastapi import FastAPI
from sqlalchemy.ext.asyncio import create_async_engine

from app.domain.formats import FormatName
from app.domain.items import StoredItem, body_from_dict
from app.domain.projection import Budget, ContextSource, project_context
from app.main import create_app
from app.services.auto_compaction import AutoCompactor, auto_compactor_of
from app.settings import Settings
from tests.api.helpers import all_items, append, assert_problem, assistant, create, user
from tests.conftest import make_settings
from tests.support.fake_llm import SUMMARY, FakeLLMServer, reply_content
from tests.support.provider_validation import validate_payload
from tests.support.spec_check import ASYNC_HOOKS

LLM_TIMEOUT = 3.0
BACKOFF = 1.0


# -- fixtures --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def fake_llm() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as server:
        yield server


@pytest.fixture(scope="module")
def llm_settings(backend: str, fake_llm: FakeLLMServer, request: pytest.FixtureRequest) -> Settings:
    return make_settings(
        backend,
        request,
        llm={
            "base_url": fake_llm.base_url,
            "model": "fake-model",
            "api_key": "sk-test",
            "timeout_seconds": LLM_TIMEOUT,
            "retries": 0,
        },
        auto_compact={"backoff_seconds": BACKOFF, "max_backoff_seconds": 4 * BACKOFF},
    )


@pytest.fixture(scope="module")
async def llm_app(llm_settings: Settings) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    """An app with an LLM endpoint (the stand-in server); app errors become 500 problems."""
    app = create_app(llm_settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost", event_hooks=ASYNC_HOOKS) as client:
            yield app, client


@pytest.fixture
def llm_client(llm_app: tuple[FastAPI, httpx.AsyncClient], fake_llm: FakeLLMServer) -> httpx.AsyncClient:
    fake_llm.reset()
    return llm_app[1]


@pytest.fixture
def compactor(llm_app: tuple[FastAPI, httpx.AsyncClient]) -> AutoCompactor:
    auto = auto_compactor_of(llm_app[0].state.runtime)
    assert auto is not None
    return auto  # type: ignore[no-any-return]


# -- transcripts -----------------------------------------------------------------------------


def call(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {"type": "function_call", "call_id": call_id, "name": name, "arguments": json.dumps(arguments)}


def output(call_id: str, text: str) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": text}


def turn(n: int, *, read: str | None = None, write: str | None = None) -> list[dict[str, Any]]:
    """One user turn of a coding agent: request, tool calls with outputs, answer."""
    items = [user(f"step {n}: please continue with the task")]
    if read:
        items += [call(f"r{n}", "read_file", path=read), output(f"r{n}", f"contents of {read}")]
    if write:
        items += [call(f"w{n}", "write_file", path=write, content="x = 1"), output(f"w{n}", "ok")]
    items.append(assistant(f"done with step {n}"))
    return items


async def seed(client: httpx.AsyncClient, sid: str, **session: Any) -> list[dict[str, Any]]:
    await create(client, sid, **session)
    r = await append(
        client,
        sid,
        [
            user("Fix the failing date parser tests in utils/dates.py"),
            *turn(1, read="utils/dates.py")[1:],
            *turn(2, write="utils/dates.py"),
            *turn(3, read="tests/test_dates.py"),
            user("now run the tests again"),
        ],
    )
    assert r.status_code == 201, r.text
    return r.json()["items"]  # type: ignore[no-any-return]


async def session(client: httpx.AsyncClient, sid: str) -> dict[str, Any]:
    r = await client.get(f"/v1/sessions/{sid}")
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]


async def events(client: httpx.AsyncClient, sid: str) -> list[dict[str, Any]]:
    r = await client.get(f"/v1/sessions/{sid}/events", params={"limit": 1000})
    assert r.status_code == 200, r.text
    return r.json()["items"]  # type: ignore[no-any-return]


async def compactions(client: httpx.AsyncClient, sid: str) -> list[dict[str, Any]]:
    r = await client.get(f"/v1/sessions/{sid}/compactions")
    assert r.status_code == 200, r.text
    return r.json()["items"]  # type: ignore[no-any-return]


async def state_of(client: httpx.AsyncClient, sid: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    return await session(client, sid), await all_items(client, sid)


def assert_consistent(state: dict[str, Any], items: list[dict[str, Any]]) -> None:
    """The session counters describe exactly the working memory."""
    assert state["item_count"] == len(items)
    assert state["token_count"] == sum(i["tokens"] for i in items)
    assert state["char_count"] == sum(i["chars"] for i in items)


FORMATS: tuple[FormatName, ...] = ("canonical", "openai-chat", "openai-responses", "anthropic")


def assert_projections_pair(summary: str | None, wire_items: list[dict[str, Any]]) -> None:
    """After a compaction, working memory still projects into every format with valid pairing.

    Projects through the domain (``project_context``) from the items read over HTTP;
    ``assert_http_projections_pair`` checks what ``GET .../context`` serves.
    """
    envelope = {"id", "seq", "tokens", "chars", "pinned", "metadata", "created_at", "format"}
    memory = [
        StoredItem(
            body=body_from_dict({k: v for k, v in w.items() if k not in envelope}),
            id=w["id"],
            seq=w["seq"],
            tokens=w["tokens"],
            chars=w["chars"],
            pinned=w["pinned"],
            metadata=w["metadata"],
            created_at=datetime.fromisoformat(w["created_at"]),
        )
        for w in wire_items
    ]
    source = ContextSource(
        summary=summary,
        items=memory,
        total_items=len(memory),
        total_tokens=sum(m.tokens for m in memory),
        total_chars=sum(m.chars for m in memory),
    )
    for fmt in FORMATS:
        projected = project_context(source, Budget(), format=fmt)
        if fmt == "canonical":
            calls = [i["call_id"] for i in projected.payload["items"] if i["type"] == "function_call"]
            outs = [i["call_id"] for i in projected.payload["items"] if i["type"] == "function_call_output"]
            assert sorted(calls) == sorted(set(outs)), (calls, outs)
        else:
            validate_payload(fmt, projected.payload)


async def assert_http_projections_pair(client: httpx.AsyncClient, sid: str) -> None:
    """What the service serves after a compaction is valid in every format, budgeted or not."""
    for fmt in FORMATS:
        for params in ({}, {"max_tokens": 300}, {"max_items": 3, "max_recent_tool_results": 0}):
            r = await client.get(f"/v1/sessions/{sid}/context", params={"format": fmt, **params})
            assert r.status_code == 200, r.text
            body = r.json()
            payload = {k: body[k] for k in ("items", "messages", "input", "system") if k in body}
            if fmt == "canonical":
                calls = [i["call_id"] for i in payload["items"] if i["type"] == "function_call"]
                outs = [i["call_id"] for i in payload["items"] if i["type"] == "function_call_output"]
                assert sorted(calls) == sorted(set(outs)), (calls, outs)
            else:
                validate_payload(fmt, payload)


# -- window and structured -------------------------------------------------------------------


async def test_structured_compaction_folds_old_turns(client: httpx.AsyncClient, sid: str) -> None:
    seeded = await seed(client, sid)
    before = await session(client, sid)
    r = await client.post(f"/v1/sessions/{sid}/compact", json={"policy": "structured"})
    assert r.status_code == 200, r.text
    result = r.json()
    for name in ("id", "policy", "summary", "goal", "completed", "pending", "decisions", "errors",
                 "test_results", "open_questions", "read_files", "modified_files",
                 "compacted_items", "report", "created_at"):  # fmt: skip
        assert name in result, name
    assert result["policy"] == "structured"
    assert result["goal"] == "Fix the failing date parser tests in utils/dates.py"
    assert result["read_files"] == ["utils/dates.py", "tests/test_dates.py"]
    assert result["modified_files"] == ["utils/dates.py"]
    assert result["summary"].startswith("## Goal")
    # Without keep settings the newest user turn stays: only the last user message here.
    assert result["compacted_items"] == len(seeded) - 1
    assert r.headers["etag"] == f'"{before["version"] + 1}"'

    after, items = await state_of(client, sid)
    assert [i["seq"] for i in items] == [seeded[-1]["seq"]]
    assert after["summary"] == result["summary"] and after["version"] == before["version"] + 1
    assert_consistent(after, items)
    assert_projections_pair(after["summary"], items)
    await assert_http_projections_pair(client, sid)

    listed = await compactions(client, sid)
    assert [c["id"] for c in listed] == [result["id"]] and listed[0] == result
    [compacted] = [e for e in await events(client, sid) if e["type"] == "compacted"]
    assert compacted["data"] == {
        "compaction_id": result["id"], "policy": "structured", "first_seq": 1,
        "last_seq": seeded[-2]["seq"], "count": len(seeded) - 1, "automatic": False,
    }  # fmt: skip

    # The compacted items left working memory but stay readable in the archive.
    r = await client.get(f"/v1/sessions/{sid}/history", params={"limit": 1000})
    assert r.status_code == 200, r.text
    history = r.json()["items"]
    assert [h["seq"] for h in history] == [i["seq"] for i in seeded]
    assert all(h["archived"] and h["archived_reason"] == "compacted" for h in history[:-1])
    assert not history[-1]["archived"]


async def test_structured_summary_keeps_what_was_concluded(
    client: httpx.AsyncClient, sid: str
) -> None:
    """A scripted session: a decision, a conclusion, an open question, an error resolved by a
    later run of the same command and one still open each survive compaction, with their seq,
    in the result, the stored summary and the next prompt."""
    await create(client, sid)
    r = await append(
        client,
        sid,
        [
            user("Make the nightly export finish under ten minutes"),  # 1
            call("c1", "bash", command="pytest -q"),  # 2
            output("c1", "FAILED tests/test_export.py::test_window\n1 failed, 9 passed in 2.0s"),
            assistant(
                "It turns out the window query scans every order. "
                "I decided to add an index on created_at rather than cache results. "
                "Should archived orders be exported too?"
            ),  # 4
            call("c2", "bash", command="pytest -q"),  # 5
            output("c2", "10 passed in 1.9s"),  # 6
            call("c3", "bash", command="du -sh /backups"),  # 7
            output("c3", "du: cannot access '/backups': Permission denied"),  # 8
            user("thanks, go on"),  # 9
        ],
    )
    assert r.status_code == 201, r.text
    r = await client.post(f"/v1/sessions/{sid}/compact", json={"policy": "structured"})
    assert r.status_code == 200, r.text
    result = r.json()
    assert result["decisions"] == [
        "It turns out the window query scans every order. (seq 4)",
        "I decided to add an index on created_at rather than cache results. (seq 4)",
    ]
    assert result["open_questions"] == ["Should archived orders be exported too? (seq 4)"]
    assert result["errors"] == [
        "`pytest -q` failed: FAILED tests/test_export.py::test_window (seq 3); "
        "resolved at seq 6: `pytest -q` succeeded (10 passed in 1.9s)",
        "`du -sh /backups` failed: du: cannot access '/backups': Permission denied (seq 8)",
    ]
    ctx = await client.post(f"/v1/sessions/{sid}/context", json={"format": "openai-chat"})
    summary = ctx.json()["messages"][0]["content"]
    assert (await session(client, sid))["summary"] == result["summary"] == summary
    for entry in (*result["decisions"], *result["open_questions"], *result["errors"]):
        assert entry in summary, entry


async def test_keep_settings_and_window_policy(client: httpx.AsyncClient, sid: str) -> None:
    seeded = await seed(client, sid, summary="hand-written notes")
    r = await client.post(
        f"/v1/sessions/{sid}/compact",
        json={"policy": "window", "keep_last_items": 6, "pinned_prefix_items": 1},
    )
    assert r.status_code == 200, r.text
    result = r.json()
    # The kept tail starts at a user message with >= 6 items; the first item stays (prefix).
    kept = [i["seq"] for i in await all_items(client, sid)]
    tail = [i["seq"] for i in seeded if i["seq"] >= result["report"]["kept_from_seq"]]
    assert kept == [1, *tail] and len(tail) >= 6
    assert seeded[[i["seq"] for i in seeded].index(tail[0])]["role"] == "user"
    assert result["compacted_items"] == len(seeded) - len(kept)
    # window: no summary of the dropped items; the existing summary is kept as it was.
    assert result["summary"] == "hand-written notes"
    assert (await session(client, sid))["summary"] == "hand-written notes"
    assert_consistent(await session(client, sid), await all_items(client, sid))


async def test_nothing_to_compact_is_not_an_error(client: httpx.AsyncClient, sid: str) -> None:
    await create(client, sid)
    await append(client, sid, [user("hello"), assistant("hi")])
    before = await session(client, sid)
    r = await client.post(f"/v1/sessions/{sid}/compact", json={})
    assert r.status_code == 200, r.text
    result = r.json()
    assert result["compacted_items"] == 0 and result["policy"] == "structured"
    assert result["report"]["notes"][0].startswith("nothing to compact")
    assert await session(client, sid) == before
    assert await compactions(client, sid) == []


async def test_dry_run_changes_nothing(client: httpx.AsyncClient, sid: str) -> None:
    await seed(client, sid)
    before = await state_of(client, sid)
    events_before = await events(client, sid)
    r = await client.post(f"/v1/sessions/{sid}/compact", json={"policy": "structured", "dry_run": True})
    assert r.status_code == 200, r.text
    assert r.json()["compacted_items"] > 0 and r.json()["summary"]
    assert await state_of(client, sid) == before
    assert await events(client, sid) == events_before
    assert await compactions(client, sid) == []


async def test_bad_requests_change_nothing(client: httpx.AsyncClient, sid: str) -> None:
    await seed(client, sid)
    before = await state_of(client, sid)
    for body in (
        {"policy": "magic"},
        {"keep_last_items": -1},
        {"pinned_prefix_items": "x"},
        {"surprise": True},
        {"instructions": "x" * 5000},
    ):
        r = await client.post(f"/v1/sessions/{sid}/compact", json=body)
        assert assert_problem(r, 422)["errors"], body
    # No LLM endpoint on this server: not temporary, so a 4xx (403, no Retry-After; the shipped
    # client retries 503s), naming the setting.
    r = await client.post(f"/v1/sessions/{sid}/compact", json={"policy": "llm"})
    body = assert_problem(r, 403, "llm-not-configured")
    assert "retry-after" not in r.headers
    assert "LLM__BASE_URL" in body["detail"]
    assert_problem(await client.post("/v1/sessions/nope-missing/compact", json={}), 404)
    assert_problem(await client.get("/v1/sessions/nope-missing/compactions"), 404)
    assert_problem(await client.get(f"/v1/sessions/{sid}/compactions", params={"limit": 0}), 422)
    assert await state_of(client, sid) == before


async def test_idempotent_retry_returns_the_stored_result(client: httpx.AsyncClient, sid: str) -> None:
    await seed(client, sid)
    headers = {"Idempotency-Key": f"k-{uuid.uuid4().hex}"}
    first = await client.post(f"/v1/sessions/{sid}/compact", json={}, headers=headers)
    assert first.status_code == 200, first.text
    await append(client, sid, turn(9, read="late.py"))
    state = await state_of(client, sid)
    again = await client.post(f"/v1/sessions/{sid}/compact", json={}, headers=headers)
    assert again.status_code == 200 and again.json() == first.json()
    assert again.headers.get("idempotent-replayed") == "true"
    assert await state_of(client, sid) == state
    assert len(await compactions(client, sid)) == 1
    other = await client.post(f"/v1/sessions/{sid}/compact", json={"policy": "window"}, headers=headers)
    assert_problem(other, 422, "idempotency-key-reused")


async def test_compactions_list_pages_newest_first(client: httpx.AsyncClient, sid: str) -> None:
    await create(client, sid)
    ids = []
    for n in range(3):
        await append(client, sid, turn(n, read=f"f{n}.py"))
        await append(client, sid, [user(f"next {n}")])
        r = await client.post(f"/v1/sessions/{sid}/compact", json={})
        assert r.status_code == 200 and r.json()["compacted_items"] > 0, r.text
        ids.append(r.json()["id"])
    r = await client.get(f"/v1/sessions/{sid}/compactions", params={"limit": 2})
    page = r.json()
    assert [c["id"] for c in page["items"]] == ids[::-1][:2] and page["next_cursor"] == ids[1]
    r = await client.get(f"/v1/sessions/{sid}/compactions", params={"limit": 2, "cursor": page["next_cursor"]})
    assert [c["id"] for c in r.json()["items"]] == [ids[0]] and r.json()["next_cursor"] is None
    # Files accumulate across structured compactions.
    assert page["items"][0]["read_files"] == ["f0.py", "f1.py", "f2.py"]


async def test_commit_failure_leaves_the_old_state(
    llm_client: httpx.AsyncClient, llm_settings: Settings, sid: str
) -> None:
    """A failure after the items were archived and the session row updated (the compactions
    insert, by a database trigger) rolls the whole commit back: old state, never a mix."""
    await seed(llm_client, sid)
    before = await state_of(llm_client, sid)
    events_before = await events(llm_client, sid)
    engine = create_async_engine(llm_settings.database_url)
    name = "fail_" + sid.replace("-", "_")
    if engine.dialect.name == "sqlite":
        install = [
            f"CREATE TRIGGER {name} BEFORE INSERT ON compactions WHEN NEW.session_id = '{sid}' "
            "BEGIN SELECT RAISE(ABORT, 'planted failure'); END"
        ]
        remove = [f"DROP TRIGGER {name}"]
    else:
        install = [
            f"CREATE FUNCTION {name}() RETURNS trigger AS $$ BEGIN IF NEW.session_id = '{sid}' "
            "THEN RAISE EXCEPTION 'planted failure'; END IF; RETURN NEW; END $$ LANGUAGE plpgsql",
            f"CREATE TRIGGER {name} BEFORE INSERT ON compactions FOR EACH ROW EXECUTE FUNCTION {name}()",
        ]
        remove = [f"DROP TRIGGER {name} ON compactions", f"DROP FUNCTION {name}()"]
    try:
        async with engine.begin() as db:
            for statement in install:
                await db.execute(sa.text(statement))
        for policy in ("structured", "llm"):
            r = await llm_client.post(f"/v1/sessions/{sid}/compact", json={"policy": policy})
            assert_problem(r, 500, "internal-error")
            assert await state_of(llm_client, sid) == before
        assert await events(llm_client, sid) == events_before
    finally:
        async with engine.begin() as db:
            for statement in remove:
                await db.execute(sa.text(statement))
        await engine.dispose()
    r = await llm_client.post(f"/v1/sessions/{sid}/compact", json={"policy": "structured"})
    assert r.status_code == 200 and r.json()["compacted_items"] > 0, r.text
    assert_consistent(*(await state_of(llm_client, sid)))


# -- llm -------------------------------------------------------------------------------------


SUMMARY_SECTIONS = {k: SUMMARY[k] for k in ("completed", "pending", "decisions", "errors", "test_results", "open_questions")}


@pytest.mark.parametrize("mode", ["json", "fenced"])
async def test_llm_json_answers(llm_client: httpx.AsyncClient, fake_llm: FakeLLMServer, sid: str, mode: str) -> None:
    fake_llm.configure(mode)
    seeded = await seed(llm_client, sid)
    r = await llm_client.post(
        f"/v1/sessions/{sid}/compact", json={"policy": "llm", "instructions": "Mention dates."}
    )
    assert r.status_code == 200, r.text
    result = r.json()
    assert result["policy"] == "llm" and result["model"] == "fake-model"
    assert result["goal"] == SUMMARY["goal"]
    assert {k: result[k] for k in SUMMARY_SECTIONS} == SUMMARY_SECTIONS
    # Files come from the tool calls, not from the model.
    assert result["read_files"] == ["utils/dates.py", "tests/test_dates.py"]
    assert result["summary"].startswith("## Goal\n\n" + SUMMARY["goal"])
    assert "## Pending\n\n- Fix parse_range" in result["summary"]
    assert result["compacted_items"] == len(seeded) - 1
    [request] = fake_llm.requests()
    prompt = request["body"]["messages"][1]["content"]
    assert "Previous summary: none" in prompt and "Mention dates." in prompt
    assert "utils/dates.py" in prompt
    state, items = await state_of(llm_client, sid)
    assert state["summary"] == result["summary"] and len(items) == 1
    assert_consistent(state, items)
    assert_projections_pair(state["summary"], items)
    await assert_http_projections_pair(llm_client, sid)


async def test_llm_string_where_list_was_asked(llm_client: httpx.AsyncClient, fake_llm: FakeLLMServer, sid: str) -> None:
    fake_llm.configure("string_lists")
    await seed(llm_client, sid)
    r = await llm_client.post(f"/v1/sessions/{sid}/compact", json={"policy": "llm"})
    assert r.status_code == 200, r.text
    result = r.json()
    assert result["completed"] == ["Read utils/dates.py"]
    assert result["decisions"] == ["Keep the signature"]
    assert result["pending"] == [] and result["test_results"] == ["3"]
    assert (await session(llm_client, sid))["summary"] == result["summary"]


@pytest.mark.parametrize("mode", ["prose", "broken"])
async def test_llm_unparseable_answer_becomes_the_summary(
    llm_client: httpx.AsyncClient, fake_llm: FakeLLMServer, sid: str, mode: str
) -> None:
    fake_llm.configure(mode)
    seeded = await seed(llm_client, sid)
    r = await llm_client.post(f"/v1/sessions/{sid}/compact", json={"policy": "llm"})
    assert r.status_code == 200, r.text
    result = r.json()
    assert result["summary"] == reply_content(mode).strip()
    assert result["compacted_items"] == len(seeded) - 1 and result["report"]["notes"]
    assert result["read_files"] == ["utils/dates.py", "tests/test_dates.py"]
    assert (await session(llm_client, sid))["summary"] == result["summary"]


@pytest.mark.parametrize(
    ("behaviour", "cause", "words"),
    [
        ({"mode": "error", "status": 500}, "http_status", "HTTP 500"),
        ({"mode": "malformed"}, "malformed_response", "malformed response"),
        ({"mode": "hang", "hang_seconds": LLM_TIMEOUT + 5}, "timeout", "timeout"),
    ],
)
async def test_llm_failure_is_a_502_and_changes_no_memory(
    llm_client: httpx.AsyncClient,
    fake_llm: FakeLLMServer,
    sid: str,
    behaviour: dict[str, Any],
    cause: str,
    words: str,
) -> None:
    fake_llm.configure(**behaviour)
    await seed(llm_client, sid)
    session_before, items_before = await state_of(llm_client, sid)
    started = time.monotonic()
    r = await llm_client.post(f"/v1/sessions/{sid}/compact", json={"policy": "llm"})
    elapsed = time.monotonic() - started
    body = assert_problem(r, 502, "upstream-failed")
    assert words in body["detail"] and fake_llm.base_url in body["detail"]
    assert elapsed < LLM_TIMEOUT + 2
    session_after, items_after = await state_of(llm_client, sid)
    assert items_after == items_before and session_after["summary"] == session_before["summary"]
    assert await compactions(llm_client, sid) == []
    # The failure is in the operation log (its own write: the version moves by one).
    [failed] = [e for e in await events(llm_client, sid) if e["type"] == "compaction_failed"]
    assert failed["data"]["cause"] == cause and failed["data"]["automatic"] is False
    assert session_after["version"] == session_before["version"] + 1


async def test_two_compactions_carry_the_summary_forward(
    llm_client: httpx.AsyncClient, fake_llm: FakeLLMServer, sid: str
) -> None:
    await seed(llm_client, sid)
    first = await llm_client.post(f"/v1/sessions/{sid}/compact", json={"policy": "llm"})
    assert first.status_code == 200, first.text
    await append(llm_client, sid, turn(4, read="docs/ranges.md", write="tests/test_dates.py"))
    await append(llm_client, sid, [user("and now the changelog")])
    second = await llm_client.post(f"/v1/sessions/{sid}/compact", json={"policy": "llm"})
    assert second.status_code == 200, second.text
    requests = fake_llm.requests()
    assert len(requests) == 2
    prompt = requests[1]["body"]["messages"][1]["content"]
    assert "Previous summary:\n\n" + first.json()["summary"] in prompt
    result = second.json()
    assert result["read_files"] == ["utils/dates.py", "tests/test_dates.py", "docs/ranges.md"]
    assert result["modified_files"] == ["utils/dates.py", "tests/test_dates.py"]
    # A structured compaction after an llm one keeps the model's pending items.
    await append(llm_client, sid, turn(5, read="CHANGELOG.md"))
    await append(llm_client, sid, [user("thanks")])
    third = await llm_client.post(f"/v1/sessions/{sid}/compact", json={"policy": "structured"})
    assert third.status_code == 200, third.text
    assert third.json()["pending"] == SUMMARY["pending"]
    assert "CHANGELOG.md" in third.json()["read_files"]
    assert [c["id"] for c in await compactions(llm_client, sid)] == [
        third.json()["id"], result["id"], first.json()["id"],
    ]  # fmt: skip
    state, items = await state_of(llm_client, sid)
    assert_consistent(state, items)
    assert_projections_pair(state["summary"], items)
    await assert_http_projections_pair(llm_client, sid)


async def wait_for_llm_request(fake: FakeLLMServer, count: int = 1) -> None:
    """Poll the stand-in (another process) until the compaction's request reached it."""
    for _ in range(500):
        if len(fake.requests()) >= count:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"the stand-in LLM did not get {count} request(s) within 10 s")


async def test_appends_during_a_slow_llm_all_survive(
    llm_client: httpx.AsyncClient, fake_llm: FakeLLMServer, sid: str
) -> None:
    fake_llm.configure("json", delay=2.8)  # under the 3 s LLM timeout of these tests
    seeded = await seed(llm_client, sid)
    compaction = asyncio.create_task(
        llm_client.post(f"/v1/sessions/{sid}/compact", json={"policy": "llm"})
    )
    await wait_for_llm_request(fake_llm)
    appended: list[int] = []
    for n in range(40):
        r = await append(llm_client, sid, [user(f"meanwhile {n}") if n % 2 else assistant(f"reply {n}")])
        assert r.status_code == 201, r.text
        appended.append(r.json()["items"][0]["seq"])
    assert not compaction.done(), "the appends were meant to happen while the model was writing"
    r = await compaction
    assert r.status_code == 200, r.text
    assert r.json()["compacted_items"] == len(seeded) - 1
    state, items = await state_of(llm_client, sid)
    assert [i["seq"] for i in items] == [seeded[-1]["seq"], *appended]
    assert_consistent(state, items)


async def test_clear_during_llm_compaction_is_a_409(
    llm_client: httpx.AsyncClient, fake_llm: FakeLLMServer, sid: str
) -> None:
    fake_llm.configure("json", delay=1.0)
    await seed(llm_client, sid)
    compaction = asyncio.create_task(
        llm_client.post(f"/v1/sessions/{sid}/compact", json={"policy": "llm"})
    )
    await wait_for_llm_request(fake_llm)
    r = await llm_client.delete(f"/v1/sessions/{sid}/items")
    assert r.status_code == 200, r.text
    await append(llm_client, sid, [user("a fresh start")])
    cleared = await state_of(llm_client, sid)
    body = assert_problem(await compaction, 409, "working-memory-replaced")
    assert "replaced meanwhile" in body["detail"]
    assert await state_of(llm_client, sid) == cleared
    assert await compactions(llm_client, sid) == []


async def test_another_compaction_meanwhile_is_a_409(
    llm_client: httpx.AsyncClient, fake_llm: FakeLLMServer, sid: str
) -> None:
    fake_llm.configure("json", delay=1.0)
    await seed(llm_client, sid)
    slow = asyncio.create_task(llm_client.post(f"/v1/sessions/{sid}/compact", json={"policy": "llm"}))
    await wait_for_llm_request(fake_llm)
    fast = await llm_client.post(f"/v1/sessions/{sid}/compact", json={"policy": "structured"})
    assert fast.status_code == 200, fast.text
    assert_problem(await slow, 409, "working-memory-replaced")
    assert [c["id"] for c in await compactions(llm_client, sid)] == [fast.json()["id"]]
    assert_consistent(*(await state_of(llm_client, sid)))


# -- automatic compaction --------------------------------------------------------------------


async def test_auto_compact_config_is_validated(client: httpx.AsyncClient, sid: str) -> None:
    await create(client, sid)
    before = await session(client, sid)
    for bad, where in (
        ({"policy": "structured"}, "trigger"),
        ({"policy": "magic", "trigger": {"items": 5}}, "policy"),
        ({"policy": "structured", "trigger": {}}, "trigger"),
        ({"policy": "structured", "trigger": {"items": 0}}, "items"),
        ({"policy": "structured", "trigger": {"items": 10}, "keep_last_items": 2_000_000}, "keep_last_items"),
        ({"policy": "structured", "trigger": {"items": None, "tokens": 10}}, "items"),
        ({"policy": "structured", "trigger": {"tokens": 10}, "colour": "red"}, "colour"),
    ):
        r = await client.patch(f"/v1/sessions/{sid}", json={"config": {"auto_compact": bad}})
        errors = assert_problem(r, 422)["errors"]
        # Checked by the request schema (loc starts with "body") or by the domain (with "config").
        assert all(e["loc"][e["loc"].index("config") + 1] == "auto_compact" for e in errors), errors
        assert where in json.dumps(errors), (where, errors)
    r = await client.post("/v1/sessions", json={"id": sid + "x", "config": {"auto_compact": {"policy": "llm"}}})
    assert_problem(r, 422)
    assert await session(client, sid) == before
    good = {"policy": "window", "trigger": {"items": 10, "tokens": 5000}, "keep_last_items": 4}
    r = await client.patch(f"/v1/sessions/{sid}", json={"config": {"auto_compact": good}})
    assert r.status_code == 200 and r.json()["config"]["auto_compact"] == good, r.text
    # A keep minimum at or above its trigger is no error (JSON Schema cannot compare fields):
    # stored as sent; each compaction keeps half the trigger instead (tests/domain).
    keep_all = {"policy": "window", "trigger": {"items": 10}, "keep_last_items": 10}
    r = await client.patch(f"/v1/sessions/{sid}", json={"config": {"auto_compact": keep_all}})
    assert r.status_code == 200 and r.json()["config"]["auto_compact"] == keep_all, r.text


async def test_auto_compaction_runs_in_the_background(
    llm_client: httpx.AsyncClient, compactor: AutoCompactor, sid: str
) -> None:
    config = {"policy": "structured", "trigger": {"items": 12}, "keep_last_items": 3}
    await create(llm_client, sid, config={"auto_compact": config})
    for n in range(1, 4):
        r = await append(llm_client, sid, turn(n, read=f"src/m{n}.py"))
        assert r.status_code == 201, r.text
    async with asyncio.timeout(10):
        await compactor.wait_idle()
    state, items = await state_of(llm_client, sid)
    assert state["item_count"] < 12 and state["summary"].startswith("## Goal")
    assert_consistent(state, items)
    [done] = [e for e in await events(llm_client, sid) if e["type"] == "compacted"]
    assert done["data"]["automatic"] is True and done["data"]["policy"] == "structured"


async def test_auto_compaction_with_the_llm_down_never_hurts_appends(
    llm_client: httpx.AsyncClient, fake_llm: FakeLLMServer, compactor: AutoCompactor
) -> None:
    """LLM answering 500 (slowly): appends succeed at normal speed, the failure is an event, the
    session backs off, and a later trigger after the backoff retries and succeeds."""
    fake_llm.configure("error", status=500, delay=0.2)
    plain, auto = f"t-{uuid.uuid4().hex[:12]}", f"t-{uuid.uuid4().hex[:12]}"
    await create(llm_client, plain)
    config = {"policy": "llm", "trigger": {"items": 6}, "keep_last_items": 2}
    await create(llm_client, auto, config={"auto_compact": config})

    async def timed_appends(sid: str, rounds: int) -> list[float]:
        latencies = []
        for n in range(rounds):
            started = time.perf_counter()
            r = await append(llm_client, sid, [user(f"q{n}"), assistant(f"a{n}")])
            latencies.append(time.perf_counter() - started)
            assert r.status_code == 201, r.text
        return latencies

    baseline = await timed_appends(plain, 30)
    with_auto = await timed_appends(auto, 30)
    assert statistics.median(with_auto) < 3 * statistics.median(baseline) + 0.005
    assert max(with_auto) < 0.5, "an append waited for the background compaction"
    async with asyncio.timeout(10):
        await compactor.wait_idle()
    assert (await session(llm_client, auto))["item_count"] == 60  # nothing was compacted
    failed = [e for e in await events(llm_client, auto) if e["type"] == "compaction_failed"]
    # One attempt per backoff period (30 quick appends fit in the first), never one per append.
    attempts = len(fake_llm.requests())
    assert 1 <= len(failed) == attempts <= 2
    assert [e["data"]["attempt"] for e in failed] == list(range(1, attempts + 1))
    assert failed[0]["data"]["cause"] == "http_status" and failed[0]["data"]["automatic"] is True
    assert "HTTP 500" in failed[0]["data"]["detail"]
    assert failed[0]["data"]["retry_after_seconds"] == BACKOFF
    assert compactor.backoff_remaining("default", auto) > 0

    # A trigger during the backoff does nothing; after it, the next append retries.
    fake_llm.configure("json")
    await timed_appends(auto, 1)
    await asyncio.sleep(0.05)
    assert len(fake_llm.requests()) == attempts
    await asyncio.sleep(compactor.backoff_remaining("default", auto) + 0.05)
    await timed_appends(auto, 1)
    async with asyncio.timeout(10):
        await compactor.wait_idle()
    assert len(fake_llm.requests()) == attempts + 1
    state, items = await state_of(llm_client, auto)
    assert state["item_count"] <= 3 and state["summary"].startswith("## Goal")
    assert_consistent(state, items)
    compacted = [e for e in await events(llm_client, auto) if e["type"] == "compacted"]
    assert len(compacted) == 1 and compacted[0]["data"]["automatic"] is True
    assert compactor.backoff_remaining("default", auto) == 0


async def test_compaction_timestamps_take_the_form_every_other_timestamp_takes(
    client: httpx.AsyncClient, sid: str
) -> None:
    """RFC 3339 with an explicit ``+00:00`` offset, as sessions, items and events write it
    (compaction results used to end in ``Z``: one API, one form)."""
    await client.post("/v1/sessions", json={"id": sid})
    r = await client.post(f"/v1/sessions/{sid}/items", json={"items": [
        {"type": "message", "role": "user", "content": "a"},
        {"type": "message", "role": "assistant", "content": "b"},
        {"type": "message", "role": "user", "content": "c"}]})
    assert r.status_code == 201, r.text
    compacted = await client.post(f"/v1/sessions/{sid}/compact", json={"policy": "structured"})
    assert compacted.status_code == 200, compacted.text
    listed = (await client.get(f"/v1/sessions/{sid}/compactions")).json()["items"]
    session = (await client.get(f"/v1/sessions/{sid}")).json()
    stamps = [compacted.json()["created_at"], listed[0]["created_at"], session["updated_at"]]
    assert all(s.endswith("+00:00") for s in stamps), stamps
    assert datetime.fromisoformat(stamps[0]) == datetime.fromisoformat(stamps[1])
