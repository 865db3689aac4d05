"""The hand-written Python client (clients/python) against a live server: every operation,
typed problem errors, bearer auth, retries that reuse the Idempotency-Key, session ids
percent-encoded, items read back in a provider format, one async client on many loops."""

from __future__ import annotations

import asyncio
import inspect
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import psycopg
import pytest
from session_memory_client import (
    AsyncSessionMemoryClient,
    AuthenticationError,
    ConflictError,
    InvalidInputError,
    NotFoundError,
    PreconditionFailedError,
    ProblemError,
    RetryPolicy,
    SessionMemoryClient,
    UnavailableError,
    _core,
)

from tests.clients.conftest import API_KEY
from tests.support.services import ServerProcess

CHAT_TURN = [
    {"role": "user", "content": "What is the weather in Paris?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "sunny, 21C"},
    {"role": "assistant", "content": "It is sunny in Paris."},
]


@pytest.fixture
def sm(live_server: ServerProcess) -> SessionMemoryClient:
    with SessionMemoryClient(live_server.url, api_key=API_KEY) as client:
        yield client  # type: ignore[misc]


def test_every_operation_round_trips(sm: SessionMemoryClient, new_id: str) -> None:
    created = sm.create_session(new_id, metadata={"agent": "py"})
    assert created["id"] == new_id and created["version"] == 1
    assert sm.get_session(new_id)["metadata"] == {"agent": "py"}
    assert new_id in [s["id"] for s in sm.list_sessions(prefix=new_id)["items"]]

    updated = sm.update_session(new_id, summary="so far", if_match=created["version"])
    assert updated["summary"] == "so far" and updated["version"] == 2
    cleared = sm.update_session(new_id, summary=None)
    assert cleared["summary"] is None and cleared["metadata"] == {"agent": "py"}

    appended = sm.append_items(new_id, CHAT_TURN, format="openai-chat")
    assert [i["type"] for i in appended["items"]] == [
        "message",
        "function_call",
        "function_call_output",
        "message",
    ]
    first = appended["items"][0]
    assert sm.get_item(new_id, first["id"])["content"] == "What is the weather in Paris?"
    assert [i["seq"] for i in sm.iter_items(new_id, page_size=3)] == [
        i["seq"] for i in appended["items"]
    ]
    assert sm.list_items(new_id, last=1)["items"][0]["content"] == "It is sunny in Paris."

    chat = sm.get_context(new_id, "openai-chat")
    assert chat["messages"][1]["tool_calls"][0]["id"] == "call_1"
    responses = sm.get_context(new_id, "openai-responses", max_items=2)
    assert [i["type"] for i in responses["input"]] == ["function_call_output", "message"] or (
        responses["report"]["limits_applied"] == ["max_items"]
    )

    sm.append_items(new_id, [{"type": "message", "role": "user", "content": "And tomorrow?"}])
    result = sm.compact(new_id, policy="structured", keep_last_items=1)
    assert result["compacted_items"] == 4 and "get_weather" in (result["summary"] or "")
    assert sm.list_compactions(new_id)["items"][0]["id"] == result["id"]
    assert sm.get_session(new_id)["item_count"] == 1

    snap = sm.create_snapshot(new_id, label="after compaction")
    assert snap["item_count"] == 1
    assert sm.list_snapshots(new_id)["items"][0]["id"] == snap["id"]
    document = sm.export_snapshot(new_id, snap["id"])
    assert len(document["items"]) == 1

    sm.append_items(new_id, [{"type": "message", "role": "user", "content": "stray"}])
    restored = sm.restore(new_id, snap["id"])
    assert restored["restored_items"] == 1 and restored["session"]["item_count"] == 1
    again = sm.restore(new_id, snapshot=document)
    assert again["snapshot_id"] is None and again["session"]["item_count"] == 1

    fork_id = new_id + "-fork"
    forked = sm.fork(new_id, new_session_id=fork_id)
    assert forked["id"] == fork_id and forked["item_count"] == 1

    events = [e["type"] for e in sm.list_events(new_id)["items"]]
    assert events[:3] == ["created", "updated", "updated"] and "restored" in events
    history = sm.list_history(new_id)["items"]
    assert any(h["archived_reason"] == "compacted" for h in history)

    hits = sm.search("tomorrow", session_id=new_id)["items"]
    assert hits and hits[0]["session_id"] == new_id
    everywhere = sm.search("tomorrow", scope="history")["items"]
    assert {h["session_id"] for h in everywhere} >= {new_id, fork_id}
    # mode and min_score reach the server (it runs without an embedder: hybrid answers as
    # full text, semantic is a 403 problem).
    page = sm.search("tomorrow", session_id=new_id, mode="fulltext", min_score=0.5)
    assert page["mode"] == "fulltext" and page["items"][0]["scores"]["semantic"] is None
    with pytest.raises(ProblemError) as off:
        sm.search("tomorrow", session_id=new_id, mode="semantic")
    assert off.value.status == 403 and off.value.code == "semantic-search-off"

    popped = sm.pop_item(new_id)
    assert popped["item"]["content"] == "And tomorrow?"
    with pytest.raises(ConflictError) as empty:
        sm.pop_item(new_id)
    assert empty.value.code == "empty-working-memory"

    assert sm.clear_items(fork_id)["cleared_items"] == 1
    sm.delete_snapshot(new_id, snap["id"])
    with pytest.raises(NotFoundError):
        sm.export_snapshot(new_id, snap["id"])
    sm.delete_session(fork_id)
    with pytest.raises(NotFoundError) as gone:
        sm.get_session(fork_id)
    assert gone.value.code == "session-not-found"


def test_errors_are_typed_problems_and_change_nothing(
    sm: SessionMemoryClient, live_server: ServerProcess, new_id: str
) -> None:
    with pytest.raises(NotFoundError) as missing:
        sm.get_session(new_id)
    assert missing.value.status == 404
    assert missing.value.problem["type"].endswith("/session-not-found")
    assert missing.value.problem["instance"] == f"/v1/sessions/{new_id}"

    session = sm.create_session(new_id)
    with pytest.raises(ConflictError) as exists:
        sm.create_session(new_id)
    assert exists.value.code == "session-exists"

    with pytest.raises(InvalidInputError) as invalid:
        sm.append_items(
            new_id,
            [{"role": "user", "content": "ok"}, {"role": "wizard", "content": "bad"}],
            format="openai-chat",
        )
    assert invalid.value.errors and invalid.value.errors[0]["loc"][:2] == ["items", 1]

    with pytest.raises(PreconditionFailedError):
        sm.update_session(new_id, metadata={"x": 1}, if_match=session["version"] + 5)

    with SessionMemoryClient(live_server.url, api_key="smk_000000000000_wrong") as stranger:
        with pytest.raises(AuthenticationError) as denied:
            stranger.get_session(new_id)
    assert denied.value.status == 401 and isinstance(denied.value, ProblemError)

    after = sm.get_session(new_id)
    assert after["version"] == session["version"] and after["item_count"] == 0


class _LoseFirstResponse(httpx.BaseTransport):
    """Sends every request to the real server, but reports the first POST to /items as a
    dropped connection after the server has applied it: the write happened, the client does
    not know."""

    def __init__(self) -> None:
        self.inner = httpx.HTTPTransport()
        self.seen: list[httpx.Request] = []
        self.replayed: list[str | None] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        if request.method == "POST" and request.url.path.endswith("/items"):
            self.seen.append(request)
            response.read()
            self.replayed.append(response.headers.get("idempotent-replayed"))
            if len(self.seen) == 1:
                raise httpx.ReadError("connection reset by peer", request=request)
        return response


def test_a_lost_response_is_retried_with_the_same_key_and_applied_once(
    live_server: ServerProcess, new_id: str
) -> None:
    transport = _LoseFirstResponse()
    http = httpx.Client(transport=transport)
    retry = RetryPolicy(max_attempts=3, backoff=0.01)
    with SessionMemoryClient(live_server.url, api_key=API_KEY, http_client=http, retry=retry) as sm:
        sm.create_session(new_id)
        result = sm.append_items(new_id, [{"type": "message", "role": "user", "content": "once"}])
        assert result["version"] == 2
        keys = [r.headers["idempotency-key"] for r in transport.seen]
        assert len(keys) == 2 and keys[0] == keys[1]
        assert transport.replayed == [None, "true"]
        assert sm.get_session(new_id)["item_count"] == 1
    http.close()


class RowHolder:
    """Another writer in the middle of a transaction on the session: its row locked in
    Postgres (``FOR UPDATE``), as every write locks it first."""

    def __init__(self, database_url: str) -> None:
        self.db = psycopg.connect(database_url.replace("postgresql+psycopg://", "postgresql://"))
        self.timer: threading.Timer | None = None

    def hold(self, session_id: str, *, seconds: float | None = None) -> None:
        held = self.db.execute(
            "SELECT 1 FROM sessions WHERE tenant_id = 'default' AND id = %s FOR UPDATE",
            (session_id,),
        )
        assert held.fetchall() == [(1,)]
        if seconds is not None:
            self.timer = threading.Timer(seconds, self.db.rollback)
            self.timer.start()

    def release(self) -> None:
        if self.timer is not None:
            self.timer.join()
            self.timer = None
        else:
            self.db.rollback()

    def close(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
        self.db.close()


def test_503_is_retried_until_the_session_is_free(
    live_server: ServerProcess, pg_database: str, new_id: str
) -> None:
    attempts: list[int] = []

    def count(response: httpx.Response) -> None:
        if response.request.url.path.endswith("/items"):
            attempts.append(response.status_code)

    http = httpx.Client(event_hooks={"response": [count]})
    other = RowHolder(pg_database)
    try:
        with SessionMemoryClient(
            live_server.url, api_key=API_KEY, http_client=http, retry=RetryPolicy(max_attempts=6)
        ) as sm:
            sm.create_session(new_id)
            # another writer holds the session's row for 0.8 s; the server waits 0.3 s for it
            # (LOCK__WAIT_SECONDS), then answers 503
            other.hold(new_id, seconds=0.8)
            started = time.monotonic()
            result = sm.append_items(new_id, [{"type": "message", "role": "user", "content": "hi"}])
            assert result["version"] == 2
            assert attempts[0] == 503 and attempts[-1] == 201
            assert time.monotonic() - started < 8
            other.release()

            other.hold(new_id)
            with SessionMemoryClient(
                live_server.url, api_key=API_KEY, retry=RetryPolicy(max_attempts=1)
            ) as impatient:
                with pytest.raises(UnavailableError) as busy:
                    impatient.append_items(
                        new_id, [{"type": "message", "role": "user", "content": "x"}]
                    )
            assert busy.value.retry_after is not None and busy.value.code == "lock-timeout"
            other.release()
            assert sm.get_session(new_id)["item_count"] == 1
    finally:
        other.close()
        http.close()


def test_only_writes_that_can_be_replayed_are_retried_after_a_transport_error() -> None:
    request = httpx.Request("PATCH", "http://x/v1/sessions/a")
    patch = _core.update_session(
        "a", metadata={}, config=_core.UNSET, summary=_core.UNSET, if_match=None
    )
    append = _core.append_items(
        "a", [], format="canonical", system=None, create=False, if_match=None, idempotency_key="k"
    )
    read_error = httpx.ReadError("reset", request=request)
    connect_error = httpx.ConnectError("refused", request=request)
    assert not _core.should_retry(patch, None, read_error)
    assert _core.should_retry(patch, None, connect_error)
    assert _core.should_retry(append, None, read_error)
    assert _core.should_retry(append, httpx.Response(503), None)
    assert not _core.should_retry(append, httpx.Response(500), None)


async def test_async_client_runs_the_same_loop(live_server: ServerProcess, new_id: str) -> None:
    async with AsyncSessionMemoryClient(live_server.url, api_key=API_KEY) as sm:
        await sm.create_session(new_id)
        appended = await sm.append_items(new_id, CHAT_TURN, format="openai-chat")
        assert len(appended["items"]) == 4
        context = await sm.get_context(new_id, "anthropic")
        assert context["messages"][1]["content"][0]["type"] == "tool_use"
        assert [i["seq"] async for i in sm.iter_items(new_id, page_size=2)] == [1, 2, 3, 4]
        snap = await sm.create_snapshot(new_id)
        assert (await sm.pop_item(new_id))["item"]["content"] == "It is sunny in Paris."
        restored = await sm.restore(new_id, snap["id"])
        assert restored["session"]["item_count"] == 4
        with pytest.raises(NotFoundError):
            await sm.get_item(new_id, "itm_missing")


def test_pages_follow_next_cursor_sent_as_cursor(live_server: ServerProcess, new_id: str) -> None:
    """Items, history and events page with ``cursor`` (the previous page's ``next_cursor``);
    ``after_seq``, the older name, still pages the same, and ``cursor`` wins over it."""
    sent: list[httpx.URL] = []
    http = httpx.Client(event_hooks={"request": [lambda request: sent.append(request.url)]})
    with http, SessionMemoryClient(live_server.url, api_key=API_KEY, http_client=http) as sm:
        texts = [f"line {n}" for n in range(5)]
        sm.append_items(
            new_id, [{"type": "message", "role": "user", "content": t} for t in texts], create=True
        )
        sm.pop_item(new_id)  # history keeps it: 5 items there, 4 in working memory

        sent.clear()
        assert [i["content"] for i in sm.iter_items(new_id, page_size=1)] == texts[:4]
        pages = [url for url in sent if url.path.endswith("/items")]
        assert [url.params.get("cursor") for url in pages] == [None, "1", "2", "3"]
        assert not any("after_seq" in url.params for url in pages)

        for listed in (sm.list_items, sm.list_history, sm.list_events):
            first = listed(new_id, limit=2)
            assert first["next_cursor"] is not None, listed.__name__
            by_cursor = listed(new_id, cursor=first["next_cursor"], limit=2)
            assert by_cursor == listed(new_id, after_seq=first["next_cursor"], limit=2)
            assert by_cursor["items"][0]["seq"] > first["items"][-1]["seq"]
            assert listed(new_id, cursor=first["next_cursor"], after_seq=0, limit=2) == by_cursor
        history = sm.list_history(new_id, cursor=4)["items"]
        assert [h["archived_reason"] for h in history] == ["popped"]


def test_sync_and_async_clients_have_the_same_operations() -> None:
    def operations(cls: type) -> dict[str, inspect.Signature]:
        return {
            name: inspect.signature(member)
            for name, member in vars(cls).items()
            if callable(member) and not name.startswith("_") and name not in ("close", "aclose")
        }

    sync_ops, async_ops = operations(SessionMemoryClient), operations(AsyncSessionMemoryClient)
    assert sync_ops.keys() == async_ops.keys() and len(sync_ops) == 23
    for name, signature in sync_ops.items():
        assert list(signature.parameters) == list(async_ops[name].parameters), name
        assert inspect.iscoroutinefunction(getattr(AsyncSessionMemoryClient, name)) or name == (
            "iter_items"
        )


RESPONSES_TURN = [
    {"role": "user", "content": "What is the weather in Paris?"},
    {
        "id": "fc_1",
        "type": "function_call",
        "call_id": "call_1",
        "name": "get_weather",
        "arguments": '{"city": "Paris"}',
        "status": "completed",
    },
    {"type": "function_call_output", "call_id": "call_1", "output": "sunny, 21C"},
    {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "phase": "final_answer",
        "content": [{"type": "output_text", "text": "It is sunny.", "annotations": []}],
    },
]


def test_core_percent_encodes_every_id_in_a_path() -> None:
    assert _core.get_session("a/b c").path == "/v1/sessions/a%2Fb%20c"
    assert _core.get_item("u@x.com", "itm/1?").path == "/v1/sessions/u%40x.com/items/itm%2F1%3F"
    assert (
        _core.export_snapshot("t:u#1", "snp 1").path == "/v1/sessions/t%3Au%231/snapshots/snp%201"
    )
    assert _core.pop_item("é%", format=None, if_match=None, idempotency_key=None).path == (
        "/v1/sessions/%C3%A9%25/items/pop"
    )


@pytest.mark.parametrize(
    "prefix", ["user@example.com", "user 17", "tenant:user", "a?b#c%d&e+f=g", "ünï-🎉", "_private"]
)
def test_session_ids_real_apps_use_work_in_every_path(
    sm: SessionMemoryClient, new_id: str, prefix: str
) -> None:
    session_id = f"{prefix}-{new_id}"
    assert sm.create_session(session_id)["id"] == session_id
    assert sm.get_session(session_id)["id"] == session_id
    assert session_id in [s["id"] for s in sm.list_sessions(prefix=prefix)["items"]]
    appended = sm.append_items(session_id, RESPONSES_TURN[:1], format="openai-responses")
    item_id = appended["items"][0]["id"]
    assert sm.get_item(session_id, item_id)["id"] == item_id
    assert sm.list_items(session_id)["items"][0]["id"] == item_id
    snap = sm.create_snapshot(session_id)
    assert sm.export_snapshot(session_id, snap["id"])["items"][0]["id"] == item_id
    assert sm.pop_item(session_id)["item"]["id"] == item_id
    assert sm.list_history(session_id)["items"][0]["archived_reason"] == "popped"
    sm.delete_snapshot(session_id, snap["id"])
    sm.delete_session(session_id)
    with pytest.raises(NotFoundError):
        sm.get_session(session_id)


def test_a_256_character_session_id_works(sm: SessionMemoryClient, new_id: str) -> None:
    session_id = (new_id + "-" + "é" * 256)[:256]
    sm.append_items(session_id, RESPONSES_TURN[:1], format="openai-responses", create=True)
    assert sm.get_session(session_id)["item_count"] == 1


def test_items_are_read_back_in_the_format_they_were_written_in(
    sm: SessionMemoryClient, new_id: str
) -> None:
    sm.append_items(new_id, RESPONSES_TURN, format="openai-responses", create=True)
    page = sm.list_items(new_id, format="openai-responses")
    assert set(page) == {"format", "items", "next_cursor", "notes"}
    assert page["format"] == "openai-responses" and page["next_cursor"] is None
    assert page["items"] == RESPONSES_TURN  # exactly as sent, provider ids included
    assert [list(i) for i in page["items"]] == [list(i) for i in RESPONSES_TURN]  # key order
    assert list(sm.iter_items(new_id, page_size=3, format="openai-responses")) == RESPONSES_TURN
    last = sm.list_items(new_id, last=2, format="openai-responses")
    assert last["items"] == RESPONSES_TURN[-2:]
    # the stored items, by default, carry the envelope and the format they were written in
    stored = sm.list_items(new_id)["items"]
    assert {i["format"] for i in stored} == {"openai-responses"}
    assert all(i["id"].startswith("itm_") for i in stored)

    popped = sm.pop_item(new_id, format="openai-responses")
    assert popped["rendered"] == RESPONSES_TURN[-1]
    assert popped["item"]["id"] == stored[-1]["id"]
    assert "rendered" not in sm.pop_item(new_id)

    # written in one format, read in another: that format's idiom, never an error
    chat = sm.list_items(new_id, format="openai-chat")
    assert chat["format"] == "openai-chat" and isinstance(chat["notes"], list)
    assert [m["role"] for m in chat["items"]] == ["user", "assistant"]
    assert chat["items"][1]["tool_calls"][0]["id"] == "call_1"


def test_chat_messages_come_back_exactly_as_written(sm: SessionMemoryClient, new_id: str) -> None:
    sm.append_items(new_id, CHAT_TURN, format="openai-chat", create=True)
    assert sm.list_items(new_id, format="openai-chat")["items"] == CHAT_TURN


def test_gemini_contents_come_back_exactly_as_written(sm: SessionMemoryClient, new_id: str) -> None:
    contents = [
        {"role": "user", "parts": [{"text": "List files."}]},
        {"role": "model", "parts": [{"functionCall": {"name": "ls", "args": {}}}]},
        {"role": "user", "parts": [{"functionResponse": {"name": "ls", "response": {"output": "a.py"}}}]},
        {"role": "model", "parts": [{"text": "One file."}]},
    ]  # fmt: skip
    system = {"parts": [{"text": "Be terse."}]}
    sm.append_items(new_id, contents, format="gemini", system_instruction=system, create=True)
    page = sm.list_items(new_id, format="gemini")
    assert page["items"] == contents and page["system_instruction"] == system
    context = sm.get_context(new_id, "gemini")
    assert context["contents"] == contents and context["system_instruction"] == system


def test_one_async_client_serves_several_event_loops_and_threads(
    live_server: ServerProcess, new_id: str
) -> None:
    sm = AsyncSessionMemoryClient(live_server.url, api_key=API_KEY)  # made outside any loop

    async def append(text: str) -> None:
        item = {"type": "message", "role": "user", "content": text}
        await sm.append_items(new_id, [item], create=True)

    async def pool() -> httpx.AsyncClient:
        await sm.get_session(new_id)
        return await sm._pools.current()

    for n in range(3):  # a new event loop each time: "Event loop is closed" before
        asyncio.run(append(f"run {n}"))
    with ThreadPoolExecutor(max_workers=4) as threads:  # loops running at the same time
        list(threads.map(lambda n: asyncio.run(append(f"thread {n}")), range(8)))
    assert asyncio.run(sm.get_session(new_id))["item_count"] == 11

    # each loop's connection pool is closed when its loop shuts down
    http = asyncio.run(pool())
    assert http.is_closed and sm._pools._by_loop == {}

    asyncio.run(sm.aclose())
    with pytest.raises(RuntimeError, match="closed"):
        asyncio.run(sm.get_session(new_id))


class _LoseFirstAsyncResponse(httpx.AsyncBaseTransport):
    """The async twin of ``_LoseFirstResponse``."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.keys: list[str] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        if request.method == "POST" and request.url.path.endswith("/items/pop"):
            self.keys.append(request.headers["idempotency-key"])
            await response.aread()
            if len(self.keys) == 1:
                raise httpx.ReadError("connection reset by peer", request=request)
        return response


async def test_async_retries_reuse_the_key_so_a_pop_happens_once(
    live_server: ServerProcess, new_id: str
) -> None:
    transport = _LoseFirstAsyncResponse()
    retry = RetryPolicy(max_attempts=3, backoff=0.01)
    async with httpx.AsyncClient(transport=transport) as http:
        sm = AsyncSessionMemoryClient(
            live_server.url, api_key=API_KEY, http_client=http, retry=retry
        )
        await sm.append_items(new_id, RESPONSES_TURN, format="openai-responses", create=True)
        popped = await sm.pop_item(new_id, format="openai-responses")
        assert popped["rendered"] == RESPONSES_TURN[-1]
        assert len(transport.keys) == 2 and transport.keys[0] == transport.keys[1]
        assert (await sm.get_session(new_id))["item_count"] == 3
        await sm.aclose()
        assert not http.is_closed  # a caller's client is the caller's to close
