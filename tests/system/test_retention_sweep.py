"""The retention sweep in real server processes: two replicas on one Postgres database.

With Redis, one replica runs each interval's sweep (the other finds the interval claimed);
without it (a Redis that is not there) both sweep and share the sessions through
``FOR UPDATE SKIP LOCKED``. Either way every expired session is erased within two sweep
intervals of its expiry, exactly once (one audit record each), and the others stay.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator

import httpx
import psycopg
import pytest

from app.domain.retention import subject_digest
from tests.support.services import (
    PG_ADMIN_URL,
    RedisProcess,
    ServerProcess,
    create_pg_database,
    drop_pg_database,
    free_port,
)

INTERVAL = 2.0
TTL = 10  # longer than creating the sessions takes on a busy machine
EXPIRING = 24
KEPT = 4
POLL = 0.2


@pytest.fixture
def database() -> Iterator[tuple[str, str]]:
    url, name = create_pg_database()
    yield url, PG_ADMIN_URL.rsplit("/", 1)[0] + "/" + name
    drop_pg_database(name)


def _servers(url: str, redis_url: str, tmp_path: object) -> list[ServerProcess]:
    env = {
        "DATABASE_URL": url,
        "REDIS_URL": redis_url,
        "AUTO_MIGRATE": "false",
        "LOG_LEVEL": "warning",
        "RETENTION__SWEEP_INTERVAL_SECONDS": str(INTERVAL),
        "RETENTION__SWEEP_BATCH_ROWS": "50",
    }
    return [ServerProcess(env=env, log_path=tmp_path / f"server{n}.log") for n in range(2)]  # type: ignore[operator]


def _sweep_runs(server: ServerProcess) -> float:
    text = httpx.get(server.url + "/metrics", timeout=5).text
    match = re.search(r"^session_memory_retention_sweep_duration_seconds_count (\S+)$", text, re.M)
    assert match, "the sweep duration series is missing"
    return float(match.group(1))


def _run(servers: list[ServerProcess], pg_url: str) -> dict[str, float]:
    """Expiring and kept sessions through both servers; checks what the sweep did."""
    runs_before, started = sum(_sweep_runs(s) for s in servers), time.monotonic()
    tag = uuid.uuid4().hex[:6]
    expiring = [f"exp-{tag}-{n}" for n in range(EXPIRING)]
    kept = [f"kept-{tag}-{n}" for n in range(KEPT)]
    with httpx.Client(timeout=10) as c:
        for n, sid in enumerate(expiring + kept):
            base = servers[n % 2].url
            ttl = TTL if sid in expiring else 3600
            r = c.post(f"{base}/v1/sessions", json={"id": sid, "config": {"ttl_seconds": ttl}})
            assert r.status_code == 201, r.text
            items = [{"type": "message", "role": "user", "content": f"{sid} {i}"} for i in range(5)]
            r = c.post(f"{servers[(n + 1) % 2].url}/v1/sessions/{sid}/items", json={"items": items})
            assert r.status_code == 201, r.text
    with psycopg.connect(pg_url) as db:
        expires = {
            sid: at
            for sid, at in db.execute(
                "SELECT id, expires_at FROM sessions WHERE id LIKE %s", (f"exp-{tag}-%",)
            ).fetchall()
        }
    assert len(expires) == EXPIRING
    deadline = max(expires.values()).timestamp() + 2 * INTERVAL + 10
    while time.time() < deadline:
        with psycopg.connect(pg_url) as db:
            (left,) = db.execute(
                "SELECT count(*) FROM sessions WHERE id LIKE %s", (f"exp-{tag}-%",)
            ).fetchone() or (0,)
        if not left:
            break
        time.sleep(POLL)
    # when each went: its audit record's time (found by the digest of tenant and id)
    with psycopg.connect(pg_url) as db:
        erased_at = dict(
            db.execute(
                "SELECT subject_digest, created_at FROM erasures WHERE reason = 'expired'"
            ).fetchall()
        )
    lag = {
        sid: (erased_at[subject_digest("default", sid)] - expires[sid]).total_seconds()
        for sid in expiring
        if subject_digest("default", sid) in erased_at
    }
    assert len(lag) == EXPIRING, f"not erased: {set(expiring) - set(lag)}"
    late = {sid: round(s, 2) for sid, s in lag.items() if s > 2 * INTERVAL}
    assert not late, f"erased later than two intervals after expiry (seconds after): {late}"
    assert min(lag.values()) >= 0  # and never before
    with psycopg.connect(pg_url) as db:
        assert db.execute(
            "SELECT count(*) FROM items WHERE session_id LIKE %s", (f"exp-{tag}-%",)
        ).fetchone() == (0,)
        assert db.execute(
            "SELECT count(*) FROM sessions WHERE id LIKE %s", (f"kept-{tag}-%",)
        ).fetchone() == (KEPT,)
        (records,) = db.execute(
            "SELECT count(*) FROM erasures WHERE reason = 'expired'"
        ).fetchone() or (0,)
    assert records == EXPIRING  # each erased exactly once, whoever swept it
    with httpx.Client(timeout=10) as c:
        for sid in expiring[:3]:
            assert c.get(f"{servers[0].url}/v1/sessions/{sid}").status_code == 404
    # sweep runs per interval while both servers were up
    runs = sum(_sweep_runs(s) for s in servers) - runs_before
    elapsed = time.monotonic() - started
    return {"runs": runs, "elapsed": elapsed, "per_interval": runs / (elapsed / INTERVAL)}


def test_one_replica_sweeps_each_interval_with_redis(
    database: tuple[str, str], tmp_path: object
) -> None:
    url, pg_url = database
    redis_server = RedisProcess()
    redis_server.start()
    servers = _servers(url, redis_server.url, tmp_path)
    try:
        for server in servers:
            server.start(timeout=120)
        result = _run(servers, pg_url)
    finally:
        for server in servers:
            server.stop()
        redis_server.stop()
    # two replicas sweeping unclaimed would run 2 per interval; claimed, 1
    assert 0.7 < result["per_interval"] <= 1.2, result


def test_replicas_share_the_sweep_without_redis(
    database: tuple[str, str], tmp_path: object
) -> None:
    url, pg_url = database
    nowhere = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens: every replica sweeps
    servers = _servers(url, nowhere, tmp_path)
    try:
        for server in servers:
            server.start(timeout=120)
        result = _run(servers, pg_url)
    finally:
        for server in servers:
            server.stop()
    # both ran every interval, and still each session went once
    assert result["per_interval"] > 1.5, result
