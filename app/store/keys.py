"""KeyRepository: every SQL statement on ``api_keys`` (hashed API keys; never a secret)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from app.domain.keys import ApiKey
from app.store.tables import api_keys as t

_COLUMNS = [
    t.c.id,
    t.c.tenant_id,
    t.c.name,
    t.c.scopes,
    t.c.session_prefix,
    t.c.created_at,
    t.c.revoked_at,
]


def _key(row: sa.Row[Any]) -> ApiKey:
    m = row._mapping
    return ApiKey(
        id=m["id"],
        tenant_id=m["tenant_id"],
        name=m["name"],
        scopes=frozenset(m["scopes"]),
        session_prefix=m["session_prefix"],
        created_at=m["created_at"],
        revoked_at=m["revoked_at"],
    )


class KeyRepository:
    def __init__(self, db: AsyncConnection) -> None:
        self.db = db

    async def insert(self, key: ApiKey, *, key_hash: str) -> None:
        await self.db.execute(
            sa.insert(t).values(
                id=key.id,
                tenant_id=key.tenant_id,
                name=key.name,
                key_hash=key_hash,
                scopes=sorted(key.scopes),
                session_prefix=key.session_prefix,
                created_at=key.created_at,
                revoked_at=None,
            )
        )

    async def by_hash(self, key_hash: str) -> ApiKey | None:
        """The key whose secret hashes to ``key_hash``, revoked or not (one unique-index probe)."""
        row = (await self.db.execute(sa.select(*_COLUMNS).where(t.c.key_hash == key_hash))).first()
        return _key(row) if row else None

    async def get(self, tenant_id: str | None, key_id: str) -> ApiKey | None:
        stmt = sa.select(*_COLUMNS).where(t.c.id == key_id)
        if tenant_id is not None:
            stmt = stmt.where(t.c.tenant_id == tenant_id)
        row = (await self.db.execute(stmt)).first()
        return _key(row) if row else None

    async def list(
        self,
        tenant_id: str | None,
        *,
        after_id: str | None,
        limit: int,
        include_revoked: bool,
        prefix: str | None = None,
    ) -> list[ApiKey]:
        """Keys ordered by id; ``tenant_id=None`` lists every tenant (the operator's CLI)."""
        stmt = sa.select(*_COLUMNS)
        if tenant_id is not None:
            stmt = stmt.where(t.c.tenant_id == tenant_id)
        if after_id is not None:
            stmt = stmt.where(t.c.id > after_id)
        if not include_revoked:
            stmt = stmt.where(t.c.revoked_at.is_(None))
        if prefix:
            # Keys confined inside ``prefix``: their own prefix starts with it.
            stmt = stmt.where(sa.func.substr(t.c.session_prefix, 1, len(prefix)) == prefix)
        stmt = stmt.order_by(t.c.id).limit(limit)
        return [_key(r) for r in (await self.db.execute(stmt)).all()]

    async def revoke(self, tenant_id: str | None, key_id: str, *, now: datetime) -> bool:
        """Mark the key revoked (keeping the first revocation time); False if there is none."""
        cond = [t.c.id == key_id]
        if tenant_id is not None:
            cond.append(t.c.tenant_id == tenant_id)
        result = await self.db.execute(
            sa.update(t).where(*cond, t.c.revoked_at.is_(None)).values(revoked_at=now)
        )
        if result.rowcount:
            return True
        return await self.get(tenant_id, key_id) is not None

    async def count_active(self) -> int:
        stmt = sa.select(sa.func.count()).select_from(t).where(t.c.revoked_at.is_(None))
        return int((await self.db.execute(stmt)).scalar_one())
