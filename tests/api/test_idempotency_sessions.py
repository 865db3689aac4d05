"""Idempotency records belong to the session they created, and are scoped by the decoded
session id.

Issue 31, each failing before the fix:

- a fork's record was filed under its origin: after the fork was deleted a retry answered
  ``201 Idempotent-Replayed`` with the fork's id and metadata for a session that was gone,
  and the record stayed in ``idempotency_keys``;
- the scope was the request's URL path, in which the sessions ``q?1`` and ``q%3F1`` share
  ``/v1/sessions/q%3F1/items``: an append to the second with the same key and body was
  answered as a replay of the first's, and never stored.

Both backends, in-process, through the real app; the table is read through the app's store.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from urllib.parse import quote

import httpx
import pytest
import sqlalchemy as sa

from app.main import create_app
from app.settings import Settings
from app.store.db import Store
from app.store.tables import idempotency_keys
from tests.api.helpers import append, assert_problem, create, user
from tests.support.spec_check import ASYNC_HOOKS

REPLAYED = "idempotent-replayed"


@dataclass
class World:
    client: httpx.AsyncClient
    store: Store


@pytest.fixture(scope="module")
async def world(settings: Settings) -> AsyncIterator[World]:
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://localhost", event_hooks=ASYNC_HOOKS
        ) as client:
            yield World(client, app.state.runtime.store)


async def records(world: World, key: str) -> list[str | None]:
    """The session ids the records stored under ``key`` name (any scope)."""
    async with world.store.read() as db:
        rows = await db.execute(
            sa.select(idempotency_keys.c.session_id).where(idempotency_keys.c.key == key)
        )
        return [row[0] for row in rows]


def path(sid: str) -> str:
    return "/v1/sessions/" + quote(sid, safe="")


async def all_items(client: httpx.AsyncClient, sid: str) -> list[dict[str, object]]:
    r = await client.get(f"{path(sid)}/items", params={"limit": 1000})
    assert r.status_code == 200, r.text
    items: list[dict[str, object]] = r.json()["items"]
    return items


# -- a fork's record is the fork's -------------------------------------------------------------


async def test_a_deleted_forks_record_goes_with_it_and_a_retry_forks_again(world: World) -> None:
    c = world.client
    origin, fork_id = f"o-{uuid.uuid4().hex[:10]}", f"f-{uuid.uuid4().hex[:10]}"
    await create(c, origin, metadata={"who": "origin"})
    assert (await append(c, origin, [user("hello", id="o1")])).status_code == 201
    key = f"fork-{uuid.uuid4().hex}"
    body = {"new_session_id": fork_id, "metadata": {"who": "fork"}}

    first = await c.post(f"{path(origin)}/fork", json=body, headers={"Idempotency-Key": key})
    assert first.status_code == 201, first.text
    assert await records(world, key) == [fork_id], "the record is the fork's"

    assert (await c.delete(path(fork_id))).status_code == 204
    assert await records(world, key) == [], "the record outlived the fork"

    again = await c.post(f"{path(origin)}/fork", json=body, headers={"Idempotency-Key": key})
    assert again.status_code == 201, again.text
    assert again.headers.get(REPLAYED) is None, "a deleted fork's answer was replayed"
    r = await c.get(path(fork_id))
    assert r.status_code == 200, "the retry left no fork behind"
    assert r.json()["metadata"] == {"who": "fork"}
    assert [i["id"] for i in await all_items(c, fork_id)] == ["o1"]
    # the new record replays the new fork
    retry = await c.post(f"{path(origin)}/fork", json=body, headers={"Idempotency-Key": key})
    assert retry.status_code == 201 and retry.headers.get(REPLAYED) == "true"
    assert retry.json() == again.json()
    forked = [
        e for e in (await c.get(f"{path(origin)}/events")).json()["items"] if e["type"] == "forked"
    ]
    assert len(forked) == 2, "two forks were made, one per acknowledged answer"


async def test_a_fork_without_an_id_deleted_then_retried_is_a_new_fork(world: World) -> None:
    c = world.client
    origin = f"o-{uuid.uuid4().hex[:10]}"
    await create(c, origin)
    key = {"Idempotency-Key": f"fork-{uuid.uuid4().hex}"}
    first = await c.post(f"{path(origin)}/fork", json={}, headers=key)
    assert first.status_code == 201, first.text
    old_id = first.json()["id"]
    assert (await c.delete(path(old_id))).status_code == 204

    again = await c.post(f"{path(origin)}/fork", json={}, headers=key)
    assert again.status_code == 201, again.text
    assert again.headers.get(REPLAYED) is None
    new_id = again.json()["id"]
    assert new_id != old_id
    assert (await c.get(path(new_id))).status_code == 200
    assert_problem(await c.get(path(old_id)), 404)


async def test_a_fork_record_dies_with_its_origin_too(world: World) -> None:
    """The fork wrote to the origin (its ``forked`` event): once the origin is deleted, or
    deleted and re-created, the old answer is not replayed either."""
    c = world.client
    origin, fork_id = f"o-{uuid.uuid4().hex[:10]}", f"f-{uuid.uuid4().hex[:10]}"
    await create(c, origin)
    key = {"Idempotency-Key": f"fork-{uuid.uuid4().hex}"}
    body = {"new_session_id": fork_id}
    assert (await c.post(f"{path(origin)}/fork", json=body, headers=key)).status_code == 201

    assert (await c.delete(path(origin))).status_code == 204
    gone = await c.post(f"{path(origin)}/fork", json=body, headers=key)
    assert_problem(gone, 404, "session-not-found")

    await create(c, origin)
    taken = await c.post(f"{path(origin)}/fork", json=body, headers=key)
    # the fork of the first origin still holds the id: the honest answer is the conflict
    assert_problem(taken, 409)
    assert taken.headers.get(REPLAYED) is None
    # the old record is dead: the same key with another body is a new fork, not a 422
    other = await c.post(
        f"{path(origin)}/fork", json={"new_session_id": fork_id + "-2"}, headers=key
    )
    assert other.status_code == 201, other.text
    assert other.headers.get(REPLAYED) is None
    assert other.json()["id"] == fork_id + "-2"


async def test_create_and_create_on_append_records_are_the_created_sessions(world: World) -> None:
    c = world.client
    sid = f"c-{uuid.uuid4().hex[:10]}"
    key = f"create-{uuid.uuid4().hex}"
    r = await c.post("/v1/sessions", json={"id": sid}, headers={"Idempotency-Key": key})
    assert r.status_code == 201, r.text
    assert await records(world, key) == [sid]
    assert (await c.delete(path(sid))).status_code == 204
    assert await records(world, key) == []

    akey = f"append-{uuid.uuid4().hex}"
    r = await c.post(
        f"{path(sid)}/items",
        params={"create": "true"},
        json={"items": [user("hi")]},
        headers={"Idempotency-Key": akey},
    )
    assert r.status_code == 201, r.text
    assert await records(world, akey) == [sid]
    assert (await c.delete(path(sid))).status_code == 204
    assert await records(world, akey) == []


# -- the scope is the decoded session id -------------------------------------------------------


QUESTION, ESCAPED = "q?1", "q%3F1"


async def test_sessions_q_question_1_and_q_percent_3f_1_have_their_own_records(
    world: World,
) -> None:
    c = world.client
    suffix = uuid.uuid4().hex[:8]
    a, b = QUESTION + suffix, ESCAPED + suffix
    for sid in (a, b):
        await create(c, sid)
    key = {"Idempotency-Key": f"turn-{suffix}"}
    body = {"items": [user("the same turn")]}
    ra = await c.post(f"{path(a)}/items", json=body, headers=key)
    rb = await c.post(f"{path(b)}/items", json=body, headers=key)
    assert ra.status_code == rb.status_code == 201, (ra.text, rb.text)
    assert rb.headers.get(REPLAYED) is None, "the second session's append was taken for a replay"
    for sid in (a, b):
        items = await all_items(c, sid)
        assert [i["content"] for i in items] == ["the same turn"], sid
    # each retry replays its own session's answer
    for sid, answer in ((a, ra), (b, rb)):
        retry = await c.post(f"{path(sid)}/items", json=body, headers=key)
        assert retry.status_code == 201 and retry.headers.get(REPLAYED) == "true"
        assert retry.json() == answer.json()
        assert len(await all_items(c, sid)) == 1


async def test_create_on_append_and_other_routes_are_scoped_by_the_decoded_id(
    world: World,
) -> None:
    """The general write path (``?create=true``) and a FastAPI-routed POST (snapshots)."""
    c = world.client
    suffix = uuid.uuid4().hex[:8]
    a, b = QUESTION + suffix, ESCAPED + suffix
    key = {"Idempotency-Key": f"create-turn-{suffix}"}
    body = {"items": [user("first turn")]}
    for sid in (a, b):
        r = await c.post(f"{path(sid)}/items", params={"create": "true"}, json=body, headers=key)
        assert r.status_code == 201, r.text
        assert r.headers.get(REPLAYED) is None, sid
        assert [i["content"] for i in await all_items(c, sid)] == ["first turn"]
    skey = {"Idempotency-Key": f"snap-{suffix}"}
    ids = []
    for sid in (a, b):
        r = await c.post(f"{path(sid)}/snapshots", json={"label": "x"}, headers=skey)
        assert r.status_code == 201, r.text
        assert r.headers.get(REPLAYED) is None, sid
        ids.append(r.json()["id"])
        listed = (await c.get(f"{path(sid)}/snapshots")).json()["items"]
        assert [s["id"] for s in listed] == [ids[-1]]


async def test_an_id_without_a_percent_keeps_the_scope_it_had(world: World) -> None:
    """Records stored before the change still answer their retries: for an id without ``%``
    the scope is the URL path it was (``?``, ``#`` and ``\\`` escaped as Starlette does)."""
    c = world.client
    suffix = uuid.uuid4().hex[:8]
    plain, odd = f"user@example.com x{suffix}", f"a?b#c\\d%e{suffix}"
    key = f"scope-{suffix}"
    for sid in (plain, odd):
        r = await c.post(
            f"{path(sid)}/items?create=true",
            json={"items": [user("hi")]},
            headers={"Idempotency-Key": key},
        )
        assert r.status_code == 201, r.text
    async with world.store.read() as db:
        rows = await db.execute(
            sa.select(idempotency_keys.c.session_id, idempotency_keys.c.path).where(
                idempotency_keys.c.key == key
            )
        )
        paths = dict(rows.all())
    assert paths == {
        plain: f"/v1/sessions/user@example.com x{suffix}/items",
        odd: f"/v1/sessions/a%3Fb%23c%5Cd%25e{suffix}/items",
    }
