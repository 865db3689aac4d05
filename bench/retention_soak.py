"""Retention soak: sessions that come and go under a short TTL, with the sweep on.

Starts, in this run, ``session-memory serve --workers 2`` on a fresh Postgres database with
Redis (the sweep single-flighted across the two workers), ``RETENTION__SWEEP_INTERVAL_SECONDS``
short, and drives it from this process with ``--clients`` concurrent HTTP clients:

- ``--sessions`` slots (default 2,000), each holding one session created with
  ``config.ttl_seconds = --ttl``; every request appends one small message to a random slot's
  session. After ``--life`` appends a slot abandons its session (it will expire) and creates a
  new one, so sessions keep expiring and being erased for the whole run; an append that finds
  its session already expired (404) replaces it too;
- every ``--sample`` seconds: the database size (``pg_database_size``), the rows of the data
  tables, and how many sessions are still present though expired more than two intervals ago.

Reports, all from this one run:

- storage after the first TTL window (the first slots' sessions life + TTL + two intervals):
  largest / smallest database size, and the same for the data rows (target <= 1.10);
- append p99 while a sweep was running (windows read from the server's log, one line per
  sweep that erased something) against append p99 outside any sweep (target <= 1.2);
- the oldest leftover: sessions expired longer than two intervals ago (target 0 at every
  sample), and the sweep's count from ``/metrics``.

    .venv/bin/python bench/retention_soak.py [--seconds 90] [--sessions 2000] [--ttl 10]
        [--interval 3] [--clients 16]

The default duration is short; the issue's soak is "a few minutes": ``--seconds 240``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import statistics
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import httpx
import psycopg

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.services import (  # noqa: E402
    PG_ADMIN_URL,
    REDIS_URL,
    ServerProcess,
    create_pg_database,
    drop_pg_database,
)

TARGETS = {"size_ratio": 1.10, "sweep_p99_ratio": 1.2, "leftover": 0}
ITEM = {"type": "message", "role": "user", "content": "What is the next step? Run the tests."}


@dataclass
class Slot:
    session_id: str = ""
    appends: int = 0


@dataclass
class Load:
    latencies: list[tuple[float, float]] = field(default_factory=list)  # (start, seconds)
    created: int = 0
    replaced_expired: int = 0
    errors: int = 0


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


async def new_session(client: httpx.AsyncClient, slot: Slot, ttl: int, load: Load) -> None:
    slot.session_id = f"soak-{uuid.uuid4().hex[:16]}"
    slot.appends = 0
    r = await client.post(
        "/v1/sessions", json={"id": slot.session_id, "config": {"ttl_seconds": ttl}}
    )
    if r.status_code != 201:
        load.errors += 1
    load.created += 1


async def drive(base: str, args: argparse.Namespace, clock: dict[str, float], load: Load) -> None:
    """Create the first generation, then append for ``--seconds`` (``clock`` gets the load's
    start and end)."""
    slots = [Slot() for _ in range(args.sessions)]
    limits = httpx.Limits(max_connections=args.clients, max_keepalive_connections=args.clients)
    async with httpx.AsyncClient(base_url=base, timeout=30, limits=limits) as client:
        # create the first generation, spread over the first seconds
        sem = asyncio.Semaphore(args.clients)

        async def first(slot: Slot) -> None:
            async with sem:
                await new_session(client, slot, args.ttl, load)

        await asyncio.gather(*(first(s) for s in slots))
        clock["load_start"] = time.time()
        clock["stop_at"] = stop_at = clock["load_start"] + args.seconds

        async def worker() -> None:
            body = {"items": [ITEM]}
            while time.time() < stop_at:
                slot = random.choice(slots)
                if slot.appends >= args.life:
                    await new_session(client, slot, args.ttl, load)
                start = time.time()
                r = await client.post(f"/v1/sessions/{slot.session_id}/items", json=body)
                took = time.time() - start
                if r.status_code == 201:
                    slot.appends += 1
                    load.latencies.append((start, took))
                elif r.status_code == 404:  # expired between two appends: a new one
                    load.replaced_expired += 1
                    await new_session(client, slot, args.ttl, load)
                else:
                    load.errors += 1

        await asyncio.gather(*(worker() for _ in range(args.clients)))


def sample(pg_url: str, interval: float) -> dict[str, float]:
    with psycopg.connect(pg_url) as db:
        size = db.execute("SELECT pg_database_size(current_database())").fetchone()
        rows = db.execute(
            "SELECT (SELECT count(*) FROM sessions) + (SELECT count(*) FROM items) + "
            "(SELECT count(*) FROM events) + (SELECT count(*) FROM idempotency_keys)"
        ).fetchone()
        sessions = db.execute("SELECT count(*) FROM sessions").fetchone()
        leftover = db.execute(
            "SELECT count(*) FROM sessions WHERE expires_at < now() - make_interval(secs => %s)",
            (2 * interval,),
        ).fetchone()
        erasures = db.execute("SELECT count(*) FROM erasures").fetchone()
    assert size and rows and sessions and leftover and erasures
    return {
        "t": time.time(),
        "db_bytes": float(size[0]),
        "rows": float(rows[0]),
        "sessions": float(sessions[0]),
        "leftover": float(leftover[0]),
        "erasures": float(erasures[0]),
    }


async def sampler(
    pg_url: str, args: argparse.Namespace, clock: dict[str, float], out: list[dict[str, float]]
) -> None:
    while time.time() < clock["stop_at"]:
        out.append(await asyncio.to_thread(sample, pg_url, args.interval))
        await asyncio.sleep(args.sample)


def sweep_windows(log_path: Path) -> list[tuple[float, float]]:
    """(start, end) of every sweep that erased something, from the server's JSON log."""
    windows = []
    pattern = re.compile(r"retention sweep erased \d+ rows \(\d+ sessions expired\) in ([\d.]+) s")
    for line in log_path.read_text(errors="replace").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        match = pattern.search(str(record.get("message", "")))
        if not match:
            continue
        end = datetime.fromisoformat(record["time"]).timestamp()
        windows.append((end - float(match.group(1)), end))
    return sorted(windows)


