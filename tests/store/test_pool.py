"""The default Postgres pool keeps its connections under load above its size."""

from __future__ import annotations

import asyncio

import sqlalchemy as sa

from app.settings import Settings
from app.store.db import Store
from app.store.raw import RawQuery

_BACKEND = RawQuery(sa.select(sa.func.pg_backend_pid()))


async def test_the_default_pool_opens_no_connection_twice_under_sustained_load(
    pg_database: str,
) -> None:
    """Bursts of twice the pool size: every statement runs on one of the pool's first
    connections. (With overflow, the connections opened for each burst are closed when they
    come back, and the next burst opens new ones: a Postgres backend start each time.)"""
    settings = Settings(database_url=pg_database)  # type: ignore[call-arg]
    store = Store.from_url(
        pg_database, pool_size=settings.db_pool_size, max_overflow=settings.db_max_overflow
    )
    backends: set[int] = set()

    async def statement() -> None:
        async with store.statements() as conn:
            backends.add((await _BACKEND.rows(conn, {}))[0][0])
            await asyncio.sleep(0.005)  # hold it, as a request between statements would

    try:
        for _ in range(4):
            await asyncio.gather(*(statement() for _ in range(2 * settings.db_pool_size)))
        assert len(backends) <= settings.db_pool_size
    finally:
        await store.dispose()
