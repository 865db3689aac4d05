"""StatementConnections: the connections ``Store.statements()`` hands out (the append, the
context read), passed from one call to the next without going back to SQLAlchemy's pool.

Checking a connection out of SQLAlchemy's pool and back in (a greenlet each way, the
autocommit switches, the reset) cost an append about 160 us of CPU, a fifth of it
(bench/RESULTS.md, session 8). So the statement path checks out up to ``share`` of the pool's
connections once and keeps them, in autocommit: a call takes the one freed last, and a call
that finds none free while all ``share`` are in use waits for the next one handed back (an
asyncio future: no pool, no greenlet). The rest of the pool is left to transactions, which
never wait for a statement connection kept idle: one goes back when they would.

Why not ``psycopg_pool``: with the statement path on an ``AsyncConnectionPool`` of the same
share, 64-client append throughput fell from 0.52-0.57 of the floor to 0.33-0.39 (more worker
CPU per request; one client and the agent loop within noise), and a separate pool could not
give idle connections back to transactions (bench/RESULTS.md, session 13).

Invariants:
- ``owned`` counts the connections the statement path has out of the pool (in use, idle, or
  being checked out) and never exceeds ``share``; the pool counts them too, so the process
  keeps to ``DB_POOL_SIZE + DB_MAX_OVERFLOW`` connections;
- a waiter is always handed something: a connection, or a free slot to check one out of the
  pool itself (after a connection was dropped); a waiter cancelled or timed out after being
  handed one passes it on, so none is ever lost;
- a connection unused for ``idle_seconds`` goes back to the pool, and so does one idle
  whenever another checkout finds the pool exhausted (``make_room``); after a lost connection
  every idle one is invalidated (the server that dropped one may have dropped them all);
- accounting is exception-safe: whatever a call leaves its connection in (a transaction, a
  failed one, closed, interrupted mid-statement) and whatever fails or is cancelled while it
  is checked in, its slot is freed (or handed on) exactly once, in a ``finally``. Only an
  open, idle connection is kept or goes back to the pool; any other is invalidated (closed:
  the pool opens a new one in its place), and one found unfit at checkout is replaced, so a
  call is never handed a connection known to be broken (tests/store/test_pool.py injects a
  fault at each step, tests/system/test_statement_pool_faults.py in a live server).

One event loop per process, so no locking.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from typing import Any

import sqlalchemy as sa
from psycopg import pq
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.util import greenlet_spawn

_IDLE = pq.TransactionStatus.IDLE
_SLOT = None  # handed to a waiter: no connection, but room to check one out


def usable(fairy: Any) -> bool:
    """Open and idle (no transaction, no statement running): fit to be handed to a call, or
    back to the pool; any other connection is discarded."""
    if not fairy.is_valid:
        return False
    driver = fairy.driver_connection
    return not driver.closed and driver.info.transaction_status == _IDLE


async def discard(fairy: Any) -> None:
    """Close a connection and take it off the pool's count (the pool opens a new one when it
    next needs one). It never waits on the network (psycopg closes the socket at once), so
    no cancellation can stop it halfway."""
    if fairy.is_valid:
        await greenlet_spawn(fairy.invalidate)


async def check_in(fairy: Any) -> None:
    """A statement connection back to the pool, in the mode the pool hands them out, or
    discarded if it is not fit to be (``usable``) or the check-in fails: either way the pool
    no longer counts it as out, whatever is raised."""
    if not usable(fairy):
        await discard(fairy)
        return
    try:
        driver = fairy.driver_connection
        if driver.autocommit:
            await driver.set_autocommit(False)  # SQLAlchemy's default isolation
        await greenlet_spawn(fairy.close)
    except BaseException:
        await discard(fairy)
        raise


class StatementConnections:
    def __init__(
        self, engine: AsyncEngine, *, share: int, capacity: int, idle_seconds: float
    ) -> None:
        """``capacity``: the most connections the pool hands out (its size and overflow)."""
        self.engine = engine
        self.share = share
        self.capacity = capacity
        self.idle_seconds = idle_seconds
        self.owned = 0
        self._idle: list[tuple[Any, float]] = []  # (connection, freed at), the newest last
        self._waiters: deque[asyncio.Future[Any]] = deque()

    @property
    def idle(self) -> int:
        return len(self._idle)

    async def acquire(self) -> Any:
        """A connection (a SQLAlchemy pool fairy) in autocommit, open and idle. One that is
        not (a kept one closed since, or one the pool hands over in a transaction) is
        discarded, its slot freed, and the call takes another, once: a second is an error."""
        for _ in range(2):
            fairy = await self._take()
            if usable(fairy):
                driver = fairy.driver_connection
                if not driver.autocommit:
                    try:
                        await driver.set_autocommit(True)
                    except BaseException:
                        await self.release(fairy, lost=False)
                        raise
                return fairy
            await self._drop(fairy)
        raise sa.exc.InterfaceError(
            "statement connection", None, _Unusable("two connections in a row were unusable")
        )

    async def release(self, fairy: Any, *, lost: bool) -> None:
        """Back from a call; ``lost``: the server went away under one of its statements.

        Whatever happens (a connection left in a transaction, closed, a check-in that fails
        or is cancelled), the slot is freed or handed on exactly once: a connection that is
        open and idle is kept (or handed to a waiter), any other is discarded."""
        if lost:
            try:
                await self._drop(fairy)
            finally:
                await self._discard_idle()
            return
        if self.share and usable(fairy):
            self._hand_on(fairy)
            return
        await self._drop(fairy)

    async def make_room(self) -> None:
        """Before another checkout from the pool: if the pool has nothing left to hand out,
        one idle statement connection goes back to it, so that the caller never waits while a
        connection sits unused here (the statement path checks out another when it needs
        one)."""
        if self._idle and self.engine.pool.checkedout() >= self.capacity:  # type: ignore[attr-defined]
            await self._give_back_oldest()

    async def close(self) -> None:
        """Every idle connection back to the pool (the engine is being disposed of)."""
        while self._idle:
            await self._give_back_oldest()

    async def _take(self) -> Any:
        if self.share == 0:  # a pool too small to keep any: out and back in every time
            return await self._check_out(counted=False)
        await self._retire_idle()
        if self._idle:
            return self._idle.pop()[0]  # (``acquire`` replaces it if it was closed since)
        if self.owned < self.share:
            self.owned += 1
            return await self._check_out(counted=True)
        waiter: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            async with asyncio.timeout(self.engine.pool.timeout()):  # type: ignore[attr-defined]
                handed = await waiter
        except TimeoutError:
            self._pass_on(waiter)
            raise sa.exc.TimeoutError(
                f"no statement connection free within {self.engine.pool.timeout():g} s"  # type: ignore[attr-defined]
            ) from None
        except BaseException:
            self._pass_on(waiter)
            raise
        if handed is _SLOT:
            return await self._check_out(counted=True)
        return handed

    async def _check_out(self, *, counted: bool) -> Any:
        """A connection out of SQLAlchemy's pool; ``counted``: into a slot of ``owned`` that
        is given up (to a waiter, if any) should the checkout fail. A driver error (the
        database refusing connections) is raised as SQLAlchemy's, as ``engine.connect()``
        raises it, so that the store maps it to a 503."""
        dbapi_error = self.engine.dialect.loaded_dbapi.Error
        try:
            return await self.engine.raw_connection()
        except BaseException as exc:
            if counted:
                self._free_slot()
            if isinstance(exc, dbapi_error):
                raise sa.exc.DBAPIError.instance(
                    None, None, exc, dbapi_error, dialect=self.engine.dialect
                ) from exc
            raise

    def _next_waiter(self) -> asyncio.Future[Any] | None:
        """The longest-waiting call still waiting (cancelled ones are skipped)."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                return waiter
        return None

    def _hand_on(self, fairy: Any) -> None:
        waiter = self._next_waiter()
        if waiter is None:
            self._idle.append((fairy, time.monotonic()))
        else:
            waiter.set_result(fairy)

    def _free_slot(self) -> None:
        """One connection fewer is out: its slot goes to a waiter, if any."""
        waiter = self._next_waiter()
        if waiter is None:
            self.owned -= 1
        else:
            waiter.set_result(_SLOT)

    def _pass_on(self, waiter: asyncio.Future[Any]) -> None:
        """A waiter leaving without its connection: what it was handed goes on."""
        if waiter.done() and not waiter.cancelled():
            handed = waiter.result()
            if handed is _SLOT:
                self._free_slot()
            else:
                self._hand_on(handed)
        else:
            waiter.cancel()  # skipped when its turn comes

    async def _drop(self, fairy: Any) -> None:
        """A connection leaving the statement path (back to the pool, or discarded): its
        slot is freed even if checking it in fails."""
        try:
            await check_in(fairy)
        finally:
            if self.share:
                self._free_slot()

    async def _discard_idle(self) -> None:
        """After a lost connection: every idle one is discarded (the server that dropped one
        may have dropped them all), each slot freed."""
        idle, self._idle = self._idle, []
        for fairy, _ in idle:
            try:
                await discard(fairy)
            finally:
                self._free_slot()

    async def _retire_idle(self) -> None:
        """Idle connections unused for ``idle_seconds`` go back to the pool (oldest first)."""
        now = time.monotonic()
        while self._idle and now - self._idle[0][1] > self.idle_seconds:
            await self._give_back_oldest()

    async def _give_back_oldest(self) -> None:
        """The idle connection freed first back to the pool, out of ``owned`` (its slot goes
        back to the pool, not to a waiter: there is none while a connection is idle)."""
        fairy, _ = self._idle.pop(0)
        self.owned -= 1
        await check_in(fairy)


class _Unusable(Exception):
    """The pool handed over connections that could not be made ready for a call."""
