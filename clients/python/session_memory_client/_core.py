"""What the sync and async clients share: each operation as a ``Call`` (method, path, query,
body, headers, retry class), the retry policy, and response decoding. The two clients only
differ in how they send a ``Call``, so they cannot drift apart on what they send.

Retries (same for both clients):
- reads (GET, ``POST .../context``) and writes sent with an ``Idempotency-Key`` are retried on
  503 and on transport errors (connection refused or reset, timeouts), reusing the same key, so
  a write whose response was lost is applied exactly once;
- writes that take no key (PATCH/DELETE) are retried on 503 and on connection errors only
  (the request never reached the server);
- the wait is the server's ``Retry-After`` when it sent one (capped), else exponential backoff.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal
from urllib.parse import quote

import httpx

from session_memory_client.errors import error_from_response


class _Unset:
    _instance: _Unset | None = None

    def __new__(cls) -> _Unset:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNSET"

    def __bool__(self) -> bool:
        return False


UNSET: Final = _Unset()
"""Default of optional arguments where ``None`` has a meaning of its own (clear, lift)."""

RetryClass = Literal["safe", "connect-only"]

DEFAULT_TIMEOUT = 30.0
USER_AGENT = "session-memory-client/0.1.0"


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to retry. ``max_attempts`` counts the first try."""

    max_attempts: int = 4
    backoff: float = 0.2
    max_delay: float = 5.0

    def delay(self, attempt: int, retry_after: float | None) -> float:
        """Seconds to wait before attempt ``attempt + 1`` (``attempt`` starts at 1)."""
        if retry_after is not None:
            return max(0.0, min(retry_after, self.max_delay))
        base = self.backoff * (2 ** (attempt - 1))
        return min(self.max_delay, base * (0.5 + random.random() / 2))


NO_RETRY = RetryPolicy(max_attempts=1)


@dataclass(frozen=True)
class Call:
    """One HTTP request of the API, before it is sent."""

    method: str
    path: str
    params: dict[str, Any] = field(default_factory=dict)
    json: Any = UNSET
    headers: dict[str, str] = field(default_factory=dict)
    retry: RetryClass = "safe"
    empty: bool = False  # 204: nothing to decode

    def request_kwargs(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "params": {k: _query_value(v) for k, v in self.params.items() if v is not None},
            "headers": self.headers,
        }
        if self.json is not UNSET:
            out["json"] = self.json
        return out


def _query_value(value: Any) -> Any:
    if isinstance(value, bool):
        return "true" if value else "false"
    return value


def seg(value: str) -> str:
    """A path segment, percent-encoded (every character but unreserved ones, ``/`` included):
    session ids may hold ``@``, spaces, ``:``, ``?``, ``#``, ``%`` or any printable Unicode."""
    return quote(str(value), safe="")


def default_headers(api_key: str | None, extra: Mapping[str, str] | None) -> dict[str, str]:
    headers = {"user-agent": USER_AGENT, "accept": "application/json"}
    if api_key:
        headers["authorization"] = f"Bearer {api_key}"
    if extra:
        headers.update(extra)
    return headers


def should_retry(call: Call, response: httpx.Response | None, exc: Exception | None) -> bool:
    if response is not None:
        return response.status_code == 503
    if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout):
        return True  # never reached the server
    return call.retry == "safe" and isinstance(exc, httpx.TransportError)


def retry_after(response: httpx.Response | None) -> float | None:
    if response is None:
        return None
    value = response.headers.get("retry-after")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def decode(call: Call, response: httpx.Response) -> Any:
    """The JSON body of a 2xx response; raises the typed ``ProblemError`` otherwise."""
    if response.status_code >= 400:
        raise error_from_response(response)
    if call.empty or response.status_code == 204 or not response.content:
        return None
    return response.json()


# --- the operations --------------------------------------------------------------------------


def _write_headers(
    *, if_match: int | str | None = None, idempotency_key: str | None = None
) -> dict[str, str]:
    headers: dict[str, str] = {}
    if if_match is not None:
        headers["if-match"] = f'"{if_match}"' if isinstance(if_match, int) else if_match
    if idempotency_key is not None:
        headers["idempotency-key"] = idempotency_key
    return headers


def idem_key(given: str | None, auto: bool) -> str | None:
    """The caller's key, or a fresh one when automatic keys are on."""
    if given is not None:
        return given
    return f"smc-{uuid.uuid4()}" if auto else None


