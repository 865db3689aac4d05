"""Appending and reading working memory."""

from __future__ import annotations

import asyncio

import httpx
import sqlalchemy as sa

from app.domain.tokens import get_encoding
from tests.api.helpers import all_items, append, assert_problem, assistant, create, user


async def test_append_assigns_seq_tokens_chars(client: httpx.AsyncClient, sid: str) -> None:
    await create(client, sid)
    text = "Please read the file src/app.py and tell me what it does."
    r = await append(
        client,
        sid,
        [
            user(text, id="u1", metadata={"turn": 1}),
            {"type": "function_call", "call_id": "c1", "name": "read_file", "arguments": '{"path": "src/app.py"}'},
            {"type": "function_call_output", "call_id": "c1", "output": "print('hi')"},
            {"type": "reasoning", "summary": ["thinking"], "content": "the file prints"},
            assistant("It prints hi.", pinned=True),
        ],
    )
    assert r.status_code == 201, r.text
    assert r.headers["etag"] == '"2"'
    body = r.json()
    assert body["version"] == 2
    items = body["items"]
    assert [i["seq"] for i in items] == [1, 2, 3, 4, 5]
    assert items[0]["id"] == "u1" and items[0]["metadata"] == {"turn": 1}
    assert all(i["id"] for i in items) and len({i["id"] for i in items}) == 5
    enc = get_encoding("o200k_base")
    assert items[0]["tokens"] == len(enc.encode(text)) and items[0]["chars"] == len(text)
    assert items[1]["tokens"] == len(enc.encode("read_file")) + len(enc.encode('{"path": "src/app.py"}'))
    assert items[4]["pinned"] is True and items[0]["pinned"] is False
    session = (await client.get(f"/v1/sessions/{sid}")).json()
    assert session["item_count"] == 5 and session["version"] == 2 and session["last_seq"] == 5
    assert session["token_count"] == sum(i["tokens"] for i in items)
    assert session["char_count"] == sum(i["chars"] for i in items)
    assert await all_items(client, sid) == items


async def test_images_and_parts(client: httpx.AsyncClient, sid: str) -> None:
    await create(client, sid)
    content = [
        {"type": "text", "text": "what is this?"},
        {"type": "image", "url": "https://example.com/cat.png", "detail": "low"},
        {"type": "image", "url": "data:image/png;base64,iVBORw0KGgo="},
    ]
    r = await append(client, sid, [user("x") | {"content": content}])
    assert r.status_code == 201, r.text
    stored = r.json()["items"][0]
    assert stored["content"] == content[:2] + [content[2]]
    assert stored["chars"] == len("what is this?")
    assert stored["tokens"] > 85 + 765


async def test_a_batch_with_one_invalid_item_stores_nothing(client: httpx.AsyncClient, sid: str) -> None:
    await create(client, sid)
    r = await append(
        client, sid, [user("ok"), {"type": "message", "role": "wizard", "content": "x"}, user("ok too")]
    )
    body = assert_problem(r, 422)
    assert any(e["loc"][:2] == ["items", 1] for e in body["errors"]), body
    for bad in ([user("a"), {"type": ""}, [user("a"), {"role": "user"}]], [user("a"), "string"], [user("a"), {"type": "function_call", "call_id": 5, "name": "f"}]):
        assert_problem(await append(client, sid, bad), 422)
    session = (await client.get(f"/v1/sessions/{sid}")).json()
    assert session["item_count"] == 0 and session["version"] == 1 and session["last_seq"] == 0
    assert await all_items(client, sid) == []


async def test_item_ids_unique_in_working_memory(client: httpx.AsyncClient, sid: str) -> None:
    await create(client, sid)
    assert (await append(client, sid, [user("a", id="m1")])).status_code == 201
    assert_problem(await append(client, sid, [user("b", id="m2"), user("c", id="m1")]), 409, "duplicate-item-id")
    # An id repeated within one batch is the same conflict (409), whichever item holds it first.
    assert_problem(await append(client, sid, [user("b", id="m3"), user("c", id="m3")]), 409, "duplicate-item-id")
    assert_problem(await append(client, sid, [user("b", id="bad/id")]), 422)
    items = await all_items(client, sid)
    assert [i["id"] for i in items] == ["m1"]
    # the failed batches consumed no seq
    assert (await append(client, sid, [user("d")])).json()["items"][0]["seq"] == 2


