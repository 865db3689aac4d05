"""VectorRepository: the SQL of the semantic index (table ``item_vectors``, migration 0009).

A vector is ``dims`` float32 values, little-endian, as bytes (``pack_vector``), stored with
the name and size of the model that made it: ``(model, dims)`` is its identity everywhere
(what is missing, counted, cached and read), so vectors of two models, or of one model asked
for two sizes, are never compared. The table keeps one vector per item and model: a vector of
the model's new size replaces the one of its old size. Rows are written by the indexer only,
never by an append.

A vector belongs to the very item that was embedded: ``PendingItem`` carries the item's id and
search text as claimed, and ``store`` writes only where the row at ``(tenant, session, seq)``
still has both (an item erased since, or erased and another appended at the same seq after
the session was made again, gets nothing).

``claim_pending`` picks items without a vector of a model and size, oldest first. On Postgres
it takes them with ``FOR UPDATE SKIP LOCKED`` and leases them (``vector_leases``, migration
0012) in one short transaction the caller commits before embedding, so no lock on an item is
held while a model runs, and indexers of several replicas each take other items. On SQLite
the claim is a plain read (one process owns the file).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection

from app.embeddings.cache import Stamp
from app.store.tables import item_vectors as v
from app.store.tables import items as t
from app.store.tables import sessions
from app.store.tables import vector_leases as lease


def pack_vector(vector: Sequence[float]) -> bytes:
    """float32 little-endian bytes of ``vector``."""
    return struct.pack(f"<{len(vector)}f", *vector)


def unpack_vector(data: bytes, dims: int) -> list[float]:
    """The floats ``pack_vector`` wrote; ``ValueError`` when the size is not ``dims`` floats."""
    if len(data) != 4 * dims:
        raise ValueError(f"a vector of {len(data)} bytes is not {dims} float32 values")
    return list(struct.unpack(f"<{dims}f", data))


@dataclass(frozen=True, slots=True)
class PendingItem:
    """An item as claimed: its key, and what identifies the very item (its id and the text
    embedded; ``store`` checks both)."""

    tenant_id: str
    session_id: str
    seq: int
    text: str
    created_at: datetime | None = None  # when the item was appended (the indexer's lag)
    item_id: str | None = None


@dataclass(frozen=True, slots=True)
class IndexCounts:
    indexed: int
    pending: int  # among the newest ``PENDING_WINDOW`` items with a search text
    pending_exact: bool = True  # the session has no other item with a search text


# How many of a session's newest items the session resource's ``pending`` looks at.
PENDING_WINDOW = 1000


def of_model(model: str, dims: int) -> list[sa.ColumnElement[bool]]:
    """The vectors of ``model`` at ``dims`` dimensions (0: the size is not known yet, as with
    an OpenAI-compatible model before its first answer: any size)."""
    where = [v.c.model == model]
    if dims:
        where.append(v.c.dims == dims)
    return where


def _missing(model: str, dims: int) -> sa.ColumnElement[bool]:
    has = sa.select(sa.literal(1)).where(
        v.c.tenant_id == t.c.tenant_id,
        v.c.session_id == t.c.session_id,
        v.c.seq == t.c.seq,
        *of_model(model, dims),
    )
    return ~sa.exists(has)


def _has_text() -> tuple[sa.ColumnElement[bool], ...]:
    return t.c.search_text.is_not(None), t.c.search_text != ""


def _insert(db: AsyncConnection) -> Any:
    return sqlite.insert if db.dialect.name == "sqlite" else postgresql.insert


class VectorRepository:
    def __init__(self, db: AsyncConnection) -> None:
        self.db = db

    async def claim_pending(
        self,
        model: str,
        dims: int = 0,
        *,
        limit: int,
        now: datetime | None = None,
        lease_until: datetime | None = None,
    ) -> list[PendingItem]:
        """At most ``limit`` items with a search text and no vector of ``model`` at ``dims``,
        oldest first. On Postgres: not locked by another claim, nor leased by another indexer
        at ``now``; with ``lease_until``, leased until then (the caller commits before
        embedding and ``release``s what it will not store), else locked until the caller's
        transaction ends. On SQLite: a plain read."""
        now = now or datetime.now(UTC)
        leased = sa.select(sa.literal(1)).where(
            lease.c.tenant_id == t.c.tenant_id,
            lease.c.session_id == t.c.session_id,
            lease.c.seq == t.c.seq,
            lease.c.model == model,
            lease.c.claimed_until > now,
        )
        stmt = (
            sa.select(
                t.c.tenant_id, t.c.session_id, t.c.seq, t.c.search_text, t.c.created_at, t.c.item_id
            )
            .where(*_has_text(), _missing(model, dims))
            .order_by(t.c.created_at, t.c.tenant_id, t.c.session_id, t.c.seq)
            .limit(limit)
        )
        postgres = self.db.dialect.name == "postgresql"
        if postgres:
            stmt = stmt.where(~sa.exists(leased)).with_for_update(skip_locked=True, of=t)
        rows = (await self.db.execute(stmt)).all()
        claimed = [PendingItem(r[0], r[1], int(r[2]), r[3], r[4], r[5]) for r in rows]
        if not postgres or not claimed or lease_until is None:
            return claimed
        # The lease is taken only where no other indexer holds a live one: a claim whose
        # snapshot predates another's commit gets nothing for the rows that one took.
        upsert = postgresql.insert(lease).values(
            [
                {
                    "tenant_id": p.tenant_id,
                    "session_id": p.session_id,
                    "seq": p.seq,
                    "model": model,
                    "claimed_until": lease_until,
                }
                for p in claimed
            ]
        )
        upsert = upsert.on_conflict_do_update(
            index_elements=[lease.c.tenant_id, lease.c.session_id, lease.c.seq, lease.c.model],
            set_={"claimed_until": upsert.excluded.claimed_until},
            where=lease.c.claimed_until <= now,
        ).returning(lease.c.tenant_id, lease.c.session_id, lease.c.seq)
        got = {(r[0], r[1], int(r[2])) for r in (await self.db.execute(upsert)).all()}
        return [p for p in claimed if (p.tenant_id, p.session_id, p.seq) in got]

    async def release(self, model: str, items: Sequence[PendingItem]) -> None:
        """End the leases of ``items`` (Postgres; nothing to do on SQLite)."""
        if not items or self.db.dialect.name != "postgresql":
            return
        keys = [(p.tenant_id, p.session_id, p.seq) for p in items]
        await self.db.execute(
            sa.delete(lease).where(
                lease.c.model == model,
                sa.tuple_(lease.c.tenant_id, lease.c.session_id, lease.c.seq).in_(keys),
            )
        )

    async def pending_count(self, model: str, dims: int) -> int:
        """Items (all tenants) with a search text and no vector of ``model`` at ``dims``: a
        scan of every item, so the indexer counts at most now and then."""
        stmt = sa.select(sa.func.count()).where(*_has_text(), _missing(model, dims))
        return int((await self.db.execute(stmt)).scalar_one())

    async def store(
        self,
        model: str,
        vectors: Sequence[tuple[PendingItem, Sequence[float]]],
        *,
        now: datetime,
    ) -> list[tuple[PendingItem, Sequence[float]]]:
        """Insert one vector per item, only where the row at the item's key is still the item
        that was embedded (same id, same search text): an item erased since its claim, or
        replaced by another at the same seq, is skipped. Idempotent: an item that has its
        vector of this model and size already (another indexer stored it first) is skipped
        too, and a vector of the model at another size is replaced. Ends the items' leases.
        Returns the pairs written."""
        written: list[tuple[PendingItem, Sequence[float]]] = []
        insert = _insert(self.db)
        for item, vector in vectors:
            dims = len(vector)
            key = (
                v.c.tenant_id == item.tenant_id,
                v.c.session_id == item.session_id,
                v.c.seq == item.seq,
            )
            await self.db.execute(sa.delete(v).where(*key, v.c.model == model, v.c.dims != dims))
            source = sa.select(
                t.c.tenant_id,
                t.c.session_id,
                t.c.seq,
                sa.literal(model, sa.String),
                sa.literal(dims, sa.Integer),
                sa.literal(pack_vector(vector), sa.LargeBinary),
                sa.literal(now, v.c.created_at.type),
            ).where(
                t.c.tenant_id == item.tenant_id,
                t.c.session_id == item.session_id,
                t.c.seq == item.seq,
                t.c.search_text == item.text,
                *((t.c.item_id == item.item_id,) if item.item_id is not None else ()),
            )
            stmt = (
                insert(v)
                .from_select(
                    ["tenant_id", "session_id", "seq", "model", "dims", "vector", "created_at"],
                    source,
                )
                .on_conflict_do_nothing()
                .returning(v.c.seq)
            )
            if (await self.db.execute(stmt)).all():
                written.append((item, vector))
        await self.release(model, [item for item, _ in vectors])
        return written

    async def counts(self, tenant_id: str, session_id: str, model: str, dims: int) -> IndexCounts:
        """The session's index state for ``model`` at ``dims``, in one statement that reads no
        vector row and at most ``PENDING_WINDOW`` item rows: ``indexed``, its vectors, and
        ``pending``, its items with a search text and no vector among the newest
        ``PENDING_WINDOW`` of them (``pending_exact`` when those are all the session has).
        The indexer embeds the oldest items first, so a backlog shows among the newest.

        Only items with a search text get a vector, and each vector names an item (the
        foreign key), so the window's items with a vector are its vectors from the window's
        first seq on: both counts are ranges of one index
        (``ix_item_vectors_tenant_id_session_id_model_dims_seq``; ``indexed`` walks the
        session's entries in it, under a millisecond at 10,000: bench/index_state.py),
        never a lookup per item."""
        of_session = (t.c.tenant_id == tenant_id, t.c.session_id == session_id, *_has_text())
        newest = (
            sa.select(t.c.seq)
            .where(*of_session)
            .order_by(t.c.seq.desc())
            .limit(PENDING_WINDOW)
            .subquery("newest")
        )
        window = (
            sa.select(sa.func.count().label("size"), sa.func.min(newest.c.seq).label("first"))
            .select_from(newest)
            .subquery("window")
        )
        vectors = (v.c.tenant_id == tenant_id, v.c.session_id == session_id, *of_model(model, dims))
        indexed = sa.select(sa.func.count()).where(*vectors).scalar_subquery()
        in_window = (
            sa.select(sa.func.count()).where(*vectors, v.c.seq >= window.c.first).scalar_subquery()
        )
        oldest = sa.select(sa.func.min(t.c.seq)).where(*of_session).scalar_subquery()
        row = (
            await self.db.execute(
                sa.select(indexed, window.c.size, in_window, window.c.first, oldest).select_from(
                    window
                )
            )
        ).one()
        return IndexCounts(
            indexed=int(row[0]),
            pending=int(row[1]) - int(row[2]),
            pending_exact=row[3] is None or row[3] == row[4],
        )


@dataclass(frozen=True, slots=True)
class PackedVectors:
    """Vectors as read, still packed: ``keys[i]`` is ``(session_id, seq)`` of ``blobs[i]``, each
    ``dims`` float32 values (``app.embeddings.vectors.matrix_of`` stacks them without a Python
    float per value). Only rows of one model and of ``dims`` dimensions are ever read together."""

    keys: list[tuple[str, int]]
    blobs: list[bytes]
    dims: int


def _joined_items() -> sa.FromClause:
    return v.join(
        t,
        sa.and_(
            t.c.tenant_id == v.c.tenant_id,
            t.c.session_id == v.c.session_id,
            t.c.seq == v.c.seq,
        ),
    )


async def _packed(db: AsyncConnection, stmt: sa.Select[Any], dims: int) -> PackedVectors:
    rows = (await db.execute(stmt)).all()
    return PackedVectors(
        keys=[(r[0], int(r[1])) for r in rows], blobs=[bytes(r[2]) for r in rows], dims=dims
    )


async def session_packed(
    db: AsyncConnection,
    tenant_id: str,
    session_id: str,
    model: str,
    *,
    dims: int,
    include_archived: bool,
) -> PackedVectors:
    """Every vector of ``model`` with ``dims`` dimensions in the session, packed (the exact scan
    of a session-scoped search)."""
    stmt = (
        sa.select(v.c.session_id, v.c.seq, v.c.vector)
        .select_from(_joined_items())
        .where(
            v.c.tenant_id == tenant_id,
            v.c.session_id == session_id,
            v.c.model == model,
            v.c.dims == dims,
        )
        .order_by(v.c.seq)  # ties in the scan go to the newest seq, as ``nearest`` has it
    )
    if not include_archived:
        stmt = stmt.where(sa.not_(t.c.archived))
    return await _packed(db, stmt, dims)


async def tenant_packed(
    db: AsyncConnection,
    tenant_id: str,
    model: str,
    *,
    dims: int,
    session_prefix: str | None,
    include_archived: bool,
    live_at: datetime,
    candidates: int,
) -> PackedVectors:
    """At most ``candidates`` vectors of ``model`` across the tenant's sessions (those starting
    with ``session_prefix``, not expired at ``live_at``): the first the database yields, in no
    meaningful order, like the full-text candidate set. With fewer vectors than that in the
    tenant, every one is read and the scan is exact."""
    where: list[sa.ColumnElement[bool]] = [
        v.c.tenant_id == tenant_id,
        v.c.model == model,
        v.c.dims == dims,
    ]
    if session_prefix:
        where.append(v.c.session_id.startswith(session_prefix, autoescape=True))
    if not include_archived:
        where.append(sa.not_(t.c.archived))
    expired = sa.select(sessions.c.id).where(
        sessions.c.tenant_id == v.c.tenant_id,
        sessions.c.id == v.c.session_id,
        sessions.c.expires_at <= live_at,
    )
    where.append(~sa.exists(expired))
    stmt = (
        sa.select(v.c.session_id, v.c.seq, v.c.vector)
        .select_from(_joined_items())
        .where(*where)
        .limit(candidates)
    )
    return await _packed(db, stmt, dims)


def stamp_columns(
    tenant_id: str, session_id: str, model: str, dims: int
) -> list[sa.ScalarSelect[Any]]:
    """The scalar subqueries of a session's vector stamp (``app.embeddings.cache.Stamp``):
    the count of its vectors of ``model`` at ``dims``, the sum of their seqs (both from the
    primary key alone) and the session's incarnation (its ``created_at``), for a statement of
    the caller's (``vector_stamp``, or recall's first one)."""
    where = (v.c.tenant_id == tenant_id, v.c.session_id == session_id, *of_model(model, dims))
    return [
        sa.select(sa.func.count()).where(*where).scalar_subquery(),
        sa.select(sa.func.coalesce(sa.func.sum(v.c.seq), 0)).where(*where).scalar_subquery(),
        sa.select(sessions.c.created_at)
        .where(sessions.c.tenant_id == tenant_id, sessions.c.id == session_id)
        .scalar_subquery(),
    ]


def stamp_of(row: Sequence[Any]) -> Stamp:
    """The stamp of the three values ``stamp_columns`` read."""
    return Stamp(int(row[0]), int(row[1]), row[2])


async def vector_stamp(
    db: AsyncConnection, tenant_id: str, session_id: str, model: str, dims: int
) -> Stamp:
    """The session's vector stamp: unchanged exactly while its set of vectors of ``model`` at
    ``dims`` is (app.embeddings.cache)."""
    row = (await db.execute(sa.select(*stamp_columns(tenant_id, session_id, model, dims)))).one()
    return stamp_of(row)


async def live_seqs(db: AsyncConnection, tenant_id: str, session_id: str) -> list[int]:
    """The seqs of the session's working-memory (not archived) items, ascending. One
    aggregated value rather than a row per seq (a session may hold tens of thousands)."""
    where = (t.c.tenant_id == tenant_id, t.c.session_id == session_id, sa.not_(t.c.archived))
    if db.dialect.name == "postgresql":
        value = (await db.execute(sa.select(sa.func.array_agg(t.c.seq)).where(*where))).scalar()
        return sorted(int(x) for x in value or ())
    text = (await db.execute(sa.select(sa.func.group_concat(t.c.seq, ",")).where(*where))).scalar()
    return sorted(int(x) for x in text.split(",")) if text else []


async def session_packed_after(
    db: AsyncConnection, tenant_id: str, session_id: str, model: str, *, dims: int, after_seq: int
) -> PackedVectors:
    """The session's vectors of ``model`` with a seq above ``after_seq`` (archived or not),
    packed: what a cached set of vectors lacks once the indexer has embedded newer items."""
    stmt = (
        sa.select(v.c.session_id, v.c.seq, v.c.vector)
        .where(
            v.c.tenant_id == tenant_id,
            v.c.session_id == session_id,
            v.c.model == model,
            v.c.dims == dims,
            v.c.seq > after_seq,
        )
        .order_by(v.c.seq)
    )
    return await _packed(db, stmt, dims)
