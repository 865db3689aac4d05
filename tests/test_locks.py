"""The Redis lock against a real Redis: held past its TTL while the holder works (renewal),
exclusive across independent lock managers (as across processes), released on exit."""

from __future__ import annotations

import asyncio
import uuid

import pytest
import redis.asyncio as aioredis

from app.domain.errors import LockTimeout
from app.locks import RedisLocks
from tests.support.services import REDIS_URL


async def test_a_lock_held_longer_than_its_ttl_stays_held_and_exclusive() -> None:
    key = f"test-lock-{uuid.uuid4().hex}"
    mine = RedisLocks(REDIS_URL, wait_seconds=5, ttl_seconds=0.3)
    other = RedisLocks(REDIS_URL, wait_seconds=0.2, ttl_seconds=0.3)
    probe = aioredis.Redis.from_url(REDIS_URL)
    try:
        async with mine.hold(key):
            token = await probe.get(key)
            assert token is not None
            for _ in range(4):  # 1.2 s: four TTLs
                await asyncio.sleep(0.3)
                assert await probe.get(key) == token
                assert 0 < await probe.pttl(key) <= 300
            with pytest.raises(LockTimeout):
                async with other.hold(key):
                    pass
        assert await probe.get(key) is None
        async with other.hold(key):  # free again, at once
            assert await probe.get(key) is not None
        assert await probe.get(key) is None
    finally:
        await mine.close()
        await other.close()
        await probe.aclose()


async def test_a_short_hold_releases_without_renewing() -> None:
    key = f"test-lock-{uuid.uuid4().hex}"
    locks = RedisLocks(REDIS_URL, wait_seconds=1, ttl_seconds=3)
    probe = aioredis.Redis.from_url(REDIS_URL)
    try:
        tasks_before = len(asyncio.all_tasks())
        for _ in range(20):
            async with locks.hold(key):
                assert len(asyncio.all_tasks()) == tasks_before  # no renewal task yet
        assert await probe.get(key) is None
    finally:
        await locks.close()
        await probe.aclose()
