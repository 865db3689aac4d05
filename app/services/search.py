"""Search use cases: full-text search over one session's memory or history, and across every
session of the tenant the caller may see (its key's session prefix applies).

A query is words (any of them matches, ranked by BM25: app/domain/fulltext.py); operators and
punctuation are words too, never syntax (a ``"quoted phrase"`` is matched as a phrase). A query
with no word in it, or only stop words, matches nothing: an empty result, not an error. Only
an empty ``q`` is refused (the API declares ``minLength: 1``). Scores are on one 0..1 scale in
every mode (``app.domain.recall.fuse``).

Pages are keyset pages: a cursor names where the previous page ended (score, session id,
seq), so a deep page costs what the first one does. A tenant-wide search ranks the best
``TENANT_CANDIDATES`` matching items (the same set on every page), so it stays bounded however
large the tenant grows; one session's search ranks all of that session's matches (on Postgres,
its bounded candidates: app/store/search.py)."""

from __future__ import annotations

import logging
import math
import re
import struct
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

from app.domain.errors import InvalidInput, SemanticSearchOff
from app.domain.fulltext import needs_no_footing
from app.domain.projection.budget import MAX_QUERY_CHARS
from app.domain.recall import FusedHit, fuse, relevance_floor
from app.embeddings import Embedder, EmbeddingError
from app.embeddings.vectors import nearest_matrix, nearest_packed
from app.services.access import load_session
from app.services.runtime import Actor, Runtime, utcnow
from app.services.session_vectors import session_vectors
from app.store import pgvector
from app.store.search import SearchHit, SearchKey, SearchRepository, hits_by_key
from app.store.vectors import (
    live_seqs,
    tenant_packed,
)

log = logging.getLogger(__name__)

Scope = Literal["memory", "history"]
Mode = Literal["fulltext", "semantic", "hybrid"]
# A session's semantic or hybrid search ranks at most this many candidates of each ranker
# (the full-text matches and the nearest vectors), then fuses and pages through them.
SEMANTIC_CANDIDATES = 200


def check_query(q: str) -> str:
    """The query's text, stripped (possibly empty: it then matches nothing)."""
    if not q:
        raise InvalidInput(
            "the search query is empty", errors=[{"loc": ["query", "q"], "msg": "empty"}]
        )
    text = q.strip()
    if len(text) > MAX_QUERY_CHARS:
        raise InvalidInput(
            "the search query is too long",
            errors=[{"loc": ["query", "q"], "msg": f"at most {MAX_QUERY_CHARS} characters"}],
        )
    return text


# A tenant-wide search ranks at most this many matching items (the best, in page order): its
# cost is bounded, whatever the tenant holds. A query matching more should be narrowed.
TENANT_CANDIDATES = 1000
# A tenant-wide semantic or hybrid search compares the query with at most this many vectors
# (without an ANN index): about 15 MB of float32 at 384 dimensions, a bounded read.
TENANT_VECTOR_CANDIDATES = 20_000
# A cursor: the last hit's score (the hex of its IEEE 754 double), seq and session id (the hex
# of its UTF-8). Every string of this pattern is a position to continue from, so the
# published pattern is exactly what is accepted.
CURSOR_PATTERN = r"^[0-9a-f]{16}\.[0-9]{1,18}\.(?:[0-9a-f]{2}){0,1024}$"
CURSOR_MAX_CHARS = 16 + 1 + 18 + 1 + 2048
_CURSOR_RE = re.compile(CURSOR_PATTERN)


def encode_cursor(key: SearchKey) -> str:
    """The opaque cursor of a position (see ``CURSOR_PATTERN``)."""
    score = struct.pack(">d", key.score).hex()
    return f"{score}.{key.seq}.{key.session_id.encode().hex()}"


def decode_cursor(cursor: str) -> SearchKey:
    """The position a cursor names; ``InvalidInput`` (loc ``query.cursor``) when it does not
    match ``CURSOR_PATTERN``."""
    if not _CURSOR_RE.fullmatch(cursor):
        raise InvalidInput(
            "invalid cursor",
            errors=[{"loc": ["query", "cursor"], "msg": "not a search cursor"}],
        )
    score_hex, seq, session_hex = cursor.split(".")
    (score,) = struct.unpack(">d", bytes.fromhex(score_hex))
    if math.isnan(score):
        score = math.inf
    # Bytes no cursor of ours holds still name a position (never a NUL: text cannot hold one).
    session_id = bytes.fromhex(session_hex).decode("utf-8", "replace").replace("\x00", "\ufffd")
    return SearchKey(score=score, session_id=session_id, seq=int(seq))


