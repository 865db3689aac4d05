"""VectorRepository on both backends: claiming items without a vector, storing vectors,
counting, reading them back, and what happens to them when items go."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

from app.main import create_app
from app.services.runtime import Runtime, utcnow
from app.settings import Settings
from app.store.vectors import VectorRepository, pack_vector, unpack_vector
from tests.support.services import REDIS_URL, create_pg_database, drop_pg_database
from tests.support.spec_check import ASYNC_HOOKS

MODEL = "test-model"


@dataclass
class World:
    client: httpx.AsyncClient
    rt: Runtime


@pytest.fixture(scope="module")
async def world(backend: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[World]:
    if backend == "sqlite":
        from app.store.migrate import upgrade

        path: Path = tmp_path_factory.mktemp("vectors") / "vectors.db"
        url, name, redis_url = f"sqlite+aiosqlite:///{path}", None, None
        upgrade(url)
    else:
        (url, name), redis_url = create_pg_database(), REDIS_URL
    settings = Settings(
        database_url=url,
        redis_url=redis_url,
        auth={"mode": "off"},  # type: ignore[arg-type]
        retention={"sweep_enabled": False},  # type: ignore[arg-type]
    )
    app = create_app(settings)
    try:
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
            async with httpx.AsyncClient(
                transport=transport, base_url="http://localhost", event_hooks=ASYNC_HOOKS
            ) as client:
                yield World(client, app.state.runtime)
    finally:
        if name is not None:
            drop_pg_database(name)


async def session_with(world: World, texts: list[str]) -> str:
    session_id = f"vec-{uuid.uuid4().hex[:10]}"
    r = await world.client.post(
        f"/v1/sessions/{session_id}/items",
        params={"create": "true"},
        json={"items": [{"type": "message", "role": "user", "content": t} for t in texts]},
    )
    assert r.status_code < 300, r.text
    return session_id


def test_pack_round_trip() -> None:
    vector = [0.5, -1.25, 3.0e-8, 1.0]
    data = pack_vector(vector)
    assert len(data) == 16 and data[:4] == b"\x00\x00\x00\x3f"  # float32 little-endian
    assert unpack_vector(data, 4) == pytest.approx(vector)
    with pytest.raises(ValueError, match="not 3 float32"):
        unpack_vector(data, 3)


async def test_claim_store_count_read(world: World) -> None:
    tenant = "default"
    sid = await session_with(world, ["alpha one", "beta two", "gamma three"])
    async with world.rt.store.read() as db:
        assert (await VectorRepository(db).counts(tenant, sid, MODEL)).pending == 3
    async with world.rt.store.write() as db:
        repo = VectorRepository(db)
        mine = [p for p in await repo.claim_pending(MODEL, limit=10_000) if p.session_id == sid]
        assert [p.text for p in mine] == ["alpha one", "beta two", "gamma three"]
        written = await repo.store(
            MODEL, [(p, [float(p.seq), 1.0]) for p in mine[:2]], now=utcnow()
        )
        assert written == 2
        # Storing again writes nothing (one vector per item and model).
        assert await repo.store(MODEL, [(mine[0], [9.0, 9.0])], now=utcnow()) == 0
    async with world.rt.store.read() as db:
        repo = VectorRepository(db)
        counts = await repo.counts(tenant, sid, MODEL)
        assert (counts.indexed, counts.pending) == (2, 1)
        # Another model's index is its own: nothing of it yet.
        assert (await repo.counts(tenant, sid, "other-model")).indexed == 0
        got = sorted(await repo.session_vectors(tenant, sid, MODEL, include_archived=True))
        assert got == [(1, [1.0, 1.0]), (2, [2.0, 1.0])]
        pending = [p for p in await repo.claim_pending(MODEL, limit=10_000) if p.session_id == sid]
        assert [p.seq for p in pending] == [3]


async def test_archived_items_are_left_out_unless_history(world: World) -> None:
    sid = await session_with(world, ["to be cleared"])
    async with world.rt.store.write() as db:
        repo = VectorRepository(db)
        mine = [p for p in await repo.claim_pending(MODEL, limit=10_000) if p.session_id == sid]
        await repo.store(MODEL, [(p, [1.0]) for p in mine], now=utcnow())
    r = await world.client.delete(f"/v1/sessions/{sid}/items")  # clear: archived, kept
    assert r.status_code < 300, r.text
    async with world.rt.store.read() as db:
        repo = VectorRepository(db)
        assert await repo.session_vectors("default", sid, MODEL, include_archived=False) == []
        assert len(await repo.session_vectors("default", sid, MODEL, include_archived=True)) == 1


async def test_a_deleted_item_takes_its_vector_and_is_never_indexed(world: World) -> None:
    sid = await session_with(world, ["short lived"])
    async with world.rt.store.write() as db:
        repo = VectorRepository(db)
        [item] = [p for p in await repo.claim_pending(MODEL, limit=10_000) if p.session_id == sid]
        await repo.store(MODEL, [(item, [1.0, 0.0])], now=utcnow())
    r = await world.client.delete(f"/v1/sessions/{sid}")
    assert r.status_code == 204, r.text
    async with world.rt.store.write() as db:
        rows = await db.execute(
            sa.text("SELECT count(*) FROM item_vectors WHERE session_id = :s"), {"s": sid}
        )
        assert rows.scalar() == 0
        # A vector computed for an item erased since its claim is not written.
        assert await VectorRepository(db).store("late-model", [(item, [1.0])], now=utcnow()) == 0


async def test_concurrent_claims_take_distinct_items_on_postgres(
    world: World, backend: str
) -> None:
    if backend != "postgresql" and backend != "postgres":
        # SQLite: one writer at a time (BEGIN IMMEDIATE): a second claim waits, so it cannot
        # overlap by construction; the Postgres path is the one that needs SKIP LOCKED.
        assert world.rt.store.engine.dialect.name == "sqlite"
        return
    await session_with(world, [f"item {n}" for n in range(6)])
    model = f"claim-{uuid.uuid4().hex[:6]}"
    first_claimed = asyncio.Event()
    release = asyncio.Event()
    seen: dict[str, list[tuple[str, str, int]]] = {}

    async def claimer(name: str, wait_for: asyncio.Event | None) -> None:
        if wait_for is not None:
            await wait_for.wait()
        async with world.rt.store.write() as db:
            got = await VectorRepository(db).claim_pending(model, limit=3)
            seen[name] = [(p.tenant_id, p.session_id, p.seq) for p in got]
            if wait_for is None:
                first_claimed.set()
                await release.wait()

    a = asyncio.create_task(claimer("a", None))
    b = asyncio.create_task(claimer("b", first_claimed))
    await asyncio.wait_for(b, 10)  # b did not wait for a's locked rows
    release.set()
    await a
    assert seen["a"] and seen["b"]
    assert not set(seen["a"]) & set(seen["b"])
    assert len(seen["a"]) == len(seen["b"]) == 3
