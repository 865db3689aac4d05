"""Single-flight locks: one holder of a key across processes, for expensive work only.

No write depends on these (DESIGN §6): the session row in Postgres orders every write. They
keep two replicas from paying for the same work, an LLM compaction of one session
(``compaction_key``).

``RedisLocks`` (production, many processes): ``SET key token NX PX ttl`` to take the lock, a
compare-and-delete script to release it (never someone else's), a compare-and-extend script
renewing it every ttl/3 while held. Waiters in one process queue on a local lock first, so only
one of them polls Redis per key and process, and the lock is handed from one to the next
without a Redis round trip (a bounded number of times in a row). A holder waits at most
``wait_seconds``, then ``LockTimeout`` (503 with ``Retry-After``); Redis unreachable gives
``LockBackendUnavailable``, on which callers run the work unguarded. The redis client
reconnects by itself.

``LocalLocks`` (embedded mode, one process): an ``asyncio.Lock`` per key.
"""

from __future__ import annotations

import asyncio
import logging
import random
import secrets
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from app.domain.errors import LockBackendUnavailable, LockTimeout

log = logging.getLogger(__name__)

_RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end
return 0
"""
_RENEW = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end
return 0
"""


def _session_tag(tenant_id: str, session_id: str) -> str:
    # The tenant's length first: tenant ``acme`` with session ``prod:x`` and tenant
    # ``acme:prod`` with session ``x`` never share a key. The braces make Redis Cluster hash
    # every key of one session to one slot.
    return f"{{{len(tenant_id)}:{tenant_id}:{session_id}}}"


def compaction_key(tenant_id: str, session_id: str) -> str:
    """The single-flight key of a session's LLM compaction."""
    return f"sm:compact:{_session_tag(tenant_id, session_id)}"


@dataclass
class LockStats:
    """``listener`` (set by app.metrics) hears of every lock wait, in seconds, with its
    outcome, ``"acquired"`` or ``"timeout"``."""

    listener: Callable[[float, str], None] | None = None

    def record(self, seconds: float) -> None:
        if self.listener is not None:
            self.listener(seconds, "acquired")

    def record_timeout(self, seconds: float) -> None:
        if self.listener is not None:
            self.listener(seconds, "timeout")


class _KeyedLocal:
    """asyncio locks by key, dropped when nobody holds or waits for them."""

    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    def others(self, key: str) -> int:
        """How many besides the holder hold or wait for ``key`` (call while holding it)."""
        return max(self._locks.get(key, (None, 0))[1] - 1, 0)

    def idle(self, key: str) -> bool:
        return key not in self._locks

    @asynccontextmanager
    async def hold(self, key: str, wait_seconds: float) -> AsyncIterator[None]:
        lock, users = self._locks.get(key, (None, 0))
        if lock is None:
            lock = asyncio.Lock()
        self._locks[key] = (lock, users + 1)
        try:
            try:
                await asyncio.wait_for(lock.acquire(), timeout=max(wait_seconds, 0.001))
            except TimeoutError:
                raise LockTimeout(
                    "another write to this session is in progress; retry shortly",
                    retry_after=1,
                ) from None
            try:
                yield
            finally:
                lock.release()
        finally:
            lock, users = self._locks[key]
            if users <= 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)


class LocalLocks:
    """In-process locks for the embedded, single-process mode."""

    def __init__(self, *, wait_seconds: float) -> None:
        self.wait_seconds = wait_seconds
        self._local = _KeyedLocal()
        self.stats = LockStats()

    @asynccontextmanager
    async def hold(self, key: str) -> AsyncIterator[None]:
        start = time.monotonic()
        acquired = False
        try:
            async with self._local.hold(key, self.wait_seconds):
                acquired = True
                self.stats.record(time.monotonic() - start)
                yield
        except LockTimeout:
            if not acquired:
                self.stats.record_timeout(time.monotonic() - start)
            raise

    async def ping(self) -> None:
        return None

    async def close(self) -> None:
        return None


@dataclass
class _Held:
    """A Redis lock this process holds, with its renewal task."""

    token: str
    # Renewal starts a third of the TTL after acquiring (most writes are done long before):
    # a timer first, the renewing task only if the lock is still held then.
    timer: asyncio.TimerHandle | None = None
    renewer: asyncio.Task[None] | None = None
    lost: bool = False
    handoffs: int = 0


