"""RawQuery: a hot read compiled once and, on Postgres, run on the psycopg connection itself.

Profiling a context read showed SQLAlchemy's per-statement work (result object, row
processors, greenlet hops) costing about as much as the round trip to Postgres. For the few
statements every read makes, the SQL text is compiled once from the same SQLAlchemy
statement and sent through the driver connection underneath the SQLAlchemy one (same
transaction, same pool, JSON decoded by the same loaders SQLAlchemy registered on it).
Timestamps come back in UTC, as ``UTCDateTime`` would give them: the store's connections run
with ``TimeZone=UTC``, so psycopg already returns them so (converted only otherwise). Other
backends go through SQLAlchemy unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC
from typing import Any

import sqlalchemy as sa
from sqlalchemy import exc as sa_exc
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.util import greenlet_spawn

from app.store.tables import as_utc


class RawQuery:
    def __init__(
        self,
        statement: sa.Executable,
        *,
        postgres: sa.Executable | None = None,
        utc_columns: Sequence[int] = (),
    ) -> None:
        """``statement`` for every backend; ``postgres``: the same query written for Postgres
        where the portable form does not compile to fixed text (``= ANY(array)`` for an
        expanding ``IN``); ``utc_columns``: positions of timestamp columns."""
        self.statement = statement
        self.postgres = postgres if postgres is not None else statement
        self.utc_columns = tuple(utc_columns)
        self._sql: str | None = None
        self._defaults: dict[str, Any] = {}

    def sql(self, db: AsyncConnection | DriverConnection) -> str:
        if self._sql is None:
            compiled = self.postgres.compile(dialect=db.dialect)
            # values the statement carries itself (``role == "user"``), by their bind names
            self._defaults = {
                name: bind.effective_value
                for name, bind in compiled.binds.items()
                if not bind.required
            }
            self._sql = str(compiled)
        return self._sql

    async def rows(
        self, db: AsyncConnection | DriverConnection, params: Mapping[str, Any]
    ) -> Sequence[Any]:
        if isinstance(db, DriverConnection):
            driver, pooled = db.fairy.driver_connection, db.fairy
        elif db.dialect.name != "postgresql":
            return (await db.execute(self.statement, dict(params))).all()
        else:
            pooled = await db.get_raw_connection()
            driver = pooled.driver_connection
        dialect = db.dialect
        sql = self.sql(db)
        values = {**self._defaults, **params}
        cursor = driver.cursor()  # type: ignore[union-attr]
        try:
            await cursor.execute(sql, values)  # prepared by psycopg once it repeats
            rows: list[Any] = await cursor.fetchall()
        except dialect.loaded_dbapi.Error as exc:
            # As SQLAlchemy would: a lost connection is invalidated (not returned to the pool)
            # and every driver error surfaces as the matching sqlalchemy.exc class, which the
            # store maps to problems (503 database-unavailable, 409 duplicate, ...).
            lost = dialect.is_disconnect(exc, driver, cursor)
            if lost:
                # SQLAlchemy's own handling also retires the pool's other connections (a
                # server restart or failover took them all); Pool._invalidate is how it does.
                # (Only the pool's generation here: the connection itself is invalidated by
                # ``db.invalidate``, inside SQLAlchemy's greenlet, where closing it can run.)
                db.sync_engine.pool._invalidate(pooled, exc, _checkin=False)  # noqa: SLF001
                await db.invalidate(exc)
            raise sa_exc.DBAPIError.instance(
                sql,
                values,
                exc,
                dialect.loaded_dbapi.Error,
                connection_invalidated=lost,
                dialect=dialect,
            ) from exc
        finally:
            try:
                await cursor.close()
            except dialect.loaded_dbapi.Error:
                pass  # the connection is gone; the error that matters is being raised
        if self.utc_columns and rows and driver.info.timezone is not UTC:  # type: ignore[union-attr]
            # (the store's connections run in UTC, so this is for a connection that does not)
            rows = [_to_utc(row, self.utc_columns) for row in rows]
        return rows


class DriverConnection:
    """A pooled Postgres connection in autocommit, without SQLAlchemy's ``Connection`` around
    it: for work that is only ``RawQuery`` statements (an append, a context read). Checking
    one out and in costs about half of what a SQLAlchemy connection with its isolation level
    set and reset does (``Store.statements()``, which also keeps a few checked out between
    uses); it is the same pool, so the same connections, limits and invalidation."""

    __slots__ = ("dialect", "engine", "fairy", "lost")

    def __init__(self, engine: AsyncEngine, fairy: Any) -> None:
        self.engine = engine
        self.dialect = engine.dialect
        self.fairy = fairy
        self.lost = False  # the server went away under a statement (``Store.statements``)

    @property
    def sync_engine(self) -> sa.Engine:
        return self.engine.sync_engine

    async def invalidate(self, exc: BaseException) -> None:
        self.lost = True
        await greenlet_spawn(self.fairy.invalidate, exc)


def _to_utc(row: tuple[Any, ...], columns: tuple[int, ...]) -> tuple[Any, ...]:
    values = list(row)
    for i in columns:
        values[i] = as_utc(values[i])
    return tuple(values)
