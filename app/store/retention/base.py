"""What every part of the retention repository shares: the tables that hold a session's rows,
how a row's stored bytes are measured, and the bounded deletes that erase and prune them.

What belongs to a session (``SESSION_TABLES``): its row, its items (live and archived; the
search index follows them: a Postgres expression index, SQLite's FTS5 table kept by triggers),
their vectors (``item_vectors``: deleted first, and by cascade wherever an item is), events,
snapshots, compactions and the idempotency records its writes stored.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from app.store.tables import (
    compactions,
    events,
    idempotency_keys,
    item_vectors,
    items,
    snapshots,
)

# The columns whose bytes a table's rows are measured by (texts and JSON as stored).
_SIZED: dict[str, tuple[str, ...]] = {
    "sessions": ("summary", "metadata", "config", "last_compaction"),
    "items": ("body", "metadata", "search_text"),
    "item_vectors": ("model", "vector"),
    "events": ("data",),
    "snapshots": ("label", "document"),
    "compactions": ("result",),
    "idempotency_keys": ("response",),
}
# The tables holding a session's rows other than its own, with the column naming the session,
# and the key ordering a bounded delete (None: deleted whole, they are small).
SESSION_CHILDREN: tuple[tuple[sa.Table, str | None], ...] = (
    (item_vectors, "seq"),  # before items: their rows name items (and would cascade anyway)
    (items, "seq"),
    (events, "seq"),
    (snapshots, "id"),
    (compactions, "id"),
    (idempotency_keys, None),
)
SESSION_TABLES = ("sessions", *(t.name for t, _ in SESSION_CHILDREN))


def row_bytes(dialect: str, table: sa.Table) -> sa.ColumnElement[int]:
    """The stored bytes of a row's texts and JSON (0 for NULLs)."""
    parts: list[sa.ColumnElement[Any]] = []
    for name in _SIZED[table.name]:
        column = table.c[name]
        text = sa.cast(column, sa.Text)
        if isinstance(column.type, sa.LargeBinary):  # bytes as they are, not as text
            measured = (
                sa.func.length(column) if dialect == "sqlite" else sa.func.octet_length(column)
            )
        elif dialect == "sqlite":
            measured = sa.func.length(sa.cast(text, sa.LargeBinary))
        else:
            measured = sa.func.octet_length(text)
        parts.append(sa.func.coalesce(measured, 0))
    total: sa.ColumnElement[int] = parts[0]
    for part in parts[1:]:
        total = total + part
    return total


def of_session(table: sa.FromClause, tenant_id: Any, session_id: Any) -> sa.ColumnElement[bool]:
    return sa.and_(table.c.tenant_id == tenant_id, table.c.session_id == session_id)


@dataclass(frozen=True, slots=True)
class Pruned:
    """What one bounded delete removed: the keys (seqs or ids) and their bytes."""

    keys: list[Any]
    bytes: int

    @property
    def rows(self) -> int:
        return len(self.keys)


class RetentionBase:
    """The connection, its dialect, and the bounded deletes the pruning and erasure parts share."""

    def __init__(self, db: AsyncConnection) -> None:
        self.db = db
        self.sqlite = db.dialect.name == "sqlite"

    async def _delete_bounded(
        self,
        table: sa.Table,
        key: str,
        where: Callable[[sa.FromClause], sa.ColumnElement[bool]],
        *,
        limit: int | None,
    ) -> Pruned:
        """Delete the rows matching ``where`` (at most ``limit``, lowest ``key`` first) and
        return their keys and bytes. ``where`` builds the condition on the table it is given
        (the table itself, or its alias in the subquery choosing the rows)."""
        target = where(table)
        if limit is not None:
            inner = table.alias("doomed")
            chosen = sa.select(inner.c[key]).where(where(inner)).order_by(inner.c[key]).limit(limit)
            target = sa.and_(target, table.c[key].in_(chosen.scalar_subquery()))
        stmt = (
            sa.delete(table)
            .where(target)
            .returning(table.c[key], row_bytes(self.db.dialect.name, table))
        )
        rows = (await self.db.execute(stmt)).all()
        return Pruned([r[0] for r in rows], sum(int(r[1] or 0) for r in rows))

    async def _delete_sized(self, table: sa.Table, where: sa.ColumnElement[bool]) -> Pruned:
        rows = (
            await self.db.execute(
                sa.delete(table).where(where).returning(row_bytes(self.db.dialect.name, table))
            )
        ).all()
        return Pruned([None] * len(rows), sum(int(r[0] or 0) for r in rows))