class RedisLocks:
    """Distributed locks on Redis, safe across processes and hosts.

    Handoff: when the holder finishes while another writer of this process already queues for
    the same session, the Redis lock (token and renewal) passes straight to it: no release,
    no ``SET NX`` and no polling sleep in between. At most ``MAX_HANDOFFS`` times in a row, so
    writers in other processes get their turn; never a lock whose renewal failed.
    """

    MAX_HANDOFFS = 8

    def __init__(
        self,
        url: str,
        *,
        wait_seconds: float,
        ttl_seconds: float,
        socket_timeout: float = 1.0,
    ) -> None:
        self.wait_seconds = wait_seconds
        self.ttl_ms = max(int(ttl_seconds * 1000), 50)
        self.redis = aioredis.Redis.from_url(
            url,
            socket_timeout=socket_timeout,
            socket_connect_timeout=socket_timeout,
            health_check_interval=30,
            retry_on_timeout=False,
        )
        self._release = self.redis.register_script(_RELEASE)
        self._renew = self.redis.register_script(_RENEW)
        self._local = _KeyedLocal()
        self._handed: dict[str, _Held] = {}  # passed on, not yet picked up by the next holder
        self.stats = LockStats()

    @asynccontextmanager
    async def hold(self, key: str) -> AsyncIterator[None]:
        start = time.monotonic()
        deadline = start + self.wait_seconds
        acquired = False
        try:
            async with self._local.hold(key, self.wait_seconds):
                held = self._handed.pop(key, None)
                if held is None or held.lost:
                    if held is not None:
                        await self._let_go(key, held)
                    held = _Held(secrets.token_hex(16))
                    await self._acquire(key, held.token, deadline)
                    held.timer = asyncio.get_running_loop().call_later(
                        self.ttl_ms / 3000, self._start_renewing, key, held
                    )
                acquired = True
                self.stats.record(time.monotonic() - start)
                try:
                    yield
                finally:
                    if (
                        self._local.others(key)
                        and not held.lost
                        and held.handoffs < self.MAX_HANDOFFS
                    ):
                        held.handoffs += 1
                        self._handed[key] = held
                    else:
                        await self._let_go(key, held)
        except LockTimeout:
            if not acquired:
                self.stats.record_timeout(time.monotonic() - start)
            raise
        finally:
            # The writers it was handed to gave up waiting: nobody will pick it up.
            if key in self._handed and self._local.idle(key):
                await self._let_go(key, self._handed.pop(key))

    def _start_renewing(self, key: str, held: _Held) -> None:
        held.timer = None
        held.renewer = asyncio.create_task(self._keep_alive(key, held))

    async def _let_go(self, key: str, held: _Held) -> None:
        if held.timer is not None:
            held.timer.cancel()
            held.timer = None
        if held.renewer is not None:
            held.renewer.cancel()
        try:
            await self._release(keys=[key], args=[held.token])
        except RedisError as exc:  # it expires by itself
            log.warning("lock release failed for %s: %s", key, exc)

    async def _acquire(self, key: str, token: str, deadline: float) -> None:
        delay = 0.002
        while True:
            try:
                if await self.redis.set(key, token, nx=True, px=self.ttl_ms):
                    return
            except (RedisError, OSError) as exc:
                raise LockBackendUnavailable(
                    f"lock backend unreachable: {type(exc).__name__}", retry_after=2
                ) from exc
            now = time.monotonic()
            if now >= deadline:
                raise LockTimeout(
                    "another write to this session is in progress; retry shortly",
                    retry_after=1,
                )
            await asyncio.sleep(min(delay * (0.5 + random.random()), deadline - now))
            # Writes hold a lock for milliseconds: a long sleep would leave it free and unused.
            delay = min(delay * 2, 0.01)

    async def _keep_alive(self, key: str, held: _Held) -> None:
        interval = self.ttl_ms / 3000
        while True:
            try:
                if not await self._renew(keys=[key], args=[held.token, self.ttl_ms]):
                    held.lost = True
                    log.warning("lock %s was lost while held; fencing protects the write", key)
                    return
            except RedisError as exc:
                log.warning("lock renewal failed for %s: %s", key, exc)
            await asyncio.sleep(interval)

    async def ping(self) -> None:
        try:
            await self.redis.ping()
        except (RedisError, OSError) as exc:
            raise LockBackendUnavailable(f"redis unreachable: {type(exc).__name__}") from exc

    async def close(self) -> None:
        for key, held in list(self._handed.items()):
            await self._let_go(key, held)
        self._handed.clear()
        await self.redis.aclose()


def build_locks(
    redis_url: str | None, *, wait_seconds: float, ttl_seconds: float, socket_timeout: float
) -> LocalLocks | RedisLocks:
    if redis_url:
        return RedisLocks(
            redis_url,
            wait_seconds=wait_seconds,
            ttl_seconds=ttl_seconds,
            socket_timeout=socket_timeout,
        )
    return LocalLocks(wait_seconds=wait_seconds)
