"""Database errors mean what they say (app/store/db_errors.py): the store turns a driver error
into the domain error the API maps to a problem, by SQLSTATE class on Postgres and by result
code on SQLite. Each case is provoked for real on the real databases; the classifier is also
run on driver error instances for the states a test cannot cheaply provoke."""

from __future__ import annotations

import asyncio
import sqlite3
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa
from sqlalchemy import exc as sa_exc
from sqlalchemy.ext.asyncio import AsyncConnection

from app.api.problems import status_for
from app.domain import errors as e
from app.store.db import Store
from app.store.db_errors import domain_error_for

Opener = Callable[[Store], AbstractAsyncContextManager[AsyncConnection]]

# Every way the store hands out a Postgres connection.
PG_OPENERS: dict[str, Opener] = {
    "write": lambda store: store.write(),
    "autocommit": lambda store: store.autocommit(),
    "read": lambda store: store.read(),
    "read-snapshot": lambda store: store.read(snapshot=True),
}


@pytest.fixture
async def pg_store(pg_database: str) -> AsyncIterator[Store]:
    store = Store.from_url(pg_database, pool_size=2, max_overflow=2)
    try:
        yield store
    finally:
        await store.dispose()


@pytest.fixture
async def sqlite_store(sqlite_url: str) -> AsyncIterator[Store]:
    store = Store.from_url(sqlite_url, pool_size=2, max_overflow=2)
    try:
        yield store
    finally:
        await store.dispose()


async def _fails(opener: Opener, store: Store, sql: str, **params: Any) -> e.DomainError:
    with pytest.raises(e.DomainError) as raised:
        async with opener(store) as db:
            await db.execute(sa.text(sql), params)
    return raised.value


@pytest.mark.parametrize("opener", PG_OPENERS)
@pytest.mark.parametrize(
    ("sql", "params", "words"),
    [
        ("SELECT CAST(:v AS integer)", {"v": "2147483648"}, "out of range"),  # 22003
        ("SELECT CAST(:v AS integer)", {"v": "twelve"}, "invalid input syntax"),  # 22P02
        ("SELECT make_timestamp(2020, 13, 1, 0, 0, 0)", {}, "out of range"),  # 22008
        ("SELECT CAST(:v AS varchar(4))", {"v": "x"}, None),  # an explicit cast truncates: fine
    ],
)
async def test_a_data_error_is_invalid_input_not_a_retry(
    pg_store: Store, opener: str, sql: str, params: dict[str, Any], words: str | None
) -> None:
    if words is None:  # the control: the same path without an error returns its row
        async with PG_OPENERS[opener](pg_store) as db:
            assert (await db.execute(sa.text(sql), params)).scalar_one() == "x"
        return
    error = await _fails(PG_OPENERS[opener], pg_store, sql, **params)
    assert type(error) is e.InvalidInput and status_for(error) == 422
    assert error.code == "invalid-input" and words in error.detail
    assert isinstance(error.__cause__, sa_exc.DataError)


async def test_a_value_too_long_for_its_column_is_invalid_input(pg_store: Store) -> None:
    """22001 string_data_right_truncation, from a real insert into a real column; the
    transaction is rolled back."""
    table = f"h16_{uuid.uuid4().hex[:8]}"
    async with pg_store.write() as db:
        await db.execute(sa.text(f"CREATE TABLE {table} (name varchar(8))"))
    try:
        with pytest.raises(e.InvalidInput) as raised:
            async with pg_store.write() as db:
                await db.execute(sa.text(f"INSERT INTO {table} VALUES ('short')"))
                await db.execute(sa.text(f"INSERT INTO {table} VALUES (:v)"), {"v": "x" * 9})
        assert type(raised.value) is e.InvalidInput and "too long" in raised.value.detail
        async with pg_store.read() as db:
            assert (await db.execute(sa.text(f"SELECT count(*) FROM {table}"))).scalar_one() == 0
    finally:
        async with pg_store.write() as db:
            await db.execute(sa.text(f"DROP TABLE {table}"))


@pytest.mark.parametrize("opener", PG_OPENERS)
async def test_a_program_limit_is_a_413_not_a_retry(pg_store: Store, opener: str) -> None:
    """54000 program_limit_exceeded is an OperationalError in psycopg: it used to be a
    retryable 503 "connection failed"."""
    error = await _fails(
        PG_OPENERS[opener], pg_store, "SELECT array_fill(1, ARRAY[100000, 100000])"
    )
    assert type(error) is e.LimitExceeded and status_for(error) == 413
    assert "exceeds a database limit" in error.detail and "array size" in error.detail
    assert not isinstance(error, e.Unavailable)


async def test_a_tsvector_past_its_limit_is_a_413(pg_store: Store) -> None:
    """The limit an item's search text meets (the expression index on items): 54000 too."""
    text = " ".join(f"w{n:07d}" for n in range(140_000))
    error = await _fails(
        PG_OPENERS["read"], pg_store, "SELECT to_tsvector('simple', :t)", t=text
    )
    assert type(error) is e.LimitExceeded and "too long for tsvector" in error.detail


