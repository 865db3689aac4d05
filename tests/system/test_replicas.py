"""Scale-out: three real server processes on one Postgres database and one Redis, 64 concurrent
writers through all three into 10 sessions, while things break.

Clients do what a careful client does: on a 503 or a transport error they retry the same batch
with the same ``Idempotency-Key``, on the next server. During the load, triggered by progress
so that each lands mid-traffic:

1. one server is killed with SIGKILL: the others go on; a batch it was writing is either
   wholly stored or not at all. To see its lock expire for certain, a probe session is caught
   mid-write on that server (the test holds the session's row lock, so the server sits in
   its transaction holding the Redis lock) when the kill comes: the lock stays, unreleased,
   until its TTL (``LOCK__TTL_SECONDS=2``) runs out, then another server writes the session,
   and the dead server's batch is nowhere;
2. Redis is killed and restarted on the same port: writes resume without restarting a server;
3. every Postgres connection to the database is terminated (``pg_terminate_backend``): the
   pools recover (``pool_pre_ping``).

Afterwards, for every session: ``seq`` is gapless; every batch is stored exactly once, whole
and contiguous (each item carries its batch's marker: writer, batch, index, size), at the seqs
its acknowledgement gave; each writer's batches are in the order it sent them.
"""

from __future__ import annotations

import asyncio
import random
import signal
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
import redis

from app.locks import lock_key
from tests.support.services import (
    PG_ADMIN_URL,
    RedisProcess,
    ServerProcess,
    create_pg_database,
    drop_pg_database,
)

SERVERS = 3
WRITERS = 64
SESSIONS = 10
BATCHES_PER_WRITER = 10
MAX_BATCH = 4
TIME_LIMIT = 110.0  # seconds for the whole test; pytest's timeout below is the backstop


@dataclass
class Cluster:
    servers: list[ServerProcess]
    redis: RedisProcess
    db_name: str


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    url, name = create_pg_database()
    redis = RedisProcess()
    redis.start()
    env = {
        "DATABASE_URL": url,
        "REDIS_URL": redis.url,
        "AUTO_MIGRATE": "false",
        "LOG_LEVEL": "warning",
        "LOCK__TTL_SECONDS": "2",
        "LOCK__WAIT_SECONDS": "5",
        "LOCK__REDIS_TIMEOUT_SECONDS": "0.5",
        "DB_POOL_SIZE": "5",
        "DB_MAX_OVERFLOW": "10",
    }
    servers = [ServerProcess(env=env, log_path=tmp_path / f"server{i}.log") for i in range(SERVERS)]
    try:
        for server in servers:
            server.start()
        yield Cluster(servers, redis, name)
    finally:
        for server in servers:
            server.stop()
        redis.stop()
        drop_pg_database(name)


@dataclass
class Load:
    run: str
    urls: list[str]
    acked: dict[tuple[int, int], list[int]] = field(default_factory=dict)  # (w, b) -> seqs
    ack_times: list[float] = field(default_factory=list)
    retries: Counter[str] = field(default_factory=Counter)
    progress: asyncio.Event = field(default_factory=asyncio.Event)  # set on every ack
    total: int = WRITERS * BATCHES_PER_WRITER

    def session(self, writer: int) -> str:
        return f"{self.run}-s{writer % SESSIONS}"


def batch_items(w: int, b: int) -> list[dict[str, Any]]:
    n = 1 + (w * 7 + b * 3) % MAX_BATCH
    return [
        {
            "type": "message",
            "role": "user" if i % 2 == 0 else "assistant",
            "content": f"w{w}-b{b}-i{i}",
            "metadata": {"w": w, "b": b, "i": i, "n": n},
        }
        for i in range(n)
    ]


async def send_batch(
    client: httpx.AsyncClient, load: Load, w: int, b: int, deadline: float
) -> None:
    items = batch_items(w, b)
    headers = {"Idempotency-Key": f"{load.run}-w{w}-b{b}"}
    path = f"/v1/sessions/{load.session(w)}/items?create=true"
    server = (w + b) % SERVERS
    while time.monotonic() < deadline:
        try:
            r = await client.post(load.urls[server] + path, json={"items": items}, headers=headers)
        except httpx.TransportError as exc:
            load.retries[type(exc).__name__] += 1
            server = (server + 1) % SERVERS
            await asyncio.sleep(0.02 + random.random() * 0.05)
            continue
        if r.status_code == 503:
            load.retries["503 " + r.json()["type"].rsplit("/", 1)[1]] += 1
            server = (server + 1) % SERVERS
            await asyncio.sleep(0.05 + random.random() * 0.15)
            continue
        assert r.status_code == 201, (r.status_code, r.text)
        stored = r.json()["items"]
        assert [i["content"] for i in stored] == [i["content"] for i in items]
        load.acked[(w, b)] = [i["seq"] for i in stored]
        load.ack_times.append(time.monotonic())
        load.progress.set()
        return
    raise AssertionError(f"batch w{w}-b{b} was never acknowledged")


