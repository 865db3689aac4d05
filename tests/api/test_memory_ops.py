"""Pop (remove and return the newest item) and clear (working memory and summary)."""

from __future__ import annotations

import httpx

from tests.api.helpers import all_items, append, assert_problem, assistant, create, user


async def _history(client: httpx.AsyncClient, sid: str) -> list[dict]:
    r = await client.get(f"/v1/sessions/{sid}/history", params={"limit": 1000})
    assert r.status_code == 200, r.text
    return r.json()["items"]


async def test_pop_returns_the_newest_item_and_archives_it(client: httpx.AsyncClient, sid: str) -> None:
    await create(client, sid)
    stored = (await append(client, sid, [user("one", id="a"), assistant("two", id="b", metadata={"k": 1})])).json()["items"]
    before = (await client.get(f"/v1/sessions/{sid}")).json()

    r = await client.post(f"/v1/sessions/{sid}/items/pop")
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["item"] == stored[1]
    assert body["version"] == before["version"] + 1 and r.headers["etag"] == f'"{body["version"]}"'
    session = (await client.get(f"/v1/sessions/{sid}")).json()
    assert session["item_count"] == 1
    assert session["token_count"] == before["token_count"] - stored[1]["tokens"]
    assert session["char_count"] == before["char_count"] - stored[1]["chars"]
    assert await all_items(client, sid) == [stored[0]]
    assert_problem(await client.get(f"/v1/sessions/{sid}/items/b"), 404, "item-not-found")
    history = await _history(client, sid)
    assert [(h["id"], h["archived"], h["archived_reason"]) for h in history] == [
        ("a", False, None),
        ("b", True, "popped"),
    ]

    # the popped id is free again; its seq is not
    again = (await append(client, sid, [assistant("two again", id="b")])).json()["items"]
    assert again[0]["seq"] == 3
    assert (await client.post(f"/v1/sessions/{sid}/items/pop")).json()["item"]["seq"] == 3
    assert (await client.post(f"/v1/sessions/{sid}/items/pop")).json()["item"]["id"] == "a"
    empty = (await client.get(f"/v1/sessions/{sid}")).json()
    assert empty["item_count"] == 0 and empty["token_count"] == 0 and empty["char_count"] == 0

    problem = assert_problem(await client.post(f"/v1/sessions/{sid}/items/pop"), 409, "empty-working-memory")
    assert "pop" in problem["detail"]
    assert (await client.get(f"/v1/sessions/{sid}")).json()["version"] == empty["version"]


async def test_pop_errors_change_nothing(client: httpx.AsyncClient, sid: str) -> None:
    assert_problem(await client.post(f"/v1/sessions/{sid}/items/pop"), 404, "session-not-found")
    await create(client, sid)
    await append(client, sid, [user("keep")])
    version = (await client.get(f"/v1/sessions/{sid}")).json()["version"]
    assert_problem(await client.post(f"/v1/sessions/{sid}/items/pop", headers={"If-Match": '"1"'}), 412)
    assert_problem(await client.post(f"/v1/sessions/{sid}/items/pop", headers={"If-Match": "junk"}), 422)
    ok = await client.post(f"/v1/sessions/{sid}/items/pop", headers={"If-Match": f'"{version}"'})
    assert ok.status_code == 200 and ok.json()["item"]["content"] == "keep"


async def test_pop_is_idempotent_with_a_key(client: httpx.AsyncClient, sid: str) -> None:
    await create(client, sid)
    await append(client, sid, [user("one", id="a"), user("two", id="b")])
    headers = {"Idempotency-Key": f"pop-{sid}"}
    first = await client.post(f"/v1/sessions/{sid}/items/pop", headers=headers)
    second = await client.post(f"/v1/sessions/{sid}/items/pop", headers=headers)
    assert first.status_code == second.status_code == 200
    assert first.json() == second.json() and first.json()["item"]["id"] == "b"
    assert [i["id"] for i in await all_items(client, sid)] == ["a"]  # popped once, not twice


async def test_get_items_pop_is_not_the_pop_route(client: httpx.AsyncClient, sid: str) -> None:
    """``pop`` is a valid item id: GET reads that item; only POST pops."""
    await create(client, sid)
    await append(client, sid, [user("named pop", id="pop"), user("newest", id="z")])
    r = await client.get(f"/v1/sessions/{sid}/items/pop")
    assert r.status_code == 200 and r.json()["content"] == "named pop"
    assert (await client.post(f"/v1/sessions/{sid}/items/pop")).json()["item"]["id"] == "z"


async def test_clear_empties_memory_and_summary_keeps_history(client: httpx.AsyncClient, sid: str) -> None:
    await create(client, sid, summary="an old summary", config={"context": {"max_items": 3}})
    await append(client, sid, [user("one"), assistant("two"), user("three")])
    before = (await client.get(f"/v1/sessions/{sid}")).json()

    r = await client.delete(f"/v1/sessions/{sid}/items")
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["cleared_items"] == 3
    session = body["session"]
    assert session["version"] == before["version"] + 1 and r.headers["etag"] == f'"{session["version"]}"'
    assert session["summary"] is None and session["item_count"] == 0
    assert session["token_count"] == 0 and session["char_count"] == 0
    assert session["config"] == {"context": {"max_items": 3}} and session["last_seq"] == 3
    assert await all_items(client, sid) == []
    history = await _history(client, sid)
    assert [(h["seq"], h["archived_reason"]) for h in history] == [(1, "cleared"), (2, "cleared"), (3, "cleared")]

    appended = (await append(client, sid, [user("fresh start")])).json()["items"]
    assert appended[0]["seq"] == 4
    # clearing an empty memory is fine and still logged
    assert (await client.delete(f"/v1/sessions/{sid}/items")).json()["cleared_items"] == 1
    assert (await client.delete(f"/v1/sessions/{sid}/items")).json()["cleared_items"] == 0
    types = [e["type"] for e in (await client.get(f"/v1/sessions/{sid}/events")).json()["items"]]
    assert types == ["created", "appended", "cleared", "appended", "cleared", "cleared"]


async def test_clear_errors_change_nothing(client: httpx.AsyncClient, sid: str) -> None:
    assert_problem(await client.delete(f"/v1/sessions/{sid}/items"), 404, "session-not-found")
    await create(client, sid, summary="kept")
    await append(client, sid, [user("kept")])
    before = (await client.get(f"/v1/sessions/{sid}")).json()
    assert_problem(await client.delete(f"/v1/sessions/{sid}/items", headers={"If-Match": '"1"'}), 412)
    assert (await client.get(f"/v1/sessions/{sid}")).json() == before
    assert len(await all_items(client, sid)) == 1
