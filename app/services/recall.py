"""Recall (DESIGN §10): the items that best match the query and are not in the prompt,
brought back as text in one message of the projected prompt.

``recall_context`` runs after the projection of the reserved budget (``Budget.reserved``):

1. the query: the request's, or the newest user message's text (whose stored vector is
   reused when the index has it);
2. the candidates (``RecallRepository.candidates``): this session's items the projection
   dropped or compaction archived, and with ``scope: prefix`` the items of up to
   ``MAX_PREFIX_SESSIONS`` other sessions the key may see whose id shares this one's prefix
   up to its last ``:``;
3. ranked as hybrid search ranks (``app.domain.recall.fuse``: full text and an exact scan of
   the candidates' vectors), a call and its output folded into one entry;
4. placed by ``app.domain.projection.recall_block.recall_into``, within the share.

A read with recall waits for one query embedding at most: on the builtin embedder's own query
thread (never behind the indexer's batches), not at all when the query is the newest user
message already indexed, or when the same query was embedded lately (``QUERY_VECTORS``).
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

from app.domain.formats import FormatName
from app.domain.projection import Budget, ProjectedContext
from app.domain.projection.budget import CHARS_PER_TOKEN
from app.domain.projection.recall_block import RecallCandidate, candidate_of, recall_into
from app.domain.recall import DEFAULT_MIN_SCORE, fuse
from app.domain.sessions import SessionState
from app.embeddings import Embedder, EmbeddingError, embed_query
from app.services.runtime import Actor, Runtime, utcnow
from app.store.recall import CandidateRow, Key, RecallRepository
from app.store.search import SearchRepository

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


def _nearest(query: np.ndarray, rows: Sequence[CandidateRow]) -> list[tuple[Key, float]]:
    """The ``RANKED`` candidates most similar to ``query``, best first (ties: the order of
    ``rows``)."""
    dims = query.shape[0]
    usable = [r for r in rows if r.vector is not None and r.dims == dims]
    if not usable:
        return []
    matrix = np.frombuffer(b"".join(r.vector for r in usable if r.vector), dtype="<f4")
    matrix = matrix.reshape(len(usable), dims)
    norms = np.linalg.norm(matrix, axis=1) * max(float(np.linalg.norm(query)), 1e-12)
    sims = (matrix @ query) / np.maximum(norms, 1e-12)
    order = np.lexsort((np.arange(len(usable)), -sims))[:RANKED]
    return [(usable[i].key, float(np.clip(sims[i], -1.0, 1.0))) for i in order]


async def recall_context(
    rt: Runtime,
    actor: Actor,
    state: SessionState,
    projected: ProjectedContext,
    *,
    budget: Budget,
    format: FormatName,
) -> ProjectedContext:
    """``projected`` (the projection of ``budget.reserved()``) with its recall block."""
    spec = budget.recall
    assert spec is not None and spec.max_tokens > 0
    embedder = rt.embedder
    model = embedder.model if embedder is not None else None
    tenant = actor.tenant_id
    notes: list[str] = []
    async with rt.store.read() as db:
        repo = RecallRepository(db)
        newest = await repo.newest_user(tenant, state.id, model=model)
        query = spec.query if spec.query is not None else (newest.text if newest else None)
        if query is None or not query.strip():
            notes.append("recall: no query (no user message, and none asked)")
            return recall_into(projected, [], budget=budget, format=format, query=None, notes=notes)
        query = query.strip()[:MAX_QUERY_CHARS]
        # The query's vector: the stored one when the query is the newest user message and the
        # index has it; else embedded meanwhile, while the candidates are read.
        stored: np.ndarray | None = None
        embedding: asyncio.Future[np.ndarray] | None = None
        if embedder is not None:
            if (
                spec.query is None
                and newest is not None
                and newest.vector is not None
                and newest.dims == embedder.dimensions
            ):
                stored = np.frombuffer(newest.vector, dtype="<f4")
            else:
                embedding = asyncio.ensure_future(_query_vector(embedder, query))
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
            )
            keys = {r.key for r in rows}
            fulltext: list[tuple[Key, float]] = []
            if rows:
                hits = await SearchRepository(db).search(
                    tenant,
                    query,
                    session_id=None if others else state.id,
                    session_prefix=prefix if others else None,
                    include_archived=True,
                    limit=RANKED,
                )
                fulltext = [
                    ((h.session_id, h.item.seq), h.score)
                    for h in hits
                    if (h.session_id, h.item.seq) in keys
                ]
        except BaseException:
            if embedding is not None:
                embedding.cancel()
            raise
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
            pending = sum(1 for r in rows if r.vector is None)
            if pending:
                notes.append(
                    f"recall-pending: {pending} items not embedded yet "
                    "(the index is behind; found by full text only)"
                )
            if qvec is not None and rows:
                semantic = _nearest(qvec, rows)
        fused = fuse(
            fulltext,
            semantic,
            query=query,
            mode="hybrid" if embedder is not None else "fulltext",
            min_score=spec.min_score if spec.min_score is not None else DEFAULT_MIN_SCORE,
        )
        # Enough of the best to fill the block even when some are skipped (pairs, too long).
        top = fused[: 4 * spec.max_items + 8]
        items = await repo.items(tenant, [f.key for f in top])
        calls: dict[str, set[str]] = {}
        for key, item in items.items():
            if item.body.type in ("function_call", "function_call_output"):
                calls.setdefault(key[0], set()).add(item.body.call_id)  # type: ignore[union-attr]
        partners: dict[tuple[str, str], list[Key]] = {}
        for session_id, call_ids in sorted(calls.items()):
            for item in await repo.partners(tenant, session_id, sorted(call_ids)):
                call_id: str = item.body.call_id  # type: ignore[union-attr]
                partners.setdefault((session_id, call_id), []).append((session_id, item.seq))
                items.setdefault((session_id, item.seq), item)
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