async def writer(client: httpx.AsyncClient, load: Load, w: int, deadline: float) -> None:
    for b in range(BATCHES_PER_WRITER):
        await send_batch(client, load, w, b, deadline)


async def wait_for_progress(load: Load, fraction: float) -> None:
    while len(load.acked) < fraction * load.total:
        load.progress.clear()
        await load.progress.wait()


class LockProbe:
    """Puts the victim server in the middle of a write to the probe session, holding its lock.

    The test takes the session row's lock in Postgres first (``FOR UPDATE``); the victim then
    takes the Redis lock and blocks in its transaction on that row."""

    def __init__(self, cluster: Cluster, run: str) -> None:
        self.sid = f"{run}-probe"
        self.key = lock_key("default", self.sid)
        self.redis = redis.Redis.from_url(cluster.redis.url)
        self.db = psycopg.connect(PG_ADMIN_URL.rsplit("/", 1)[0] + "/" + cluster.db_name)

    def hold_row(self) -> None:
        self.db.execute(
            "SELECT 1 FROM sessions WHERE tenant_id = 'default' AND id = %s FOR UPDATE",
            (self.sid,),
        )

    def release_row(self) -> None:
        self.db.rollback()

    def lock_holder(self) -> bytes | None:
        return self.redis.get(self.key)  # type: ignore[return-value]

    def close(self) -> None:
        self.db.close()
        self.redis.close()


async def kill_mid_write(
    client: httpx.AsyncClient, cluster: Cluster, probe: LockProbe, events: dict[str, Any]
) -> None:
    victim, survivor = cluster.servers[0], cluster.servers[1]
    assert victim.proc is not None
    await asyncio.to_thread(probe.hold_row)
    doomed = asyncio.create_task(
        client.post(
            f"{victim.url}/v1/sessions/{probe.sid}/items",
            json={
                "items": [
                    {
                        "type": "message",
                        "role": "user",
                        "content": "never stored",
                        "metadata": {"doomed": True},
                    }
                ]
            },
        )
    )
    for _ in range(200):
        token = await asyncio.to_thread(probe.lock_holder)
        if token is not None:
            break
        await asyncio.sleep(0.01)
    assert token is not None, "the victim never took the probe session's lock"
    victim.proc.send_signal(signal.SIGKILL)
    killed_at = time.monotonic()
    events["killed"] = (killed_at, events["acked"]())
    with pytest.raises(httpx.TransportError):
        await doomed
    await asyncio.to_thread(probe.release_row)
    # nobody released it: it is still the dead server's, and expires by itself
    assert await asyncio.to_thread(probe.lock_holder) == token
    r = await client.post(
        f"{survivor.url}/v1/sessions/{probe.sid}/items",
        json={"items": [{"type": "message", "role": "user", "content": "after the kill"}]},
    )
    waited = time.monotonic() - killed_at
    assert r.status_code == 201, r.text
    assert r.json()["items"][0]["seq"] == 2  # the dead server's batch took no seq
    assert 1.0 < waited < 4.5, f"the survivor waited {waited:.2f}s for the expired lock"
    events["probe_wait"] = waited


def terminate_db_connections(db_name: str) -> int:
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = %s AND pid <> pg_backend_pid()",
            (db_name,),
        ).fetchall()
    return sum(1 for (ok,) in rows if ok)


async def chaos(
    client: httpx.AsyncClient,
    cluster: Cluster,
    load: Load,
    probe: LockProbe,
    events: dict[str, Any],
) -> None:
    events["acked"] = lambda: len(load.acked)
    await wait_for_progress(load, 0.15)
    await kill_mid_write(client, cluster, probe, events)

    await wait_for_progress(load, 0.4)
    await asyncio.to_thread(cluster.redis.stop)
    await asyncio.sleep(0.7)
    await asyncio.to_thread(cluster.redis.start)
    events["redis_restarted"] = (time.monotonic(), len(load.acked))

    await wait_for_progress(load, 0.7)
    events["pg_terminated"] = await asyncio.to_thread(terminate_db_connections, cluster.db_name)
    events["pg_terminated_at"] = (time.monotonic(), len(load.acked))


