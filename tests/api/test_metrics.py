"""/metrics: the series DESIGN §8 names exist from start-up and move with traffic.

In-process tests (both backends) read deltas: the metric objects are per process, and other
tests in this process write too. The start-up and multi-worker tests run real server processes,
whose counters start at zero.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from app.locks import RedisLocks, compaction_key
from app.main import create_app
from app.settings import Settings
from tests.api.helpers import append, assert_problem, assistant, create, user
from tests.conftest import make_settings
from tests.support.fake_llm import FakeLLMServer
from tests.support.services import REDIS_URL, ServerProcess
from tests.support.spec_check import ASYNC_HOOKS

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]

ITEMS_ROUTE = "/v1/sessions/{session_id}/items"

# (sample name, labels) that must be present before any request.
STARTUP_SERIES = [
    (
        "http_request_duration_seconds_bucket",
        {"route": ITEMS_ROUTE, "method": "POST", "status": "201", "le": "0.1"},
    ),
    (
        "http_request_duration_seconds_count",
        {"route": "/v1/sessions/{session_id}", "method": "GET", "status": "200"},
    ),
    ("session_memory_lock_wait_seconds_count", {"outcome": "acquired"}),
    ("session_memory_lock_wait_seconds_count", {"outcome": "timeout"}),
    ("session_memory_items_appended_total", {}),
    ("session_memory_append_batch_size_count", {}),
    ("session_memory_append_batch_size_sum", {}),
    ("session_memory_projected_tokens_count", {}),
    ("session_memory_projected_tokens_bucket", {"le": "4096.0"}),
    ("session_memory_compaction_duration_seconds_count", {}),
    ("session_memory_compaction_failures_total", {}),
]


def parse(text: str) -> Samples:
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return out


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def has(samples: Samples, name: str, **labels: str) -> bool:
    return (name, frozenset(labels.items())) in samples


async def scrape(client: httpx.AsyncClient) -> Samples:
    r = await client.get("/metrics")
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/plain")
    return parse(r.text)


async def test_traffic_moves_the_series(client: httpx.AsyncClient, sid: str) -> None:
    before = await scrape(client)
    await create(client, sid)
    key = {"Idempotency-Key": f"m-{sid}"}
    batch = [user("one"), user("two"), user("three")]
    assert (await append(client, sid, batch, headers=key)).status_code == 201
    replay = await append(client, sid, batch, headers=key)
    assert replay.status_code == 201 and replay.headers.get("idempotent-replayed") == "true"
    assert (await client.get(f"/v1/sessions/{sid}/items")).status_code == 200
    assert (await client.get("/v1/sessions/no-such-session")).status_code == 404
    assert (await client.get("/no/such/route")).status_code == 404
    after = await scrape(client)

    def delta(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    post_items = {"route": ITEMS_ROUTE, "method": "POST", "status": "201"}
    assert delta("http_request_duration_seconds_count", **post_items) == 2
    assert delta("http_request_duration_seconds_bucket", **post_items, le="+Inf") == 2
    assert delta("http_request_duration_seconds_sum", **post_items) > 0
    assert (
        delta("http_request_duration_seconds_count", route=ITEMS_ROUTE, method="GET", status="200")
        == 1
    )
    assert (
        delta(
            "http_request_duration_seconds_count",
            route="/v1/sessions/{session_id}",
            method="GET",
            status="404",
        )
        == 1
    )
    assert (
        delta("http_request_duration_seconds_count", route="unmatched", method="GET", status="404")
        == 1
    )
    # route templates, never raw paths: label cardinality is bounded by the API
    assert not any(sid in v or "no-such" in v for _, labels in after for _, v in labels)

    # the replay is not counted as stored items
    assert delta("session_memory_items_appended_total") == 3
    assert delta("session_memory_append_batch_size_count") == 1
    assert delta("session_memory_append_batch_size_sum") == 3
    assert delta("session_memory_append_batch_size_bucket", le="5.0") == 1
    assert delta("session_memory_append_batch_size_bucket", le="2.0") == 0
    # writes are ordered by the session row: none of them took a lock (DESIGN §6)
    assert delta("session_memory_lock_wait_seconds_count", outcome="acquired") == 0
    assert delta("session_memory_lock_wait_seconds_count", outcome="timeout") == 0


async def test_hooks_for_projection_and_compaction(settings: Settings) -> None:
    """Projection and compaction code reports through ``Runtime.notify``; the metrics hear it."""
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost", event_hooks=ASYNC_HOOKS) as client:
            before = await scrape(client)
            rt = app.state.runtime
            rt.notify("context_projected", 3000)
            rt.notify("context_projected", 150_000)
            rt.notify("compaction_finished", 0.2, False)
            rt.notify("compaction_finished", 1.5, True)
            after = await scrape(client)

    def delta(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert delta("session_memory_projected_tokens_count") == 2
    assert delta("session_memory_projected_tokens_sum") == 153_000
    assert delta("session_memory_projected_tokens_bucket", le="4096.0") == 1
    assert delta("session_memory_projected_tokens_bucket", le="200000.0") == 2
    assert delta("session_memory_compaction_duration_seconds_count") == 2
    assert delta("session_memory_compaction_duration_seconds_bucket", le="0.25") == 1
    assert delta("session_memory_compaction_failures_total") == 1


@pytest.fixture(scope="module")
def fake_llm() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as server:
        yield server


async def test_compaction_lock_waits_are_measured(
    backend: str, fake_llm: FakeLLMServer, request: pytest.FixtureRequest, sid: str
) -> None:
    """The lock single-flights LLM compactions (Redis; in-process on SQLite), and its waits are
    measured: a compaction takes it (``acquired``); one that finds it held by another replica
    past ``LOCK__WAIT_SECONDS`` is a 503 ``lock-timeout`` and a ``timeout`` wait, and never
    calls the model. Writes meanwhile take no lock and do not wait for it."""
    settings = make_settings(
        backend,
        request,
        llm={"base_url": fake_llm.base_url, "model": "fake-model", "retries": 0},
        lock={"wait_seconds": 0.2},
    )
    fake_llm.reset()
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost", event_hooks=ASYNC_HOOKS) as client:
            rt = app.state.runtime
            await create(client, sid)
            turns = [user("fix the bug"), assistant("reading"), user("and now?"), assistant("ok")]
            assert (await append(client, sid, turns)).status_code == 201
            compact = {"policy": "llm", "keep_last_items": 1}

            start = await scrape(client)
            r = await client.post(f"/v1/sessions/{sid}/compact", json=compact)
            assert r.status_code == 200 and r.json()["compacted_items"] == 2, r.text
            assert len(fake_llm.requests()) == 1
            compacted = await scrape(client)

            # another replica compacts this session (on SQLite: another task of this process)
            other = (
                rt.locks
                if backend == "sqlite"
                else RedisLocks(REDIS_URL, wait_seconds=1, ttl_seconds=5)
            )
            try:
                async with other.hold(compaction_key("default", sid)):
                    blocked = await client.post(f"/v1/sessions/{sid}/compact", json=compact)
                    # a write neither takes the lock nor waits for it
                    written = await append(client, sid, [user("meanwhile")])
            finally:
                if other is not rt.locks:
                    await other.close()
            after = await scrape(client)

    def delta(a: Samples, b: Samples, outcome: str, part: str = "count") -> float:
        name = f"session_memory_lock_wait_seconds_{part}"
        return value(b, name, outcome=outcome) - value(a, name, outcome=outcome)

    assert delta(start, compacted, "acquired") == 1 and delta(start, compacted, "timeout") == 0
    body = assert_problem(blocked, 503, "lock-timeout")
    assert int(blocked.headers["retry-after"]) >= 1, body
    assert len(fake_llm.requests()) == 1  # the blocked compaction never called the model
    assert written.status_code == 201, written.text
    assert delta(compacted, after, "timeout") == 1
    assert 0.15 < delta(compacted, after, "timeout", "sum") < 2
    # on SQLite the other holder is the app's own lock manager: its hold counts as acquired
    assert delta(compacted, after, "acquired") == (1 if backend == "sqlite" else 0)


async def test_a_write_that_gives_up_on_a_busy_row_is_a_measured_503(
    backend: str, request: pytest.FixtureRequest, sid: str
) -> None:
    """A write waits ``LOCK__WAIT_SECONDS`` for the session row (Postgres) or the database
    (SQLite, ``BEGIN IMMEDIATE``) another transaction holds, then answers 503 ``lock-timeout``
    with Retry-After, counted by the request metrics under its route; it takes no Redis lock
    (no lock wait is recorded)."""
    settings = make_settings(backend, request, lock={"wait_seconds": 0.2})
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost", event_hooks=ASYNC_HOOKS) as client:
            await create(client, sid)
            before = await scrape(client)
            async with hold_session_row(settings.database_url, sid, seconds=1.5):
                started = time.monotonic()
                r = await append(client, sid, [user("blocked")])
                waited = time.monotonic() - started
            after = await scrape(client)
            stored = (await client.get(f"/v1/sessions/{sid}")).json()["item_count"]

    def delta(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    for outcome in ("acquired", "timeout"):
        assert delta("session_memory_lock_wait_seconds_count", outcome=outcome) == 0
    posts = {"route": ITEMS_ROUTE, "method": "POST"}
    assert_problem(r, 503, "lock-timeout")
    assert int(r.headers["retry-after"]) >= 1
    assert 0.15 < waited < 1.5, (backend, waited)  # the server's wait, not the holder's 1.5 s
    assert delta("http_request_duration_seconds_count", **posts, status="503") == 1
    assert stored == 0


@asynccontextmanager
async def hold_session_row(database_url: str, sid: str, *, seconds: float) -> AsyncIterator[None]:
    """Another transaction holds the session for ``seconds``: the row ``FOR UPDATE`` on
    Postgres, the database's write lock (``BEGIN IMMEDIATE``) on SQLite. Taken and released in
    threads, so the app's event loop (and whatever write of it is in flight) runs meanwhile."""

    def take() -> Any:
        if database_url.startswith("sqlite"):
            import sqlite3

            path = database_url.split("///", 1)[1]
            lite = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=30)
            lite.execute("BEGIN IMMEDIATE")
            lite.execute("UPDATE sessions SET version = version WHERE id = ?", (sid,))
            return lite
        import psycopg

        pg = psycopg.connect(database_url.replace("postgresql+psycopg://", "postgresql://"))
        held = pg.execute(
            "SELECT 1 FROM sessions WHERE tenant_id = 'default' AND id = %s FOR UPDATE", (sid,)
        )
        assert held.fetchall() == [(1,)]
        return pg

    db = await asyncio.to_thread(take)
    release = threading.Timer(seconds, db.rollback)
    release.start()
    try:
        yield
    finally:
        await asyncio.to_thread(release.join)
        db.close()


