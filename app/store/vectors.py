"""VectorRepository: the SQL of the semantic index (table ``item_vectors``, migration 0009).

A vector is ``dims`` float32 values, little-endian, as bytes (``pack_vector``), stored with
the name of the model that made it: reads always name the model, so vectors of two models
are never compared. Rows are written by the indexer only, never by an append.

``claim_pending`` picks items without a vector of a model, oldest first: on Postgres with
``FOR UPDATE SKIP LOCKED``, so indexers of several replicas each take other items and never
wait for one another or for a write; on SQLite the caller's write transaction
(``BEGIN IMMEDIATE``) already excludes every other writer.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from app.store.tables import item_vectors as v
from app.store.tables import items as t
from app.store.tables import sessions


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
    tenant_id: str
    session_id: str
    seq: int
    text: str
    created_at: datetime | None = None  # when the item was appended (the indexer's lag)


@dataclass(frozen=True, slots=True)
class IndexCounts:
    indexed: int
    pending: int


def _missing(model: str) -> sa.ColumnElement[bool]:
    has = sa.select(sa.literal(1)).where(
        v.c.tenant_id == t.c.tenant_id,
        v.c.session_id == t.c.session_id,
        v.c.seq == t.c.seq,
        v.c.model == model,
    )
    return ~sa.exists(has)


class VectorRepository:
    def __init__(self, db: AsyncConnection) -> None:
        self.db = db

    async def claim_pending(self, model: str, *, limit: int) -> list[PendingItem]:
        """At most ``limit`` items with a search text and no vector of ``model``, oldest first
        (rows another transaction has claimed are skipped on Postgres)."""
        stmt = (
            sa.select(t.c.tenant_id, t.c.session_id, t.c.seq, t.c.search_text, t.c.created_at)
            .where(t.c.search_text.is_not(None), t.c.search_text != "", _missing(model))
            .order_by(t.c.created_at, t.c.tenant_id, t.c.session_id, t.c.seq)
            .limit(limit)
        )
        if self.db.dialect.name == "postgresql":
            stmt = stmt.with_for_update(skip_locked=True, of=t)
        rows = (await self.db.execute(stmt)).all()
        return [PendingItem(r[0], r[1], int(r[2]), r[3], r[4]) for r in rows]

    async def pending_count(self, model: str) -> int:
        """Items (all tenants) with a search text and no vector of ``model``: a scan of every
        item, so the indexer counts at most now and then."""
        stmt = sa.select(sa.func.count()).where(
            t.c.search_text.is_not(None), t.c.search_text != "", _missing(model)
        )
        return int((await self.db.execute(stmt)).scalar_one())

    async def store(
        self,
        model: str,
        vectors: Sequence[tuple[PendingItem, Sequence[float]]],
        *,
        now: datetime,
    ) -> int:
        """Insert one vector per item (an item deleted meanwhile is skipped). Returns the
        number of rows written."""
        if not vectors:
            return 0
        written = 0
        for item, vector in vectors:
            # INSERT ... SELECT: writes nothing when the item is gone (erased since its claim).
            source = sa.select(
                t.c.tenant_id,
                t.c.session_id,
                t.c.seq,
                sa.literal(model, sa.String),
                sa.literal(len(vector), sa.Integer),
                sa.literal(pack_vector(vector), sa.LargeBinary),
                sa.literal(now, v.c.created_at.type),
            ).where(
                t.c.tenant_id == item.tenant_id,
                t.c.session_id == item.session_id,
                t.c.seq == item.seq,
                _missing(model),
            )
            result = await self.db.execute(
                sa.insert(v)
                .from_select(
                    ["tenant_id", "session_id", "seq", "model", "dims", "vector", "created_at"],
                    source,
                )
                .returning(v.c.seq)
            )
            written += len(result.all())
        return written

    async def counts(self, tenant_id: str, session_id: str, model: str) -> IndexCounts:
        """Of the session's items with a search text: how many have a vector of ``model``."""
        has = sa.exists(
            sa.select(sa.literal(1)).where(
                v.c.tenant_id == t.c.tenant_id,
                v.c.session_id == t.c.session_id,
                v.c.seq == t.c.seq,
                v.c.model == model,
            )
        )
        row = (
            await self.db.execute(
                sa.select(
                    sa.func.count(),
                    sa.func.coalesce(sa.func.sum(sa.case((has, 1), else_=0)), 0),
                ).where(
                    t.c.tenant_id == tenant_id,
                    t.c.session_id == session_id,
                    t.c.search_text.is_not(None),
                    t.c.search_text != "",
                )
            )
        ).one()
        total, indexed = int(row[0]), int(row[1])
        return IndexCounts(indexed=indexed, pending=total - indexed)

    async def session_vectors(
        self, tenant_id: str, session_id: str, model: str, *, include_archived: bool
    ) -> list[tuple[int, list[float]]]:
        """Every ``(seq, vector)`` of ``model`` in the session (an exact scan reads them)."""
        stmt = (
            sa.select(v.c.seq, v.c.dims, v.c.vector)
            .select_from(
                v.join(
                    t,
                    sa.and_(
                        t.c.tenant_id == v.c.tenant_id,
                        t.c.session_id == v.c.session_id,
                        t.c.seq == v.c.seq,
                    ),
                )
            )
            .where(v.c.tenant_id == tenant_id, v.c.session_id == session_id, v.c.model == model)
        )
        if not include_archived:
            stmt = stmt.where(sa.not_(t.c.archived))
        rows = (await self.db.execute(stmt)).all()
        return [(int(r[0]), unpack_vector(bytes(r[2]), int(r[1]))) for r in rows]


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


async def vector_stamp(
    db: AsyncConnection, tenant_id: str, session_id: str, model: str
) -> tuple[int, int]:
    """The count of the session's vectors of ``model`` and the sum of their seqs: unchanged
    exactly while the set is (app.embeddings.cache); read from the primary key alone."""
    row = (
        await db.execute(
            sa.select(sa.func.count(), sa.func.coalesce(sa.func.sum(v.c.seq), 0)).where(
                v.c.tenant_id == tenant_id,
                v.c.session_id == session_id,
                v.c.model == model,
            )
        )
    ).one()
    return int(row[0]), int(row[1])


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
