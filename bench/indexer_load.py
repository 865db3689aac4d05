"""The indexer under a steady write load: append latency with it on and off, and its lag.

    .venv/bin/python bench/indexer_load.py [--backends sqlite,postgres] [--rate 20]
        [--seconds 30] [--threads 1]

Per backend, two apps side by side in one process, each on its own fresh database: one with
the builtin embedder (its indexer embeds every appended item in the background), one with
``EMBEDDINGS__PROVIDER=none``. Each gets ``--rate`` single-item appends per second (texts of
the recall set, ~60-200 characters) for ``--seconds``, interleaved, so both see the same
machine at the same moments. Printed: append p50 / p90 of each and their ratio (target <=
1.05), and the indexer's lag (append to stored vector, from its ``vectors_indexed`` metric
hook): p50, p99 and max (target p99 <= 5 s), plus the items it indexed.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import uuid
from contextlib import AsyncExitStack
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from recall_set import build  # noqa: E402

from app.main import create_app  # noqa: E402
from app.settings import Settings  # noqa: E402
from tests.support.services import (  # noqa: E402
    REDIS_URL,
    create_pg_database,
    drop_pg_database,
)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


async def run(
    urls: dict[str, str], redis: str | None, *, rate: float, seconds: float, threads: int
):
    texts = build(items=1200).items
    lags: list[float] = []
    latency: dict[str, list[float]] = {"on": [], "off": []}
    async with AsyncExitStack() as stack:
        clients: dict[str, httpx.AsyncClient] = {}
        for label, provider in (("on", "builtin"), ("off", "none")):
            app = create_app(
                Settings(
                    database_url=urls[label],
                    redis_url=redis,
                    auth={"mode": "off"},
                    embeddings={"provider": provider, "threads": threads},
                )
            )
            await stack.enter_async_context(app.router.lifespan_context(app))
            if label == "on":
                rt = app.state.runtime
                rt.hooks["vectors_indexed"] = lags.extend
            clients[label] = await stack.enter_async_context(
                httpx.AsyncClient(
                    transport=httpx.ASGITransport(app=app), base_url="http://localhost"
                )
            )
        sid = f"load-{uuid.uuid4().hex[:6]}"
        for client in clients.values():  # the session, and the model loaded (first vectors)
            r = await client.post(
                f"/v1/sessions/{sid}/items",
                params={"create": "true"},
                json={"items": [{"type": "message", "role": "user", "content": "warm up"}]},
            )
            assert r.status_code < 300, r.text
        await asyncio.sleep(3)
        lags.clear()
        interval = 1.0 / rate
        n = int(rate * seconds)
        start = time.perf_counter()
        for i in range(n):
            order = ("on", "off") if i % 2 == 0 else ("off", "on")
            for label in order:
                body = {"items": [{"type": "message", "role": "user", "content": texts[i % 1200]}]}
                t0 = time.perf_counter()
                r = await clients[label].post(f"/v1/sessions/{sid}/items", json=body)
                latency[label].append((time.perf_counter() - t0) * 1000)
                assert r.status_code < 300, r.text
            delay = start + (i + 1) * interval - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
        achieved = n / (time.perf_counter() - start)
        deadline = time.perf_counter() + 60
        while len(lags) < n and time.perf_counter() < deadline:  # noqa: ASYNC110 (the tail)
            await asyncio.sleep(0.1)
    return latency, lags, achieved, n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--rate", type=float, default=20.0)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    print(
        "| backend | appends/s (each app) | append p50 / p90 ms, index on | append p50 / p90 ms, "
        "provider none | p50 ratio | indexer lag p50 / p99 / max s | indexed |"
    )
    print("|---|---:|---|---|---:|---|---:|")
    for backend in args.backends.split(","):
        names: list[str] = []
        with tempfile.TemporaryDirectory() as tmp:
            if backend == "sqlite":
                from app.store.migrate import upgrade

                urls = {}
                for label in ("on", "off"):
                    urls[label] = f"sqlite+aiosqlite:///{tmp}/{label}.db"
                    upgrade(urls[label])
                redis = None
            else:
                urls = {}
                for label in ("on", "off"):
                    urls[label], name = create_pg_database()
                    names.append(name)
                redis = REDIS_URL
            try:
                latency, lags, achieved, n = asyncio.run(
                    run(urls, redis, rate=args.rate, seconds=args.seconds, threads=args.threads)
                )
            finally:
                for name in names:
                    drop_pg_database(name)
        on, off = statistics.median(latency["on"]), statistics.median(latency["off"])
        print(
            f"| {backend} | {achieved:.1f} | {on:.1f} / {pct(latency['on'], 0.9):.1f} | "
            f"{off:.1f} / {pct(latency['off'], 0.9):.1f} | {on / off:.2f} | "
            f"{pct(lags, 0.5):.2f} / {pct(lags, 0.99):.2f} / {max(lags, default=float('nan')):.2f} "
            f"| {len(lags)} of {n} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
