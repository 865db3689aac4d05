"""SearchRepository: full-text search over items, in one session or across a tenant's sessions.

Any word of the query matches, ranked by BM25 (app/domain/fulltext.py: the terms, stop words,
exact phrases and the 0..1 score), the same way on both backends:

- SQLite: the FTS5 table ``items_fts`` (external content on ``items.rowid``), queried with the
  terms joined by ``OR`` and ranked by ``bm25()`` (FTS5's own BM25: document frequencies over
  the whole table), with ``snippet()``. An exact phrase held is one more FTS5 match.
- Postgres: the GIN expression index ``ix_items_search`` (the expression below must stay
  identical to the one in migration 0006 for the planner to use it). The query's terms become
  lexemes (the ``english`` stemmer); each lexeme's document frequency in the searched items is
  counted through the index, and the candidates are, per lexeme, its ``PER_TERM_CANDIDATES``
  newest matches (all of a rare term's, a bounded share of a common one's: a document that
  holds only common words scores low anyway). Each candidate's tsvector is computed once and
  gives the term frequencies; its length is the item's ``tokens``, against the candidates'
  average. ``ts_headline`` snippets. Only the first ``INDEXED_CHARS`` characters of an item's
  ``search_text`` are indexed (a tsvector holds at most 1 MB); the item is stored whole.

Stemming differs (Postgres's english stemmer, FTS5's porter), and so may rarity: Postgres
counts it in the searched items, FTS5 in the whole table; the same queries give the same top
hits on both (tests/api/test_search_ranking.py).

Order: score, then session id, then newest seq first; pages continue after a ``SearchKey``
(keyset), never at an offset. A tenant-wide search ranks a bounded candidate set: the best
``candidates`` matches in that same order (a stable set, so pages neither repeat nor skip),
its cost bounded by the per-term caps (Postgres) or the index's own scan (FTS5).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import TSVECTOR
from sqlalchemy.ext.asyncio import AsyncConnection

from app.domain.fulltext import K1, B, QueryTerms, query_terms
from app.domain.items import StoredItem
from app.store.items import ITEM_COLUMNS, item_of_row
from app.store.tables import items as t
from app.store.tables import sessions

_PG_CONFIG = sa.literal_column("'english'::regconfig")
# Path and identifier punctuation read as spaces, in the text and in the query alike.
_PG_PUNCTUATION = "/._-:@\\"
_PG_SPACES = " " * len(_PG_PUNCTUATION)
# What the index holds of an item's text, at most: 100,000 characters give a tsvector far
# below Postgres's 1 MB limit whatever the text (each character costs the vector at most a
# few bytes). Migration 0006 repeats this number.
INDEXED_CHARS = 100_000
_PG_INDEXED_TEXT = sa.func.left(
    sa.func.coalesce(t.c.search_text, sa.literal_column("''::text")),
    sa.literal_column(str(INDEXED_CHARS)),
)
# Each item's tsvector, stored with the row (migration 0013: generated from the first
# ``INDEXED_CHARS`` characters of ``search_text``, punctuation translated as above) and
# indexed by ``ix_items_search``.
_PG_TSVECTOR = sa.literal_column("items.search_tsv", TSVECTOR)
_PG_HEADLINE_OPTIONS = "StartSel=[, StopSel=], MaxWords=24, MinWords=8, MaxFragments=2"
_FTS = sa.table("items_fts", sa.column("rowid"), sa.column("search_text"))
_FTS_TABLE = sa.literal_column("items_fts")
# The join of a match to its items. The unary ``+`` keeps SQLite from driving the join from
# ``items`` (by its tenant and session index) and running the MATCH once per item of the
# session: 50 ms for ~500 items where the match itself takes 0.3 ms (bench/RESULTS.md,
# "Recall, faster"). With it the match comes first and each hit is one rowid lookup.
_FTS_ROWID = sa.literal_column("items.rowid") == sa.literal_column("+items_fts.rowid")
# Postgres, the candidates (module doc): every match of the rarest terms while their matches
# add up to at most RARE_CANDIDATES, and the newest PER_TERM_CANDIDATES matches of every term.
RARE_CANDIDATES = 400
PER_TERM_CANDIDATES = 40
# Postgres: document frequencies and the item count are counted up to this many (a tenant-wide
# search's statistics cost no more than this, however large the tenant).
STATS_CAP = 100_000
_SIMPLE = sa.literal_column("'simple'::regconfig")


def _translated(text: str, name: str) -> Any:
    return sa.func.translate(
        sa.bindparam(name, text, type_=sa.Text),
        sa.literal_column(f"'{_PG_PUNCTUATION}'"),
        sa.literal_column(f"'{_PG_SPACES}'"),
    )


def _pg_match_query(terms: QueryTerms) -> Any:
    """The Postgres tsquery matching any of the terms (for snippets)."""
    return sa.func.websearch_to_tsquery(
        _PG_CONFIG, sa.bindparam("any_terms", " or ".join(terms.terms), type_=sa.Text)
    )


def _fts_phrase(words: tuple[str, ...]) -> str:
    # Words are letters and digits only (app.domain.fulltext): nothing to escape in quotes.
    return '"' + " ".join(words) + '"'


def fts5_query(text: str) -> str | None:
    """A query's terms as an FTS5 query: each term quoted (no operator injection), any of them
    matching (``OR``). None: the query has no term (only stop words or punctuation)."""
    terms = query_terms(text).terms
    return " OR ".join(_fts_phrase((w,)) for w in terms) if terms else None


def _sqlite_score(bm25: Any, idf_sum: Any, held: Any, phrases: int) -> Any:
    """``app.domain.fulltext.fulltext_score`` in SQL (the ratio of a constant sum: SQLite
    evaluates ``bm25()`` per reference, cheaply, from the row's match data)."""
    ratio = bm25 / idf_sum
    return (held + ratio / (ratio + 1.0)) / float(phrases + 1)


def _sqlite_scored(
    terms: QueryTerms, where: list[sa.ColumnElement[bool]], columns: list[Any]
) -> sa.Select[Any]:
    """``columns`` and the 0..1 ``score`` of every item matching any term (FTS5: ``bm25()``
    with FTS5's own statistics, over the whole table, as its IDFs are normalised by)."""
    match = " OR ".join(_fts_phrase((w,)) for w in terms.terms)
    documents = sa.select(sa.func.count()).select_from(_FTS).correlate(None).scalar_subquery()
    idfs = [
        sa.func.max(
            sa.func.ln(
                (documents - _fts_count(_fts_phrase((w,))) + 0.5)
                / (_fts_count(_fts_phrase((w,))) + 0.5)
            ),
            1e-6,
        )
        for w in terms.terms
    ]
    idf_sum = sum(idfs[1:], idfs[0])
    held: Any = sa.literal(0)
    for i, phrase in enumerate(terms.phrases):
        holding = (
            sa.select(_FTS.c.rowid)
            .where(_FTS_TABLE.op("MATCH")(sa.bindparam(f"phrase_{i}", _fts_phrase(phrase))))
            .correlate(None)
            .scalar_subquery()
        )
        held = held + sa.case((sa.literal_column("items.rowid").in_(holding), 1), else_=0)
    bm25 = -sa.func.bm25(_FTS_TABLE)
    score = _sqlite_score(bm25, idf_sum, held, len(terms.phrases))
    return (
        sa.select(*columns, score.label("score"))
        .select_from(_FTS.join(t, _FTS_ROWID))
        .where(_FTS_TABLE.op("MATCH")(sa.bindparam("match", match)), *where)
    )


def _fts_count(phrase: str) -> Any:
    return (
        sa.select(sa.func.count())
        .select_from(_FTS)
        .where(_FTS_TABLE.op("MATCH")(sa.literal(phrase)))
        .correlate(None)
        .scalar_subquery()
    )


def _pg_scored(
    terms: QueryTerms, where: list[sa.ColumnElement[bool]], columns: list[Any]
) -> sa.Select[Any]:
    """``columns`` and the 0..1 ``score`` of the Postgres candidates (module doc): BM25 with
    document frequencies counted through the GIN index in the searched items."""
    queries = [
        sa.func.plainto_tsquery(_PG_CONFIG, sa.bindparam(f"query_term_{i}", w, type_=sa.Text))
        for i, w in enumerate(terms.terms)
    ]
    # Per term, one pass over its matches (at most STATS_CAP of them): their count (the
    # document frequency) and the newest RARE_CANDIDATES of them, numbered newest first.
    parts = []
    for i, query in enumerate(queries):
        matches = (
            sa.select(t.c.session_id, t.c.seq)
            .where(*where, _PG_TSVECTOR.op("@@")(query))
            .limit(STATS_CAP)
            .subquery(f"matches_{i}")
        )
        newest = (matches.c.seq.desc(), matches.c.session_id)
        parts.append(
            sa.select(
                sa.literal(i, sa.Integer).label("term"),
                matches.c.session_id,
                matches.c.seq,
                sa.func.count().over().label("df"),
                sa.func.row_number().over(order_by=newest).label("n"),
            )
            .order_by(*newest)
            .limit(RARE_CANDIDATES)
        )
    hits = sa.union_all(*(sa.select(p.subquery()) for p in parts)).cte("hits")
    hits = hits.prefix_with("MATERIALIZED")
    all_items = sa.select(sa.literal(1)).where(*where).limit(STATS_CAP).subquery()
    documents = sa.select(sa.func.count()).select_from(all_items).scalar_subquery()
    numbers = sa.values(sa.column("term", sa.Integer), name="numbers").data(
        [(i,) for i in range(len(queries))]
    )
    df = sa.func.coalesce(sa.func.max(hits.c.df), 0)
    stats = (
        sa.select(numbers.c.term, df.label("df"))
        .select_from(numbers.outerjoin(hits, hits.c.term == numbers.c.term))
        .group_by(numbers.c.term)
        .subquery("stats")
    )
    term = sa.select(
        stats.c.term,
        sa.cast(
            sa.func.greatest(sa.func.ln((documents - stats.c.df + 0.5) / (stats.c.df + 0.5)), 1e-6),
            sa.Float,
        ).label("idf"),
        # the matches of this term and of every rarer one (ties: by term number)
        sa.func.sum(stats.c.df).over(order_by=(stats.c.df, stats.c.term)).label("rarer"),
    ).cte("term")
    keys = (
        sa.select(hits.c.session_id, hits.c.seq)
        .select_from(hits.join(term, term.c.term == hits.c.term))
        .where(sa.or_(term.c.rarer <= RARE_CANDIDATES, hits.c.n <= PER_TERM_CANDIDATES))
        .distinct()
        .subquery("keys")
    )
    candidate = (
        sa.select(
            *columns,
            _PG_TSVECTOR.label("tsv"),
            sa.func.greatest(t.c.tokens, 1).label("dl"),
            sa.func.greatest(sa.func.avg(t.c.tokens).over(), 1).label("avgdl"),
        )
        .select_from(
            t.join(
                keys,
                sa.and_(t.c.session_id == keys.c.session_id, t.c.seq == keys.c.seq),
            )
        )
        .where(*where)
        .cte("candidate")
        .prefix_with("MATERIALIZED")
    )
    c = candidate.c
    held: Any = sa.literal(0)
    for i, phrase in enumerate(terms.phrases):
        phrase_query = sa.func.phraseto_tsquery(
            _PG_CONFIG, sa.bindparam(f"query_phrase_{i}", " ".join(phrase), type_=sa.Text)
        )
        held = held + sa.case((c.tsv.op("@@")(phrase_query), 1), else_=0)
    # A term's frequency in the candidate: ts_rank_cd of a one-term query, every weight 1 and
    # no normalisation, is its number of occurrences (one column per term, computed once).
    ones = sa.literal_column("'{1,1,1,1}'::float4[]")
    frequencies = (
        sa.select(
            *(c[col.name] for col in columns),
            c.dl,
            c.avgdl,
            held.label("held"),
            *(
                sa.func.ts_rank_cd(ones, c.tsv, q, 0).label(f"tf_{i}")
                for i, q in enumerate(queries)
            ),
        )
        .cte("frequencies")
        .prefix_with("MATERIALIZED")
    )
    f = frequencies.c
    length_norm = K1 * (1 - B + B * f.dl / f.avgdl)
    bm25: Any = sa.literal(0.0)
    for i in range(len(queries)):
        tf = f[f"tf_{i}"]
        idf_i = sa.select(term.c.idf).where(term.c.term == i).scalar_subquery()
        bm25 = bm25 + idf_i * tf * (K1 + 1) / (tf + length_norm)
    idf_sum = sa.select(sa.func.sum(term.c.idf)).scalar_subquery()
    # r = BM25 / (sum of IDFs), once per candidate (the CTE is materialised): the score uses
    # it twice, r / (r + 1).
    scored = (
        sa.select(*(f[col.name] for col in columns), f.held, (bm25 / idf_sum).label("r"))
        .cte("scored")
        .prefix_with("MATERIALIZED")
    )
    r = scored.c.r
    score = (scored.c.held + r / (r + 1.0)) / float(len(terms.phrases) + 1)
    return sa.select(*(scored.c[col.name] for col in columns), score.label("score"))


@dataclass(frozen=True, slots=True)
class SearchHit:
    session_id: str
    item: StoredItem
    archived: bool
    archived_reason: str | None
    score: float
    snippet: str | None


@dataclass(frozen=True, slots=True)
class SearchKey:
    """Where a page ended: the last hit's score, session id and seq (the sort key)."""

    score: float
    session_id: str
    seq: int


class SearchRepository:
    def __init__(self, db: AsyncConnection) -> None:
        self.db = db

    async def search(
        self,
        tenant_id: str,
        query: str,
        *,
        session_id: str | None = None,
        session_prefix: str | None = None,
        include_archived: bool,
        limit: int,
        after: SearchKey | None = None,
        candidates: int | None = None,
        live_at: datetime | None = None,
    ) -> list[SearchHit]:
        """At most ``limit`` hits best first (ties: session id, then newest seq first), after
        ``after``. With ``candidates``, only the best that many matches are ranked and paged
        through (the same set on every page)."""
        terms = query_terms(query)
        if not terms.terms:
            return []
        where: list[sa.ColumnElement[bool]] = [t.c.tenant_id == tenant_id]
        if session_id is not None:
            where.append(t.c.session_id == session_id)
        if session_prefix:
            where.append(t.c.session_id.startswith(session_prefix, autoescape=True))
        if not include_archived:
            where.append(sa.not_(t.c.archived))
        if live_at is not None:  # leave out sessions expired at ``live_at`` (not swept yet)
            expired = sa.select(sessions.c.id).where(
                sessions.c.tenant_id == t.c.tenant_id,
                sessions.c.id == t.c.session_id,
                sessions.c.expires_at <= live_at,
            )
            where.append(~sa.exists(expired))
        columns: list[Any] = [*ITEM_COLUMNS, t.c.session_id, t.c.archived, t.c.archived_reason]
        sqlite = self.db.dialect.name == "sqlite"
        # Ranked by key alone (narrow rows to sort); the page's items are read after.
        rowid = sa.literal_column("items.rowid")
        if sqlite:
            inner = _sqlite_scored(
                terms, where, [t.c.session_id, t.c.seq, rowid.label("fts_rowid")]
            )
        else:
            inner = _pg_scored(terms, where, [t.c.session_id, t.c.seq])
        if candidates is not None:
            # The best ``candidates`` in the page order: a set that is the same on every page.
            score = inner.selected_columns.score
            inner = inner.order_by(
                score.desc(),
                inner.selected_columns.session_id,
                inner.selected_columns.seq.desc(),
            ).limit(candidates)
        ranked = inner.subquery("ranked")
        c = ranked.c
        page = sa.select(*c)
        if after is not None:
            bound = sa.bindparam("after_score", after.score, type_=sa.Float)
            page = page.where(
                sa.or_(
                    c.score < bound,
                    sa.and_(
                        c.score == bound,
                        sa.or_(
                            c.session_id > after.session_id,
                            sa.and_(c.session_id == after.session_id, c.seq < after.seq),
                        ),
                    ),
                )
            )
        page = page.order_by(c.score.desc(), c.session_id, c.seq.desc()).limit(limit)
        ranks = (await self.db.execute(page)).all()
        if not ranks:
            return []
        if sqlite:
            rowids = [r._mapping["fts_rowid"] for r in ranks]
            read = sa.select(*columns, rowid.label("fts_rowid")).where(rowid.in_(rowids))
            by_rowid = {r._mapping["fts_rowid"]: r for r in (await self.db.execute(read)).all()}
            match = " OR ".join(_fts_phrase((w,)) for w in terms.terms)
            snippets = await self._fts_snippets(match, rowids)
            found = [
                (
                    by_rowid[r._mapping["fts_rowid"]],
                    r._mapping["score"],
                    snippets.get(r._mapping["fts_rowid"]),
                )
                for r in ranks
                if r._mapping["fts_rowid"] in by_rowid
            ]
        else:
            keys = [(r._mapping["session_id"], r._mapping["seq"]) for r in ranks]
            read = sa.select(
                *columns,
                sa.func.ts_headline(
                    _PG_CONFIG, _PG_INDEXED_TEXT, _pg_match_query(terms), _PG_HEADLINE_OPTIONS
                ).label("snippet"),
            ).where(t.c.tenant_id == tenant_id, sa.tuple_(t.c.session_id, t.c.seq).in_(keys))
            by_key = {
                (r._mapping["session_id"], r._mapping["seq"]): r
                for r in (await self.db.execute(read)).all()
            }
            found = [
                (by_key[k], r._mapping["score"], by_key[k]._mapping["snippet"])
                for k, r in zip(keys, ranks, strict=True)
                if k in by_key
            ]
        return [
            SearchHit(
                session_id=r._mapping["session_id"],
                item=item_of_row(r),
                archived=bool(r._mapping["archived"]),
                archived_reason=r._mapping["archived_reason"],
                score=float(score),
                snippet=snippet,
            )
            for r, score, snippet in found
        ]

    async def _fts_snippets(self, match: str, rowids: list[int]) -> dict[int, str | None]:
        """FTS5 snippets of the page's rows (an auxiliary function needs its MATCH query)."""
        if not rowids:
            return {}
        stmt = sa.select(
            _FTS.c.rowid,
            sa.func.snippet(_FTS_TABLE, 0, "[", "]", "…", 16),
        ).where(_FTS_TABLE.op("MATCH")(match), _FTS.c.rowid.in_(rowids))
        return {rowid: text for rowid, text in (await self.db.execute(stmt)).all()}


async def hits_by_seq(
    db: AsyncConnection, tenant_id: str, session_id: str, seqs: list[int]
) -> dict[int, SearchHit]:
    """The items of ``seqs`` in one session as hits without a score or snippet (the caller
    ranked them: semantic and hybrid search)."""
    if not seqs:
        return {}
    columns = [*ITEM_COLUMNS, t.c.session_id, t.c.archived, t.c.archived_reason]
    rows = (
        await db.execute(
            sa.select(*columns).where(
                t.c.tenant_id == tenant_id, t.c.session_id == session_id, t.c.seq.in_(seqs)
            )
        )
    ).all()
    out: dict[int, SearchHit] = {}
    for r in rows:
        item = item_of_row(r)
        out[item.seq] = SearchHit(
            session_id=r._mapping["session_id"],
            item=item,
            archived=bool(r._mapping["archived"]),
            archived_reason=r._mapping["archived_reason"],
            score=0.0,
            snippet=None,
        )
    return out


async def hits_by_key(
    db: AsyncConnection, tenant_id: str, keys: list[tuple[str, int]]
) -> dict[tuple[str, int], SearchHit]:
    """The items of ``keys`` (``(session_id, seq)``, across sessions) as hits without a score
    or snippet (the caller ranked them: a tenant-wide semantic or hybrid search)."""
    out: dict[tuple[str, int], SearchHit] = {}
    by_session: dict[str, list[int]] = {}
    for session_id, seq in keys:
        by_session.setdefault(session_id, []).append(seq)
    for session_id, seqs in by_session.items():
        for seq, hit in (await hits_by_seq(db, tenant_id, session_id, seqs)).items():
            out[(session_id, seq)] = hit
    return out


def match_scores(
    dialect: str, tenant_id: str, query: str, session_ids: list[str]
) -> sa.Select[Any] | None:
    """The items of ``session_ids`` matching ``query``: a SELECT of ``(session_id, seq,
    score)``, scored as ``SearchRepository.search`` scores them (0..1), without item columns
    or snippets (recall reads it beside its candidates). None: the query has no term."""
    terms = query_terms(query)
    if not terms.terms:
        return None
    where = [t.c.tenant_id == tenant_id, t.c.session_id.in_(session_ids)]
    columns = [t.c.session_id, t.c.seq]
    if dialect == "sqlite":
        return _sqlite_scored(terms, where, columns)
    return _pg_scored(terms, where, columns)
