"""Working-memory use cases beyond append: pop (remove and return the newest item) and clear
(empty working memory and the summary). Both archive, never delete: the items stay in history
(``popped`` / ``cleared``) and each operation is logged as an event.

Both bump ``epoch``, so a compaction that started before refuses to commit: clear replaces
working memory wholesale, and a pop, though it takes the newest item, may (after earlier pops)
take one the in-flight compaction is summarising; a summary must never describe an item the
agent removed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from app.domain.errors import EmptyWorkingMemory
from app.domain.items import StoredItem
from app.domain.sessions import SessionState
from app.services.access import check_visible, load_current, record_write
from app.services.runtime import Actor, Encoded, IdempotencyRequest, Runtime
from app.store.items import ItemRepository
from app.store.sessions import Counters


@dataclass(frozen=True, slots=True)
class PopResult:
    item: StoredItem
    version: int


@dataclass(frozen=True, slots=True)
class ClearResult:
    cleared_items: int
    state: SessionState


async def pop_item(
    rt: Runtime,
    actor: Actor,
    session_id: str,
    *,
    if_match: int | None = None,
    idempotency: IdempotencyRequest | None = None,
    encode: Any,
) -> Encoded:
    """Archive the newest live item (``popped``) and return it; 409 if memory is empty.

    The newest item is chosen under the session's lock, so a pop racing appends removes exactly
    the item that was newest when it got the lock.
    """
    check_visible(actor, session_id)

    async def op(db: AsyncConnection, now: datetime) -> PopResult:
        state = await load_current(db, actor, session_id, if_match)
        items = ItemRepository(db)
        newest = await items.last_live(actor.tenant_id, session_id, count=1)
        if not newest:
            raise EmptyWorkingMemory(f"session {session_id!r} has no item to pop")
        item = newest[0]
        await items.archive(actor.tenant_id, session_id, reason="popped", seqs=[item.seq])
        bumped = await record_write(
            db,
            actor,
            session_id,
            now=now,
            event_type="popped",
            data={"item_id": item.id, "seq": item.seq},
            expected_version=state.version,
            counters=Counters(items=-1, tokens=-item.tokens, chars=-item.chars),
            values={"epoch": state.epoch + 1},
        )
        return PopResult(item, bumped.version)

    _, encoded = await rt.run_write(
        actor, session_id, op=op, encode=encode, idempotency=idempotency
    )
    return encoded


async def clear_items(
    rt: Runtime,
    actor: Actor,
    session_id: str,
    *,
    if_match: int | None = None,
    encode: Any,
) -> Encoded:
    """Archive every live item (``cleared``), drop the summary and the last compact result
    (past results stay listed under compactions), bump ``epoch``."""
    check_visible(actor, session_id)

    async def op(db: AsyncConnection, now: datetime) -> ClearResult:
        state = await load_current(db, actor, session_id, if_match)
        archived = await ItemRepository(db).archive(actor.tenant_id, session_id, reason="cleared")
        bumped = await record_write(
            db,
            actor,
            session_id,
            now=now,
            event_type="cleared",
            data={"items": archived, "summary_cleared": state.summary is not None},
            expected_version=state.version,
            counters=Counters(
                items=-state.item_count, tokens=-state.token_count, chars=-state.char_count
            ),
            values={"epoch": state.epoch + 1, "summary": None, "last_compaction": None},
        )
        return ClearResult(archived, bumped)

    _, encoded = await rt.run_write(actor, session_id, op=op, encode=encode)
    return encoded
