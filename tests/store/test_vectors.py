"""VectorRepository on both backends: claiming items without a vector, storing vectors,
counting, reading them back, and what happens to them when items go."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

from app.main import create_app
from app.services.runtime import Runtime, utcnow
from app.settings import Settings
from app.store.vectors import (
    PendingItem,
    VectorRepository,
    pack_vector,
    session_packed,
    unpack_vector,
)
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


async def vectors_of(
    world: World, sid: str, model: str, dims: int, *, include_archived: bool
) -> list[tuple[int, list[float]]]:
    async with world.rt.store.read() as db:
        packed = await session_packed(
            db, "default", sid, model, dims=dims, include_archived=include_archived
        )
    return [
        (seq, unpack_vector(b, dims)) for (_, seq), b in zip(packed.keys, packed.blobs, strict=True)
    ]


async def test_claim_store_count_read(world: World) -> None:
    tenant = "default"
    sid = await session_with(world, ["alpha one", "beta two", "gamma three"])
    async with world.rt.store.read() as db:
        assert (await VectorRepository(db).counts(tenant, sid, MODEL, 2)).pending == 3
    async with world.rt.store.write() as db:
        repo = VectorRepository(db)
        mine = [p for p in await repo.claim_pending(MODEL, 2, limit=10_000) if p.session_id == sid]
        assert [p.text for p in mine] == ["alpha one", "beta two", "gamma three"]
        written = await repo.store(
            MODEL, [(p, [float(p.seq), 1.0]) for p in mine[:2]], now=utcnow()
        )
        assert [p.seq for p, _ in written] == [1, 2]
        # Storing again writes nothing (one vector per item, model and size).
        assert await repo.store(MODEL, [(mine[0], [9.0, 9.0])], now=utcnow()) == []
    async with world.rt.store.read() as db:
        repo = VectorRepository(db)
        counts = await repo.counts(tenant, sid, MODEL, 2)
        assert (counts.indexed, counts.pending) == (2, 1)
        # Another model's index is its own: nothing of it yet; nor of this model at 3 floats.
        assert (await repo.counts(tenant, sid, "other-model", 2)).indexed == 0
        assert (await repo.counts(tenant, sid, MODEL, 3)).indexed == 0
        pending = [
            p for p in await repo.claim_pending(MODEL, 2, limit=10_000) if p.session_id == sid
        ]
        assert [p.seq for p in pending] == [3]
        resized = [
            p for p in await repo.claim_pending(MODEL, 3, limit=10_000) if p.session_id == sid
        ]
        assert [p.seq for p in resized] == [1, 2, 3]
    got = await vectors_of(world, sid, MODEL, 2, include_archived=True)
    assert got == [(1, [1.0, 1.0]), (2, [2.0, 1.0])]

    # A vector of the model's new size replaces the old one of the item.
    async with world.rt.store.write() as db:
        written = await VectorRepository(db).store(
            MODEL, [(resized[0], [1.0, 2.0, 3.0])], now=utcnow()
        )
        assert len(written) == 1
    assert await vectors_of(world, sid, MODEL, 2, include_archived=True) == [(2, [2.0, 1.0])]
    assert await vectors_of(world, sid, MODEL, 3, include_archived=True) == [(1, [1.0, 2.0, 3.0])]


async def test_archived_items_are_left_out_unless_history(world: World) -> None:
    sid = await session_with(world, ["to be cleared"])
    async with world.rt.store.write() as db:
        repo = VectorRepository(db)
        mine = [p for p in await repo.claim_pending(MODEL, 1, limit=10_000) if p.session_id == sid]
        await repo.store(MODEL, [(p, [1.0]) for p in mine], now=utcnow())
    r = await world.client.delete(f"/v1/sessions/{sid}/items")  # clear: archived, kept
    assert r.status_code < 300, r.text
    assert await vectors_of(world, sid, MODEL, 1, include_archived=False) == []
    assert len(await vectors_of(world, sid, MODEL, 1, include_archived=True)) == 1


async def test_a_deleted_item_takes_its_vector_and_is_never_indexed(world: World) -> None:
    sid = await session_with(world, ["short lived"])
    async with world.rt.store.write() as db:
        repo = VectorRepository(db)
        [item] = [
            p for p in await repo.claim_pending(MODEL, 2, limit=10_000) if p.session_id == sid
        ]
        await repo.store(MODEL, [(item, [1.0, 0.0])], now=utcnow())
    r = await world.client.delete(f"/v1/sessions/{sid}")
    assert r.status_code == 204, r.text
    async with world.rt.store.write() as db:
        rows = await db.execute(
            sa.text("SELECT count(*) FROM item_vectors WHERE session_id = :s"), {"s": sid}
        )
        assert rows.scalar() == 0
        # A vector computed for an item erased since its claim is not written.
        assert await VectorRepository(db).store("late-model", [(item, [1.0])], now=utcnow()) == []


async def test_a_vector_goes_only_to_the_item_that_was_embedded(world: World) -> None:
    """The session deleted and made again between the claim and the store: the row at the
    claimed seq is another item (another text, or the same text under another id), and the
    vector computed for the erased one is not stored on it."""
    sid = await session_with(world, ["the original line"])
    async with world.rt.store.read() as db:
        [item] = [
            p
            for p in await VectorRepository(db).claim_pending(MODEL, 1, limit=10_000)
            if p.session_id == sid
        ]
    assert item.item_id
    for text in ("another line", "the original line"):  # new text; same text, new item id
        assert (await world.client.delete(f"/v1/sessions/{sid}")).status_code == 204
        r = await world.client.post(
            f"/v1/sessions/{sid}/items",
            params={"create": "true"},
            json={"items": [{"type": "message", "role": "user", "content": text}]},
        )
        assert r.status_code < 300, r.text
        async with world.rt.store.write() as db:
            assert await VectorRepository(db).store(MODEL, [(item, [1.0])], now=utcnow()) == []
        async with world.rt.store.read() as db:
            assert (await VectorRepository(db).counts("default", sid, MODEL, 1)).pending == 1
    # The very item (same key, id and text) gets it.
    async with world.rt.store.read() as db:
        [same] = [
            p
            for p in await VectorRepository(db).claim_pending(MODEL, 1, limit=10_000)
            if p.session_id == sid
        ]
    async with world.rt.store.write() as db:
        assert len(await VectorRepository(db).store(MODEL, [(same, [1.0])], now=utcnow())) == 1
    forged = PendingItem("default", sid, same.seq, same.text, same.created_at, "not-its-id")
    async with world.rt.store.write() as db:
        await db.execute(sa.text("DELETE FROM item_vectors WHERE session_id = :s"), {"s": sid})
        assert await VectorRepository(db).store(MODEL, [(forged, [1.0])], now=utcnow()) == []


async def test_leased_claims_hold_no_lock_and_share_the_backlog(world: World, backend: str) -> None:
    """Postgres: a leased claim commits before the model runs; another claim meanwhile skips
    the leased items, an expired lease is taken over, a released one is claimable again, and
    a write to a leased item does not wait."""
    if world.rt.store.is_sqlite:
        assert backend == "sqlite"  # one process per file: the claim is a plain read
        return
    model = f"lease-{uuid.uuid4().hex[:6]}"
    now = utcnow()
    later = now + timedelta(seconds=60)
    async with world.rt.store.write() as db:  # the module's other items: out of the way
        await VectorRepository(db).claim_pending(
            model, 1, limit=1_000_000, now=now, lease_until=now + timedelta(days=1)
        )
    sid = await session_with(world, [f"leased {n}" for n in range(4)])

    async def claim(at: datetime) -> list[PendingItem]:
        async with world.rt.store.write() as db:
            got = await VectorRepository(db).claim_pending(
                model, 1, limit=2, now=at, lease_until=at + timedelta(seconds=60)
            )
        return [p for p in got if p.session_id == sid]

    def seqs(items: list[PendingItem]) -> list[int]:
        return [p.seq for p in items]

    first = await claim(now)
    assert seqs(first) == [1, 2] and seqs(await claim(now)) == [3, 4]
    assert await claim(now) == []
    # No lock is held: a pop archives a leased item at once.
    r = await asyncio.wait_for(world.client.post(f"/v1/sessions/{sid}/items/pop"), 5)
    assert r.status_code == 200, r.text
    # Released leases (a failed batch) are claimable again at once.
    async with world.rt.store.write() as db:
        await VectorRepository(db).release(model, first)
    assert seqs(await claim(now)) == [1, 2]
    # Leases expire: a claim after them takes the items over.
    assert seqs(await claim(later + timedelta(seconds=1))) == [1, 2]

    # Two claims at once (the first not committed yet): the second passes over the first's
    # items without waiting for them.
    other = await session_with(world, [f"overlap {n}" for n in range(2)])
    model2 = f"lease-{uuid.uuid4().hex[:6]}"
    async with world.rt.store.write() as db1, world.rt.store.write() as db2:
        a = await VectorRepository(db1).claim_pending(
            model2, 1, limit=1_000_000, now=now, lease_until=later
        )
        assert [p.seq for p in a if p.session_id == other] == [1, 2]
        b = await asyncio.wait_for(
            VectorRepository(db2).claim_pending(
                model2, 1, limit=1_000_000, now=now, lease_until=later
            ),
            5,
        )
    assert not [p for p in b if p.session_id == other]


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
            got = await VectorRepository(db).claim_pending(model, 1, limit=3)
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


async def test_the_index_state_counts_a_bounded_window(world: World) -> None:
    """``counts`` looks at the newest ``PENDING_WINDOW`` items for ``pending`` (exact when they
    are all the session has) and counts every vector for ``indexed``."""
    from app.store.vectors import PENDING_WINDOW

    size = PENDING_WINDOW + 5
    sid = await session_with(world, [f"line {n}" for n in range(PENDING_WINDOW)])
    r = await world.client.post(
        f"/v1/sessions/{sid}/items",
        json={
            "items": [{"type": "message", "role": "user", "content": f"more {n}"} for n in range(5)]
        },
    )
    assert r.status_code < 300, r.text
    model = f"window-{uuid.uuid4().hex[:6]}"
    # Vectors for every item but the three oldest and the two newest.
    async with world.rt.store.write() as db:
        await db.execute(
            sa.text(
                "INSERT INTO item_vectors (tenant_id, session_id, seq, model, dims, vector, "
                "created_at) VALUES ('default', :s, :seq, :m, 1, :v, :now)"
            ),
            [
                {"s": sid, "seq": seq, "m": model, "v": pack_vector([1.0]), "now": utcnow()}
                for seq in range(4, size - 1)
            ],
        )
    async with world.rt.store.read() as db:
        repo = VectorRepository(db)
        counts = await repo.counts("default", sid, model, 1)
        assert (counts.indexed, counts.pending, counts.pending_exact) == (size - 5, 2, False)
        # Another size of the model: nothing indexed, the whole window pending.
        counts = await repo.counts("default", sid, model, 2)
        assert (counts.indexed, counts.pending) == (0, PENDING_WINDOW)
    small = await session_with(world, ["one", "two"])
    async with world.rt.store.read() as db:
        counts = await VectorRepository(db).counts("default", small, model, 1)
        assert (counts.indexed, counts.pending, counts.pending_exact) == (0, 2, True)
        counts = await VectorRepository(db).counts("default", "no-such-session", model, 1)
        assert (counts.indexed, counts.pending, counts.pending_exact) == (0, 0, True)
