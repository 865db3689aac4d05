"""Prometheus metrics: the metric objects, the functions that record into them, and the
exposition of ``/metrics``.

Every series exists from start-up: metrics without labels appear as soon as they are defined,
and ``init_routes`` creates each route's label set before the first request, so dashboards and
alerts see zeros rather than gaps.

The rest of the code stays unaware of Prometheus: locks report waits through
``LockStats.listener`` and services through ``Runtime.notify(hook, ...)``; ``install`` connects
both to the functions below. The hooks:

==========================  ==========================================  ======================
hook                        arguments                                   function
==========================  ==========================================  ======================
``items_appended``          ``count: int`` (one stored batch)           ``observe_append``
``context_projected``       ``tokens: int`` (one projected context)     ``observe_projection``
``compaction_finished``     ``seconds: float, failed: bool``            ``observe_compaction``
``retention_swept``         ``report: SweepReport`` (one sweep run)     ``observe_sweep``
``tenant_erased``           ``sessions: int, counts: ErasedCounts``     ``observe_tenant_erased``
``vectors_indexed``         ``lags: list[float]`` (seconds from each     ``observe_indexed``
                            item's append to its stored vector)
``index_pending``           ``pending: int`` (items without a vector     ``observe_index_pending``
                            of the current model, all tenants)
==========================  ==========================================  ======================

Several worker processes (``serve --workers N``): when ``PROMETHEUS_MULTIPROC_DIR`` is set
(``serve`` sets it to a fresh directory for N > 1), prometheus_client keeps the values in
memory-mapped files there and ``/metrics`` aggregates every worker's. Without it, each process
reports its own values, which is right for one worker per container (the compose file's way).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
    values,
)

if TYPE_CHECKING:
    from app.domain.retention import ErasedCounts
    from app.locks import LocalLocks, RedisLocks
    from app.services.retention import SweepReport
    from app.services.runtime import Runtime

UNMATCHED_ROUTE = "unmatched"

# Request latencies: from well under a millisecond (reads on SQLite) to the lock wait limit.
LATENCY_BUCKETS = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
)
LOCK_WAIT_BUCKETS = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
)
BATCH_SIZE_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)
TOKEN_BUCKETS = (256, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072, 200000, 500000, 1000000)
COMPACTION_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)

HTTP_REQUEST_DURATION = Histogram(
    "http_request_duration_seconds",
    "HTTP request latency by route template, method and status",
    ["route", "method", "status"],
    buckets=LATENCY_BUCKETS,
)
LOCK_WAIT = Histogram(
    "session_memory_lock_wait_seconds",
    "Time a single-flight holder (an LLM compaction) waited for its lock, by outcome "
    "(acquired, timeout); writes wait for the session row in Postgres instead",
    ["outcome"],
    buckets=LOCK_WAIT_BUCKETS,
)
ITEMS_APPENDED = Counter(
    "session_memory_items_appended",
    "Items stored by appends (idempotent replays not counted)",
)
APPEND_BATCH_SIZE = Histogram(
    "session_memory_append_batch_size",
    "Items per stored append batch",
    buckets=BATCH_SIZE_BUCKETS,
)
PROJECTED_TOKENS = Histogram(
    "session_memory_projected_tokens",
    "Tokens in each projected context",
    buckets=TOKEN_BUCKETS,
)
COMPACTION_DURATION = Histogram(
    "session_memory_compaction_duration_seconds",
    "Duration of compactions, successful or not",
    buckets=COMPACTION_BUCKETS,
)
COMPACTION_FAILURES = Counter(
    "session_memory_compaction_failures",
    "Compactions that failed (nothing was changed)",
)

SWEEP_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
# what the retention sweep and the erasures count, by kind: the tables of a session, and the
# parts of history pruned from live ones
ERASED_KINDS = (
    "sessions",
    "items",
    "events",
    "snapshots",
    "compactions",
    "idempotency_keys",
    "archive",
    "api_keys",
)
RETENTION_ROWS_ERASED = Counter(
    "session_memory_retention_rows_erased",
    "Rows erased by the retention sweep and tenant erasures, by kind (archive, events, "
    "snapshots: pruned from live sessions; the others: whole sessions erased)",
    ["kind"],
)
RETENTION_BYTES_ERASED = Counter(
    "session_memory_retention_bytes_erased",
    "Bytes of stored text and JSON erased by the retention sweep and tenant erasures, by kind",
    ["kind"],
)
RETENTION_SWEEP_DURATION = Histogram(
    "session_memory_retention_sweep_duration_seconds",
    "Duration of the retention sweep runs this process made",
    buckets=SWEEP_BUCKETS,
)
SESSIONS_EXPIRED = Counter(
    "session_memory_sessions_expired",
    "Expired sessions the retention sweep erased",
)

INDEX_LAG_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0)
VECTORS_INDEXED = Counter(
    "session_memory_vectors_indexed",
    "Item vectors the semantic indexer stored (rate(): items indexed per second)",
)
INDEX_LAG = Histogram(
    "session_memory_index_lag_seconds",
    "Seconds from an item's append to its vector being stored (how stale semantic search is)",
    buckets=INDEX_LAG_BUCKETS,
)
INDEX_PENDING = Gauge(
    "session_memory_index_pending",
    "Items without a vector of the current model, all tenants (as last counted by the indexer)",
    multiprocess_mode="max",
)

for _outcome in ("acquired", "timeout"):
    LOCK_WAIT.labels(outcome=_outcome)
for _kind in ERASED_KINDS:
    RETENTION_ROWS_ERASED.labels(kind=_kind)
    RETENTION_BYTES_ERASED.labels(kind=_kind)


def multiprocess_mode() -> bool:
    """True when values live in ``PROMETHEUS_MULTIPROC_DIR`` (decided by prometheus_client
    when it was imported)."""
    return values.ValueClass is not values.MutexValue


# (route, method, status) -> its latency series: ``labels()`` validates and locks on every
# call, and every request makes one. Bounded: route templates, methods and statuses are few.
_REQUEST_SERIES: dict[tuple[str, str, int], Any] = {}


def observe_request(route: str, method: str, status: int, seconds: float) -> None:
    key = (route, method, status)
    series = _REQUEST_SERIES.get(key)
    if series is None:
        series = HTTP_REQUEST_DURATION.labels(route=route, method=method, status=str(status))
        _REQUEST_SERIES[key] = series
    series.observe(seconds)


def observe_lock_wait(seconds: float, outcome: str) -> None:
    LOCK_WAIT.labels(outcome=outcome).observe(seconds)


def observe_append(count: int) -> None:
    ITEMS_APPENDED.inc(count)
    APPEND_BATCH_SIZE.observe(count)


def observe_projection(tokens: int) -> None:
    PROJECTED_TOKENS.observe(tokens)


def observe_compaction(seconds: float, failed: bool) -> None:
    COMPACTION_DURATION.observe(seconds)
    if failed:
        COMPACTION_FAILURES.inc()


def _observe_erased(counts: ErasedCounts) -> None:
    for kind, rows in counts.rows.items():
        RETENTION_ROWS_ERASED.labels(kind=kind).inc(rows)
        RETENTION_BYTES_ERASED.labels(kind=kind).inc(counts.bytes.get(kind, 0))


def observe_sweep(report: SweepReport) -> None:
    RETENTION_SWEEP_DURATION.observe(report.seconds)
    SESSIONS_EXPIRED.inc(report.sessions_expired)
    _observe_erased(report.erased)


def observe_tenant_erased(sessions: int, counts: ErasedCounts) -> None:
    _observe_erased(counts)


def observe_indexed(lags: list[float]) -> None:
    VECTORS_INDEXED.inc(len(lags))
    for lag in lags:
        INDEX_LAG.observe(lag)


def observe_index_pending(pending: int) -> None:
    INDEX_PENDING.set(pending)


HOOKS = {
    "vectors_indexed": observe_indexed,
    "index_pending": observe_index_pending,
    "items_appended": observe_append,
    "context_projected": observe_projection,
    "compaction_finished": observe_compaction,
    "retention_swept": observe_sweep,
    "tenant_erased": observe_tenant_erased,
}


def init_routes(routes: Iterable[tuple[str, str, int]]) -> None:
    """Create the latency series of each (route template, method, usual status)."""
    for route, method, status in routes:
        HTTP_REQUEST_DURATION.labels(route=route, method=method, status=str(status))


def install(runtime: Runtime, locks: LocalLocks | RedisLocks) -> None:
    """Connect the runtime's hooks and the locks' wait reports to the metrics."""
    for name, callback in HOOKS.items():
        runtime.hooks.setdefault(name, callback)
    locks.stats.listener = observe_lock_wait


def exposition() -> tuple[bytes, str]:
    """The text format body and its content type, for every worker in multiprocess mode."""
    if multiprocess_mode():
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        return generate_latest(registry), CONTENT_TYPE_LATEST
    return generate_latest(REGISTRY), CONTENT_TYPE_LATEST
