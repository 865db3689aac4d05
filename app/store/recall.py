"""RecallRepository: the SQL behind recall (DESIGN §10): which items may be recalled, their
vectors, the newest user message (the default query) and the partners of recalled calls.

A recall candidate is an item with a search text that is a user or assistant message, a
function call or a function call output (never reasoning, system or developer items), and
either from this session and not in its prompt (archived, or in one of the prompt's dropped
seq ranges) or from one of the other sessions named (scope ``prefix``: live or archived).
Vectors are read with their candidates in one statement (a LEFT JOIN: a candidate without a
vector of the model yet is still a candidate, found by full text, and counted as pending), so
a read never counts the whole index.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from app.domain.items import StoredItem
from app.store.items import ITEM_COLUMNS, item_of_row
from app.store.tables import item_vectors as v
from app.store.tables import items as t
from app.store.tables import sessions as s

# Dropped ranges beyond this many are folded into one (first, last) range: the SQL stays
# small; the few kept items inside it are system messages or pinned items (see the docstring).
MAX_RANGES = 64

Key = tuple[str, int]  # (session_id, seq)


@dataclass(frozen=True, slots=True)
class CandidateRow:
    key: Key
    dims: int | None
    vector: bytes | None  # None: not embedded by the model yet


@dataclass(frozen=True, slots=True)
class NewestUser:
    seq: int
    text: str
    dims: int | None
    vector: bytes | None


def _recallable() -> sa.ColumnElement[bool]:
    return sa.and_(
        t.c.search_text.is_not(None),
        t.c.search_text != "",
        sa.or_(
            sa.and_(t.c.type == "message", t.c.role.in_(("user", "assistant"))),
            t.c.type.in_(("function_call", "function_call_output")),
        ),
    )


def _vector_join(model: str | None) -> tuple[sa.FromClause, list[sa.ColumnElement[object]]]:
    if model is None:
        return t, [sa.null().label("dims"), sa.null().label("vector")]
    joined = t.outerjoin(
        v,
        sa.and_(
            v.c.tenant_id == t.c.tenant_id,
            v.c.session_id == t.c.session_id,
            v.c.seq == t.c.seq,
            v.c.model == model,
        ),
    )
    return joined, [v.c.dims, v.c.vector]


class RecallRepository:
    def __init__(self, db: AsyncConnection) -> None:
        self.db = db

    async def candidates(
        self,
        tenant_id: str,
        session_id: str,
        *,
        dropped: Sequence[tuple[int, int]],
        others: Sequence[str],
        model: str | None,
    ) -> list[CandidateRow]:
        """Every candidate (see the module docstring) with its vector of ``model`` (None:
        not embedded yet, or no model), ordered by session and seq."""
        ranges = list(dropped)
        if len(ranges) > MAX_RANGES:
            ranges = [(ranges[0][0], ranges[-1][1])]
        own = [t.c.archived]
        own += [t.c.seq.between(first, last) for first, last in ranges]
        where = sa.and_(t.c.session_id == session_id, sa.or_(*own))
        if others:
            where = sa.or_(where, t.c.session_id.in_(list(others)))
        source, vector_columns = _vector_join(model)
        stmt = (
            sa.select(t.c.session_id, t.c.seq, *vector_columns)
            .select_from(source)
            .where(t.c.tenant_id == tenant_id, where, _recallable())
            .order_by(t.c.session_id, t.c.seq)
        )
        rows = (await self.db.execute(stmt)).all()
        return [
            CandidateRow(
                key=(r[0], int(r[1])),
                dims=None if r[2] is None else int(r[2]),
                vector=None if r[3] is None else bytes(r[3]),
            )
            for r in rows
        ]

    async def newest_user(
        self, tenant_id: str, session_id: str, *, model: str | None
    ) -> NewestUser | None:
        """The newest user message of working memory, with its vector of ``model`` if any."""
        source, vector_columns = _vector_join(model)
        stmt = (
            sa.select(t.c.seq, t.c.search_text, *vector_columns)
            .select_from(source)
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
        row = (await self.db.execute(stmt)).first()
        if row is None or not row[1]:
            return None
        return NewestUser(
            seq=int(row[0]),
            text=row[1],
            dims=None if row[2] is None else int(row[2]),
            vector=None if row[3] is None else bytes(row[3]),
        )

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
        """The items of ``keys`` (live or archived)."""
        out: dict[Key, StoredItem] = {}
        by_session: dict[str, list[int]] = {}
        for session_id, seq in keys:
            by_session.setdefault(session_id, []).append(seq)
        for session_id, seqs in sorted(by_session.items()):
            stmt = sa.select(*ITEM_COLUMNS).where(
                t.c.tenant_id == tenant_id, t.c.session_id == session_id, t.c.seq.in_(seqs)
            )
            for r in (await self.db.execute(stmt)).all():
                item = item_of_row(r)
                out[(session_id, item.seq)] = item
        return out

    async def partners(
        self, tenant_id: str, session_id: str, call_ids: Sequence[str]
    ) -> list[StoredItem]:
        """The function calls and outputs of ``call_ids`` in one session (live or archived),
        by seq."""
        if not call_ids:
            return []
        stmt = (
            sa.select(*ITEM_COLUMNS)
            .where(
                t.c.tenant_id == tenant_id,
                t.c.session_id == session_id,
                t.c.call_id.in_(list(call_ids)),
                t.c.type.in_(("function_call", "function_call_output")),
            )
            .order_by(t.c.seq)
        )
        return [item_of_row(r) for r in (await self.db.execute(stmt)).all()]
