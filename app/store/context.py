"""ContextRepository: the reads a projection makes, each bounded by the budget, not the session.

A projection reads, in one snapshot:

1. ``batch``: one statement, in batches until the window the budget needs is covered: the
   next live items' seq and stored counts (integers only, newest first, older than the
   previous batch), the seqs of the few older items that are mandatory whatever the budget
   (pinned, system/developer, the pinned prefix, the newest user message; each with the seqs
   of its live neighbours, so the runs of unloaded items between them need no further
   query), and
   the session's version, all seen by one snapshot. Each batch reads more keys than a window
   cut from it keeps: the key after the window is the newest live item older than it.
2. ``items``: the bodies of the window and of those mandatory items, decoded once per
   process (the item cache) and fetched from the database only for the seqs not decoded
   before (a stored item never changes, so they can be read after the batch chose them).

All of it goes through the partial indexes on live items.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from operator import itemgetter
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.asyncio import AsyncConnection

from app.domain.items import StoredItem
from app.domain.sessions import SessionState
from app.store.item_cache import ItemCache
from app.store.items import ITEM_COLUMNS, aggregate_sql, item_of_row, items_of_aggregate
from app.store.raw import DriverConnection, RawQuery
from app.store.sessions import SESSION_COLUMNS, state_of_json
from app.store.tables import items as t
from app.store.tables import sessions

_BODY_CHUNK = 1000


# The statements are built once: building one (aliases, column proxies, cache key) costs more
# than running it. Values are bound parameters.
def _of_session(table: sa.TableClause = t) -> sa.ColumnElement[bool]:
    c = table.c
    return sa.and_(
        c.tenant_id == sa.bindparam("tenant_id"), c.session_id == sa.bindparam("session_id")
    )


def _live(table: sa.TableClause = t) -> sa.ColumnElement[bool]:
    return sa.and_(_of_session(table), sa.not_(table.c.archived))


def _rows_for(at_least: int) -> int:
    """The smallest power of two >= ``at_least`` (32 at least): row counts are written into
    the statements' text, and this keeps them to a handful."""
    rows = 32
    while rows < at_least:
        rows *= 2
    return rows


def _session_version() -> sa.ScalarSelect[Any]:
    """The session row's version, as a column: the snapshot a statement saw, by name."""
    return (
        sa.select(sessions.c.version)
        .where(
            sessions.c.tenant_id == sa.bindparam("tenant_id"),
            sessions.c.id == sa.bindparam("session_id"),
        )
        .scalar_subquery()
    )


def _window_keys_statement(*, bounded: bool, rows: int) -> sa.Select[Any]:
    """The newest ``rows`` live items' (seq, tokens, chars), older than ``:before_seq`` if
    ``bounded``. The row count is part of the SQL text, not a parameter: Postgres then plans
    the prepared statement once (a generic plan) instead of on every execution, which cost
    more than running it."""
    inner = t.alias("first_live")
    first_live = sa.select(sa.func.min(inner.c.seq)).where(_live(inner)).scalar_subquery()
    where = [_live()]
    if bounded:
        where.append(t.c.seq < sa.bindparam("before_seq"))
    return (
        sa.select(t.c.seq, t.c.tokens, t.c.chars, first_live, _session_version())
        .where(*where)
        .order_by(t.c.seq.desc())
        .limit(sa.literal_column(str(int(rows))))
    )


def _mandatory_statement(
    *, include_system: bool, with_prefix: bool, window_start: sa.ColumnElement[Any]
) -> sa.Select[Any]:
    """The seqs of the mandatory items older than ``window_start``, each with its live
    neighbours' seqs (the bodies come from the item cache, or by seq: items never change)."""
    conditions: list[sa.ColumnElement[bool]] = [t.c.pinned]
    if include_system:
        # literal values: the partial index on mandatory items names these roles
        conditions.append(
            t.c.role.in_([sa.literal_column("'system'"), sa.literal_column("'developer'")])
        )
    user = t.alias("newest_user")
    newest_user = (
        sa.select(sa.func.max(user.c.seq))
        .where(_live(user), user.c.role == "user", user.c.type == "message")
        .scalar_subquery()
    )
    conditions.append(t.c.seq == newest_user)
    if with_prefix:
        head = t.alias("prefix")
        prefix = (
            sa.select(head.c.seq)
            .where(_live(head))
            .order_by(head.c.seq)
            .limit(sa.bindparam("prefix_items"))
            .scalar_subquery()
        )
        conditions.append(t.c.seq.in_(prefix))
    before = t.alias("before")
    after = t.alias("after")
    previous_live = (
        sa.select(sa.func.max(before.c.seq))
        .where(_live(before), before.c.seq < t.c.seq)
        .scalar_subquery()
    )
    next_live = (
        sa.select(sa.func.min(after.c.seq))
        .where(_live(after), after.c.seq > t.c.seq)
        .scalar_subquery()
    )
    return sa.select(t.c.seq, previous_live, next_live).where(
        _live(), t.c.seq < window_start, sa.or_(*conditions)
    )


