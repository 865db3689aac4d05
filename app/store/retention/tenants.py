"""Tenant erasure's tombstones and the advisory lock that orders a tenant's creates before its
erasure, and the walks an erasure of a whole tenant makes (its sessions, what is left)."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from app.domain.retention import TenantErased, tenant_digest
from app.store.retention.base import RetentionBase
from app.store.tables import (
    api_keys,
    erasures,
    idempotency_keys,
    metadata,
    sessions,
    tenant_erasures,
)


def tenant_lock_name(digest: str) -> str:
    """The name whose ``hashtextextended(name, 0)`` is the tenant's advisory lock (below); the
    one-statement create on append (``store.append``) takes it by the same name."""
    return "tenant-erasure:" + digest


def _advisory_key(digest: str) -> sa.ColumnElement[int]:
    """The Postgres advisory lock a tenant's creates share and its erasure takes alone."""
    return sa.func.hashtextextended(sa.literal(tenant_lock_name(digest)), 0)


class TenantErasureQueries(RetentionBase):
    """A tenant's tombstone, from the erasure's start to its purge, and what the tenant still holds."""

    async def check_tenant_writable(self, tenant_id: str) -> None:
        """Before a write not ordered by an existing session row (a create): ``TenantErased``
        if the tenant's erasure has begun. On Postgres the write first takes the tenant's
        advisory lock in shared mode, which the erasure takes exclusively to write its
        tombstone: a create either committed before the tombstone (and is erased with the
        rest) or sees it."""
        digest = tenant_digest(tenant_id)
        if not self.sqlite:
            await self.db.execute(
                sa.select(sa.func.pg_advisory_xact_lock_shared(_advisory_key(digest)))
            )
        found = await self.db.execute(
            sa.select(sa.literal(1)).where(tenant_erasures.c.tenant_digest == digest)
        )
        if found.first() is not None:
            raise TenantErased("this key's tenant has been erased")

    async def begin_tenant_erasure(self, tenant_id: str, *, now: datetime) -> list[str]:
        """Write the tenant's tombstone and delete its API keys (revoke first: no write of the
        tenant lands anywhere after this commits); returns the deleted keys' ids."""
        digest = tenant_digest(tenant_id)
        if not self.sqlite:  # waits out every create of the tenant in flight (see above)
            await self.db.execute(sa.select(sa.func.pg_advisory_xact_lock(_advisory_key(digest))))
        insert = sqlite_insert if self.sqlite else postgresql_insert
        await self.db.execute(
            insert(tenant_erasures)
            .values(tenant_digest=digest, started_at=now, finished_at=None)
            .on_conflict_do_update(
                index_elements=[tenant_erasures.c.tenant_digest], set_={"finished_at": None}
            )
        )
        result = await self.db.execute(
            sa.delete(api_keys).where(api_keys.c.tenant_id == tenant_id).returning(api_keys.c.id)
        )
        return [r[0] for r in result.all()]

    async def tenant_erasure_unfinished(self, tenant_id: str) -> bool:
        """Whether an erasure of the tenant began and was cut short (a replica died)."""
        t = tenant_erasures.c
        found = await self.db.execute(
            sa.select(sa.literal(1)).where(
                t.tenant_digest == tenant_digest(tenant_id), t.finished_at.is_(None)
            )
        )
        return found.first() is not None

    async def finish_tenant_erasure(self, tenant_id: str, *, now: datetime) -> None:
        await self.db.execute(
            sa.update(tenant_erasures)
            .where(tenant_erasures.c.tenant_digest == tenant_digest(tenant_id))
            .values(finished_at=now)
        )

    async def purge_tombstones(self, *, finished_before: datetime) -> int:
        """Tombstones of erasures finished before ``finished_before`` (no key of theirs can
        be cached anywhere any more); returns how many went."""
        t = tenant_erasures.c
        result = await self.db.execute(
            sa.delete(tenant_erasures)
            .where(t.finished_at.is_not(None), t.finished_at < finished_before)
            .returning(t.tenant_digest)
        )
        return len(result.all())

    async def tenant_leftovers(self, tenant_id: str) -> dict[str, int]:
        """Rows any table still holds for the tenant (the walk an erasure ends with): every
        table with a ``tenant_id`` column but the audit trail, which holds no data."""
        out: dict[str, int] = {}
        for table in metadata.sorted_tables:
            if "tenant_id" not in table.c or table is erasures:
                continue
            count = (
                await self.db.execute(
                    sa.select(sa.func.count())
                    .select_from(table)
                    .where(table.c.tenant_id == tenant_id)
                )
            ).scalar_one()
            if count:
                out[table.name] = int(count)
        return out

    async def tenant_session_ids(
        self, tenant_id: str, *, after: str | None, limit: int
    ) -> list[str]:
        s = sessions.c
        stmt = sa.select(s.id).where(s.tenant_id == tenant_id)
        if after is not None:
            stmt = stmt.where(s.id > after)
        rows = await self.db.execute(stmt.order_by(s.id).limit(limit))
        return [r[0] for r in rows.all()]

    async def tenant_exists(self, tenant_id: str) -> bool:
        for table in (sessions, api_keys, idempotency_keys):
            found = await self.db.execute(
                sa.select(sa.literal(1)).where(table.c.tenant_id == tenant_id).limit(1)
            )
            if found.first() is not None:
                return True
        return False
