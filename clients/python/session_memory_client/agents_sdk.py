"""An OpenAI Agents SDK session whose items live in the Session Memory Service:
``Runner.run(agent, input, session=ServiceSession(client, "user-42"))``.

``ServiceSession`` implements the SDK's ``Session`` protocol (``agents.memory.Session``)
structurally, as the SDK asks third-party sessions to, with the semantics of the SDK's own
sessions (``SQLiteSession`` given the same calls returns the same items):

- ``add_items(items)``: the items, exactly as given (any JSON object: an ``EncryptedSession``
  envelope is stored as sent), appended in ``openai-responses`` format, creating the session
  on first use. Provider item ids (``msg_...``, ``fc_...``, the SDK's ``__fake_id__``) are
  data like any other field, so repeated ids are fine. Any number of items: up to
  ``batch_items`` (1,000, the service's default limit per append) and ``batch_bytes`` of JSON
  go in one append, which is atomic; more are sent as several appends in order. If one of
  them fails, the ones before it are stored and the rest are not (the error is raised; a
  retry of the same call would add the stored ones again). Each append's
  ``Idempotency-Key`` is reused when the client retries it, so a retried batch lands once.
- ``get_items(limit=None)``: the items exactly as they were added, oldest first; with a limit
  the newest ``limit`` of them (``[]`` for ``limit <= 0``). Without one,
  ``session_settings.limit`` applies, as in the SDK's sessions.
- ``pop_item()``: removes the newest item and returns it exactly as it was added; ``None``
  when there is none.
- ``clear_session()``: removes every item.

A session that does not exist yet reads as empty. What a session of the service adds:
popped and cleared items stay in its history (``client.list_history``); ``get_prompt()`` is
the budgeted next-turn prompt (``POST .../context``: the session's ``config.context`` budget or
the ``context=`` overrides, and after a compaction its summary as a leading ``system``
message); ``history="prompt"`` makes ``get_items()`` without a limit return that prompt, so
that ``Runner`` sends it to the model (reads with a limit, which the SDK uses to inspect and
rewind the session's tail, stay exact).

The client may be shared by several ``asyncio.run`` calls and threads (it keeps one
connection pool per event loop). ``add_items``, ``pop_item`` and ``clear_session`` see their
request through when the caller is cancelled meanwhile, then re-raise the cancellation.

Nothing from the SDK is imported at import time; constructing a ``ServiceSession`` needs
it (``pip install "session-memory-client[agents]"``).
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import Awaitable, Mapping
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from session_memory_client import _core
from session_memory_client.client import AsyncSessionMemoryClient
from session_memory_client.errors import ConflictError, NotFoundError

if TYPE_CHECKING:
    from agents.items import TResponseInputItem
    from agents.memory import SessionSettings

FORMAT = "openai-responses"
PAGE = 1000  # the most items one GET /items returns
# One append's share of the service's default limits (LIMITS__MAX_ITEMS_PER_APPEND, and
# LIMITS__MAX_BODY_BYTES less room for the request's own keys).
BATCH_ITEMS = 1000
BATCH_BYTES = 15 * 1024 * 1024
History = Literal["exact", "prompt"]
_T = TypeVar("_T")


class ServiceSession:
    """A ``Session`` (OpenAI Agents SDK) whose items live in the Session Memory Service.

    ``session_settings``: a ``SessionSettings`` or a dict of its fields (unknown keys raise
    ``TypeError``), as the SDK's sessions take it; its ``limit`` is the default of
    ``get_items()``. ``history``: what ``get_items()`` without a limit returns: ``"exact"``
    (default) every item as added, ``"prompt"`` the budgeted prompt of ``get_prompt()``.
    ``context``: budget overrides for ``get_prompt()`` (``max_tokens``, ``max_items``, ...; see
    ``AsyncSessionMemoryClient.get_context``); without them the session's ``config.context``
    decides. ``batch_items`` / ``batch_bytes``: the most items / bytes of JSON one append of
    ``add_items`` sends (lower them for a service with lower limits).
    """

    def __init__(
        self,
        client: AsyncSessionMemoryClient,
        session_id: str,
        *,
        session_settings: SessionSettings | dict[str, Any] | None = None,
        history: History = "exact",
        context: Mapping[str, Any] | None = None,
        batch_items: int = BATCH_ITEMS,
        batch_bytes: int = BATCH_BYTES,
    ) -> None:
        if batch_items < 1 or batch_bytes < 1:
            raise ValueError("batch_items and batch_bytes must be positive")
        if history not in ("exact", "prompt"):
            raise ValueError(f"history must be 'exact' or 'prompt', not {history!r}")
        unknown = set(context or {}) - set(_core.BUDGET_FIELDS)
        if unknown:
            raise TypeError(f"unknown budget field(s): {', '.join(sorted(unknown))}")
        self.client = client
        self.session_id = session_id
        self.session_settings = session_settings  # type: ignore[assignment]
        self.history = history
        self.context = dict(context or {})
        self.batch_items = batch_items
        self.batch_bytes = batch_bytes

    @property
    def session_settings(self) -> SessionSettings:
        return self._session_settings

    @session_settings.setter
    def session_settings(self, value: SessionSettings | dict[str, Any] | None) -> None:
        from agents.memory.session_settings import SessionSettings, coerce_session_settings

        self._session_settings = (
            SessionSettings() if value is None else coerce_session_settings(value)
        )

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The items as added, oldest first: all of them, or the newest ``limit``
        (``session_settings.limit`` when ``limit`` is None). With ``history="prompt"`` and
        no limit at all, the budgeted prompt of ``get_prompt()``."""
        from agents.memory.session_settings import resolve_session_limit

        limit = resolve_session_limit(limit, self.session_settings)
        if limit is None and self.history == "prompt":
            return await self.get_prompt()
        if limit is not None and limit <= 0:
            return []
        try:
            if limit is not None and limit <= PAGE:
                page = await self.client.list_items(self.session_id, last=limit, format=FORMAT)
                return page["items"]  # type: ignore[return-value]
            items: deque[Any] = deque(maxlen=limit)
            async for item in self.client.iter_items(
                self.session_id, page_size=PAGE, format=FORMAT
            ):
                items.append(item)
            return list(items)
        except NotFoundError:
            return []

    async def get_prompt(self, **budget: Any) -> list[TResponseInputItem]:
        """The next-turn prompt as Responses input items (``POST .../context``): the
        session's budget, overridden by ``context=`` and then by ``budget``; after a
        compaction, the summary first as a ``system`` message. ``recall={"max_tokens": N}``
        brings evicted turns that match the newest user message back as one ``system``
        message before it, within N tokens of the budget. ``[]`` for a missing session."""
        try:
            context = await self.client.get_context(
                self.session_id, FORMAT, **{**self.context, **budget}
            )
        except NotFoundError:
            return []
        return list(context.get("input") or [])  # type: ignore[arg-type]

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Append the items, exactly as given (creating the session on first use): in one
        atomic append, or in order in several when there are more than one takes (see the
        module doc: a failure leaves the earlier appends stored)."""
        if not items:
            return
        mappings = [_as_mapping(item) for item in items]
        await _settle(self._add(mappings))

    async def _add(self, items: list[Mapping[str, Any]]) -> None:
        for batch in batches(items, max_items=self.batch_items, max_bytes=self.batch_bytes):
            await self.client.append_items(
                self.session_id,
                batch,
                format=FORMAT,
                create=True,
                idempotency_key=_core.idem_key(None, True),  # even if auto keys are off
            )

    async def pop_item(self) -> TResponseInputItem | None:
        """Remove the newest item and return it as it was added; ``None`` if there is none.
        (An item written in another format that Responses input cannot carry is removed and
        ``None`` returned.)"""
        return await _settle(self._pop())

    async def _pop(self) -> TResponseInputItem | None:
        try:
            popped = await self.client.pop_item(self.session_id, format=FORMAT)
        except NotFoundError:
            return None
        except ConflictError as exc:
            if exc.code == "empty-working-memory":
                return None
            raise
        return popped.get("rendered")  # type: ignore[return-value]

    async def clear_session(self) -> None:
        """Remove every item (the service's history keeps them)."""
        await _settle(self._clear())

    async def _clear(self) -> None:
        try:
            await self.client.clear_items(self.session_id)
        except NotFoundError:
            return


def batches(
    items: list[Mapping[str, Any]], *, max_items: int, max_bytes: int
) -> list[list[Mapping[str, Any]]]:
    """``items`` cut, in order, into runs of at most ``max_items`` items and ``max_bytes`` of
    JSON (an item larger than ``max_bytes`` alone: the service says whether it takes it)."""
    out: list[list[Mapping[str, Any]]] = []
    run: list[Mapping[str, Any]] = []
    size = 0
    for item in items:
        n = len(json.dumps(item, ensure_ascii=False, separators=(",", ":")).encode()) + 1
        if run and (len(run) >= max_items or size + n > max_bytes):
            out.append(run)
            run, size = [], 0
        run.append(item)
        size += n
    if run:
        out.append(run)
    return out


def _as_mapping(item: Any) -> Mapping[str, Any]:
    if hasattr(item, "model_dump"):  # a Responses pydantic model, as the SDK dumps one
        item = item.model_dump(exclude_unset=True, mode="json")
    if not isinstance(item, Mapping):
        raise TypeError(f"a session item must be a mapping, not {type(item).__name__}")
    return item


async def _settle(write: Awaitable[_T]) -> _T:
    """The write's outcome, waited for even when the caller is cancelled meanwhile; the
    cancellation is re-raised once the write has settled, so that nothing is still in flight
    to land after the caller's next read or write (the SDK's own sessions do the same)."""
    task = asyncio.ensure_future(write)
    cancelled: asyncio.CancelledError | None = None
    while not task.done():
        try:
            await asyncio.wait({task})
        except asyncio.CancelledError as exc:
            cancelled = cancelled or exc
    if cancelled is not None:
        if not task.cancelled():
            task.exception()  # retrieved, so that it is not reported as never retrieved
        raise cancelled
    return task.result()
