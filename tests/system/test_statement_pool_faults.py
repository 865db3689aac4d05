"""The statement connections of a live server (``app.store.statement_pool``) lose no slot to a
broken connection: a connection left in a transaction after an append, every connection
dropped by Postgres, and the database refusing new connections for a while each cost at most
the requests they hit, and afterwards the whole pool serves appends and context reads at once.

(Before: a connection released in a transaction raised out of its check-in and kept its slot
for good; with ``DB_POOL_SIZE=4`` the three statement slots were gone after three such
appends, and every append and context read after waited the pool timeout and got a 503.)
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import psycopg
import pytest

from tests.support.faulty_serve import LEAVE_IN_TRANSACTION
from tests.support.services import (
    PG_ADMIN_URL,
    REDIS_URL,
    ServerProcess,
    create_pg_database,
    drop_pg_database,
)

POOL_SIZE = 4  # three statement slots, one connection left to transactions
SHARE = 3


@pytest.fixture
def private_database() -> Iterator[tuple[str, str]]:
    """A database of its own: the test counts and terminates every connection to it."""
    url, name = create_pg_database()
    yield url, name
    drop_pg_database(name)


def _admin(sql: str, *params: object) -> list[tuple[object, ...]]:
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as admin:
        cursor = admin.execute(sql, params)  # type: ignore[arg-type]
        return cursor.fetchall() if cursor.description else []


def _backends(name: str) -> list[tuple[object, ...]]:
    return _admin(
        "SELECT pid, state FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
        name,
    )


def message(text: str) -> dict[str, object]:
    return {"type": "message", "role": "user", "content": text}


def test_broken_statement_connections_lose_no_slot_in_a_live_server(
    private_database: tuple[str, str], tmp_path: Path
) -> None:
    url, name = private_database
    server = ServerProcess(
        env={"DATABASE_URL": url, "REDIS_URL": REDIS_URL, "AUTO_MIGRATE": "false",
             "DB_POOL_SIZE": str(POOL_SIZE), "LOG_LEVEL": "warning"},
        log_path=tmp_path / "server.log",
        module="tests.support.faulty_serve",
    )
    server.start()
    run = uuid.uuid4().hex[:8]
    sids = [f"slots-{run}-{i}" for i in range(SHARE + 1)]
    sent: dict[str, list[str]] = {sid: [] for sid in sids}
    # well under the server's pool timeout (30 s): a call waiting for a lost slot fails here
    client = httpx.Client(base_url=server.url, timeout=10)

    def append(sid: str, text: str) -> httpx.Response:
        r = client.post(f"/v1/sessions/{sid}/items", json={"items": [message(text)]})
        if r.status_code == 201:
            sent[sid].append(text)
        return r

    def whole_pool_serves(tag: str) -> None:
        """One append and one context read per session, all at once: more calls than slots."""
        def work(sid: str) -> tuple[int, int]:
            r = append(sid, f"{tag} {sid}")
            ctx = client.get(f"/v1/sessions/{sid}/context", params={"max_items": 50})
            return r.status_code, ctx.status_code

        with ThreadPoolExecutor(len(sids)) as threads:
            statuses = list(threads.map(work, sids * 3))
        assert statuses == [(201, 200)] * len(statuses), statuses

    try:
        for sid in sids:
            assert client.post("/v1/sessions", json={"id": sid}).status_code == 201
        whole_pool_serves("warm")

        # 1. check-in: appends whose connection is left in a transaction, three times the
        # slots (each is committed and answered as usual: the connection is what is broken)
        faulted: list[int | str] = []
        for i in range(3 * SHARE):
            try:
                faulted.append(append(sids[0], f"{LEAVE_IN_TRANSACTION} {i}").status_code)
            except httpx.TransportError as exc:  # (the server dropped the HTTP connection)
                faulted.append(type(exc).__name__)
        whole_pool_serves("after the check-in fault")
        assert faulted == [201] * len(faulted), faulted
        # the broken connections were closed, not kept open in their transaction
        states = [state for _, state in _backends(name)]
        assert "idle in transaction" not in states and len(states) <= POOL_SIZE, states

        # 2. checkout of kept connections: Postgres drops every connection (a restart)
        assert _admin(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = %s", name,
        )[0][0] >= 1
        retried = [append(sids[1], f"after the drop {i}").status_code for i in range(3)]
        assert retried[-1] == 201 and set(retried) <= {201, 503}, retried
        whole_pool_serves("after the drop")

        # 3. checkout of new connections: the database refuses them for a while
        _admin("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", name)
        _admin(f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS false')
        try:
            for i in range(2 * SHARE):
                r = append(sids[2], f"refused {i}")
                assert r.status_code == 503, r.text  # at once, not after a pool timeout
                assert r.headers["content-type"].startswith("application/problem+json")
        finally:
            _admin(f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS true')
        whole_pool_serves("after the refusal")

        # nothing acknowledged was lost, nothing stored twice
        for sid in sids:
            r = client.get(f"/v1/sessions/{sid}/items", params={"limit": 1000})
            assert r.status_code == 200, r.text
            stored = [item["content"] for item in r.json()["items"]]
            assert stored == sent[sid], sid
    finally:
        client.close()
        server.stop()