def _page(hits: list[SearchHit], *, limit: int) -> tuple[list[SearchHit], str | None]:
    if len(hits) <= limit:
        return hits, None
    last = hits[limit - 1]
    key = SearchKey(score=last.score, session_id=last.session_id, seq=last.item.seq)
    return hits[:limit], encode_cursor(key)


async def search_session(
    rt: Runtime,
    actor: Actor,
    session_id: str,
    *,
    q: str,
    scope: Scope,
    limit: int,
    cursor: str | None = None,
) -> tuple[list[SearchHit], str | None]:
    """Ranked hits in one session (``memory``: working memory; ``history``: every item ever
    appended) and the cursor of the next page (None at the end)."""
    text = check_query(q)
    after = decode_cursor(cursor) if cursor is not None else None
    async with rt.store.read() as db:
        await load_session(db, actor, session_id)
        if not text:
            return [], None
        hits = await SearchRepository(db).search(
            actor.tenant_id,
            text,
            session_id=session_id,
            include_archived=scope == "history",
            limit=limit + 1,
            after=after,
        )
    return _page(hits, limit=limit)


@dataclass(frozen=True, slots=True)
class ScoredHit:
    """A hit and what each ranker said of it (None: not in that ranking)."""

    hit: SearchHit
    fulltext: float | None
    semantic: float | None


@dataclass(frozen=True, slots=True)
class SearchPage:
    hits: list[ScoredHit]
    next_cursor: str | None
    mode: Mode  # the mode answered (hybrid answers as fulltext when semantic search is off)


async def _embed_query(embedder: Embedder, text: str, *, mode: Mode) -> list[float] | None:
    """The query's vector. When the embedder fails, ``semantic`` fails with it (502
    ``upstream-failed``) and ``hybrid`` gets None: it answers as ``fulltext``, so the default
    search keeps working while an embeddings endpoint is down."""
    try:
        [vector] = await embedder.embed([text])
    except EmbeddingError:
        if mode == "semantic":
            raise
        log.warning("the query could not be embedded; hybrid search answers as full text")
        return None
    return vector


def _semantic_off() -> SemanticSearchOff:
    return SemanticSearchOff("semantic search is off on this server (EMBEDDINGS__PROVIDER=none)")


# What a semantic or hybrid search fuses: the full-text hits (for ``semantic``, at most one:
# whether the query has a footing in the searched items) and the ranking by meaning,
# (session id, seq) -> similarity, nearest first.
_Rankings = tuple[list[SearchHit], list[tuple[tuple[str, int], float]]]


async def _search_in_mode(
    rt: Runtime,
    actor: Actor,
    *,
    q: str,
    mode: Mode,
    min_score: float | None,
    limit: int,
    cursor: str | None,
    fulltext: Callable[[], Awaitable[tuple[list[SearchHit], str | None]]],
    rank: Callable[[str, str, list[float]], Awaitable[_Rankings]],
    check_access: Callable[[], Awaitable[None]] | None = None,
) -> SearchPage:
    """A search in ``mode``, whether of one session or of the tenant: what differs is given.
    ``fulltext()``: the full-text page (for ``fulltext``, and for ``hybrid`` when semantic
    search is off or the query cannot be embedded); ``check_access()``: refuses a caller who
    may not search there, after the query and cursor are checked and before the query is
    embedded; ``rank(model, text, query_vector)``: the two rankings to fuse.

    Relevance floor: a query none of whose terms occurs in the searched items (full text finds
    nothing) gets no hit by meaning either, unless it is written in a script full text does
    not split into words (``app.domain.fulltext.needs_no_footing``); a hit by meaning needs a
    similarity of at least ``min_score`` (None: the model's ``relevance_floor``)."""
    embedder = rt.embedder
    if mode == "semantic" and embedder is None:
        raise _semantic_off()
    if mode == "fulltext" or embedder is None:
        return _fulltext_page(*await fulltext())
    text = check_query(q)
    after = decode_cursor(cursor) if cursor is not None else None
    if check_access is not None:
        await check_access()
    if not text:
        return SearchPage([], None, mode)
    # The query is embedded before the reads (no connection held while the model runs); its
    # size says which stored vectors it can be compared with.
    query_vector = await _embed_query(embedder, text, mode=mode)
    if query_vector is None:
        return _fulltext_page(*await fulltext())
    ft_hits, semantic = await rank(embedder.model, text, query_vector)
    if not ft_hits and not needs_no_footing(text):
        # No term of the query occurs in the searched items: nothing there is about it, and
        # the nearest vectors are only the least unrelated ones (a random token's neighbours
        # reach the similarity of a true paraphrase: bench/RESULTS.md).
        semantic = []
    if mode == "semantic":
        ft_hits = []  # they were read for the footing only
    return await _fused_page(
        rt,
        actor,
        text=text,
        mode=mode,
        ft_hits=ft_hits,
        semantic=semantic,
        min_score=relevance_floor(embedder.model) if min_score is None else min_score,
        limit=limit,
        after=after,
    )