def overlaps(start: float, took: float, windows: list[tuple[float, float]]) -> bool:
    end = start + took
    return any(ws <= end and start <= we for ws, we in windows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=90, help="load duration")
    parser.add_argument("--sessions", type=int, default=2000, help="concurrent session slots")
    parser.add_argument("--ttl", type=int, default=10, help="config.ttl_seconds of each session")
    parser.add_argument("--interval", type=float, default=3, help="sweep interval, seconds")
    parser.add_argument("--life", type=int, default=3, help="appends before a slot moves on")
    parser.add_argument("--clients", type=int, default=16, help="concurrent HTTP clients")
    parser.add_argument("--sample", type=float, default=2, help="storage sample period, s")
    args = parser.parse_args()

    url, name = create_pg_database()
    pg_url = PG_ADMIN_URL.rsplit("/", 1)[0] + "/" + name
    log_path = Path(tempfile.mkdtemp(prefix="soak-")) / "server.log"
    server = ServerProcess(
        env={
            "DATABASE_URL": url,
            "REDIS_URL": REDIS_URL,
            "AUTO_MIGRATE": "false",
            "LOG_LEVEL": "info",
            "RETENTION__SWEEP_INTERVAL_SECONDS": str(args.interval),
        },
        log_path=log_path,
    )
    try:
        server.start(workers=2, timeout=180)
        load, samples = Load(), []
        clock = {"stop_at": float("inf"), "load_start": float("nan")}

        async def run() -> None:
            await asyncio.gather(
                drive(server.url, args, clock, load), sampler(pg_url, args, clock, samples)
            )

        asyncio.run(run())
        started = clock["load_start"]
        samples.append(sample(pg_url, args.interval))
        metrics = httpx.get(server.url + "/metrics", timeout=10).text
    finally:
        server.stop()
        drop_pg_database(name)

    windows = sweep_windows(log_path)
    during = [took for start, took in load.latencies if overlaps(start, took, windows)]
    outside = [took for start, took in load.latencies if not overlaps(start, took, windows)]
    # steady state: the first generation's life (appends at the observed rate) + TTL + 2 sweeps
    rate = len(load.latencies) / max(args.seconds, 1)
    life_seconds = args.life * args.sessions / max(rate, 1e-9)
    settle = started + min(life_seconds, args.seconds / 2) + args.ttl + 2 * args.interval
    steady = [s for s in samples if s["t"] >= settle]
    if len(steady) < 2:
        steady = samples[len(samples) // 2 :]
    size_ratio = max(s["db_bytes"] for s in steady) / min(s["db_bytes"] for s in steady)
    rows_ratio = max(s["rows"] for s in steady) / max(min(s["rows"] for s in steady), 1)
    leftover = max(s["leftover"] for s in samples)
    sweeps = re.search(
        r"^session_memory_retention_sweep_duration_seconds_count (\S+)$", metrics, re.M
    )
    p99_during, p99_outside = percentile(during, 0.99), percentile(outside, 0.99)
    result = {
        "seconds": args.seconds,
        "first_generation_seconds": round(started - samples[0]["t"], 1) if samples else None,
        "appends": len(load.latencies),
        "appends_per_s": round(rate, 1),
        "sessions_created": load.created,
        "replaced_after_expiry": load.replaced_expired,
        "errors": load.errors,
        "sweeps_logged": len(windows),
        "sweeps_in_metrics_this_worker": float(sweeps.group(1)) if sweeps else None,
        "sweep_seconds_median": round(statistics.median([e - s for s, e in windows]), 4)
        if windows
        else None,
        "erasure_records": samples[-1]["erasures"],
        "steady_samples": len(steady),
        "db_bytes_min_max": [
            min(s["db_bytes"] for s in steady),
            max(s["db_bytes"] for s in steady),
        ],
        "size_ratio": round(size_ratio, 3),
        "rows_ratio": round(rows_ratio, 3),
        "append_p50_ms": round(percentile([t for _, t in load.latencies], 0.5) * 1000, 2),
        "append_p99_outside_sweeps_ms": round(p99_outside * 1000, 2),
        "append_p99_during_sweeps_ms": round(p99_during * 1000, 2),
        "appends_during_sweeps": len(during),
        "sweep_p99_ratio": round(p99_during / p99_outside, 3) if outside and during else None,
        "leftover_expired_over_two_intervals_max": leftover,
    }
    print(json.dumps(result, indent=2))
    verdict = {
        "size flat (<= 1.10)": size_ratio <= TARGETS["size_ratio"],
        "p99 during sweeps <= 1.2x outside": (result["sweep_p99_ratio"] or 0)
        <= TARGETS["sweep_p99_ratio"],
        "expired erased within two intervals": leftover <= TARGETS["leftover"],
    }
    for name_, ok in verdict.items():
        print(f"{'PASS' if ok else 'FAIL'}  {name_}")


if __name__ == "__main__":
    main()
