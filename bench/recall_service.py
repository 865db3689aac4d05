"""The recall set through the running service, per backend: what a user of the API gets.

    .venv/bin/python bench/recall.py --backends sqlite,postgres [--items 1200]

For each backend: a fresh database, the app with the builtin embedder (its own indexer), the
recall set (bench/recall_set.py) appended to one session in batches of 100; then, once the
indexer has caught up, every paraphrase question and exact-token query asked through
``GET /v1/sessions/{id}/search`` in each mode (``limit=5``, default ``min_score``), counting
recall@5 and top-1. It also prints what the indexer did meanwhile: items per second while
the backlog lasted (``EMBEDDINGS__THREADS`` of CPU), from the first append to the last vector.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
import uuid
from typing import Any

import httpx
from recall_set import RecallSet

from app.main import create_app
from app.settings import Settings
from tests.support.services import REDIS_URL, create_pg_database, drop_pg_database

MODES = ("fulltext", "semantic", "hybrid")


async def _run(url: str, redis: str | None, rs: RecallSet, *, threads: int) -> dict[str, Any]:
    settings = Settings(
        database_url=url,
        redis_url=redis,
        auth={"mode": "off"},
        embeddings={"provider": "builtin", "threads": threads},
    )
    app = create_app(settings)
    out: dict[str, Any] = {}
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://localhost", timeout=120
        ) as client:
            sid = f"recall-{uuid.uuid4().hex[:6]}"
            started = time.perf_counter()
            for start in range(0, len(rs.items), 100):
                r = await client.post(
                    f"/v1/sessions/{sid}/items",
                    params={"create": "true"},
                    json={
                        "items": [
                            {"type": "message", "role": "user", "content": t}
                            for t in rs.items[start : start + 100]
                        ]
                    },
                )
                assert r.status_code < 300, r.text
            while True:
                state = (await client.get(f"/v1/sessions/{sid}")).json()["search_index"]
                if state["pending"] == 0:
                    break
                await asyncio.sleep(0.2)
            elapsed = time.perf_counter() - started
            out["indexed"] = state["indexed"]
            out["items_per_s"] = state["indexed"] / elapsed
            for label, queries in (("paraphrase", rs.facts), ("exact", rs.exact)):
                for mode in MODES:
                    at5 = top1 = 0
                    for query, target in queries:
                        r = await client.get(
                            f"/v1/sessions/{sid}/search",
                            params={"q": query, "mode": mode, "limit": 5},
                        )
                        assert r.status_code == 200, r.text
                        seqs = [h["seq"] for h in r.json()["items"]]
                        at5 += target in seqs
                        top1 += bool(seqs) and seqs[0] == target
                    out[f"{label}/{mode}"] = (at5 / len(queries), top1 / len(queries))
    return out


def run_backends(rs: RecallSet, backends: list[str], *, threads: int) -> None:
    print(
        f"{len(rs.items)} items, {len(rs.facts)} paraphrase questions, {len(rs.exact)} "
        f"exact-token queries; through the API, builtin model, threads {threads}"
    )
    print(
        "| backend | queries | fulltext r@5 / top-1 | semantic r@5 / top-1 | hybrid r@5 / top-1 "
        "| indexer items/s |"
    )
    print("|---|---|---|---|---|---:|")
    for backend in backends:
        if backend == "sqlite":
            with tempfile.TemporaryDirectory() as tmp:
                from app.store.migrate import upgrade

                url = f"sqlite+aiosqlite:///{tmp}/recall.db"
                upgrade(url)
                r = asyncio.run(_run(url, None, rs, threads=threads))
        else:
            url, name = create_pg_database()
            try:
                r = asyncio.run(_run(url, REDIS_URL, rs, threads=threads))
            finally:
                drop_pg_database(name)
        for label in ("paraphrase", "exact"):
            cells = " | ".join("{:.2f} / {:.2f}".format(*r[f"{label}/{m}"]) for m in MODES)
            speed = f"{r['items_per_s']:.0f}" if label == "paraphrase" else ""
            print(f"| {backend} | {label} | {cells} | {speed} |", flush=True)