async def test_pagination_by_seq_and_last(client: httpx.AsyncClient, sid: str) -> None:
    await create(client, sid)
    for start in range(0, 25, 5):
        assert (await append(client, sid, [user(f"m{i}") for i in range(start, start + 5)])).status_code == 201
    r = await client.get(f"/v1/sessions/{sid}/items", params={"limit": 10})
    page = r.json()
    assert [i["seq"] for i in page["items"]] == list(range(1, 11)) and page["next_cursor"] == 10
    r = await client.get(f"/v1/sessions/{sid}/items", params={"after_seq": 20, "limit": 10})
    assert [i["seq"] for i in r.json()["items"]] == [21, 22, 23, 24, 25] and r.json()["next_cursor"] is None
    r = await client.get(f"/v1/sessions/{sid}/items", params={"last": 3})
    assert [i["content"] for i in r.json()["items"]] == ["m22", "m23", "m24"]
    for bad in ({"limit": 0}, {"limit": 1001}, {"after_seq": -1}, {"last": 0}, {"limit": "x"}):
        assert_problem(await client.get(f"/v1/sessions/{sid}/items", params=bad), 422, "validation-error")


async def test_get_one_item(client: httpx.AsyncClient, sid: str) -> None:
    await create(client, sid)
    await append(client, sid, [user("hello", id="greeting")])
    r = await client.get(f"/v1/sessions/{sid}/items/greeting")
    assert r.status_code == 200 and r.json()["content"] == "hello"
    assert_problem(await client.get(f"/v1/sessions/{sid}/items/missing"), 404, "item-not-found")


async def test_append_with_create(client: httpx.AsyncClient, sid: str) -> None:
    assert_problem(await append(client, sid, [user("a")]), 404)
    r = await client.post(f"/v1/sessions/{sid}/items?create=true", json={"items": [user("a")]})
    assert r.status_code == 201 and r.json()["version"] == 1
    r = await client.post(f"/v1/sessions/{sid}/items?create=true", json={"items": [user("b")]})
    assert r.status_code == 201 and r.json()["version"] == 2
    assert [i["content"] for i in await all_items(client, sid)] == ["a", "b"]
    bad = await client.post("/v1/sessions/no..good%2F/items?create=true", json={"items": [user("a")]})
    assert bad.status_code in (404, 422)


async def test_create_true_on_an_existing_session_is_the_one_statement_append(
    client: httpx.AsyncClient, sid: str
) -> None:
    """What the SDK sessions send on every call costs a plain append once the session exists:
    on Postgres no transaction (the one autocommit statement), on SQLite its one transaction."""
    store = client._transport.app.state.runtime.store  # type: ignore[attr-defined]
    first = await client.post(f"/v1/sessions/{sid}/items?create=true", json={"items": [user("a")]})
    assert first.status_code == 201
    begun: list[object] = []

    def began(conn: object) -> None:
        begun.append(conn)

    sa.event.listen(store.engine.sync_engine, "begin", began)
    try:
        for n in range(3):
            r = await client.post(
                f"/v1/sessions/{sid}/items?create=true", json={"items": [user(f"b{n}")]}
            )
            assert r.status_code == 201 and r.json()["version"] == 2 + n
    finally:
        sa.event.remove(store.engine.sync_engine, "begin", began)
    assert len(begun) == (3 if store.is_sqlite else 0)
    events = (await client.get(f"/v1/sessions/{sid}/events")).json()["items"]
    assert [e["type"] for e in events] == ["created", "appended", "appended", "appended", "appended"]