def _drop_unset(values: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not UNSET}


def create_session(
    *,
    id: str | None,
    metadata: Mapping[str, Any] | None,
    config: Mapping[str, Any] | None,
    summary: str | None,
    idempotency_key: str | None,
) -> Call:
    body: dict[str, Any] = {}
    if id is not None:
        body["id"] = id
    if metadata is not None:
        body["metadata"] = dict(metadata)
    if config is not None:
        body["config"] = dict(config)
    if summary is not None:
        body["summary"] = summary
    return Call(
        "POST", "/v1/sessions", json=body, headers=_write_headers(idempotency_key=idempotency_key)
    )


def get_session(session_id: str) -> Call:
    return Call("GET", f"/v1/sessions/{seg(session_id)}")


def list_sessions(*, prefix: str | None, cursor: str | None, limit: int | None) -> Call:
    return Call("GET", "/v1/sessions", params={"prefix": prefix, "cursor": cursor, "limit": limit})


def update_session(
    session_id: str, *, metadata: Any, config: Any, summary: Any, if_match: int | str | None
) -> Call:
    body = _drop_unset({"metadata": metadata, "config": config, "summary": summary})
    return Call(
        "PATCH",
        f"/v1/sessions/{seg(session_id)}",
        json=body,
        headers=_write_headers(if_match=if_match),
        retry="connect-only",
    )


def delete_session(session_id: str, *, if_match: int | str | None) -> Call:
    return Call(
        "DELETE",
        f"/v1/sessions/{seg(session_id)}",
        headers=_write_headers(if_match=if_match),
        retry="connect-only",
        empty=True,
    )


def append_items(
    session_id: str,
    items: list[Mapping[str, Any]],
    *,
    format: str,
    system: Any,
    create: bool,
    if_match: int | str | None,
    idempotency_key: str | None,
    system_instruction: Any = None,
) -> Call:
    body: dict[str, Any] = {"format": format, "items": [dict(i) for i in items]}
    if system is not None:
        body["system"] = system
    if system_instruction is not None:
        body["system_instruction"] = system_instruction
    return Call(
        "POST",
        f"/v1/sessions/{seg(session_id)}/items",
        params={"create": True} if create else {},
        json=body,
        headers=_write_headers(if_match=if_match, idempotency_key=idempotency_key),
    )


def seq_cursor(cursor: int | None, after_seq: int | None) -> int | None:
    """The ``cursor`` sent for a page of items, history or events: ``after_seq`` is its older
    name (the same seq), still taken; ``cursor`` wins when both are given, as on the server."""
    return cursor if cursor is not None else after_seq


def list_items(
    session_id: str,
    *,
    cursor: int | None,
    after_seq: int | None,
    limit: int | None,
    last: int | None,
    format: str | None,
) -> Call:
    return Call(
        "GET",
        f"/v1/sessions/{seg(session_id)}/items",
        params={
            "cursor": seq_cursor(cursor, after_seq),
            "limit": limit,
            "last": last,
            "format": format,
        },
    )


def get_item(session_id: str, item_id: str) -> Call:
    return Call("GET", f"/v1/sessions/{seg(session_id)}/items/{seg(item_id)}")


def pop_item(
    session_id: str,
    *,
    format: str | None,
    if_match: int | str | None,
    idempotency_key: str | None,
) -> Call:
    return Call(
        "POST",
        f"/v1/sessions/{seg(session_id)}/items/pop",
        params={"format": format},
        headers=_write_headers(if_match=if_match, idempotency_key=idempotency_key),
    )


def clear_items(session_id: str, *, if_match: int | str | None) -> Call:
    return Call(
        "DELETE",
        f"/v1/sessions/{seg(session_id)}/items",
        headers=_write_headers(if_match=if_match),
        retry="connect-only",
    )


BUDGET_FIELDS = (
    "max_items",
    "max_chars",
    "max_tokens",
    "tokenizer",
    "pinned_prefix_items",
    "keep_system",
    "max_recent_tool_results",
    "trim_old_reasoning",
    "start_on",
    "dangling_tool_calls",
    "cut",
    "cut_step",
    "cache_breakpoints",
    "recall",
)


