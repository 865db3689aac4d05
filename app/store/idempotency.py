"""IdempotencyRepository: stored responses of POSTs sent with an ``Idempotency-Key``."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from app.store.tables import idempotency_keys as t


@dataclass(frozen=True, slots=True)
class StoredResponse:
    request_hash: str
    status_code: int
    response: str
    expires_at: datetime | None = None


class IdempotencyRepository:
    def __init__(self, db: AsyncConnection) -> None:
        self.db = db

    def _key(self, tenant_id: str, method: str, path: str, key: str) -> sa.ColumnElement[bool]:
        return sa.and_(
            t.c.tenant_id == tenant_id, t.c.method == method, t.c.path == path, t.c.key == key
        )

    async def get(self, tenant_id: str, method: str, path: str, key: str) -> StoredResponse | None:
        """The stored response, expired or not (the caller decides what expiry means)."""
        stmt = sa.select(t.c.request_hash, t.c.status_code, t.c.response, t.c.expires_at).where(
            self._key(tenant_id, method, path, key)
        )
        row = (await self.db.execute(stmt)).first()
        return StoredResponse(**row._mapping) if row else None

    async def delete(self, tenant_id: str, method: str, path: str, key: str) -> None:
        await self.db.execute(sa.delete(t).where(self._key(tenant_id, method, path, key)))

    async def put(
        self,
        tenant_id: str,
        method: str,
        path: str,
        key: str,
        *,
        stored: StoredResponse,
        now: datetime,
        expires_at: datetime,
    ) -> None:
        await self.db.execute(
            sa.insert(t).values(
                tenant_id=tenant_id,
                method=method,
                path=path,
                key=key,
                request_hash=stored.request_hash,
                status_code=stored.status_code,
                response=stored.response,
                created_at=now,
                expires_at=expires_at,
            )
        )

    async def purge_expired(self, *, now: datetime, limit: int = 1000) -> int:
        """Delete at most ``limit`` expired keys (short transactions, whatever the backlog)."""
        key = sa.tuple_(t.c.tenant_id, t.c.method, t.c.path, t.c.key)
        expired = (
            sa.select(t.c.tenant_id, t.c.method, t.c.path, t.c.key)
            .where(t.c.expires_at <= now)
            .limit(limit)
        )
        result = await self.db.execute(sa.delete(t).where(key.in_(expired)))
        return int(result.rowcount or 0)
