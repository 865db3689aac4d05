"""Prompt-cache stability of the context read: ``cut: tight`` against ``cut: stable``.

An agent loop on a real server (Postgres + Redis under uvicorn; the client is this process):
a system message, then 300 turns of a user message, a ``read_file`` call, a 25-line tool
output and an assistant reply. After each appended turn the context is read and compared with
the previous read. For every format x Tier 1 off/on (``max_recent_tool_results: 3``) two
sessions run in lockstep, one per cut, so both see the same load; plus the session that never
outgrows its budget (anthropic, 200,000 tokens, Tier 1 keeping 3).

Per run it prints: turns past the budget (some item dropped), the share of those whose prompt
keeps >= 90% of the previous prompt as its prefix, the mean prefix kept (over the same turns;
over every turn when the budget is never reached), the mean prompt size, the input tokens a
provider would bill uncached over the run (tokens past the prefix shared with the previous
prompt; the prefix is measured in serialised messages, its tokens pro rata), and the p50 read
latency. Targets for ``stable`` (ratios to ``tight`` in the same run): >= 85% of past-budget
turns keep >= 90%; uncached tokens <= 25% of tight's; p50 read latency <= 1.1 x tight's.

    .venv/bin/python bench/cache_stability.py [--turns 300]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.services import (  # noqa: E402
    REDIS_URL,
    ServerProcess,
    create_pg_database,
    drop_pg_database,
)

MESSAGES = {"canonical": "items", "openai-chat": "messages", "openai-responses": "input", "anthropic": "messages"}
RUNS: list[tuple[str, int, int | None]] = [
    (fmt, budget, tier1)
    for fmt, budget in (("anthropic", 8000), ("openai-chat", 8000), ("openai-responses", 32000), ("canonical", 8000))
    for tier1 in (None, 3)
] + [("anthropic", 200_000, 3)]


def turn(i: int) -> list[dict[str, Any]]:
    path = f"src/module_{i % 41}.py"
    return [
        {"type": "message", "role": "user", "content": f"Step {i}: check {path} and fix the failing test."},
        {"type": "function_call", "call_id": f"call_{i}", "name": "read_file", "arguments": json.dumps({"path": path})},
        {"type": "function_call_output", "call_id": f"call_{i}",
         "output": "".join(f"x{k} = {i + k}\n" for k in range(25))},
        {"type": "message", "role": "assistant", "content": f"{path} is fixed (step {i})."},
    ]


def messages(fmt: str, body: dict[str, Any]) -> list[str]:
    out = [json.dumps(body.get("system"), sort_keys=True)] if fmt == "anthropic" else []
    return out + [json.dumps(m, sort_keys=True) for m in body[MESSAGES[fmt]]]


@dataclass
class Run:
    past: int = 0
    kept90: int = 0
    kept: list[float] = field(default_factory=list)
    kept_all: list[float] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)
    uncached: float = 0.0
    latency: list[float] = field(default_factory=list)
    previous: list[str] | None = None

    def observe(self, fmt: str, body: dict[str, Any], seconds: float) -> None:
        now = messages(fmt, body)
        report = body["report"]
        shared = 0
        if self.previous is not None:
            for a, b in zip(self.previous, now, strict=False):
                if a != b:
                    break
                shared += len(a)
            fraction = shared / max(1, sum(map(len, self.previous)))
            self.kept_all.append(fraction)
            if report["dropped_items"]:
                self.past += 1
                self.kept90 += fraction >= 0.9
                self.kept.append(fraction)
        total = max(1, sum(map(len, now)))
        self.uncached += report["projected_tokens"] * (1 - min(shared, total) / total)
        self.sizes.append(report["projected_tokens"])
        self.latency.append(seconds)
        self.previous = now


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=300)
    args = parser.parse_args()
    url, name = create_pg_database()
    server = ServerProcess(env={"DATABASE_URL": url, "REDIS_URL": REDIS_URL,
                                "AUTO_MIGRATE": "false", "LOG_LEVEL": "warning"})
    server.start()
    results: dict[tuple[str, int, int | None], dict[str, Run]] = {}
    try:
        with httpx.Client(base_url=server.url, timeout=60) as client:
            for fmt, budget, tier1 in RUNS:
                runs = {"tight": Run(), "stable": Run()}
                sids = {}
                for cut in runs:
                    sid = f"cache-{cut}-{uuid.uuid4().hex[:8]}"
                    context: dict[str, Any] = {"max_tokens": budget, "cut": cut}
                    if tier1 is not None:
                        context["max_recent_tool_results"] = tier1
                    assert client.post("/v1/sessions", json={"id": sid, "config": {"context": context}}).status_code == 201
                    system = {"type": "message", "role": "system", "content": "You are a careful coding agent."}
                    assert client.post(f"/v1/sessions/{sid}/items", json={"items": [system]}).status_code == 201
                    sids[cut] = sid
                for i in range(args.turns):
                    for cut, sid in sids.items():  # lockstep: load drift hits both alike
                        assert client.post(f"/v1/sessions/{sid}/items", json={"items": turn(i)}).status_code == 201
                        start = time.perf_counter()
                        r = client.get(f"/v1/sessions/{sid}/context", params={"format": fmt})
                        seconds = time.perf_counter() - start
                        assert r.status_code == 200, r.text
                        runs[cut].observe(fmt, r.json(), seconds)
                results[(fmt, budget, tier1)] = runs
    finally:
        server.stop()
        drop_pg_database(name)

    print(f"cache stability, {args.turns} turns, Postgres + Redis; prefix = leading messages identical to the previous read")
    print(f"{'format, budget, tier1':>34} {'cut':>6} {'past':>5} {'>=90%':>6} {'mean kept':>9} "
          f"{'mean prompt':>11} {'uncached tok':>12} {'p50 ms':>7}")
    for (fmt, budget, tier1), runs in results.items():
        label = f"{fmt}, {budget:,}, {'keep ' + str(tier1) if tier1 is not None else 'off'}"
        for cut, run in runs.items():
            share = f"{run.kept90 / run.past:.0%}" if run.past else "-"
            mean = statistics.fmean(run.kept or run.kept_all or [0.0])
            print(f"{label:>34} {cut:>6} {run.past:>5} {share:>6} {mean:>9.1%} "
                  f"{statistics.fmean(run.sizes):>11,.0f} {run.uncached:>12,.0f} "
                  f"{statistics.median(run.latency) * 1000:>7.2f}")
        tight, stable = runs["tight"], runs["stable"]
        ratio_uncached = stable.uncached / max(1.0, tight.uncached)
        ratio_latency = statistics.median(stable.latency) / statistics.median(tight.latency)
        checks = [f"uncached {ratio_uncached:.0%} of tight ({'OK' if ratio_uncached <= 0.25 else 'OVER TARGET'})",
                  f"p50 latency x{ratio_latency:.2f} ({'OK' if ratio_latency <= 1.1 else 'OVER TARGET'})"]
        if stable.past:
            share = stable.kept90 / stable.past
            checks.insert(0, f">=90% kept on {share:.0%} of past-budget turns ({'OK' if share >= 0.85 else 'UNDER TARGET'})")
        print(f"{'':>34} stable: " + "; ".join(checks))


if __name__ == "__main__":
    main()
