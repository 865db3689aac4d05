"""Recall into the prompt (DESIGN §10, issue 33), end to end through the context API.

An in-process app (httpx's ASGI transport, the builtin embedder, the real indexer) on SQLite
or Postgres + Redis. Four figures, each on vs off in the same run:

1. **Into the prompt.** bench/recall_set.py's session (filler turns with planted facts) is
   appended and indexed; for each paraphrased question whose fact the 8k budget evicted, the
   question is appended as the newest user message, the context read with
   ``recall.max_tokens`` = 600 and the question popped again. Share of those prompts holding
   the fact's text (target >= 85%).
2. **Question answering.** A scripted "model" answers from its prompt by string match: a
   question (paraphrase or exact-token lookup) is answered when the prompt holds its item's
   text. Questions answered with recall on vs off.
3. **Cache stability.** A 300-turn agent loop (``cut: stable``, anthropic, 8k; per turn a
   user request, a read, a tool call and its output, a read, the answer): share of the turns
   past the budget whose first read keeps >= 90% of the previous turn's first read as its
   prefix (in serialised messages), recall on vs off (target: within 5 points).
4. **Read latency.** The same loop's context reads, p50 with recall on / off (target <= 1.5x),
   the indexer embedding every turn's items meanwhile; also the first reads of the turns
   alone (each a query not seen before) and the second reads alone (the same query).

``--stall N [--share R]`` measures only one thing (issue 41 item 4): a read recalling from N
messages of ~200 KB each into a share of R tokens (no other limit but two items), and how
long ``/healthz`` waited meanwhile (the event loop's stall).

    .venv/bin/python bench/recall_prompt.py [--backend sqlite|postgres] [--items 1200] [--turns 300]
    .venv/bin/python bench/recall_prompt.py --stall 32
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.main import create_app  # noqa: E402
from app.settings import Settings  # noqa: E402
from bench.recall_set import build  # noqa: E402

BUDGET = 8000
SHARE = 600


def msg(role: str, text: str) -> dict[str, Any]:
    return {"type": "message", "role": role, "content": text}


async def append(client: httpx.AsyncClient, sid: str, items: list[dict[str, Any]]) -> None:
    for start in range(0, len(items), 50):
        r = await client.post(
            f"/v1/sessions/{sid}/items",
            params={"create": "true"},
            json={"items": items[start : start + 50]},
        )
        assert r.status_code < 300, r.text


async def wait_indexed(client: httpx.AsyncClient, sid: str, patience: float = 900) -> float:
    started = time.monotonic()
    while time.monotonic() - started < patience:
        state = (await client.get(f"/v1/sessions/{sid}")).json()["search_index"]
        if state and state["pending"] == 0:
            return time.monotonic() - started
        await asyncio.sleep(0.2)
    raise SystemExit("the index did not catch up")


def prompt_text(body: dict[str, Any]) -> str:
    return json.dumps({k: body.get(k) for k in ("items", "messages", "input", "system")},
                      ensure_ascii=False)


async def context(client: httpx.AsyncClient, sid: str, **budget: Any) -> dict[str, Any]:
    r = await client.post(f"/v1/sessions/{sid}/context", json=budget)
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]


async def recall_set_figures(client: httpx.AsyncClient, items: int) -> dict[str, Any]:
    rs = build(items=items)
    sid = f"bench-recall-{uuid.uuid4().hex[:6]}"
    roles = ["user", "assistant", "assistant", "assistant"]
    await append(client, sid, [msg(roles[n % 4], t) for n, t in enumerate(rs.items)])
    indexed_in = await wait_indexed(client, sid)
    texts = {n + 1: t for n, t in enumerate(rs.items)}
    evicted = into = 0
    qa_on = qa_off = 0
    questions = [(q, seq, "fact") for q, seq in rs.facts] + [(q, seq, "exact") for q, seq in rs.exact]
    for question, seq, kind in questions:
        await append(client, sid, [msg("user", question)])
        off = await context(client, sid, format="anthropic", max_tokens=BUDGET)
        on = await context(client, sid, format="anthropic", max_tokens=BUDGET,
                           recall={"max_tokens": SHARE})
        r = await client.post(f"/v1/sessions/{sid}/items/pop")
        assert r.status_code == 200, r.text
        needle = json.dumps(" ".join(texts[seq].split()), ensure_ascii=False)[1:-1]
        in_off = needle in prompt_text(off)
        in_on = needle in prompt_text(on)
        qa_off += in_off
        qa_on += in_on
        assert on["report"]["projected_tokens"] <= BUDGET
        if kind == "fact" and not in_off:
            evicted += 1
            into += in_on
    return {
        "items": len(rs.items), "indexed_s": indexed_in, "evicted": evicted, "into": into,
        "questions": len(questions), "qa_on": qa_on, "qa_off": qa_off,
    }


def turn(i: int) -> list[dict[str, Any]]:
    path = f"src/module_{i % 41}.py"
    return [
        msg("user", f"Step {i}: check {path} and fix the failing test."),
        {"type": "function_call", "call_id": f"call_{i}", "name": "read_file",
         "arguments": json.dumps({"path": path})},
        {"type": "function_call_output", "call_id": f"call_{i}",
         "output": "".join(f"x{k} = {i + k}\n" for k in range(25))},
        msg("assistant", f"{path} is fixed (step {i})."),
    ]


def kept_share(previous: list[Any], current: list[Any]) -> float:
    if not previous:
        return 1.0
    same = 0
    for a, b in zip(previous, current, strict=False):
        if json.dumps(a, sort_keys=True) != json.dumps(b, sort_keys=True):
            break
        same += 1
    return same / len(previous)


async def loop_figures(client: httpx.AsyncClient, turns: int) -> dict[str, Any]:
    sids = {mode: f"bench-loop-{mode}-{uuid.uuid4().hex[:6]}" for mode in ("off", "on")}
    budgets = {
        "off": {"format": "anthropic", "max_tokens": BUDGET, "cut": "stable"},
        "on": {"format": "anthropic", "max_tokens": BUDGET, "cut": "stable",
               "recall": {"max_tokens": SHARE}},
    }
    previous: dict[str, list[Any]] = {"off": [], "on": []}
    kept: dict[str, list[float]] = {"off": [], "on": []}
    latency: dict[str, list[float]] = {"off": [], "on": []}
    recalled = 0
    first: dict[str, list[float]] = {"off": [], "on": []}
    second: dict[str, list[float]] = {"off": [], "on": []}
    for i in range(turns):
        # an agent turn: the user's request, a read; the model's call and its output, a read
        # (the same newest user message: the same recall query); the model's answer
        user, call, output, answer = turn(i)
        for step, batch in enumerate(([user], [call, output])):
            for mode in ("off", "on") if (i + step) % 2 else ("on", "off"):  # neither first always
                sid = sids[mode]
                await append(client, sid, batch)
                started = time.perf_counter()
                body = await context(client, sid, **budgets[mode])
                elapsed = time.perf_counter() - started
                latency[mode].append(elapsed)
                (first if step == 0 else second)[mode].append(elapsed)
                messages = body["messages"]
                if step == 0:
                    if body["report"]["dropped_items"]:
                        kept[mode].append(kept_share(previous[mode], messages))
                    previous[mode] = messages
                if mode == "on":
                    recalled += bool(body["report"]["recalled"])
        for mode in ("off", "on"):
            await append(client, sids[mode], [answer])
    share = {m: sum(k >= 0.9 for k in v) / max(1, len(v)) for m, v in kept.items()}
    p50 = {m: statistics.median(v) for m, v in latency.items()}
    p50_first = {m: statistics.median(v) for m, v in first.items()}
    p50_second = {m: statistics.median(v) for m, v in second.items()}
    return {"turns": turns, "past_budget": {m: len(v) for m, v in kept.items()},
            "share90": share, "p50_ms": {m: 1000 * v for m, v in p50.items()},
            "ratio": p50["on"] / p50["off"], "turns_with_recall": recalled,
            "ratio_first": p50_first["on"] / p50_first["off"],
            "ratio_second": p50_second["on"] / p50_second["off"]}


async def stall_figures(client: httpx.AsyncClient, entries: int, share: int) -> dict[str, Any]:
    """Issue 41 item 4: ``entries`` user messages of ~200 KB each, all matching the query,
    recalled with a ``share``-token share and no other limit: the read's time, and the
    longest a ``/healthz`` asked every 10 ms meanwhile waited (the event loop's stall)."""
    sid = f"bench-stall-{uuid.uuid4().hex[:6]}"
    big = " ".join(f"rotation{k} log line {k} of the staging password" for k in range(4400))
    await append(client, sid, [msg("user", f"entry {n}: {big}") for n in range(entries)])
    await append(client, sid, [msg("user", "what does the staging password rotation log say?")])
    await wait_indexed(client, sid)
    waits: list[float] = []
    done = asyncio.Event()

    async def probe() -> None:
        # a probe is due 10 ms after the last answer: its wait counts from then, so a loop
        # blocked between two probes shows as the next probe's wait
        while not done.is_set():
            due = time.perf_counter() + 0.01
            await asyncio.sleep(0.01)
            assert (await client.get("/healthz")).status_code == 200
            waits.append(time.perf_counter() - due)

    prober = asyncio.create_task(probe())
    await asyncio.sleep(0.05)
    started = time.perf_counter()
    body = await context(client, sid, max_items=2, recall={"max_tokens": share, "max_items": 50})
    elapsed = time.perf_counter() - started
    done.set()
    await prober
    return {"read_s": elapsed, "healthz_max_s": max(waits, default=0.0),
            "recalled": len(body["report"]["recalled"])}


async def run(backend: str, items: int, turns: int, stall: int = 0, share: int = 16_384) -> None:
    pg_name = None
    if backend == "sqlite":
        from app.store.migrate import upgrade

        url = f"sqlite+aiosqlite:///{Path(tempfile.mkdtemp()) / 'recall.db'}"
        upgrade(url)
        db: dict[str, Any] = {"database_url": url, "redis_url": None}
    else:
        from tests.support.services import REDIS_URL, create_pg_database

        url, pg_name = create_pg_database()
        db = {"database_url": url, "redis_url": REDIS_URL}
    settings = Settings(**db, auth={"mode": "off"}, embeddings={"provider": "builtin"},
                        limits={"max_items_per_append": 100})
    app = create_app(settings)
    try:
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://localhost",
                                         timeout=120) as client:
                if stall:
                    c = await stall_figures(client, stall, share)
                    print(f"[{backend}] {stall} entries of ~200 KB, share {share}: read "
                          f"{c['read_s']:.2f} s, /healthz waited up to {c['healthz_max_s']:.2f} s,"
                          f" {c['recalled']} recalled")
                    return
                a = await recall_set_figures(client, items)
                if pg_name is not None:
                    # The test server runs with autovacuum off: without statistics the planner
                    # scans every vector of a session per item (see bench/RESULTS.md). ANALYZE
                    # once, as autovacuum would have on a production server.
                    analyze(url)
                print(f"[{backend}] recall set: {a['items']} items indexed in "
                      f"{a['indexed_s']:.0f} s")
                print(f"[{backend}] into the prompt: {a['into']}/{a['evicted']} evicted facts "
                      f"= {a['into'] / max(1, a['evicted']):.2f} (target >= 0.85)")
                print(f"[{backend}] QA by string match: recall on {a['qa_on']}/{a['questions']}, "
                      f"off {a['qa_off']}/{a['questions']}")
                b = await loop_figures(client, turns)
                print(f"[{backend}] {b['turns']}-turn cut:stable loop, turns past budget "
                      f"{b['past_budget']}: share keeping >= 90% prefix on "
                      f"{b['share90']['on']:.2f} vs off {b['share90']['off']:.2f}; "
                      f"turns with a recall block {b['turns_with_recall']}")
                print(f"[{backend}] read p50 on {b['p50_ms']['on']:.1f} ms / off "
                      f"{b['p50_ms']['off']:.1f} ms = {b['ratio']:.2f}x (target <= 1.5x); "
                      f"first read of a turn (a new query) {b['ratio_first']:.2f}x, "
                      f"second (the same query) {b['ratio_second']:.2f}x")
    finally:
        if pg_name is not None:
            from tests.support.services import drop_pg_database

            drop_pg_database(pg_name)


def analyze(url: str) -> None:
    import sqlalchemy as sa

    engine = sa.create_engine(url.replace("+asyncpg", "+psycopg") if "+asyncpg" in url else url)
    with engine.connect() as db:
        db.execute(sa.text("ANALYZE items"))
        db.execute(sa.text("ANALYZE item_vectors"))
        db.commit()
    engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--items", type=int, default=1200)
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--stall", type=int, default=0,
                        help="only the stall figure: recall from this many ~200 KB entries")
    parser.add_argument("--share", type=int, default=16_384,
                        help="with --stall: the recall share (16,384 is the largest accepted)")
    args = parser.parse_args()
    asyncio.run(run(args.backend, args.items, args.turns, args.stall, args.share))


if __name__ == "__main__":
    main()