@pytest.fixture
def sqlite_server(tmp_path: Path) -> Iterator[ServerProcess]:
    server = ServerProcess(
        env={"DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'm.db'}", "LOG_LEVEL": "info"},
        log_path=tmp_path / "server.log",
    )
    server.start()
    yield server
    server.stop()


def test_series_exist_from_start_up_and_logs_are_json(sqlite_server: ServerProcess) -> None:
    import orjson

    with httpx.Client(base_url=sqlite_server.url, timeout=10) as client:
        first = parse(client.get("/metrics").text)
        for name, labels in STARTUP_SERIES:
            assert has(first, name, **labels), (name, labels)
        assert value(first, "session_memory_items_appended_total") == 0
        r = client.post("/v1/sessions", json={"id": "logged"}, headers={"X-Request-ID": "req-42"})
        assert r.status_code == 201 and r.headers["x-request-id"] == "req-42"
        generated = client.get("/v1/sessions/nope").headers["x-request-id"]
    sqlite_server.stop()  # flushes the log
    assert sqlite_server.log_path is not None
    lines = [orjson.loads(line) for line in sqlite_server.log_path.read_text().splitlines()]
    for line in lines:  # every line is one JSON object with the common fields
        assert {"time", "level", "logger", "message"} <= line.keys(), line
    access = {line.get("request_id"): line for line in lines if line["logger"] == "app.access"}
    assert access["req-42"] | {"duration_ms": 0} == access["req-42"] | {
        "method": "POST",
        "path": "/v1/sessions",
        "status": 201,
        "duration_ms": 0,
    }
    assert access["req-42"]["duration_ms"] > 0
    assert access[generated]["status"] == 404 and len(generated) >= 16
    assert any(line["logger"].startswith("uvicorn") for line in lines)


