"""Snapshot use cases: create, list, export, delete; restore (by id or by a whole document) and
fork.

Restore is a replace-snapshot transaction, one ``run_write``: the current state is saved as an
automatic ``pre-restore`` snapshot (its id comes back as ``undo_snapshot_id``), every live item
is archived (``restored``), the snapshot's items are inserted with new seqs (seqs are never
reused; item ids are kept), summary, config and last compact result are replaced, counters are
recomputed and ``epoch`` is bumped so a compaction that started before refuses to commit.

Documents are validated and measured (tokens, chars) before the lock is taken; a snapshot named
by id is read first, then checked again under the lock.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from app.domain.errors import InvalidInput, LimitExceeded, SessionExists, SnapshotNotFound
from app.domain.items import StoredItem, item_chars, new_item_id, record_of
from app.domain.sessions import SessionState, check_session_id
from app.domain.snapshots import (
    SnapshotContent,
    build_document,
    new_snapshot_id,
    parse_document,
)
from app.domain.tokens import item_tokens
from app.services.access import (
    batch_chars,
    check_creatable,
    check_visible,
    fail_write,
    json_size,
    load_current,
    load_session,
    new_session_id,
    off_loop_if_large,
    record_write,
)
from app.services.runtime import Actor, Encoded, IdempotencyRequest, Runtime, event
from app.store.events import EventRepository
from app.store.items import ItemRepository
from app.store.sessions import Counters, SessionRepository
from app.store.snapshots import SnapshotRecord, SnapshotRepository

PRE_RESTORE_LABEL = "pre-restore"
MAX_LABEL_CHARS = 256
# Working memory is read in pages of this size when a snapshot freezes it.
_PAGE = 1000


@dataclass(frozen=True, slots=True)
class RestoreResult:
    state: SessionState
    undo_snapshot_id: str
    snapshot_id: str | None
    restored_items: int


@dataclass(frozen=True, slots=True)
class Prepared:
    """A snapshot's content, validated and measured, ready to become items of a session."""

    content: SnapshotContent
    tokens: list[int]
    chars: list[int]

    def stored(self, *, first_seq: int, now: datetime) -> list[StoredItem]:
        return [
            StoredItem(
                body=s.item.body,
                id=s.item.id or new_item_id(),
                seq=first_seq + i,
                tokens=self.tokens[i],
                chars=self.chars[i],
                pinned=s.item.pinned,
                metadata=s.item.metadata,
                created_at=s.created_at or now,
                format=s.item.format,
                record=s.item.record,
            )
            for i, s in enumerate(self.content.items)
        ]

    @property
    def counts(self) -> Counters:
        n = len(self.content.items)
        return Counters(items=n, tokens=sum(self.tokens), chars=sum(self.chars), new_seqs=n)


def _content_chars(content: SnapshotContent) -> int:
    return batch_chars([s.item for s in content.items])


def prepare(rt: Runtime, content: SnapshotContent, root: list[str | int] | None = None) -> Prepared:
    """Measure the items and check them against this server's limits."""
    limits = rt.settings.limits
    errors: list[dict[str, Any]] = []
    for index, s in enumerate(content.items):
        if json_size(record_of(s.item)) > limits.max_item_bytes:
            errors.append(
                {
                    "loc": ["items", index],
                    "msg": f"item larger than {limits.max_item_bytes} bytes (LIMITS__MAX_ITEM_BYTES)",
                }
            )
        if s.item.metadata and json_size(s.item.metadata) > limits.max_metadata_bytes:
            errors.append({"loc": ["items", index, "metadata"], "msg": "metadata too large"})
    if content.summary and len(content.summary) > limits.max_summary_chars:
        errors.append({"loc": ["summary"], "msg": "summary too long"})
    if json_size(content.config) > limits.max_config_bytes:
        errors.append({"loc": ["config"], "msg": "config too large"})
    if json_size(content.metadata) > limits.max_metadata_bytes:
        errors.append({"loc": ["metadata"], "msg": "metadata too large"})
    if errors:
        too_large = any("LIMITS__" in e["msg"] for e in errors)
        raise (LimitExceeded if too_large else InvalidInput)(
            f"the snapshot does not fit this server's limits: {len(errors)} problem(s)",
            errors=[{**e, "loc": [*(root or []), *e["loc"]]} for e in errors],
        )
    return Prepared(
        content,
        tokens=[item_tokens(s.item.body) for s in content.items],
        chars=[item_chars(s.item.body) for s in content.items],
    )


