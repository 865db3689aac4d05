"""Engines and transactions. Built in the app's lifespan (never at import).

``Store.write()`` opens a write transaction: on SQLite it is ``BEGIN IMMEDIATE`` so that a
writer takes the database lock up front and waits (busy timeout) instead of failing when it
upgrades from reading; on Postgres it is an ordinary transaction.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any, NoReturn

import sqlalchemy as sa
from psycopg import pq
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.util import greenlet_spawn

from app import jsonutil
from app.domain.items import StoredItem
from app.store.db_errors import DATABASE_ERRORS, domain_error_for
from app.store.item_cache import ItemCache, PromptCache
from app.store.migrate import ensure_sqlite_dir
from app.store.raw import DriverConnection

# How long a ``statements()`` connection stays parked unused before it goes back to the pool.
PARKED_IDLE_SECONDS = 30.0
_IDLE = pq.TransactionStatus.IDLE


def _json_dumps(value: Any) -> str:
    return jsonutil.dumps(value)


async def _check_in(fairy: Any) -> None:
    """A ``statements()`` connection back to the pool, in the mode the pool hands them out."""
    if not fairy.is_valid:
        return
    driver = fairy.driver_connection
    if not driver.closed and driver.autocommit:
        await driver.set_autocommit(False)  # SQLAlchemy's default isolation
    await greenlet_spawn(fairy.close)


class Store:
    """Owns the engine; hands out connections inside transactions."""

    def __init__(
        self, engine: AsyncEngine, *, item_cache_items: int = 0, prompt_cache_entries: int = 0
    ) -> None:
        self.engine = engine
        self.is_sqlite = engine.dialect.name == "sqlite"
        # ``statements()`` connections kept for the next call: (connection, since when)
        self._parked: list[tuple[Any, float]] = []
        # a quarter of the pool (none from a pool of fewer than four: a one-connection pool
        # parked would leave nothing for a transaction)
        self.park_max = 0 if self.is_sqlite else engine.pool.size() // 4  # type: ignore[attr-defined]
        # decoded items shared by this process's context reads (None: off)
        self.item_cache = ItemCache(max_items=item_cache_items) if item_cache_items > 0 else None
        # whole projected prompts by session version and budget (None: off)
        self.prompt_cache = (
            PromptCache(max_entries=prompt_cache_entries) if prompt_cache_entries > 0 else None
        )

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        pool_size: int = 20,
        max_overflow: int = 0,
        item_cache_items: int = 0,
        prompt_cache_entries: int = 0,
        lock_wait_seconds: float | None = None,
    ) -> Store:
        kwargs: dict[str, Any] = {
            "json_serializer": _json_dumps,
            "json_deserializer": jsonutil.loads,
        }
        if url.startswith("sqlite"):
            ensure_sqlite_dir(url)
            engine = create_async_engine(url, **kwargs)
            busy_ms = 15000 if lock_wait_seconds is None else max(1, int(lock_wait_seconds * 1000))
            _configure_sqlite(engine, busy_ms=busy_ms)
        else:
            # Timestamps come back as UTC datetimes, whatever the server's default zone.
            options = ["-c TimeZone=UTC"]
            if lock_wait_seconds is not None:
                # A write waits this long for the session row another write holds, then
                # fails (SQLSTATE 55P03) with a retryable 503 instead of hanging.
                options.append(f"-c lock_timeout={max(1, int(lock_wait_seconds * 1000))}")
            kwargs["connect_args"] = {"options": " ".join(options)}
            engine = create_async_engine(
                url,
                pool_size=pool_size,
                max_overflow=max_overflow,
                # No pre-ping: it costs a round trip on every checkout. A connection found
                # dead mid-request fails that request with a retryable 503 and SQLAlchemy
                # invalidates the whole pool on a disconnect, so the next checkouts reconnect.
                pool_pre_ping=False,
                pool_recycle=1800,
                **kwargs,
            )
        return cls(
            engine,
            item_cache_items=item_cache_items,
            prompt_cache_entries=prompt_cache_entries,
        )

    def remember_items(
        self,
        tenant_id: str,
        session_id: str,
        session_created_at: datetime,
        items: Sequence[StoredItem],
    ) -> None:
        """Put just-committed items in the item cache, as a context read would after loading
        them (only once committed: a rolled-back append's seqs are handed out again). Items
        with metadata are left to be loaded: Postgres returns a JSON object's keys in its own
        order, and the cache must hold exactly what a load gives."""
        if self.item_cache is None:
            return
        for item in items:
            if not item.metadata:
                self.item_cache.put((tenant_id, session_id, session_created_at, item.seq), item)

    async def dispose(self) -> None:
        await self._unpark_all()
        await self.engine.dispose()

    @asynccontextmanager
    async def write(self) -> AsyncIterator[AsyncConnection]:
        try:
            async with self.engine.connect() as conn:
                if self.is_sqlite:
                    await conn.execution_options(sqlite_immediate=True)
                async with conn.begin():
                    yield conn
        except DATABASE_ERRORS as exc:
            self._raise_domain_error(exc)

    @asynccontextmanager
    async def autocommit(self) -> AsyncIterator[AsyncConnection]:
        """A Postgres connection whose every statement commits on its own (the one-statement
        append: no BEGIN, no COMMIT round trip; a server that dies mid-statement leaves all
        of it or nothing)."""
        try:
            async with self.engine.connect() as conn:
                await conn.execution_options(isolation_level="AUTOCOMMIT")
                yield conn
        except DATABASE_ERRORS as exc:
            self._raise_domain_error(exc)

    @asynccontextmanager
    async def statements(self) -> AsyncIterator[DriverConnection]:
        """Postgres: a pooled connection in autocommit for ``RawQuery`` statements only (the
        append, the context read), without SQLAlchemy's ``Connection`` around it
        (``DriverConnection``). Each statement commits on its own, as in ``autocommit()``.

        A connection done with is kept aside, still in autocommit and still checked out of
        the pool, for the next call (``_parked``, at most ``park_max``): checking one out of
        SQLAlchemy's pool and back in (a greenlet each way, two autocommit switches, the
        reset) cost an append about 160 us of CPU, a fifth of it (bench/RESULTS.md, session
        8). The pool still counts them,
        so the process keeps to ``DB_POOL_SIZE + DB_MAX_OVERFLOW`` connections; one unused for
        ``PARKED_IDLE_SECONDS`` goes back, and after a lost connection all of them do
        (invalidated: the server that dropped one may have dropped them all)."""
        assert not self.is_sqlite
        fairy = await self._take_parked()
        if fairy is None:
            try:
                fairy = await self.engine.raw_connection()
            except DATABASE_ERRORS as exc:
                self._raise_domain_error(exc)
        driver = fairy.driver_connection
        conn = DriverConnection(self.engine, fairy)
        try:
            if not driver.autocommit:
                await driver.set_autocommit(True)
            yield conn
        except DATABASE_ERRORS as exc:
            self._raise_domain_error(exc)
        finally:
            if conn.lost:
                await self._unpark_all(invalidate=True)
            elif (
                fairy.is_valid
                and not driver.closed
                and driver.info.transaction_status == _IDLE
                and len(self._parked) < self.park_max
            ):
                self._parked.append((fairy, time.monotonic()))
            else:
                await _check_in(fairy)

    async def _take_parked(self) -> Any | None:
        """The connection parked last, if any; the others unused for too long go back."""
        now = time.monotonic()
        while self._parked and now - self._parked[0][1] > PARKED_IDLE_SECONDS:
            await _check_in(self._parked.pop(0)[0])
        return self._parked.pop()[0] if self._parked else None

    async def _unpark_all(self, *, invalidate: bool = False) -> None:
        parked, self._parked = self._parked, []
        for fairy, _ in parked:
            if invalidate:
                await greenlet_spawn(fairy.invalidate)
            else:
                await _check_in(fairy)

    @asynccontextmanager
    async def read(self, *, snapshot: bool = False) -> AsyncIterator[AsyncConnection]:
        """A connection for reads. ``snapshot=True``: one transaction whose statements all see
        one snapshot (REPEATABLE READ on Postgres; a SQLite read transaction always does).

        Otherwise, on Postgres, autocommit: each statement sees the data committed when it
        starts, exactly as in a READ COMMITTED transaction, without the BEGIN and COMMIT
        round trips (most reads are one or two statements, so those were half the cost)."""
        try:
            async with self.engine.connect() as conn:
                if self.is_sqlite:
                    async with conn.begin():
                        yield conn
                elif snapshot:
                    await conn.execution_options(isolation_level="REPEATABLE READ")
                    async with conn.begin():
                        yield conn
                else:
                    await conn.execution_options(isolation_level="AUTOCOMMIT")
                    yield conn
        except DATABASE_ERRORS as exc:
            self._raise_domain_error(exc)

    def _raise_domain_error(self, exc: Exception) -> NoReturn:
        """Raise the domain error a driver error stands for (``app.store.db_errors``), or
        ``exc`` itself when it is a bug."""
        mapped = domain_error_for(exc, sqlite=self.is_sqlite)
        if mapped is None:
            raise exc
        raise mapped from exc

    async def ping(self) -> None:
        async with self.engine.connect() as conn:
            await conn.execute(sa.text("SELECT 1"))


def _configure_sqlite(engine: AsyncEngine, *, busy_ms: int) -> None:
    sync_engine = engine.sync_engine

    @event.listens_for(sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Take transaction control from the driver so BEGIN IMMEDIATE is ours to emit.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        # a write waits this long for another one (LOCK__WAIT_SECONDS), then a 503
        cursor.execute(f"PRAGMA busy_timeout={busy_ms}")
        cursor.execute("PRAGMA foreign_keys=ON")
        # Prefix filters (`startswith` -> LIKE) confine keys to their sessions: they must be
        # case-sensitive, as on Postgres, or "team-a:" would also match "TEAM-A:...".
        cursor.execute("PRAGMA case_sensitive_like=ON")
        cursor.close()

    @event.listens_for(sync_engine, "begin")
    def _on_begin(conn: Any) -> None:
        if conn.get_execution_options().get("sqlite_immediate"):
            conn.exec_driver_sql("BEGIN IMMEDIATE")
        else:
            conn.exec_driver_sql("BEGIN")
