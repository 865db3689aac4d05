"""Pruning the history of a live session: archived items and events older than its retention,
automatic snapshots past theirs, and the event that says what went."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from app.domain.retention import SnapshotInfo
from app.store.retention.base import Pruned, RetentionBase, of_session
from app.store.tables import events, items, sessions, snapshots


class PruningQueries(RetentionBase):
    """Bounded deletes of a live session's old history."""

    async def prune_archive(
        self, tenant_id: str, session_id: str, *, before: datetime, limit: int
    ) -> Pruned:
        """Archived items appended before ``before`` (never a live one)."""

        def where(t: sa.FromClause) -> sa.ColumnElement[bool]:
            return sa.and_(
                of_session(t, tenant_id, session_id), t.c.archived, t.c.created_at < before
            )

        return await self._delete_bounded(items, "seq", where, limit=limit)

    async def prune_events(
        self, tenant_id: str, session_id: str, *, before: datetime, limit: int
    ) -> Pruned:
        def where(t: sa.FromClause) -> sa.ColumnElement[bool]:
            return sa.and_(of_session(t, tenant_id, session_id), t.c.created_at < before)

        return await self._delete_bounded(events, "seq", where, limit=limit)

    async def snapshot_infos(self, tenant_id: str, session_id: str) -> list[SnapshotInfo]:
        t = snapshots.c
        rows = await self.db.execute(
            sa.select(t.id, t.label, t.created_at).where(
                of_session(snapshots, tenant_id, session_id)
            )
        )
        return [SnapshotInfo(r[0], r[1], r[2]) for r in rows.all()]

    async def delete_snapshots(self, tenant_id: str, session_id: str, ids: Sequence[str]) -> Pruned:
        if not ids:
            return Pruned([], 0)

        def where(t: sa.FromClause) -> sa.ColumnElement[bool]:
            return sa.and_(of_session(t, tenant_id, session_id), t.c.id.in_(list(ids)))

        return await self._delete_bounded(snapshots, "id", where, limit=None)

    async def log_event(
        self,
        tenant_id: str,
        session_id: str,
        *,
        type: str,
        data: dict[str, Any],
        now: datetime,
    ) -> None:
        """An event that changes no working memory: ``event_seq`` moves, ``version`` does not
        (a client's ``If-Match`` and the projection caches stay valid)."""
        s = sessions.c
        row = (
            await self.db.execute(
                sa.update(sessions)
                .where(s.tenant_id == tenant_id, s.id == session_id)
                .values(event_seq=s.event_seq + 1)
                .returning(s.event_seq, s.version)
            )
        ).first()
        if row is None:
            return
        await self.db.execute(
            sa.insert(events).values(
                tenant_id=tenant_id,
                session_id=session_id,
                seq=row[0],
                type=type,
                version=row[1],
                request_id=None,
                actor=None,
                data=data,
                created_at=now,
            )
        )
