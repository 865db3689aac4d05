"""The default Postgres pool keeps its connections under load above its size."""

from __future__ import annotations

import asyncio

import pytest
import sqlalchemy as sa

from app.domain.errors import DatabaseUnavailable
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
    """``statements()`` keeps its connections (three quarters of the pool at most) for the
    next call instead of checking them in and out; the pool still counts them, transactions
    get the rest, and disposing of the store gives them back."""
    store = Store.from_url(pg_database, pool_size=4, max_overflow=0)
    pool = store.engine.sync_engine.pool
    assert store.statement_connections.share == 3
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
        assert len(pids) == 2 and pool.checkedout() == 2  # type: ignore[attr-defined]
        assert store.statement_connections.idle == 2
    finally:
        await store.dispose()
    assert pool.checkedout() == 0  # type: ignore[attr-defined]


async def test_a_pool_of_one_keeps_no_statement_connection(pg_database: str) -> None:
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


async def test_statement_calls_beyond_the_share_wait_for_the_next_one_handed_back(
    pg_database: str,
) -> None:
    """Four times as many statement calls as the share, with transactions among them: every
    call completes, the statement path never holds more than its share, a transaction always
    finds a connection, and nothing is left checked out but the idle share."""
    store = Store.from_url(pg_database, pool_size=4, max_overflow=0)
    pool = store.engine.sync_engine.pool
    statements = store.statement_connections
    backends: set[int] = set()
    most = 0

    async def statement() -> None:
        nonlocal most
        for _ in range(5):
            async with store.statements() as conn:
                backends.add((await _BACKEND.rows(conn, {}))[0][0])
                most = max(most, statements.owned)
                await asyncio.sleep(0.002)

    async def transaction() -> None:
        for _ in range(5):
            async with store.write() as db:
                assert (await db.execute(sa.text("SELECT 1"))).scalar_one() == 1
            await asyncio.sleep(0.001)

    try:
        async with asyncio.timeout(20):
            await asyncio.gather(*(statement() for _ in range(12)), transaction(), transaction())
        assert most == 3 and len(backends) == 3
        assert statements.owned == statements.idle == 3
        assert pool.checkedout() == 3  # type: ignore[attr-defined]
    finally:
        await store.dispose()
    assert pool.checkedout() == 0  # type: ignore[attr-defined]


async def test_a_waiter_cancelled_or_timed_out_loses_no_connection(
    pg_database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A call waiting for a statement connection that is cancelled, or whose wait times out
    (a 503, as a pool timeout is), leaves the share whole: the next call gets a connection at
    once."""
    store = Store.from_url(pg_database, pool_size=2, max_overflow=0)
    statements = store.statement_connections
    assert statements.share == 1
    monkeypatch.setattr(store.engine.sync_engine.pool, "_timeout", 0.2)

    async def one() -> int:
        async with store.statements() as conn:
            return int((await _BACKEND.rows(conn, {}))[0][0])

    try:
        async with store.statements() as held:
            waiter = asyncio.create_task(one())
            await asyncio.sleep(0.05)
            assert not waiter.done()
            waiter.cancel()
            with pytest.raises(DatabaseUnavailable):
                await one()  # waits 0.2 s for the one held, then gives up
            handed = asyncio.create_task(one())
            await asyncio.sleep(0.05)
            pid = (await _BACKEND.rows(held, {}))[0][0]
        assert await asyncio.wait_for(handed, 5) == pid  # handed on when released
        with pytest.raises(asyncio.CancelledError):
            await waiter
        assert statements.owned == statements.idle == 1
        async with asyncio.timeout(1):
            assert await one() == pid
    finally:
        await store.dispose()


async def test_a_transaction_never_waits_while_a_statement_connection_sits_idle(
    pg_database: str,
) -> None:
    """Right after a burst of statement calls the statement path holds its whole share, idle;
    transactions that need more than the rest of the pool get the idle ones back at once
    rather than waiting for the pool's timeout."""
    store = Store.from_url(pg_database, pool_size=4, max_overflow=0)
    pool = store.engine.sync_engine.pool
    statements = store.statement_connections

    async def statement() -> None:
        async with store.statements() as conn:
            await _BACKEND.rows(conn, {})
            await asyncio.sleep(0.01)

    try:
        await asyncio.gather(*(statement() for _ in range(3)))
        assert statements.idle == 3 and pool.checkedout() == 3  # type: ignore[attr-defined]
        async with asyncio.timeout(5):
            async with store.write() as a, store.write() as b, store.read() as c:
                for db in (a, b, c):
                    assert (await db.execute(sa.text("SELECT 1"))).scalar_one() == 1
        assert statements.owned == statements.idle == 1
        await asyncio.gather(*(statement() for _ in range(3)))  # and the share comes back
        assert statements.owned == 3
    finally:
        await store.dispose()
    assert pool.checkedout() == 0  # type: ignore[attr-defined]
