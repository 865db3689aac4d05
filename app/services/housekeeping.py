"""Housekeeping: forget expired Idempotency-Keys, run the retention sweep
(``services.retention``) and, on SQLite, merge the full-text index after erasures, in the
background of every server process.

Each replica runs it; the deletes are idempotent and bounded (one short transaction per batch),
so several replicas sweeping at once only share the work. Never raises into the server.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time

from app.services.retention import merge_search_index, run_sweep
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


async def _retention_forever(rt: Runtime, interval: float) -> None:
    while True:
        # Wake at the start of the next interval (not ``interval`` after the last run): every
        # replica then asks for the same interval's claim at about the same time, one wins,
        # and a sweep runs once per interval however long the last one took. The jitter
        # spreads the claims of a fleet over a few milliseconds.
        await asyncio.sleep(interval - time.time() % interval + random.uniform(0, interval / 50))
        try:
            report = await run_sweep(rt)
            if report.ran and report.erased.total_rows:
                log.info(
                    "retention sweep erased %d rows (%d sessions expired) in %.3f s",
                    report.erased.total_rows,
                    report.sessions_expired,
                    report.seconds,
                )
        except Exception:  # a failed sweep is retried at the next interval
            log.exception("retention sweep failed")


async def _merge_index_forever(rt: Runtime) -> None:
    """Each time an erasure asked for it, merge SQLite's index until the erased text is gone
    (several erasures in a row share one merge)."""
    while True:
        await rt.index_merge_wanted.wait()
        rt.index_merge_wanted.clear()
        try:
            await merge_search_index(rt)
        except Exception:  # retried at the next erasure or sweep
            log.exception("search index merge failed")


async def _all_forever(rt: Runtime) -> None:
    loops = [_sweep_forever(rt, rt.settings.idempotency_purge_seconds)]
    if rt.store.is_sqlite:
        loops.append(_merge_index_forever(rt))
    if rt.settings.retention.sweep_enabled:
        loops.append(_retention_forever(rt, rt.settings.retention.sweep_interval_seconds))
    await asyncio.gather(*loops)


def start_housekeeping(rt: Runtime) -> asyncio.Task[None]:
    return asyncio.create_task(_all_forever(rt), name="housekeeping")


async def stop_housekeeping(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