def _fulltext_page(hits: list[SearchHit], next_cursor: str | None) -> SearchPage:
    return SearchPage([ScoredHit(h, h.score, None) for h in hits], next_cursor, "fulltext")


async def search_session_modes(
    rt: Runtime,
    actor: Actor,
    session_id: str,
    *,
    q: str,
    scope: Scope,
    limit: int,
    cursor: str | None = None,
    mode: Mode = "fulltext",
    min_score: float | None = None,
) -> SearchPage:
    """One session's search in ``mode``. ``fulltext`` is ``search_session``. ``semantic``
    and ``hybrid`` rank by meaning the session's items that have a vector of the current
    model (an exact scan) and, for hybrid, fuse that with the full-text ranking
    (``app.domain.recall.fuse``); each ranker contributes at most ``SEMANTIC_CANDIDATES``.
    With semantic search off, ``semantic`` is refused (403 ``semantic-search-off``) and ``hybrid`` answers as
    ``fulltext`` (the page says which mode it answered)."""

    async def check_access() -> None:
        async with rt.store.read() as db:
            await load_session(db, actor, session_id)

    async def rank(model: str, text: str, query_vector: list[float]) -> _Rankings:
        history = scope == "history"
        async with rt.store.read() as db:
            ft_hits = await SearchRepository(db).search(
                actor.tenant_id,
                text,
                session_id=session_id,
                include_archived=history,
                limit=SEMANTIC_CANDIDATES if mode == "hybrid" else 1,
            )
            vectors = await session_vectors(
                rt, db, actor.tenant_id, session_id, model, len(query_vector)
            )
            live = None if history else await live_seqs(db, actor.tenant_id, session_id)
        mask = None if live is None else np.isin(vectors.seqs, np.asarray(live, dtype=np.int64))
        nearest_seqs = nearest_matrix(
            query_vector,
            vectors.seqs,
            vectors.matrix,
            limit=SEMANTIC_CANDIDATES,
            mask=mask,
            unit=True,
        )
        return ft_hits, [((session_id, int(seq)), sim) for seq, sim in nearest_seqs]

    return await _search_in_mode(
        rt,
        actor,
        q=q,
        mode=mode,
        min_score=min_score,
        limit=limit,
        cursor=cursor,
        fulltext=lambda: search_session(
            rt, actor, session_id, q=q, scope=scope, limit=limit, cursor=cursor
        ),
        check_access=check_access,
        rank=rank,
    )


