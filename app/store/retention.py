"""RetentionRepository: the SQL of expiry, pruning, complete erasure, the erasure audit and
storage accounting.

Every statement that erases touches one session and is bounded (``limit`` rows) when the sweep
runs it, so a sweep transaction stays short. The sweep takes a session's row with
``FOR UPDATE SKIP LOCKED`` on Postgres: a row a write holds is skipped until the next batch, so
the sweep never waits for a write and a write waits at most for one short batch. On SQLite a
write transaction (``BEGIN IMMEDIATE``) already excludes every other.

What belongs to a session (``SESSION_TABLES``): its row, its items (live and archived; the
search index follows them: a Postgres expression index, SQLite's FTS5 table kept by triggers),
their vectors (``item_vectors``: deleted first, and by cascade wherever an item is), events, snapshots, compactions and the idempotency records its writes stored.
"""

from __future__ import annotations

import functools
import secrets
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncConnection

from app.domain.retention import (
    ERASING,
    ErasedCounts,
    SnapshotInfo,
    TenantErased,
    subject_digest,
    tenant_digest,
)
from app.store.tables import (
    UTCDateTime,
    api_keys,
    compactions,
    erasures,
    events,
    idempotency_keys,
    item_vectors,
    items,
    metadata,
    sessions,
    snapshots,
    tenant_erasures,
)

# The columns whose bytes a table's rows are measured by (texts and JSON as stored).
_SIZED: dict[str, tuple[str, ...]] = {
    "sessions": ("summary", "metadata", "config", "last_compaction"),
    "items": ("body", "metadata", "search_text"),
    "item_vectors": ("model", "vector"),
    "events": ("data",),
    "snapshots": ("label", "document"),
    "compactions": ("result",),
    "idempotency_keys": ("response",),
}
# The tables holding a session's rows other than its own, with the column naming the session,
# and the key ordering a bounded delete (None: deleted whole, they are small).
_CHILDREN: tuple[tuple[sa.Table, str | None], ...] = (
    (item_vectors, "seq"),  # before items: their rows name items (and would cascade anyway)
    (items, "seq"),
    (events, "seq"),
    (snapshots, "id"),
    (compactions, "id"),
    (idempotency_keys, None),
)
SESSION_TABLES = ("sessions", *(t.name for t, _ in _CHILDREN))


def _size(dialect: str, table: sa.Table) -> sa.ColumnElement[int]:
    """The stored bytes of a row's texts and JSON (0 for NULLs)."""
    parts: list[sa.ColumnElement[Any]] = []
    for name in _SIZED[table.name]:
        column = table.c[name]
        text = sa.cast(column, sa.Text)
        if isinstance(column.type, sa.LargeBinary):  # bytes as they are, not as text
            measured = (
                sa.func.length(column) if dialect == "sqlite" else sa.func.octet_length(column)
            )
        elif dialect == "sqlite":
            measured = sa.func.length(sa.cast(text, sa.LargeBinary))
        else:
            measured = sa.func.octet_length(text)
        parts.append(sa.func.coalesce(measured, 0))
    total: sa.ColumnElement[int] = parts[0]
    for part in parts[1:]:
        total = total + part
    return total


def utcnow_for_sqlite() -> datetime:
    """SQLite's clock is this process's (the embedded database has no other)."""
    return datetime.now(UTC)


def tenant_lock_name(digest: str) -> str:
    """The name whose ``hashtextextended(name, 0)`` is the tenant's advisory lock (below); the
    one-statement create on append (``store.append``) takes it by the same name."""
    return "tenant-erasure:" + digest


def _advisory_key(digest: str) -> sa.ColumnElement[int]:
    """The Postgres advisory lock a tenant's creates share and its erasure takes alone."""
    return sa.func.hashtextextended(sa.literal(tenant_lock_name(digest)), 0)


