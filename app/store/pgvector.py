"""The pgvector path of the semantic index (Postgres with the ``vector`` extension).

Migration 0011 adds ``item_vectors.embedding vector`` where the extension can be had; whether
it did is detected at start-up (``has_embedding_column``), never assumed. With it:

- the indexer writes each vector twice, as the bytes every path reads and as ``embedding``
  (``set_embeddings``), and fills ``embedding`` for rows stored before (``backfill``);
- one HNSW index per model and size (``ensure_index``: ``embedding::vector(N)``, cosine
  distance, partial on the model), built ``CONCURRENTLY`` so writes go on meanwhile;
- a tenant-wide search by meaning asks that index for the nearest vectors among the caller's
  sessions (``tenant_nearest``), with pgvector's iterative scan so the tenant and prefix
  filters do not starve the result; a session-scoped one stays an exact scan of the bytes.
  The iterative scan came with pgvector 0.8 (``ITERATIVE_SCAN_SINCE``): on an older one its
  setting does not exist (setting it is an error), so the extension's version is read once
  per engine (``extension_version``) and the scan settings are built for it
  (``scan_settings``); there the filters are applied after the index's ``ef_search``
  candidates, so a small tenant among large ones may get fewer hits than it asked for.

Without the column, nothing here runs and the bytes are scanned exactly (bounded across a
tenant). ``vector`` values are sent as text (``[x,y,...]``), which pgvector parses; no adapter
package is needed.
"""

from __future__ import annotations

import hashlib
import re
import struct
import weakref
from collections.abc import Sequence
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from app.store.tables import item_vectors as v
from app.store.tables import items as t
from app.store.tables import sessions

# How many candidates the HNSW scan keeps (pgvector's ``hnsw.ef_search``): at least the number
# of hits asked for; more is slower and closer to exact.
EF_SEARCH = 200
# The first pgvector release with ``hnsw.iterative_scan``.
ITERATIVE_SCAN_SINCE = (0, 8)

# The extension's version per engine (read once: ``extension_version``).
_versions: weakref.WeakKeyDictionary[sa.Engine, str | None] = weakref.WeakKeyDictionary()


class _Vector(sa.types.UserDefinedType[str]):
    """pgvector's ``vector(N)``, for a CAST (values travel as text)."""

    cache_ok = True

    def __init__(self, dims: int) -> None:
        self.dims = dims

    def get_col_spec(self, **kw: object) -> str:
        return f"vector({self.dims})"


def vector_literal(vector: Sequence[float]) -> str:
    """The text form pgvector parses: ``[x,y,...]``."""
    return "[" + ",".join(format(float(x), ".8g") for x in vector) + "]"


def index_name(model: str, dims: int) -> str:
    """The HNSW index of one model and size (a digest: model names are free text)."""
    digest = hashlib.sha256(f"{model}\x00{dims}".encode()).hexdigest()[:12]
    return f"ix_item_vectors_hnsw_{digest}"


async def has_embedding_column(db: AsyncConnection) -> bool:
    """True on a Postgres database migrated with the extension (migration 0011)."""
    if db.dialect.name != "postgresql":
        return False
    found = await db.execute(
        sa.text(
            "SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema() "
            "AND table_name = 'item_vectors' AND column_name = 'embedding'"
        )
    )
    return found.scalar() is not None


