"""The semantic indexer: embeds items' search text in the background, off the write path.

An append stays one statement and never waits for a model. Each server process runs one
indexer task (started at start-up by ``start_indexer``, which registers an append hook that
only wakes it). It claims items without a vector of the current model in batches, embeds
their ``search_text`` with the runtime's embedder (a worker thread with a bounded number of
CPU threads, or an HTTP endpoint) and stores the vectors. Items not embedded yet are still
found by full text.

Claims: no lock on an item or a session is held while a model runs, so no write ever waits
for the indexer's model (DESIGN §10 "No write waits for the index"). On Postgres a short
transaction claims a batch (``FOR UPDATE SKIP LOCKED``: a write holding a row is passed over,
and a write arriving meanwhile waits for that one statement at most) and leases it
(``vector_leases``, ``LEASE_SECONDS`` plus the embedder's own time limit), then commits; the
texts are embedded with no transaction open; a second short transaction stores the vectors
and ends the leases. The lease keeps other replicas' indexers on other items, so they share
the backlog; should one outlive its lease (a model slower than its time limit), another
replica may embed the same item again, which is harmless: the store is idempotent (an item
that has its vector already is skipped). A batch that fails gives its leases back at once so
its retry need not wait them out. On SQLite the claim is a plain read and the vectors are
written in a short write transaction of their own (holding SQLite's single write lock while
the model runs would stop every other write); one process owns an SQLite file.

Either way the store writes a vector only for the very item embedded: the row at its key must
still have the claimed id and search text (``VectorRepository.store``), so a vector computed
for an item erased meanwhile, or for the item a re-created session had at the same seq, is
dropped, never stored on another item.

A failed batch (the endpoint down, the model missing) is logged and retried after a back-off;
the indexer never raises into the server.

Metrics (app/metrics.py): ``vectors_indexed`` after each stored batch, with each item's lag
from its append; ``index_pending`` 0 whenever nothing is left to claim, else counted at most
every ``PENDING_COUNT_SECONDS`` while a backlog lasts.

A model change (another ``EMBEDDINGS__MODEL``, another builtin model, or another
``EMBEDDINGS__DIMENSIONS`` for the same model) leaves every item without a vector of the new
``(model, dims)``: the indexer re-embeds them all in the background, oldest first, while
searches by meaning see only the items already embedded anew. Vectors of an old model stay in
the table, never read, until their items are erased; a vector of the same model at its old
size is replaced when its item is embedded again (one vector per item and model).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from dataclasses import dataclass, field
from datetime import timedelta

from app.domain.sessions import SessionState
from app.embeddings import Embedder, build_embedder
from app.embeddings.cache import SessionVectorCache
from app.services.runtime import Actor, Runtime, utcnow
from app.store import pgvector
from app.store.vectors import PENDING_WINDOW as PENDING_WINDOW  # the session resource's
from app.store.vectors import IndexCounts, PendingItem, VectorRepository

log = logging.getLogger(__name__)

IDLE_POLL_SECONDS = 5.0  # another replica's appends wake no hook here: look now and then
MAX_BACKOFF_SECONDS = 60.0
# While a backlog lasts, the pending gauge is counted (a scan of every item) this often.
PENDING_COUNT_SECONDS = 15.0
# A Postgres claim's lease beyond the embedder's own time limit (``lease_seconds``).
LEASE_SECONDS = 60.0


@dataclass
class Indexer:
    rt: Runtime
    embedder: Embedder
    wake: asyncio.Event
    task: asyncio.Task[None] | None = None

    def after_append(self, rt: Runtime, actor: Actor, session_id: str, state: SessionState) -> None:
        self.wake.set()  # never waits: the append has committed already


async def _embed(embedder: Embedder, pending: list[PendingItem]) -> list[list[float]]:
    return await embedder.embed([p.text for p in pending])


def _report(rt: Runtime, written: list[PendingItem]) -> int:
    """Tell the metrics (``vectors_indexed``: each stored item's lag from append to vector)."""
    if written:
        now = utcnow()
        lags = [max(0.0, (now - p.created_at).total_seconds()) for p in written if p.created_at]
        rt.notify("vectors_indexed", lags)
    return len(written)


def lease_seconds(rt: Runtime) -> float:
    """How long a Postgres claim lasts: longer than any one batch's model call may take (the
    embedder's time limit times its attempts), plus a margin."""
    e = rt.settings.embeddings
    return LEASE_SECONDS + e.timeout_seconds * (e.retries + 1)


async def index_batch(rt: Runtime, embedder: Embedder, *, limit: int) -> int:
    """Embed and store at most ``limit`` pending items; returns how many vectors were
    written (0: nothing pending, or what was embedded had gone or changed meanwhile)."""
    model = embedder.model
    now = utcnow()
    claim = rt.store.read() if rt.store.is_sqlite else rt.store.write()
    async with claim as db:
        pending = await VectorRepository(db).claim_pending(
            model,
            embedder.dimensions,
            limit=limit,
            now=now,
            lease_until=now + timedelta(seconds=lease_seconds(rt)),
        )
    if not pending:
        return 0
    try:
        vectors = await _embed(embedder, pending)
    except Exception:
        if not rt.store.is_sqlite:  # (cancelled, at shutdown: the leases expire on their own)
            with contextlib.suppress(Exception):  # else they expire on their own
                async with rt.store.write() as db:
                    await VectorRepository(db).release(model, pending)
        raise
    async with rt.store.write() as db:
        written = await VectorRepository(db).store(
            model, list(zip(pending, vectors, strict=True)), now=utcnow()
        )
        if rt.pgvector and written:
            await pgvector.set_embeddings(
                db,
                model,
                [(p.tenant_id, p.session_id, p.seq, vector) for p, vector in written],
            )
    return _report(rt, [p for p, _ in written])


async def _count_pending(rt: Runtime, embedder: Embedder) -> None:
    async with rt.store.read() as db:
        count = await VectorRepository(db).pending_count(embedder.model, embedder.dimensions)
    rt.notify("index_pending", count)


async def index_all(rt: Runtime, embedder: Embedder, *, limit: int) -> int:
    """Index until nothing is pending; returns how many vectors were written."""
    total = 0
    while written := await index_batch(rt, embedder, limit=limit):
        total += written
    return total


async def detect_pgvector(rt: Runtime) -> bool:
    """Whether the database has the pgvector column (migration 0011); sets ``rt.pgvector``."""
    if rt.store.is_sqlite:
        return False
    async with rt.store.read() as db:
        rt.pgvector = await pgvector.has_embedding_column(db)
    return rt.pgvector


@dataclass
class _PgvectorUpkeep:
    ensured: set[int] = field(default_factory=set)  # sizes whose HNSW index exists
    backfilled: bool = False  # no row of the model lacked its embedding (since this start)


async def _pgvector_upkeep(
    rt: Runtime, embedder: Embedder, upkeep: _PgvectorUpkeep, *, limit: int
) -> int:
    """The HNSW index of the current model (once its size is known) and the ``embedding`` of
    rows stored before the extension came (or by a replica without it), filled after each
    start until none is left: a search for them scans the table, so it is not repeated once
    done. Returns how many rows were filled."""
    dims = embedder.dimensions
    if dims and dims not in upkeep.ensured:
        async with rt.store.autocommit() as db:
            await pgvector.ensure_index(db, embedder.model, dims)
        upkeep.ensured.add(dims)
    if upkeep.backfilled:
        return 0
    async with rt.store.write() as db:
        filled = await pgvector.backfill(db, embedder.model, limit=limit)
    upkeep.backfilled = filled == 0
    return filled


async def _run(indexer: Indexer) -> None:
    rt, batch = indexer.rt, indexer.rt.settings.embeddings.batch_size
    backoff = 1.0
    counted_at = -math.inf
    upkeep = _PgvectorUpkeep()
    detected = False
    while True:
        indexer.wake.clear()
        try:
            if not detected:
                await detect_pgvector(rt)
                detected = True
            written = await index_batch(rt, indexer.embedder, limit=batch)
            if rt.pgvector:
                written += await _pgvector_upkeep(rt, indexer.embedder, upkeep, limit=batch)
            backoff = 1.0
            if not written:
                rt.notify("index_pending", 0)  # nothing to claim (others' claims aside)
            elif time.monotonic() - counted_at >= PENDING_COUNT_SECONDS:
                counted_at = time.monotonic()
                await _count_pending(rt, indexer.embedder)
        except Exception:  # the endpoint or the model failed: retried after a back-off
            log.exception("semantic indexing failed; retrying in %.0f s", backoff)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF_SECONDS)
            continue
        if written:
            continue
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(indexer.wake.wait(), IDLE_POLL_SECONDS)


