"""Complete erasure: every row of a session (``SESSION_TABLES``), of a batch of expired sessions,
and what a tenant holds outside its sessions.

Every statement that erases touches one session (or the sweep's batch) and is bounded
(``limit`` rows) when the sweep runs it, so a sweep transaction stays short and a write waits at
most for one short batch.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa

from app.domain.retention import ErasedCounts
from app.store.retention.base import SESSION_CHILDREN, RetentionBase, of_session, row_bytes
from app.store.tables import api_keys, idempotency_keys, sessions


class ErasureQueries(RetentionBase):
    """Deletes that erase sessions and tenants whole."""

    async def erase_session(
        self, tenant_id: str, session_id: str, *, limit: int | None = None
    ) -> tuple[ErasedCounts, bool]:
        """Delete the session's rows from every table (``SESSION_TABLES``). With ``limit``, at
        most that many child rows per call, the session row itself only once the rest is gone;
        returns what was erased and whether the session is gone entirely."""
        counts = ErasedCounts()
        budget = limit
        for table, key in SESSION_CHILDREN:
            if budget is not None and budget <= 0:
                return counts, False
            if key is None:
                pruned = await self._delete_sized(table, of_session(table, tenant_id, session_id))
            else:
                pruned = await self._delete_bounded(
                    table, key, lambda t: of_session(t, tenant_id, session_id), limit=budget
                )
            counts.add(table.name, pruned.rows, pruned.bytes)
            if budget is not None:
                if key is not None and pruned.rows >= budget:
                    return counts, False
                budget -= pruned.rows
        gone = await self._delete_sized(
            sessions, sa.and_(sessions.c.tenant_id == tenant_id, sessions.c.id == session_id)
        )
        counts.add("sessions", gone.rows, gone.bytes)
        return counts, True

    async def erase_sessions(
        self, keys: Sequence[tuple[str, str]], *, limit: int
    ) -> tuple[dict[tuple[str, str], ErasedCounts], bool]:
        """``erase_session`` for several sessions at once (the sweep's expired batch): one
        bounded DELETE per table for all of them, at most ``limit`` child rows in all. The
        session rows go only once every child row of the batch is gone; returns what each
        session lost and whether they are all gone."""
        counts: dict[tuple[str, str], ErasedCounts] = {k: ErasedCounts() for k in keys}
        if not keys:
            return counts, True
        budget = limit
        for table, _ in SESSION_CHILDREN:
            pk = list(table.primary_key.columns)
            inner = table.alias("doomed")
            chosen = (
                sa.select(*(inner.c[c.name] for c in pk))
                .where(sa.tuple_(inner.c.tenant_id, inner.c.session_id).in_(list(keys)))
                .limit(budget)
            )
            stmt = (
                sa.delete(table)
                .where(sa.tuple_(*pk).in_(chosen))
                .returning(
                    table.c.tenant_id, table.c.session_id, row_bytes(self.db.dialect.name, table)
                )
            )
            rows = (await self.db.execute(stmt)).all()
            for tenant_id, session_id, size in rows:
                counts[(tenant_id, session_id)].add(table.name, 1, int(size or 0))
            budget -= len(rows)
            if budget <= 0:
                return counts, False
        gone = (
            await self.db.execute(
                sa.delete(sessions)
                .where(sa.tuple_(sessions.c.tenant_id, sessions.c.id).in_(list(keys)))
                .returning(
                    sessions.c.tenant_id, sessions.c.id, row_bytes(self.db.dialect.name, sessions)
                )
            )
        ).all()
        for tenant_id, session_id, size in gone:
            counts[(tenant_id, session_id)].add("sessions", 1, int(size or 0))
        return counts, True

    async def erase_tenant_rest(self, tenant_id: str) -> ErasedCounts:
        """What a tenant holds outside its sessions: idempotency records without a session
        (left by writes whose session never existed), keys created after the erasure began."""
        counts = ErasedCounts()
        idem = await self._delete_sized(idempotency_keys, idempotency_keys.c.tenant_id == tenant_id)
        counts.add("idempotency_keys", idem.rows, idem.bytes)
        result = await self.db.execute(
            sa.delete(api_keys).where(api_keys.c.tenant_id == tenant_id).returning(api_keys.c.id)
        )
        counts.add("api_keys", len(result.all()))
        return counts