_CREATED_AT = ITEM_COLUMNS.index(t.c.created_at)


def _batch_statement(*, include_system: bool, with_prefix: bool, rows: int, bounded: bool) -> Any:
    """One statement (one snapshot, one round trip) per batch of a read: the newest ``rows``
    keys (older than ``:before_seq`` if ``bounded``; kind 0) and the mandatory items older
    than the newest ``rows // 2`` of them (kind 1). A window cut from the batch keeps between
    ``rows // 2`` and ``rows - 1`` of its keys, so the mandatory part covers everything older
    than the window, plus a few mandatory items inside it, which the caller drops. Columns:
    kind, seq, tokens, chars, previous and next live seq, session version, first live seq
    (NULL where they do not apply: the keys carry counts and the version, the mandatory rows
    their neighbours). Only integers: a batch is as narrow as the keys. Counts are written
    into the text, so Postgres plans each statement once."""
    where = [_live()]
    if bounded:
        where.append(t.c.seq < sa.bindparam("before_seq"))
    newest = (
        sa.select(t.c.seq)
        .where(*where)
        .order_by(t.c.seq.desc())
        .limit(sa.literal_column(str(rows // 2)))
        .subquery("newest")
    )
    bound = sa.select(sa.func.min(newest.c.seq)).scalar_subquery()
    mandatory = _mandatory_statement(
        include_system=include_system, with_prefix=with_prefix, window_start=bound
    ).subquery("mandatory")
    keys = _window_keys_statement(bounded=bounded, rows=rows).subquery("keys")
    seq, tokens, chars, first_live, version = keys.c
    m_seq, previous_live, next_live = mandatory.c
    null = sa.null()
    return sa.union_all(
        sa.select(
            sa.literal_column("1").label("kind"), m_seq.label("seq"), null.label("tokens"),
            null.label("chars"), previous_live.label("previous_live"),
            next_live.label("next_live"), null.label("version"), null.label("first_live"),
        ),
        sa.select(sa.literal_column("0"), seq, tokens, chars, null, null, version, first_live),
    )  # fmt: skip


_BATCHES: dict[tuple[bool, bool, int, bool], RawQuery] = {}
_SEQ = itemgetter(1)
_KEY_COLUMNS = itemgetter(1, 2, 3)  # seq, tokens, chars

_VERSION = RawQuery(sa.select(_session_version()))


def _bodies(*, live_only: bool) -> RawQuery:
    """Items by seq. ``live_only=False``: archived ones too; a stored item never changes
    (archiving only flips its flag), so they can be read after the statement that decided
    which seqs are wanted."""
    scope = _live() if live_only else _of_session()
    return RawQuery(
        sa.select(*ITEM_COLUMNS).where(scope, t.c.seq.in_(sa.bindparam("seqs", expanding=True))),
        postgres=sa.select(*ITEM_COLUMNS).where(
            scope, t.c.seq == sa.any_(sa.bindparam("seqs", type_=ARRAY(sa.BigInteger)))
        ),
        utc_columns=[_CREATED_AT],
    )


_BODIES = _bodies(live_only=True)
_ANY_BODIES = _bodies(live_only=False)


def _aggregated_bodies(*, live_only: bool) -> RawQuery:
    """``_bodies`` on Postgres: the rows as one JSON text (``items.aggregate_sql``)."""
    # The seqs travel as one array literal (``'{1,2,3}'``) that Postgres parses: psycopg
    # dumps a Python list element by element in Python, which cost more than the rest of the
    # statement on the client (0.2 ms for 160 seqs).
    where = (
        "tenant_id = :tenant_id AND session_id = :session_id "
        "AND seq = ANY(CAST(:seqs AS bigint[]))"
    )
    if live_only:
        where += " AND NOT archived"
    return RawQuery(sa.text(aggregate_sql(where)))


_AGGREGATED = {live: _aggregated_bodies(live_only=live) for live in (True, False)}


@dataclass(frozen=True, slots=True)
class WindowKeys:
    """A batch of the window, newest first: ``(seq, tokens, chars)`` per live item.

    ``older_seq``: the newest live item older than the batch (None: the batch reaches the
    oldest live item). ``first_live_seq``: the oldest live item of the session.
    ``session_version``: the session row's version in the same snapshot (None: no session)."""

    rows: list[tuple[int, int, int]]
    older_seq: int | None
    first_live_seq: int | None
    session_version: int | None


@dataclass(frozen=True, slots=True)
class Older:
    """The mandatory items older than the window (their seqs, ascending) and the unloaded runs
    around them."""

    seqs: list[int]
    runs: list[tuple[int, int]]


@dataclass(frozen=True, slots=True)
class Batch:
    """One statement of a read (``ContextRepository.batch``): the next live items'
    ``(seq, tokens, chars)``, newest first, and the mandatory rows older than the newest
    ``min_window`` of them (ascending). Any window of ``min_window`` to ``max_window`` keys
    can be cut from it: the key after the window names the next older item, and every
    mandatory item older than the window is among the rows."""

    keys: list[tuple[int, int, int]]
    mandatory: list[tuple[int, int | None, int | None]]  # seq, previous and next live seq
    first_live_seq: int | None
    session_version: int | None
    min_window: int
    max_window: int

    def split(self, size: int) -> tuple[WindowKeys, Older]:
        """The window of the newest ``size`` keys (``min_window <= size <= max_window``) and
        the mandatory items older than it."""
        assert self.min_window <= size <= self.max_window
        keys = self.keys
        window = WindowKeys(
            rows=keys[:size],
            older_seq=keys[size][0] if len(keys) > size else None,
            first_live_seq=self.first_live_seq,
            session_version=self.session_version,
        )
        if window.older_seq is None:
            return window, Older(seqs=[], runs=[])
        start = window.rows[-1][0]
        return window, _older(window, start, [r for r in self.mandatory if r[0] < start])


class ContextRepository:
    def __init__(
        self,
        db: AsyncConnection | DriverConnection,
        tenant_id: str,
        session_id: str,
        *,
        session_created_at: datetime,
        cache: ItemCache | None = None,
    ) -> None:
        self.db = db
        self.tenant_id = tenant_id
        self.session_id = session_id
        self.session_created_at = session_created_at
        self.cache = cache
        self._scope = {"tenant_id": tenant_id, "session_id": session_id}

    async def batch(
        self,
        *,
        before_seq: int | None = None,
        limit: int,
        include_system: bool,
        prefix_items: int,
    ) -> Batch:
        """The newest keys older than ``before_seq`` (None: the newest of all; at least
        ``limit + 1`` of them, as many as the statement's row count) and the mandatory items
        older than the newest half of them, in one statement (so one snapshot):
        ``Batch.split`` cuts a window of a size it allows and gives the mandatory items older
        than it. The mandatory part only counts for the batch the window ends in."""
        rows = _rows_for(limit + 1)
        bounded = before_seq is not None
        variant = (include_system, prefix_items > 0, rows, bounded)
        query = _BATCHES.get(variant)
        if query is None:
            query = _BATCHES[variant] = RawQuery(
                _batch_statement(
                    include_system=include_system,
                    with_prefix=prefix_items > 0,
                    rows=rows,
                    bounded=bounded,
                ),
            )
        params: dict[str, Any] = dict(self._scope)
        if prefix_items > 0:
            params["prefix_items"] = prefix_items
        if bounded:
            params["before_seq"] = before_seq
        found = await query.rows(self.db, params)
        batch = _batch_of(found, rows)
        if batch.session_version is None:  # no live item: the version needs a statement
            return dataclasses.replace(batch, session_version=await self.session_version())
        return batch

    async def session_version(self) -> int | None:
        rows = await _VERSION.rows(self.db, self._scope)
        return rows[0][0] if rows else None

    async def items(self, seqs: Sequence[int], *, live_only: bool = True) -> list[StoredItem]:
        """The live items with these seqs, in the order given; decoded bodies come from the
        cache, keyed by the session's creation time and the seq. A seq is never reused within a
        session (``last_seq`` only grows, archived items keep theirs) and a session deleted and
        created again has another creation time, so a cached item is never stale.
        ``live_only=False``: also archived ones (the seqs were chosen in an earlier statement
        and an item's content never changes)."""
        found: dict[int, StoredItem] = {}
        missing: list[int] = []
        cache = self.cache
        base = (self.tenant_id, self.session_id, self.session_created_at)
        if cache is None:
            missing = list(seqs)
        else:
            found, missing = cache.get_many(base, seqs)
        postgres = self.db.dialect.name == "postgresql"
        for start in range(0, len(missing), _BODY_CHUNK):
            chunk = missing[start : start + _BODY_CHUNK]
            if postgres:
                params = {**self._scope, "seqs": "{" + ",".join(map(str, chunk)) + "}"}
                rows = await _AGGREGATED[live_only].rows(self.db, params)
                decoded = items_of_aggregate(rows[0][0])
            else:
                stmt = _BODIES if live_only else _ANY_BODIES
                params = {**self._scope, "seqs": chunk}
                decoded = [item_of_row(row) for row in await stmt.rows(self.db, params)]
            for item in decoded:
                found[item.seq] = item
                if cache is not None:
                    cache.put((*base, item.seq), item)
        return [found[seq] for seq in seqs if seq in found]


def _batch_of(found: Sequence[Any], rows: int) -> Batch:
    """A ``Batch`` from the rows of a batch statement of ``rows`` keys (other kinds of row
    ignored); ``session_version`` None when no key came (the keys carry it)."""
    # (sorted here: the union's order is not SQL's promise; the key functions run in C)
    keys = [r for r in found if r[0] == 0]
    keys.sort(key=_SEQ, reverse=True)
    version, first_live = (keys[0][6], keys[0][7]) if keys else (None, None)
    mandatory = sorted((r[1], r[4], r[5]) for r in found if r[0] == 1)
    return Batch(
        keys=list(map(_KEY_COLUMNS, keys)),
        mandatory=mandatory,
        first_live_seq=first_live,
        session_version=version,
        # the mandatory part covers what is older than the newest rows // 2 keys
        min_window=min(rows // 2, len(keys)),
        max_window=len(keys) - 1 if len(keys) == rows else len(keys),
    )


@dataclass(frozen=True, slots=True)
class FirstBatch:
    """What a read's first batch is asked for: whether system messages are mandatory, the
    pinned prefix, and at least how many keys (``ContextRepository.batch``'s arguments)."""

    include_system: bool
    prefix_items: int
    limit: int

    @property
    def rows(self) -> int:
        return _rows_for(self.limit + 1)


_WITH_SESSION: dict[tuple[bool, bool, int], RawQuery] = {}


def _with_session_statement(*, include_system: bool, with_prefix: bool, rows: int) -> Any:
    """The session row (kind 2; its columns as one JSON array, in ``SESSION_COLUMNS`` order,
    in the last column) and a first batch (``_batch_statement``), in one statement."""
    batch = _batch_statement(
        include_system=include_system, with_prefix=with_prefix, rows=rows, bounded=False
    ).subquery("batch")
    null = sa.null()
    names = ("seq", "tokens", "chars", "previous_live", "next_live", "version", "first_live")
    row = (
        sa.select(
            sa.literal_column("2").label("kind"), *(null.label(name) for name in names),
            sa.func.json_build_array(*SESSION_COLUMNS).label("session"),
        )
        .where(
            sessions.c.tenant_id == sa.bindparam("tenant_id"),
            sessions.c.id == sa.bindparam("session_id"),
        )
    )  # fmt: skip
    return sa.union_all(row, sa.select(*batch.c, null))


async def session_with_batch(
    db: DriverConnection | AsyncConnection, tenant_id: str, session_id: str, first: FirstBatch
) -> tuple[SessionState | None, Batch]:
    """The session row and a first batch of its context read, in one statement (one round
    trip, one snapshot): for a read that knows what its first batch will be (the same
    session read before with the same budget). Postgres only."""
    rows = first.rows
    with_prefix = first.prefix_items > 0
    variant = (first.include_system, with_prefix, rows)
    query = _WITH_SESSION.get(variant)
    if query is None:
        query = _WITH_SESSION[variant] = RawQuery(
            _with_session_statement(
                include_system=first.include_system, with_prefix=with_prefix, rows=rows
            )
        )
    params: dict[str, Any] = {"tenant_id": tenant_id, "session_id": session_id}
    if with_prefix:
        params["prefix_items"] = first.prefix_items
    found = await query.rows(db, params)
    state = next((state_of_json(r[8]) for r in found if r[0] == 2), None)
    batch = _batch_of(found, rows)
    if batch.session_version is None and state is not None:
        batch = dataclasses.replace(batch, session_version=state.version)
    return state, batch


def _older(window: WindowKeys, window_start: int, rows: Sequence[tuple[int, Any, Any]]) -> Older:
    """Mandatory rows (seq, previous live seq, next live seq; ascending) and the runs of live
    items between them that are not loaded: a run lies between two consecutive loaded items
    (or before the first), from the live item after the earlier one to the live item before
    the later one."""
    runs: list[tuple[int, int]] = []
    start = window.first_live_seq
    for seq, previous, following in [*rows, (window_start, window.older_seq, None)]:
        if start is not None and previous is not None and start < seq:
            runs.append((int(start), int(previous)))
        start = following
    return Older(seqs=[int(row[0]) for row in rows], runs=runs)