def start_indexer(rt: Runtime) -> Indexer | None:
    """Build the embedder the settings name and start indexing (None: provider ``none``)."""
    embedder = build_embedder(rt.settings.embeddings)
    if embedder is None:
        return None
    rt.embedder = embedder
    rt.vector_cache = SessionVectorCache(max_bytes=rt.settings.embeddings.cache_mb * 1024 * 1024)
    indexer = Indexer(rt=rt, embedder=embedder, wake=asyncio.Event())
    rt.append_hooks.append(indexer.after_append)
    indexer.task = asyncio.create_task(_run(indexer), name="semantic-indexer")
    return indexer


async def stop_indexer(indexer: Indexer | None) -> None:
    if indexer is None:
        return
    with contextlib.suppress(ValueError):
        indexer.rt.append_hooks.remove(indexer.after_append)
    if indexer.task is not None:
        indexer.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await indexer.task
    await indexer.embedder.aclose()
    indexer.rt.embedder = None
    indexer.rt.vector_cache = None


async def index_counts(rt: Runtime, tenant_id: str, session_id: str) -> IndexCounts | None:
    """The session's index state for the current model (None: semantic search is off)."""
    if rt.embedder is None:
        return None
    async with rt.store.read() as db:
        return await VectorRepository(db).counts(
            tenant_id, session_id, rt.embedder.model, rt.embedder.dimensions
        )
