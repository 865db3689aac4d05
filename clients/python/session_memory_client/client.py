"""The typed clients: ``SessionMemoryClient`` (sync) and ``AsyncSessionMemoryClient``
(async), over httpx. Every method is one API operation; errors raise ``ProblemError``
subclasses carrying the problem document; writes get an automatic ``Idempotency-Key`` and
are retried on 503 and transport errors with the same key (see ``_core``).

Both classes have the same methods with the same signatures (a test compares them); each method
only builds a ``_core.Call``, so the request an operation sends is defined once.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncGenerator, AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import httpx

from session_memory_client import _core
from session_memory_client._core import DEFAULT_TIMEOUT, UNSET, Call, RetryPolicy, _Unset
from session_memory_client.types import (
    AppendResult,
    ClearResult,
    CompactionPage,
    CompactPolicy,
    CompactResult,
    Context,
    EventPage,
    Format,
    HistoryPage,
    Item,
    ItemPage,
    PopResult,
    RestoreResult,
    SearchMode,
    SearchResults,
    SearchScope,
    Session,
    SessionPage,
    Snapshot,
    SnapshotDocument,
    SnapshotPage,
)


class _Base:
    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None,
        timeout: float,
        retry: RetryPolicy | None,
        auto_idempotency: bool,
        headers: Mapping[str, str] | None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.retry = retry or RetryPolicy()
        self.auto_idempotency = auto_idempotency
        self._headers = _core.default_headers(api_key, headers)
        self._timeout = timeout

    def _key(self, given: str | None) -> str | None:
        return _core.idem_key(given, self.auto_idempotency)


class SessionMemoryClient(_Base):
    """Sync client. ``SessionMemoryClient("http://127.0.0.1:8080", api_key="smk_...")``;
    use it as a context manager or call ``close()``."""

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:8080",
        *,
        api_key: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        retry: RetryPolicy | None = None,
        auto_idempotency: bool = True,
        headers: Mapping[str, str] | None = None,
        http_client: httpx.Client | None = None,
    ) -> None:
        super().__init__(
            base_url,
            api_key=api_key,
            timeout=timeout,
            retry=retry,
            auto_idempotency=auto_idempotency,
            headers=headers,
        )
        self._owns_http = http_client is None
        self._http = http_client or httpx.Client(timeout=timeout)

    def close(self) -> None:
        if self._owns_http:
            self._http.close()

    def __enter__(self) -> SessionMemoryClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _send(self, call: Call) -> Any:
        attempt = 0
        while True:
            attempt += 1
            response: httpx.Response | None = None
            try:
                response = self._http.request(
                    call.method,
                    self.base_url + call.path,
                    **_merge(self._headers, call.request_kwargs()),
                )
            except httpx.TransportError as exc:
                if attempt >= self.retry.max_attempts or not _core.should_retry(call, None, exc):
                    raise
            else:
                if attempt >= self.retry.max_attempts or not _core.should_retry(
                    call, response, None
                ):
                    return _core.decode(call, response)
            time.sleep(self.retry.delay(attempt, _core.retry_after(response)))

    def iter_items(
        self, session_id: str, *, page_size: int = 500, format: Format | None = None
    ) -> Iterator[Item]:
        """All of working memory, oldest first, one page at a time (``format`` as in
        ``list_items``)."""
        cursor: int | None = None
        while True:
            page = self.list_items(session_id, cursor=cursor, limit=page_size, format=format)
            yield from page["items"]
            if page["next_cursor"] is None:
                return
            cursor = page["next_cursor"]

    def create_session(
        self,
        id: str | None = None,
        *,
        metadata: Mapping[str, Any] | None = None,
        config: Mapping[str, Any] | None = None,
        summary: str | None = None,
        idempotency_key: str | None = None,
    ) -> Session:
        """Create a session (``id`` generated when omitted). ``ConflictError`` if it exists."""
        return self._send(
            _core.create_session(
                id=id,
                metadata=metadata,
                config=config,
                summary=summary,
                idempotency_key=self._key(idempotency_key),
            )
        )

    def get_session(self, session_id: str) -> Session:
        """Read a session; its ``version`` is what ``if_match`` expects."""
        return self._send(_core.get_session(session_id))

    def list_sessions(
        self, *, prefix: str | None = None, cursor: str | None = None, limit: int | None = None
    ) -> SessionPage:
        """A page of sessions by id; pass ``next_cursor`` back as ``cursor``."""
        return self._send(_core.list_sessions(prefix=prefix, cursor=cursor, limit=limit))

    def update_session(
        self,
        session_id: str,
        *,
        metadata: Mapping[str, Any] | None | _Unset = UNSET,
        config: Mapping[str, Any] | None | _Unset = UNSET,
        summary: str | None | _Unset = UNSET,
        if_match: int | str | None = None,
    ) -> Session:
        """Change only the fields given; ``None`` clears one."""
        return self._send(
            _core.update_session(
                session_id, metadata=metadata, config=config, summary=summary, if_match=if_match
            )
        )

    def delete_session(self, session_id: str, *, if_match: int | str | None = None) -> None:
        """Delete a session and everything it holds."""
        return self._send(_core.delete_session(session_id, if_match=if_match))

    def append_items(
        self,
        session_id: str,
        items: Sequence[Mapping[str, Any]],
        *,
        format: Format = "canonical",
        system: Any = None,
        system_instruction: Any = None,
        create: bool = False,
        if_match: int | str | None = None,
        idempotency_key: str | None = None,
    ) -> AppendResult:
        """Append a batch atomically, written in ``format``; ``create`` makes the session if
        needed. Retried safely: the same ``Idempotency-Key`` is reused on every attempt."""
        return self._send(
            _core.append_items(
                session_id,
                list(items),
                format=format,
                system=system,
                system_instruction=system_instruction,
                create=create,
                if_match=if_match,
                idempotency_key=self._key(idempotency_key),
            )
        )

    def list_items(
        self,
        session_id: str,
        *,
        cursor: int | None = None,
        limit: int | None = None,
        last: int | None = None,
        format: Format | None = None,
        after_seq: int | None = None,
    ) -> ItemPage:
        """Working memory oldest first after ``cursor`` (the previous page's ``next_cursor``),
        or the newest ``last`` items. ``after_seq`` is the older name of ``cursor`` (the same
        seq), still taken; ``cursor`` wins when both are given.

        Without ``format``: the stored items (canonical view, with their envelope: ``id``,
        ``seq``, ``tokens``, ...). With ``format`` (``openai-responses``, ``openai-chat``,
        ``anthropic``): the page's items as that provider's items or messages, exactly as
        ingested when they were written in that format, else rendered in its idiom, with
        ``format`` and ``notes`` (what the format cannot carry and was left out; anthropic
        adds ``system``)."""
        return self._send(
            _core.list_items(
                session_id,
                cursor=cursor,
                after_seq=after_seq,
                limit=limit,
                last=last,
                format=format,
            )
        )

    def get_item(self, session_id: str, item_id: str) -> Item:
        """One item of working memory."""
        return self._send(_core.get_item(session_id, item_id))

    def pop_item(
        self,
        session_id: str,
        *,
        format: Format | None = None,
        if_match: int | str | None = None,
        idempotency_key: str | None = None,
    ) -> PopResult:
        """Remove and return the newest item (it stays in history). ``ConflictError`` if
        working memory is empty. With ``format``, ``rendered`` is the popped item in that
        format (exactly as ingested when it was written in it; ``None`` when the format cannot
        carry it). Retried with the same ``Idempotency-Key``, so a retry pops once."""
        return self._send(
            _core.pop_item(
                session_id,
                format=format,
                if_match=if_match,
                idempotency_key=self._key(idempotency_key),
            )
        )

    def clear_items(self, session_id: str, *, if_match: int | str | None = None) -> ClearResult:
        """Empty working memory and the summary (items stay in history)."""
        return self._send(_core.clear_items(session_id, if_match=if_match))

    def get_context(self, session_id: str, format: Format = "canonical", **budget: Any) -> Context:
        """The next-turn prompt in ``format``. Budget keywords (``max_items``, ``max_tokens``,
        ``max_chars``, ``tokenizer``, ``pinned_prefix_items``, ``keep_system``,
        ``max_recent_tool_results``, ``trim_old_reasoning``, ``start_on``,
        ``dangling_tool_calls``, ``cut``, ``cut_step``, ``cache_breakpoints``, ``recall``)
        override the session's defaults; ``None`` lifts one. ``recall={"max_tokens": 600}``
        brings evicted items matching the newest user message back, within 600 tokens."""
        return self._send(_core.get_context(session_id, format=format, budget=budget))

    def compact(
        self,
        session_id: str,
        *,
        policy: CompactPolicy = "structured",
        keep_last_items: int | None | _Unset = UNSET,
        keep_last_tokens: int | None | _Unset = UNSET,
        pinned_prefix_items: int | _Unset = UNSET,
        instructions: str | None | _Unset = UNSET,
        model: str | None | _Unset = UNSET,
        dry_run: bool = False,
        idempotency_key: str | None = None,
    ) -> CompactResult:
        """Compact working memory into a summary; compacted items stay in history."""
        options = {
            "policy": policy,
            "keep_last_items": keep_last_items,
            "keep_last_tokens": keep_last_tokens,
            "pinned_prefix_items": pinned_prefix_items,
            "instructions": instructions,
            "model": model,
            "dry_run": dry_run,
        }
        return self._send(
            _core.compact(session_id, options=options, idempotency_key=self._key(idempotency_key))
        )

    def list_compactions(
        self, session_id: str, *, cursor: str | None = None, limit: int | None = None
    ) -> CompactionPage:
        """Past compaction results, newest first."""
        return self._send(_core.list_compactions(session_id, cursor=cursor, limit=limit))

    def create_snapshot(
        self,
        session_id: str,
        *,
        label: str | None = None,
        if_match: int | str | None = None,
        idempotency_key: str | None = None,
    ) -> Snapshot:
        """Freeze the session's state."""
        return self._send(
            _core.create_snapshot(
                session_id,
                label=label,
                if_match=if_match,
                idempotency_key=self._key(idempotency_key),
            )
        )

    def list_snapshots(
        self, session_id: str, *, cursor: str | None = None, limit: int | None = None
    ) -> SnapshotPage:
        """Snapshots, newest first."""
        return self._send(_core.list_snapshots(session_id, cursor=cursor, limit=limit))

    def export_snapshot(self, session_id: str, snapshot_id: str) -> SnapshotDocument:
        """A snapshot as one JSON document (restorable here or on another server)."""
        return self._send(_core.export_snapshot(session_id, snapshot_id))

    def delete_snapshot(self, session_id: str, snapshot_id: str) -> None:
        return self._send(_core.delete_snapshot(session_id, snapshot_id))

    def restore(
        self,
        session_id: str,
        snapshot_id: str | None = None,
        *,
        snapshot: Mapping[str, Any] | None = None,
        if_match: int | str | None = None,
        idempotency_key: str | None = None,
    ) -> RestoreResult:
        """Restore a snapshot by id, or an exported document; ``undo_snapshot_id`` undoes it."""
        return self._send(
            _core.restore(
                session_id,
                snapshot_id=snapshot_id,
                snapshot=snapshot,
                if_match=if_match,
                idempotency_key=self._key(idempotency_key),
            )
        )

    def fork(
        self,
        session_id: str,
        *,
        new_session_id: str | None = None,
        snapshot_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> Session:
        """A new session from this one's current state (or one of its snapshots)."""
        return self._send(
            _core.fork(
                session_id,
                new_session_id=new_session_id,
                snapshot_id=snapshot_id,
                metadata=metadata,
                idempotency_key=self._key(idempotency_key),
            )
        )

    def list_events(
        self,
        session_id: str,
        *,
        cursor: int | None = None,
        limit: int | None = None,
        after_seq: int | None = None,
    ) -> EventPage:
        """The operation log, oldest first; pass ``next_cursor`` back as ``cursor``
        (``after_seq``: its older name, as in ``list_items``)."""
        return self._send(
            _core.list_events(session_id, cursor=cursor, after_seq=after_seq, limit=limit)
        )

    def list_history(
        self,
        session_id: str,
        *,
        cursor: int | None = None,
        limit: int | None = None,
        after_seq: int | None = None,
    ) -> HistoryPage:
        """Every item ever appended (archived ones too), oldest first; pass ``next_cursor``
        back as ``cursor`` (``after_seq``: its older name, as in ``list_items``)."""
        return self._send(
            _core.list_history(session_id, cursor=cursor, after_seq=after_seq, limit=limit)
        )

    def search(
        self,
        q: str,
        *,
        session_id: str | None = None,
        scope: SearchScope | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        mode: SearchMode | None = None,
        min_score: float | None = None,
    ) -> SearchResults:
        """Search one session, or every session the key sees: ``mode`` ``hybrid`` (the
        server's default: meaning and words fused), ``fulltext`` or ``semantic``; ``min_score``:
        the lowest similarity of a hit found only by meaning."""
        return self._send(
            _core.search(
                session_id,
                q=q,
                scope=scope,
                limit=limit,
                cursor=cursor,
                mode=mode,
                min_score=min_score,
            )  # fmt: skip
        )


class AsyncSessionMemoryClient(_Base):
    """Async client: the same methods as ``SessionMemoryClient``, awaitable. Use it as an
    async context manager or call ``aclose()``.

    One object serves every event loop and thread: it keeps one ``httpx.AsyncClient`` (one
    connection pool) per running event loop, made on the loop's first request and closed
    when that loop shuts down (at the end of ``asyncio.run``), so it can be created once and
    used from several ``asyncio.run`` calls, ``Runner.run_sync`` calls or threads.
    ``aclose()`` closes them all; the client cannot be used after it. A caller's
    ``http_client`` is used as given, on its own loop, and left open.
    """

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:8080",
        *,
        api_key: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        retry: RetryPolicy | None = None,
        auto_idempotency: bool = True,
        headers: Mapping[str, str] | None = None,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        super().__init__(
            base_url,
            api_key=api_key,
            timeout=timeout,
            retry=retry,
            auto_idempotency=auto_idempotency,
            headers=headers,
        )
        self._given_http = http_client
        self._pools = _LoopPools(timeout)

    async def aclose(self) -> None:
        """Close the connection pools this client opened (on every loop); a caller's
        ``http_client`` is left open."""
        await self._pools.aclose()

    async def __aenter__(self) -> AsyncSessionMemoryClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def _send(self, call: Call) -> Any:
        http = self._given_http or await self._pools.current()
        attempt = 0
        while True:
            attempt += 1
            response: httpx.Response | None = None
            try:
                response = await http.request(
                    call.method,
                    self.base_url + call.path,
                    **_merge(self._headers, call.request_kwargs()),
                )
            except httpx.TransportError as exc:
                if attempt >= self.retry.max_attempts or not _core.should_retry(call, None, exc):
                    raise
            else:
                if attempt >= self.retry.max_attempts or not _core.should_retry(
                    call, response, None
                ):
                    return _core.decode(call, response)
            await asyncio.sleep(self.retry.delay(attempt, _core.retry_after(response)))

    async def iter_items(
        self, session_id: str, *, page_size: int = 500, format: Format | None = None
    ) -> AsyncIterator[Item]:
        """All of working memory, oldest first, one page at a time (``format`` as in
        ``list_items``)."""
        cursor: int | None = None
        while True:
            page = await self.list_items(session_id, cursor=cursor, limit=page_size, format=format)
            for item in page["items"]:
                yield item
            if page["next_cursor"] is None:
                return
            cursor = page["next_cursor"]

    async def create_session(
        self,
        id: str | None = None,
        *,
        metadata: Mapping[str, Any] | None = None,
        config: Mapping[str, Any] | None = None,
        summary: str | None = None,
        idempotency_key: str | None = None,
    ) -> Session:
        """Create a session (``id`` generated when omitted). ``ConflictError`` if it exists."""
        return await self._send(
            _core.create_session(
                id=id,
                metadata=metadata,
                config=config,
                summary=summary,
                idempotency_key=self._key(idempotency_key),
            )
        )

    async def get_session(self, session_id: str) -> Session:
        """Read a session; its ``version`` is what ``if_match`` expects."""
        return await self._send(_core.get_session(session_id))

    async def list_sessions(
        self, *, prefix: str | None = None, cursor: str | None = None, limit: int | None = None
    ) -> SessionPage:
        """A page of sessions by id; pass ``next_cursor`` back as ``cursor``."""
        return await self._send(_core.list_sessions(prefix=prefix, cursor=cursor, limit=limit))

    async def update_session(
        self,
        session_id: str,
        *,
        metadata: Mapping[str, Any] | None | _Unset = UNSET,
        config: Mapping[str, Any] | None | _Unset = UNSET,
        summary: str | None | _Unset = UNSET,
        if_match: int | str | None = None,
    ) -> Session:
        """Change only the fields given; ``None`` clears one."""
        return await self._send(
            _core.update_session(
                session_id, metadata=metadata, config=config, summary=summary, if_match=if_match
            )
        )

    async def delete_session(self, session_id: str, *, if_match: int | str | None = None) -> None:
        """Delete a session and everything it holds."""
        return await self._send(_core.delete_session(session_id, if_match=if_match))

    async def append_items(
        self,
        session_id: str,
        items: Sequence[Mapping[str, Any]],
        *,
        format: Format = "canonical",
        system: Any = None,
        system_instruction: Any = None,
        create: bool = False,
        if_match: int | str | None = None,
        idempotency_key: str | None = None,
    ) -> AppendResult:
        """Append a batch atomically, written in ``format``; ``create`` makes the session if
        needed. Retried safely: the same ``Idempotency-Key`` is reused on every attempt."""
        return await self._send(
            _core.append_items(
                session_id,
                list(items),
                format=format,
                system=system,
                system_instruction=system_instruction,
                create=create,
                if_match=if_match,
                idempotency_key=self._key(idempotency_key),
            )
        )

    async def list_items(
        self,
        session_id: str,
        *,
        cursor: int | None = None,
        limit: int | None = None,
        last: int | None = None,
        format: Format | None = None,
        after_seq: int | None = None,
    ) -> ItemPage:
        """Working memory oldest first after ``cursor`` (the previous page's ``next_cursor``),
        or the newest ``last`` items. ``after_seq`` is the older name of ``cursor`` (the same
        seq), still taken; ``cursor`` wins when both are given.

        Without ``format``: the stored items (canonical view, with their envelope: ``id``,
        ``seq``, ``tokens``, ...). With ``format`` (``openai-responses``, ``openai-chat``,
        ``anthropic``): the page's items as that provider's items or messages, exactly as
        ingested when they were written in that format, else rendered in its idiom, with
        ``format`` and ``notes`` (what the format cannot carry and was left out; anthropic
        adds ``system``)."""
        return await self._send(
            _core.list_items(
                session_id,
                cursor=cursor,
                after_seq=after_seq,
                limit=limit,
                last=last,
                format=format,
            )
        )

    async def get_item(self, session_id: str, item_id: str) -> Item:
        """One item of working memory."""
        return await self._send(_core.get_item(session_id, item_id))

    async def pop_item(
        self,
        session_id: str,
        *,
        format: Format | None = None,
        if_match: int | str | None = None,
        idempotency_key: str | None = None,
    ) -> PopResult:
        """Remove and return the newest item (it stays in history). ``ConflictError`` if
        working memory is empty. With ``format``, ``rendered`` is the popped item in that
        format (exactly as ingested when it was written in it; ``None`` when the format cannot
        carry it). Retried with the same ``Idempotency-Key``, so a retry pops once."""
        return await self._send(
            _core.pop_item(
                session_id,
                format=format,
                if_match=if_match,
                idempotency_key=self._key(idempotency_key),
            )
        )

    async def clear_items(
        self, session_id: str, *, if_match: int | str | None = None
    ) -> ClearResult:
        """Empty working memory and the summary (items stay in history)."""
        return await self._send(_core.clear_items(session_id, if_match=if_match))

    async def get_context(
        self, session_id: str, format: Format = "canonical", **budget: Any
    ) -> Context:
        """The next-turn prompt in ``format``. Budget keywords (``max_items``, ``max_tokens``,
        ``max_chars``, ``tokenizer``, ``pinned_prefix_items``, ``keep_system``,
        ``max_recent_tool_results``, ``trim_old_reasoning``, ``start_on``,
        ``dangling_tool_calls``, ``cut``, ``cut_step``, ``cache_breakpoints``, ``recall``)
        override the session's defaults; ``None`` lifts one."""
        return await self._send(_core.get_context(session_id, format=format, budget=budget))

    async def compact(
        self,
        session_id: str,
        *,
        policy: CompactPolicy = "structured",
        keep_last_items: int | None | _Unset = UNSET,
        keep_last_tokens: int | None | _Unset = UNSET,
        pinned_prefix_items: int | _Unset = UNSET,
        instructions: str | None | _Unset = UNSET,
        model: str | None | _Unset = UNSET,
        dry_run: bool = False,
        idempotency_key: str | None = None,
    ) -> CompactResult:
        """Compact working memory into a summary; compacted items stay in history."""
        options = {
            "policy": policy,
            "keep_last_items": keep_last_items,
            "keep_last_tokens": keep_last_tokens,
            "pinned_prefix_items": pinned_prefix_items,
            "instructions": instructions,
            "model": model,
            "dry_run": dry_run,
        }
        return await self._send(
            _core.compact(session_id, options=options, idempotency_key=self._key(idempotency_key))
        )

    async def list_compactions(
        self, session_id: str, *, cursor: str | None = None, limit: int | None = None
    ) -> CompactionPage:
        """Past compaction results, newest first."""
        return await self._send(_core.list_compactions(session_id, cursor=cursor, limit=limit))

    async def create_snapshot(
        self,
        session_id: str,
        *,
        label: str | None = None,
        if_match: int | str | None = None,
        idempotency_key: str | None = None,
    ) -> Snapshot:
        """Freeze the session's state."""
        return await self._send(
            _core.create_snapshot(
                session_id,
                label=label,
                if_match=if_match,
                idempotency_key=self._key(idempotency_key),
            )
        )

    async def list_snapshots(
        self, session_id: str, *, cursor: str | None = None, limit: int | None = None
    ) -> SnapshotPage:
        """Snapshots, newest first."""
        return await self._send(_core.list_snapshots(session_id, cursor=cursor, limit=limit))

    async def export_snapshot(self, session_id: str, snapshot_id: str) -> SnapshotDocument:
        """A snapshot as one JSON document (restorable here or on another server)."""
        return await self._send(_core.export_snapshot(session_id, snapshot_id))

    async def delete_snapshot(self, session_id: str, snapshot_id: str) -> None:
        return await self._send(_core.delete_snapshot(session_id, snapshot_id))

    async def restore(
        self,
        session_id: str,
        snapshot_id: str | None = None,
        *,
        snapshot: Mapping[str, Any] | None = None,
        if_match: int | str | None = None,
        idempotency_key: str | None = None,
    ) -> RestoreResult:
        """Restore a snapshot by id, or an exported document; ``undo_snapshot_id`` undoes it."""
        return await self._send(
            _core.restore(
                session_id,
                snapshot_id=snapshot_id,
                snapshot=snapshot,
                if_match=if_match,
                idempotency_key=self._key(idempotency_key),
            )
        )

    async def fork(
        self,
        session_id: str,
        *,
        new_session_id: str | None = None,
        snapshot_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> Session:
        """A new session from this one's current state (or one of its snapshots)."""
        return await self._send(
            _core.fork(
                session_id,
                new_session_id=new_session_id,
                snapshot_id=snapshot_id,
                metadata=metadata,
                idempotency_key=self._key(idempotency_key),
            )
        )

    async def list_events(
        self,
        session_id: str,
        *,
        cursor: int | None = None,
        limit: int | None = None,
        after_seq: int | None = None,
    ) -> EventPage:
        """The operation log, oldest first; pass ``next_cursor`` back as ``cursor``
        (``after_seq``: its older name, as in ``list_items``)."""
        return await self._send(
            _core.list_events(session_id, cursor=cursor, after_seq=after_seq, limit=limit)
        )

    async def list_history(
        self,
        session_id: str,
        *,
        cursor: int | None = None,
        limit: int | None = None,
        after_seq: int | None = None,
    ) -> HistoryPage:
        """Every item ever appended (archived ones too), oldest first; pass ``next_cursor``
        back as ``cursor`` (``after_seq``: its older name, as in ``list_items``)."""
        return await self._send(
            _core.list_history(session_id, cursor=cursor, after_seq=after_seq, limit=limit)
        )

    async def search(
        self,
        q: str,
        *,
        session_id: str | None = None,
        scope: SearchScope | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        mode: SearchMode | None = None,
        min_score: float | None = None,
    ) -> SearchResults:
        """Search one session, or every session the key sees (see the sync ``search``)."""
        return await self._send(
            _core.search(
                session_id,
                q=q,
                scope=scope,
                limit=limit,
                cursor=cursor,
                mode=mode,
                min_score=min_score,
            )  # fmt: skip
        )


class _LoopPools:
    """One ``httpx.AsyncClient`` per running event loop.

    An ``httpx.AsyncClient`` belongs to the loop it first ran on: its pooled connections fail
    on any other loop ("Event loop is closed", "bound to a different event loop"). Each loop
    gets its own, made lazily. It is closed with its loop: a started async generator of the
    loop's holds it, and a loop that shuts down (``asyncio.run`` does, as does every runner
    that calls ``loop.shutdown_asyncgens()``) closes its async generators, which closes the
    client inside the loop while it still runs. Clients of loops that closed without that
    step are dropped when the next loop arrives. A loop kept open after shutting its async
    generators down once (``Runner.run_sync`` keeps its thread's loop) keeps its client until
    ``aclose()``, awaited on that loop, closes it.
    """

    def __init__(self, timeout: float) -> None:
        self._timeout = timeout
        self._lock = threading.Lock()
        self._by_loop: dict[asyncio.AbstractEventLoop, _LoopPool] = {}
        self._closed = False

    async def current(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._closed:
                raise RuntimeError("the client is closed")
            pool = self._by_loop.get(loop)
            if pool is not None:
                return pool.http
            for stale in [other for other in self._by_loop if other.is_closed()]:
                del self._by_loop[stale]
            pool = _LoopPool(httpx.AsyncClient(timeout=self._timeout))
            self._by_loop[loop] = pool
        if not getattr(loop, "_asyncgens_shutdown_called", False):
            # (else the loop already shut its async generators down once and is kept open,
            # as ``Runner.run_sync`` keeps its loop: the pool lives until ``aclose()``)
            pool.keeper = self._keep(loop, pool)
            await pool.keeper.__anext__()  # registers it with the loop; returns at once
        return pool.http

    async def _keep(
        self, loop: asyncio.AbstractEventLoop, pool: _LoopPool
    ) -> AsyncGenerator[None, None]:
        try:
            yield
        finally:
            with self._lock:
                if self._by_loop.get(loop) is pool:
                    del self._by_loop[loop]
            await pool.http.aclose()

    async def aclose(self) -> None:
        with self._lock:
            self._closed = True
            pools, self._by_loop = self._by_loop, {}
        here = asyncio.get_running_loop()
        for loop, pool in pools.items():
            if loop is here:
                await pool.close()
            elif loop.is_running():
                try:  # that loop runs in another thread: close its pool there
                    asyncio.run_coroutine_threadsafe(pool.close(), loop)
                except RuntimeError:
                    pass  # it closed meanwhile
            # (a pool of a loop that is not running is dropped: nothing can run its close)


@dataclass
class _LoopPool:
    http: httpx.AsyncClient
    keeper: AsyncGenerator[None, None] | None = None

    async def close(self) -> None:
        if self.keeper is not None:
            await self.keeper.aclose()  # its ``finally`` closes ``http``
        else:
            await self.http.aclose()


def _merge(headers: Mapping[str, str], kwargs: dict[str, Any]) -> dict[str, Any]:
    kwargs["headers"] = {**headers, **kwargs.get("headers", {})}
    return kwargs


__all__ = ["AsyncSessionMemoryClient", "SessionMemoryClient"]
