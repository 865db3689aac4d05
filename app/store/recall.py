"""RecallRepository: the SQL behind recall (DESIGN §10): which items may be recalled, their
vectors, the newest user message (the default query) and the partners of recalled calls.

A recall candidate is an item with a search text that is a user or assistant message, a
function call or a function call output (never reasoning, system or developer items), and
either from this session and not in its prompt (archived, or in one of the prompt's dropped
seq ranges) or from one of the other sessions named (scope ``prefix``: live or archived).
One statement reads the candidates (UNION ALL of this session's, other sessions' with their
vectors of the model through a LEFT JOIN, and the query's full-text matches), so a read never
counts the whole index. This session's vectors, and so which of its candidates are embedded
and which pending, come from the process's cache (app.services.session_vectors): no join to
``item_vectors`` for them (without statistics Postgres ran that join as a scan of every vector
of the session per candidate).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from app.domain.items import StoredItem
from app.embeddings.cache import Stamp
from app.store.items import ITEM_COLUMNS, item_of_row
from app.store.search import match_scores
from app.store.tables import item_vectors as v
from app.store.tables import items as t
from app.store.tables import sessions as s
from app.store.vectors import stamp_columns, stamp_of

# Dropped ranges beyond this many are folded into one (first, last) range: the SQL stays
# small; the few kept items inside it are system messages or pinned items (see the docstring).
MAX_RANGES = 64

Key = tuple[str, int]  # (session_id, seq)


@dataclass(frozen=True, slots=True)
class CandidateRow:
    key: Key
    embedded: bool | None  # a vector of the model is stored; None: this session's (its cache knows)
    vector: bytes | None  # another session's vector (scope ``prefix``), else None
    dims: int | None
    fulltext: float | None  # the full-text score when the item matches the query


@dataclass(frozen=True, slots=True)
class RecallHead:
    """What a recall read needs first: the newest user message of working memory (the
    default query; None when there is none) and the session's vector stamp of the model and
    size (``app.store.vectors.stamp_columns``; None without a model)."""

    newest_seq: int | None
    newest_text: str | None
    stamp: Stamp | None


def _recallable() -> sa.ColumnElement[bool]:
    return sa.and_(
        t.c.search_text.is_not(None),
        t.c.search_text != "",
        sa.or_(
            sa.and_(t.c.type == "message", t.c.role.in_(("user", "assistant"))),
            t.c.type.in_(("function_call", "function_call_output")),
        ),
    )


class RecallRepository:
    def __init__(self, db: AsyncConnection) -> None:
        self.db = db

    async def head(
        self, tenant_id: str, session_id: str, *, model: str | None, dims: int = 0
    ) -> RecallHead:
        """``RecallHead`` in one statement (scalar subqueries, no FROM)."""
        newest = (
            sa.select(t.c.seq, t.c.search_text)
            .where(
                t.c.tenant_id == tenant_id,
                t.c.session_id == session_id,
                sa.not_(t.c.archived),
                t.c.type == "message",
                t.c.role == "user",
            )
            .order_by(t.c.seq.desc())
            .limit(1)
        )
        columns: list[sa.ColumnElement[object]] = [
            newest.with_only_columns(t.c.seq).scalar_subquery(),
            newest.with_only_columns(t.c.search_text).scalar_subquery(),
        ]
        if model is not None:
            columns += stamp_columns(tenant_id, session_id, model, dims)
        row = (await self.db.execute(sa.select(*columns))).one()
        stamp = stamp_of(row[2:]) if model is not None else None
        if row[0] is None or not row[1]:
            return RecallHead(None, None, stamp)
        return RecallHead(int(row[0]), row[1], stamp)

    async def candidates(
        self,
        tenant_id: str,
        session_id: str,
        *,
        dropped: Sequence[tuple[int, int]],
        others: Sequence[str],
        model: str | None,
        query: str | None,
    ) -> list[CandidateRow]:
        """Every candidate (see the module docstring), ordered by session and seq, in one
        statement; other sessions' with their vector of ``model`` (``embedded`` None for this
        session's: its cache knows), each with its full-text score for ``query`` (None: no
        match, or no query)."""
        ranges = list(dropped)
        if len(ranges) > MAX_RANGES:
            ranges = [(ranges[0][0], ranges[-1][1])]
        own = [t.c.archived]
        own += [t.c.seq.between(first, last) for first, last in ranges]
        nothing = [
            sa.cast(sa.null(), sa.Integer),
            sa.cast(sa.null(), sa.LargeBinary),
            sa.cast(sa.null(), sa.Integer),
            sa.cast(sa.null(), sa.Float),
        ]
        # This session's candidates, without their vectors (the cache has them).
        parts: list[sa.Select[Any]] = [
            sa.select(sa.literal(0).label("kind"), t.c.session_id, t.c.seq, *nothing).where(
                t.c.tenant_id == tenant_id,
                t.c.session_id == session_id,
                sa.or_(*own),
                _recallable(),
            )
        ]
        if others:
            source: sa.FromClause = t
            vector_columns: list[sa.ColumnElement[object]] = nothing[:3]
            if model is not None:
                source = t.outerjoin(
                    v,
                    sa.and_(
                        v.c.tenant_id == t.c.tenant_id,
                        v.c.session_id == t.c.session_id,
                        v.c.seq == t.c.seq,
                        v.c.model == model,
                    ),
                )
                vector_columns = [v.c.seq, v.c.vector, v.c.dims]
            parts.append(
                sa.select(sa.literal(0), t.c.session_id, t.c.seq, *vector_columns, nothing[3])
                .select_from(source)
                .where(
                    t.c.tenant_id == tenant_id,
                    t.c.session_id.in_(list(others)),
                    _recallable(),
                )
            )
        matches = (
            match_scores(self.db.dialect.name, tenant_id, query, [session_id, *others])
            if query is not None
            else None
        )
        if matches is not None:
            # The matches as rows of their own (UNION ALL), not joined to the candidates: a
            # join made SQLite run the full-text match once per candidate.
            m = matches.subquery("matches")
            parts.append(
                sa.select(
                    sa.literal(1),
                    m.c.session_id,
                    m.c.seq,
                    sa.cast(sa.null(), sa.Integer),
                    sa.cast(sa.null(), sa.LargeBinary),
                    sa.cast(sa.null(), sa.Integer),
                    m.c.score,
                )
            )
        stmt = parts[0] if len(parts) == 1 else sa.union_all(*parts)
        candidates: dict[Key, CandidateRow] = {}
        scores: dict[Key, float] = {}
        for r in (await self.db.execute(stmt)).all():
            key = (r[1], int(r[2]))
            if r[0] == 1:
                scores[key] = float(r[6])
                continue
            candidates[key] = CandidateRow(
                key=key,
                embedded=None if r[1] == session_id else r[3] is not None,
                vector=None if r[4] is None else bytes(r[4]),
                dims=None if r[5] is None else int(r[5]),
                fulltext=None,
            )
        return [
            replace(row, fulltext=scores.get(key)) if key in scores else row
            for key, row in sorted(candidates.items())
        ]

    async def prefix_sessions(
        self, tenant_id: str, prefix: str, *, exclude: str, limit: int, live_at: datetime
    ) -> list[str]:
        """Up to ``limit`` other sessions whose id starts with ``prefix``, newest first
        (sessions expired at ``live_at`` are left out, swept or not)."""
        stmt = (
            sa.select(s.c.id)
            .where(
                s.c.tenant_id == tenant_id,
                s.c.id.startswith(prefix, autoescape=True),
                s.c.id != exclude,
                sa.or_(s.c.expires_at.is_(None), s.c.expires_at > live_at),
            )
            .order_by(s.c.created_at.desc(), s.c.id)
            .limit(limit)
        )
        return [r[0] for r in (await self.db.execute(stmt)).all()]

    async def items(self, tenant_id: str, keys: Sequence[Key]) -> dict[Key, StoredItem]:
        """The items of ``keys`` (live or archived) and, in one statement, the partners of
        those that are function calls or outputs: every call and output of the same
        ``call_id`` in the same session."""
        out: dict[Key, StoredItem] = {}
        by_session: dict[str, list[int]] = {}
        for session_id, seq in keys:
            by_session.setdefault(session_id, []).append(seq)
        if not by_session:
            return out
        pairs = ("function_call", "function_call_output")
        named = sa.alias(t, "named")
        parts = []
        for session_id, seqs in sorted(by_session.items()):
            call_ids = sa.select(named.c.call_id).where(
                named.c.tenant_id == tenant_id,
                named.c.session_id == session_id,
                named.c.seq.in_(seqs),
                named.c.call_id.is_not(None),
            )
            parts.append(
                sa.and_(
                    t.c.session_id == session_id,
                    sa.or_(
                        t.c.seq.in_(seqs),
                        sa.and_(t.c.type.in_(pairs), t.c.call_id.in_(call_ids)),
                    ),
                )
            )
        stmt = sa.select(*ITEM_COLUMNS, t.c.session_id).where(
            t.c.tenant_id == tenant_id, sa.or_(*parts)
        )
        for r in (await self.db.execute(stmt)).all():
            item = item_of_row(r)
            out[(r._mapping["session_id"], item.seq)] = item
        return out