async def _deadlock(pg_store: Store) -> list[BaseException | None]:
    """Two transactions each take one advisory lock, then wait for the other's: Postgres
    detects the deadlock (after deadlock_timeout, 1 s) and aborts one of them."""
    both_hold = asyncio.Barrier(2)

    async def one(first: int, second: int) -> None:
        async with pg_store.write() as db:
            await db.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": first})
            await both_hold.wait()
            await db.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": second})

    keys = uuid.uuid4().int % 2**31, uuid.uuid4().int % 2**31
    results = await asyncio.gather(
        one(keys[0], keys[1]), one(keys[1], keys[0]), return_exceptions=True
    )
    return list(results)


async def test_a_deadlock_is_a_409_transaction_conflict(pg_store: Store) -> None:
    results = await asyncio.wait_for(_deadlock(pg_store), timeout=30)
    failed = [r for r in results if r is not None]
    assert len(failed) == 1, results  # the survivor committed once the victim rolled back
    error = failed[0]
    assert isinstance(error, e.TransactionConflict) and status_for(error) == 409
    assert "deadlock" in error.detail and "send it again" in error.detail
    assert getattr(error.__cause__, "orig", None).sqlstate == "40P01"  # type: ignore[union-attr]


async def test_a_serialization_failure_is_a_409_transaction_conflict(pg_store: Store) -> None:
    """40001: a REPEATABLE READ transaction (a snapshot read) updating a row another
    transaction changed after its snapshot was taken."""
    table = f"h16_{uuid.uuid4().hex[:8]}"
    async with pg_store.write() as db:
        await db.execute(sa.text(f"CREATE TABLE {table} (n int)"))
        await db.execute(sa.text(f"INSERT INTO {table} VALUES (1)"))
    try:
        with pytest.raises(e.TransactionConflict) as raised:
            async with pg_store.read(snapshot=True) as db:
                assert (await db.execute(sa.text(f"SELECT n FROM {table}"))).scalar_one() == 1
                async with pg_store.write() as other:
                    await other.execute(sa.text(f"UPDATE {table} SET n = 2"))
                await db.execute(sa.text(f"UPDATE {table} SET n = 3"))
        assert raised.value.code == "transaction-conflict"
        assert raised.value.__cause__.orig.sqlstate == "40001"  # type: ignore[union-attr]
        async with pg_store.read() as db:
            assert (await db.execute(sa.text(f"SELECT n FROM {table}"))).scalar_one() == 2
    finally:
        async with pg_store.write() as db:
            await db.execute(sa.text(f"DROP TABLE {table}"))


async def test_a_lock_timeout_stays_a_503_lock_timeout(pg_store: Store) -> None:
    key = uuid.uuid4().int % 2**31
    async with pg_store.write() as holder:
        await holder.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": key})
        with pytest.raises(e.LockTimeout) as raised:
            async with pg_store.write() as db:
                await db.execute(sa.text("SET LOCAL lock_timeout = '50ms'"))
                await db.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": key})
    assert status_for(raised.value) == 503 and raised.value.retry_after == 1


@pytest.mark.parametrize("opener", PG_OPENERS)
async def test_a_lost_connection_stays_a_retryable_503(pg_store: Store, opener: str) -> None:
    """The server ends the connection mid-request (a restart, a failover, an operator)."""
    with pytest.raises(e.DatabaseUnavailable) as raised:
        async with PG_OPENERS[opener](pg_store) as db:
            await db.execute(sa.text("SELECT pg_terminate_backend(pg_backend_pid())"))
    assert status_for(raised.value) == 503 and raised.value.retry_after == 1
    assert "retry shortly" in raised.value.detail
    async with pg_store.read() as db:  # the pool replaced the connection
        assert (await db.execute(sa.text("SELECT 1"))).scalar_one() == 1


async def _assert_a_bug_surfaces(store: Store) -> None:
    for opener in (lambda s: s.write(), lambda s: s.read()):
        with pytest.raises(sa_exc.DBAPIError) as raised:
            async with opener(store) as db:
                await db.execute(sa.text("SELECT * FROM no_such_table_h16"))
        assert not isinstance(raised.value, e.DomainError)


async def test_a_bug_is_not_disguised_on_postgres(pg_store: Store) -> None:
    """A missing table is a bug or a missing migration: it surfaces as itself (a 500), never
    as a retryable 503."""
    await _assert_a_bug_surfaces(pg_store)


async def test_a_bug_is_not_disguised_on_sqlite(sqlite_store: Store) -> None:
    """On SQLite "no such table" is an OperationalError, like "database is locked"."""
    await _assert_a_bug_surfaces(sqlite_store)