async def _live_items(db: AsyncConnection, actor: Actor, session_id: str) -> list[StoredItem]:
    repo = ItemRepository(db)
    out: list[StoredItem] = []
    after: int | None = None
    while True:
        page = await repo.list_live(actor.tenant_id, session_id, after_seq=after, limit=_PAGE)
        out.extend(page)
        if len(page) < _PAGE:
            return out
        after = page[-1].seq


async def _freeze(
    db: AsyncConnection,
    actor: Actor,
    state: SessionState,
    *,
    label: str | None,
    now: datetime,
) -> SnapshotRecord:
    """Store the state of ``state`` (working memory as it is now in ``db``) as a snapshot."""
    live = await _live_items(db, actor, state.id)
    record = SnapshotRecord(
        id=new_snapshot_id(),
        label=label,
        version=state.version,
        item_count=len(live),
        created_at=now,
    )
    document = build_document(
        snapshot_id=record.id,
        label=label,
        session_id=state.id,
        version=state.version,
        created_at=now,
        summary=state.summary,
        last_compaction=state.last_compaction,
        config=state.config,
        metadata=state.metadata,
        items=live,
    )
    await SnapshotRepository(db).insert(actor.tenant_id, state.id, record, document=document)
    return record


def _check_label(label: str | None) -> str | None:
    if label is not None and len(label) > MAX_LABEL_CHARS:
        raise InvalidInput(
            "label too long",
            errors=[{"loc": ["label"], "msg": f"at most {MAX_LABEL_CHARS} characters"}],
        )
    return label


async def create_snapshot(
    rt: Runtime,
    actor: Actor,
    session_id: str,
    *,
    label: str | None,
    if_match: int | None = None,
    idempotency: IdempotencyRequest | None = None,
    encode: Any,
) -> Encoded:
    """Freeze working memory, summary, last compact result, config and metadata."""
    check_visible(actor, session_id)
    _check_label(label)

    async def op(db: AsyncConnection, now: datetime) -> SnapshotRecord:
        state = await load_current(db, actor, session_id, if_match)
        record = await _freeze(db, actor, state, label=label, now=now)
        await record_write(
            db,
            actor,
            session_id,
            now=now,
            event_type="snapshot_created",
            data={"snapshot_id": record.id, "label": label, "items": record.item_count},
            expected_version=state.version,
        )
        return record

    _, encoded = await rt.run_write(
        actor, session_id, op=op, encode=encode, idempotency=idempotency
    )
    return encoded


async def list_snapshots(
    rt: Runtime, actor: Actor, session_id: str, *, before_version: int | None, limit: int
) -> tuple[list[SnapshotRecord], int | None]:
    """A page of snapshots, newest first, and the cursor of the next page (None at the end)."""
    async with rt.store.read() as db:
        await load_session(db, actor, session_id)
        rows = await SnapshotRepository(db).list(
            actor.tenant_id, session_id, before_version=before_version, limit=limit + 1
        )
    more = len(rows) > limit
    rows = rows[:limit]
    return rows, (rows[-1].version if more and rows else None)


async def export_snapshot(
    rt: Runtime, actor: Actor, session_id: str, snapshot_id: str
) -> dict[str, Any]:
    async with rt.store.read() as db:
        await load_session(db, actor, session_id)
        document = await SnapshotRepository(db).document(actor.tenant_id, session_id, snapshot_id)
    if document is None:
        raise SnapshotNotFound(f"snapshot {snapshot_id!r} not found")
    return document