def _of(table: sa.FromClause, tenant_id: Any, session_id: Any) -> sa.ColumnElement[bool]:
    return sa.and_(table.c.tenant_id == tenant_id, table.c.session_id == session_id)


@dataclass(frozen=True, slots=True)
class Pruned:
    """What one bounded delete removed: the keys (seqs or ids) and their bytes."""

    keys: list[Any]
    bytes: int

    @property
    def rows(self) -> int:
        return len(self.keys)


@dataclass(frozen=True, slots=True)
class ReviewRow:
    """What the sweep needs of a session to decide what is due."""

    tenant_id: str
    id: str
    config: dict[str, Any]
    ttl_seconds: int | None
    updated_at: datetime
    expires_at: datetime | None


@dataclass(frozen=True, slots=True)
class Usage:
    rows: int = 0
    bytes: int = 0


class RetentionRepository:
    def __init__(self, db: AsyncConnection) -> None:
        self.db = db
        self.sqlite = db.dialect.name == "sqlite"

    # -- locking -----------------------------------------------------------------------------

    def _skip_locked(self, stmt: sa.Select[Any]) -> sa.Select[Any]:
        return stmt if self.sqlite else stmt.with_for_update(skip_locked=True)

    async def lock_expired(self, *, now: datetime, limit: int) -> list[tuple[str, str]]:
        """Up to ``limit`` expired sessions, their rows locked (rows a write holds skipped),
        those whose erasure began first. Expired by the database's clock on Postgres (``now``
        is used on SQLite, whose clock is this process's)."""
        s = sessions.c
        clock: Any = now if self.sqlite else sa.func.current_timestamp()
        stmt = (
            sa.select(s.tenant_id, s.id)
            .where(s.expires_at.is_not(None), s.expires_at <= clock)
            .order_by(s.expires_at)
            .limit(limit)
        )
        return [(r[0], r[1]) for r in (await self.db.execute(self._skip_locked(stmt))).all()]

    async def mark_erasing(self, keys: Sequence[tuple[str, str]]) -> None:
        """Begin the erasure of these sessions (rows locked): ``expires_at = ERASING``, expired
        for every clock, so a write that waited on a row re-checks it and matches nothing, and
        none lands on a session that is partly erased (it is whole or gone)."""
        if keys:
            await self.db.execute(
                sa.update(sessions)
                .where(sa.tuple_(sessions.c.tenant_id, sessions.c.id).in_(list(keys)))
                .values(expires_at=ERASING)
            )

    # -- tenant tombstones ---------------------------------------------------------------------

    async def check_tenant_writable(self, tenant_id: str) -> None:
        """Before a write not ordered by an existing session row (a create): ``TenantErased``
        if the tenant's erasure has begun. On Postgres the write first takes the tenant's
        advisory lock in shared mode, which the erasure takes exclusively to write its
        tombstone: a create either committed before the tombstone (and is erased with the
        rest) or sees it."""
        digest = tenant_digest(tenant_id)
        if not self.sqlite:
            await self.db.execute(
                sa.select(sa.func.pg_advisory_xact_lock_shared(_advisory_key(digest)))
            )
        found = await self.db.execute(
            sa.select(sa.literal(1)).where(tenant_erasures.c.tenant_digest == digest)
        )
        if found.first() is not None:
            raise TenantErased("this key's tenant has been erased")

    async def begin_tenant_erasure(self, tenant_id: str, *, now: datetime) -> list[str]:
        """Write the tenant's tombstone and delete its API keys (revoke first: no write of the
        tenant lands anywhere after this commits); returns the deleted keys' ids."""
        digest = tenant_digest(tenant_id)
        if not self.sqlite:  # waits out every create of the tenant in flight (see above)
            await self.db.execute(sa.select(sa.func.pg_advisory_xact_lock(_advisory_key(digest))))
        insert = sqlite_insert if self.sqlite else postgresql_insert
        await self.db.execute(
            insert(tenant_erasures)
            .values(tenant_digest=digest, started_at=now, finished_at=None)
            .on_conflict_do_update(
                index_elements=[tenant_erasures.c.tenant_digest], set_={"finished_at": None}
            )
        )
        result = await self.db.execute(
            sa.delete(api_keys).where(api_keys.c.tenant_id == tenant_id).returning(api_keys.c.id)
        )
        return [r[0] for r in result.all()]

    async def tenant_erasure_unfinished(self, tenant_id: str) -> bool:
        """Whether an erasure of the tenant began and was cut short (a replica died)."""
        t = tenant_erasures.c
        found = await self.db.execute(
            sa.select(sa.literal(1)).where(
                t.tenant_digest == tenant_digest(tenant_id), t.finished_at.is_(None)
            )
        )
        return found.first() is not None

    async def finish_tenant_erasure(self, tenant_id: str, *, now: datetime) -> None:
        await self.db.execute(
            sa.update(tenant_erasures)
            .where(tenant_erasures.c.tenant_digest == tenant_digest(tenant_id))
            .values(finished_at=now)
        )

    async def purge_tombstones(self, *, finished_before: datetime) -> int:
        """Tombstones of erasures finished before ``finished_before`` (no key of theirs can
        be cached anywhere any more); returns how many went."""
        t = tenant_erasures.c
        result = await self.db.execute(
            sa.delete(tenant_erasures)
            .where(t.finished_at.is_not(None), t.finished_at < finished_before)
            .returning(t.tenant_digest)
        )
        return len(result.all())

    async def tenant_leftovers(self, tenant_id: str) -> dict[str, int]:
        """Rows any table still holds for the tenant (the walk an erasure ends with): every
        table with a ``tenant_id`` column but the audit trail, which holds no data."""
        out: dict[str, int] = {}
        for table in metadata.sorted_tables:
            if "tenant_id" not in table.c or table is erasures:
                continue
            count = (
                await self.db.execute(
                    sa.select(sa.func.count())
                    .select_from(table)
                    .where(table.c.tenant_id == tenant_id)
                )
            ).scalar_one()
            if count:
                out[table.name] = int(count)
        return out

    def _live(self) -> sa.ColumnElement[bool]:
        """Not expired (nor being erased), by the database's clock on Postgres."""
        clock: Any = sa.func.current_timestamp()
        if self.sqlite:
            clock = sa.bindparam("clock_now", utcnow_for_sqlite(), type_=UTCDateTime())
        return sa.or_(sessions.c.expires_at.is_(None), sessions.c.expires_at > clock)

    async def lock_session(self, tenant_id: str, session_id: str) -> ReviewRow | None:
        """The session's row, locked, or None if it is gone, expired (its erasure is the
        expiry pass's business) or a write holds it."""
        s = sessions.c
        stmt = sa.select(
            s.tenant_id, s.id, s.config, s.ttl_seconds, s.updated_at, s.expires_at
        ).where(s.tenant_id == tenant_id, s.id == session_id, self._live())
        row = (await self.db.execute(self._skip_locked(stmt))).first()
        return ReviewRow(*row) if row else None

    async def review_page(
        self, *, after: tuple[str, str] | None, limit: int, configured_only: bool
    ) -> list[ReviewRow]:
        """A page of sessions in key order (no lock): the sweep decides which are due.
        ``configured_only`` (no server default is set): only those with a retention config,
        or a TTL that came from a default since removed."""
        s = sessions.c
        stmt = sa.select(s.tenant_id, s.id, s.config, s.ttl_seconds, s.updated_at, s.expires_at)
        if after is not None:
            stmt = stmt.where(sa.tuple_(s.tenant_id, s.id) > sa.tuple_(*after))
        if configured_only:
            stmt = stmt.where(
                sa.or_(
                    s.config["retention"].as_string().is_not(None),
                    sa.and_(
                        s.ttl_seconds.is_not(None), s.config["ttl_seconds"].as_string().is_(None)
                    ),
                )
            )
        stmt = stmt.order_by(s.tenant_id, s.id).limit(limit)
        return [ReviewRow(*r) for r in (await self.db.execute(stmt)).all()]

    async def set_ttl(
        self, tenant_id: str, session_id: str, *, ttl_seconds: int | None, updated_at: datetime
    ) -> None:
        """Apply a TTL (the server default changed) from the session's last write on."""
        expires = None if ttl_seconds is None else updated_at + timedelta(seconds=ttl_seconds)
        await self.db.execute(
            sa.update(sessions)
            .where(sessions.c.tenant_id == tenant_id, sessions.c.id == session_id, self._live())
            .values(ttl_seconds=ttl_seconds, expires_at=expires)
        )

    # -- pruning the history of a live session ------------------------------------------------

    async def _delete_bounded(
        self,
        table: sa.Table,
        key: str,
        where: Callable[[sa.FromClause], sa.ColumnElement[bool]],
        *,
        limit: int | None,
    ) -> Pruned:
        """Delete the rows matching ``where`` (at most ``limit``, lowest ``key`` first) and
        return their keys and bytes. ``where`` builds the condition on the table it is given
        (the table itself, or its alias in the subquery choosing the rows)."""
        target = where(table)
        if limit is not None:
            inner = table.alias("doomed")
            chosen = sa.select(inner.c[key]).where(where(inner)).order_by(inner.c[key]).limit(limit)
            target = sa.and_(target, table.c[key].in_(chosen.scalar_subquery()))
        stmt = (
            sa.delete(table)
            .where(target)
            .returning(table.c[key], _size(self.db.dialect.name, table))
        )
        rows = (await self.db.execute(stmt)).all()
        return Pruned([r[0] for r in rows], sum(int(r[1] or 0) for r in rows))

    async def prune_archive(
        self, tenant_id: str, session_id: str, *, before: datetime, limit: int
    ) -> Pruned:
        """Archived items appended before ``before`` (never a live one)."""

        def where(t: sa.FromClause) -> sa.ColumnElement[bool]:
            return sa.and_(_of(t, tenant_id, session_id), t.c.archived, t.c.created_at < before)

        return await self._delete_bounded(items, "seq", where, limit=limit)

    async def prune_events(
        self, tenant_id: str, session_id: str, *, before: datetime, limit: int
    ) -> Pruned:
        def where(t: sa.FromClause) -> sa.ColumnElement[bool]:
            return sa.and_(_of(t, tenant_id, session_id), t.c.created_at < before)

        return await self._delete_bounded(events, "seq", where, limit=limit)

    async def snapshot_infos(self, tenant_id: str, session_id: str) -> list[SnapshotInfo]:
        t = snapshots.c
        rows = await self.db.execute(
            sa.select(t.id, t.label, t.created_at).where(_of(snapshots, tenant_id, session_id))
        )
        return [SnapshotInfo(r[0], r[1], r[2]) for r in rows.all()]

    async def delete_snapshots(self, tenant_id: str, session_id: str, ids: Sequence[str]) -> Pruned:
        if not ids:
            return Pruned([], 0)

        def where(t: sa.FromClause) -> sa.ColumnElement[bool]:
            return sa.and_(_of(t, tenant_id, session_id), t.c.id.in_(list(ids)))

        return await self._delete_bounded(snapshots, "id", where, limit=None)

    async def log_event(
        self,
        tenant_id: str,
        session_id: str,
        *,
        type: str,
        data: dict[str, Any],
        now: datetime,
    ) -> None:
        """An event that changes no working memory: ``event_seq`` moves, ``version`` does not
        (a client's ``If-Match`` and the projection caches stay valid)."""
        s = sessions.c
        row = (
            await self.db.execute(
                sa.update(sessions)
                .where(s.tenant_id == tenant_id, s.id == session_id)
                .values(event_seq=s.event_seq + 1)
                .returning(s.event_seq, s.version)
            )
        ).first()
        if row is None:
            return
        await self.db.execute(
            sa.insert(events).values(
                tenant_id=tenant_id,
                session_id=session_id,
                seq=row[0],
                type=type,
                version=row[1],
                request_id=None,
                actor=None,
                data=data,
                created_at=now,
            )
        )

    # -- complete erasure --------------------------------------------------------------------

    async def erase_session(
        self, tenant_id: str, session_id: str, *, limit: int | None = None
    ) -> tuple[ErasedCounts, bool]:
        """Delete the session's rows from every table (``SESSION_TABLES``). With ``limit``, at
        most that many child rows per call, the session row itself only once the rest is gone;
        returns what was erased and whether the session is gone entirely."""
        counts = ErasedCounts()
        budget = limit
        for table, key in _CHILDREN:
            if budget is not None and budget <= 0:
                return counts, False
            if key is None:
                pruned = await self._delete_sized(table, _of(table, tenant_id, session_id))
            else:
                pruned = await self._delete_bounded(
                    table, key, lambda t: _of(t, tenant_id, session_id), limit=budget
                )
            counts.add(table.name, pruned.rows, pruned.bytes)
            if budget is not None:
                if key is not None and pruned.rows >= budget:
                    return counts, False
                budget -= pruned.rows
        gone = await self._delete_sized(
            sessions, sa.and_(sessions.c.tenant_id == tenant_id, sessions.c.id == session_id)
        )
        counts.add("sessions", gone.rows, gone.bytes)
        return counts, True

    async def erase_sessions(
        self, keys: Sequence[tuple[str, str]], *, limit: int
    ) -> tuple[dict[tuple[str, str], ErasedCounts], bool]:
        """``erase_session`` for several sessions at once (the sweep's expired batch): one
        bounded DELETE per table for all of them, at most ``limit`` child rows in all. The
        session rows go only once every child row of the batch is gone; returns what each
        session lost and whether they are all gone."""
        counts: dict[tuple[str, str], ErasedCounts] = {k: ErasedCounts() for k in keys}
        if not keys:
            return counts, True
        budget = limit
        for table, _ in _CHILDREN:
            pk = list(table.primary_key.columns)
            inner = table.alias("doomed")
            chosen = (
                sa.select(*(inner.c[c.name] for c in pk))
                .where(sa.tuple_(inner.c.tenant_id, inner.c.session_id).in_(list(keys)))
                .limit(budget)
            )
            stmt = (
                sa.delete(table)
                .where(sa.tuple_(*pk).in_(chosen))
                .returning(
                    table.c.tenant_id, table.c.session_id, _size(self.db.dialect.name, table)
                )
            )
            rows = (await self.db.execute(stmt)).all()
            for tenant_id, session_id, size in rows:
                counts[(tenant_id, session_id)].add(table.name, 1, int(size or 0))
            budget -= len(rows)
            if budget <= 0:
                return counts, False
        gone = (
            await self.db.execute(
                sa.delete(sessions)
                .where(sa.tuple_(sessions.c.tenant_id, sessions.c.id).in_(list(keys)))
                .returning(
                    sessions.c.tenant_id, sessions.c.id, _size(self.db.dialect.name, sessions)
                )
            )
        ).all()
        for tenant_id, session_id, size in gone:
            counts[(tenant_id, session_id)].add("sessions", 1, int(size or 0))
        return counts, True

    async def record_erasures(
        self, records: Sequence[tuple[str, str, ErasedCounts]], *, reason: str, now: datetime
    ) -> None:
        """Audit records of session erasures by the sweep (no key asked), in one statement."""
        if not records:
            return
        await self.db.execute(
            sa.insert(erasures),
            [
                {
                    "id": "era_" + secrets.token_hex(12),
                    "kind": "session",
                    "reason": reason,
                    "tenant_id": tenant_id,
                    "subject_digest": subject_digest(tenant_id, session_id),
                    "key_id": None,
                    "key_name": None,
                    "row_counts": dict(sorted(counts.rows.items())),
                    "created_at": now,
                }
                for tenant_id, session_id, counts in records
            ],
        )

    async def _delete_sized(self, table: sa.Table, where: sa.ColumnElement[bool]) -> Pruned:
        rows = (
            await self.db.execute(
                sa.delete(table).where(where).returning(_size(self.db.dialect.name, table))
            )
        ).all()
        return Pruned([None] * len(rows), sum(int(r[0] or 0) for r in rows))

    async def erase_tenant_rest(self, tenant_id: str) -> ErasedCounts:
        """What a tenant holds outside its sessions: idempotency records without a session
        (left by writes whose session never existed), keys created after the erasure began."""
        counts = ErasedCounts()
        idem = await self._delete_sized(idempotency_keys, idempotency_keys.c.tenant_id == tenant_id)
        counts.add("idempotency_keys", idem.rows, idem.bytes)
        result = await self.db.execute(
            sa.delete(api_keys).where(api_keys.c.tenant_id == tenant_id).returning(api_keys.c.id)
        )
        counts.add("api_keys", len(result.all()))
        return counts

    async def tenant_session_ids(
        self, tenant_id: str, *, after: str | None, limit: int
    ) -> list[str]:
        s = sessions.c
        stmt = sa.select(s.id).where(s.tenant_id == tenant_id)
        if after is not None:
            stmt = stmt.where(s.id > after)
        rows = await self.db.execute(stmt.order_by(s.id).limit(limit))
        return [r[0] for r in rows.all()]

    async def tenant_exists(self, tenant_id: str) -> bool:
        for table in (sessions, api_keys, idempotency_keys):
            found = await self.db.execute(
                sa.select(sa.literal(1)).where(table.c.tenant_id == tenant_id).limit(1)
            )
            if found.first() is not None:
                return True
        return False

    async def record_erasure(
        self,
        *,
        kind: str,
        reason: str,
        tenant_id: str,
        subject_id: str,
        key_id: str | None,
        key_name: str | None,
        counts: ErasedCounts,
        now: datetime,
    ) -> str:
        """The audit record of one erasure: who, when, rows per table, a digest of the id."""
        record_id = "era_" + secrets.token_hex(12)
        await self.db.execute(
            sa.insert(erasures).values(
                id=record_id,
                kind=kind,
                reason=reason,
                tenant_id=tenant_id if kind == "session" else None,
                subject_digest=subject_digest(tenant_id, subject_id),
                key_id=key_id or None,
                key_name=key_name,
                row_counts=dict(sorted(counts.rows.items())),
                created_at=now,
            )
        )
        return record_id

    async def erasure_records(
        self,
        *,
        digest: str | None = None,
        tenant_id: str | None = None,
        asked_within: str | None = None,
        limit: int = 100,
    ) -> list[dict[str, Any]]:
        """Erasure records, newest first, each with ``key_prefix``: the session prefix of the
        key that asked (None: an unconfined key, the bootstrap key, the sweep, or a key no
        longer stored). ``asked_within``: only those asked by a key confined to that prefix or
        a longer one (so of sessions under it)."""
        e, key = erasures.c, api_keys.c
        # Keys are never deleted apart from their tenant, and their prefix never changes.
        joined = erasures.outerjoin(api_keys, (key.id == e.key_id) & (key.tenant_id == e.tenant_id))
        stmt = sa.select(erasures, key.session_prefix.label("key_prefix")).select_from(joined)
        if digest is not None:
            stmt = stmt.where(e.subject_digest == digest)
        if tenant_id is not None:
            stmt = stmt.where(e.tenant_id == tenant_id)
        if asked_within is not None:
            stmt = stmt.where(key.session_prefix.startswith(asked_within, autoescape=True))
        rows = await self.db.execute(stmt.order_by(e.created_at.desc()).limit(limit))
        return [{str(k): v for k, v in r._mapping.items()} for r in rows.all()]

    async def merge_search_index_step(self, *, pages: int) -> bool:
        """SQLite: merge up to ``pages`` pages of the FTS5 index (its incremental
        ``merge``), which drops the entries of deleted rows from the pages they were on;
        True while there is more to merge. An erasure's delete triggers only add delete
        markers (the text stops matching at once); this, run in small transactions in the
        background, removes the text itself. Postgres drops index entries with the rows."""
        if not self.sqlite:
            return False
        before = (await self.db.execute(sa.text("SELECT total_changes()"))).scalar_one()
        await self.db.execute(
            sa.text("INSERT INTO items_fts(items_fts, rank) VALUES ('merge', :pages)"),
            {"pages": -pages},
        )
        after = (await self.db.execute(sa.text("SELECT total_changes()"))).scalar_one()
        return int(after) - int(before) >= 2  # FTS5 reports under 2 changes when done

    # -- storage -----------------------------------------------------------------------------

    async def session_storage(self, tenant_id: str, session_id: str) -> dict[str, Usage]:
        """Rows and bytes of working memory, archive, snapshots and events (one statement)."""
        statement = _session_storage_statement(self.db.dialect.name)
        params = {"tenant_id": tenant_id, "session_id": session_id}
        rows = (await self.db.execute(statement, params)).all()
        return _usage(rows)

    async def tenant_storage(self, tenant_id: str) -> dict[str, Usage]:
        """The same, added up over the tenant's sessions, plus their count."""
        parts = [
            sa.select(
                sa.case((items.c.archived, "archive"), else_="working_memory").label("kind"),
                sa.func.count().label("rows"),
                sa.func.coalesce(sa.func.sum(_size(self.db.dialect.name, items)), 0).label("bytes"),
            )
            .where(items.c.tenant_id == tenant_id)
            .group_by(items.c.archived),
        ]
        for table in (snapshots, events, sessions):
            parts.append(
                sa.select(
                    sa.literal(table.name).label("kind"),
                    sa.func.count().label("rows"),
                    sa.func.coalesce(sa.func.sum(_size(self.db.dialect.name, table)), 0).label(
                        "bytes"
                    ),
                ).where(table.c.tenant_id == tenant_id)
            )
        rows = (await self.db.execute(sa.union_all(*parts))).all()
        return _usage(rows)


@functools.cache
def _session_storage_statement(dialect: str) -> sa.CompoundSelect:
    """Built once per backend (building it costs more than running it: GET of a session is a
    hot read), with the tenant and session as bind parameters."""
    tenant_id, session_id = sa.bindparam("tenant_id"), sa.bindparam("session_id")
    parts = [
        sa.select(
            sa.case((items.c.archived, "archive"), else_="working_memory").label("kind"),
            sa.func.count().label("rows"),
            sa.func.coalesce(sa.func.sum(_size(dialect, items)), 0).label("bytes"),
        )
        .where(_of(items, tenant_id, session_id))
        .group_by(items.c.archived),
    ]
    for table in (snapshots, events):
        parts.append(
            sa.select(
                sa.literal(table.name).label("kind"),
                sa.func.count().label("rows"),
                sa.func.coalesce(sa.func.sum(_size(dialect, table)), 0).label("bytes"),
            ).where(_of(table, tenant_id, session_id))
        )
    return sa.union_all(*parts)


def _usage(rows: Iterable[Sequence[Any]]) -> dict[str, Usage]:
    out: dict[str, Usage] = {}
    for kind, count, size in rows:
        if count:
            out[kind] = Usage(int(count), int(size or 0))
    return out
