"""The default Postgres pool keeps its connections under load above its size."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from contextlib import AsyncExitStack
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy import event

from app.domain.errors import DatabaseUnavailable
from app.settings import Settings
from app.store.db import Store
from app.store.raw import DriverConnection, RawQuery
from tests.support.services import PG_ADMIN_URL

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


# --- faults at every step of checkout and check-in ---------------------------------------
#
# Each test breaks a real connection (or the server's side of it) at one step, then checks
# that the share is whole: nothing is in use, the pool counts exactly the idle ones, and the
# whole share is usable at once, each call on a connection that works.


async def _assert_share_whole(store: Store) -> None:
    statements = store.statement_connections
    pool = store.engine.sync_engine.pool
    assert statements.owned == statements.idle, (statements.owned, statements.idle)
    assert pool.checkedout() == statements.owned  # type: ignore[attr-defined]
    async with asyncio.timeout(5), AsyncExitStack() as stack:
        conns = [
            await stack.enter_async_context(store.statements()) for _ in range(statements.share)
        ]
        pids = {(await _BACKEND.rows(c, {}))[0][0] for c in conns}
    assert len(pids) == statements.share


def _admin(sql: str, *params: object) -> None:
    import psycopg

    # (connected to the admin database: a database cannot refuse the connection altering it)
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as admin:
        admin.execute(sql, params)  # type: ignore[arg-type]


async def _in_a_transaction(conn: DriverConnection, pg_database: str) -> None:
    await conn.fairy.driver_connection.execute("BEGIN")


async def _in_a_failed_transaction(conn: DriverConnection, pg_database: str) -> None:
    import psycopg

    driver = conn.fairy.driver_connection
    await driver.execute("BEGIN")
    with pytest.raises(psycopg.errors.DivisionByZero):
        await driver.execute("SELECT 1 / 0")


async def _closed_by_the_driver(conn: DriverConnection, pg_database: str) -> None:
    await conn.fairy.driver_connection.close()


async def _terminated_by_the_server(conn: DriverConnection, pg_database: str) -> None:
    pid = (await _BACKEND.rows(conn, {}))[0][0]
    _admin("SELECT pg_terminate_backend(%s)", pid)
    with pytest.raises(DatabaseUnavailable):
        await _BACKEND.rows(conn, {})


async def _in_a_transaction_then_an_error(conn: DriverConnection, pg_database: str) -> None:
    await conn.fairy.driver_connection.execute("BEGIN")
    raise LookupError("the call fails with its connection in a transaction")


_SLEEP = RawQuery(sa.select(sa.func.pg_sleep(10)))


async def _cancelled_mid_statement(conn: DriverConnection, pg_database: str) -> None:
    task = asyncio.create_task(_SLEEP.rows(conn, {}))
    await asyncio.sleep(0.1)
    task.cancel()  # psycopg cancels the query on the server and waits for it to end
    with pytest.raises(asyncio.CancelledError):
        await task


async def _cancelled_twice_mid_statement(conn: DriverConnection, pg_database: str) -> None:
    task = asyncio.create_task(_SLEEP.rows(conn, {}))
    await asyncio.sleep(0.1)
    task.cancel()
    await asyncio.sleep(0)
    task.cancel()  # interrupts psycopg's own cancellation: it closes the connection
    with pytest.raises(asyncio.CancelledError):
        await task


@pytest.mark.parametrize(
    "fault",
    [
        _in_a_transaction,
        _in_a_failed_transaction,
        _closed_by_the_driver,
        _terminated_by_the_server,
        _in_a_transaction_then_an_error,
        _cancelled_mid_statement,
        _cancelled_twice_mid_statement,
    ],
    ids=lambda f: f.__name__.strip("_"),
)
async def test_a_connection_broken_during_a_call_frees_its_slot_and_is_never_handed_out(
    pg_database: str, fault: Any
) -> None:
    """Check-in: whatever state a call leaves its connection in (in a transaction, failed,
    closed, dropped by the server, interrupted mid-statement), the slot is freed (handed to
    the waiting call, here) and the connection goes back to the pool only if it is idle and
    open; otherwise it is closed and another opened in its place. A call that waited gets a
    working connection, and twice the share of broken calls loses nothing."""
    store = Store.from_url(pg_database, pool_size=2, max_overflow=0)
    statements = store.statement_connections
    assert statements.share == 1
    try:
        for _ in range(2 * statements.share):
            waiter: asyncio.Task[int] | None = None
            with contextlib.suppress(LookupError, DatabaseUnavailable):
                async with store.statements() as conn:
                    waiter = asyncio.create_task(_pid(store))
                    await asyncio.sleep(0.05)
                    assert not waiter.done()  # waits for this call's slot
                    await fault(conn, pg_database)
            assert waiter is not None
            async with asyncio.timeout(5):
                await waiter  # and got a working connection
        async with asyncio.timeout(5):
            async with store.write() as db:  # the pool took back no broken connection
                assert (await db.execute(sa.text("SELECT 1"))).scalar_one() == 1
        await _assert_share_whole(store)
    finally:
        await store.dispose()
    assert store.engine.sync_engine.pool.checkedout() == 0  # type: ignore[attr-defined]


async def _pid(store: Store) -> int:
    async with store.statements() as conn:
        return int((await _BACKEND.rows(conn, {}))[0][0])


async def test_a_connection_checked_out_in_a_transaction_is_replaced(pg_database: str) -> None:
    """Checkout: a connection SQLAlchemy's pool hands over that cannot be put in autocommit
    (here left in a transaction by a checkout hook) is closed and replaced by a new one: the
    call gets a working connection and the slot stays counted once."""
    store = Store.from_url(pg_database, pool_size=2, max_overflow=0)
    broken: list[int] = []

    @event.listens_for(store.engine.sync_engine, "checkout")
    def _leave_in_a_transaction(dbapi_connection: Any, record: Any, proxy: Any) -> None:
        if not broken:
            cursor = dbapi_connection.cursor()
            cursor.execute("BEGIN")
            cursor.execute("SELECT pg_backend_pid()")
            broken.append(cursor.fetchone()[0])
            cursor.close()

    try:
        async with asyncio.timeout(5):
            pid = await _pid(store)
        assert broken and pid != broken[0]
        await _assert_share_whole(store)
    finally:
        await store.dispose()


async def test_a_refused_checkout_frees_its_slot_for_the_next_call(pg_database: str) -> None:
    """Checkout: the database refusing new connections fails the call with a 503, and the
    call waiting for its slot gets the slot (and tries, and fails, itself); once connections
    are allowed again the whole share comes back."""
    store = Store.from_url(pg_database, pool_size=2, max_overflow=0)
    dbname = pg_database.rsplit("/", 1)[1]
    try:
        _admin(f'ALTER DATABASE "{dbname}" WITH ALLOW_CONNECTIONS false')
        try:
            first, second = asyncio.create_task(_pid(store)), asyncio.create_task(_pid(store))
            for call in (first, second):
                with pytest.raises(DatabaseUnavailable):
                    async with asyncio.timeout(5):
                        await call
            assert store.statement_connections.owned == 0
        finally:
            _admin(f'ALTER DATABASE "{dbname}" WITH ALLOW_CONNECTIONS true')
        await _assert_share_whole(store)
    finally:
        await store.dispose()


async def test_a_checkout_cancelled_while_connecting_frees_its_slot() -> None:
    """Checkout: a call cancelled while its connection is still being opened (a server that
    accepts the TCP connection and never answers) gives its slot to the call waiting behind
    it, and that one, cancelled too, leaves nothing counted."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    port = listener.getsockname()[1]
    store = Store.from_url(f"postgresql+psycopg://u@127.0.0.1:{port}/silent", pool_size=2)
    statements = store.statement_connections
    try:
        first = asyncio.create_task(_pid(store))
        await asyncio.sleep(0.1)
        second = asyncio.create_task(_pid(store))
        await asyncio.sleep(0.1)
        assert statements.owned == 1 and not first.done() and not second.done()
        first.cancel()
        await asyncio.sleep(0.1)  # the slot went to the second call, now connecting itself
        assert statements.owned == 1 and not second.done()
        second.cancel()
        for call in (first, second):
            with pytest.raises(asyncio.CancelledError):
                await call
        assert statements.owned == 0
    finally:
        await store.dispose()
        listener.close()


async def test_kept_connections_dropped_by_the_server_are_replaced(pg_database: str) -> None:
    """Checkout of a kept connection: the server dropped them all while idle (a restart).
    The next call fails with a 503 (no ping before use) and every other kept one is
    discarded with it: the calls after get new connections, and the share is whole."""
    store = Store.from_url(pg_database, pool_size=4, max_overflow=0)
    statements = store.statement_connections
    dbname = pg_database.rsplit("/", 1)[1]
    try:
        await _assert_share_whole(store)
        assert statements.idle == 3
        _admin(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = %s AND pid <> pg_backend_pid()",
            dbname,
        )
        with pytest.raises(DatabaseUnavailable):
            await _pid(store)
        assert statements.owned == statements.idle == 0
        await _assert_share_whole(store)
    finally:
        await store.dispose()
