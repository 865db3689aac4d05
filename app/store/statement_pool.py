"""StatementConnections: the connections ``Store.statements()`` hands out (the append, the
context read), passed from one call to the next without going back to SQLAlchemy's pool.

Checking a connection out of SQLAlchemy's pool and back in (a greenlet each way, the
autocommit switches, the reset) cost an append about 160 us of CPU, a fifth of it
(bench/RESULTS.md, session 8). So the statement path checks out up to ``share`` of the pool's
connections once and keeps them, in autocommit: a call takes the one freed last, and a call
that finds none free while all ``share`` are in use waits for the next one handed back (an
asyncio future: no pool, no greenlet). The rest of the pool is left to transactions, which
never wait for a statement connection kept idle: one goes back when they would.

Invariants:
- ``owned`` counts the connections the statement path has out of the pool (in use, idle, or
  being checked out) and never exceeds ``share``; the pool counts them too, so the process
  keeps to ``DB_POOL_SIZE + DB_MAX_OVERFLOW`` connections;
- a waiter is always handed something: a connection, or a free slot to check one out of the
  pool itself (after a connection was dropped); a waiter cancelled or timed out after being
  handed one passes it on, so none is ever lost;
- a connection unused for ``idle_seconds`` goes back to the pool, and so does one idle
  whenever another checkout finds the pool exhausted (``make_room``); after a lost connection
  every idle one is invalidated (the server that dropped one may have dropped them all).

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


async def check_in(fairy: Any) -> None:
    """A statement connection back to the pool, in the mode the pool hands them out."""
    if not fairy.is_valid:
        return  # invalidated: SQLAlchemy has already taken it back
    driver = fairy.driver_connection
    if not driver.closed and driver.autocommit:
        await driver.set_autocommit(False)  # SQLAlchemy's default isolation
    await greenlet_spawn(fairy.close)


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
        """A connection (a SQLAlchemy pool fairy) in autocommit."""
        fairy = await self._take()
        driver = fairy.driver_connection
        if not driver.autocommit:
            try:
                await driver.set_autocommit(True)
            except BaseException:
                await self.release(fairy, lost=False)
                raise
        return fairy

    async def release(self, fairy: Any, *, lost: bool) -> None:
        """Back from a call; ``lost``: the server went away under one of its statements."""
        if lost:
            await self._drop(fairy, invalidated=True)
            idle, self._idle = self._idle, []
            for old, _ in idle:
                await greenlet_spawn(old.invalidate)
                self._free_slot()
            return
        driver = fairy.driver_connection
        if (
            self.share == 0
            or not fairy.is_valid
            or driver.closed
            or driver.info.transaction_status != _IDLE
        ):
            await self._drop(fairy, invalidated=not fairy.is_valid)
            return
        self._hand_on(fairy)

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
            return self._idle.pop()[0]
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
        is given up (to a waiter, if any) should the checkout fail."""
        try:
            return await self.engine.raw_connection()
        except BaseException:
            if counted:
                self._free_slot()
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

    async def _drop(self, fairy: Any, *, invalidated: bool) -> None:
        if not invalidated:
            await check_in(fairy)
        if self.share:
            self._free_slot()

    async def _retire_idle(self) -> None:
        """Idle connections unused for ``idle_seconds`` go back to the pool (oldest first)."""
        now = time.monotonic()
        while self._idle and now - self._idle[0][1] > self.idle_seconds:
            await self._give_back_oldest()

    async def _give_back_oldest(self) -> None:
        """The idle connection freed first back to the pool, out of ``owned``."""
        fairy, _ = self._idle.pop(0)
        self.owned -= 1
        await check_in(fairy)
