"""The first append of a session with ``?create=true`` (what the SDK sessions send on every
call): the same answer, events and version on both backends, and on Postgres no transaction
(autocommit statements: the update that finds no session, then the upsert that creates it); an idempotent retry replays it, concurrent first appends to one new
id all land with one ``created`` event."""

from __future__ import annotations

import asyncio

import httpx
import sqlalchemy as sa

from tests.api.helpers import all_items, user

REPLAYED = "idempotent-replayed"


def _store(client: httpx.AsyncClient):  # type: ignore[no-untyped-def]
    return client._transport.app.state.runtime.store  # type: ignore[attr-defined]


async def test_a_first_append_creates_the_session_without_a_transaction(
    client: httpx.AsyncClient, sid: str
) -> None:
    store = _store(client)
    # (the pool's first connections run the dialect's set-up in a transaction: not counted)
    warm = await client.post(f"/v1/sessions/{sid}-warm/items?create=true", json={"items": [user("w")]})
    assert warm.status_code == 201
    begun: list[object] = []

    def began(conn: object) -> None:
        begun.append(conn)

    sa.event.listen(store.engine.sync_engine, "begin", began)
    try:
        r = await client.post(
            f"/v1/sessions/{sid}/items?create=true",
            json={"items": [user("a"), user("b", id="named")]},
        )
    finally:
        sa.event.remove(store.engine.sync_engine, "begin", began)
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["version"] == 1
    assert [(i["seq"], i["content"]) for i in body["items"]] == [(1, "a"), (2, "b")]
    assert body["items"][1]["id"] == "named"
    assert (len(begun) > 0) if store.is_sqlite else (begun == [])  # SQLite: its transaction
    session = (await client.get(f"/v1/sessions/{sid}")).json()
    assert (session["version"], session["item_count"]) == (1, 2)
    assert session["metadata"] == {} and session["config"] == {} and session["summary"] is None
    assert session["created_at"] == body["items"][0]["created_at"]
    events = (await client.get(f"/v1/sessions/{sid}/events")).json()["items"]
    assert [(e["seq"], e["type"], e["version"]) for e in events] == [
        (1, "created", 1),
        (2, "appended", 1),
    ]
    assert events[1]["data"] == {"count": 2, "first_seq": 1, "last_seq": 2}
    # the items as stored are the items answered
    assert [(i["id"], i["seq"]) for i in await all_items(client, sid)] == [
        (i["id"], i["seq"]) for i in body["items"]
    ]


async def test_a_retried_first_append_replays_its_answer(
    client: httpx.AsyncClient, sid: str
) -> None:
    key = {"Idempotency-Key": f"first-{sid}"}
    body = {"items": [user("only once")]}
    first = await client.post(f"/v1/sessions/{sid}/items?create=true", json=body, headers=key)
    assert first.status_code == 201 and first.headers.get(REPLAYED) is None
    retry = await client.post(f"/v1/sessions/{sid}/items?create=true", json=body, headers=key)
    assert retry.status_code == 201 and retry.headers.get(REPLAYED) == "true"
    assert retry.json() == first.json()
    assert [i["content"] for i in await all_items(client, sid)] == ["only once"]
    events = (await client.get(f"/v1/sessions/{sid}/events")).json()["items"]
    assert [e["type"] for e in events] == ["created", "appended"]
    # the same key with another body is refused, and stores nothing
    other = await client.post(
        f"/v1/sessions/{sid}/items?create=true", json={"items": [user("x")]}, headers=key
    )
    assert other.status_code == 422
    assert len(await all_items(client, sid)) == 1


async def test_concurrent_first_appends_all_land(client: httpx.AsyncClient, sid: str) -> None:
    n = 12
    answers = await asyncio.gather(
        *(
            client.post(f"/v1/sessions/{sid}/items?create=true", json={"items": [user(f"m{k}")]})
            for k in range(n)
        )
    )
    assert [r.status_code for r in answers] == [201] * n, [r.text for r in answers]
    assert sorted(r.json()["version"] for r in answers) == list(range(1, n + 1))
    items = await all_items(client, sid)
    assert [i["seq"] for i in items] == list(range(1, n + 1))
    assert sorted(i["content"] for i in items) == sorted(f"m{k}" for k in range(n))
    events = (await client.get(f"/v1/sessions/{sid}/events")).json()["items"]
    assert [e["type"] for e in events] == ["created"] + ["appended"] * n
