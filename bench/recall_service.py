"""The dev sets through the running service, per backend: what a user of the API gets.

    .venv/bin/python bench/recall.py --backends sqlite,postgres [--items 1200]

For each backend: a fresh database, the app with the builtin embedder (its own indexer), each
dev set of bench/recall.py appended to a session of its own in batches of 100; then, once the
indexer has caught up, every question asked through ``GET /v1/sessions/{id}/search`` in each
mode (``limit=50``, default ``min_score``), counting recall@5, @10 and @50. It also prints
what the indexer did meanwhile: items per second while the backlog lasted
(``EMBEDDINGS__THREADS`` of CPU), from the first append to the last vector.
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


KS = (5, 10, 50)


async def _run(
    url: str, redis: str | None, sets: dict[str, RecallSet], *, threads: int
) -> dict[str, Any]:
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
            sids: dict[int, str] = {}
            started = time.perf_counter()
            indexed = 0
            for rs in sets.values():
                if id(rs) in sids:
                    continue
                sid = sids[id(rs)] = f"recall-{uuid.uuid4().hex[:6]}"
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
            for sid in sids.values():
                while True:
                    state = (await client.get(f"/v1/sessions/{sid}")).json()["search_index"]
                    if state["pending"] == 0:
                        break
                    await asyncio.sleep(0.2)
                indexed += state["indexed"]
            out["items_per_s"] = indexed / (time.perf_counter() - started)
            for label, rs in sets.items():
                queries = rs.exact if label == "exact" else rs.facts
                for mode in MODES:
                    found = [0] * len(KS)
                    for query, target in queries:
                        r = await client.get(
                            f"/v1/sessions/{sids[id(rs)]}/search",
                            params={"q": query, "mode": mode, "limit": 50},
                        )
                        assert r.status_code == 200, r.text
                        seqs = [h["seq"] for h in r.json()["items"]]
                        for i, k in enumerate(KS):
                            found[i] += target in seqs[:k]
                    out[f"{label}/{mode}"] = tuple(100 * f / len(queries) for f in found)
    return out


def run_backends(sets: dict[str, RecallSet], backends: list[str], *, threads: int) -> None:
    print(f"through the API, builtin model, threads {threads}; R@5 / R@10 / R@50")
    print("| backend | set | fulltext | semantic | hybrid | indexer items/s |")
    print("|---|---|---|---|---|---:|")
    for backend in backends:
        if backend == "sqlite":
            with tempfile.TemporaryDirectory() as tmp:
                from app.store.migrate import upgrade

                url = f"sqlite+aiosqlite:///{tmp}/recall.db"
                upgrade(url)
                r = asyncio.run(_run(url, None, sets, threads=threads))
        else:
            url, name = create_pg_database()
            try:
                r = asyncio.run(_run(url, REDIS_URL, sets, threads=threads))
            finally:
                drop_pg_database(name)
        for n, label in enumerate(sets):
            cells = " | ".join(" / ".join(f"{v:.1f}" for v in r[f"{label}/{m}"]) for m in MODES)
            speed = f"{r['items_per_s']:.0f}" if n == 0 else ""
            print(f"| {backend} | {label} | {cells} | {speed} |", flush=True)
