"""Sessions: create, read (ETag), list (cursor), update (If-Match), delete."""

from __future__ import annotations

import httpx

from tests.api.helpers import append, assert_problem, create, user


async def test_create_and_read(client: httpx.AsyncClient, sid: str) -> None:
    body = await create(client, sid, metadata={"owner": "ana"}, summary="so far")
    assert body["id"] == sid and body["version"] == 1
    assert body["item_count"] == 0 and body["token_count"] == 0
    assert body["metadata"] == {"owner": "ana"} and body["summary"] == "so far"
    r = await client.get(f"/v1/sessions/{sid}")
    assert r.status_code == 200
    assert r.headers["etag"] == '"1"'
    read = r.json()
    assert read.pop("storage")["events"]["rows"] == 1  # storage: only in a single read
    assert read.pop("search_index") is None  # so is the index state (semantic search off here)
    assert read == body


async def test_generated_id(client: httpx.AsyncClient) -> None:
    r = await client.post("/v1/sessions", json={})
    assert r.status_code == 201
    assert r.json()["id"].startswith("ses_")


async def test_create_twice_is_conflict(client: httpx.AsyncClient, sid: str) -> None:
    await create(client, sid)
    assert_problem(await client.post("/v1/sessions", json={"id": sid}), 409, "session-exists")


async def test_invalid_ids_are_refused(client: httpx.AsyncClient) -> None:
    # The rule itself is tested in tests/api/test_session_ids.py and tests/domain.
    for bad in ["../etc", "a/b", "", ".", "..", "x" * 257, "nul\x00", "new\nline", "zw\u200bsp"]:
        r = await client.post("/v1/sessions", json={"id": bad})
        assert_problem(r, 422)


async def test_unknown_session_is_404_problem(client: httpx.AsyncClient, sid: str) -> None:
    assert_problem(await client.get(f"/v1/sessions/{sid}"), 404, "session-not-found")
    assert_problem(await client.get(f"/v1/sessions/{sid}/items"), 404, "session-not-found")
    assert_problem(await append(client, sid, [user("hi")]), 404, "session-not-found")


async def test_list_is_cursor_paginated(client: httpx.AsyncClient, sid: str) -> None:
    ids = [f"{sid}-{i:02d}" for i in range(7)]
    for i in ids:
        await create(client, i)
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        params = {"limit": 3, "prefix": sid}
        if cursor:
            params["cursor"] = cursor
        r = await client.get("/v1/sessions", params=params)
        assert r.status_code == 200
        page = r.json()
        assert len(page["items"]) <= 3
        seen += [s["id"] for s in page["items"]]
        pages += 1
        cursor = page["next_cursor"]
        if not cursor:
            break
    assert seen == ids and pages == 3
    assert_problem(await client.get("/v1/sessions", params={"cursor": "a/b"}), 422)
    assert_problem(await client.get("/v1/sessions", params={"limit": 0}), 422, "validation-error")


async def test_patch_with_if_match(client: httpx.AsyncClient, sid: str) -> None:
    await create(client, sid, metadata={"a": 1})
    r = await client.patch(f"/v1/sessions/{sid}", json={"metadata": {"b": 2}}, headers={"If-Match": '"1"'})
    assert r.status_code == 200, r.text
    assert r.json()["metadata"] == {"b": 2} and r.json()["version"] == 2
    assert r.headers["etag"] == '"2"'
    stale = await client.patch(f"/v1/sessions/{sid}", json={"summary": "x"}, headers={"If-Match": '"1"'})
    assert_problem(stale, 412, "version-mismatch")
    assert (await client.get(f"/v1/sessions/{sid}")).json()["summary"] is None
    # only the fields sent change
    r = await client.patch(f"/v1/sessions/{sid}", json={"summary": "done"})
    assert r.json()["metadata"] == {"b": 2} and r.json()["summary"] == "done"
    assert_problem(await client.patch(f"/v1/sessions/{sid}", json={}, headers={"If-Match": "seven"}), 422)


async def test_config_is_checked(client: httpx.AsyncClient, sid: str) -> None:
    r = await client.post("/v1/sessions", json={"id": sid, "config": {"contxt": {}}})
    assert_problem(r, 422, "validation-error")  # the request schema declares the config keys
    assert_problem(await client.get(f"/v1/sessions/{sid}"), 404)


async def test_delete_removes_everything(client: httpx.AsyncClient, sid: str) -> None:
    await create(client, sid)
    assert (await append(client, sid, [user("hello")])).status_code == 201
    assert_problem(await client.delete(f"/v1/sessions/{sid}", headers={"If-Match": '"1"'}), 412)
    assert (await client.delete(f"/v1/sessions/{sid}")).status_code == 204
    assert_problem(await client.get(f"/v1/sessions/{sid}"), 404)
    assert_problem(await client.delete(f"/v1/sessions/{sid}"), 404)
    # the id is free again, and nothing of the old session shows through
    await create(client, sid)
    assert (await client.get(f"/v1/sessions/{sid}/items")).json()["items"] == []


async def test_metadata_size_limit(client: httpx.AsyncClient, sid: str) -> None:
    r = await client.post("/v1/sessions", json={"id": sid, "metadata": {"x": "y" * 5000}})
    assert_problem(r, 413, "limit-exceeded")
    assert_problem(await client.get(f"/v1/sessions/{sid}"), 404)


async def test_request_id_is_echoed_or_generated(client: httpx.AsyncClient) -> None:
    r = await client.get("/healthz", headers={"X-Request-ID": "abc-123"})
    assert r.headers["x-request-id"] == "abc-123"
    r = await client.get("/healthz")
    assert len(r.headers["x-request-id"]) == 32


async def test_unknown_route_and_method_are_problems(client: httpx.AsyncClient) -> None:
    assert_problem(await client.get("/v1/nothing"), 404)
    assert_problem(await client.put("/v1/sessions"), 405)


async def test_readyz(client: httpx.AsyncClient, backend: str) -> None:
    r = await client.get("/readyz")
    assert r.status_code == 200
    assert r.json()["database"] == "ok"
    assert r.json()["locks"] == ("in-process" if backend == "sqlite" else "ok")
