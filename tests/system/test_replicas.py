"""Scale-out: three real server processes on one Postgres database and one Redis, 64 concurrent
writers through all three into 10 sessions, while things break.

Writes are ordered by the session row in Postgres (DESIGN §6): no write takes a Redis lock, an
append to an existing session is one autocommit statement carrying its idempotency record.
Clients do what a careful client does: on a 503 or a transport error they retry the same batch
with the same ``Idempotency-Key``, on the next server. During the load, triggered by progress
so that each lands mid-traffic:

1. one server is killed with SIGKILL: the others go on; a batch it was writing is either
   wholly stored or not at all. To see that for certain, a probe session is caught mid-write on
   that server: the test holds the session's row (``FOR UPDATE``), the server's one-statement
   append waits on it inside Postgres (no Redis key is taken for it), and the server is killed
   then. The statement, already sent, runs once the row is free: a retry of the same batch with
   the same key on another server replays it (201, ``Idempotent-Replayed: true``, the seqs the
   dead server's statement took), nothing is stored twice, and nothing of the dead server is
   left for the survivor to wait for;
2. with Redis up at the start: Redis is killed and restarted on the same port, and writes go on
   while it is down (no 503 ever names the lock backend; ``/readyz`` stays 200 and says
   ``"locks": "unavailable"``). With Redis stopped for the whole run (the servers point at a
   Redis that is not there), the same load and faults pass the same checks;
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
BATCHES_PER_WRITER = 20
MAX_BATCH = 4
TIME_LIMIT = 110.0  # seconds for the whole test; pytest's timeout below is the backstop


REDIS_MODES = ["redis-restarted", "redis-stopped"]


@dataclass
class Cluster:
    servers: list[ServerProcess]
    redis: RedisProcess
    db_name: str
    redis_mode: str

    @property
    def redis_stopped_throughout(self) -> bool:
        return self.redis_mode == "redis-stopped"


@pytest.fixture(params=REDIS_MODES)
def cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Cluster]:
    url, name = create_pg_database()
    redis = RedisProcess()
    redis.start()
    if request.param == "redis-stopped":
        redis.stop()  # and it stays stopped: the servers point at a port nobody listens on
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
        yield Cluster(servers, redis, name, request.param)
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


class RowProbe:
    """Puts the victim server in the middle of a write to the probe session.

    The test takes the session row's lock in Postgres (``FOR UPDATE``, in an open
    transaction); the victim's append statement then waits on that row inside Postgres."""

    def __init__(self, cluster: Cluster, run: str) -> None:
        self.sid = f"{run}-probe"
        self.redis = (
            None if cluster.redis_stopped_throughout else redis.Redis.from_url(cluster.redis.url)
        )
        url = PG_ADMIN_URL.rsplit("/", 1)[0] + "/" + cluster.db_name
        self.db = psycopg.connect(url)
        self.monitor = psycopg.connect(url, autocommit=True)

    def hold_row(self) -> None:
        self.db.execute(
            "SELECT 1 FROM sessions WHERE tenant_id = 'default' AND id = %s FOR UPDATE",
            (self.sid,),
        )

    def waiters(self) -> list[tuple[int, str]]:
        """(pid, query) of every backend waiting for the row this probe holds."""
        # from another connection: pg_stat_activity is a snapshot per transaction, and the
        # probe's transaction is the one holding the row
        rows = self.monitor.execute(
            "SELECT pid, query FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))",
            (self.db.info.backend_pid,),
        ).fetchall()
        return [(int(pid), str(query)) for pid, query in rows]

    def backend_alive(self, pid: int) -> bool:
        found = self.monitor.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (pid,))
        return found.fetchone() == (1,)

    def release_row(self) -> None:
        self.db.rollback()

    def redis_keys_of_session(self) -> list[bytes]:
        """Redis keys naming the probe session (a write lock would be one)."""
        assert self.redis is not None
        return list(self.redis.scan_iter(match=f"*{self.sid}*"))

    def close(self) -> None:
        self.db.close()
        self.monitor.close()
        if self.redis is not None:
            self.redis.close()


DOOMED = [
    {"type": "message", "role": "user", "content": "sent to the dead", "metadata": {"doomed": 0}},
    {"type": "message", "role": "assistant", "content": "stored once", "metadata": {"doomed": 1}},
]


async def kill_mid_write(
    client: httpx.AsyncClient, cluster: Cluster, probe: RowProbe, events: dict[str, Any]
) -> None:
    victim, survivor = cluster.servers[0], cluster.servers[1]
    assert victim.proc is not None
    path = f"/v1/sessions/{probe.sid}/items"
    key = {"Idempotency-Key": f"{probe.sid}-doomed"}
    await asyncio.to_thread(probe.hold_row)
    doomed = asyncio.create_task(
        client.post(victim.url + path, json={"items": DOOMED}, headers=key)
    )
    waiting: list[tuple[int, str]] = []
    for _ in range(500):
        waiting = await asyncio.to_thread(probe.waiters)
        if waiting:
            break
        await asyncio.sleep(0.01)
    # the victim's append is its one statement, sent, waiting for the row inside Postgres
    # (that it is in autocommit shows below: it commits after its server is gone)
    assert len(waiting) == 1, f"the victim's append never waited on the row: {waiting}"
    backend, statement = waiting[0]
    assert "UPDATE sessions" in statement and "INSERT INTO items" in statement, statement
    if probe.redis is not None:  # the write took no Redis lock
        assert await asyncio.to_thread(probe.redis_keys_of_session) == []
    victim.proc.send_signal(signal.SIGKILL)
    killed_at = time.monotonic()
    events["killed"] = (killed_at, events["acked"]())
    with pytest.raises(httpx.TransportError):
        await doomed
    await asyncio.to_thread(probe.release_row)
    released_at = time.monotonic()
    # the statement outlives its server: it runs now, and its backend ends
    for _ in range(500):
        if not await asyncio.to_thread(probe.backend_alive, backend):
            break
        await asyncio.sleep(0.01)
    assert not await asyncio.to_thread(probe.backend_alive, backend)
    retried = await client.post(survivor.url + path, json={"items": DOOMED}, headers=key)
    waited = time.monotonic() - released_at
    assert retried.status_code == 201, retried.text
    assert retried.headers.get("idempotent-replayed") == "true", "the dead server's batch was lost"
    assert [i["seq"] for i in retried.json()["items"]] == [2, 3]
    assert [i["content"] for i in retried.json()["items"]] == ["sent to the dead", "stored once"]
    r = await client.post(
        survivor.url + path,
        json={"items": [{"type": "message", "role": "user", "content": "after the kill"}]},
    )
    assert r.status_code == 201, r.text
    assert r.json()["items"][0]["seq"] == 4  # the dead server's batch took seqs 2-3, once
    events["probe_wait"] = waited


