"""``GET /v1/sessions?order=updated`` (issue 34 item 11): the most recently written sessions
first, keyset-paged with ``cursor``; on both backends."""

from __future__ import annotations

import uuid

import httpx

from tests.api.helpers import assert_problem, user


async def walk(client: httpx.AsyncClient, prefix: str, limit: int) -> list[str]:
    seen: list[str] = []
    cursor = None
    for _ in range(50):
        params = {"order": "updated", "prefix": prefix, "limit": limit}
        r = await client.get("/v1/sessions", params=params | ({"cursor": cursor} if cursor else {}))
        assert r.status_code == 200, r.text
        seen += [s["id"] for s in r.json()["items"]]
        cursor = r.json()["next_cursor"]
        if cursor is None:
            return seen
    raise AssertionError("never ended")


async def test_newest_first_keyset_paged(client: httpx.AsyncClient) -> None:
    prefix = f"upd-{uuid.uuid4().hex[:8]}-"
    ids = [f"{prefix}{n}" for n in range(7)]
    for sid in ids:
        assert (await client.post("/v1/sessions", json={"id": sid})).status_code == 201
    for sid in (ids[2], ids[5], ids[0]):  # written again, in this order
        r = await client.post(f"/v1/sessions/{sid}/items", json={"items": [user("again")]})
        assert r.status_code == 201, r.text
    listed = (
        await client.get("/v1/sessions", params={"order": "updated", "prefix": prefix})
    ).json()
    stamps = [(s["updated_at"], s["id"]) for s in listed["items"]]
    assert stamps == sorted(stamps, reverse=True)  # newest first, ties by id descending
    newest = [s["id"] for s in listed["items"]]
    assert newest[:3] == [ids[0], ids[5], ids[2]]
    assert sorted(newest) == sorted(ids) and listed["next_cursor"] is None
    for limit in (1, 2, 3):
        assert await walk(client, prefix, limit) == newest
    # the default order is still by id
    by_id = (await client.get("/v1/sessions", params={"prefix": prefix})).json()
    assert [s["id"] for s in by_id["items"]] == sorted(ids)
    # a write moves a session to the front
    r = await client.post(f"/v1/sessions/{ids[3]}/items", json={"items": [user("latest")]})
    assert r.status_code == 201
    assert (await walk(client, prefix, 2))[0] == ids[3]


async def test_every_cursor_the_spec_admits_names_a_position(client: httpx.AsyncClient) -> None:
    """As a search cursor: any ``<micros>.<hex>`` is a position in the newest-first order, and
    any other string the pattern admits (a session id: an order=id cursor) names the start."""
    prefix = f"upd-{uuid.uuid4().hex[:8]}-"
    for n in range(3):
        assert (await client.post("/v1/sessions", json={"id": f"{prefix}{n}"})).status_code == 201
    params = {"order": "updated", "prefix": prefix}
    first = (await client.get("/v1/sessions", params=params)).json()["items"]
    by_id = (await client.get("/v1/sessions", params={"prefix": prefix, "limit": 1})).json()
    for cursor in (by_id["next_cursor"], "not-a-cursor", "1.zz"):
        r = await client.get("/v1/sessions", params=params | {"cursor": cursor})
        assert r.status_code == 200 and r.json()["items"] == first, cursor
    r = await client.get("/v1/sessions", params=params | {"cursor": "0.00"})  # before them all
    assert r.status_code == 200 and r.json()["items"] == []
    r = await client.get("/v1/sessions", params=params | {"cursor": "9" * 18 + ".41"})
    assert r.status_code == 200 and r.json()["items"] == first  # after them all
    # an order=updated cursor passed to order=id is still a position (a string to compare)
    updated = (await client.get("/v1/sessions", params=params | {"limit": 1})).json()
    r = await client.get(
        "/v1/sessions", params={"prefix": prefix, "cursor": updated["next_cursor"]}
    )
    assert r.status_code == 200
    for bad in ("a/b", "x" * 1025):
        assert_problem(await client.get("/v1/sessions", params=params | {"cursor": bad}), 422)
    r = await client.get("/v1/sessions", params={"order": "newest"})
    assert_problem(r, 422, "validation-error")
