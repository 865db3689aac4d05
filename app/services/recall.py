"""Recall (DESIGN §10): the items that best match the query and are not in the prompt,
brought back as text in one message of the projected prompt.

``recall_context`` runs after the projection of the reserved budget (``Budget.reserved``),
at the state that projection saw (``SessionState.last_seq``, ``ProjectedContext.held``):

1. the query: the request's, or the newest user message's text as of that state (whose
   vector is reused when the index has it), read in one statement with the session's vector
   stamp (``RecallRepository.head``); started while the prompt is projected;
2. this session's vectors from the process's cache (``app.services.session_vectors``, the one
   session search uses: reused while the stamp is unchanged, topped up with newer vectors,
   read again after an erasure), so a read loads no vector it has seen before;
3. two rankings, each of at most ``RANKED`` candidates, each bounded by the request rather
   than by what the session, prefix or tenant holds: full text (the best matches, ranked and
   cut by the database's index) and meaning (an exact scan of this session's cached vectors;
   with ``scope: prefix``, the ANN index over the sibling sessions where there is one, else at
   most ``OTHERS_VECTOR_CANDIDATES`` of their vectors). The candidates are this session's
   items not in the prompt (nor archived copies of them, nor newer than its state) and, with
   ``scope: prefix``, the items of up to ``MAX_PREFIX_SESSIONS`` other sessions the key may
   see whose id shares this one's prefix up to its last ``:``;
4. fused as hybrid search fuses them (``app.domain.recall.fuse``); the best read a page at a
   time (``page_size``, at most ``MAX_PAGES``) while the share is not full, each with, for a
   call or an output, the call and outputs the projection's pairing rule
   (``app.domain.projection.analysis.answered_calls``) puts with it: one entry per pair;
5. placed by ``app.domain.projection.recall_block.recall_into``, filling the share; that and
   the entries' text run in a worker thread when the texts are large
   (``app.services.access.off_loop_if_large``, as an append measures a large batch).

Every statement after the projection runs on one connection.

A read with recall waits for one query embedding at most: on the builtin embedder's own query
thread (never behind the indexer's batches), not at all when the query is the newest user
message already indexed, or when the same query was embedded lately (``QUERY_VECTORS``).
"""

from __future__ import annotations

import asyncio
import math
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial

import numpy as np

from app.domain.formats import FormatName
from app.domain.projection import Budget, ProjectedContext
from app.domain.projection.analysis import CALL, OUTPUT, answered_calls
from app.domain.projection.budget import MAX_QUERY_CHARS, RecallSpec
from app.domain.projection.recall_block import (
    RecallCandidate,
    candidate_of,
    entry_chars,
    recall_into,
)
from app.domain.recall import DEFAULT_MIN_SCORE, fuse
from app.domain.sessions import SessionState
from app.embeddings import Embedder, EmbeddingError, embed_query
from app.embeddings.cache import SessionVectors
from app.embeddings.vectors import nearest_matrix, nearest_packed
from app.services.access import off_loop_if_large
from app.services.runtime import Actor, Runtime, utcnow
from app.services.session_vectors import session_vectors
from app.store import pgvector
from app.store.recall import (
    PAIR_WINDOW,
    Held,
    Key,
    PairingRow,
    RecalledItem,
    RecallHead,
    RecallRepository,
)
from app.store.vectors import PackedVectors

MAX_PREFIX_SESSIONS = 50
# Each ranker contributes at most this many candidates (as session search does).
RANKED = 200
# Without an ANN index, the sibling sessions' vectors compared with the query, at most: about
# 3 MB at 384 dimensions. Tenant-wide search bounds its scan the same way (a read's cost must
# not grow with the prefix); recall runs on every context read, so its bound is tighter.
OTHERS_VECTOR_CANDIDATES = 2000
# A recall line rarely costs less than this many tokens (a date, a seq, a role and a few
# words): the fused candidates are read in pages of what would fill the share at that size
# (at most ``max_items``) and a few more, a page at a time while the share is not full, at
# most ``MAX_PAGES`` pages a read.
TYPICAL_LINE_TOKENS = 20
MAX_PAGES = 3
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


