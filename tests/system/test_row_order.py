"""Writes ordered by the session row, nothing resting on Redis (issue 14): real server processes
on one Postgres database and a Redis of the test's own.

1. Redis stopped for the whole run: two replicas take 20 concurrent writers x 20 appends with
   Idempotency-Keys, creates (with an id, without one, by the first append), PATCH, pop,
   snapshot and restore; every write is answered 2xx at the first try; afterwards nothing is
   lost, nothing doubled, seq gapless, each batch where its acknowledgement said; ``/readyz``
   stays 200 and says ``"locks": "unavailable"``.
2. DELETE racing appends from several replicas, ten times over one session id (with Redis up,
   and with Redis stopped): after each delete no row of the session is left in any table, and
   the re-created session holds nothing from before (items, history, events, counters); appends
   start again at seq 1 and run past the old seqs without a conflict.
3. A retry of an append whose server was SIGKILLed right after sending its statement lands once:
   the request is written to a replica over a raw socket and the replica is killed (once while
   its statement waits on the session row, which the test holds, so that the statement runs
   after the server is gone; otherwise after a few different delays); the same request, same
   Idempotency-Key, is retried on another replica: 201, and the batch is stored exactly once.
"""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
import sqlalchemy as sa

from app.store.tables import metadata as tables
from tests.support.services import (
    PG_ADMIN_URL,
    RedisProcess,
    ServerProcess,
    create_pg_database,
    drop_pg_database,
)

TENANT = "default"  # auth is off on loopback: every call is the default tenant's
REPLAYED = "idempotent-replayed"
ENV = {
    "AUTO_MIGRATE": "false",
    "LOG_LEVEL": "warning",
    "LOCK__TTL_SECONDS": "2",
    "LOCK__WAIT_SECONDS": "5",
    "LOCK__REDIS_TIMEOUT_SECONDS": "0.5",
    "DB_POOL_SIZE": "5",
    "DB_MAX_OVERFLOW": "5",  # Postgres is shared: keep the connections few
}

# The client drops idle connections before the server's keep-alive timeout (uvicorn: 5 s) can
# close one under a request being sent: such a ReadError would be the client's, not the write's.
KEEPALIVE = 1.0
LIMITS = httpx.Limits(keepalive_expiry=KEEPALIVE)
TIMEOUT = httpx.Timeout(30, connect=5)


# -- clusters of replicas -----------------------------------------------------------------------


@dataclass
class Cluster:
    servers: list[ServerProcess]
    redis: RedisProcess
    db_url: str
    db_name: str
    engine: sa.Engine = field(init=False)

    def __post_init__(self) -> None:
        self.engine = sa.create_engine(self.db_url, poolclass=sa.pool.NullPool)

    @property
    def urls(self) -> list[str]:
        return [s.url for s in self.servers]

    @property
    def redis_up(self) -> bool:
        return self.redis.proc is not None


def start_all(servers: list[ServerProcess]) -> None:
    """Start the servers side by side (each start is seconds of imports)."""
    errors: list[BaseException] = []

    def start(server: ServerProcess) -> None:
        try:
            server.start(timeout=90)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=start, args=(s,)) for s in servers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def make_cluster(n: int, logs: Path, *, stop_redis: bool) -> Iterator[Cluster]:
    url, name = create_pg_database()
    redis = RedisProcess()
    redis.start()
    env = {"DATABASE_URL": url, "REDIS_URL": redis.url, **ENV}
    servers = [ServerProcess(env=env, log_path=logs / f"server{i}.log") for i in range(n)]
    cluster = Cluster(servers, redis, url, name)
    try:
        start_all(servers)
        if stop_redis:
            redis.stop()  # and it stays stopped: the servers still point at its port
        yield cluster
    finally:
        for server in servers:
            server.stop()
        redis.stop()
        cluster.engine.dispose()
        drop_pg_database(name)


