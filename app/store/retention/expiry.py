"""Expiry: finding and locking the sessions whose time is up, marking their erasure begun, and
reviewing live sessions against their retention settings (their TTLs).

The sweep takes a session's row with ``FOR UPDATE SKIP LOCKED`` on Postgres: a row a write holds
is skipped until the next batch, so the sweep never waits for a write. On SQLite a write
transaction (``BEGIN IMMEDIATE``) already excludes every other.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa

from app.domain.retention import ERASING
from app.store.retention.base import RetentionBase
from app.store.tables import UTCDateTime, sessions


def utcnow_for_sqlite() -> datetime:
    """SQLite's clock is this process's (the embedded database has no other)."""
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class ReviewRow:
    """What the sweep needs of a session to decide what is due."""

    tenant_id: str
    id: str
    config: dict[str, Any]
    ttl_seconds: int | None
    updated_at: datetime
    expires_at: datetime | None


class ExpiryQueries(RetentionBase):
    """Expired sessions, the start of their erasure, and the review of live ones."""

    def _skip_locked(self, stmt: sa.Select[Any]) -> sa.Select[Any]:
        return stmt if self.sqlite else stmt.with_for_update(skip_locked=True)

    async def lock_expired(self, *, now: datetime, limit: int) -> list[tuple[str, str]]:
        """Up to ``limit`` expired sessions, their rows locked (rows a write holds skipped),
        those whose erasure began first. Expired by the database's clock on Postgres (``now``
        is used on SQLite, whose clock is this process's)."""
        s = sessions.c
        clock: Any = now if self.sqlite else sa.func.current_timestamp()
        stmt = (
            sa.select(s.tenant_id, s.id)
            .where(s.expires_at.is_not(None), s.expires_at <= clock)
            .order_by(s.expires_at)
            .limit(limit)
        )
        return [(r[0], r[1]) for r in (await self.db.execute(self._skip_locked(stmt))).all()]

    async def mark_erasing(self, keys: Sequence[tuple[str, str]]) -> None:
        """Begin the erasure of these sessions (rows locked): ``expires_at = ERASING``, expired
        for every clock, so a write that waited on a row re-checks it and matches nothing, and
        none lands on a session that is partly erased (it is whole or gone)."""
        if keys:
            await self.db.execute(
                sa.update(sessions)
                .where(sa.tuple_(sessions.c.tenant_id, sessions.c.id).in_(list(keys)))
                .values(expires_at=ERASING)
            )

    def _live(self) -> sa.ColumnElement[bool]:
        """Not expired (nor being erased), by the database's clock on Postgres."""
        clock: Any = sa.func.current_timestamp()
        if self.sqlite:
            clock = sa.bindparam("clock_now", utcnow_for_sqlite(), type_=UTCDateTime())
        return sa.or_(sessions.c.expires_at.is_(None), sessions.c.expires_at > clock)

    async def lock_session(self, tenant_id: str, session_id: str) -> ReviewRow | None:
        """The session's row, locked, or None if it is gone, expired (its erasure is the
        expiry pass's business) or a write holds it."""
        s = sessions.c
        stmt = sa.select(
            s.tenant_id, s.id, s.config, s.ttl_seconds, s.updated_at, s.expires_at
        ).where(s.tenant_id == tenant_id, s.id == session_id, self._live())
        row = (await self.db.execute(self._skip_locked(stmt))).first()
        return ReviewRow(*row) if row else None

    async def review_page(
        self, *, after: tuple[str, str] | None, limit: int, configured_only: bool
    ) -> list[ReviewRow]:
        """A page of sessions in key order (no lock): the sweep decides which are due.
        ``configured_only`` (no server default is set): only those with a retention config,
        or a TTL that came from a default since removed."""
        s = sessions.c
        stmt = sa.select(s.tenant_id, s.id, s.config, s.ttl_seconds, s.updated_at, s.expires_at)
        if after is not None:
            stmt = stmt.where(sa.tuple_(s.tenant_id, s.id) > sa.tuple_(*after))
        if configured_only:
            stmt = stmt.where(
                sa.or_(
                    s.config["retention"].as_string().is_not(None),
                    sa.and_(
                        s.ttl_seconds.is_not(None), s.config["ttl_seconds"].as_string().is_(None)
                    ),
                )
            )
        stmt = stmt.order_by(s.tenant_id, s.id).limit(limit)
        return [ReviewRow(*r) for r in (await self.db.execute(stmt)).all()]

    async def set_ttl(
        self, tenant_id: str, session_id: str, *, ttl_seconds: int | None, updated_at: datetime
    ) -> None:
        """Apply a TTL (the server default changed) from the session's last write on."""
        expires = None if ttl_seconds is None else updated_at + timedelta(seconds=ttl_seconds)
        await self.db.execute(
            sa.update(sessions)
            .where(sessions.c.tenant_id == tenant_id, sessions.c.id == session_id, self._live())
            .values(ttl_seconds=ttl_seconds, expires_at=expires)
        )
