"""Erasures racing writers, in real processes on one Postgres database.

- A session the sweep has begun to erase takes no write, even from a replica whose clock lags
  the database's by a minute (it runs under libfaketime): the race is driven deterministically
  by holding the session's item rows from a second connection, so the sweep stops inside its
  first batch while it holds the session row; the write comes then (judged by the replica's
  clock the session is live, so it would wait on that row and land after the first batch).
- A tenant erasure on one replica stops every write of the tenant on another replica that
  still has the key cached, returns while writers keep trying, and leaves no row of the
  tenant in any table.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import psycopg
import pytest

from app.domain.retention import subject_digest, tenant_digest
from tests.support.services import (
    PG_ADMIN_URL,
    REDIS_URL,
    ROOT,
    ServerProcess,
    create_pg_database,
    drop_pg_database,
)

TTL = 4


@pytest.fixture
def database() -> Iterator[tuple[str, str]]:
    """(the service's URL, a psycopg URL) of a fresh migrated database."""
    url, name = create_pg_database()
    yield url, PG_ADMIN_URL.rsplit("/", 1)[0] + "/" + name
    drop_pg_database(name)


def _libfaketime() -> str:
    found = glob.glob("/usr/lib/*/faketime/libfaketime.so.1")
    assert found, "libfaketime is missing: scripts/bootstrap installs it (apt-get install faketime)"
    return found[0]


def _server(url: str, log: Path, **env: str) -> ServerProcess:
    base = {
        "DATABASE_URL": url,
        "REDIS_URL": "",
        "AUTO_MIGRATE": "false",
        "LOG_LEVEL": "warning",
        "RETENTION__SWEEP_ENABLED": "false",  # the test runs the one sweep itself
    }
    server = ServerProcess(env={**base, **env}, log_path=log)
    server.start()
    return server


def _waiting_on_locks(pg_url: str) -> int:
    with psycopg.connect(pg_url, autocommit=True) as db:
        row = db.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND wait_event_type = 'Lock'"
        ).fetchone()
    return int(row[0]) if row else 0


def _wait_for(what: str, check: object, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def _rows_of(pg_url: str, *, tenant_id: str, session_id: str | None = None) -> dict[str, int]:
    """Rows per table that hold the tenant (or one session of it): every table with a
    ``tenant_id`` column but the audit trail, read from the live schema."""
    out: dict[str, int] = {}
    with psycopg.connect(pg_url, autocommit=True) as db:
        columns: dict[str, set[str]] = {}
        for table, column in db.execute(
            "SELECT table_name, column_name FROM information_schema.columns"
            " WHERE table_schema = 'public'"
        ).fetchall():
            columns.setdefault(table, set()).add(column)
        for table, names in columns.items():
            if table == "erasures" or "tenant_id" not in names:
                continue
            where, params = "tenant_id = %s", [tenant_id]
            if session_id is not None:
                column = "id" if table == "sessions" else "session_id"
                if column not in names:
                    continue
                where += f" AND {column} = %s"
                params.append(session_id)
            row = db.execute(f'SELECT count(*) FROM "{table}" WHERE {where}', params).fetchone()
            if row and row[0]:
                out[table] = int(row[0])
    return out


def test_a_write_waiting_on_a_session_the_sweep_began_erasing_does_not_land(
    database: tuple[str, str], tmp_path: Path
) -> None:
    url, pg_url = database
    punctual = _server(url, tmp_path / "punctual.log")
    lagging = _server(
        url,
        tmp_path / "lagging.log",
        LD_PRELOAD=_libfaketime(),
        FAKETIME="-60s",  # this replica's clock is a minute behind the database's
        FAKETIME_DONT_FAKE_MONOTONIC="1",
    )
    sid = f"swept-{uuid.uuid4().hex[:8]}"
    try:
        with httpx.Client(timeout=30) as c:
            r = c.post(
                f"{punctual.url}/v1/sessions", json={"id": sid, "config": {"ttl_seconds": TTL}}
            )
            assert r.status_code == 201, r.text
            items = [{"type": "message", "role": "user", "content": f"fact {n}"} for n in range(30)]
            r = c.post(f"{punctual.url}/v1/sessions/{sid}/items", json={"items": items})
            assert r.status_code == 201, r.text
        holder = psycopg.connect(pg_url)  # holds every item row: the sweep's DELETE waits
        holder.execute("SELECT 1 FROM items WHERE session_id = %s FOR UPDATE", [sid])

        def expired() -> bool:
            with psycopg.connect(pg_url, autocommit=True) as db:
                row = db.execute(
                    "SELECT expires_at <= clock_timestamp() FROM sessions WHERE id = %s", [sid]
                ).fetchone()
            return bool(row and row[0])

        _wait_for("the session to expire by the database's clock", expired, timeout=TTL + 30)
        sweep = subprocess.Popen(
            [sys.executable, "-m", "app.cli", "sweep"],
            env={
                **os.environ,
                "DATABASE_URL": url,
                "REDIS_URL": "",
                "AUTO_MIGRATE": "false",
                "RETENTION__SWEEP_BATCH_ROWS": "10",
            },
            cwd=str(ROOT),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        _wait_for(
            "the sweep to wait inside its first batch", lambda: _waiting_on_locks(pg_url) >= 1
        )
        answer: dict[str, httpx.Response] = {}

        def append() -> None:
            with httpx.Client(timeout=60) as c:
                answer["r"] = c.post(
                    f"{lagging.url}/v1/sessions/{sid}/items",
                    json={"items": [{"type": "message", "role": "user", "content": "late"}]},
                )

        writer = threading.Thread(target=append)
        writer.start()
        # it waits on the session row the sweep holds (judged by its own clock, the session is
        # live), or is refused at once (judged by the database's, it expired)
        _wait_for(
            "the append to wait on the session row or be answered",
            lambda: "r" in answer or _waiting_on_locks(pg_url) >= 2,
        )
        holder.rollback()
        holder.close()
        writer.join(60)
        out, err = sweep.communicate(timeout=120)
        assert sweep.returncode == 0, err.decode()
        report = json.loads(out)
    finally:
        punctual.stop()
        lagging.stop()
    # the late append was not acknowledged, and the session is gone whole, erased once
    assert answer["r"].status_code == 404, answer["r"].text
    assert report["sessions_expired"] == 1, report
    assert _rows_of(pg_url, tenant_id="default", session_id=sid) == {}
    with psycopg.connect(pg_url, autocommit=True) as db:
        audits = db.execute(
            "SELECT reason, row_counts FROM erasures WHERE subject_digest = %s",
            [subject_digest("default", sid)],
        ).fetchall()
    assert len(audits) == 1 and audits[0][0] == "expired", audits
    assert audits[0][1]["items"] == 30, audits


def _create_key(url: str, tenant: str) -> str:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "app.cli",
            "keys",
            "create",
            "--tenant",
            tenant,
            "--name",
            "ops",
            "--scopes",
            "admin,read,write",
        ],
        env={**os.environ, "DATABASE_URL": url, "AUTO_MIGRATE": "false"},
        cwd=str(ROOT),
        capture_output=True,
        text=True,
        check=True,
    )
    return str(json.loads(proc.stdout)["secret"])


