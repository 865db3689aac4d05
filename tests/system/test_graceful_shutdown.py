"""SIGTERM lets in-flight writes finish: the server stops listening at once, completes the
request it is in the middle of, stores it, answers it, then exits cleanly."""

from __future__ import annotations

import signal
import threading
import time
import uuid
from pathlib import Path

import httpx
import psycopg

from tests.support.services import REDIS_URL, ServerProcess


def waiting_on(monitor: psycopg.Connection, holder_pid: int, timeout: float = 5) -> bool:
    """Whether a backend comes to wait for a lock the ``holder_pid`` backend holds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        blocked = monitor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))",
            (holder_pid,),
        ).fetchone()
        if blocked and blocked[0]:
            return True
        time.sleep(0.02)
    return False


def test_sigterm_finishes_the_in_flight_write(
    pg_database: str, pg_server: ServerProcess, tmp_path: Path
) -> None:
    victim = ServerProcess(
        env={
            "DATABASE_URL": pg_database,
            "REDIS_URL": REDIS_URL,
            "AUTO_MIGRATE": "false",
            "LOCK__WAIT_SECONDS": "20",
        },
        log_path=tmp_path / "server.log",
    )
    victim.start()
    assert victim.proc is not None
    proc = victim.proc
    sid = f"graceful-{uuid.uuid4().hex[:8]}"
    batch = [{"type": "message", "role": "user", "content": f"line {i} " * 20} for i in range(300)]
    db_url = pg_database.replace("postgresql+psycopg://", "postgresql://")
    holder = psycopg.connect(db_url)
    monitor = psycopg.connect(db_url, autocommit=True)
    release = threading.Timer(2.0, holder.rollback)
    result: dict[str, httpx.Response | BaseException] = {}
    try:
        assert httpx.post(victim.url + "/v1/sessions", json={"id": sid}).status_code == 201
        # Another writer holds the session's row: our append is in flight, waiting on it in
        # Postgres, when the signal arrives, and for 2 s more (then the row is free).
        held = holder.execute(
            "SELECT 1 FROM sessions WHERE tenant_id = 'default' AND id = %s FOR UPDATE", (sid,)
        )
        assert held.fetchall() == [(1,)]

        def write() -> None:
            try:
                result["response"] = httpx.post(
                    f"{victim.url}/v1/sessions/{sid}/items",
                    json={"items": batch},
                    headers={"Idempotency-Key": f"{sid}-big"},
                    timeout=30,
                )
            except BaseException as exc:  # reported below
                result["response"] = exc

        writer = threading.Thread(target=write)
        writer.start()
        assert waiting_on(monitor, holder.info.backend_pid), "the append never waited on the row"
        signalled = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        release.start()

        # the listener closes: no new request is taken while the old one finishes
        deadline = time.monotonic() + 3
        refused = False
        while time.monotonic() < deadline and not refused:
            try:
                httpx.get(victim.url + "/healthz", timeout=0.5)
                time.sleep(0.05)
            except httpx.TransportError:
                refused = True
        assert refused, "the server kept accepting requests after SIGTERM"
        assert proc.poll() is None, "exited before finishing the in-flight write"

        writer.join(30)
        release.join()
        response = result["response"]
        assert isinstance(response, httpx.Response), repr(response)
        assert response.status_code == 201, response.text
        assert [i["seq"] for i in response.json()["items"]] == list(range(1, 301))
        assert time.monotonic() - signalled >= 1.2  # it really waited for the row
        # uvicorn re-raises the signal once it has shut down cleanly
        assert proc.wait(15) in (0, -signal.SIGTERM)
        log = (tmp_path / "server.log").read_text()
        assert "Application shutdown complete" in log and "Traceback" not in log
    finally:
        release.cancel()
        victim.stop()
        holder.close()
        monitor.close()

    # stored, all of it, as acknowledged: read back through another server
    with httpx.Client(base_url=pg_server.url) as client:
        items = client.get(f"/v1/sessions/{sid}/items", params={"limit": 1000}).json()["items"]
        session = client.get(f"/v1/sessions/{sid}").json()
    assert [i["content"] for i in items] == [b["content"] for b in batch]
    assert session["item_count"] == 300 and session["version"] == 2
