"""CompactionRepository: every SQL statement on a session's past compact results.

Rows are written once (by the compaction commit, in its transaction) and never updated; they
go away with their session. Listing is newest first, ``(created_at, id)`` descending, with the
last seen id as the cursor.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from app.domain.compaction import CompactResult
from app.store.tables import compactions as t


class CompactionRepository:
    def __init__(self, db: AsyncConnection) -> None:
        self.db = db

    def _session(self, tenant_id: str, session_id: str) -> sa.ColumnElement[bool]:
        return sa.and_(t.c.tenant_id == tenant_id, t.c.session_id == session_id)

    async def insert(self, tenant_id: str, session_id: str, result: CompactResult) -> None:
        await self.db.execute(
            sa.insert(t).values(
                tenant_id=tenant_id,
                session_id=session_id,
                id=result.id,
                policy=result.policy,
                result=result.model_dump(mode="json"),
                created_at=result.created_at,
            )
        )

    async def list(
        self, tenant_id: str, session_id: str, *, before_id: str | None, limit: int
    ) -> list[CompactResult]:
        """Newest first; ``before_id`` continues after that compaction (an unknown id: empty)."""
        stmt = sa.select(t.c.result).where(self._session(tenant_id, session_id))
        if before_id is not None:
            anchor = (
                await self.db.execute(
                    sa.select(t.c.created_at).where(
                        self._session(tenant_id, session_id), t.c.id == before_id
                    )
                )
            ).scalar()
            if anchor is None:
                return []
            stmt = stmt.where(
                sa.or_(
                    t.c.created_at < anchor,
                    sa.and_(t.c.created_at == anchor, t.c.id < before_id),
                )
            )
        stmt = stmt.order_by(t.c.created_at.desc(), t.c.id.desc()).limit(limit)
        rows: list[Any] = [r[0] for r in (await self.db.execute(stmt)).all()]
        return [CompactResult.model_validate(row) for row in rows]
