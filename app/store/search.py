"""SearchRepository: full-text search over items, in one session or across a tenant's sessions.

Postgres: ``websearch_to_tsquery`` against the GIN expression index ``ix_items_search`` (the
expression below must stay identical to the one in migration 0006 for the planner to use it),
ranked by ``ts_rank``, with ``ts_headline`` snippets. Only the first ``INDEXED_CHARS``
characters of an item's ``search_text`` are indexed (a tsvector holds at most 1 MB, and a
longer text would make its append fail); the item itself is stored whole. SQLite: the FTS5
table ``items_fts`` (external content on ``items.rowid``, no such limit), ranked by ``bm25``,
with ``snippet()``. Scores are "higher is better" on both, comparable only within one backend.

Order: score, then session id, then newest seq first; pages continue after a ``SearchKey``
(keyset), never at an offset. A tenant-wide search ranks a bounded candidate set: the first
``candidates`` matches the index yields, so its cost does not grow with the tenant.
"""

from __future__ import annotations

import math
import re
import struct
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

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
_PG_TSVECTOR = sa.func.to_tsvector(
    _PG_CONFIG,
    sa.func.translate(
        _PG_INDEXED_TEXT,
        sa.literal_column(f"'{_PG_PUNCTUATION}'"),
        sa.literal_column(f"'{_PG_SPACES}'"),
    ),
)
_PG_HEADLINE_OPTIONS = "StartSel=[, StopSel=], MaxWords=24, MinWords=8, MaxFragments=2"
_FTS = sa.table("items_fts", sa.column("rowid"), sa.column("search_text"))
_WORD = re.compile(r"\w+", re.UNICODE)
# The join of a match to its items. The unary ``+`` keeps SQLite from driving the join from
# ``items`` (by its tenant and session index) and running the MATCH once per item of the
# session: 50 ms for ~500 items where the match itself takes 0.3 ms (bench/RESULTS.md,
# "Recall, faster"). With it the match comes first and each hit is one rowid lookup.
_FTS_ROWID = sa.literal_column("items.rowid") == sa.literal_column("+items_fts.rowid")


def _pg_tsquery(query: str) -> Any:
    """The Postgres full-text query for ``query``: web-search syntax, with the punctuation
    the English parser would glue to words turned into spaces."""
    return sa.func.websearch_to_tsquery(
        _PG_CONFIG,
        sa.func.translate(
            sa.bindparam("query", query, type_=sa.Text),
            sa.literal_column(f"'{_PG_PUNCTUATION}'"),
            sa.literal_column(f"'{_PG_SPACES}'"),
        ),
    )


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


def _as_real(value: float) -> float:
    """``value`` rounded to a REAL (float4), which Postgres then takes without an overflow or
    underflow error (a cursor may name any double)."""
    if not math.isfinite(value):
        return value
    try:
        return float(struct.unpack("<f", struct.pack("<f", value))[0])
    except OverflowError:
        return math.copysign(math.inf, value)


def fts5_query(text: str) -> str | None:
    """A user's words as an FTS5 query: each word quoted (no operator injection), all required."""
    words = _WORD.findall(text)
    return " ".join(f'"{w}"' for w in words) if words else None


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
        ``after``. With ``candidates``, only that many matching items (the first the index
        yields, in no meaningful order) are ranked, then paged through."""
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
        columns = [*ITEM_COLUMNS, t.c.session_id, t.c.archived, t.c.archived_reason]
        if self.db.dialect.name == "sqlite":
            match = fts5_query(query)
            if match is None:
                return []
            score: Any = (-sa.func.bm25(sa.literal_column("items_fts"))).label("score")
            inner = (
                sa.select(*columns, sa.literal_column("items.rowid").label("fts_rowid"), score)
                .select_from(_FTS.join(t, _FTS_ROWID))
                .where(sa.literal_column("items_fts").op("MATCH")(match), *where)
            )
        else:
            tsquery = _pg_tsquery(query)
            score = sa.func.ts_rank(_PG_TSVECTOR, tsquery).label("score")
            inner = sa.select(*columns, _PG_INDEXED_TEXT.label("indexed_text"), score).where(
                _PG_TSVECTOR.op("@@")(tsquery), *where
            )
        if candidates is not None:
            inner = inner.limit(candidates)
        ranked = inner.subquery("ranked")
        c = ranked.c
        page = sa.select(*(c[col.name] for col in columns), c.score)
        if after is not None:
            # ts_rank is a REAL: the key's score (read from one) converts back to it exactly.
            bound: Any = sa.bindparam("after_score", after.score, type_=sa.Float)
            if self.db.dialect.name != "sqlite":
                bound = sa.cast(sa.bindparam("after_score", _as_real(after.score)), sa.REAL)
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
        if self.db.dialect.name == "sqlite":
            page = page.add_columns(c.fts_rowid)
            rows = (await self.db.execute(page)).all()
            snippets = await self._fts_snippets(match, [r._mapping["fts_rowid"] for r in rows])
            found = [(r, snippets.get(r._mapping["fts_rowid"])) for r in rows]
        else:
            paged = page.add_columns(c.indexed_text).subquery("paged")
            # Snippets for the page only, after the sort and limit.
            final = sa.select(
                *(paged.c[col.name] for col in columns),
                paged.c.score,
                sa.func.ts_headline(
                    _PG_CONFIG, paged.c.indexed_text, tsquery, _PG_HEADLINE_OPTIONS
                ).label("snippet"),
            ).order_by(paged.c.score.desc(), paged.c.session_id, paged.c.seq.desc())
            rows = (await self.db.execute(final)).all()
            found = [(r, r._mapping["snippet"]) for r in rows]
        return [
            SearchHit(
                session_id=r._mapping["session_id"],
                item=item_of_row(r),
                archived=bool(r._mapping["archived"]),
                archived_reason=r._mapping["archived_reason"],
                score=float(r._mapping["score"]),
                snippet=snippet,
            )
            for r, snippet in found
        ]

    async def _fts_snippets(self, match: str, rowids: list[int]) -> dict[int, str | None]:
        """FTS5 snippets of the page's rows (an auxiliary function needs its MATCH query)."""
        if not rowids:
            return {}
        stmt = sa.select(
            _FTS.c.rowid,
            sa.func.snippet(sa.literal_column("items_fts"), 0, "[", "]", "…", 16),
        ).where(sa.literal_column("items_fts").op("MATCH")(match), _FTS.c.rowid.in_(rowids))
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
    score)``, scored as ``SearchRepository.search`` scores them, without item columns or
    snippets (recall reads it beside its candidates). None: the query has no word to match."""
    where = [t.c.tenant_id == tenant_id, t.c.session_id.in_(session_ids)]
    if dialect == "sqlite":
        match = fts5_query(query)
        if match is None:
            return None
        score: Any = (-sa.func.bm25(sa.literal_column("items_fts"))).label("score")
        stmt = (
            sa.select(t.c.session_id, t.c.seq, score)
            .select_from(_FTS.join(t, _FTS_ROWID))
            .where(sa.literal_column("items_fts").op("MATCH")(match), *where)
        )
    else:
        if not _WORD.search(query):
            return None
        tsquery = _pg_tsquery(query)
        stmt = sa.select(
            t.c.session_id, t.c.seq, sa.func.ts_rank(_PG_TSVECTOR, tsquery).label("score")
        ).where(_PG_TSVECTOR.op("@@")(tsquery), *where)
    return stmt
