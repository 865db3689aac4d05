"""Running the async client's coroutines from sync code (the framework adapters' sync
methods): on a fresh event loop in a worker thread, so that it works whether or not the
caller's thread runs a loop (the async client keeps one connection pool per loop)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

_T = TypeVar("_T")
_POOL = ThreadPoolExecutor(max_workers=4, thread_name_prefix="session-memory-bridge")


def blocking(call: Callable[[], Awaitable[_T]]) -> _T:
    """The result of ``await call()``, waited for from sync code."""

    async def run() -> _T:
        return await call()

    return _POOL.submit(asyncio.run, run()).result()
