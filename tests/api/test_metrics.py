"""/metrics: the series DESIGN §8 names exist from start-up and move with traffic.

In-process tests (both backends) read deltas: the metric objects are per process, and other
tests in this process write too. The start-up and multi-worker tests run real server processes,
whose counters start at zero.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from app.main import create_app
from app.settings import Settings
from tests.api.helpers import append, create, user
from tests.support.services import REDIS_URL, ServerProcess

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
    # create, append and the replay each took the session lock
    assert delta("session_memory_lock_wait_seconds_count", outcome="acquired") >= 3


async def test_hooks_for_projection_and_compaction(settings: Settings) -> None:
    """Projection and compaction code reports through ``Runtime.notify``; the metrics hear it."""
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
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


async def test_lock_timeouts_are_measured(settings: Settings, sid: str) -> None:
    """A writer that gives up on a busy session is a 503 and a ``timeout`` lock wait."""
    from app.locks import lock_key

    app = create_app(
        settings.model_copy(update={"lock": settings.lock.model_copy(update={"wait_seconds": 0.2})})
    )
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            await create(client, sid)
            before = await scrape(client)
            rt = app.state.runtime
            async with rt.locks.hold(lock_key("default", sid)):
                r = await append(client, sid, [user("blocked")])
            after = await scrape(client)
    assert r.status_code == 503, r.text
    timeouts = value(after, "session_memory_lock_wait_seconds_count", outcome="timeout") - value(
        before, "session_memory_lock_wait_seconds_count", outcome="timeout"
    )
    waited = value(after, "session_memory_lock_wait_seconds_sum", outcome="timeout") - value(
        before, "session_memory_lock_wait_seconds_sum", outcome="timeout"
    )
    assert timeouts == 1 and 0.15 < waited < 2


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

    from prometheus_client import CollectorRegistry, multiprocess

    out = []
    for pid in sorted({f.stem.rsplit("_", 1)[1] for f in directory.glob("*_*.db")}):
        alone = directory.parent / f"worker-{pid}"
        alone.mkdir()
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
        # a fresh connection per request lets the kernel spread them over both workers
        assert httpx.post(server.url + "/v1/sessions", json={"id": sid}).status_code == 201
        for i in range(20):
            body = {"items": [user(f"m{i}"), user(f"n{i}")]}
            r = httpx.post(f"{server.url}/v1/sessions/{sid}/items", json=body, timeout=10)
            assert r.status_code == 201, r.text
        for _ in range(4):  # whichever worker answers, it reports both
            samples = parse(httpx.get(server.url + "/metrics").text)
            assert value(samples, "session_memory_items_appended_total") == 40
            assert value(samples, "session_memory_append_batch_size_count") == 20
            assert (
                value(
                    samples,
                    "http_request_duration_seconds_count",
                    route=ITEMS_ROUTE,
                    method="POST",
                    status="201",
                )
                == 20
            )
        workers = _per_worker(prom, "session_memory_items_appended_total")
        assert not (prom / "counter_1.db").exists()
        assert len(workers) == 2 and sum(workers) == 40
        assert all(n > 0 for n in workers), f"one worker served everything: {workers}"
    finally:
        server.stop()
