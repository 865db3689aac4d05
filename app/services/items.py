"""Item use cases: append a batch, read working memory.

An append validates and measures the whole batch (tokens, chars) before taking the lock, then
makes exactly four statements under it: the session-row update that allocates the seq range
(and fences on ``If-Match``), one multi-row INSERT of the items, one event, commit. On Postgres,
an append to an existing session sends the first three as one statement (``store.append``).
It stays inside the transaction on purpose: a server that dies before its COMMIT leaves nothing
behind, even when its statement was still waiting on the row. It never reads or rewrites
earlier items, so its cost does not grow with the session.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from app.domain.errors import DuplicateItemId, InvalidInput, ItemNotFound, LimitExceeded
from app.domain.formats import ingest
from app.domain.items import NewItem, StoredItem, body_to_dict, item_chars, new_item_id
from app.domain.sessions import SessionState, check_session_id
from app.domain.tokens import item_tokens
from app.services.runtime import Actor, Encoded, IdempotencyRequest, Runtime, event
from app.services.sessions import check_visible, fail_write, json_size, load_session
from app.store.append import AppendRepository
from app.store.events import EventRepository
from app.store.items import ItemRepository
from app.store.sessions import Counters, SessionRepository


@dataclass(frozen=True, slots=True)
class AppendResult:
    items: list[StoredItem]
    version: int
    state: SessionState | None = None  # the session row after the append (auto-compaction)


@dataclass(frozen=True, slots=True)
class Measured:
    item: NewItem
    tokens: int
    chars: int


def ingest_batch(fmt: str, raw_items: list[Any], *, system: Any = None) -> list[NewItem]:
    """Normalise a batch written in ``fmt`` (the formats module knows every wire format)."""
    return ingest(fmt, raw_items, system=system)


def _stored(
    measured: Sequence[Measured], ids: Sequence[str], first_seq: int, now: datetime
) -> list[StoredItem]:
    """The batch as stored: consecutive seqs from ``first_seq``, all created ``now``."""
    return [
        StoredItem(
            body=m.item.body,
            id=ids[i],
            seq=first_seq + i,
            tokens=m.tokens,
            chars=m.chars,
            pinned=m.item.pinned,
            metadata=m.item.metadata,
            created_at=now,
        )
        for i, m in enumerate(measured)
    ]


def check_batch(rt: Runtime, batch: Sequence[NewItem]) -> list[Measured]:
    limits = rt.settings.limits
    if not batch:
        raise InvalidInput(
            "a batch needs at least one item", errors=[{"loc": ["items"], "msg": "empty"}]
        )
    if len(batch) > limits.max_items_per_append:
        raise LimitExceeded(
            f"a batch holds at most {limits.max_items_per_append} items, got {len(batch)}",
            errors=[{"loc": ["items"], "msg": "too many items"}],
        )
    errors: list[dict[str, Any]] = []
    seen: set[str] = set()
    for index, item in enumerate(batch):
        if item.id is not None:
            if item.id in seen:
                errors.append({"loc": ["items", index, "id"], "msg": "duplicate id in the batch"})
            seen.add(item.id)
        if json_size(body_to_dict(item.body)) > limits.max_item_bytes:
            errors.append(
                {"loc": ["items", index], "msg": f"item larger than {limits.max_item_bytes} bytes"}
            )
        if item.metadata and json_size(item.metadata) > limits.max_metadata_bytes:
            errors.append(
                {
                    "loc": ["items", index, "metadata"],
                    "msg": f"metadata larger than {limits.max_metadata_bytes} bytes",
                }
            )
    if errors and all(e["msg"] == "duplicate id in the batch" for e in errors):
        # An id taken by an earlier item of the same batch is the same conflict as one taken
        # by an item already stored (409), not malformed input: no schema can state it.
        raise DuplicateItemId(
            "an item id is repeated in the batch; nothing was stored", errors=errors
        )
    if errors:
        cls = LimitExceeded if any("larger" in e["msg"] for e in errors) else InvalidInput
        raise cls(f"{len(errors)} problem(s) in the batch; nothing was stored", errors=errors)
    return [Measured(item, item_tokens(item.body), item_chars(item.body)) for item in batch]


async def append_items(
    rt: Runtime,
    actor: Actor,
    session_id: str,
    *,
    batch: Sequence[NewItem],
    if_match: int | None = None,
    create: bool = False,
    idempotency: IdempotencyRequest | None = None,
    encode: Any,
) -> Encoded:
    check_session_id(session_id)
    check_visible(actor, session_id)
    measured = check_batch(rt, batch)
    count = len(measured)
    tokens = sum(m.tokens for m in measured)
    chars = sum(m.chars for m in measured)

    # Appending to an existing session on Postgres: one statement instead of three.
    fast = not create and not rt.store.is_sqlite

    async def one_statement(db: AsyncConnection, now: datetime) -> AppendResult:
        ids = [m.item.id or new_item_id() for m in measured]
        state = await AppendRepository(db).append(
            actor.tenant_id,
            session_id,
            batch=[(m.item, ids[i], m.tokens, m.chars) for i, m in enumerate(measured)],
            now=now,
            expected_version=if_match,
            request_id=actor.request_id,
            actor=actor.key_name,
        )
        if state is None:
            await fail_write(db, actor, session_id, if_match)
            raise AssertionError("unreachable")
        first_seq = state.last_seq - count + 1
        return AppendResult(_stored(measured, ids, first_seq, now), state.version, state)

    async def op(db: AsyncConnection, now: datetime) -> AppendResult:
        if fast:
            return await one_statement(db, now)
        sessions = SessionRepository(db)
        created = create and await sessions.insert_if_missing(
            tenant_id=actor.tenant_id, session_id=session_id, now=now
        )
        state = await sessions.bump(
            actor.tenant_id,
            session_id,
            counters=Counters(
                items=count, tokens=tokens, chars=chars, new_seqs=count, events=1 + created
            ),
            now=now,
            expected_version=if_match,
        )
        if state is None:
            await fail_write(db, actor, session_id, if_match)
            raise AssertionError("unreachable")
        first_seq = state.last_seq - count + 1
        ids = [m.item.id or new_item_id() for m in measured]
        stored = _stored(measured, ids, first_seq, now)
        await ItemRepository(db).insert(actor.tenant_id, session_id, stored)
        appended = event(
            actor,
            seq=state.event_seq,
            type="appended",
            version=state.version,
            now=now,
            data={"count": count, "first_seq": first_seq, "last_seq": state.last_seq},
        )
        log = [appended]
        if created:
            log.insert(
                0,
                event(
                    actor, seq=state.event_seq - 1, type="created", version=state.version, now=now
                ),
            )
        await EventRepository(db).insert(actor.tenant_id, session_id, log)
        return AppendResult(stored, state.version, state)

    result, encoded = await rt.run_write(
        actor, session_id, op=op, encode=encode, idempotency=idempotency
    )
    if result is not None:  # not an idempotent replay
        rt.notify("items_appended", count)
        if result.state is not None:  # committed: the next context read need not fetch them
            rt.store.remember_items(
                actor.tenant_id, session_id, result.state.created_at, result.items
            )
        rt.after_append(actor, session_id, result.state)
    return encoded


async def list_items(
    rt: Runtime,
    actor: Actor,
    session_id: str,
    *,
    after_seq: int | None,
    limit: int,
    last: int | None = None,
) -> tuple[list[StoredItem], int | None, int]:
    """A page of working memory and the cursor of the next page (None at the end)."""
    async with rt.store.read() as db:
        state = await load_session(db, actor, session_id)
        repo = ItemRepository(db)
        if last is not None:
            page = await repo.last_live(actor.tenant_id, session_id, count=last)
            return page, None, state.version
        page = await repo.list_live(
            actor.tenant_id, session_id, after_seq=after_seq, limit=limit + 1
        )
    more = len(page) > limit
    page = page[:limit]
    return page, (page[-1].seq if more and page else None), state.version


async def get_item(rt: Runtime, actor: Actor, session_id: str, item_id: str) -> StoredItem:
    async with rt.store.read() as db:
        await load_session(db, actor, session_id)
        item = await ItemRepository(db).get_live(actor.tenant_id, session_id, item_id)
    if item is None:
        raise ItemNotFound(f"item {item_id!r} is not in working memory")
    return item
