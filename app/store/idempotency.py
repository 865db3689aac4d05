"""IdempotencyRepository: stored responses of POSTs sent with an ``Idempotency-Key``.

A record is found by its ``IdempotencyScope``: tenant, API key id, method, route (with the
decoded session id: ``app.api.deps.idempotency_path``) and key, so another key of the tenant
never gets its answers; it names the session it belongs to (the one the write created, else
the one it wrote to) and is deleted with it (``delete_for_session``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from app.store.tables import idempotency_keys as t

PRIMARY_KEY = "pk_idempotency_keys"


@dataclass(frozen=True, slots=True)
class IdempotencyScope:
    tenant_id: str
    key_id: str
    method: str
    path: str
    key: str


@dataclass(frozen=True, slots=True)
class StoredResponse:
    request_hash: str
    status_code: int
    response: str
    kind: str = "response"
    expires_at: datetime | None = None
    session_id: str | None = None  # the session the record belongs to
    created_at: datetime | None = None


class IdempotencyTaken(Exception):
    """Another write stored a record under the same scope first (a concurrent twin)."""


def is_idempotency_conflict(exc: IntegrityError) -> bool:
    """Whether a unique violation is the idempotency record's (not, say, an item id's)."""
    diag = getattr(getattr(exc, "orig", None), "diag", None)
    name = getattr(diag, "constraint_name", None)
    if name is not None:
        return bool(name == PRIMARY_KEY)
    return "idempotency_keys" in str(exc)  # SQLite names the table and its columns


class IdempotencyRepository:
    def __init__(self, db: AsyncConnection) -> None:
        self.db = db

    def _key(self, scope: IdempotencyScope) -> sa.ColumnElement[bool]:
        return sa.and_(
            t.c.tenant_id == scope.tenant_id,
            t.c.key_id == scope.key_id,
            t.c.method == scope.method,
            t.c.path == scope.path,
            t.c.key == scope.key,
        )

    async def get(self, scope: IdempotencyScope) -> StoredResponse | None:
        """The stored response, expired or not (the caller decides what expiry means)."""
        stmt = sa.select(
            t.c.request_hash,
            t.c.status_code,
            t.c.response,
            t.c.kind,
            t.c.expires_at,
            t.c.session_id,
            t.c.created_at,
        ).where(self._key(scope))
        row = (await self.db.execute(stmt)).first()
        return StoredResponse(**row._mapping) if row else None

    async def delete(self, scope: IdempotencyScope) -> None:
        await self.db.execute(sa.delete(t).where(self._key(scope)))

    async def put(
        self,
        scope: IdempotencyScope,
        *,
        session_id: str | None,
        stored: StoredResponse,
        now: datetime,
        expires_at: datetime,
    ) -> None:
        """Store the record; ``IdempotencyTaken`` if a twin stored one first (the
        transaction is then aborted: the caller starts again and replays the twin's)."""
        try:
            await self.db.execute(
                sa.insert(t).values(
                    tenant_id=scope.tenant_id,
                    key_id=scope.key_id,
                    method=scope.method,
                    path=scope.path,
                    key=scope.key,
                    session_id=session_id,
                    kind=stored.kind,
                    request_hash=stored.request_hash,
                    status_code=stored.status_code,
                    response=stored.response,
                    created_at=now,
                    expires_at=expires_at,
                )
            )
        except IntegrityError as exc:
            if is_idempotency_conflict(exc):
                raise IdempotencyTaken from exc
            raise

    async def delete_for_session(self, tenant_id: str, session_id: str) -> None:
        await self.db.execute(
            sa.delete(t).where(t.c.tenant_id == tenant_id, t.c.session_id == session_id)
        )

    async def purge_expired(self, *, now: datetime, limit: int = 1000) -> int:
        """Delete at most ``limit`` expired keys (short transactions, whatever the backlog)."""
        key = sa.tuple_(t.c.tenant_id, t.c.key_id, t.c.method, t.c.path, t.c.key)
        expired = (
            sa.select(t.c.tenant_id, t.c.key_id, t.c.method, t.c.path, t.c.key)
            .where(t.c.expires_at <= now)
            .limit(limit)
        )
        result = await self.db.execute(sa.delete(t).where(key.in_(expired)))
        return int(result.rowcount or 0)
