"""EventRepository: the append-only operation log of each session."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from app.store.tables import events as t


@dataclass(frozen=True, slots=True)
class EventRecord:
    seq: int
    type: str
    version: int
    request_id: str | None
    actor: str | None
    data: dict[str, Any]
    created_at: datetime


class EventRepository:
    def __init__(self, db: AsyncConnection) -> None:
        self.db = db

    async def insert(self, tenant_id: str, session_id: str, events: list[EventRecord]) -> None:
        if not events:
            return
        await self.db.execute(
            sa.insert(t),
            [
                {
                    "tenant_id": tenant_id,
                    "session_id": session_id,
                    "seq": e.seq,
                    "type": e.type,
                    "version": e.version,
                    "request_id": e.request_id,
                    "actor": e.actor,
                    "data": e.data,
                    "created_at": e.created_at,
                }
                for e in events
            ],
        )

    async def list(
        self, tenant_id: str, session_id: str, *, after_seq: int | None, limit: int
    ) -> list[EventRecord]:
        stmt = sa.select(
            t.c.seq, t.c.type, t.c.version, t.c.request_id, t.c.actor, t.c.data, t.c.created_at
        ).where(t.c.tenant_id == tenant_id, t.c.session_id == session_id)
        if after_seq is not None:
            stmt = stmt.where(t.c.seq > after_seq)
        stmt = stmt.order_by(t.c.seq).limit(limit)
        return [EventRecord(**r._mapping) for r in (await self.db.execute(stmt)).all()]