async def test_sqlite_too_big_is_a_413(sqlite_store: Store) -> None:
    for opener in (lambda s: s.write(), lambda s: s.read()):
        with pytest.raises(e.LimitExceeded) as raised:
            async with opener(sqlite_store) as db:
                await db.execute(sa.text("SELECT zeroblob(2000000000)"))
        assert "too big" in raised.value.detail


async def test_sqlite_locked_stays_a_retryable_503(sqlite_url: str, sqlite_store: Store) -> None:
    path = sqlite_url.split("///", 1)[1]
    holder = sqlite3.connect(path, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")  # another writer holds the database
        with pytest.raises(e.LockTimeout) as raised:
            async with sqlite_store.read() as db:
                await db.exec_driver_sql("PRAGMA busy_timeout=0")  # fail now, not in 15 s
                await db.exec_driver_sql("DELETE FROM sessions WHERE id = 'h16-none'")
        assert status_for(raised.value) == 503 and "another write" in raised.value.detail
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def _pg(sqlstate: str | None, *, cls: type[sa_exc.DBAPIError] = sa_exc.OperationalError) -> Any:
    if sqlstate is None:
        orig: Exception = psycopg.OperationalError("connection failed: Connection refused")
    else:
        orig = psycopg.errors.lookup(sqlstate)("from the server")
    return cls("SELECT 1", {}, orig)


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (_pg(None), e.DatabaseUnavailable),  # a client-side connection failure
        (_pg("08006"), e.DatabaseUnavailable),  # connection_failure
        (_pg("08001"), e.DatabaseUnavailable),  # sqlclient_unable_to_establish_sqlconnection
        (_pg("57P01"), e.DatabaseUnavailable),  # admin_shutdown
        (_pg("57P03"), e.DatabaseUnavailable),  # cannot_connect_now (starting up)
        (_pg("53300"), e.DatabaseUnavailable),  # too_many_connections
        (_pg("55P03"), e.LockTimeout),
        (_pg("40001"), e.TransactionConflict),
        (_pg("40P01"), e.TransactionConflict),
        (_pg("54000"), e.LimitExceeded),
        (_pg("54001"), e.LimitExceeded),  # statement_too_complex
        (_pg("22003", cls=sa_exc.DataError), e.InvalidInput),
        (_pg("22008", cls=sa_exc.DataError), e.InvalidInput),
        (_pg("22P02", cls=sa_exc.DataError), e.InvalidInput),
        (_pg("42P01", cls=sa_exc.ProgrammingError), None),  # undefined_table: a bug
        (_pg("23505", cls=sa_exc.IntegrityError), None),  # a duplicate nobody caught: a bug
        (_pg("XX000", cls=sa_exc.InternalError), None),
        (sa_exc.DataError("SELECT 1", {}, psycopg.DataError("date too small")), None),
        (sa_exc.InterfaceError("SELECT 1", {}, psycopg.InterfaceError("connection closed")),
         e.DatabaseUnavailable),
        (sa_exc.TimeoutError("QueuePool limit reached"), e.DatabaseUnavailable),
    ],
)
def test_postgres_classification(exc: Exception, expected: type[e.DomainError] | None) -> None:
    mapped = domain_error_for(exc, sqlite=False)
    if expected is None:
        assert mapped is None
    else:
        assert type(mapped) is expected, mapped
        retryable = isinstance(mapped, e.Unavailable)
        assert retryable == (status_for(mapped) == 503)


def test_a_disconnect_is_a_503_whatever_its_sqlstate() -> None:
    exc = sa_exc.DBAPIError(
        "SELECT 1", {}, psycopg.errors.lookup("XX000")("boom"), connection_invalidated=True
    )
    assert type(domain_error_for(exc, sqlite=False)) is e.DatabaseUnavailable


@pytest.mark.parametrize(
    ("message", "errorname", "cls", "expected"),
    [
        ("database is locked", "SQLITE_BUSY", sa_exc.OperationalError, e.LockTimeout),
        ("database table is locked", "SQLITE_LOCKED", sa_exc.OperationalError, e.LockTimeout),
        ("database or disk is full", "SQLITE_FULL", sa_exc.OperationalError,
         e.DatabaseUnavailable),
        ("database is locked", None, sa_exc.OperationalError, e.LockTimeout),
        ("string or blob too big", "SQLITE_TOOBIG", sa_exc.DataError, e.LimitExceeded),
        ("no such table: x", "SQLITE_ERROR", sa_exc.OperationalError, None),
        ("bad parameter or other API misuse", "SQLITE_MISUSE", sa_exc.InterfaceError, None),
    ],
)
def test_sqlite_classification(
    message: str, errorname: str | None, cls: type[sa_exc.DBAPIError], expected: type | None
) -> None:
    orig = sqlite3.OperationalError(message)
    if errorname is not None:
        orig.sqlite_errorname = errorname  # type: ignore[attr-defined]
    mapped = domain_error_for(cls("SELECT 1", {}, orig), sqlite=True)
    assert (type(mapped) if mapped is not None else None) is expected
