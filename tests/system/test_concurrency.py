"""No lost or doubled write under concurrency, through real HTTP, with Redis locking."""

from __future__ import annotations

import asyncio
import uuid

import httpx

from tests.support.services import ServerProcess

WRITERS = 50
APPENDS = 20


async def _read_all(client: httpx.AsyncClient, sid: str) -> list[dict]:
    out: list[dict] = []
    after = None
    while True:
        params = {"limit": 1000} | ({"after_seq": after} if after is not None else {})
        page = (await client.get(f"/v1/sessions/{sid}/items", params=params)).json()
        out += page["items"]
        after = page["next_cursor"]
        if after is None:
            return out


async def _post_with_retry(client: httpx.AsyncClient, url: str, body: dict, headers: dict) -> httpx.Response:
    """What a careful client does: retry 503s and network errors with the same key."""
    for _ in range(200):
        try:
            r = await client.post(url, json=body, headers=headers)
        except httpx.TransportError:
            await asyncio.sleep(0.05)
            continue
        if r.status_code == 503:
            await asyncio.sleep(float(r.headers.get("retry-after", "1")) / 10)
            continue
        return r
    raise AssertionError("gave up")


async def test_50_writers_x_20_appends_lose_nothing(pg_server: ServerProcess) -> None:
    sid = f"race-{uuid.uuid4().hex[:8]}"
    limits = httpx.Limits(max_connections=WRITERS)
    async with httpx.AsyncClient(base_url=pg_server.url, timeout=60, limits=limits) as client:
        assert (await client.post("/v1/sessions", json={"id": sid})).status_code == 201

        async def writer(w: int) -> list[int]:
            seqs = []
            for i in range(APPENDS):
                body = {"items": [{"type": "message", "role": "user", "content": f"w{w}-{i}"}]}
                r = await _post_with_retry(client, f"/v1/sessions/{sid}/items", body, {})
                assert r.status_code == 201, r.text
                seqs.append(r.json()["items"][0]["seq"])
            return seqs

        acknowledged = await asyncio.gather(*(writer(w) for w in range(WRITERS)))
        items = await _read_all(client, sid)
        session = (await client.get(f"/v1/sessions/{sid}")).json()

    total = WRITERS * APPENDS
    assert [i["seq"] for i in items] == list(range(1, total + 1))
    contents = [i["content"] for i in items]
    assert sorted(contents) == sorted(f"w{w}-{i}" for w in range(WRITERS) for i in range(APPENDS))
    assert sorted(s for seqs in acknowledged for s in seqs) == list(range(1, total + 1))
    # each writer's own appends keep their order
    for w in range(WRITERS):
        mine = [c for c in contents if c.startswith(f"w{w}-")]
        assert mine == [f"w{w}-{i}" for i in range(APPENDS)]
    assert session["item_count"] == total and session["last_seq"] == total


async def test_retries_with_idempotency_keys_store_each_append_once(pg_server: ServerProcess) -> None:
    """Every append is sent, then re-sent as a client would after a lost response, with the same
    key, from concurrent writers: each is stored exactly once and every replay is identical."""
    sid = f"retry-{uuid.uuid4().hex[:8]}"
    async with httpx.AsyncClient(base_url=pg_server.url, timeout=60,
                                 limits=httpx.Limits(max_connections=WRITERS)) as client:
        assert (await client.post("/v1/sessions", json={"id": sid})).status_code == 201

        async def writer(w: int) -> None:
            for i in range(APPENDS):
                body = {"items": [{"type": "message", "role": "user", "content": f"w{w}-{i}"}]}
                headers = {"Idempotency-Key": f"{sid}-{w}-{i}"}
                url = f"/v1/sessions/{sid}/items"
                first, second = await asyncio.gather(
                    _post_with_retry(client, url, body, headers),
                    _post_with_retry(client, url, body, headers),
                )
                assert first.status_code == second.status_code == 201
                assert first.json() == second.json()
                third = await _post_with_retry(client, url, body, headers)
                assert third.json() == first.json()
                assert third.headers.get("idempotent-replayed") == "true"

        await asyncio.gather(*(writer(w) for w in range(WRITERS)))
        items = await _read_all(client, sid)

    total = WRITERS * APPENDS
    assert [i["seq"] for i in items] == list(range(1, total + 1))
    assert len({i["content"] for i in items}) == total