def _per_worker(directory: Path, name: str) -> list[float]:
    """``name``'s value in each worker's own files (one registry per process id)."""
    import shutil
    import tempfile

    from prometheus_client import CollectorRegistry, multiprocess

    out = []
    for pid in sorted({f.stem.rsplit("_", 1)[1] for f in directory.glob("*_*.db")}):
        alone = Path(tempfile.mkdtemp(prefix=f"worker-{pid}-", dir=directory.parent))
        for f in directory.glob(f"*_{pid}.db"):
            shutil.copy(f, alone)
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry, path=str(alone))  # type: ignore[no-untyped-call]
        out.append(registry.get_sample_value(name) or 0.0)
    return out


def test_several_workers_report_one_sum(pg_database: str, tmp_path: Path) -> None:
    """``serve --workers 2``: each scrape has every worker's counts (multiprocess mode), and a
    previous run's files are cleared at start."""
    prom = tmp_path / "prom"
    prom.mkdir()
    (prom / "counter_1.db").write_bytes(b"stale garbage from a previous run")
    server = ServerProcess(
        env={
            "DATABASE_URL": pg_database,
            "REDIS_URL": REDIS_URL,
            "AUTO_MIGRATE": "false",
            "LOG_LEVEL": "warning",
            "PROMETHEUS_MULTIPROC_DIR": str(prom),
        },
        log_path=tmp_path / "server.log",
    )
    server.start(workers=2)
    sid = f"mw-{uuid.uuid4().hex[:8]}"
    try:
        # fresh connections, several at a time, so that both workers accept some: one idle
        # worker may otherwise win every accept of a sequential client
        assert httpx.post(server.url + "/v1/sessions", json={"id": sid}).status_code == 201

        def post(i: int) -> httpx.Response:
            body = {"items": [user(f"m{i}"), user(f"n{i}")]}
            return httpx.post(f"{server.url}/v1/sessions/{sid}/items", json=body, timeout=30)

        sent = 0
        with ThreadPoolExecutor(max_workers=10) as pool:
            # until both workers have served some (bounded): which worker accepts is the
            # kernel's choice, and one idle worker can win a whole burst
            for _ in range(10):
                for r in pool.map(post, range(sent, sent + 20)):
                    assert r.status_code == 201, r.text
                sent += 20
                counts = _per_worker(prom, "session_memory_items_appended_total")
                if len(counts) == 2 and all(n > 0 for n in counts):
                    break
        for _ in range(4):  # whichever worker answers, it reports both
            samples = parse(httpx.get(server.url + "/metrics").text)
            assert value(samples, "session_memory_items_appended_total") == 2 * sent
            assert value(samples, "session_memory_append_batch_size_count") == sent
            assert (
                value(
                    samples,
                    "http_request_duration_seconds_count",
                    route=ITEMS_ROUTE,
                    method="POST",
                    status="201",
                )
                == sent
            )
        workers = _per_worker(prom, "session_memory_items_appended_total")
        assert not (prom / "counter_1.db").exists()
        assert len(workers) == 2 and sum(workers) == 2 * sent
        assert all(n > 0 for n in workers), f"one worker served everything: {workers}"
    finally:
        server.stop()