async def _fused_page(
    rt: Runtime,
    actor: Actor,
    *,
    text: str,
    mode: Mode,
    ft_hits: list[SearchHit],
    semantic: list[tuple[tuple[str, int], float]],
    min_score: float,
    limit: int,
    after: SearchKey | None,
) -> SearchPage:
    """Fuse the ranking by meaning with ``ft_hits`` and cut the page after ``after`` (the same
    inputs give the same order, so a cursor names a place in it)."""
    fused: list[FusedHit[tuple[str, int]]] = fuse(
        [((h.session_id, h.item.seq), h.score) for h in ft_hits],
        semantic,
        query=text,
        mode=mode,
        min_score=min_score,
    )
    start = 0
    if after is not None:  # continue after the hit the cursor names
        named = (after.session_id, after.seq)
        start = next(
            (i + 1 for i, f in enumerate(fused) if f.key == named),
            next((i for i, f in enumerate(fused) if f.score < after.score), len(fused)),
        )
    window = fused[start : start + limit + 1]
    by_key = {(h.session_id, h.item.seq): h for h in ft_hits}
    missing = [f.key for f in window if f.key not in by_key]
    if missing:
        async with rt.store.read() as db:
            by_key.update(await hits_by_key(db, actor.tenant_id, missing))
    scored = [
        ScoredHit(replace(by_key[f.key], score=f.score), f.fulltext, f.semantic)
        for f in window
        if f.key in by_key  # an item erased between the two reads is left out
    ]
    page, next_cursor = _page([s.hit for s in scored], limit=limit)
    return SearchPage(scored[: len(page)], next_cursor, mode)


async def search_all_modes(
    rt: Runtime,
    actor: Actor,
    *,
    q: str,
    scope: Scope,
    limit: int,
    cursor: str | None = None,
    mode: Mode = "fulltext",
    min_score: float | None = None,
) -> SearchPage:
    """The tenant-wide search in ``mode``, over the sessions the caller may see. ``fulltext``
    is ``search_all``. ``semantic`` and ``hybrid`` rank by meaning at most
    ``TENANT_VECTOR_CANDIDATES`` vectors of the current model (every one when the tenant has
    fewer: the scan is then exact) and fuse them as a session's search does with the full-text
    ranking of at most ``TENANT_CANDIDATES`` matches. Semantic search off: as in
    ``search_session_modes``."""

    async def rank(model: str, text: str, query_vector: list[float]) -> _Rankings:
        history = scope == "history"
        now = utcnow()
        async with rt.store.read() as db:
            ft_hits = await SearchRepository(db).search(
                actor.tenant_id,
                text,
                session_prefix=actor.session_prefix,
                include_archived=history,
                limit=SEMANTIC_CANDIDATES if mode == "hybrid" else 1,
                candidates=TENANT_CANDIDATES,
                live_at=now,
            )
        if rt.pgvector:  # the HNSW index over every vector of the caller's sessions
            async with rt.store.read(snapshot=True) as db:
                semantic = await pgvector.tenant_nearest(
                    db,
                    actor.tenant_id,
                    model,
                    query_vector,
                    session_prefix=actor.session_prefix,
                    include_archived=history,
                    live_at=now,
                    limit=SEMANTIC_CANDIDATES,
                )
        else:
            async with rt.store.read() as db:
                packed = await tenant_packed(
                    db,
                    actor.tenant_id,
                    model,
                    dims=len(query_vector),
                    session_prefix=actor.session_prefix,
                    include_archived=history,
                    live_at=now,
                    candidates=TENANT_VECTOR_CANDIDATES,
                )
            semantic = nearest_packed(
                query_vector, packed.keys, packed.blobs, dims=packed.dims, limit=SEMANTIC_CANDIDATES
            )
        return ft_hits, semantic

    return await _search_in_mode(
        rt,
        actor,
        q=q,
        mode=mode,
        min_score=min_score,
        limit=limit,
        cursor=cursor,
        fulltext=lambda: search_all(rt, actor, q=q, scope=scope, limit=limit, cursor=cursor),
        rank=rank,
    )


async def search_all(
    rt: Runtime, actor: Actor, *, q: str, scope: Scope, limit: int, cursor: str | None = None
) -> tuple[list[SearchHit], str | None]:
    """Ranked hits across the tenant's sessions visible to the caller, among at most
    ``TENANT_CANDIDATES`` matching items, and the cursor of the next page."""
    text = check_query(q)
    after = decode_cursor(cursor) if cursor is not None else None
    if not text:
        return [], None
    async with rt.store.read() as db:
        hits = await SearchRepository(db).search(
            actor.tenant_id,
            text,
            session_prefix=actor.session_prefix,
            include_archived=scope == "history",
            limit=limit + 1,
            after=after,
            candidates=TENANT_CANDIDATES,
            live_at=utcnow(),  # an expired session's items are gone already, swept or not
        )
    return _page(hits, limit=limit)
