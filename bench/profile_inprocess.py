"""Where an append's (or an agent-loop read's) CPU goes, measured in this process: the whole
ASGI app (middleware, routing, auth, the store on a fresh Postgres database, Redis locks,
the JSON access log to a file, the garbage collector tuned as in a server process) called
directly, without uvicorn or a socket in between.

Prints the CPU time per request (process time, no profiler attached, median of five runs),
then, under cProfile, the share of time and the Python calls per request of each package
(FastAPI, Starlette, psycopg, SQLAlchemy, ``app.api``, ``app.domain``, ...) and the
functions that hold the most time. py-spy (bench/profile_append.py) samples a real server,
but often cannot unwind the coroutine stacks of an asyncio server, so its inclusive shares
undercount; these attributions are exact, at the profiler's overhead per call.

    .venv/bin/python bench/profile_inprocess.py [--scenario append|loop] [--requests 1000]

``loop`` is the harness's agent loop: an append, then the context read (8,000-token budget,
openai-chat), taking the harness's 1,000-item sessions in turn; the read is what is reported.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import cProfile
import itertools
import json
import logging.config
import os
import pstats
import secrets
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.harness import (  # noqa: E402
    APPEND_BODY,
    CONTEXT_BUDGET,
    CONTEXT_ITEMS,
    CONTEXT_SESSIONS,
    context_turn,
)
from tests.support.services import (  # noqa: E402
    PG_ADMIN_URL,
    REDIS_URL,
    create_pg_database,
    drop_pg_database,
)

Call = Callable[[], Awaitable[dict[str, Any]]]


def request(
    app: Any, method: str, path: str, body: bytes, headers: list[tuple[bytes, bytes]]
) -> Call:
    """A callable sending one HTTP request through ``app`` (ASGI), returning status and body."""
    raw_path, _, query = path.partition("?")
    all_headers = [
        (b"host", b"bench"),
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        *headers,
    ]

    async def call() -> dict[str, Any]:
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": method,
            "scheme": "http",
            "path": raw_path,
            "raw_path": raw_path.encode(),
            "query_string": query.encode(),
            "root_path": "",
            "headers": all_headers,
            "client": ("127.0.0.1", 50000),
            "server": ("127.0.0.1", 8000),
            "state": {},
        }
        received = False

        async def receive() -> dict[str, Any]:
            nonlocal received
            if not received:
                received = True
                return {"type": "http.request", "body": body, "more_body": False}
            await asyncio.Event().wait()  # the client never disconnects
            raise AssertionError("unreachable")

        out: dict[str, Any] = {"body": b""}

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                out["status"] = message["status"]
            elif message["type"] == "http.response.body":
                out["body"] += message.get("body", b"")

        await app(scope, receive, send)
        return out

    return call


def group_of(filename: str) -> str:
    if "site-packages/" in filename:
        return filename.split("site-packages/", 1)[1].split("/", 1)[0]
    app_dir = f"{ROOT}/app/"
    if filename.startswith(app_dir):
        return "app." + filename[len(app_dir) :].split("/", 1)[0].removesuffix(".py")
    if filename == "~":
        return "builtins"
    if "/lib/python" in filename:
        return "stdlib." + filename.rsplit("/lib/python", 1)[1].split("/")[1].removesuffix(".py")
    return filename


def report(stats_path: Path, requests: int, top: int) -> None:
    stats = pstats.Stats(str(stats_path)).stats  # type: ignore[attr-defined]
    own: collections.Counter[str] = collections.Counter()
    calls: collections.Counter[str] = collections.Counter()
    for (filename, _, _), (_, ncalls, tottime, _, _) in stats.items():
        own[group_of(filename)] += tottime
        calls[group_of(filename)] += ncalls
    total = sum(own.values())
    print(f"\nunder cProfile: {1e6 * total / requests:.0f} us and "
          f"{sum(calls.values()) / requests:.0f} Python calls per request")  # fmt: skip
    print("\nby package (own time, calls per request):")
    for name, seconds in own.most_common(top):
        print(f"  {100 * seconds / total:5.1f}%  {calls[name] / requests:6.0f}  {name}")
    print("\nfunctions (own time):")
    ranked = sorted(stats.items(), key=lambda kv: -kv[1][2])[:top]
    for (filename, line, name), (_, ncalls, tottime, _, _) in ranked:
        where = filename.split("site-packages/")[-1].replace(f"{ROOT}/", "")
        print(f"  {100 * tottime / total:5.1f}%  {ncalls / requests:6.1f}  {name} ({where}:{line})")


async def run(args: argparse.Namespace, database_url: str, out: Path) -> None:
    bootstrap = "bench-bootstrap-" + secrets.token_hex(16)
    os.environ.update(
        {
            "DATABASE_URL": database_url,
            "REDIS_URL": REDIS_URL,
            "AUTH__MODE": "on",
            "AUTH__BOOTSTRAP_KEY": bootstrap,
            "AUTH__BOOTSTRAP_TENANT": "bench",
        }
    )
    from app.gc_tuning import tune_for_serving
    from app.logs import log_config
    from app.main import create_app
    from app.settings import get_settings

    config = log_config("info")
    config["handlers"]["stdout"] = {
        "class": "logging.FileHandler",
        "filename": str(out / "access.log"),
        "formatter": "json",
    }
    logging.config.dictConfig(config)
    get_settings.cache_clear()
    app = create_app(get_settings())
    async with app.router.lifespan_context(app):
        tune_for_serving()  # as a server process does once it has started
        admin = [(b"authorization", f"Bearer {bootstrap}".encode())]
        key_body = json.dumps({"name": "bench", "scopes": ["read", "write"]}).encode()
        created = await request(app, "POST", "/v1/admin/keys", key_body, admin)()
        auth = [(b"authorization", f"Bearer {json.loads(created['body'])['secret']}".encode())]
        # (untimed, timed) request pairs, taken in turn
        steps: list[tuple[Call | None, Call]] = []
        for _ in range(CONTEXT_SESSIONS if args.scenario == "loop" else 1):
            created = await request(app, "POST", "/v1/sessions", b"{}", auth)()
            sid = json.loads(created["body"])["id"]
            items_path = f"/v1/sessions/{sid}/items"
            append = request(app, "POST", items_path, json.dumps(APPEND_BODY).encode(), auth)
            if args.scenario == "append":
                steps.append((None, append))
                continue
            turns = [item for n in range(CONTEXT_ITEMS // 4) for item in context_turn(n)]
            for start in range(0, len(turns), 250):
                batch = json.dumps({"items": turns[start : start + 250]}).encode()
                assert (await request(app, "POST", items_path, batch, auth)())["status"] == 201
            query = f"max_tokens={CONTEXT_BUDGET}&format=openai-chat"
            steps.append(
                (append, request(app, "GET", f"/v1/sessions/{sid}/context?{query}", b"", auth))
            )
        if args.scenario == "loop":
            import psycopg

            conninfo = PG_ADMIN_URL.rsplit("/", 1)[0] + "/" + database_url.rsplit("/", 1)[1]
            with psycopg.connect(conninfo, autocommit=True) as conn:
                conn.execute("ANALYZE")  # a fresh database has no planner statistics
        turn = itertools.count()

        async def step(*, timer: Callable[[], float] | None = None, profiler: Any = None) -> float:
            """One step (the next pair): the CPU time of its timed request, if ``timer``."""
            untimed, timed = steps[next(turn) % len(steps)]
            if untimed is not None:
                await untimed()
            start = timer() if timer else 0.0
            if profiler is not None:
                profiler.enable()
            result = await timed()
            if profiler is not None:
                profiler.disable()
            spent = timer() - start if timer else 0.0
            assert result["status"] in (200, 201), result
            return spent

        async def measure(n: int) -> float:
            return sum([await step(timer=time.process_time) for _ in range(n)]) / n

        for _ in range(min(args.requests, 300)):
            await step()
        runs = sorted([await measure(args.requests) for _ in range(5)])
        unit = "context read after an append" if args.scenario == "loop" else "append"
        print(f"CPU per {unit}: {1e6 * statistics.median(runs):.0f} us "
              f"(runs: {', '.join(f'{1e6 * r:.0f}' for r in runs)})")  # fmt: skip
        profiler = cProfile.Profile(time.process_time)
        for _ in range(args.requests):
            await step(profiler=profiler)
        profiler.dump_stats(str(out / "profile.prof"))
    report(out / "profile.prof", args.requests, args.top)
    print(f"\nprofile: {out / 'profile.prof'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", choices=["append", "loop"], default="append")
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    url, name = create_pg_database()
    out = Path(tempfile.mkdtemp(prefix="sm-inprocess-"))
    try:
        asyncio.run(run(args, url, out))
    finally:
        drop_pg_database(name)


if __name__ == "__main__":
    main()
