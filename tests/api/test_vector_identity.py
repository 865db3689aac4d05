"""A vector belongs to one item of one incarnation of a session and to one (model, dims)
(DESIGN §10 "Derived data"), and the indexer never makes a write wait for its model ("No write
waits for the index"): black-box through the API, on both backends, with the ``openai``
embedder against the local stand-in server (a bag-of-words vector per text: texts sharing no
word score near 0, texts sharing words well above).

Several tests run two apps on one database, as two replicas would: a delete or an erasure on
one cannot drop what the other's process cached, so only the cache's identity keeps the other
from serving erased vectors."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime

import httpx
import pytest
import sqlalchemy as sa

from app.services import keys as key_service
from app.services.runtime import Runtime
from app.settings import Settings
from tests.api.test_semantic_index import append, index_state, wait_indexed
from tests.support.embedder_app import (  # noqa: F401 (*_fixture: fixtures)
    app_client,
    embedder_settings,
    embedding_batch_size_fixture,
    fake_llm_fixture,
    indexed_fixture,
    own_database_fixture,
)
from tests.support.fake_llm import FakeLLMServer

DOG = "my dog is a good puppy and loves other pets and animals"
UNRELATED = [
    "Kubernetes pod crashed",
    "the build is green again",
    "merge the release branch",
    "quarterly invoices were sent",
]
ABOUT_DOGS = {"q": "puppy pets animals", "mode": "semantic", "min_score": 0.2}
BOOTSTRAP = "bootstrap-key-for-tests-" + "x" * 24


@asynccontextmanager
async def replica(settings: Settings) -> AsyncIterator[tuple[httpx.AsyncClient, Runtime]]:
    """One more app on the same database (another replica's process, with its own cache)."""
    runs = app_client(settings)
    pair = await runs.__anext__()
    try:
        yield pair
    finally:
        with pytest.raises(StopAsyncIteration):
            await runs.__anext__()


async def search(
    client: httpx.AsyncClient, sid: str, headers: dict[str, str] | None = None
) -> list[str]:
    r = await client.get(f"/v1/sessions/{sid}/search", params=ABOUT_DOGS, headers=headers)
    assert r.status_code == 200, r.text
    return [h["item"]["content"] for h in r.json()["items"]]


def cached_sessions(rt: Runtime) -> set[tuple[str, str]]:
    assert rt.vector_cache is not None
    return {(k[0], k[1]) for k in rt.vector_cache._entries}


async def test_a_deleted_session_made_again_never_scores_its_old_vectors(
    indexed: tuple[httpx.AsyncClient, Runtime],
) -> None:
    """The issue's reproduction in one process: the delete drops the session's cached vectors,
    and the new session's search scores only its own items."""
    client, rt = indexed
    sid = f"again-{uuid.uuid4().hex[:8]}"
    await append(client, sid, [DOG])
    await wait_indexed(client, sid, count=1)
    assert await search(client, sid) == [DOG]
    assert ("default", sid) in cached_sessions(rt)

    assert (await client.delete(f"/v1/sessions/{sid}")).status_code == 204
    assert ("default", sid) not in cached_sessions(rt)  # erased vectors leave memory at once
    await append(client, sid, UNRELATED)
    await wait_indexed(client, sid, count=4)
    assert await search(client, sid) == []
    r = await client.get(f"/v1/sessions/{sid}/search", params=ABOUT_DOGS | {"min_score": -1})
    scores = {h["item"]["content"]: h["scores"]["semantic"] for h in r.json()["items"]}
    assert scores[UNRELATED[0]] < 0.2, scores


async def test_another_replica_never_serves_a_deleted_sessions_vectors(
    own_database: dict[str, object], fake_llm: FakeLLMServer
) -> None:
    """Replica A searched the session (its cache holds the dog's vector); replica B deletes it
    and makes it again, by an append and then by a fork into the freed id: A's next search
    scores the new items only (the stamp's count and seq sum match the old ones again, so only
    the session's incarnation tells them apart)."""
    fake_llm.reset()
    settings = embedder_settings(own_database, fake_llm)
    async for a, rt_a in app_client(settings):
        async with replica(settings) as (b, _):
            sid = f"twice-{uuid.uuid4().hex[:8]}"
            source = f"src-{uuid.uuid4().hex[:8]}"
            await append(b, source, UNRELATED)
            await wait_indexed(b, source, count=4)

            # Made again by an append (seqs 1-4, the dog's at seq 1 before).
            await append(a, sid, [DOG])
            await wait_indexed(a, sid, count=1)
            assert await search(a, sid) == [DOG]
            assert (await b.delete(f"/v1/sessions/{sid}")).status_code == 204
            await append(b, sid, UNRELATED)
            await wait_indexed(b, sid, count=4)
            assert ("default", sid) in cached_sessions(rt_a)  # B cannot reach A's memory
            assert await search(a, sid) == []

            # Made again by a fork of another session into the freed id.
            assert (await b.delete(f"/v1/sessions/{sid}")).status_code == 204
            await append(a, sid, [DOG])
            await wait_indexed(a, sid, count=1)
            assert await search(a, sid) == [DOG]
            assert (await b.delete(f"/v1/sessions/{sid}")).status_code == 204
            r = await b.post(f"/v1/sessions/{source}/fork", json={"new_session_id": sid})
            assert r.status_code in (200, 201), r.text
            state = await wait_indexed(b, sid, count=4)
            assert state["pending"] == 0
            assert await search(a, sid) == []


async def test_a_new_tenant_never_sees_an_erased_tenants_vectors(
    own_database: dict[str, object], fake_llm: FakeLLMServer
) -> None:
    """A tenant erased on replica B (A's cache still holding one of its sessions), then a new
    tenant under the same id once the tombstone is gone: A serves the new tenant's session
    by its own items only. On the replica that erased, the tenant's vectors left the cache."""
    fake_llm.reset()
    settings = embedder_settings(
        own_database, fake_llm, auth={"mode": "on", "bootstrap_key": BOOTSTRAP}
    )
    async for a, rt_a in app_client(settings):
        async with replica(settings) as (b, rt_b):
            tenant = f"t-{uuid.uuid4().hex[:8]}"

            old = await bearer(rt_a, tenant, {"read", "write"})
            admin = await bearer(rt_a, tenant, {"read", "write", "admin"})
            sid = "notes"
            for client, headers in ((a, old), (b, admin)):
                r = await client.post(
                    f"/v1/sessions/{sid}/items",
                    params={"create": "true"},
                    headers=headers,
                    json={"items": [{"type": "message", "role": "user", "content": DOG}]}
                    if client is a
                    else {"items": [{"type": "message", "role": "user", "content": "x"}]},
                )
                assert r.status_code < 300, r.text
                await wait_for_pending_zero(client, sid, headers)
            assert DOG in await search(a, sid, old)
            assert DOG in await search(b, sid, admin)
            assert (tenant, sid) in cached_sessions(rt_b)

            r = await b.delete(f"/v1/admin/tenants/{tenant}", headers=admin)
            assert r.status_code == 200, r.text
            assert not {k for k in cached_sessions(rt_b) if k[0] == tenant}
            # What the sweep does once no replica can hold a key of the tenant any more.
            async with rt_b.store.write() as db:
                await db.execute(sa.text("DELETE FROM tenant_erasures"))

            new = await bearer(rt_a, tenant, {"read", "write"})
            r = await b.post(
                f"/v1/sessions/{sid}/items",
                params={"create": "true"},
                headers=new,
                json={
                    "items": [
                        {"type": "message", "role": "user", "content": t} for t in UNRELATED[:2]
                    ]
                },
            )
            assert r.status_code < 300, r.text
            await wait_for_pending_zero(b, sid, new)
            assert await search(a, sid, new) == []


async def bearer(rt: Runtime, tenant_id: str, scopes: set[str]) -> dict[str, str]:
    created = await key_service.insert_key(
        rt.store,
        tenant_id=tenant_id,
        command=key_service.KeyCreateCommand(
            name="k", scopes=frozenset(scopes), session_prefix=None
        ),
    )
    return {"Authorization": f"Bearer {created.secret}"}


async def wait_for_pending_zero(
    client: httpx.AsyncClient, sid: str, headers: dict[str, str]
) -> None:
    deadline = time.monotonic() + 20
    while True:
        r = await client.get(f"/v1/sessions/{sid}", headers=headers)
        assert r.status_code == 200, r.text
        if r.json()["search_index"]["pending"] == 0:
            return
        assert time.monotonic() < deadline, r.json()
        await asyncio.sleep(0.05)


async def test_a_changed_size_under_the_same_model_is_embedded_again(
    own_database: dict[str, object], fake_llm: FakeLLMServer
) -> None:
    """``EMBEDDINGS__DIMENSIONS`` changed, the model name kept: the old vectors are pending
    again (never counted, never compared), then replaced by vectors of the new size."""
    fake_llm.reset()
    model = f"sized-{uuid.uuid4().hex[:6]}"
    sid = f"dims-{uuid.uuid4().hex[:8]}"
    async for client, _ in app_client(
        embedder_settings(own_database, fake_llm, model=model, dimensions=256)
    ):
        await append(client, sid, [DOG, UNRELATED[0]])
        await wait_indexed(client, sid, count=2)
        assert await search(client, sid) == [DOG]

    fake_llm.configure("error", status=503)  # nothing of the new size exists yet
    async for client, rt in app_client(
        embedder_settings(own_database, fake_llm, model=model, dimensions=128)
    ):
        assert await index_state(client, sid) == {
            "model": model,
            "indexed": 0,
            "pending": 2,
            "pending_exact": True,
        }
        fake_llm.reset()
        await wait_indexed(client, sid, count=2)
        assert await search(client, sid) == [DOG]
        async with rt.store.read() as db:
            rows = (
                await db.execute(
                    sa.text(
                        "SELECT model, dims, count(*) FROM item_vectors WHERE session_id = :s "
                        "GROUP BY model, dims"
                    ),
                    {"s": sid},
                )
            ).all()
        assert [tuple(r) for r in rows] == [(model, 128, 2)]


async def until_embedding_requested(fake_llm: FakeLLMServer, text: str) -> None:
    """Wait until the stand-in server has received a request to embed ``text``."""
    deadline = time.monotonic() + 10
    while True:
        for request in fake_llm.requests():
            body = request["body"]
            if request["path"].endswith("/embeddings") and text in (body.get("input") or []):
                return
        assert time.monotonic() < deadline, "the indexer never asked for the embedding"
        await asyncio.sleep(0.02)


SLOW = 3.0  # seconds the stand-in embedder takes per request in the tests below


async def drain(client: httpx.AsyncClient) -> None:
    """Wait until the indexer has worked through the backlog (the module's database holds the
    earlier tests' items, which a fresh model embeds first): it claims oldest first, so once
    an item appended now has its vector, the rest have too."""
    sid = f"drain-{uuid.uuid4().hex[:8]}"
    await append(client, sid, ["nothing to see"])
    await wait_indexed(client, sid, count=1)


async def test_a_write_never_waits_for_the_indexers_model(
    indexed: tuple[httpx.AsyncClient, Runtime], fake_llm: FakeLLMServer
) -> None:
    """A pop archives an item the indexer is embedding (a slow model, mid-call): it answers at
    once, and the item still gets its vector (archived, it is the same item)."""
    client, _ = indexed
    sid = f"slow-{uuid.uuid4().hex[:8]}"
    await drain(client)
    fake_llm.configure("json", delay=SLOW)
    text = f"the slow model embeds this line {uuid.uuid4().hex[:6]}"
    try:
        await append(client, sid, [text])
        await until_embedding_requested(fake_llm, text)
        started = time.monotonic()
        r = await client.post(f"/v1/sessions/{sid}/items/pop")
        popped_in = time.monotonic() - started
        assert r.status_code == 200, r.text
        assert popped_in < SLOW / 3, f"the pop waited {popped_in:.2f} s for the model"
        r = await client.post(
            f"/v1/sessions/{sid}/items",
            json={"items": [{"type": "message", "role": "user", "content": "and then"}]},
        )
        assert r.status_code < 300, r.text
    finally:
        fake_llm.configure("json")
    state = await wait_indexed(client, sid, count=2)
    assert state["pending"] == 0


async def test_a_vector_is_stored_only_on_the_item_it_was_computed_for(
    indexed: tuple[httpx.AsyncClient, Runtime], fake_llm: FakeLLMServer
) -> None:
    """The session is deleted and made again while the indexer embeds its item: the vector of
    the erased item is dropped, never stored on the new item at the same seq (which gets its
    own)."""
    client, rt = indexed
    assert rt.embedder is not None
    sid = f"swap-{uuid.uuid4().hex[:8]}"
    dog = f"{DOG} {uuid.uuid4().hex[:6]}"
    await drain(client)
    fake_llm.configure("json", delay=SLOW)
    try:
        await append(client, sid, [dog])
        await until_embedding_requested(fake_llm, dog)
        assert (await client.delete(f"/v1/sessions/{sid}")).status_code == 204
        await append(client, sid, [UNRELATED[0]])
    finally:
        fake_llm.configure("json")
    await wait_indexed(client, sid, count=1)
    assert await search(client, sid) == []  # the dog's vector is on no item
    r = await client.get(
        f"/v1/sessions/{sid}/search", params={"q": UNRELATED[0], "mode": "semantic"}
    )
    assert [(h["seq"], round(h["scores"]["semantic"], 3)) for h in r.json()["items"]] == [(1, 1.0)]


async def test_recall_on_another_replica_never_scores_a_deleted_sessions_vectors(
    own_database: dict[str, object], fake_llm: FakeLLMServer
) -> None:
    """Recall reads this session's vectors through the same cache: replica A recalled from the
    session; B deletes it and makes it again with as many items (so the same count and seq
    sum); A's next recall scores the new items by their own vectors, so the item at the dog's
    old seq is not recalled for a question about pets."""
    fake_llm.reset()
    settings = embedder_settings(own_database, fake_llm)
    filler = " ".join(f"word{n}" for n in range(120))
    question = "puppy pets animals?"

    def items(first: str) -> list[dict[str, str]]:
        return [
            {"type": "message", "role": "user", "content": first},
            {"type": "message", "role": "assistant", "content": f"a {filler}"},
            {"type": "message", "role": "assistant", "content": f"b {filler}"},
            {"type": "message", "role": "user", "content": question},
        ]

    async def recalled(client: httpx.AsyncClient, sid: str) -> list[int]:
        r = await client.post(
            f"/v1/sessions/{sid}/context",
            json={"format": "canonical", "max_tokens": 200, "recall": {"max_tokens": 80}},
        )
        assert r.status_code == 200, r.text
        report = r.json()["report"]
        assert report["dropped_ranges"], report  # the first three items are out of the prompt
        return [e["seq"] for e in report["recalled"]]

    async for a, _ in app_client(settings):
        async with replica(settings) as (b, _):
            sid = f"recall-{uuid.uuid4().hex[:8]}"
            await append_items(a, sid, items(DOG))
            await wait_indexed(a, sid, count=4)
            assert await recalled(a, sid) == [1]
            assert (await b.delete(f"/v1/sessions/{sid}")).status_code == 204
            await append_items(b, sid, items(UNRELATED[0]))
            await wait_indexed(b, sid, count=4)
            assert 1 not in await recalled(a, sid)


async def append_items(client: httpx.AsyncClient, sid: str, items: list[dict[str, str]]) -> None:
    r = await client.post(
        f"/v1/sessions/{sid}/items", params={"create": "true"}, json={"items": items}
    )
    assert r.status_code < 300, r.text


async def test_the_sweep_drops_an_expired_sessions_cached_vectors(
    indexed: tuple[httpx.AsyncClient, Runtime],
) -> None:
    """The retention sweep erasing an expired session drops its vectors from the process's
    cache too; other sessions' stay."""
    from app.services.retention import run_sweep

    client, rt = indexed
    doomed, kept = f"exp-{uuid.uuid4().hex[:8]}", f"keep-{uuid.uuid4().hex[:8]}"
    for sid in (doomed, kept):
        await append(client, sid, [DOG])
        await wait_indexed(client, sid, count=1)
        assert await search(client, sid) == [DOG]
    assert {("default", doomed), ("default", kept)} <= cached_sessions(rt)
    async with rt.store.write() as db:
        await db.execute(
            sa.text("UPDATE sessions SET expires_at = :t WHERE id = :s"),
            {"t": datetime(2000, 1, 1, tzinfo=UTC), "s": doomed},
        )
    report = await run_sweep(rt, claim=False)
    assert report.sessions_expired >= 1
    assert ("default", doomed) not in cached_sessions(rt)
    assert ("default", kept) in cached_sessions(rt)