def terminate_db_connections(db_name: str) -> int:
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = %s AND pid <> pg_backend_pid()",
            (db_name,),
        ).fetchall()
    return sum(1 for (ok,) in rows if ok)


async def readiness(client: httpx.AsyncClient, servers: list[ServerProcess]) -> list[Any]:
    """Each server's /readyz. A pooled connection the chaos dropped fails the one request that
    meets it with a 503 and is replaced (no pre-ping, by design), and a loaded server may
    refuse a connect: a server is asked again, for up to 5 s, before its answer counts."""
    out = []
    for server in servers:
        answer: Any = None
        for _ in range(10):
            try:
                r = await client.get(server.url + "/readyz")
            except httpx.TransportError as exc:  # a connect refused under the writers' load
                answer = type(exc).__name__
            else:
                answer = (r.status_code, r.json())
                if r.status_code != 503:
                    break
            await asyncio.sleep(0.5)
        out.append(answer)
    return out


REDIS_DOWN_READY = (200, {"status": "ok", "database": "ok", "locks": "unavailable"})
OUTAGE_ACKS = 20  # batches acknowledged while Redis is down, before it comes back


async def chaos(
    client: httpx.AsyncClient,
    cluster: Cluster,
    load: Load,
    probe: RowProbe,
    events: dict[str, Any],
) -> None:
    events["acked"] = lambda: len(load.acked)
    survivors = cluster.servers[1:]
    await wait_for_progress(load, 0.15)
    await kill_mid_write(client, cluster, probe, events)

    await wait_for_progress(load, 0.4)
    if cluster.redis_stopped_throughout:
        events["redis_down_ready"] = await readiness(client, survivors)
    else:
        await asyncio.to_thread(cluster.redis.stop)
        stopped_at, acked_then = time.monotonic(), len(load.acked)
        events["redis_down_ready"] = await readiness(client, survivors)
        # writes go on while Redis is down: no write waits for it
        while len(load.acked) < acked_then + OUTAGE_ACKS:
            assert time.monotonic() - stopped_at < 10, "writes stalled while Redis was down"
            load.progress.clear()
            await asyncio.wait_for(load.progress.wait(), timeout=10)
        await asyncio.sleep(max(0.0, stopped_at + 0.7 - time.monotonic()))
        events["acked_while_redis_down"] = len(load.acked) - acked_then
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
    probe = RowProbe(cluster, load.run)
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

        # the survivors are the same processes, ready, with their pools (and Redis) back
        assert [s.proc.pid for s in survivors if s.proc] == pids
        assert all(s.proc is not None and s.proc.poll() is None for s in survivors)
        locks = "unavailable" if cluster.redis_stopped_throughout else "ok"
        assert await readiness(client, survivors) == [
            (200, {"status": "ok", "database": "ok", "locks": locks})
        ] * len(survivors)
        stored = {
            load.session(s): await read_all(client, survivors[s % 2].url, load.session(s))
            for s in range(SESSIONS)
        }
        sessions = {
            sid: (await client.get(f"{survivors[0].url}/v1/sessions/{sid}")).json()
            for sid in stored
        }
        probed = await read_all(client, survivors[1].url, probe.sid)
    # the dead server's batch once, whole, where the replay said
    assert [i["content"] for i in probed] == [
        "before",
        "sent to the dead",
        "stored once",
        "after the kill",
    ]
    assert [i["seq"] for i in probed] == [1, 2, 3, 4]
    elapsed = time.monotonic() - started

    victim = cluster.servers[0].proc
    assert victim is not None and victim.wait(5) == -signal.SIGKILL
    assert events["pg_terminated"] > 0, "no Postgres connection was open to drop"
    # while Redis was down, every replica stayed in rotation and writes went on
    assert events["redis_down_ready"] == [REDIS_DOWN_READY] * len(survivors)
    assert not [r for r in load.retries if "lock-backend" in r], load.retries
    # writes went on after each fault (the progress triggers fire mid-load)
    faults = ["killed", "pg_terminated_at"]
    if not cluster.redis_stopped_throughout:
        faults.append("redis_restarted")
        assert events["acked_while_redis_down"] >= OUTAGE_ACKS
    for name in faults:
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
        f"batches acked while Redis was down: {events.get('acked_while_redis_down', 'all')}; "
        f"survivor's retry of the dead server's batch: {events['probe_wait']:.2f}s"
    )
    assert elapsed < TIME_LIMIT
