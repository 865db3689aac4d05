"""Item use cases: append a batch, read working memory.

An append validates and measures the whole batch (tokens, chars) first. Appending to an
existing session on Postgres is then ONE statement in autocommit (``store.append``): it bumps
the session row (allocating the seq range, fencing on ``If-Match``), inserts the items, the
``appended`` event and, with an ``Idempotency-Key``, the idempotency record; a retry meets
that record and gets the first answer back, rebuilt from the retried request (DESIGN §6).
``?create=true`` takes it too, as an upsert that creates the session on its first append
(falling back to the general path only when the id is held by an expired session or the
tenant is being erased). Otherwise (SQLite, ``If-Match`` with ``?create=true``)
it is the general write protocol (``Runtime.run_write``).
It never reads or rewrites earlier items, so its cost does not grow with the session.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from app import jsonutil
from app.domain.errors import DuplicateItemId, InvalidInput, ItemNotFound, LimitExceeded
from app.domain.formats import ingest
from app.domain.items import (
    NewItem,
    StoredItem,
    item_chars,
    new_item_id,
    record_of,
    starts_message,
)
from app.domain.sessions import SessionState, check_session_id
from app.domain.tokens import item_tokens
from app.services.access import (
    batch_chars,
    check_creatable,
    check_visible,
    fail_write,
    json_size,
    load_session,
    off_loop_if_large,
)
from app.services.runtime import Actor, Encoded, IdempotencyRequest, Runtime, event, utcnow
from app.store.append import AppendIdempotency, AppendRecipe, AppendRepository
from app.store.events import EventRepository
from app.store.idempotency import IdempotencyRepository, IdempotencyTaken, StoredResponse
from app.store.items import ItemRepository
from app.store.sessions import Counters, SessionRepository

_MESSAGE_PAGE = 100


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
    record_json: str  # what is stored, encoded once: measured here, written by the append


def ingest_batch(
    fmt: str, raw_items: list[Any], *, system: Any = None, system_instruction: Any = None
) -> list[NewItem]:
    """Normalise a batch written in ``fmt`` (the formats module knows every wire format)."""
    return ingest(fmt, raw_items, system=system, system_instruction=system_instruction)


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
            format=m.item.format,
            record=m.item.record,
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
    records: list[bytes] = []
    for index, item in enumerate(batch):
        if item.id is not None:
            if item.id in seen:
                errors.append({"loc": ["items", index, "id"], "msg": "duplicate id in the batch"})
            seen.add(item.id)
        encoded = jsonutil.dumps_bytes(record_of(item))
        records.append(encoded)
        if len(encoded) > limits.max_item_bytes:
            errors.append(
                {
                    "loc": ["items", index],
                    "msg": f"item larger than {limits.max_item_bytes} bytes "
                    "(the server's LIMITS__MAX_ITEM_BYTES)",
                }
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
        raise cls(
            f"{len(errors)} problem(s) in the batch; nothing was stored: "
            + "; ".join(dict.fromkeys(e["msg"] for e in errors)),
            errors=errors,
        )
    return [
        Measured(item, item_tokens(item.body), item_chars(item.body), record.decode())
        for item, record in zip(batch, records, strict=True)
    ]


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
    if create:
        check_creatable(actor, session_id, loc=["path", "session_id"])
    check_visible(actor, session_id)
    measured = await off_loop_if_large(check_batch, rt, batch, chars=batch_chars(batch))
    count = len(measured)
    tokens = sum(m.tokens for m in measured)
    chars = sum(m.chars for m in measured)

    def replay(stored: StoredResponse) -> Encoded:
        """The first answer, from a record the one-statement append stored."""
        recipe = AppendRecipe.parse(stored.response)
        items = _stored(measured, recipe.ids, recipe.first_seq, recipe.created_at)
        return encode(AppendResult(items, recipe.version))  # type: ignore[no-any-return]

    if not rt.store.is_sqlite and not (create and if_match is not None):
        # ``?create=true`` (what the SDK sessions send on every call) takes this path too: the
        # session almost always exists; when it does not, an upsert creates it (ordered
        # against the tenant's erasure by the tenant's lock, store.append). Only an id held by
        # an expired session, or a tenant being erased, goes on to the general path below.
        done = await _append_one_statement(
            rt, actor, session_id, measured, if_match=if_match, idempotency=idempotency,
            encode=encode, replay=replay, missing_ok=create,
        )  # fmt: skip
        if done is not None:
            result, encoded = done
            _appended(rt, actor, session_id, result)
            return encoded

    async def op(db: AsyncConnection, now: datetime) -> AppendResult:
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
        actor, session_id, op=op, encode=encode, idempotency=idempotency, replay=replay
    )
    _appended(rt, actor, session_id, result)
    return encoded


async def _append_one_statement(
    rt: Runtime,
    actor: Actor,
    session_id: str,
    measured: list[Measured],
    *,
    if_match: int | None,
    idempotency: IdempotencyRequest | None,
    encode: Any,
    replay: Any,
    missing_ok: bool = False,
) -> tuple[AppendResult | None, Encoded] | None:
    """The append as one autocommit statement; (None, the first answer) for a retry. With
    ``missing_ok`` (``?create=true``) the statement creates a missing session, and None
    comes back when it could not (nothing written: the general path decides)."""
    count = len(measured)
    for attempt in (1, 2):
        now = utcnow()
        ids = [m.item.id or new_item_id() for m in measured]
        record = (
            None
            if idempotency is None
            else AppendIdempotency(
                idempotency.scope(actor), idempotency.request_hash, rt.idempotency_expiry(now)
            )
        )
        taken = False
        async with rt.store.statements() as conn:
            try:
                state = await AppendRepository(conn).append(
                    actor.tenant_id,
                    session_id,
                    batch=[
                        (m.item, ids[i], m.tokens, m.chars, m.record_json)
                        for i, m in enumerate(measured)
                    ],
                    now=now,
                    expected_version=if_match,
                    request_id=actor.request_id,
                    actor=actor.key_name,
                    idempotency=record,
                    create=missing_ok,
                    default_ttl=rt.settings.retention.session_ttl_seconds,
                )
            except IdempotencyTaken:
                taken = True
        if taken:  # a retry (or an expired record): off the hot path, on a full connection
            assert idempotency is not None
            async with rt.store.autocommit() as db:
                repo = IdempotencyRepository(db)
                stored = await repo.get(idempotency.scope(actor))
                if stored is not None and not (stored.expires_at and stored.expires_at <= now):
                    return None, rt.replayed(stored, idempotency, replay)
                if stored is not None:
                    await repo.delete(idempotency.scope(actor))  # expired: this is a new write
            if attempt == 2:
                raise IdempotencyTaken
            continue
        if state is None:
            if missing_ok:  # expired, being erased, or its tenant: the general path decides
                return None
            async with rt.store.autocommit() as db:
                await fail_write(db, actor, session_id, if_match)
            raise AssertionError("unreachable")
        first_seq = state.last_seq - count + 1
        result = AppendResult(_stored(measured, ids, first_seq, now), state.version, state)
        return result, encode(result)
    raise AssertionError("unreachable")


def _appended(rt: Runtime, actor: Actor, session_id: str, result: AppendResult | None) -> None:
    """After a committed append (not a replay): metrics, the item cache, auto-compaction."""
    if result is None:
        return
    rt.notify("items_appended", len(result.items))
    if result.state is not None:  # committed: the next context read need not fetch them
        rt.store.remember_items(actor.tenant_id, session_id, result.state.created_at, result.items)
    rt.after_append(actor, session_id, result.state)


async def list_items(
    rt: Runtime,
    actor: Actor,
    session_id: str,
    *,
    after_seq: int | None,
    limit: int,
    last: int | None = None,
    format: str = "canonical",
) -> tuple[list[StoredItem], int | None, int]:
    """A page of working memory and the cursor of the next page (None at the end).

    In a provider format a page never ends inside a provider message that was stored as
    several items: it ends before that message (or, if the message alone is longer than the
    page, after it)."""
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
        if more and format != "canonical" and not starts_message(page[limit]):
            page, more = await _whole_messages(repo, actor, session_id, page, limit)
        else:
            page = page[:limit]
    if not page:
        more = False
    return page, (page[-1].seq if more else None), state.version


async def _whole_messages(
    repo: ItemRepository, actor: Actor, session_id: str, page: list[StoredItem], limit: int
) -> tuple[list[StoredItem], bool]:
    """``page`` (``limit + 1`` items, the last one inside a message) cut at a message start,
    and whether more items follow."""
    cut = limit
    while cut > 0 and not starts_message(page[cut]):
        cut -= 1
    if cut > 0:
        return page[:cut], True
    # one message longer than the page: extend to its end
    out = list(page)
    while True:
        more = await repo.list_live(
            actor.tenant_id, session_id, after_seq=out[-1].seq, limit=_MESSAGE_PAGE
        )
        for item in more:
            if starts_message(item):
                return out, True
            out.append(item)
        if len(more) < _MESSAGE_PAGE:
            return out, False


async def get_item(rt: Runtime, actor: Actor, session_id: str, item_id: str) -> StoredItem:
    async with rt.store.read() as db:
        await load_session(db, actor, session_id)
        item = await ItemRepository(db).get_live(actor.tenant_id, session_id, item_id)
    if item is None:
        raise ItemNotFound(f"item {item_id!r} is not in working memory")
    return item
