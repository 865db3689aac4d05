"""The hand-written Python client (clients/python) against a live server: every operation,
typed problem errors, bearer auth, and retries that reuse the Idempotency-Key."""

from __future__ import annotations

import inspect
import time

import httpx
import pytest
import redis
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

from app.locks import lock_key
from tests.clients.conftest import API_KEY
from tests.support.services import REDIS_URL, ServerProcess

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


def test_503_is_retried_until_the_session_is_free(live_server: ServerProcess, new_id: str) -> None:
    attempts: list[int] = []

    def count(response: httpx.Response) -> None:
        if response.request.url.path.endswith("/items"):
            attempts.append(response.status_code)

    http = httpx.Client(event_hooks={"response": [count]})
    store = redis.Redis.from_url(REDIS_URL)
    with SessionMemoryClient(
        live_server.url, api_key=API_KEY, http_client=http, retry=RetryPolicy(max_attempts=6)
    ) as sm:
        sm.create_session(new_id)
        # another writer holds the session for 0.8 s; the server waits 0.3 s, then answers 503
        assert store.set(lock_key("default", new_id), "held-by-the-test", px=800, nx=True)
        started = time.monotonic()
        result = sm.append_items(new_id, [{"type": "message", "role": "user", "content": "hi"}])
        assert result["version"] == 2
        assert attempts[0] == 503 and attempts[-1] == 201
        assert time.monotonic() - started < 8

        store.set(lock_key("default", new_id), "held-by-the-test", px=2000, nx=True)
        with SessionMemoryClient(
            live_server.url, api_key=API_KEY, retry=RetryPolicy(max_attempts=1)
        ) as impatient:
            with pytest.raises(UnavailableError) as busy:
                impatient.append_items(
                    new_id, [{"type": "message", "role": "user", "content": "x"}]
                )
        assert busy.value.retry_after is not None and busy.value.code == "lock-timeout"
        store.delete(lock_key("default", new_id))
        assert sm.get_session(new_id)["item_count"] == 1
    http.close()
    store.close()


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
