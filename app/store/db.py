"""Engines and transactions. Built in the app's lifespan (never at import).

``Store.write()`` opens a write transaction: on SQLite it is ``BEGIN IMMEDIATE`` so that a
writer takes the database lock up front and waits (busy timeout) instead of failing when it
upgrades from reading; on Postgres it is an ordinary transaction.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any, NoReturn

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from app import jsonutil
from app.domain.items import StoredItem
from app.store.db_errors import DATABASE_ERRORS, domain_error_for
from app.store.item_cache import ItemCache
from app.store.migrate import ensure_sqlite_dir
from app.store.prompt_cache import PromptCache
from app.store.raw import DriverConnection
from app.store.statement_pool import StatementConnections
from app.store.window_sizes import WindowSizes

# How long a ``statements()`` connection stays unused before it goes back to the pool.
STATEMENT_IDLE_SECONDS = 30.0


def _json_dumps(value: Any) -> str:
    return jsonutil.dumps(value)


class Store:
    """Owns the engine; hands out connections inside transactions."""

    def __init__(
        self,
        engine: AsyncEngine,
        *,
        max_overflow: int = 0,
        item_cache_items: int = 0,
        prompt_cache_entries: int = 0,
        item_cache_chars: int = 32 * 1024 * 1024,
        prompt_cache_chars: int = 16 * 1024 * 1024,
        window_sizes: int = 0,
    ) -> None:
        self.engine = engine
        self.is_sqlite = engine.dialect.name == "sqlite"
        # ``statements()`` connections: three quarters of the pool, the rest left to
        # transactions (none from a pool of one: kept, it would leave nothing for a write)
        size = 0 if self.is_sqlite else engine.pool.size()  # type: ignore[attr-defined]
        self.statement_connections = StatementConnections(
            engine,
            share=max(0, size - max(1, size // 4)),
            capacity=size + max_overflow,
            idle_seconds=STATEMENT_IDLE_SECONDS,
        )
        # decoded items shared by this process's context reads (None: off)
        self.item_cache = (
            ItemCache(max_items=item_cache_items, max_total_chars=item_cache_chars)
            if item_cache_items > 0 and item_cache_chars > 0
            else None
        )
        # whole projected prompts by session version and budget (None: off)
        self.prompt_cache = (
            PromptCache(max_entries=prompt_cache_entries, max_total_chars=prompt_cache_chars)
            if prompt_cache_entries > 0 and prompt_cache_chars > 0
            else None
        )
        # how many keys each session's last context read needed (None: off)
        self.window_sizes = WindowSizes(max_entries=window_sizes) if window_sizes > 0 else None

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        pool_size: int = 20,
        max_overflow: int = 0,
        item_cache_items: int = 0,
        prompt_cache_entries: int = 0,
        item_cache_chars: int = 32 * 1024 * 1024,
        prompt_cache_chars: int = 16 * 1024 * 1024,
        window_sizes: int = 0,
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
            max_overflow=max_overflow,
            item_cache_items=item_cache_items,
            prompt_cache_entries=prompt_cache_entries,
            item_cache_chars=item_cache_chars,
            prompt_cache_chars=prompt_cache_chars,
            window_sizes=window_sizes,
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
        with metadata are left to be loaded: the cache must hold exactly what a load gives,
        which for metadata was JSONB's rewrite of it before migration 0008."""
        if self.item_cache is None:
            return
        for item in items:
            if not item.metadata:
                self.item_cache.put((tenant_id, session_id, session_created_at, item.seq), item)

    async def dispose(self) -> None:
        await self.statement_connections.close()
        await self.engine.dispose()

    @asynccontextmanager
    async def _connect(self) -> AsyncIterator[AsyncConnection]:
        """``engine.connect()``, after making room in the pool (``make_room``): every
        checkout but the statement path's goes through here."""
        await self.statement_connections.make_room()
        async with self.engine.connect() as conn:
            yield conn

    @asynccontextmanager
    async def write(self) -> AsyncIterator[AsyncConnection]:
        try:
            async with self._connect() as conn:
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
            async with self._connect() as conn:
                await conn.execution_options(isolation_level="AUTOCOMMIT")
                yield conn
        except DATABASE_ERRORS as exc:
            self._raise_domain_error(exc)

    @asynccontextmanager
    async def statements(self) -> AsyncIterator[DriverConnection]:
        """Postgres: a pooled connection in autocommit for ``RawQuery`` statements only (the
        append, the context read), without SQLAlchemy's ``Connection`` around it
        (``DriverConnection``). Each statement commits on its own, as in ``autocommit()``.

        The connection comes from the statement path's own share of the pool, handed from
        one call to the next without going back (``app.store.statement_pool``)."""
        assert not self.is_sqlite
        try:
            fairy = await self.statement_connections.acquire()
        except DATABASE_ERRORS as exc:
            self._raise_domain_error(exc)
        conn = DriverConnection(self.engine, fairy)
        try:
            yield conn
        except DATABASE_ERRORS as exc:
            self._raise_domain_error(exc)
        finally:
            await self.statement_connections.release(fairy, lost=conn.lost)

    @asynccontextmanager
    async def read(self, *, snapshot: bool = False) -> AsyncIterator[AsyncConnection]:
        """A connection for reads. ``snapshot=True``: one transaction whose statements all see
        one snapshot (REPEATABLE READ on Postgres; a SQLite read transaction always does).

        Otherwise, on Postgres, autocommit: each statement sees the data committed when it
        starts, exactly as in a READ COMMITTED transaction, without the BEGIN and COMMIT
        round trips (most reads are one or two statements, so those were half the cost)."""
        try:
            async with self._connect() as conn:
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
        async with self._connect() as conn:
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
