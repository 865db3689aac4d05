"""Storage accounting: rows and bytes of a session's (or a tenant's) working memory, archive,
snapshots and events."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from app.store.retention.base import RetentionBase, of_session, row_bytes
from app.store.tables import events, items, sessions, snapshots


@dataclass(frozen=True, slots=True)
class Usage:
    rows: int = 0
    bytes: int = 0


class StorageAccounting(RetentionBase):
    """What a session or a tenant stores."""

    async def session_storage(self, tenant_id: str, session_id: str) -> dict[str, Usage]:
        """Rows and bytes of working memory, archive, snapshots and events (one statement)."""
        statement = _session_storage_statement(self.db.dialect.name)
        params = {"tenant_id": tenant_id, "session_id": session_id}
        rows = (await self.db.execute(statement, params)).all()
        return _usage(rows)

    async def tenant_storage(self, tenant_id: str) -> dict[str, Usage]:
        """The same, added up over the tenant's sessions, plus their count."""
        parts = [
            sa.select(
                sa.case((items.c.archived, "archive"), else_="working_memory").label("kind"),
                sa.func.count().label("rows"),
                sa.func.coalesce(sa.func.sum(row_bytes(self.db.dialect.name, items)), 0).label(
                    "bytes"
                ),
            )
            .where(items.c.tenant_id == tenant_id)
            .group_by(items.c.archived),
        ]
        for table in (snapshots, events, sessions):
            parts.append(
                sa.select(
                    sa.literal(table.name).label("kind"),
                    sa.func.count().label("rows"),
                    sa.func.coalesce(sa.func.sum(row_bytes(self.db.dialect.name, table)), 0).label(
                        "bytes"
                    ),
                ).where(table.c.tenant_id == tenant_id)
            )
        rows = (await self.db.execute(sa.union_all(*parts))).all()
        return _usage(rows)


@functools.cache
def _session_storage_statement(dialect: str) -> sa.CompoundSelect:
    """Built once per backend (building it costs more than running it: GET of a session is a
    hot read), with the tenant and session as bind parameters."""
    tenant_id, session_id = sa.bindparam("tenant_id"), sa.bindparam("session_id")
    parts = [
        sa.select(
            sa.case((items.c.archived, "archive"), else_="working_memory").label("kind"),
            sa.func.count().label("rows"),
            sa.func.coalesce(sa.func.sum(row_bytes(dialect, items)), 0).label("bytes"),
        )
        .where(of_session(items, tenant_id, session_id))
        .group_by(items.c.archived),
    ]
    for table in (snapshots, events):
        parts.append(
            sa.select(
                sa.literal(table.name).label("kind"),
                sa.func.count().label("rows"),
                sa.func.coalesce(sa.func.sum(row_bytes(dialect, table)), 0).label("bytes"),
            ).where(of_session(table, tenant_id, session_id))
        )
    return sa.union_all(*parts)


def _usage(rows: Iterable[Sequence[Any]]) -> dict[str, Usage]:
    out: dict[str, Usage] = {}
    for kind, count, size in rows:
        if count:
            out[kind] = Usage(int(count), int(size or 0))
    return out
