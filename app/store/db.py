"""Engines and transactions. Built in the app's lifespan (never at import).

``Store.write()`` opens a write transaction: on SQLite it is ``BEGIN IMMEDIATE`` so that a
writer takes the database lock up front and waits (busy timeout) instead of failing when it
upgrades from reading; on Postgres it is an ordinary transaction.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import orjson
import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from app.store.migrate import ensure_sqlite_dir


def _json_dumps(value: Any) -> str:
    return orjson.dumps(value).decode()


class Store:
    """Owns the engine; hands out connections inside transactions."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self.is_sqlite = engine.dialect.name == "sqlite"

    @classmethod
    def from_url(cls, url: str, *, pool_size: int = 10, max_overflow: int = 10) -> Store:
        kwargs: dict[str, Any] = {
            "json_serializer": _json_dumps,
            "json_deserializer": orjson.loads,
        }
        if url.startswith("sqlite"):
            ensure_sqlite_dir(url)
            engine = create_async_engine(url, **kwargs)
            _configure_sqlite(engine)
        else:
            engine = create_async_engine(
                url,
                pool_size=pool_size,
                max_overflow=max_overflow,
                pool_pre_ping=True,
                pool_recycle=1800,
                **kwargs,
            )
        return cls(engine)

    async def dispose(self) -> None:
        await self.engine.dispose()

    @asynccontextmanager
    async def write(self) -> AsyncIterator[AsyncConnection]:
        async with self.engine.connect() as conn:
            if self.is_sqlite:
                await conn.execution_options(sqlite_immediate=True)
            async with conn.begin():
                yield conn

    @asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncConnection]:
        async with self.engine.connect() as conn, conn.begin():
            yield conn

    async def ping(self) -> None:
        async with self.engine.connect() as conn:
            await conn.execute(sa.text("SELECT 1"))


def _configure_sqlite(engine: AsyncEngine) -> None:
    sync_engine = engine.sync_engine

    @event.listens_for(sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Take transaction control from the driver so BEGIN IMMEDIATE is ours to emit.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA busy_timeout=15000")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @event.listens_for(sync_engine, "begin")
    def _on_begin(conn: Any) -> None:
        if conn.get_execution_options().get("sqlite_immediate"):
            conn.exec_driver_sql("BEGIN IMMEDIATE")
        else:
            conn.exec_driver_sql("BEGIN")