def page_size(spec: RecallSpec) -> int:
    """How many of the fused candidates one page loads for ``spec``: what fills the share at
    ``TYPICAL_LINE_TOKENS`` a line (at most ``max_items``), and a few more (skipped ones:
    too long, pairs not found)."""
    return min(spec.max_items, math.ceil(spec.max_tokens / TYPICAL_LINE_TOKENS)) + 8


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


@dataclass(slots=True)
class _Query:
    """Recall's first step: the spec and state (``last_seq``) it was made for, the head
    (newest user message and vector stamp), the query, this session's cached vectors and the
    query's vector (stored, or being embedded)."""

    spec: RecallSpec
    last_seq: int
    head: RecallHead | None
    query: str | None
    own: SessionVectors | None
    stored: np.ndarray | None
    embedding: asyncio.Future[np.ndarray] | None

    def cancel(self) -> None:
        if self.embedding is not None:
            self.embedding.cancel()


async def _prepare(
    rt: Runtime, actor: Actor, session_id: str, spec: RecallSpec, last_seq: int
) -> _Query:
    embedder = rt.embedder
    model = embedder.model if embedder is not None else None
    async with rt.store.read() as db:
        head = await RecallRepository(db).head(
            actor.tenant_id,
            session_id,
            model=model,
            dims=embedder.dimensions if embedder is not None else 0,
            last_seq=last_seq,
        )
        query = spec.query if spec.query is not None else head.newest_text
        if query is None or not query.strip():
            return _Query(spec, last_seq, head, None, None, None, None)
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
    return _Query(spec, last_seq, head, query, own, stored, embedding)


def start_recall(
    rt: Runtime, actor: Actor, state: SessionState, budget: Budget
) -> asyncio.Task[_Query] | None:
    """Recall's first step (the query as of ``state`` and its embedding) started at once, to
    run while the context service projects the prompt; ``recall_context`` takes it. None when
    recall is off."""
    spec = budget.recall
    if spec is None or spec.max_tokens <= 0:
        return None
    return asyncio.ensure_future(_prepare(rt, actor, state.id, spec, state.last_seq))


def cancel_recall(started: asyncio.Task[_Query] | None) -> None:
    """Give up a ``start_recall`` (the read failed before its recall)."""
    if started is None:
        return
    if started.done() and not started.cancelled() and started.exception() is None:
        started.result().cancel()
    started.cancel()


def _own_nearest(
    query: np.ndarray, own: SessionVectors | None, held: Held
) -> list[tuple[Key, float]]:
    """The ``RANKED`` nearest of this session's cached vectors that recall may bring back."""
    if own is None or not len(own.seqs) or own.matrix.shape[1] != query.shape[0]:
        return []
    mask = own.seqs <= held.last_seq
    if held.seqs:
        mask &= ~np.isin(own.seqs, np.asarray(held.seqs, dtype=np.int64))
    found = nearest_matrix(query, own.seqs, own.matrix, limit=RANKED, mask=mask, unit=True)
    return [((held.session_id, int(seq)), sim) for seq, sim in found]


def _group(hit: Key, item: RecalledItem, rows: Sequence[PairingRow]) -> list[Key] | None:
    """The call and the outputs answering it that ``hit`` (a call or an output) belongs to,
    by the projection's rule over the rows of its ``call_id`` within ``PAIR_WINDOW`` of it
    (a live hit among live rows, as working memory pairs them; an archived one among all, as
    they were appended); None without a call or without an output."""
    near = [
        r
        for r in rows
        if r.key[0] == hit[0]
        and abs(r.key[1] - hit[1]) <= PAIR_WINDOW
        and (item.archived or not r.archived)
    ]
    at = next((i for i, r in enumerate(near) if r.key == hit), None)
    if at is None:
        return None
    kinds = [CALL if r.is_call else OUTPUT for r in near]
    call_of = answered_calls(kinds, {i: r.call_id for i, r in enumerate(near)})
    call = at if near[at].is_call else call_of.get(at)
    if call is None:
        return None
    outputs = [o for o, c in call_of.items() if c == call]
    if not outputs:
        return None
    return [near[call].key, *(near[o].key for o in outputs)]


@dataclass(frozen=True, slots=True)
class _Entry:
    """A fused hit made ready for the block: its items (a message, or a call with its
    outputs) and score."""

    key: Key
    items: list[RecalledItem]
    score: float


