"""Structured compaction of a 10,000-item coding-agent session: time and peak memory.

Two measurements on the same generated transcript (user turns; tool calls reading, grepping,
editing and running tests on real-looking file paths; outputs, some of them failures with
tracebacks and non-zero exits; reasoning; assistant answers):

1. domain: ``plan_cut`` + ``structured_compaction`` on in-memory items; wall time (best of
   ``--repeat``) and the ``tracemalloc`` peak of one run;
2. service: ``compact_session`` through the real write protocol on a fresh SQLite file (and,
   with ``--postgres``, a fresh Postgres database): load the whole working memory, plan, fold,
   commit (archive ~10k rows, session row, compactions row, event) in one transaction; wall
   time of an untraced run, then ``tracemalloc`` peak and ``ru_maxrss`` of a traced one.

    .venv/bin/python bench/compaction.py [--items 10000] [--repeat 5] [--postgres]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import resource
import sys
import tempfile
import time
import tracemalloc
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.domain.compaction import plan_cut, structured_compaction  # noqa: E402
from app.domain.items import (  # noqa: E402
    StoredItem,
    body_from_dict,
    item_chars,
    parse_canonical_items,
)
from app.domain.tokens import item_tokens  # noqa: E402
from app.locks import build_locks  # noqa: E402
from app.services.compaction import CompactRequest, compact_session  # noqa: E402
from app.services.items import append_items  # noqa: E402
from app.services.runtime import Actor, Encoded, Runtime  # noqa: E402
from app.services.sessions import SessionCreateCommand, create_session  # noqa: E402
from app.settings import Settings  # noqa: E402
from app.store.db import Store  # noqa: E402
from app.store.migrate import upgrade  # noqa: E402
from tests.support.services import create_pg_database, drop_pg_database  # noqa: E402

MODULES = ["api/routes", "services", "store", "domain/compaction", "utils", "cli", "workers"]
NAMES = ["dates", "parser", "session", "cache", "auth", "billing", "report", "queue", "config"]
TRACEBACK = (
    "Traceback (most recent call last):\n  File \"{path}\", line {line}, in {fn}\n"
    "    return parse_range(value)\nValueError: invalid range end {line}\n"
)


def path(rng: random.Random) -> str:
    return f"src/{rng.choice(MODULES)}/{rng.choice(NAMES)}_{rng.randint(0, 40)}.py"


def transcript(count: int, seed: int = 7) -> list[dict[str, Any]]:
    """About ``count`` canonical items of an agent fixing things in a code base."""
    rng = random.Random(seed)
    items: list[dict[str, Any]] = []
    turn = 0
    while len(items) < count:
        turn += 1
        items.append({"type": "message", "role": "user",
                      "content": f"Turn {turn}: the tests around {rng.choice(NAMES)} fail again, "
                                 "please investigate and fix them."})  # fmt: skip
        for step in range(rng.randint(2, 8)):
            call_id = f"call_{turn}_{step}"
            kind = rng.random()
            target = path(rng)
            if kind < 0.35:
                name, args = "read_file", {"path": target}
                out = "\n".join(f"def f{i}(x):\n    return x + {i}" for i in range(rng.randint(5, 40)))
            elif kind < 0.5:
                name, args = "grep", {"pattern": "parse_range", "path": target.rsplit("/", 1)[0]}
                out = "\n".join(f"{path(rng)}:{rng.randint(1, 400)}: parse_range(v)" for _ in range(8))
            elif kind < 0.7:
                name, args = "edit_file", {"path": target, "old": "x + 1", "new": "x + 2"}
                out = "applied 1 edit"
            elif kind < 0.9:
                name, args = "run_command", {"command": f"pytest tests/test_{rng.choice(NAMES)}.py -q"}
                if rng.random() < 0.3:
                    out = (TRACEBACK.format(path=target, line=rng.randint(1, 300), fn="parse")
                           + f"FAILED tests/test_x.py::test_{step} - ValueError\n"
                           f"2 failed, {rng.randint(5, 50)} passed in 0.42s\nexit code 1")  # fmt: skip
                else:
                    out = f"{rng.randint(5, 60)} passed in 0.31s"
            else:
                name, args = "run_command", {"command": f"ls {target.rsplit('/', 1)[0]}"}
                out = "\n".join(f"{n}.py" for n in NAMES)
            if rng.random() < 0.2:
                items.append({"type": "reasoning", "summary": [f"need to look at {target}"]})
            items.append({"type": "function_call", "call_id": call_id, "name": name,
                          "arguments": json.dumps(args)})  # fmt: skip
            items.append({"type": "function_call_output", "call_id": call_id, "output": out})
        items.append({"type": "message", "role": "assistant",
                      "content": f"Fixed the {rng.choice(NAMES)} issue; " + "details " * 20})  # fmt: skip
    items = items[:count]
    while items and items[-1]["type"] != "message":  # end on a whole step
        items.pop()
    return items


def stored(raw: list[dict[str, Any]]) -> list[StoredItem]:
    now = datetime.now(UTC)
    out = []
    for seq, data in enumerate(raw, start=1):
        body = body_from_dict(data)
        out.append(StoredItem(body=body, id=f"it_{seq}", seq=seq, tokens=item_tokens(body),
                              chars=item_chars(body), pinned=False, metadata={},
                              created_at=now))  # fmt: skip
    return out


def bench_domain(items: list[StoredItem], repeat: int) -> None:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        plan = plan_cut(items, keep_last_items=20)
        result = structured_compaction(plan, previous=None, previous_summary=None)
        times.append(time.perf_counter() - started)
    tracemalloc.start()
    plan = plan_cut(items, keep_last_items=20)
    result = structured_compaction(plan, previous=None, previous_summary=None)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(f"domain   plan_cut + structured_compaction of {len(items)} items: "
          f"best {min(times) * 1000:.1f} ms, median {sorted(times)[len(times) // 2] * 1000:.1f} ms, "
          f"tracemalloc peak {peak / 2**20:.1f} MiB")  # fmt: skip
    print(f"         compacted {result.compacted_items}, kept {result.report.items_after}, "
          f"summary {len(result.summary or '')} chars / {result.report.summary_tokens} tokens, "
          f"{len(result.read_files)} files read, {len(result.modified_files)} modified, "
          f"{len(result.errors)} errors, {len(result.test_results)} test results")  # fmt: skip


async def _filled_session(rt: Runtime, actor: Actor, raw: list[dict[str, Any]]) -> str:
    sid = f"bench-{uuid.uuid4().hex[:12]}"

    def noop(_: object) -> Encoded:
        return Encoded(200, "")

    await create_session(rt, actor, SessionCreateCommand(sid, {}, {}, None), encode=noop)
    for start in range(0, len(raw), 1000):
        batch = parse_canonical_items(raw[start : start + 1000])
        await append_items(rt, actor, sid, batch=batch, encode=noop)
    return sid


async def bench_service(raw: list[dict[str, Any]], url: str) -> None:
    upgrade(url)
    store = Store.from_url(url)
    locks = build_locks(None, wait_seconds=30, ttl_seconds=30, socket_timeout=1)
    rt = Runtime(settings=Settings(database_url=url, redis_url=None), store=store, locks=locks)
    actor = Actor()
    request = CompactRequest(policy="structured", keep_last_items=20)
    backend = "sqlite" if url.startswith("sqlite") else "postgres"
    try:
        timed, traced = await _filled_session(rt, actor, raw), await _filled_session(rt, actor, raw)
        started = time.perf_counter()
        encoded = await compact_session(rt, actor, timed, request=request)
        elapsed = time.perf_counter() - started
        rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        tracemalloc.start()
        await compact_session(rt, actor, traced, request=request)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    finally:
        await locks.close()
        await store.dispose()
    body = json.loads(encoded.body)
    print(f"service  compact_session (structured, {backend}; load 10k rows + fold + commit): "
          f"{elapsed * 1000:.0f} ms; traced run: tracemalloc peak {peak / 2**20:.1f} MiB, "
          f"max RSS {rss_before / 1024:.0f} -> {rss_after / 1024:.0f} MiB")  # fmt: skip
    print(f"         compacted {body['compacted_items']} items into "
          f"{body['report']['summary_tokens']} summary tokens "
          f"({body['report']['tokens_before']} -> {body['report']['tokens_after']} item tokens)")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--postgres", action="store_true", help="also on a fresh Postgres database")
    args = parser.parse_args()
    raw = transcript(args.items)
    items = stored(raw)
    failures = sum(1 for r in raw if "exit code 1" in str(r.get("output", "")))
    print(f"transcript: {len(items)} items, {sum(i.tokens for i in items)} tokens, "
          f"{sum(1 for r in raw if r.get('role') == 'user')} user turns, "
          f"{sum(1 for r in raw if r['type'] == 'function_call')} tool calls, {failures} failed commands")  # fmt: skip
    bench_domain(items, args.repeat)
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(bench_service(raw, f"sqlite+aiosqlite:///{tmp}/bench.db"))
    if args.postgres:
        url, name = create_pg_database()
        try:
            asyncio.run(bench_service(raw, url))
        finally:
            drop_pg_database(name)


if __name__ == "__main__":
    main()
