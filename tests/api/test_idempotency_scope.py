"""Idempotency records are scoped to (tenant, API key, method, path, key) and die with their session.

Issue 14, the three idempotency cases, each failing before the fix:

- a key reused after its session was deleted and re-created replayed the old answer (201
  ``Idempotent-Replayed: true``) and stored nothing;
- a key of another API key of the same tenant (another session prefix) reusing an
  ``Idempotency-Key`` for ``POST /v1/sessions {}`` was handed the first key's session;
- two concurrent retries of ``POST /v1/sessions {}`` with one key raced on the record: 500.

And the behaviour kept: same key, same path, another body is a 422.
Both backends, in-process, through the real app (no mocks).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx
import pytest

from app.main import create_app
from app.services import keys as key_service
from app.store.db import Store
from tests.api.helpers import all_items, append, assert_problem, create, user
from tests.conftest import make_settings
from tests.support.spec_check import ASYNC_HOOKS

BOOTSTRAP = "bootstrap-key-for-idempotency-" + "y" * 24
REPLAYED = "idempotent-replayed"


# -- a world with keys (auth on), as in tests/api/test_auth.py ---------------------------------


@dataclass
class KeyWorld:
    client: httpx.AsyncClient
    store: Store


@pytest.fixture(scope="module")
async def key_world(backend: str, request: pytest.FixtureRequest) -> AsyncIterator[KeyWorld]:
    settings = make_settings(
        backend,
        request,
        auth={"mode": "on", "bootstrap_key": BOOTSTRAP, "bootstrap_tenant": "boot-idem"},
    )
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost", event_hooks=ASYNC_HOOKS) as client:
            yield KeyWorld(client, app.state.runtime.store)


async def make_key(world: KeyWorld, tenant: str, prefix: str | None, name: str) -> dict[str, str]:
    created = await key_service.insert_key(
        world.store,
        tenant_id=tenant,
        command=key_service.KeyCreateCommand(
            name=name, scopes=frozenset({"read", "write", "admin"}), session_prefix=prefix
        ),
    )
    return {"Authorization": f"Bearer {created.secret}"}


def fresh_tenant() -> str:
    return f"ti-{uuid.uuid4().hex[:10]}"


async def session_ids(world: KeyWorld, auth: dict[str, str]) -> list[str]:
    r = await world.client.get("/v1/sessions", params={"limit": 100}, headers=auth)
    assert r.status_code == 200, r.text
    return [s["id"] for s in r.json()["items"]]


# -- a. the record dies with its session -------------------------------------------------------


async def test_a_key_reused_after_delete_and_recreate_is_a_fresh_append(
    client: httpx.AsyncClient, sid: str
) -> None:
    turn = {"Idempotency-Key": "turn-1"}  # the README's own examples reuse this key
    body = [user("what is the capital of France?")]
    await create(client, sid)
    first = await append(client, sid, body, headers=turn)
    assert first.status_code == 201, first.text
    old_id = first.json()["items"][0]["id"]

    assert (await client.delete(f"/v1/sessions/{sid}")).status_code == 204
    await create(client, sid)
    again = await append(client, sid, body, headers=turn)
    assert again.status_code == 201, again.text
    assert again.headers.get(REPLAYED) is None, "the deleted session's answer was replayed"
    stored = await all_items(client, sid)
    assert [i["content"] for i in stored] == ["what is the capital of France?"]
    assert [i["id"] for i in again.json()["items"]] == [i["id"] for i in stored]
    assert stored[0]["seq"] == 1
    session = (await client.get(f"/v1/sessions/{sid}")).json()
    assert session["item_count"] == 1 and session["last_seq"] == 1
    # the new record is the new session's: a retry now replays the new answer
    retry = await append(client, sid, body, headers=turn)
    assert retry.status_code == 201 and retry.headers.get(REPLAYED) == "true"
    assert retry.json() == again.json()
    assert len(await all_items(client, sid)) == 1
    assert stored[0]["id"] != old_id  # a new item, not the deleted session's


async def test_a_create_key_reused_after_delete_creates_again(
    client: httpx.AsyncClient, sid: str
) -> None:
    """The record of the create itself goes with the session: a re-run of the same script
    (create with key, delete, create with the same key) creates, not replays."""
    key = {"Idempotency-Key": f"create-{sid}"}
    first = await client.post("/v1/sessions", json={"id": sid, "metadata": {"n": 1}}, headers=key)
    assert first.status_code == 201, first.text
    assert (await client.delete(f"/v1/sessions/{sid}")).status_code == 204
    again = await client.post("/v1/sessions", json={"id": sid, "metadata": {"n": 1}}, headers=key)
    assert again.status_code == 201, again.text
    assert again.headers.get(REPLAYED) is None
    r = await client.get(f"/v1/sessions/{sid}")
    assert r.status_code == 200, "a replayed create left no session behind"
    assert r.json()["metadata"] == {"n": 1}


# -- b. scoped to the API key ------------------------------------------------------------------


async def test_another_keys_reused_idempotency_key_gets_its_own_session(
    key_world: KeyWorld,
) -> None:
    c = key_world.client
    tenant = fresh_tenant()
    x = await make_key(key_world, tenant, "a:", "x")
    y = await make_key(key_world, tenant, "b:", "y")
    shared = {"Idempotency-Key": "create-1"}

    rx = await c.post("/v1/sessions", json={}, headers=x | shared)
    assert rx.status_code == 201, rx.text
    x_session = rx.json()
    assert x_session["id"].startswith("a:")

    ry = await c.post("/v1/sessions", json={}, headers=y | shared)
    assert ry.status_code == 201, ry.text
    assert ry.headers.get(REPLAYED) is None, "key Y was handed key X's stored response"
    y_session = ry.json()
    assert y_session["id"].startswith("b:"), y_session
    assert y_session["id"] != x_session["id"]
    # Y's session exists and is Y's; X's stays invisible to Y
    assert (await c.get(f"/v1/sessions/{y_session['id']}", headers=y)).status_code == 200
    assert_problem(await c.get(f"/v1/sessions/{x_session['id']}", headers=y), 404)
    assert await session_ids(key_world, y) == [y_session["id"]]
    # each key's own retry still replays its own answer
    for auth, answer in ((x, rx), (y, ry)):
        retry = await c.post("/v1/sessions", json={}, headers=auth | shared)
        assert retry.status_code == 201 and retry.headers.get(REPLAYED) == "true"
        assert retry.json() == answer.json()
    assert await session_ids(key_world, x) == [x_session["id"]]


async def test_two_keys_with_one_prefix_do_not_share_records(key_world: KeyWorld) -> None:
    """The scope is the API key, not its prefix: a second key confined to the same prefix
    reusing the key creates its own session."""
    c = key_world.client
    tenant = fresh_tenant()
    x1 = await make_key(key_world, tenant, "a:", "x1")
    x2 = await make_key(key_world, tenant, "a:", "x2")
    shared = {"Idempotency-Key": "create-1"}
    r1 = await c.post("/v1/sessions", json={}, headers=x1 | shared)
    r2 = await c.post("/v1/sessions", json={}, headers=x2 | shared)
    assert r1.status_code == r2.status_code == 201, (r1.text, r2.text)
    assert r2.headers.get(REPLAYED) is None
    assert r1.json()["id"] != r2.json()["id"]
    assert sorted(await session_ids(key_world, x1)) == sorted([r1.json()["id"], r2.json()["id"]])


# -- c. concurrent retries of a create without an id -------------------------------------------


@pytest.mark.parametrize("prefix", [None, "p:"])
async def test_concurrent_retries_of_a_create_without_id_make_one_session(
    key_world: KeyWorld, prefix: str | None
) -> None:
    c = key_world.client
    for attempt in range(6):
        tenant = fresh_tenant()
        auth = await make_key(key_world, tenant, prefix, "creator")
        headers = auth | {"Idempotency-Key": f"create-{attempt}"}
        responses = await asyncio.gather(
            c.post("/v1/sessions", json={}, headers=headers),
            c.post("/v1/sessions", json={}, headers=headers),
        )
        statuses = [r.status_code for r in responses]
        assert statuses == [201, 201], [(r.status_code, r.text) for r in responses]
        first, second = (r.json() for r in responses)
        assert first["id"] == second["id"] and first == second
        assert sorted(str(r.headers.get(REPLAYED)) for r in responses) == ["None", "true"]
        if prefix:
            assert first["id"].startswith(prefix)
        assert await session_ids(key_world, auth) == [first["id"]], "exactly one session"


# -- d. kept: another body under the same key is refused ---------------------------------------


async def test_same_key_same_path_other_body_is_422(client: httpx.AsyncClient, sid: str) -> None:
    await create(client, sid)
    key = {"Idempotency-Key": "turn-1"}
    assert (await append(client, sid, [user("one")], headers=key)).status_code == 201
    assert_problem(await append(client, sid, [user("two")], headers=key), 422, "idempotency-key-reused")
    assert [i["content"] for i in await all_items(client, sid)] == ["one"]

    ckey = {"Idempotency-Key": f"c-{sid}"}
    r = await client.post("/v1/sessions", json={"id": sid + "-x"}, headers=ckey)
    assert r.status_code == 201, r.text
    r = await client.post("/v1/sessions", json={"id": sid + "-y"}, headers=ckey)
    assert_problem(r, 422, "idempotency-key-reused")
    assert_problem(await client.get(f"/v1/sessions/{sid}-y"), 404, "session-not-found")