def _place(
    projected: ProjectedContext,
    entries: Sequence[_Entry],
    *,
    own_session: str,
    budget: Budget,
    format: FormatName,
    query: str,
    notes: Sequence[str],
) -> ProjectedContext:
    """The entries' lines and the block's placement: the CPU-heavy part (tokenizing), one
    function so that it can run in a worker thread."""
    spec = budget.recall
    assert spec is not None
    max_chars = entry_chars(spec.max_tokens)
    candidates: list[RecallCandidate] = []
    for entry in entries:
        made = candidate_of(
            [it.item for it in entry.items],
            session_id=entry.key[0],
            score=entry.score,
            own=entry.key[0] == own_session,
            max_chars=max_chars,
        )
        if made is not None:
            candidates.append(made)
    return recall_into(
        projected, candidates, budget=budget, format=format, query=query, notes=notes
    )


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
    """``projected`` (the projection of ``budget.reserved()`` at ``state``) with its recall
    block (``started``: from ``start_recall`` with the same session, spec and state)."""
    spec = budget.recall
    assert spec is not None and spec.max_tokens > 0
    embedder = rt.embedder
    tenant = actor.tenant_id
    notes: list[str] = []
    prepared = await started if started is not None else None
    if prepared is None or prepared.spec != spec or prepared.last_seq != state.last_seq:
        if prepared is not None:
            prepared.cancel()
        prepared = await _prepare(rt, actor, state.id, spec, state.last_seq)
    query, own, embedding = prepared.query, prepared.own, prepared.embedding
    if query is None:
        notes.append("recall: no query (no user message, and none asked)")
        return recall_into(projected, [], budget=budget, format=format, query=None, notes=notes)
    held = Held(
        session_id=state.id,
        last_seq=state.last_seq,
        seqs=tuple(seq for seq, _ in projected.held),
        ids=tuple(item_id for _, item_id in projected.held),
    )
    prefix = recall_prefix(state.id, actor.session_prefix) if spec.scope == "prefix" else None
    if spec.scope == "prefix" and prefix is None:
        notes.append(f"recall: session id {state.id!r} has no ':'; recalled from it alone")
    # One connection for every statement after the projection (each acquisition costs a read
    # more than a statement does under load); the query's embedding, started before the
    # projection, is awaited in between, as search does.
    try:
        async with rt.store.read() as db:
            repo = RecallRepository(db)
            others: list[str] = []
            if prefix is not None:
                others = await repo.prefix_sessions(
                    tenant, prefix, exclude=state.id, limit=MAX_PREFIX_SESSIONS, live_at=utcnow()
                )
            fulltext = await repo.fulltext(tenant, query, held=held, others=others, limit=RANKED)
            packed: PackedVectors | None = None
            if others and embedder is not None and not rt.pgvector:
                packed = await repo.others_packed(
                    tenant,
                    others,
                    model=embedder.model,
                    dims=embedder.dimensions,
                    limit=OTHERS_VECTOR_CANDIDATES,
                )
            qvec = prepared.stored
            if embedding is not None:
                try:
                    qvec = await embedding
                except EmbeddingError as exc:  # a read never fails for recall's sake
                    notes.append(
                        f"recall: the query was not embedded ({exc.cause}); full text only"
                    )
            semantic: list[tuple[Key, float]] = []
            if embedder is None:
                notes.append(
                    "recall-off: semantic search is off (EMBEDDINGS__PROVIDER=none); "
                    "recalled by full text only"
                )
            else:
                cached = set(own.seqs.tolist()) if own is not None else set()
                pending = sum(
                    1 for (sid, seq), _ in fulltext if sid == state.id and seq not in cached
                )
                if pending:
                    notes.append(
                        f"recall-pending: {pending} items not embedded yet "
                        "(the index is behind; found by full text only)"
                    )
                if qvec is not None:
                    semantic = _own_nearest(qvec, own, held)
                    if others:
                        semantic += await _others_nearest(rt, actor, qvec, others, prefix, packed)
                        semantic.sort(key=lambda hit: -hit[1])  # stable: own first on ties
                        semantic = semantic[:RANKED]
            fused = fuse(
                fulltext,
                semantic,
                query=query,
                mode="hybrid" if embedder is not None else "fulltext",
                min_score=spec.min_score if spec.min_score is not None else DEFAULT_MIN_SCORE,
            )
            # A page of the best at a time, until the share is full.
            bound = 4 * entry_chars(spec.max_tokens)  # what candidate_of reads of an item
            size = page_size(spec)
            entries: list[_Entry] = []
            used: set[Key] = set()
            for start in range(0, size * MAX_PAGES, size):
                page = [(f.key, f.score) for f in fused[start : start + size]]
                entries += await _entries(repo, tenant, page, held=held, used=used)
                chars = sum(min(it.item.chars, bound) for e in entries for it in e.items)
                placed = await off_loop_if_large(
                    partial(
                        _place,
                        projected,
                        entries,
                        own_session=state.id,
                        budget=budget,
                        format=format,
                        query=query,
                        notes=notes,
                    ),
                    chars=chars,
                )
                report = placed.report
                taken = report.projected_tokens - projected.report.projected_tokens
                if (
                    start + size >= len(fused)
                    or len(report.recalled) >= spec.max_items
                    or taken + TYPICAL_LINE_TOKENS > spec.max_tokens
                ):
                    break
    except BaseException:
        if embedding is not None:
            embedding.cancel()
        raise
    return placed