@pytest.fixture(scope="class")
def redisless(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """Two replicas whose Redis was stopped right after they started."""
    yield from make_cluster(2, tmp_path_factory.mktemp("redisless"), stop_redis=True)


@pytest.fixture(scope="class")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """Three replicas with their Redis up."""
    yield from make_cluster(3, tmp_path_factory.mktemp("cluster"), stop_redis=False)


# -- reading back -------------------------------------------------------------------------------


async def read_all(client: httpx.AsyncClient, url: str) -> list[dict[str, Any]]:
    """Every page of a cursor-paginated list (items, history, events)."""
    out: list[dict[str, Any]] = []
    after = None
    while True:
        params: dict[str, Any] = {"limit": 1000}
        if after is not None:
            params["after_seq"] = after
        r = await client.get(url, params=params)
        assert r.status_code == 200, (url, r.text)
        page = r.json()
        out += page["items"]
        after = page["next_cursor"]
        if after is None:
            return out


def rows_of_session(engine: sa.Engine, session_id: str) -> dict[str, int]:
    """Rows anywhere in the database that belong to the session: every table with a
    session_id column, the session row itself, and idempotency records under its path."""
    found: dict[str, int] = {}
    with engine.connect() as db:
        for table in tables.sorted_tables:
            c = table.c
            if "tenant_id" not in c:
                continue
            where: list[sa.ColumnElement[bool]] = []
            if "session_id" in c:
                where.append(c.session_id == session_id)
            if table.name == "sessions":
                where.append(c.id == session_id)
            if "path" in c:
                base = f"/v1/sessions/{session_id}"
                where.append(sa.or_(c.path == base, c.path.startswith(base + "/")))
            if not where:
                continue
            count = db.execute(
                sa.select(sa.func.count()).select_from(table).where(
                    c.tenant_id == TENANT, sa.or_(*where)
                )
            ).scalar_one()
            if count:
                found[table.name] = int(count)
    return found


def message(text: str, **metadata: Any) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": text, "metadata": metadata}


# -- 1. Redis stopped for the whole run ---------------------------------------------------------

WRITERS = 20
BATCHES = 20
SESSIONS = 5  # writers w and w + 5, w + 10, w + 15 share a session
EXPLICIT = 3  # sessions 0-2 are created first; 3-4 by their writers' first appends, racing
OPS_SESSIONS = 4


def batch_items(w: int, b: int) -> list[dict[str, Any]]:
    n = 1 + (w * 7 + b * 3) % 3
    return [message(f"w{w}-b{b}-i{i}", w=w, b=b, i=i, n=n) for i in range(n)]


async def every_write_works_without_redis(c: Cluster) -> None:
    assert not c.redis_up
    urls = c.urls
    run = f"nr-{uuid.uuid4().hex[:6]}"
    acked: dict[tuple[int, int], list[int]] = {}
    replays = 0
    started = time.monotonic()

    def sid_of(w: int) -> str:
        return f"{run}-s{w % SESSIONS}"

    limits = httpx.Limits(max_connections=WRITERS + 32, keepalive_expiry=KEEPALIVE)
    async with httpx.AsyncClient(timeout=TIMEOUT, limits=limits) as client:

        async def write(method: str, url: str, status: int, **kw: Any) -> httpx.Response:
            """Every write is answered at the first try: no 503, no retry."""
            r = await client.request(method, url, **kw)
            assert r.status_code == status, (method, url, r.status_code, r.text)
            return r

        for s in range(EXPLICIT):
            await write(
                "POST", f"{urls[s % 2]}/v1/sessions", 201,
                json={"id": f"{run}-s{s}", "metadata": {"s": s}},
                headers={"Idempotency-Key": f"{run}-create-{s}"},
            )
        anonymous = await write(
            "POST", f"{urls[1]}/v1/sessions", 201, json={},
            headers={"Idempotency-Key": f"{run}-create-anon"},
        )
        anon = anonymous.json()["id"]

        async def writer(w: int) -> None:
            nonlocal replays
            sid = sid_of(w)
            query = "" if w % SESSIONS < EXPLICIT else "?create=true"
            for b in range(BATCHES):
                items = batch_items(w, b)
                headers = {"Idempotency-Key": f"{run}-w{w}-b{b}"}
                server = (w + b) % 2
                path = f"/v1/sessions/{sid}/items{query}"
                r = await write("POST", urls[server] + path, 201, json={"items": items},
                                headers=headers)
                stored = r.json()["items"]
                assert [i["content"] for i in stored] == [i["content"] for i in items]
                acked[(w, b)] = [i["seq"] for i in stored]
                if b % 5 == 4:  # a client retry on the other replica: replayed, nothing stored
                    again = await write("POST", urls[1 - server] + path, 201,
                                        json={"items": items}, headers=headers)
                    assert again.headers.get(REPLAYED) == "true", again.headers
                    assert again.json() == r.json()
                    replays += 1

        async def patcher(s: int) -> None:
            for i in range(6):
                await write("PATCH", f"{urls[i % 2]}/v1/sessions/{run}-s{s}", 200,
                            json={"metadata": {"s": s, "patch": i}})
                await asyncio.sleep(0.05)

        async def operations(k: int) -> None:
            sid = f"{run}-ops{k}"
            base = f"/v1/sessions/{sid}"

            def at(step: int) -> str:
                return urls[(k + step) % 2]

            await write("POST", at(0) + "/v1/sessions", 201, json={"id": sid, "metadata": {"k": k}})
            await write("POST", at(1) + base + "/items", 201,
                        json={"items": [message(f"o{i}") for i in range(4)]})
            await write("PATCH", at(2) + base, 200, json={"metadata": {"k": k, "patched": True}})
            snap = await write("POST", at(3) + base + "/snapshots", 201, json={"label": f"l{k}"})
            await write("POST", at(4) + base + "/items", 201,
                        json={"items": [message("o4"), message("o5")]})
            popped = await write("POST", at(5) + base + "/items/pop", 200)
            assert popped.json()["item"]["content"] == "o5"
            key = {"Idempotency-Key": f"{run}-pop-{k}"}
            popped = await write("POST", at(6) + base + "/items/pop", 200, headers=key)
            again = await write("POST", at(7) + base + "/items/pop", 200, headers=key)
            assert popped.json()["item"]["content"] == "o4" and again.json() == popped.json()
            restored = await write("POST", at(8) + base + "/restore", 200,
                                   json={"snapshot_id": snap.json()["id"]})
            version = restored.json()["session"]["version"]
            await write("PATCH", at(9) + base, 200, headers={"If-Match": f'"{version}"'},
                        json={"metadata": {"k": k, "patched": True, "final": True}})
            for url in urls:
                items = await read_all(client, url + base + "/items")
                assert [i["content"] for i in items] == ["o0", "o1", "o2", "o3"], (url, items)
                meta = (await client.get(url + base)).json()["metadata"]
                assert meta == {"k": k, "patched": True, "final": True}, (url, meta)

        await asyncio.gather(
            *(writer(w) for w in range(WRITERS)),
            *(patcher(s) for s in range(EXPLICIT)),
            *(operations(k) for k in range(OPS_SESSIONS)),
        )

        for url in urls:
            ready = await client.get(url + "/readyz")
            assert ready.status_code == 200, ready.text
            assert ready.json()["locks"] == "unavailable", ready.text
            assert ready.json()["database"] == "ok", ready.text
        stored = {
            f"{run}-s{s}": await read_all(client, f"{urls[s % 2]}/v1/sessions/{run}-s{s}/items")
            for s in range(SESSIONS)
        }
        sessions = {
            sid: (await client.get(f"{urls[n % 2]}/v1/sessions/{sid}")).json()
            for n, sid in enumerate(stored)
        }
        anon_read = await client.get(f"{urls[0]}/v1/sessions/{anon}")
    elapsed = time.monotonic() - started

    assert anon_read.status_code == 200, anon_read.text
    assert len(acked) == WRITERS * BATCHES
    seen: dict[tuple[int, int], list[dict[str, Any]]] = {}
    for sid, items in stored.items():
        seqs = [i["seq"] for i in items]
        assert seqs == list(range(1, len(items) + 1)), f"{sid}: seq not gapless"
        assert sessions[sid]["item_count"] == len(items) == sessions[sid]["last_seq"], sid
        for item in items:
            m = item["metadata"]
            seen.setdefault((m["w"], m["b"]), []).append(item)
        for w in (w for w in range(WRITERS) if sid_of(w) == sid):  # each writer's order kept
            firsts = [acked[(w, b)][0] for b in range(BATCHES)]
            assert firsts == sorted(firsts), (sid, w)
    for s in range(EXPLICIT):
        assert sessions[f"{run}-s{s}"]["metadata"] == {"s": s, "patch": 5}
    assert set(seen) == set(acked), "lost or unacknowledged batches"
    for (w, b), items in seen.items():
        n = items[0]["metadata"]["n"]
        assert [i["metadata"]["i"] for i in items] == list(range(n)), (w, b, "partial or doubled")
        assert [i["seq"] for i in items] == acked[(w, b)], (w, b, "not where acknowledged")
    total = sum(len(v) for v in stored.values())
    print(f"\nRedis stopped: {total} items in {len(acked)} batches (+{replays} replays), "
          f"{elapsed:.1f}s")
    assert not c.redis_up


# -- 2. DELETE racing appends from several replicas ---------------------------------------------

ROUNDS = 10
APPENDERS_PER_REPLICA = 2


async def delete_racing_appends(c: Cluster) -> None:
    urls = c.urls
    sid = f"del-{uuid.uuid4().hex[:8]}"
    base = f"/v1/sessions/{sid}"
    patient = c.redis_up  # with Redis up, a busy lock (503) is retried; without it, no 503 at all

    async with httpx.AsyncClient(timeout=TIMEOUT, limits=LIMITS) as client:

        async def send(method: str, url: str, **kw: Any) -> httpx.Response:
            deadline = time.monotonic() + 15
            while True:
                r = await client.request(method, url, **kw)
                if r.status_code != 503 or not patient or time.monotonic() > deadline:
                    return r
                await asyncio.sleep(0.05)

        r = await send("POST", urls[0] + "/v1/sessions", json={"id": sid})
        assert r.status_code == 201, r.text
        for rnd in range(ROUNDS):
            acked: list[int] = []
            progress = asyncio.Event()

            async def appender(a: int, rnd: int = rnd, acked: list[int] = acked,
                               progress: asyncio.Event = progress) -> int:
                """Appends until the session is gone; returns how many it got acknowledged."""
                url = urls[a % len(urls)] + base + "/items"
                n = 0
                while True:
                    r = await send(
                        "POST", url,
                        json={"items": [message(f"r{rnd}-a{a}-{n}", a=a, n=n)]},
                        headers={"Idempotency-Key": f"{sid}-r{rnd}-a{a}-{n}"},
                    )
                    n += 1
                    if r.status_code == 404:
                        assert r.json()["type"].endswith("/session-not-found"), r.text
                        return n - 1
                    assert r.status_code == 201, (r.status_code, r.text)
                    acked.extend(i["seq"] for i in r.json()["items"])
                    progress.set()

            tasks = [
                asyncio.create_task(appender(a))
                for a in range(APPENDERS_PER_REPLICA * len(urls))
            ]
            try:
                async with asyncio.timeout(20):
                    while len(acked) < 6 + rnd:
                        progress.clear()
                        await progress.wait()
                deleter = urls[rnd % len(urls)]
                r = await send("DELETE", deleter + base)
                assert r.status_code == 204, r.text
                async with asyncio.timeout(20):
                    counts = await asyncio.gather(*tasks)
            finally:
                for t in tasks:
                    t.cancel()
            assert sum(counts) == len(acked) > 0

            # nothing of the session is left, in any table
            left = await asyncio.to_thread(rows_of_session, c.engine, sid)
            assert left == {}, f"round {rnd}: rows outlived the DELETE: {left}"

            r = await send("POST", urls[(rnd + 1) % len(urls)] + "/v1/sessions", json={"id": sid})
            assert r.status_code == 201, r.text
            assert r.json()["item_count"] == 0 and r.json()["last_seq"] == 0, r.text
            for url in urls:
                session = (await client.get(url + base)).json()
                assert session["item_count"] == 0 and session["last_seq"] == 0, (rnd, session)
                assert await read_all(client, url + base + "/items") == [], (rnd, url)
                assert await read_all(client, url + base + "/history") == [], (rnd, url)
                events = await read_all(client, url + base + "/events")
                assert [e["type"] for e in events] == ["created"], (rnd, url, events)

            # appends start again at seq 1, and run past the old seqs without a conflict
            r = await send("POST", urls[rnd % len(urls)] + base + "/items",
                           json={"items": [message("fresh")]})
            assert r.status_code == 201, r.text
            assert [i["seq"] for i in r.json()["items"]] == [1]
            last = 1
            while last <= max(acked):
                r = await send("POST", urls[last % len(urls)] + base + "/items",
                               json={"items": [message(f"past-{last + k}") for k in range(20)]})
                assert r.status_code == 201, (rnd, r.status_code, r.text)
                seqs = [i["seq"] for i in r.json()["items"]]
                assert seqs == list(range(last + 1, last + 21)), (rnd, seqs)
                last = seqs[-1]
            items = await read_all(client, urls[0] + base + "/items")
            assert [i["seq"] for i in items] == list(range(1, last + 1))
            assert items[0]["content"] == "fresh"
            assert not any(i["content"].startswith(f"r{rnd}-") for i in items)


# -- 3. a retry of an append whose server was SIGKILLed mid-write lands once --------------------

BATCH = 3


def raw_request(port: int, path: str, body: bytes, key: str) -> socket.socket:
    """Write a whole HTTP request and leave the answer unread."""
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Content-Type: application/json\r\nIdempotency-Key: {key}\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode()
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock.sendall(head + body)
    return sock


class RowHolder:
    """Holds the session row (``FOR UPDATE``) so that a server's write statement waits on it,
    and sees it waiting."""

    def __init__(self, c: Cluster) -> None:
        self.db_name = c.db_name
        self.db = psycopg.connect(PG_ADMIN_URL.rsplit("/", 1)[0] + "/" + c.db_name)

    def hold(self, session_id: str) -> None:
        row = self.db.execute(
            "SELECT 1 FROM sessions WHERE tenant_id = %s AND id = %s FOR UPDATE",
            (TENANT, session_id),
        ).fetchone()
        assert row is not None

    def wait_for_a_blocked_statement(self, timeout: float = 10) -> str:
        me = self.db.info.backend_pid
        deadline = time.monotonic() + timeout
        with psycopg.connect(PG_ADMIN_URL, autocommit=True) as admin:
            while time.monotonic() < deadline:
                row = admin.execute(
                    "SELECT query FROM pg_stat_activity WHERE datname = %s AND pid <> %s "
                    "AND wait_event_type = 'Lock'",
                    (self.db_name, me),
                ).fetchone()
                if row:
                    return str(row[0])
                time.sleep(0.005)
        raise AssertionError("no server statement ever waited on the held session row")

    def release(self) -> None:
        self.db.rollback()

    def close(self) -> None:
        self.db.close()


async def a_retry_after_a_kill_lands_once(c: Cluster) -> None:
    sid = f"kill-{uuid.uuid4().hex[:8]}"
    base = f"/v1/sessions/{sid}"
    # "held": the statement is in Postgres, waiting on the row, when the server dies; the
    # numbers: seconds between writing the request and the SIGKILL
    plans: list[str | float] = ["held", 0.0, "held", 0.01]
    restarts: dict[int, threading.Thread] = {}
    holder = RowHolder(c)
    outcomes: list[tuple[str | float, bool]] = []

    def alive() -> list[int]:
        return [
            i for i, s in enumerate(c.servers)
            if i not in restarts and s.proc is not None and s.proc.poll() is None
        ]

    def restart(i: int) -> None:
        c.servers[i].stop()  # clears the dead process
        c.servers[i].start(timeout=90)

    try:
        async with httpx.AsyncClient(timeout=TIMEOUT, limits=LIMITS) as client:
            r = await client.post(c.urls[0] + "/v1/sessions", json={"id": sid})
            assert r.status_code == 201, r.text
            expected = 0
            for n, plan in enumerate(plans):
                waited_until = time.monotonic() + 60
                while len(alive()) < 2:  # wait for a restarted replica
                    assert time.monotonic() < waited_until, "a killed replica never came back"
                    for i, t in list(restarts.items()):
                        if not t.is_alive():
                            t.join()
                            del restarts[i]
                    await asyncio.sleep(0.1)
                victim_i, target_i = alive()[0], alive()[1]
                victim, target = c.servers[victim_i], c.servers[target_i]
                assert victim.proc is not None
                key = f"{sid}-kill-{n}"
                items = [message(f"k{n}-i{i}", n=n, i=i) for i in range(BATCH)]
                body = json.dumps({"items": items}).encode()

                if plan == "held":
                    await asyncio.to_thread(holder.hold, sid)
                sock = await asyncio.to_thread(raw_request, victim.port, base + "/items", body, key)
                if plan == "held":
                    waiting = await asyncio.to_thread(holder.wait_for_a_blocked_statement)
                    assert waiting, waiting
                else:
                    await asyncio.sleep(float(plan))
                victim.proc.send_signal(signal.SIGKILL)
                victim.proc.wait(10)
                sock.close()
                if plan == "held":
                    # the dead server's statement now gets the row: it runs (and, if it is one
                    # autocommit statement, commits) with nobody left to hear the answer
                    await asyncio.to_thread(holder.release)
                # each kill still to come takes a victim, and the last needs a target too:
                # restart this one now unless live and restarting replicas cover them
                if len(alive()) + len(restarts) < len(plans) - n:
                    restarts[victim_i] = threading.Thread(target=restart, args=(victim_i,))
                    restarts[victim_i].start()

                # the careful client: same request, same key, on another replica
                deadline = time.monotonic() + 20
                while True:
                    try:
                        retry = await client.post(
                            target.url + base + "/items", content=body,
                            headers={"Idempotency-Key": key, "Content-Type": "application/json"},
                        )
                    except httpx.TransportError:
                        retry = None
                    if retry is not None and retry.status_code != 503:
                        break
                    assert time.monotonic() < deadline, "the retry was never answered"
                    await asyncio.sleep(0.1)
                assert retry.status_code == 201, (plan, retry.status_code, retry.text)
                answered = retry.json()["items"]
                assert [i["content"] for i in answered] == [i["content"] for i in items]
                outcomes.append((plan, retry.headers.get(REPLAYED) == "true"))
                expected += BATCH

                for url in (target.url, *(c.servers[i].url for i in alive() if i != target_i)):
                    session = (await client.get(url + base)).json()
                    assert session["item_count"] == expected == session["last_seq"], (plan, session)
                    stored = await read_all(client, url + base + "/items")
                    assert [i["seq"] for i in stored] == list(range(1, expected + 1)), plan
                    mine = [i for i in stored if i["metadata"].get("n") == n]
                    assert [(i["id"], i["seq"]) for i in mine] == [
                        (i["id"], i["seq"]) for i in answered
                    ], (plan, "stored other than acknowledged, or twice")
                    history = await read_all(client, url + base + "/history")
                    assert [h["content"] for h in history].count(f"k{n}-i0") == 1, plan
                    assert len(history) == expected, plan
            assert expected == BATCH * len(plans)
    finally:
        holder.close()
        for t in restarts.values():
            t.join()
    print(f"\nkill plans and whether the retry was a replay: {outcomes}")


# -- the tests: one cluster alive at a time -----------------------------------------------------


@pytest.mark.slow
class TestRedisStoppedForTheWholeRun:
    @pytest.mark.timeout(150)
    async def test_every_write_works(self, redisless: Cluster) -> None:
        assert not redisless.redis_up
        await every_write_works_without_redis(redisless)

    @pytest.mark.timeout(150)
    async def test_delete_racing_appends_leaves_nothing_behind(self, redisless: Cluster) -> None:
        assert not redisless.redis_up
        await delete_racing_appends(redisless)


@pytest.mark.slow
class TestThreeReplicas:
    @pytest.mark.timeout(150)
    async def test_delete_racing_appends_leaves_nothing_behind(self, cluster: Cluster) -> None:
        assert cluster.redis_up
        await delete_racing_appends(cluster)

    @pytest.mark.timeout(150)
    async def test_a_retry_after_the_server_died_mid_append_lands_once(
        self, cluster: Cluster
    ) -> None:
        await a_retry_after_a_kill_lands_once(cluster)
