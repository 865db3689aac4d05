"""Context read latency: an 8,000-token prompt from sessions of 100, 10,000 and 100,000 items.

Postgres + Redis under uvicorn (a real server process); the client is this process. Also
measures a plain ``GET /v1/sessions/{id}`` in the same run as the yardstick. Targets:
p50 at 100,000 items <= 1.5 x p50 at 100; p50 at 10,000 <= 2 x p50 of the plain GET.

The sessions are a coding agent's turns whose tool outputs are file excerpts of ~400 tokens,
so even the 100-item session holds more than the budget: every read sends an 8,000-token
prompt and the sizes differ only in how much history lies behind it.

Two rounds, each interleaving the sessions and the plain GET:

- ``repeat``: the same read again and again (the session does not change between reads);
  from the second read on, the server answers from its per-process prompt cache;
- ``after append``: before each timed read, one agent turn (4 items) is appended to the
  session (not timed), so every read projects anew: the agent loop's cost.

    .venv/bin/python bench/context_read.py [--reads 300] [--format openai-chat]
"""

from __future__ import annotations

import argparse
import json
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

SIZES = [100, 10_000, 100_000]
BUDGET = 8000


def turn(i: int) -> list[dict]:
    """A coding-agent turn: user asks, model calls a tool, the tool answers, model replies."""
    return [
        {"type": "message", "role": "user", "content": f"Step {i}: look at module {i % 97} and fix the failing check."},
        {"type": "function_call", "call_id": f"call_{i}", "name": "read_file",
         "arguments": json.dumps({"path": f"src/module_{i % 97}.py"})},
        {"type": "function_call_output", "call_id": f"call_{i}",
         "output": "".join(f"def f_{i}_{k}(x):\n    return x * {i} + {k}  # step {k}\n"
                           for k in range(16))},
        {"type": "message", "role": "assistant", "content": f"Module {i % 97} multiplies by {i}; fixed."},
    ]


def fill(client: httpx.Client, sid: str, count: int) -> None:
    r = client.post("/v1/sessions", json={"id": sid})
    assert r.status_code == 201, r.text
    client.post(f"/v1/sessions/{sid}/items",
                json={"items": [{"type": "message", "role": "system", "content": "You are a coding agent."}]})
    batch: list[dict] = []
    i = 0
    done = 1
    while done < count:
        for item in turn(i):
            if done + len(batch) < count:
                batch.append(item)
        i += 1
        if len(batch) >= 996 or done + len(batch) >= count:
            r = client.post(f"/v1/sessions/{sid}/items", json={"items": batch})
            assert r.status_code == 201, r.text
            done += len(batch)
            batch = []


def analyze(url: str) -> None:
    """Refresh the planner's statistics, as autovacuum would within a minute or so; without
    them a table filled seconds ago looks empty and the planner picks sequential scans."""
    import psycopg

    with psycopg.connect(url.replace("+psycopg", ""), autocommit=True) as conn:
        conn.execute("ANALYZE")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reads", type=int, default=300)
    parser.add_argument("--format", default="openai-chat")
    args = parser.parse_args()
    url, name = create_pg_database()
    server = ServerProcess(env={"DATABASE_URL": url, "REDIS_URL": REDIS_URL,
                                "AUTO_MIGRATE": "false", "LOG_LEVEL": "warning"})
    server.start()
    rounds: dict[str, dict[str, list[float]]] = {}
    reports: dict[int, dict] = {}
    try:
        with httpx.Client(base_url=server.url, timeout=60) as client:
            sessions = {size: f"ctx-{size}-{uuid.uuid4().hex[:6]}" for size in SIZES}
            started = time.perf_counter()
            for size, sid in sessions.items():
                fill(client, sid, size)
            print(f"filled {sum(SIZES):,} items in {time.perf_counter() - started:.0f} s")
            analyze(url)
            params = {"format": args.format, "max_tokens": BUDGET}
            targets = {f"context@{size}": (sid, f"/v1/sessions/{sid}/context", params)
                       for size, sid in sessions.items()}
            targets["GET session"] = (sessions[10_000], f"/v1/sessions/{sessions[10_000]}", {})
            for _, path, query in targets.values():  # warm-up
                for _ in range(20):
                    assert client.get(path, params=query).status_code == 200
            step = 10 ** 6
            for mode in ("repeat", "after append"):
                samples: dict[str, list[float]] = {label: [] for label in targets}
                for _ in range(args.reads):  # interleaved: load drift hits all alike
                    for label, (sid, path, query) in targets.items():
                        if mode == "after append":
                            step += 1
                            r = client.post(f"/v1/sessions/{sid}/items", json={"items": turn(step)})
                            assert r.status_code == 201, r.text
                        start = time.perf_counter()
                        r = client.get(path, params=query)
                        samples[label].append(time.perf_counter() - start)
                        assert r.status_code == 200
                rounds[mode] = samples
            for size, sid in sessions.items():
                reports[size] = client.get(f"/v1/sessions/{sid}/context", params=params).json()["report"]
    finally:
        server.stop()
        drop_pg_database(name)

    print(f"context read, {args.format}, max_tokens={BUDGET}, Postgres + Redis, {args.reads} reads each")
    for mode, samples in rounds.items():
        print(f"\n{mode}:")
        print(f"{'what':>16} {'p50 ms':>8} {'p99 ms':>8} {'projected tok':>14} {'items sent':>11}")
        for label, values in samples.items():
            size = int(label.split("@")[1]) if "@" in label else None
            extra = (f"{reports[size]['projected_tokens']:>14} {reports[size]['projected_items']:>11}"
                     if size else "")
            print(f"{label:>16} {statistics.median(values) * 1000:8.2f} "
                  f"{percentile(values, 0.99) * 1000:8.2f} {extra}")
        p50 = {label: statistics.median(v) for label, v in samples.items()}
        r1 = p50["context@100000"] / p50["context@100"]
        r2 = p50["context@10000"] / p50["GET session"]
        print(f"target p50@100,000 <= 1.5 x p50@100:     {r1:.2f} {'OK' if r1 <= 1.5 else 'OVER TARGET'}")
        print(f"target p50@10,000 <= 2 x p50(GET session): {r2:.2f} {'OK' if r2 <= 2 else 'OVER TARGET'}")


if __name__ == "__main__":
    main()
