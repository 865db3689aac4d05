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


async def test_statement_connections_are_kept_for_the_next_call_and_counted_by_the_pool(
    pg_database: str,
) -> None:
    """``statements()`` keeps its connection (a quarter of the pool at most) for the next
    call instead of checking it in and out; the pool still counts it, and disposing of the
    store gives it back."""
    store = Store.from_url(pg_database, pool_size=4, max_overflow=0)
    pool = store.engine.sync_engine.pool
    backends = []
    try:
        for _ in range(3):
            async with store.statements() as conn:
                backends.append((await _BACKEND.rows(conn, {}))[0][0])
            assert pool.checkedout() == 1  # type: ignore[attr-defined]
        assert len(set(backends)) == 1
        async with store.write() as db:  # a transaction gets one of the others
            assert (await db.execute(sa.text("SELECT 1"))).scalar_one() == 1
            assert pool.checkedout() == 2  # type: ignore[attr-defined]
        async with store.statements() as a, store.statements() as b:  # two at once
            pids = {(await _BACKEND.rows(c, {}))[0][0] for c in (a, b)}
        assert len(pids) == 2 and pool.checkedout() == 1  # type: ignore[attr-defined]
    finally:
        await store.dispose()
    assert pool.checkedout() == 0  # type: ignore[attr-defined]


async def test_a_pool_of_fewer_than_four_keeps_no_statement_connection(pg_database: str) -> None:
    """The CLI's one-connection store: a kept connection would leave none for a write."""
    store = Store.from_url(pg_database, pool_size=1, max_overflow=0)
    pool = store.engine.sync_engine.pool
    try:
        async with store.statements() as conn:
            await _BACKEND.rows(conn, {})
        assert pool.checkedout() == 0  # type: ignore[attr-defined]
        async with asyncio.timeout(5), store.write() as db:
            assert (await db.execute(sa.text("SELECT 1"))).scalar_one() == 1
    finally:
        await store.dispose()
