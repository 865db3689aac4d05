"""SnapshotRepository: every SQL statement on a session's snapshots (frozen state documents).

A snapshot's ``version`` is the session version whose state it captured; a session version
captures at most one snapshot, so ``version`` orders a session's snapshots (newest first) and
serves as their cursor.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from app import jsonutil
from app.store.tables import snapshots as t


@dataclass(frozen=True, slots=True)
class SnapshotRecord:
    id: str
    label: str | None
    version: int
    item_count: int
    created_at: datetime


_COLUMNS = [t.c.id, t.c.label, t.c.version, t.c.item_count, t.c.created_at]


class SnapshotRepository:
    def __init__(self, db: AsyncConnection) -> None:
        self.db = db

    def _session(self, tenant_id: str, session_id: str) -> sa.ColumnElement[bool]:
        return sa.and_(t.c.tenant_id == tenant_id, t.c.session_id == session_id)

    async def insert(
        self,
        tenant_id: str,
        session_id: str,
        record: SnapshotRecord,
        *,
        document: dict[str, Any],
    ) -> None:
        await self.db.execute(
            sa.insert(t).values(
                tenant_id=tenant_id,
                session_id=session_id,
                id=record.id,
                label=record.label,
                version=record.version,
                item_count=record.item_count,
                document=jsonutil.dumps(document),
                created_at=record.created_at,
            )
        )

    async def list(
        self, tenant_id: str, session_id: str, *, before_version: int | None, limit: int
    ) -> list[SnapshotRecord]:
        """Newest first."""
        stmt = sa.select(*_COLUMNS).where(self._session(tenant_id, session_id))
        if before_version is not None:
            stmt = stmt.where(t.c.version < before_version)
        stmt = stmt.order_by(t.c.version.desc(), t.c.id.desc()).limit(limit)
        return [SnapshotRecord(**r._mapping) for r in (await self.db.execute(stmt)).all()]

    async def get(self, tenant_id: str, session_id: str, snapshot_id: str) -> SnapshotRecord | None:
        stmt = sa.select(*_COLUMNS).where(
            self._session(tenant_id, session_id), t.c.id == snapshot_id
        )
        row = (await self.db.execute(stmt)).first()
        return SnapshotRecord(**row._mapping) if row else None

    async def document(
        self, tenant_id: str, session_id: str, snapshot_id: str
    ) -> dict[str, Any] | None:
        stmt = sa.select(t.c.document).where(
            self._session(tenant_id, session_id), t.c.id == snapshot_id
        )
        text = (await self.db.execute(stmt)).scalar()
        return None if text is None else jsonutil.loads(text)

    async def delete(self, tenant_id: str, session_id: str, snapshot_id: str) -> bool:
        result = await self.db.execute(
            sa.delete(t).where(self._session(tenant_id, session_id), t.c.id == snapshot_id)
        )
        return bool(result.rowcount)
