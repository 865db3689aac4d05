"""The cost of ``search_index`` on ``GET /v1/sessions/{id}``, on SQLite and Postgres.

    .venv/bin/python bench/index_state.py [--backends sqlite,postgres] [--items 10000]
        [--pending 10] [--reads 200]

Appends ``--items`` messages to one session through the HTTP API, stores a vector (384 float32,
the builtin model's size) for all but the newest ``--pending`` of them, as the indexer would,
then times ``GET /v1/sessions/{id}`` ``--reads`` times with an embedder set (the response
counts the session's index state) and without one (``search_index`` null: the session row and
its storage figures alone, the floor of the same run): p50 and p90 in ms, and what the index
state adds; and the count alone (``services.indexing.index_counts``, its read transaction
and statement), the figure least moved by the machine's load. The reads run in-process (httpx's ASGI transport); no embedder runs (a stand-in
that only names the model and its size).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import httpx
import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.main import create_app  # noqa: E402
from app.services.indexing import index_counts  # noqa: E402
from app.settings import Settings  # noqa: E402
from app.store.tables import item_vectors  # noqa: E402
from tests.support.services import (  # noqa: E402
    REDIS_URL,
    create_pg_database,
    drop_pg_database,
)

DIMS = 384
MODEL = "bench-model"
BATCH = 1000


class StandIn:
    """Names a model and its size; embeds nothing (the read only counts)."""

    model = MODEL
    dimensions = DIMS


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def run(url: str, redis: str | None, *, items: int, pending: int, reads: int) -> dict:
    settings = Settings(
        database_url=url,
        redis_url=redis,
        auth={"mode": "off"},
        embeddings={"provider": "none"},
        retention={"sweep_enabled": False},
    )
    app = create_app(settings)
    out: dict[str, float] = {}
    async with app.router.lifespan_context(app):
        rt = app.state.runtime
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            sid = f"state-{uuid.uuid4().hex[:6]}"
            for start in range(0, items, BATCH):
                n = min(BATCH, items - start)
                body = {
                    "items": [
                        {"type": "message", "role": "user", "content": f"line {start + i} of it"}
                        for i in range(n)
                    ]
                }
                r = await client.post(
                    f"/v1/sessions/{sid}/items", params={"create": "true"}, json=body
                )
                assert r.status_code < 300, r.text
            now = datetime.now(UTC)
            blob = b"\0" * (4 * DIMS)
            async with rt.store.write() as db:
                for start in range(1, items - pending + 1, 5000):
                    seqs = range(start, min(items - pending, start + 4999) + 1)
                    await db.execute(
                        sa.insert(item_vectors),
                        [
                            {
                                "tenant_id": "default",
                                "session_id": sid,
                                "seq": seq,
                                "model": MODEL,
                                "dims": DIMS,
                                "vector": blob,
                                "created_at": now,
                            }
                            for seq in seqs
                        ],
                    )
            if rt.store.is_sqlite:
                async with rt.store.write() as db:
                    await db.execute(sa.text("ANALYZE"))
            else:
                async with rt.store.autocommit() as db:
                    await db.execute(sa.text("VACUUM ANALYZE"))

            async def timed() -> float:
                t0 = time.perf_counter()
                r = await client.get(f"/v1/sessions/{sid}")
                elapsed = (time.perf_counter() - t0) * 1000
                assert r.status_code == 200, r.text
                return elapsed

            rt.embedder = StandIn()
            counts = []
            for _ in range(reads):
                t0 = time.perf_counter()
                await index_counts(rt, "default", sid)
                counts.append((time.perf_counter() - t0) * 1000)
            out["count_p50"] = statistics.median(counts)
            for label, embedder in (("floor", None), ("state", StandIn())):
                rt.embedder = embedder
                r = await client.get(f"/v1/sessions/{sid}")
                out[f"{label}_body"] = r.json()["search_index"]
                times = [await timed() for _ in range(reads)]
                out[f"{label}_p50"] = statistics.median(times)
                out[f"{label}_p90"] = pct(times, 0.9)
            rt.embedder = None
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--pending", type=int, default=10)
    parser.add_argument("--reads", type=int, default=200)
    args = parser.parse_args()
    print(
        "| backend | items | pending | GET, no index state p50 / p90 ms "
        "| GET with search_index p50 / p90 ms | added p50 ms | the count alone p50 ms "
        "| search_index |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for backend in args.backends.split(","):
        name = None
        with tempfile.TemporaryDirectory() as tmp:
            if backend == "sqlite":
                from app.store.migrate import upgrade

                url, redis = f"sqlite+aiosqlite:///{tmp}/state.db", None
                upgrade(url)
            else:
                (url, name), redis = create_pg_database(), REDIS_URL
            try:
                out = asyncio.run(
                    run(url, redis, items=args.items, pending=args.pending, reads=args.reads)
                )
            finally:
                if name is not None:
                    drop_pg_database(name)
        print(
            f"| {backend} | {args.items} | {args.pending} "
            f"| {out['floor_p50']:.2f} / {out['floor_p90']:.2f} "
            f"| {out['state_p50']:.2f} / {out['state_p90']:.2f} "
            f"| {out['state_p50'] - out['floor_p50']:.2f} | {out['count_p50']:.2f} "
            f"| `{out['state_body']}` |"
        )


if __name__ == "__main__":
    main()