async def read_all(client: httpx.AsyncClient, base: str, sid: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    after = None
    while True:
        params: dict[str, Any] = {"limit": 1000}
        if after is not None:
            params["after_seq"] = after
        r = await client.get(f"{base}/v1/sessions/{sid}/items", params=params)
        assert r.status_code == 200, r.text
        page = r.json()
        out += page["items"]
        after = page["next_cursor"]
        if after is None:
            return out


@pytest.mark.slow
@pytest.mark.timeout(150)
async def test_three_replicas_survive_kill_redis_restart_and_dropped_connections(
    cluster: Cluster,
) -> None:
    started = time.monotonic()
    deadline = started + TIME_LIMIT - 15
    load = Load(run=f"rep-{uuid.uuid4().hex[:6]}", urls=[s.url for s in cluster.servers])
    survivors = cluster.servers[1:]
    pids = [s.proc.pid for s in survivors if s.proc]
    events: dict[str, Any] = {}
    probe = LockProbe(cluster, load.run)
    limits = httpx.Limits(max_connections=WRITERS + 16, max_keepalive_connections=WRITERS)
    async with httpx.AsyncClient(timeout=httpx.Timeout(20, connect=2), limits=limits) as client:
        r = await client.post(
            f"{load.urls[1]}/v1/sessions/{probe.sid}/items?create=true",
            json={"items": [{"type": "message", "role": "user", "content": "before"}]},
        )
        assert r.status_code == 201, r.text
        chaos_task = asyncio.create_task(chaos(client, cluster, load, probe, events))
        try:
            await asyncio.gather(*(writer(client, load, w, deadline) for w in range(WRITERS)))
            await asyncio.wait_for(chaos_task, timeout=5)  # every fault happened before the end
        finally:
            chaos_task.cancel()
            probe.close()

        # the survivors are the same processes, ready, with their pools and Redis back
        assert [s.proc.pid for s in survivors if s.proc] == pids
        assert all(s.proc is not None and s.proc.poll() is None for s in survivors)
        for server in survivors:
            ready = await client.get(server.url + "/readyz")
            assert ready.status_code == 200, ready.text
        stored = {
            load.session(s): await read_all(client, survivors[s % 2].url, load.session(s))
            for s in range(SESSIONS)
        }
        sessions = {
            sid: (await client.get(f"{survivors[0].url}/v1/sessions/{sid}")).json()
            for sid in stored
        }
        probed = await read_all(client, survivors[1].url, probe.sid)
    assert [i["content"] for i in probed] == ["before", "after the kill"]
    elapsed = time.monotonic() - started

    victim = cluster.servers[0].proc
    assert victim is not None and victim.wait(5) == -signal.SIGKILL
    assert events["pg_terminated"] > 0, "no Postgres connection was open to drop"
    # writes went on after each fault (the progress triggers fire mid-load)
    for name in ("killed", "redis_restarted", "pg_terminated_at"):
        at, acked_then = events[name]
        assert acked_then < load.total and any(t > at for t in load.ack_times), name

    assert len(load.acked) == load.total  # every batch acknowledged (or the test failed above)
    seen: dict[tuple[int, int], list[dict[str, Any]]] = defaultdict(list)
    for sid, items in stored.items():
        seqs = [i["seq"] for i in items]
        assert seqs == list(range(1, len(items) + 1)), f"{sid}: seq not gapless"
        assert sessions[sid]["item_count"] == len(items) == sessions[sid]["last_seq"]
        for item in items:
            m = item["metadata"]
            seen[(m["w"], m["b"])].append(item)
        writers_here = {w for w in range(WRITERS) if load.session(w) == sid}
        for w in writers_here:  # a writer's batches are stored in the order it sent them
            firsts = [load.acked[(w, b)][0] for b in range(BATCHES_PER_WRITER)]
            assert firsts == sorted(firsts), (sid, w)

    # exactly once, whole, contiguous, where the acknowledgement said
    assert set(seen) == set(load.acked)
    for (w, b), items in seen.items():
        n = items[0]["metadata"]["n"]
        assert [i["metadata"]["i"] for i in items] == list(range(n)), (w, b, "partial or doubled")
        assert all(i["metadata"]["n"] == n for i in items)
        assert [i["seq"] for i in items] == load.acked[(w, b)], (w, b)
        assert items[0]["content"] == f"w{w}-b{b}-i0"
    total_items = sum(len(v) for v in stored.values())
    print(
        f"\n{total_items} items in {load.total} batches, {elapsed:.1f}s; "
        f"retries: {dict(load.retries)}; pg connections dropped: {events['pg_terminated']}; "
        f"expired lock waited for {events['probe_wait']:.2f}s"
    )
    assert elapsed < TIME_LIMIT