async def test_if_match_on_append(client: httpx.AsyncClient, sid: str) -> None:
    await create(client, sid)
    r = await append(client, sid, [user("a")], headers={"If-Match": '"1"'})
    assert r.status_code == 201
    assert_problem(await append(client, sid, [user("b")], headers={"If-Match": '"1"'}), 412)
    assert (await append(client, sid, [user("b")], headers={"If-Match": 'W/"2"'})).status_code == 201
    assert len(await all_items(client, sid)) == 2


async def test_idempotency_key(client: httpx.AsyncClient, sid: str) -> None:
    await create(client, sid)
    headers = {"Idempotency-Key": f"k-{sid}"}
    first = await append(client, sid, [user("once")], headers=headers)
    again = await append(client, sid, [user("once")], headers=headers)
    assert first.status_code == again.status_code == 201
    assert again.json() == first.json()
    assert again.headers.get("idempotent-replayed") == "true"
    other = await append(client, sid, [user("different")], headers=headers)
    assert_problem(other, 422, "idempotency-key-reused")
    assert [i["content"] for i in await all_items(client, sid)] == ["once"]
    # the key is scoped to the path: the same key on another session is independent
    sid2 = sid + "-b"
    await create(client, sid2)
    assert (await append(client, sid2, [user("once")], headers=headers)).headers.get("idempotent-replayed") is None
    # also on session creation
    h = {"Idempotency-Key": f"c-{sid}"}
    c1 = await client.post("/v1/sessions", json={"id": sid + "-c"}, headers=h)
    c2 = await client.post("/v1/sessions", json={"id": sid + "-c"}, headers=h)
    assert c1.status_code == c2.status_code == 201 and c1.json() == c2.json()
    assert_problem(await append(client, sid, [user("x")], headers={"Idempotency-Key": "has space"}), 422)


async def test_concurrent_appends_in_process(client: httpx.AsyncClient, sid: str) -> None:
    await create(client, sid)

    async def writer(w: int) -> None:
        for i in range(5):
            r = await append(client, sid, [user(f"{w}-{i}")])
            assert r.status_code == 201, r.text

    await asyncio.gather(*(writer(w) for w in range(10)))
    items = await all_items(client, sid)
    assert [i["seq"] for i in items] == list(range(1, 51))
    assert sorted(i["content"] for i in items) == sorted(f"{w}-{i}" for w in range(10) for i in range(5))


async def test_limits(client: httpx.AsyncClient, sid: str) -> None:
    await create(client, sid)
    assert_problem(await append(client, sid, [user(str(i)) for i in range(51)]), 413, "limit-exceeded")
    assert_problem(await append(client, sid, [user("x" * 70_000)]), 413, "limit-exceeded")
    assert_problem(await append(client, sid, [user("x", metadata={"k": "v" * 2000})]), 413)
    assert_problem(await append(client, sid, []), 422)
    big = b'{"items": [' + b'{"type":"message","role":"user","content":"' + b"a" * 600_000 + b'"}]}'
    r = await client.post(f"/v1/sessions/{sid}/items", content=big, headers={"content-type": "application/json"})
    assert_problem(r, 413, "body-too-large")

    async def chunks():  # no Content-Length: the limit still holds while streaming
        for _ in range(20):
            yield b"a" * 50_000

    r = await client.post(f"/v1/sessions/{sid}/items", content=chunks(), headers={"content-type": "application/json"})
    assert_problem(r, 413, "body-too-large")
    assert (await client.get(f"/v1/sessions/{sid}")).json()["version"] == 1


async def test_malformed_bodies(client: httpx.AsyncClient, sid: str) -> None:
    await create(client, sid)
    url = f"/v1/sessions/{sid}/items"
    for raw in [b"{", b"[]", b'{"items": 3}', b'{"items": [], "extra": 1}', b"\xff\xfe", b'{"format": "xml", "items": []}']:
        r = await client.post(url, content=raw, headers={"content-type": "application/json"})
        assert_problem(r, 422)
    assert (await client.get(f"/v1/sessions/{sid}")).json()["version"] == 1
