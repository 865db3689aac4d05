"""The semantic indexer in a running app, on both backends: appends stay as they were, items
get vectors in the background, the session resource shows the index state. The embedder is
the ``openai`` one against the local stand-in server (tests/support/fake_llm.py)."""

from __future__ import annotations

import asyncio
import math
import time
import uuid

import httpx
import pytest
import sqlalchemy as sa

from app.services import keys as key_service
from app.services.runtime import Runtime
from app.store.vectors import unpack_vector
from tests.conftest import make_settings
from tests.support.embedder_app import (  # noqa: F401 (*_fixture: fixtures)
    app_client,
    embedder_settings,
    embedding_batch_size_fixture,
    fake_llm_fixture,
    indexed_fixture,
    own_database_fixture,
)
from tests.support.fake_llm import FakeLLMServer, fake_embedding


async def append(client: httpx.AsyncClient, sid: str, texts: list[str]) -> None:
    r = await client.post(
        f"/v1/sessions/{sid}/items",
        params={"create": "true"},
        json={"items": [{"type": "message", "role": "user", "content": t} for t in texts]},
    )
    assert r.status_code < 300, r.text


async def index_state(client: httpx.AsyncClient, sid: str) -> dict[str, object] | None:
    r = await client.get(f"/v1/sessions/{sid}")
    assert r.status_code == 200, r.text
    state: dict[str, object] | None = r.json()["search_index"]
    return state


async def wait_indexed(client: httpx.AsyncClient, sid: str, *, count: int) -> dict[str, object]:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        state = await index_state(client, sid)
        assert state is not None
        if state["indexed"] == count and state["pending"] == 0:
            return state
        await asyncio.sleep(0.05)
    raise AssertionError(f"not indexed in time: {state}")


async def test_appended_items_get_vectors_in_the_background(
    indexed: tuple[httpx.AsyncClient, Runtime],
) -> None:
    client, rt = indexed
    sid = f"idx-{uuid.uuid4().hex[:8]}"
    texts = [f"the deploy {n} failed on staging" for n in range(6)]
    await append(client, sid, texts)
    assert rt.embedder is not None
    state = await wait_indexed(client, sid, count=6)
    assert state["model"] == rt.embedder.model
    async with rt.store.read() as db:
        rows = (
            await db.execute(
                sa.text(
                    "SELECT i.search_text, v.dims, v.vector FROM item_vectors v JOIN items i "
                    "ON i.tenant_id = v.tenant_id AND i.session_id = v.session_id "
                    "AND i.seq = v.seq WHERE v.session_id = :s AND v.model = :m ORDER BY v.seq"
                ),
                {"s": sid, "m": rt.embedder.model},
            )
        ).all()
    assert len(rows) == 6
    for text, dims, blob in rows:
        raw = fake_embedding(text, dims)
        norm = math.sqrt(sum(x * x for x in raw))
        assert unpack_vector(bytes(blob), dims) == pytest.approx([x / norm for x in raw], abs=1e-6)

    # Items appended later are indexed too (the append hook wakes the indexer).
    await append(client, sid, ["one more line"])
    await wait_indexed(client, sid, count=7)


async def test_a_failing_embedder_never_fails_an_append(
    indexed: tuple[httpx.AsyncClient, Runtime], fake_llm: FakeLLMServer
) -> None:
    client, _ = indexed
    fake_llm.configure("error", status=503)
    sid = f"idx-{uuid.uuid4().hex[:8]}"
    await append(client, sid, ["written while the endpoint is down", "and another"])
    await asyncio.sleep(0.3)
    state = await index_state(client, sid)
    assert state is not None and state["pending"] == 2 and state["indexed"] == 0
    fake_llm.reset()  # the endpoint recovers: the backlog is indexed after the back-off
    await wait_indexed(client, sid, count=2)


async def test_no_index_state_when_semantic_search_is_off(
    backend: str, request: pytest.FixtureRequest
) -> None:
    settings = make_settings(
        backend, request, auth={"mode": "off"}, embeddings={"provider": "none"}
    )
    async for client, rt in app_client(settings):
        sid = f"idx-{uuid.uuid4().hex[:8]}"
        await append(client, sid, ["hello"])
        assert rt.embedder is None
        assert await index_state(client, sid) is None