def test_a_tenant_erasure_stops_every_replicas_writes_and_leaves_nothing(
    database: tuple[str, str], tmp_path: Path
) -> None:
    url, pg_url = database
    tenant = f"t{uuid.uuid4().hex[:8]}"
    secret = _create_key(url, tenant)
    env = {"REDIS_URL": REDIS_URL, "AUTH__MODE": "on", "AUTH__CACHE_SECONDS": "60"}
    eraser = _server(url, tmp_path / "a.log", **env)
    writer_replica = _server(url, tmp_path / "b.log", **env)
    auth = {"Authorization": f"Bearer {secret}"}
    stop = threading.Event()
    erased_at: list[float] = []
    after: list[tuple[float, int, str]] = []  # (when, status, body) of writes answered after it
    created: list[str] = []

    def write(n: int) -> None:
        with httpx.Client(base_url=writer_replica.url, headers=auth, timeout=30) as c:
            count = 0
            while not stop.is_set():
                count += 1
                sid = f"w{n}-{count}"
                r = c.post(
                    "/v1/sessions/" + sid + "/items",
                    params={"create": "true"},
                    json={"items": [{"type": "message", "role": "user", "content": sid}]},
                )
                done = time.monotonic()
                if r.status_code == 201:
                    created.append(sid)
                if erased_at and done > erased_at[0]:
                    after.append((done, r.status_code, r.text))

    try:
        with httpx.Client(base_url=writer_replica.url, headers=auth, timeout=30) as c:
            assert c.get("/v1/sessions").status_code == 200  # the key is cached there now
        writers = [threading.Thread(target=write, args=(n,)) for n in range(3)]
        for t in writers:
            t.start()
        _wait_for("the writers to create sessions", lambda: len(created) >= 30)
        started = time.monotonic()
        r = httpx.delete(f"{eraser.url}/v1/admin/tenants/{tenant}", headers=auth, timeout=60)
        erased_at.append(time.monotonic())
        assert r.status_code == 200, r.text
        took = erased_at[0] - started
        body = r.json()
        _wait_for("writes after the erasure", lambda: len(after) >= 30)
        stop.set()
        for t in writers:
            t.join(30)
        # every write answered after the erasure returned was refused, none stored
        statuses = {status for _, status, _ in after}
        assert statuses <= {404, 410}, after[:5]
        assert 410 in statuses, after[:5]  # a create: the tenant is gone, however cached its key
        with httpx.Client(base_url=writer_replica.url, headers=auth, timeout=30) as c:
            assert c.get("/v1/sessions").json()["items"] == []
    finally:
        stop.set()
        eraser.stop()
        writer_replica.stop()
    assert body["sessions"] >= 30 and body["row_counts"]["api_keys"] == 1, body
    assert took < 60
    assert _rows_of(pg_url, tenant_id=tenant) == {}
    with psycopg.connect(pg_url, autocommit=True) as db:
        tombstone = db.execute(
            "SELECT finished_at FROM tenant_erasures WHERE tenant_digest = %s",
            [tenant_digest(tenant)],
        ).fetchone()
    assert tombstone is not None and tombstone[0] is not None
