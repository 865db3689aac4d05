"""Single-client append latency into sessions already holding 10, 1,000 and 10,000 items.

Postgres + Redis under uvicorn (a real server process); the client is this process. Prints
p50/p99 per session size and the ratio of each p50 to the 10-item p50, measured in the same
run (machines are noisy: compare ratios, not absolute times). Target: p50 at 10,000 items
<= 1.2 x p50 at 10 items.

    .venv/bin/python bench/append_latency.py [--appends 400]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.services import (  # noqa: E402
    REDIS_URL,
    ServerProcess,
    create_pg_database,
    drop_pg_database,
)

SIZES = [10, 1_000, 10_000]


def fill(client: httpx.Client, sid: str, count: int) -> None:
    assert client.post("/v1/sessions", json={"id": sid}).status_code == 201
    done = 0
    while done < count:
        n = min(1000, count - done)
        items = [
            {"type": "message", "role": "user" if (done + i) % 2 else "assistant",
             "content": f"message {done + i}: " + "lorem ipsum dolor sit amet " * 4}
            for i in range(n)
        ]
        r = client.post(f"/v1/sessions/{sid}/items", json={"items": items})
        assert r.status_code == 201, r.text
        done += n


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--appends", type=int, default=400)
    args = parser.parse_args()
    url, name = create_pg_database()
    server = ServerProcess(env={"DATABASE_URL": url, "REDIS_URL": REDIS_URL,
                                "AUTO_MIGRATE": "false", "LOG_LEVEL": "warning"})
    server.start()
    try:
        with httpx.Client(base_url=server.url, timeout=30) as client:
            sessions = {size: f"bench-{size}-{uuid.uuid4().hex[:6]}" for size in SIZES}
            for size, sid in sessions.items():
                fill(client, sid, size)
            body = {"items": [{"type": "message", "role": "user",
                               "content": "What is the next step? Please run the tests."}]}
            for sid in sessions.values():  # warm-up
                for _ in range(30):
                    client.post(f"/v1/sessions/{sid}/items", json=body)
            samples: dict[int, list[float]] = {size: [] for size in SIZES}
            # interleave the sizes so drift in machine load hits all of them alike
            for _ in range(args.appends):
                for size, sid in sessions.items():
                    start = time.perf_counter()
                    r = client.post(f"/v1/sessions/{sid}/items", json=body)
                    samples[size].append(time.perf_counter() - start)
                    assert r.status_code == 201
    finally:
        server.stop()
        drop_pg_database(name)
    base = statistics.median(samples[SIZES[0]])
    print(f"append latency, single client, Postgres + Redis, {args.appends} appends per size")
    print(f"{'items in session':>18} {'p50 ms':>8} {'p99 ms':>8} {'p50 / p50@10':>13}")
    for size in SIZES:
        p50 = statistics.median(samples[size])
        p99 = percentile(samples[size], 0.99)
        print(f"{size:>18,} {p50 * 1000:8.2f} {p99 * 1000:8.2f} {p50 / base:13.2f}")
    ratio = statistics.median(samples[SIZES[-1]]) / base
    verdict = "OK" if ratio <= 1.2 else "OVER TARGET"
    print(f"target p50@10,000 <= 1.2 x p50@10: {ratio:.2f} {verdict}")


if __name__ == "__main__":
    main()