async def delete_snapshot(rt: Runtime, actor: Actor, session_id: str, snapshot_id: str) -> None:
    check_visible(actor, session_id)

    async def op(db: AsyncConnection, now: datetime) -> None:
        await load_session(db, actor, session_id)
        if not await SnapshotRepository(db).delete(actor.tenant_id, session_id, snapshot_id):
            raise SnapshotNotFound(f"snapshot {snapshot_id!r} not found")
        await record_write(
            db,
            actor,
            session_id,
            now=now,
            event_type="snapshot_deleted",
            data={"snapshot_id": snapshot_id},
            expected_version=None,
        )

    await rt.run_write(actor, session_id, op=op, encode=lambda _: Encoded(204, ""))


async def _stored_content(
    rt: Runtime, actor: Actor, session_id: str, snapshot_id: str
) -> Prepared | None:
    """Read, validate and measure a stored snapshot, outside any lock; None if it is missing.

    A missing snapshot is reported by ``_require_snapshot`` inside the write, after the
    idempotency check, so a retry of an acknowledged restore replays instead of failing.
    """
    async with rt.store.read() as db:
        await load_session(db, actor, session_id)
        document = await SnapshotRepository(db).document(actor.tenant_id, session_id, snapshot_id)
    if document is None:
        return None
    content = parse_document(document)
    return await off_loop_if_large(prepare, rt, content, chars=_content_chars(content))


async def _require_snapshot(
    db: AsyncConnection,
    actor: Actor,
    session_id: str,
    snapshot_id: str,
    prepared: Prepared | None,
) -> Prepared:
    """The snapshot read before the lock, provided it still exists now."""
    found = await SnapshotRepository(db).get(actor.tenant_id, session_id, snapshot_id)
    if prepared is None or found is None:
        raise SnapshotNotFound(f"snapshot {snapshot_id!r} not found")
    return prepared


async def restore_session(
    rt: Runtime,
    actor: Actor,
    session_id: str,
    *,
    snapshot_id: str | None,
    document: dict[str, Any] | None,
    if_match: int | None = None,
    idempotency: IdempotencyRequest | None = None,
    encode: Any,
) -> Encoded:
    """Replace working memory, summary, config and last compact result with a snapshot's."""
    check_visible(actor, session_id)
    if (snapshot_id is None) == (document is None):
        raise InvalidInput(
            "name exactly one of snapshot_id and snapshot",
            errors=[{"loc": ["body"], "msg": "exactly one of snapshot_id, snapshot"}],
        )
    early: Prepared | None
    if snapshot_id is not None:
        early = await _stored_content(rt, actor, session_id, snapshot_id)
    else:
        content = parse_document(document, root=["snapshot"])
        early = await off_loop_if_large(
            prepare, rt, content, ["snapshot"], chars=_content_chars(content)
        )

    async def op(db: AsyncConnection, now: datetime) -> RestoreResult:
        state = await load_current(db, actor, session_id, if_match)
        prepared = early
        if snapshot_id is not None:
            prepared = await _require_snapshot(db, actor, session_id, snapshot_id, early)
        assert prepared is not None
        content = prepared.content
        undo = await _freeze(db, actor, state, label=PRE_RESTORE_LABEL, now=now)
        items = ItemRepository(db)
        await items.archive(actor.tenant_id, session_id, reason="restored")
        new = prepared.counts
        bumped = await SessionRepository(db).bump(
            actor.tenant_id,
            session_id,
            counters=Counters(
                items=new.items - state.item_count,
                tokens=new.tokens - state.token_count,
                chars=new.chars - state.char_count,
                new_seqs=new.new_seqs,
                events=1,
            ),
            now=now,
            expected_version=state.version,
            values={
                "epoch": state.epoch + 1,
                "summary": content.summary,
                "config": content.config,
                "metadata": content.metadata,
                "last_compaction": content.last_compaction,
            },
        )
        if bumped is None:
            await fail_write(db, actor, session_id, state.version)
            raise AssertionError("unreachable")
        await items.insert(
            actor.tenant_id,
            session_id,
            prepared.stored(first_seq=state.last_seq + 1, now=now),
        )
        await EventRepository(db).insert(
            actor.tenant_id,
            session_id,
            [
                event(
                    actor,
                    seq=bumped.event_seq,
                    type="restored",
                    version=bumped.version,
                    now=now,
                    data={
                        "snapshot_id": snapshot_id,
                        "undo_snapshot_id": undo.id,
                        "items": new.items,
                        "archived_items": state.item_count,
                        "first_seq": state.last_seq + 1,
                        "last_seq": bumped.last_seq,
                    },
                )
            ],
        )
        return RestoreResult(bumped, undo.id, snapshot_id, new.items)

    _, encoded = await rt.run_write(
        actor, session_id, op=op, encode=encode, idempotency=idempotency
    )
    return encoded


