"""Recall (DESIGN §10): the items that best match the query and are not in the prompt,
brought back as text in one message of the projected prompt.

``recall_context`` runs after the projection of the reserved budget (``Budget.reserved``):

1. the query: the request's, or the newest user message's text (whose vector is reused when
   the index has it), read in one statement with the session's vector stamp
   (``RecallRepository.head``);
2. this session's vectors from the process's cache (``app.services.session_vectors``, the one
   session search uses: reused while the stamp is unchanged, topped up with newer vectors,
   read again after an erasure), so a read loads no vector it has seen before;
3. the candidates (``RecallRepository.candidates``), each with its full-text score for the
   query, in one statement: this session's items the projection dropped or compaction
   archived, and with ``scope: prefix`` the items of up to ``MAX_PREFIX_SESSIONS`` other
   sessions the key may see whose id shares this one's prefix up to its last ``:`` (their
   vectors read with them);
4. ranked as hybrid search ranks (``app.domain.recall.fuse``: full text and an exact scan of
   the candidates' vectors), a call and its output folded into one entry; the best read with
   the calls and outputs paired with them in one statement;
5. placed by ``app.domain.projection.recall_block.recall_into``, within the share.

A read with recall waits for one query embedding at most: on the builtin embedder's own query
thread (never behind the indexer's batches), not at all when the query is the newest user
message already indexed, or when the same query was embedded lately (``QUERY_VECTORS``).
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from app.domain.formats import FormatName
from app.domain.projection import Budget, ProjectedContext
from app.domain.projection.budget import CHARS_PER_TOKEN, RecallSpec
from app.domain.projection.recall_block import RecallCandidate, candidate_of, recall_into
from app.domain.recall import DEFAULT_MIN_SCORE, fuse
from app.domain.sessions import SessionState
from app.embeddings import Embedder, EmbeddingError, embed_query
from app.embeddings.cache import SessionVectors
from app.services.runtime import Actor, Runtime, utcnow
from app.services.session_vectors import session_vectors, unit_rows
from app.store.recall import CandidateRow, Key, RecallHead, RecallRepository

MAX_PREFIX_SESSIONS = 50
# Each ranker contributes at most this many candidates (as session search does).
RANKED = 200
MAX_QUERY_CHARS = 1000
QUERY_VECTORS = 256  # recent query vectors kept per process (LRU)

_query_vectors: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()


def recall_prefix(session_id: str, key_prefix: str | None) -> str | None:
    """The id prefix ``scope: prefix`` recalls from: up to and with the last ``:`` (the
    key's own prefix when that is longer); ``None`` when the id has no ``:``."""
    cut = session_id.rfind(":")
    if cut < 0:
        return None
    prefix = session_id[: cut + 1]
    if key_prefix and len(key_prefix) > len(prefix):
        prefix = key_prefix
    return prefix


async def _query_vector(embedder: Embedder, text: str) -> np.ndarray:
    key = (embedder.model, text)
    hit = _query_vectors.get(key)
    if hit is not None:
        _query_vectors.move_to_end(key)
        return hit
    vector = np.asarray(await embed_query(embedder, text), dtype=np.float32)
    _query_vectors[key] = vector
    while len(_query_vectors) > QUERY_VECTORS:
        _query_vectors.popitem(last=False)
    return vector


def _nearest(
    query: np.ndarray,
    rows: Sequence[CandidateRow],
    own: SessionVectors | None,
    own_session: str,
) -> list[tuple[Key, float]]:
    """The ``RANKED`` candidates most similar to ``query``, best first (ties: the order of
    ``rows``). This session's vectors come from ``own`` (the cached matrix, unit rows), other
    sessions' from their rows."""
    dims = query.shape[0]
    q = query.astype(np.float32, copy=False) / max(float(np.linalg.norm(query)), 1e-12)
    sims = np.full(len(rows), -np.inf, dtype=np.float64)
    mine = [i for i, r in enumerate(rows) if r.key[0] == own_session]
    if mine and own is not None and len(own.seqs) and own.matrix.shape[1] == dims:
        wanted = np.fromiter((rows[i].key[1] for i in mine), dtype=np.int64, count=len(mine))
        at = np.minimum(np.searchsorted(own.seqs, wanted), len(own.seqs) - 1)
        found = own.seqs[at] == wanted  # a vector newer than the cache's read: not ranked
        dots = np.einsum("ij,j->i", own.matrix[at[found]], q)  # no BLAS threads
        sims[np.asarray(mine)[found]] = dots
    theirs = [
        i
        for i, r in enumerate(rows)
        if r.key[0] != own_session and r.vector is not None and r.dims == dims
    ]
    if theirs:
        matrix = np.frombuffer(b"".join(rows[i].vector or b"" for i in theirs), dtype="<f4")
        matrix = unit_rows(matrix.reshape(len(theirs), dims))
        sims[np.asarray(theirs)] = np.einsum("ij,j->i", matrix, q)
    usable = np.flatnonzero(sims > -np.inf)
    if not len(usable):
        return []
    order = usable[np.lexsort((usable, -sims[usable]))][:RANKED]
    return [(rows[i].key, float(np.clip(sims[i], -1.0, 1.0))) for i in order]


def _fulltext(rows: Sequence[CandidateRow]) -> list[tuple[Key, float]]:
    """The ``RANKED`` best full-text matches among ``rows``, ordered as search orders them
    (score, then session id, then newest seq first)."""
    hits = [(r.key, r.fulltext) for r in rows if r.fulltext is not None]
    hits.sort(key=lambda h: (-h[1], h[0][0], -h[0][1]))
    return hits[:RANKED]


@dataclass(slots=True)
class _Query:
    """Recall's first step: the spec it was made for, the head (newest user message and vector
    stamp), the query, this session's cached vectors and the query's vector (stored, or being
    embedded)."""

    spec: RecallSpec
    head: RecallHead
    query: str | None
    own: SessionVectors | None
    stored: np.ndarray | None
    embedding: asyncio.Future[np.ndarray] | None

    def cancel(self) -> None:
        if self.embedding is not None:
            self.embedding.cancel()


async def _prepare(rt: Runtime, actor: Actor, session_id: str, spec: RecallSpec) -> _Query:
    embedder = rt.embedder
    model = embedder.model if embedder is not None else None
    async with rt.store.read() as db:
        head = await RecallRepository(db).head(
            actor.tenant_id,
            session_id,
            model=model,
            dims=embedder.dimensions if embedder is not None else 0,
        )
        query = spec.query if spec.query is not None else head.newest_text
        if query is None or not query.strip():
            return _Query(spec, head, None, None, None, None)
        query = query.strip()[:MAX_QUERY_CHARS]
        # This session's vectors: the process's cache (read or topped up when the stamp moved).
        own: SessionVectors | None = None
        if embedder is not None and head.stamp is not None and head.stamp[0] > 0:
            own = await session_vectors(
                rt,
                db,
                actor.tenant_id,
                session_id,
                embedder.model,
                embedder.dimensions,
                stamp=head.stamp,
            )
    # The query's vector: the cached one when the query is the newest user message and the
    # index has it; else embedded meanwhile, while the prompt is projected and the candidates
    # are read.
    stored: np.ndarray | None = None
    embedding: asyncio.Future[np.ndarray] | None = None
    if embedder is not None:
        if spec.query is None and head.newest_seq is not None and own is not None:
            at = int(np.searchsorted(own.seqs, head.newest_seq))
            if at < len(own.seqs) and int(own.seqs[at]) == head.newest_seq:
                stored = own.matrix[at]
        if stored is None:
            embedding = asyncio.ensure_future(_query_vector(embedder, query))
    return _Query(spec, head, query, own, stored, embedding)


def start_recall(
    rt: Runtime, actor: Actor, session_id: str, budget: Budget
) -> asyncio.Task[_Query] | None:
    """Recall's first step (the query and its embedding) started at once, to run while the
    context service projects the prompt; ``recall_context`` takes it. None when recall is off."""
    spec = budget.recall
    if spec is None or spec.max_tokens <= 0:
        return None
    return asyncio.ensure_future(_prepare(rt, actor, session_id, spec))


def cancel_recall(started: asyncio.Task[_Query] | None) -> None:
    """Give up a ``start_recall`` (the read failed before its recall)."""
    if started is None:
        return
    if started.done() and not started.cancelled() and started.exception() is None:
        started.result().cancel()
    started.cancel()


async def recall_context(
    rt: Runtime,
    actor: Actor,
    state: SessionState,
    projected: ProjectedContext,
    *,
    budget: Budget,
    format: FormatName,
    started: asyncio.Task[_Query] | None = None,
) -> ProjectedContext:
    """``projected`` (the projection of ``budget.reserved()``) with its recall block
    (``started``: from ``start_recall`` with the same session and spec)."""
    spec = budget.recall
    assert spec is not None and spec.max_tokens > 0
    embedder = rt.embedder
    model = embedder.model if embedder is not None else None
    tenant = actor.tenant_id
    notes: list[str] = []
    prepared = await started if started is not None else None
    if prepared is None or prepared.spec != spec:
        if prepared is not None:
            prepared.cancel()
        prepared = await _prepare(rt, actor, state.id, spec)
    query, own, stored, embedding = (
        prepared.query,
        prepared.own,
        prepared.stored,
        prepared.embedding,
    )
    if query is None:
        notes.append("recall: no query (no user message, and none asked)")
        return recall_into(projected, [], budget=budget, format=format, query=None, notes=notes)
    async with rt.store.read() as db:
        repo = RecallRepository(db)
        try:
            prefix = (
                recall_prefix(state.id, actor.session_prefix) if spec.scope == "prefix" else None
            )
            others: list[str] = []
            if prefix is not None:
                others = await repo.prefix_sessions(
                    tenant, prefix, exclude=state.id, limit=MAX_PREFIX_SESSIONS, live_at=utcnow()
                )
            elif spec.scope == "prefix":
                notes.append(f"recall: session id {state.id!r} has no ':'; recalled from it alone")
            rows = await repo.candidates(
                tenant,
                state.id,
                dropped=[(first, last) for first, last in projected.report.dropped_ranges],
                others=others,
                model=model,
                query=query,
            )
        except BaseException:
            if embedding is not None:
                embedding.cancel()
            raise
        keys = {r.key for r in rows}
        fulltext = _fulltext(rows)
        semantic: list[tuple[Key, float]] = []
        if embedder is None:
            notes.append(
                "recall-off: semantic search is off (EMBEDDINGS__PROVIDER=none); "
                "recalled by full text only"
            )
        else:
            qvec = stored
            if embedding is not None:
                try:
                    qvec = await embedding
                except EmbeddingError as exc:  # a read never fails for recall's sake
                    notes.append(
                        f"recall: the query was not embedded ({exc.cause}); full text only"
                    )
            cached = set(own.seqs.tolist()) if own is not None else set()
            pending = sum(
                1
                for r in rows
                if (r.key[1] not in cached if r.embedded is None else not r.embedded)
            )
            if pending:
                notes.append(
                    f"recall-pending: {pending} items not embedded yet "
                    "(the index is behind; found by full text only)"
                )
            if qvec is not None and rows:
                semantic = _nearest(qvec, rows, own, state.id)
        fused = fuse(
            fulltext,
            semantic,
            query=query,
            mode="hybrid" if embedder is not None else "fulltext",
            min_score=spec.min_score if spec.min_score is not None else DEFAULT_MIN_SCORE,
        )
        # Enough of the best to fill the block even when some are skipped (pairs, too long).
        top = fused[: 4 * spec.max_items + 8]
        # The items and, in the same statement, the calls and outputs paired with them.
        items = await repo.items(tenant, [f.key for f in top])
    partners: dict[tuple[str, str], list[Key]] = {}
    for key in sorted(items):
        body = items[key].body
        if body.type in ("function_call", "function_call_output"):
            partners.setdefault((key[0], body.call_id), []).append(key)  # type: ignore[union-attr]
    max_chars = CHARS_PER_TOKEN * spec.max_tokens
    used: set[Key] = set()
    candidates: list[RecallCandidate] = []
    for hit in top:
        if hit.key in used or hit.key not in items:
            continue
        session_id = hit.key[0]
        item = items[hit.key]
        group = [hit.key]
        if item.body.type in ("function_call", "function_call_output"):
            members = partners.get((session_id, item.body.call_id), [])  # type: ignore[union-attr]
            call = [k for k in members if items[k].body.type == "function_call"][:1]
            output = [k for k in members if items[k].body.type == "function_call_output"][:1]
            group = call + output
            if len(group) != 2 or not all(k in keys for k in group):
                continue  # never a call without its output (or a half already in the prompt)
        used.update(group)
        candidate = candidate_of(
            [items[k] for k in group],
            session_id=session_id,
            score=hit.score,
            own=session_id == state.id,
            max_chars=max_chars,
        )
        if candidate is not None:
            candidates.append(candidate)
    return recall_into(
        projected, candidates, budget=budget, format=format, query=query, notes=notes
    )
