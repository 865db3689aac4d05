"""History use cases: the operation log (events) and every item ever appended (archive
included), both paginated by seq."""

from __future__ import annotations

from dataclasses import dataclass

from app.domain.items import StoredItem
from app.services.access import load_session
from app.services.runtime import Actor, Runtime
from app.store.events import EventRecord, EventRepository
from app.store.items import ItemRepository


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    item: StoredItem
    archived: bool
    archived_reason: str | None


async def list_events(
    rt: Runtime, actor: Actor, session_id: str, *, after_seq: int | None, limit: int
) -> tuple[list[EventRecord], int | None]:
    """A page of events in seq order and the cursor of the next page (None at the end)."""
    async with rt.store.read() as db:
        await load_session(db, actor, session_id)
        rows = await EventRepository(db).list(
            actor.tenant_id, session_id, after_seq=after_seq, limit=limit + 1
        )
    more = len(rows) > limit
    rows = rows[:limit]
    return rows, (rows[-1].seq if more and rows else None)


async def list_history(
    rt: Runtime, actor: Actor, session_id: str, *, after_seq: int | None, limit: int
) -> tuple[list[HistoryEntry], int | None]:
    """A page of every item ever appended (archived ones too), in seq order."""
    async with rt.store.read() as db:
        await load_session(db, actor, session_id)
        rows = await ItemRepository(db).history(
            actor.tenant_id, session_id, after_seq=after_seq, limit=limit + 1
        )
    more = len(rows) > limit
    page = [HistoryEntry(item, archived, reason) for item, archived, reason in rows[:limit]]
    return page, (page[-1].item.seq if more and page else None)
