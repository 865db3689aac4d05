"""Housekeeping: forget expired Idempotency-Keys, in the background of every server process.

Each replica runs it; the deletes are idempotent and bounded (one short transaction per batch),
so several replicas sweeping at once only share the work. Never raises into the server.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from app.services.runtime import Runtime, utcnow
from app.store.idempotency import IdempotencyRepository

log = logging.getLogger(__name__)

BATCH = 1000


async def purge_idempotency_keys(rt: Runtime, *, batch: int = BATCH) -> int:
    """Delete every expired idempotency record; returns how many."""
    total = 0
    while True:
        async with rt.store.write() as db:
            removed = await IdempotencyRepository(db).purge_expired(now=utcnow(), limit=batch)
        total += removed
        if removed < batch:
            return total


async def _sweep_forever(rt: Runtime, interval: float) -> None:
    while True:
        try:
            removed = await purge_idempotency_keys(rt)
            if removed:
                log.info("purged %d expired idempotency keys", removed)
        except Exception:  # a failed sweep is retried at the next interval
            log.exception("idempotency key purge failed")
        await asyncio.sleep(interval)


def start_housekeeping(rt: Runtime) -> asyncio.Task[None]:
    return asyncio.create_task(
        _sweep_forever(rt, rt.settings.idempotency_purge_seconds), name="housekeeping"
    )


async def stop_housekeeping(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
