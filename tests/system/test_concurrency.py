"""No lost or doubled write under concurrency, through real HTTP against a server on Postgres:
writes to one session are ordered by its row (each append one statement that locks it)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import httpx
import psycopg

from tests.support.services import REDIS_URL, ServerProcess

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


def test_every_write_waits_for_the_session_row_and_gives_up_cleanly(
    pg_database: str, tmp_path: Path
) -> None:
    """Every kind of write locks the session row first: while another transaction holds it,
    each waits ``LOCK__WAIT_SECONDS`` and answers 503 ``lock-timeout`` with Retry-After,
    having changed nothing; reads do not wait. Once the row is free, each write goes through."""
    server = ServerProcess(
        env={
            "DATABASE_URL": pg_database,
            "REDIS_URL": REDIS_URL,
            "AUTO_MIGRATE": "false",
            "LOG_LEVEL": "warning",
            "LOCK__WAIT_SECONDS": "0.3",
        },
        log_path=tmp_path / "server.log",
    )
    server.start()
    sid = f"row-{uuid.uuid4().hex[:8]}"
    holder = psycopg.connect(pg_database.replace("postgresql+psycopg://", "postgresql://"))
    try:
        with httpx.Client(base_url=server.url, timeout=30) as client:
            assert client.post("/v1/sessions", json={"id": sid}).status_code == 201
            seed = [{"type": "message", "role": "user", "content": f"m{i}"} for i in range(4)]
            assert client.post(f"/v1/sessions/{sid}/items", json={"items": seed}).status_code == 201
            snap = client.post(f"/v1/sessions/{sid}/snapshots", json={}).json()["id"]
            before = client.get(f"/v1/sessions/{sid}").json()
            events_before = client.get(f"/v1/sessions/{sid}/events").json()["items"]
            one = {"items": [{"type": "message", "role": "user", "content": "x"}]}
            writes: dict[str, Callable[[], httpx.Response]] = {
                "append": lambda: client.post(f"/v1/sessions/{sid}/items", json=one),
                "append with a key": lambda: client.post(
                    f"/v1/sessions/{sid}/items", json=one, headers={"Idempotency-Key": sid}
                ),
                "append ?create=true": lambda: client.post(
                    f"/v1/sessions/{sid}/items?create=true", json=one
                ),
                "create (exists)": lambda: client.post("/v1/sessions", json={"id": sid}),
                "patch": lambda: client.patch(f"/v1/sessions/{sid}", json={"summary": "s"}),
                "pop": lambda: client.post(f"/v1/sessions/{sid}/items/pop"),
                "clear": lambda: client.delete(f"/v1/sessions/{sid}/items"),
                "snapshot": lambda: client.post(f"/v1/sessions/{sid}/snapshots", json={}),
                "restore": lambda: client.post(
                    f"/v1/sessions/{sid}/restore", json={"snapshot_id": snap}
                ),
                "compact": lambda: client.post(
                    f"/v1/sessions/{sid}/compact",
                    json={"policy": "structured", "keep_last_items": 1},
                ),
                "delete snapshot": lambda: client.delete(f"/v1/sessions/{sid}/snapshots/{snap}"),
                "delete": lambda: client.delete(f"/v1/sessions/{sid}"),
            }
            held = holder.execute(
                "SELECT 1 FROM sessions WHERE tenant_id = 'default' AND id = %s FOR UPDATE",
                (sid,),
            )
            assert held.fetchall() == [(1,)]
            for name, write in writes.items():
                started = time.monotonic()
                r = write()
                waited = time.monotonic() - started
                assert r.status_code == 503, (name, r.status_code, r.text)
                assert r.json()["type"].endswith("/lock-timeout"), (name, r.text)
                assert int(r.headers["retry-after"]) >= 1, name
                assert 0.25 < waited < 5, (name, waited)
            # reads do not wait for the row (one that did would fail like the writes), and see
            # nothing of the writes that gave up
            assert client.get(f"/v1/sessions/{sid}").json() == before
            assert len(client.get(f"/v1/sessions/{sid}/items").json()["items"]) == 4
            assert client.get(f"/v1/sessions/{sid}/context").status_code == 200
            assert client.get(f"/v1/sessions/{sid}/events").json()["items"] == events_before
            holder.rollback()

            # nothing was half done: with the row free, every write goes through (creating a
            # session that exists is the 409 it always is)
            for name, write in writes.items():
                r = write()
                expected = (409,) if name == "create (exists)" else (200, 201, 204)
                assert r.status_code in expected, (name, r.status_code, r.text)
                assert "idempotent-replayed" not in r.headers, name  # the 503 stored nothing
            assert client.get(f"/v1/sessions/{sid}").status_code == 404
    finally:
        holder.close()
        server.stop()