async def test_session_search_modes(indexed: tuple[httpx.AsyncClient, Runtime]) -> None:
    client, _ = indexed
    sid = f"srch-{uuid.uuid4().hex[:8]}"
    texts = [
        "pytest failed with error code E1042 in the parser",
        "error E1024 was fixed yesterday in the parser",
        "the staging database password rotates weekly",
        "coffee beans arrive tomorrow",
        "the parser rejects dates before 1970",
    ]
    await append(client, sid, texts)
    await wait_indexed(client, sid, count=5)
    base = f"/v1/sessions/{sid}/search"

    r = await client.get(base, params={"q": "parser error", "mode": "semantic", "min_score": 0.2})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["mode"] == "semantic"
    sims = [h["scores"]["semantic"] for h in body["items"]]
    assert sims and all(s is not None and s >= 0.2 for s in sims)
    assert sims == sorted(sims, reverse=True)
    assert all(h["scores"]["fulltext"] is None for h in body["items"])
    assert "coffee beans arrive tomorrow" not in [h["item"]["content"] for h in body["items"]]

    # An exact token: the full-text match first, both scores shown.
    r = await client.get(base, params={"q": "E1042", "mode": "hybrid"})
    assert r.status_code == 200, r.text
    first = r.json()["items"][0]
    assert first["seq"] == 1 and first["scores"]["fulltext"] is not None
    assert first["scores"]["semantic"] is not None

    # Hybrid is the default; full text stays available, its score beside it.
    r = await client.get(base, params={"q": "parser"})
    body = r.json()
    assert body["mode"] == "hybrid"
    assert {h["seq"] for h in body["items"] if h["scores"]["fulltext"] is not None} == {1, 2, 5}
    r = await client.get(base, params={"q": "parser", "mode": "fulltext"})
    body = r.json()
    assert body["mode"] == "fulltext" and len(body["items"]) == 3
    assert all(h["scores"] == {"fulltext": h["score"], "semantic": None} for h in body["items"])

    # Pages of a hybrid search cover the unpaged result exactly.
    params = {"q": "the parser error", "mode": "hybrid", "min_score": -1}
    whole = (await client.get(base, params=params | {"limit": 100})).json()["items"]
    assert len(whole) == 5
    seen: list[int] = []
    cursor = None
    while True:
        page = (
            await client.get(
                base, params=params | {"limit": 2} | ({"cursor": cursor} if cursor else {})
            )
        ).json()
        seen += [h["seq"] for h in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == [h["seq"] for h in whole]

    r = await client.get(base, params={"q": "x", "mode": "vibes"})
    assert r.status_code == 422 and r.headers["content-type"].startswith("application/problem")
    r = await client.get("/v1/search", params={"q": "x", "mode": "vibes"})
    assert r.status_code == 422 and r.headers["content-type"].startswith("application/problem")


async def test_modes_with_semantic_search_off(backend: str, request: pytest.FixtureRequest) -> None:
    settings = make_settings(
        backend, request, auth={"mode": "off"}, embeddings={"provider": "none"}
    )
    async for client, _ in app_client(settings):
        sid = f"srch-{uuid.uuid4().hex[:8]}"
        await append(client, sid, ["the parser failed"])
        r = await client.get(f"/v1/sessions/{sid}/search", params={"q": "parser", "mode": "hybrid"})
        assert r.status_code == 200 and r.json()["mode"] == "fulltext"
        assert len(r.json()["items"]) == 1
        r = await client.get(
            f"/v1/sessions/{sid}/search", params={"q": "parser", "mode": "semantic"}
        )
        assert r.status_code == 403, r.text
        assert r.json()["type"].endswith("semantic-search-off")
        assert "semantic search is off" in r.json()["detail"]


async def bearer_key(rt: Runtime, tenant_id: str, prefix: str | None) -> dict[str, str]:
    """The Authorization header of a new read-write key of ``tenant_id`` (its sessions whose
    id starts with ``prefix``; all of them for None)."""
    created = await key_service.insert_key(
        rt.store,
        tenant_id=tenant_id,
        command=key_service.KeyCreateCommand(
            name="k", scopes=frozenset({"read", "write"}), session_prefix=prefix
        ),
    )
    return {"Authorization": f"Bearer {created.secret}"}


async def test_tenant_wide_semantic_and_hybrid_search(
    own_database: dict[str, object], fake_llm: FakeLLMServer
) -> None:
    """``GET /v1/search`` by meaning and hybrid: confined to the key's tenant and session
    prefix like full text, both scores shown, pages covering the whole result."""
    fake_llm.reset()
    settings = embedder_settings(
        own_database,
        fake_llm,
        batch_size=8,
        auth={"mode": "on", "bootstrap_key": "bootstrap-key-for-tests-" + "x" * 24},
    )
    async for client, rt in app_client(settings):
        tenant, other_tenant = f"t-{uuid.uuid4().hex[:6]}", f"t-{uuid.uuid4().hex[:6]}"
        full, team, stranger = (
            await bearer_key(rt, tenant, None),
            await bearer_key(rt, tenant, "team-a:"),
            await bearer_key(rt, other_tenant, None),
        )
        texts = {
            "team-a:one": ["the staging database password rotates weekly", "lunch at noon"],
            "team-a:two": ["staging database migrations run nightly", "deploy E1042 failed"],
            "team-b:one": ["the staging database password is long", "coffee beans"],
        }
        for sid, lines in texts.items():
            r = await client.post(
                f"/v1/sessions/{sid}/items",
                params={"create": "true"},
                headers=full,
                json={"items": [{"type": "message", "role": "user", "content": t} for t in lines]},
            )
            assert r.status_code < 300, r.text
        r = await client.post(
            "/v1/sessions/theirs/items",
            params={"create": "true"},
            headers=stranger,
            json={"items": [{"type": "message", "role": "user", "content": "staging database"}]},
        )
        assert r.status_code < 300, r.text
        deadline = time.monotonic() + 20
        for sid in texts:
            while True:
                state = (await client.get(f"/v1/sessions/{sid}", headers=full)).json()
                if state["search_index"]["pending"] == 0:
                    break
                assert time.monotonic() < deadline, state
                await asyncio.sleep(0.05)

        q = {"q": "staging database password", "min_score": 0.3}
        r = await client.get("/v1/search", params=q | {"mode": "semantic"}, headers=full)
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["mode"] == "semantic"
        found = [(h["session_id"], h["item"]["content"]) for h in body["items"]]
        # Meaning across sessions of the tenant, best first; never the other tenant's item.
        assert found[:2] == [
            ("team-b:one", "the staging database password is long"),
            ("team-a:one", "the staging database password rotates weekly"),
        ] or found[:2] == [
            ("team-a:one", "the staging database password rotates weekly"),
            ("team-b:one", "the staging database password is long"),
        ]
        assert "theirs" not in {s for s, _ in found}
        assert all(h["scores"]["fulltext"] is None for h in body["items"])
        sims = [h["scores"]["semantic"] for h in body["items"]]
        assert sims == sorted(sims, reverse=True) and min(sims) >= 0.3

        # The key's session prefix confines it, as it does full text.
        r = await client.get("/v1/search", params=q | {"mode": "semantic"}, headers=team)
        assert r.status_code == 200, r.text
        assert {h["session_id"] for h in r.json()["items"]} <= {"team-a:one", "team-a:two"}
        assert r.json()["items"]

        # Hybrid is the default; an exact token puts its full-text match first.
        r = await client.get("/v1/search", params={"q": "E1042"}, headers=full)
        body = r.json()
        assert body["mode"] == "hybrid"
        first = body["items"][0]
        assert (first["session_id"], first["item"]["content"]) == (
            "team-a:two",
            "deploy E1042 failed",
        )
        assert first["scores"]["fulltext"] is not None and first["scores"]["semantic"] is not None

        # Pages of a tenant-wide hybrid search cover the unpaged result exactly.
        params = {"q": "the staging database", "min_score": -1}
        whole = (
            await client.get("/v1/search", params=params | {"limit": 100}, headers=full)
        ).json()
        assert len(whole["items"]) == 6
        seen: list[tuple[str, int]] = []
        cursor = None
        while True:
            page = (
                await client.get(
                    "/v1/search",
                    params=params | {"limit": 4} | ({"cursor": cursor} if cursor else {}),
                    headers=full,
                )
            ).json()
            seen += [(h["session_id"], h["seq"]) for h in page["items"]]
            cursor = page["next_cursor"]
            if cursor is None:
                break
        assert seen == [(h["session_id"], h["seq"]) for h in whole["items"]]

        # The other tenant sees only its own.
        r = await client.get("/v1/search", params=q | {"mode": "semantic"}, headers=stranger)
        assert [h["session_id"] for h in r.json()["items"]] == ["theirs"]


async def test_cached_vectors_follow_the_session(
    indexed: tuple[httpx.AsyncClient, Runtime],
) -> None:
    """The process keeps a searched session's vectors (app.embeddings.cache): a later search
    still sees vectors added since, items archived since, and items erased since."""
    client, rt = indexed
    assert rt.vector_cache is not None
    sid = f"cache-{uuid.uuid4().hex[:8]}"
    base = f"/v1/sessions/{sid}/search"
    params = {"q": "walrus migration", "mode": "semantic", "min_score": 0.3}
    await append(client, sid, ["the walrus migration starts in spring", "unrelated words here"])
    await wait_indexed(client, sid, count=2)
    assert [h["seq"] for h in (await client.get(base, params=params)).json()["items"]] == [1]
    assert len(rt.vector_cache) >= 1

    # Newer vectors are added to the cached ones.
    await append(client, sid, ["walrus migration delayed by ice", "more filler"])
    await wait_indexed(client, sid, count=4)
    hits = (await client.get(base, params=params)).json()["items"]
    assert sorted(h["seq"] for h in hits) == [1, 3]

    # An archived item leaves the working memory's search, stays in history's.
    for _ in range(2):  # the newest two: seqs 4 and 3
        r = await client.post(f"/v1/sessions/{sid}/items/pop")
        assert r.status_code == 200, r.text
    hits = (await client.get(base, params=params)).json()["items"]
    assert [h["seq"] for h in hits] == [1]
    hits = (await client.get(base, params=params | {"scope": "history"})).json()["items"]
    assert sorted(h["seq"] for h in hits) == [1, 3]

    # A session deleted and made again under the same id: none of the old vectors.
    assert (await client.delete(f"/v1/sessions/{sid}")).status_code in (200, 204)
    await append(client, sid, ["nothing about animals", "walrus"])
    await wait_indexed(client, sid, count=2)
    hits = (await client.get(base, params=params | {"scope": "history"})).json()["items"]
    assert [h["item"]["content"] for h in hits] == ["walrus"]


async def test_indexer_metrics(indexed: tuple[httpx.AsyncClient, Runtime]) -> None:
    """Items indexed (a counter: rate() is per second), their lag from append to vector (a
    histogram) and the pending gauge, on /metrics."""
    from tests.api.test_metrics import scrape, value

    client, _ = indexed
    before = await scrape(client)
    sid = f"met-{uuid.uuid4().hex[:8]}"
    await append(client, sid, ["one line", "two lines", "three lines"])
    await wait_indexed(client, sid, count=3)
    deadline = time.monotonic() + 10
    while True:
        after = await scrape(client)
        if value(after, "session_memory_index_pending") == 0:
            break
        assert time.monotonic() < deadline, "pending never went back to 0"
        await asyncio.sleep(0.05)
    indexed_now = value(after, "session_memory_vectors_indexed_total")
    assert indexed_now - value(before, "session_memory_vectors_indexed_total") >= 3
    lags = value(after, "session_memory_index_lag_seconds_count") - value(
        before, "session_memory_index_lag_seconds_count"
    )
    assert lags >= 3
    # Every lag of these items was under a minute (the histogram's +Inf minus its 60 s bucket).
    slow = value(after, "session_memory_index_lag_seconds_bucket", le="+Inf") - value(
        after, "session_memory_index_lag_seconds_bucket", le="60.0"
    )
    slow_before = value(before, "session_memory_index_lag_seconds_bucket", le="+Inf") - value(
        before, "session_memory_index_lag_seconds_bucket", le="60.0"
    )
    assert slow == slow_before


async def test_a_model_change_reindexes_and_never_mixes_models(
    own_database: dict[str, object], fake_llm: FakeLLMServer
) -> None:
    """The same database served with another model: every item is embedded again in the
    background, and until it is, search by meaning sees only what the new model embedded."""
    fake_llm.reset()
    sid = f"model-{uuid.uuid4().hex[:8]}"

    old, new = f"old-{uuid.uuid4().hex[:6]}", f"new-{uuid.uuid4().hex[:6]}"
    params = {"q": "glacier survey results", "mode": "semantic", "min_score": 0.3}
    async for client, _ in app_client(embedder_settings(own_database, fake_llm, model=old)):
        await append(client, sid, ["the glacier survey results are in", "lunch menu"])
        await wait_indexed(client, sid, count=2)
        hits = (await client.get(f"/v1/sessions/{sid}/search", params=params)).json()["items"]
        assert [h["seq"] for h in hits] == [1]

    # The new model answers with vectors of another size; the endpoint is down at first, so
    # nothing of the new model exists yet.
    fake_llm.configure("error", status=503)
    async for client, rt in app_client(
        embedder_settings(own_database, fake_llm, model=new, dimensions=128)
    ):
        state = await index_state(client, sid)
        assert state == {
            "model": new,
            "indexed": 0,
            "pending": 2,
            "pending_exact": True,
        }  # the old vectors don't count
        # With the embedder down, the default (hybrid) answers as full text; semantic is a 502.
        r = await client.get(f"/v1/sessions/{sid}/search", params={"q": "glacier"})
        assert r.status_code == 200 and r.json()["mode"] == "fulltext"
        assert [h["seq"] for h in r.json()["items"]] == [1]
        r = await client.get("/v1/search", params={"q": "glacier"})
        assert r.status_code == 200 and r.json()["mode"] == "fulltext"
        r = await client.get(f"/v1/sessions/{sid}/search", params=params)
        assert r.status_code == 502 and r.json()["type"].endswith("upstream-failed")
        fake_llm.reset()
        assert rt.embedder is not None
        await wait_indexed(client, sid, count=2)
        hits = (await client.get(f"/v1/sessions/{sid}/search", params=params)).json()["items"]
        assert [h["seq"] for h in hits] == [1]
        async with rt.store.read() as db:
            rows = (
                await db.execute(
                    sa.text(
                        "SELECT model, dims, count(*) FROM item_vectors WHERE session_id = :s "
                        "GROUP BY model, dims ORDER BY model"
                    ),
                    {"s": sid},
                )
            ).all()
        assert [tuple(r) for r in rows] == [(new, 128, 2), (old, 256, 2)]


async def test_forked_and_restored_sessions_are_indexed_again(
    indexed: tuple[httpx.AsyncClient, Runtime],
) -> None:
    """Vectors are not in snapshots: a fork's and a restore's items get their own."""
    client, _ = indexed
    sid = f"fork-{uuid.uuid4().hex[:8]}"
    params = {"q": "penguin colony count", "mode": "semantic", "min_score": 0.3}
    await append(client, sid, ["the penguin colony count doubled", "weather is fine"])
    await wait_indexed(client, sid, count=2)
    snap = (await client.post(f"/v1/sessions/{sid}/snapshots", json={"label": "x"})).json()

    fork = f"{sid}-fork"
    r = await client.post(f"/v1/sessions/{sid}/fork", json={"new_session_id": fork})
    assert r.status_code in (200, 201), r.text
    await wait_indexed(client, fork, count=2)
    hits = (await client.get(f"/v1/sessions/{fork}/search", params=params)).json()["items"]
    assert [(h["session_id"], h["item"]["content"]) for h in hits] == [
        (fork, "the penguin colony count doubled")
    ]

    await append(client, sid, ["something else entirely"])
    r = await client.post(f"/v1/sessions/{sid}/restore", json={"snapshot_id": snap["id"]})
    assert r.status_code == 200, r.text
    restored = r.json()["session"]
    state = await wait_indexed(client, sid, count=restored["last_seq"])
    assert state["pending"] == 0
    hits = (await client.get(f"/v1/sessions/{sid}/search", params=params)).json()["items"]
    # The restored copy is found in working memory (the item from before is archived).
    assert [h["item"]["content"] for h in hits] == ["the penguin colony count doubled"]
    assert hits[0]["seq"] > 3