@dataclass(frozen=True, slots=True)
class ForkCommand:
    new_session_id: str | None
    snapshot_id: str | None
    metadata: dict[str, Any] | None


async def fork_session(
    rt: Runtime,
    actor: Actor,
    session_id: str,
    command: ForkCommand,
    *,
    idempotency: IdempotencyRequest | None = None,
    encode: Any,
) -> Encoded:
    """A new session from the origin's current state or one of its snapshots.

    Holds the origin's lock (its state is read and its ``forked`` event written in the same
    transaction as the new session's rows); the new id is claimed by the insert itself, so a
    concurrent creator of that id gets one winner and the other a 409.
    """
    check_visible(actor, session_id)
    if command.new_session_id is not None:
        new_id = check_session_id(command.new_session_id)
    else:
        new_id = new_session_id(actor)
    check_creatable(actor, new_id, loc=["body", "new_session_id"])
    if new_id == session_id:
        # The origin exists, so its id is taken: the same 409 as any existing session's id.
        raise SessionExists(
            "a fork needs a new session id (this is the origin's)",
            errors=[{"loc": ["new_session_id"], "msg": "same as the origin"}],
        )
    if command.metadata is not None and json_size(command.metadata) > (
        rt.settings.limits.max_metadata_bytes
    ):
        raise InvalidInput("metadata too large", errors=[{"loc": ["metadata"], "msg": "too large"}])
    from_snapshot = (
        await _stored_content(rt, actor, session_id, command.snapshot_id)
        if command.snapshot_id is not None
        else None
    )

    async def op(db: AsyncConnection, now: datetime) -> SessionState:
        origin = await load_session(db, actor, session_id)
        if command.snapshot_id is not None:
            prepared = await _require_snapshot(
                db, actor, session_id, command.snapshot_id, from_snapshot
            )
            content = prepared.content
            copied = prepared.stored(first_seq=1, now=now)
            summary, config = content.summary, content.config
            metadata, last_compaction = content.metadata, content.last_compaction
        else:
            live = await _live_items(db, actor, session_id)
            copied = [dataclasses.replace(i, seq=n) for n, i in enumerate(live, start=1)]
            summary, config = origin.summary, origin.config
            metadata, last_compaction = origin.metadata, origin.last_compaction
        sessions = SessionRepository(db)
        forked = await sessions.insert_copy(
            tenant_id=actor.tenant_id,
            session_id=new_id,
            metadata=command.metadata if command.metadata is not None else metadata,
            config=config,
            summary=summary,
            last_compaction=last_compaction,
            counts=Counters(
                items=len(copied),
                tokens=sum(i.tokens for i in copied),
                chars=sum(i.chars for i in copied),
                new_seqs=len(copied),
            ),
            now=now,
        )
        await ItemRepository(db).insert(actor.tenant_id, new_id, copied)
        data: dict[str, object] = {"snapshot_id": command.snapshot_id, "items": len(copied)}
        await record_write(
            db,
            actor,
            session_id,
            now=now,
            event_type="forked",
            data={"new_session_id": new_id, **data},
            expected_version=origin.version,
        )
        log = EventRepository(db)
        await log.insert(
            actor.tenant_id,
            new_id,
            [
                event(
                    actor,
                    seq=1,
                    type="created",
                    version=1,
                    now=now,
                    data={"forked_from": session_id, **data},
                )
            ],
        )
        return forked

    _, encoded = await rt.run_write(
        actor, session_id, op=op, encode=encode, idempotency=idempotency, creates=new_id
    )
    return encoded