async def extension_version(db: AsyncConnection) -> str | None:
    """The installed pgvector's version (``pg_extension.extversion``; None: not installed),
    read once per engine: an ``ALTER EXTENSION vector UPDATE`` is seen after a restart, as the
    column itself is (``has_embedding_column``)."""
    engine = db.sync_engine
    if engine not in _versions:
        found = await db.execute(
            sa.text("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        )
        _versions[engine] = found.scalar()
    return _versions[engine]


def has_iterative_scan(version: str | None) -> bool:
    """Whether pgvector ``version`` (e.g. ``0.8.0``) has ``hnsw.iterative_scan``."""
    numbers = re.match(r"(\d+)\.(\d+)", version or "")
    if numbers is None:
        return False
    return (int(numbers[1]), int(numbers[2])) >= ITERATIVE_SCAN_SINCE


def scan_settings(version: str | None, *, limit: int) -> list[str]:
    """The ``SET LOCAL`` statements of an HNSW scan for ``limit`` hits on pgvector
    ``version``: the candidate list's size, and the iterative scan where it exists."""
    statements = [f"SET LOCAL hnsw.ef_search = {max(EF_SEARCH, int(limit))}"]
    if has_iterative_scan(version):
        statements.append("SET LOCAL hnsw.iterative_scan = relaxed_order")
    return statements


async def ensure_index(db: AsyncConnection, model: str, dims: int) -> None:
    """Build the model's HNSW index if it does not exist. ``db`` must be in autocommit (a
    ``CONCURRENTLY`` build runs outside a transaction and lets writes go on)."""
    name = index_name(model, dims)
    model_literal = model.replace("'", "''")
    await db.execute(
        sa.text(
            f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} ON item_vectors USING hnsw "
            f"((embedding::vector({int(dims)})) vector_cosine_ops) "
            f"WHERE model = '{model_literal}' AND dims = {int(dims)}"
        )
    )


async def set_embeddings(
    db: AsyncConnection, model: str, rows: Sequence[tuple[str, str, int, Sequence[float]]]
) -> None:
    """Write ``embedding`` of the given ``(tenant, session, seq, vector)`` rows of ``model``."""
    if not rows:
        return
    await db.execute(
        sa.text(
            "UPDATE item_vectors SET embedding = CAST(:embedding AS vector) "
            "WHERE tenant_id = :tenant_id AND session_id = :session_id AND seq = :seq "
            "AND model = :model AND dims = :dims"
        ),
        [
            {
                "embedding": vector_literal(vector),
                "tenant_id": tenant,
                "session_id": session,
                "seq": seq,
                "model": model,
                "dims": len(vector),
            }
            for tenant, session, seq, vector in rows
        ],
    )


async def backfill(db: AsyncConnection, model: str, *, limit: int) -> int:
    """Fill ``embedding`` of at most ``limit`` rows of ``model`` stored without one (before the
    extension came); returns how many."""
    rows = (
        await db.execute(
            sa.select(v.c.tenant_id, v.c.session_id, v.c.seq, v.c.dims, v.c.vector)
            .where(v.c.model == model, sa.literal_column("embedding").is_(None))
            .limit(limit)
            .with_for_update(skip_locked=True)
        )
    ).all()
    await set_embeddings(
        db,
        model,
        [(r[0], r[1], int(r[2]), struct.unpack(f"<{int(r[3])}f", bytes(r[4]))) for r in rows],
    )
    return len(rows)


async def tenant_nearest(
    db: AsyncConnection,
    tenant_id: str,
    model: str,
    query: Sequence[float],
    *,
    session_prefix: str | None,
    include_archived: bool,
    live_at: datetime,
    limit: int,
) -> list[tuple[tuple[str, int], float]]:
    """The ``limit`` nearest vectors of ``model`` among the tenant's sessions, by the HNSW
    index, as ``((session_id, seq), cosine similarity)`` best first. ``db`` must be in a
    transaction (the scan settings are ``SET LOCAL``)."""
    dims = len(query)
    for statement in scan_settings(await extension_version(db), limit=limit):
        await db.execute(sa.text(statement))
    embedding = sa.literal_column(f"item_vectors.embedding::vector({dims})")
    q = sa.cast(sa.bindparam("query", vector_literal(query), type_=sa.Text), _Vector(dims))
    distance = embedding.op("<=>")(q)
    # The model and size inline, not as parameters: the planner matches the partial index's
    # predicate only against values it can see (a generic plan would miss it).
    where: list[sa.ColumnElement[bool]] = [
        v.c.tenant_id == tenant_id,
        v.c.model == sa.bindparam("model", model, literal_execute=True),
        v.c.dims == sa.bindparam("dims", dims, literal_execute=True),
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
        sa.select(v.c.session_id, v.c.seq, (1 - distance).label("similarity"))
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
        .where(*where)
        .order_by(distance)
        .limit(limit)
    )
    rows = (await db.execute(stmt)).all()
    hits = [((r[0], int(r[1])), max(-1.0, min(1.0, float(r[2])))) for r in rows]
    # relaxed_order (the iterative scan): a few may come slightly out of order.
    hits.sort(key=lambda h: -h[1])
    return hits
