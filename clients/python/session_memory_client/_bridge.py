"""What the framework adapters (``langchain``, ``pydantic_ai``) do with the service, from
sync or async code and with either client: list a session's items, read its budgeted
prompt, append, clear. A session that does not exist yet reads as empty and clears as a
no-op.

A sync function given an ``AsyncSessionMemoryClient`` runs the async one on a fresh event
loop in a worker thread (``blocking``), so that it works whether or not the caller's thread
runs a loop (the async client keeps one connection pool per loop); an async function given
a ``SessionMemoryClient`` runs the sync one in a thread (``asyncio.to_thread``)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from session_memory_client import _core
from session_memory_client.client import AsyncSessionMemoryClient, SessionMemoryClient
from session_memory_client.errors import NotFoundError
from session_memory_client.types import Format, Item

_T = TypeVar("_T")
_POOL = ThreadPoolExecutor(max_workers=4, thread_name_prefix="session-memory-bridge")

Client = SessionMemoryClient | AsyncSessionMemoryClient
PAGE = 1000  # items per page when listing a whole session


def blocking(call: Callable[[], Awaitable[_T]]) -> _T:
    """The result of ``await call()``, waited for from sync code."""

    async def run() -> _T:
        return await call()

    return _POOL.submit(asyncio.run, run()).result()


def budget_overrides(context: Mapping[str, Any] | None) -> dict[str, Any]:
    """An adapter's budget overrides for its prompt, refused (TypeError) if one is not a
    budget field of the context read."""
    unknown = set(context or {}) - set(_core.BUDGET_FIELDS)
    if unknown:
        raise TypeError(f"unknown budget field(s): {', '.join(sorted(unknown))}")
    return dict(context or {})


def items(client: Client, session_id: str, *, format: Format) -> list[Item]:
    """Every item of the session in ``format``, oldest first ([] for a missing session)."""
    if isinstance(client, AsyncSessionMemoryClient):
        return blocking(lambda: aitems(client, session_id, format=format))
    try:
        return list(client.iter_items(session_id, page_size=PAGE, format=format))
    except NotFoundError:
        return []


async def aitems(client: Client, session_id: str, *, format: Format) -> list[Item]:
    """``items``, awaited."""
    if isinstance(client, SessionMemoryClient):
        return await asyncio.to_thread(items, client, session_id, format=format)
    try:
        return [m async for m in client.iter_items(session_id, page_size=PAGE, format=format)]
    except NotFoundError:
        return []


def prompt(
    client: Client, session_id: str, *, format: Format, budget: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """The ``messages`` of the session's budgeted prompt in ``format`` (``budget``: the
    overrides of the session's own; [] for a missing session)."""
    if isinstance(client, AsyncSessionMemoryClient):
        return blocking(lambda: aprompt(client, session_id, format=format, budget=budget))
    try:
        context = client.get_context(session_id, format, **budget)
    except NotFoundError:
        return []
    return list(context.get("messages") or [])


async def aprompt(
    client: Client, session_id: str, *, format: Format, budget: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """``prompt``, awaited."""
    if isinstance(client, SessionMemoryClient):
        return await asyncio.to_thread(prompt, client, session_id, format=format, budget=budget)
    try:
        context = await client.get_context(session_id, format, **budget)
    except NotFoundError:
        return []
    return list(context.get("messages") or [])


def append(
    client: Client, session_id: str, batch: Sequence[Mapping[str, Any]], *, format: Format
) -> None:
    """Append ``batch`` in ``format`` atomically, creating the session on first use; a retry
    of the request lands once. Nothing is sent for an empty batch."""
    if isinstance(client, AsyncSessionMemoryClient):
        blocking(lambda: aappend(client, session_id, batch, format=format))
        return
    if batch:
        client.append_items(
            session_id,
            batch,
            format=format,
            create=True,
            idempotency_key=_core.idem_key(None, True),
        )


async def aappend(
    client: Client, session_id: str, batch: Sequence[Mapping[str, Any]], *, format: Format
) -> None:
    """``append``, awaited."""
    if isinstance(client, SessionMemoryClient):
        await asyncio.to_thread(append, client, session_id, batch, format=format)
        return
    if batch:
        await client.append_items(
            session_id,
            batch,
            format=format,
            create=True,
            idempotency_key=_core.idem_key(None, True),
        )


def clear(client: Client, session_id: str) -> None:
    """Remove every item of working memory (the history keeps them)."""
    if isinstance(client, AsyncSessionMemoryClient):
        blocking(lambda: aclear(client, session_id))
        return
    try:
        client.clear_items(session_id)
    except NotFoundError:
        return


async def aclear(client: Client, session_id: str) -> None:
    """``clear``, awaited."""
    if isinstance(client, SessionMemoryClient):
        await asyncio.to_thread(clear, client, session_id)
        return
    try:
        await client.clear_items(session_id)
    except NotFoundError:
        return