def get_context(session_id: str, *, format: str, budget: Mapping[str, Any]) -> Call:
    unknown = set(budget) - set(BUDGET_FIELDS)
    if unknown:
        raise TypeError(f"unknown budget field(s): {', '.join(sorted(unknown))}")
    body = {"format": format, **_drop_unset(budget)}
    return Call("POST", f"/v1/sessions/{seg(session_id)}/context", json=body)


def compact(session_id: str, *, options: Mapping[str, Any], idempotency_key: str | None) -> Call:
    return Call(
        "POST",
        f"/v1/sessions/{seg(session_id)}/compact",
        json=_drop_unset(options),
        headers=_write_headers(idempotency_key=idempotency_key),
    )


def list_compactions(session_id: str, *, cursor: str | None, limit: int | None) -> Call:
    return Call(
        "GET",
        f"/v1/sessions/{seg(session_id)}/compactions",
        params={"cursor": cursor, "limit": limit},
    )


def create_snapshot(
    session_id: str, *, label: str | None, if_match: int | str | None, idempotency_key: str | None
) -> Call:
    return Call(
        "POST",
        f"/v1/sessions/{seg(session_id)}/snapshots",
        json={"label": label} if label is not None else {},
        headers=_write_headers(if_match=if_match, idempotency_key=idempotency_key),
    )


def list_snapshots(session_id: str, *, cursor: str | None, limit: int | None) -> Call:
    return Call(
        "GET",
        f"/v1/sessions/{seg(session_id)}/snapshots",
        params={"cursor": cursor, "limit": limit},
    )


def export_snapshot(session_id: str, snapshot_id: str) -> Call:
    return Call("GET", f"/v1/sessions/{seg(session_id)}/snapshots/{seg(snapshot_id)}")


def delete_snapshot(session_id: str, snapshot_id: str) -> Call:
    return Call(
        "DELETE",
        f"/v1/sessions/{seg(session_id)}/snapshots/{seg(snapshot_id)}",
        retry="connect-only",
        empty=True,
    )


def restore(
    session_id: str,
    *,
    snapshot_id: str | None,
    snapshot: Mapping[str, Any] | None,
    if_match: int | str | None,
    idempotency_key: str | None,
) -> Call:
    if (snapshot_id is None) == (snapshot is None):
        raise TypeError("pass exactly one of snapshot_id and snapshot")
    body = {"snapshot_id": snapshot_id} if snapshot_id is not None else {"snapshot": snapshot}
    return Call(
        "POST",
        f"/v1/sessions/{seg(session_id)}/restore",
        json=body,
        headers=_write_headers(if_match=if_match, idempotency_key=idempotency_key),
    )


def fork(
    session_id: str,
    *,
    new_session_id: str | None,
    snapshot_id: str | None,
    metadata: Mapping[str, Any] | None,
    idempotency_key: str | None,
) -> Call:
    body: dict[str, Any] = {}
    if new_session_id is not None:
        body["new_session_id"] = new_session_id
    if snapshot_id is not None:
        body["snapshot_id"] = snapshot_id
    if metadata is not None:
        body["metadata"] = dict(metadata)
    return Call(
        "POST",
        f"/v1/sessions/{seg(session_id)}/fork",
        json=body,
        headers=_write_headers(idempotency_key=idempotency_key),
    )


def list_events(
    session_id: str, *, cursor: int | None, after_seq: int | None, limit: int | None
) -> Call:
    return Call(
        "GET",
        f"/v1/sessions/{seg(session_id)}/events",
        params={"cursor": seq_cursor(cursor, after_seq), "limit": limit},
    )


def list_history(
    session_id: str, *, cursor: int | None, after_seq: int | None, limit: int | None
) -> Call:
    return Call(
        "GET",
        f"/v1/sessions/{seg(session_id)}/history",
        params={"cursor": seq_cursor(cursor, after_seq), "limit": limit},
    )


def search(
    session_id: str | None,
    *,
    q: str,
    scope: str | None,
    limit: int | None,
    cursor: str | None,
    mode: str | None = None,
    min_score: float | None = None,
) -> Call:
    path = "/v1/search" if session_id is None else f"/v1/sessions/{seg(session_id)}/search"
    params = {"q": q, "scope": scope, "limit": limit, "cursor": cursor}
    return Call("GET", path, params=params | {"mode": mode, "min_score": min_score})