async def _others_nearest(
    rt: Runtime,
    actor: Actor,
    qvec: np.ndarray,
    others: Sequence[str],
    prefix: str | None,
    packed: PackedVectors | None,
) -> list[tuple[Key, float]]:
    """The ``RANKED`` nearest vectors among the ``others`` sessions: by the HNSW index where
    there is one (over the prefix, then kept to ``others``), else an exact scan of
    ``packed``, at most ``OTHERS_VECTOR_CANDIDATES`` of their vectors."""
    embedder = rt.embedder
    assert embedder is not None
    wanted = set(others)
    if packed is not None:
        if packed.dims != len(qvec):
            return []
        return nearest_packed(qvec, packed.keys, packed.blobs, dims=packed.dims, limit=RANKED)
    if rt.pgvector and prefix is not None:
        async with rt.store.read(snapshot=True) as db:
            found = await pgvector.tenant_nearest(
                db,
                actor.tenant_id,
                embedder.model,
                qvec.tolist(),
                session_prefix=prefix,
                include_archived=True,
                live_at=utcnow(),
                limit=RANKED,
            )
        return [(key, sim) for key, sim in found if key[0] in wanted]
    return []


async def _entries(
    repo: RecallRepository,
    tenant: str,
    top: Sequence[tuple[Key, float]],
    *,
    held: Held,
    used: set[Key],
) -> list[_Entry]:
    """The fused hits ``top`` (best first) as entries: their items, a call or an output with
    its partners (a pair recalled once, never a half of one, never one with a member the
    prompt holds). ``used``: the keys of earlier entries (grown by these)."""
    found, rows, nearby = await repo.items(tenant, [key for key, _ in top], held=held)
    paired = [
        key
        for key, it in found.items()
        if it.item.body.type in ("function_call", "function_call_output")
    ]
    groups: dict[Key, list[Key]] = {}
    archived = {r.key: r.archived for r in rows}
    in_prompt = {(held.session_id, seq) for seq in held.seqs}
    for key in paired:
        group = _group(key, found[key], rows)
        if group is not None and in_prompt.isdisjoint(group):
            groups[key] = group
    missing = sorted({k for g in groups.values() for k in g if k not in found and k not in nearby})
    partners = {**nearby, **(await repo.bodies(tenant, missing) if missing else {})}
    held_ids = set(held.ids)
    entries: list[_Entry] = []
    for key, score in top:
        if key in used or key not in found:
            continue
        if key not in groups:
            if found[key].item.body.type != "message":
                continue  # a call or output whose pair is not found or is in the prompt
            used.add(key)
            entries.append(_Entry(key, [found[key]], score))
            continue
        members: list[RecalledItem] = []
        for k in groups[key]:
            if k in found:
                members.append(found[k])
            elif k in partners:
                item = partners[k]
                if archived.get(k, False) and k[0] == held.session_id and item.id in held_ids:
                    break  # an archived copy of an item in the prompt
                members.append(RecalledItem(item, archived.get(k, False)))
            else:
                break  # erased meanwhile
        else:
            if used.isdisjoint(groups[key]):
                used.update(groups[key])
                entries.append(_Entry(key, members, score))
    return entries
