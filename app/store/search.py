"""SearchRepository: full-text search over items, in one session or across a tenant's sessions.

Postgres: ``websearch_to_tsquery`` against the GIN expression index ``ix_items_search`` (the
expression below must stay identical to the one in migration 0002 for the planner to use it),
ranked by ``ts_rank``, with ``ts_headline`` snippets. SQLite: the FTS5 table ``items_fts``
(external content on ``items.rowid``), ranked by ``bm25``, with ``snippet()``. Scores are
"higher is better" on both, comparable only within one backend.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from app.domain.items import StoredItem
from app.store.items import ITEM_COLUMNS, item_of_row
from app.store.tables import items as t

_PG_CONFIG = sa.literal_column("'english'::regconfig")
# Path and identifier punctuation read as spaces, in the text and in the query alike.
_PG_PUNCTUATION = "/._-:@\\"
_PG_SPACES = " " * len(_PG_PUNCTUATION)
_PG_TSVECTOR = sa.func.to_tsvector(
    _PG_CONFIG,
    sa.func.translate(
        sa.func.coalesce(t.c.search_text, sa.literal_column("''::text")),
        sa.literal_column(f"'{_PG_PUNCTUATION}'"),
        sa.literal_column(f"'{_PG_SPACES}'"),
    ),
)
_PG_HEADLINE_OPTIONS = "StartSel=[, StopSel=], MaxWords=24, MinWords=8, MaxFragments=2"
_FTS = sa.table("items_fts", sa.column("rowid"), sa.column("search_text"))
_WORD = re.compile(r"\w+", re.UNICODE)


@dataclass(frozen=True, slots=True)
class SearchHit:
    session_id: str
    item: StoredItem
    archived: bool
    archived_reason: str | None
    score: float
    snippet: str | None


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
        offset: int = 0,
    ) -> list[SearchHit]:
        """Hits best first (ties: session id, then newest seq first)."""
        where: list[sa.ColumnElement[bool]] = [t.c.tenant_id == tenant_id]
        if session_id is not None:
            where.append(t.c.session_id == session_id)
        if session_prefix:
            where.append(t.c.session_id.startswith(session_prefix, autoescape=True))
        if not include_archived:
            where.append(sa.not_(t.c.archived))
        if self.db.dialect.name == "sqlite":
            match = fts5_query(query)
            if match is None:
                return []
            bm25 = sa.func.bm25(sa.literal_column("items_fts"))
            score: Any = (-bm25).label("score")
            snippet: Any = sa.func.snippet(
                sa.literal_column("items_fts"), 0, "[", "]", "…", 16
            ).label("snippet")
            stmt = (
                sa.select(
                    *ITEM_COLUMNS,
                    t.c.session_id,
                    t.c.archived,
                    t.c.archived_reason,
                    score,
                    snippet,
                )
                .select_from(_FTS.join(t, sa.literal_column("items.rowid") == _FTS.c.rowid))
                .where(sa.literal_column("items_fts").op("MATCH")(match), *where)
                .order_by(bm25, t.c.session_id, t.c.seq.desc())
            )
        else:
            tsquery = sa.func.websearch_to_tsquery(
                _PG_CONFIG,
                sa.func.translate(
                    sa.bindparam("query", query, type_=sa.Text),
                    sa.literal_column(f"'{_PG_PUNCTUATION}'"),
                    sa.literal_column(f"'{_PG_SPACES}'"),
                ),
            )
            score = sa.func.ts_rank(_PG_TSVECTOR, tsquery).label("score")
            snippet = sa.func.ts_headline(
                _PG_CONFIG,
                sa.func.coalesce(t.c.search_text, ""),
                tsquery,
                _PG_HEADLINE_OPTIONS,
            ).label("snippet")
            stmt = (
                sa.select(
                    *ITEM_COLUMNS,
                    t.c.session_id,
                    t.c.archived,
                    t.c.archived_reason,
                    score,
                    snippet,
                )
                .where(_PG_TSVECTOR.op("@@")(tsquery), *where)
                .order_by(sa.desc("score"), t.c.session_id, t.c.seq.desc())
            )
        stmt = stmt.limit(limit).offset(offset)
        rows = (await self.db.execute(stmt)).all()
        return [
            SearchHit(
                session_id=r._mapping["session_id"],
                item=item_of_row(r),
                archived=bool(r._mapping["archived"]),
                archived_reason=r._mapping["archived_reason"],
                score=float(r._mapping["score"]),
                snippet=r._mapping["snippet"],
            )
            for r in rows
        ]
