"""RecallRepository: the SQL behind recall (DESIGN §10): the newest user message (the default
query), the best full-text candidates, other sessions' vectors, the recalled items and the
calls and outputs that may pair with them.

A recall candidate is an item with a search text that is a user or assistant message, a
function call or a function call output (never reasoning, system or developer items), and
either from this session and not in its prompt, or from one of the other sessions named
(scope ``prefix``: live or archived). "Not in its prompt" is exact: the prompt's own items
(their seqs, ``Held``) and archived copies of them (restore re-inserts copies under the same
item ids) are left out, and so is every item newer than the state the prompt was projected
from (``Held.last_seq``: seqs only grow), so a write landing between the projection and
recall neither repeats a prompt item nor brings in one the prompt never saw.

Every statement is bounded by the request, never by the session's, prefix's or tenant's size:
the full-text candidates are the ``limit`` best matches (ranked and cut by the database),
other sessions' vectors at most ``limit`` rows, the items read are the ones asked for, and
the pairing rows only those of the same ``call_id`` within ``PAIR_WINDOW`` seqs of a hit.
(This session's vectors come from the process's cache, app.services.session_vectors.) Lists
of seqs and ids travel as one parameter (a Postgres array, a JSON array read by SQLite's
``json_each``), whatever their length.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.ext.asyncio import AsyncConnection

from app.domain.items import StoredItem
from app.embeddings.cache import Stamp
from app.store.items import ITEM_COLUMNS, item_of_row
from app.store.search import match_scores
from app.store.tables import item_vectors as v
from app.store.tables import items as t
from app.store.tables import sessions as s
from app.store.vectors import PackedVectors, stamp_columns, stamp_of

# A call and the outputs answering it are looked for within this many seqs of a recalled one
# (the rows of the same ``call_id`` in that span, which the pairing rule needs): keys repeat
# every turn (Gemini's derived ids), so the read must not grow with the session.
PAIR_WINDOW = 256
# ... and read whole within this many seqs of it (a call's output follows it closely: parallel
# calls, then their outputs), beyond that only by the pairing rule's light rows.
NEAR_BODIES = 8

Key = tuple[str, int]  # (session_id, seq)


@dataclass(frozen=True, slots=True)
class Held:
    """What recall must not bring back of the session being projected: the items the prompt
    holds (``seqs``; ``ids``: their item ids, whose archived copies are left out too) and
    everything newer than the state the prompt was projected from (``last_seq``)."""

    session_id: str
    last_seq: int
    seqs: tuple[int, ...]
    ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class RecallHead:
    """What a recall read needs first: the newest user message of working memory (the
    default query; None when there is none) and the session's vector stamp of the model and
    size (``app.store.vectors.stamp_columns``; None without a model)."""

    newest_seq: int | None
    newest_text: str | None
    stamp: Stamp | None


@dataclass(frozen=True, slots=True)
class RecalledItem:
    item: StoredItem
    archived: bool


@dataclass(frozen=True, slots=True)
class PairingRow:
    """A call or output of one ``call_id``: what the pairing rule reads."""

    key: Key
    is_call: bool
    call_id: str
    archived: bool


def _recallable(c: Any = t) -> sa.ColumnElement[bool]:
    return sa.and_(
        c.c.search_text.is_not(None),
        c.c.search_text != "",
        sa.or_(
            sa.and_(c.c.type == "message", c.c.role.in_(("user", "assistant"))),
            c.c.type.in_(("function_call", "function_call_output")),
        ),
    )


def _in(dialect: str, column: Any, values: Sequence[Any], name: str, *, ints: bool) -> Any:
    """``column IN values`` with the values as one parameter (a prompt may hold thousands)."""
    if dialect == "postgresql":
        kind = sa.BigInteger if ints else sa.Text
        return column == sa.any_(sa.bindparam(name, list(values), type_=postgresql.ARRAY(kind)))
    each = sa.func.json_each(sa.bindparam(name, json.dumps(list(values)))).table_valued("value")
    return column.in_(sa.select(each.c.value))


def _held_filter(dialect: str, c: Any, held: Held) -> sa.ColumnElement[bool]:
    """True for the rows of ``c`` (an alias of items) that recall may bring back of the held
    session, or that belong to another session."""
    own = [c.c.seq <= held.last_seq]
    if held.seqs:
        own.append(sa.not_(_in(dialect, c.c.seq, held.seqs, "held_seqs", ints=True)))
    if held.ids:
        copy = sa.and_(c.c.archived, _in(dialect, c.c.item_id, held.ids, "held_ids", ints=False))
        own.append(sa.not_(copy))
    return sa.or_(c.c.session_id != held.session_id, sa.and_(*own))


class RecallRepository:
    def __init__(self, db: AsyncConnection) -> None:
        self.db = db

    @property
    def _dialect(self) -> str:
        return self.db.dialect.name

    async def head(
        self, tenant_id: str, session_id: str, *, model: str | None, dims: int = 0, last_seq: int
    ) -> RecallHead:
        """``RecallHead`` in one statement (scalar subqueries, no FROM), as of ``last_seq``
        (the newest user message the prompt holds, not one appended since)."""
        newest = (
            sa.select(t.c.seq, t.c.search_text)
            .where(
                t.c.tenant_id == tenant_id,
                t.c.session_id == session_id,
                sa.not_(t.c.archived),
                t.c.type == "message",
                t.c.role == "user",
                t.c.seq <= last_seq,
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

    async def fulltext(
        self,
        tenant_id: str,
        query: str,
        *,
        held: Held,
        others: Sequence[str],
        limit: int,
    ) -> list[tuple[Key, float]]:
        """The ``limit`` best full-text matches of ``query`` among the candidates (this
        session's, less what ``held`` names, and those of ``others``), best first as search
        orders them (score, then session id, then newest seq first)."""
        matches = match_scores(self._dialect, tenant_id, query, [held.session_id, *others])
        if matches is None:
            return []
        m = matches.subquery("matches")
        c = sa.alias(t, "candidate")
        stmt = (
            sa.select(m.c.session_id, m.c.seq, m.c.score)
            .select_from(
                m.join(
                    c,
                    sa.and_(
                        c.c.tenant_id == tenant_id,
                        c.c.session_id == m.c.session_id,
                        c.c.seq == m.c.seq,
                    ),
                )
            )
            .where(_recallable(c), _held_filter(self._dialect, c, held))
            .order_by(m.c.score.desc(), m.c.session_id, m.c.seq.desc())
            .limit(limit)
        )
        rows = (await self.db.execute(stmt)).all()
        return [((r[0], int(r[1])), float(r[2])) for r in rows]

    async def others_packed(
        self, tenant_id: str, others: Sequence[str], *, model: str, dims: int, limit: int
    ) -> PackedVectors:
        """At most ``limit`` vectors of ``model`` of recallable items of the ``others``
        sessions (live or archived): the first the database yields, as tenant-wide search
        bounds its scan without an ANN index."""
        stmt = (
            sa.select(v.c.session_id, v.c.seq, v.c.vector)
            .select_from(
                v.join(
                    t,
                    sa.and_(
                        t.c.tenant_id == v.c.tenant_id,
                        t.c.session_id == v.c.session_id,
                        t.c.seq == v.c.seq,
                    ),
                )
            )
            .where(
                v.c.tenant_id == tenant_id,
                v.c.session_id.in_(list(others)),
                v.c.model == model,
                v.c.dims == dims,
                _recallable(),
            )
            .limit(limit)
        )
        rows = (await self.db.execute(stmt)).all()
        return PackedVectors(
            keys=[(r[0], int(r[1])) for r in rows], blobs=[bytes(r[2]) for r in rows], dims=dims
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

    async def items(
        self, tenant_id: str, keys: Sequence[Key], *, held: Held
    ) -> tuple[dict[Key, RecalledItem], list[PairingRow], dict[Key, StoredItem]]:
        """In one statement: the recallable items of ``keys`` (live or archived) that ``held``
        does not name; for those that are calls or outputs, the calls and outputs of the same
        ``call_id`` within ``PAIR_WINDOW`` seqs of each (this session's only as of
        ``held.last_seq``), ascending by session and seq: what the pairing rule reads; and
        the items among those within ``NEAR_BODIES`` seqs of a hit (where a call's partner
        almost always is), so that pairing rarely needs a statement more (``bodies``)."""
        by_session: dict[str, list[int]] = {}
        for session_id, seq in keys:
            by_session.setdefault(session_id, []).append(seq)
        if not by_session:
            return {}, [], {}
        of_keys = sa.or_(
            *(
                sa.and_(t.c.session_id == session_id, t.c.seq.in_(seqs))
                for session_id, seqs in sorted(by_session.items())
            )
        )
        pairs = ("function_call", "function_call_output")
        found = (
            sa.select(
                sa.literal(0).label("kind"),
                *ITEM_COLUMNS,
                t.c.session_id,
                t.c.archived,
                t.c.type,
                t.c.call_id,
            )
            .where(t.c.tenant_id == tenant_id, of_keys, _recallable())
            .where(_held_filter(self._dialect, t, held))
        )
        hits = (
            sa.select(t.c.session_id, t.c.seq, t.c.call_id)
            .where(t.c.tenant_id == tenant_id, of_keys, t.c.type.in_(pairs))
            .subquery("hits")
        )
        near = sa.alias(t, "near")
        close = sa.func.abs(near.c.seq - hits.c.seq) <= NEAR_BODIES
        bodies = [
            sa.case((close, near.c[column.name]), else_=sa.cast(sa.null(), column.type))
            for column in ITEM_COLUMNS[1:]
        ]
        rows = (
            sa.select(
                sa.case((close, sa.literal(2)), else_=sa.literal(1)),
                near.c.seq,
                *bodies,
                near.c.session_id,
                near.c.archived,
                near.c.type,
                near.c.call_id,
            )  # fmt: skip
            .select_from(
                near.join(
                    hits,
                    sa.and_(
                        near.c.tenant_id == tenant_id,
                        near.c.session_id == hits.c.session_id,
                        near.c.call_id == hits.c.call_id,
                        near.c.seq.between(hits.c.seq - PAIR_WINDOW, hits.c.seq + PAIR_WINDOW),
                    ),
                )
            )
            .where(
                near.c.type.in_(pairs),
                sa.or_(near.c.session_id != held.session_id, near.c.seq <= held.last_seq),
            )
        )  # (a row near two hits comes twice: the set below keeps it once)
        out: dict[Key, RecalledItem] = {}
        pairing: set[PairingRow] = set()
        nearby: dict[Key, StoredItem] = {}
        for r in (await self.db.execute(sa.union_all(found, rows))).all():
            key = (r[10], int(r[1]))
            if r[0] == 0:
                out[key] = RecalledItem(item_of_row(r[1:]), bool(r[11]))
                continue
            pairing.add(PairingRow(key, r[12] == "function_call", r[13], bool(r[11])))
            if r[0] == 2 and key not in nearby:
                nearby[key] = item_of_row(r[1:])
        return out, sorted(pairing, key=lambda row: row.key), nearby

    async def bodies(self, tenant_id: str, keys: Sequence[Key]) -> dict[Key, StoredItem]:
        """The items of ``keys``, live or archived, in one statement."""
        if not keys:
            return {}
        by_session: dict[str, list[int]] = {}
        for session_id, seq in keys:
            by_session.setdefault(session_id, []).append(seq)
        stmt = sa.select(*ITEM_COLUMNS, t.c.session_id).where(
            t.c.tenant_id == tenant_id,
            sa.or_(
                *(
                    sa.and_(t.c.session_id == session_id, t.c.seq.in_(seqs))
                    for session_id, seqs in sorted(by_session.items())
                )
            ),
        )
        out: dict[Key, StoredItem] = {}
        for r in (await self.db.execute(stmt)).all():
            item = item_of_row(r)
            out[(r[9], item.seq)] = item
        return out
