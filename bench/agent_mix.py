"""The agent workload against the floor's same I/O, a mix with transactions, and a memory soak.

Run through ``bench/harness.py --mode agent`` or ``--mode soak`` (issue 36). One service
worker (``serve --workers 1``), Postgres + Redis, auth on, against the floor app
(bench/floor_app.py, also one worker), in the same run:

- **agent mix**: 32 connections over 2,000 sessions of about 4,500 tokens each. Every
  connection loops: an append of one small message with ``?create=true`` (what the SDK
  sessions send), then a context read of the same session at ``max_tokens=4000`` right
  after it (so no prompt cache answers it). The floor does the same I/O: an INSERT, then an
  indexed SELECT of as many newest rows as the service's read projects. Also the same mix
  with plain appends, for reference.
- **transactions mix**: the agent mix where one step in eight is a transaction instead of an
  append: a window compaction, a snapshot, or a fork followed by the fork's deletion. Each
  class's throughput and latency are reported: none may starve.
- **soak** (``--mode soak``): the agent mix for ``--soak-minutes``, the worker's RSS sampled
  every 30 s.

The client is a small asyncio HTTP/1.1 client (one keep-alive connection per agent, a
request written as bytes, the response read by its Content-Length) under uvloop: a loop that
must follow each append by a read of the same session cannot be written in wrk's Lua, and
httpx costs more CPU per request than the floor does.

The sessions are seeded fast: one template session through the API, then copied 2,000 times
in SQL (its row, items and events), so the service's item cache starts cold, as it would.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from urllib.parse import urlsplit

import httpx

AGENT_SESSIONS = 2000
AGENT_CONNECTIONS = 32
AGENT_BUDGET = 4000
TEMPLATE_TURNS = 40  # about 125 tokens a turn: ~5,000 tokens, more than the budget
TRANSACTION_SHARE = 8  # one step in N is a transaction in the transactions mix
MIX_TARGETS = {"rps": 0.6, "p99": 3.0}


class RawConnection:
    """One keep-alive HTTP/1.1 connection: write a request, read the answer by Content-Length."""

    def __init__(self, base_url: str, headers: dict[str, str]) -> None:
        parts = urlsplit(base_url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.extra = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def request(self, method: str, path: str, body: bytes = b"") -> tuple[int, bytes]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        assert self.reader is not None
        head = (
            f"{method} {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n{self.extra}"
            f"Content-Length: {len(body)}\r\n\r\n"
        )
        self.writer.write(head.encode() + body)
        status_line = await self.reader.readline()
        status = int(status_line.split()[1])
        length = 0
        close = False
        while True:
            line = await self.reader.readline()
            if line in (b"\r\n", b""):
                break
            name, _, value = line.partition(b":")
            lname = name.strip().lower()
            if lname == b"content-length":
                length = int(value)
            elif lname == b"connection" and value.strip().lower() == b"close":
                close = True
        data = await self.reader.readexactly(length) if length else b""
        if close:
            await self.close()
        return status, data

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None


@dataclass
class ClassStats:
    latencies: list[float] = field(default_factory=list)  # ms
    errors: int = 0

    def add(self, ms: float, status: int) -> None:
        self.latencies.append(ms)
        if status >= 300:
            self.errors += 1


@dataclass
class MixResult:
    seconds: float
    classes: dict[str, ClassStats]

    @property
    def requests(self) -> int:
        return sum(len(c.latencies) for c in self.classes.values())

    @property
    def rps(self) -> float:
        return self.requests / self.seconds

    def all_latencies(self) -> list[float]:
        return [v for c in self.classes.values() for v in c.latencies]

    @property
    def errors(self) -> int:
        return sum(c.errors for c in self.classes.values())


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


# A step: given a connection, a session id and a random source, the requests of one loop
# iteration, each recorded under its class.
Step = Callable[[RawConnection, str, random.Random, Callable[[str, float, int], None]], object]


def append_body() -> bytes:
    return json.dumps(
        {"items": [{"type": "message", "role": "user", "content": "Next step: run the tests."}]}
    ).encode()


async def _timed(
    conn: RawConnection, method: str, path: str, body: bytes, record: Callable[..., None], name: str
) -> int:
    start = time.perf_counter()
    status, _ = await conn.request(method, path, body)
    record(name, (time.perf_counter() - start) * 1000, status)
    return status


def service_step(*, create: bool, transactions: bool) -> Step:
    body = append_body()
    query = "?create=true" if create else ""
    read = f"/context?max_tokens={AGENT_BUDGET}&format=openai-chat"

    async def step(
        conn: RawConnection, sid: str, rnd: random.Random, record: Callable[..., None]
    ) -> None:
        base = f"/v1/sessions/{sid}"
        if transactions and rnd.randrange(TRANSACTION_SHARE) == 0:
            kind = rnd.choice(("compact", "snapshot", "fork"))
            if kind == "compact":
                payload = json.dumps({"policy": "window", "keep_last_items": 60}).encode()
                await _timed(conn, "POST", f"{base}/compact", payload, record, "compaction")
            elif kind == "snapshot":
                await _timed(conn, "POST", f"{base}/snapshots", b"{}", record, "snapshot")
            else:
                fork = f"fork-{uuid.uuid4().hex[:12]}"
                payload = json.dumps({"new_session_id": fork}).encode()
                status = await _timed(conn, "POST", f"{base}/fork", payload, record, "fork")
                if status < 300:
                    await _timed(conn, "DELETE", f"/v1/sessions/{fork}", b"", record, "delete")
            return
        await _timed(conn, "POST", f"{base}/items{query}", body, record, "append")
        await _timed(conn, "GET", base + read, b"", record, "context read")

    return step


def floor_step(tenant: str, rows: int) -> Step:
    body = append_body()

    async def step(
        conn: RawConnection, sid: str, rnd: random.Random, record: Callable[..., None]
    ) -> None:
        await _timed(conn, "POST", f"/insert/{sid}", body, record, "append")
        await _timed(
            conn, "GET", f"/select/{tenant}/{sid}?limit={rows}", b"", record, "context read"
        )

    return step


async def _run_mix(
    base_url: str,
    headers: dict[str, str],
    step: Step,
    session_ids: list[str],
    *,
    connections: int,
    seconds: float,
    on_tick: Callable[[float], None] | None = None,
) -> MixResult:
    classes: dict[str, ClassStats] = {}
    measuring = False

    def record(name: str, ms: float, status: int) -> None:
        if measuring:
            classes.setdefault(name, ClassStats()).add(ms, status)

    stop = asyncio.Event()

    async def agent(n: int) -> None:
        rnd = random.Random(n * 7919 + int(time.time()))
        conn = RawConnection(base_url, headers)
        try:
            while not stop.is_set():
                await step(conn, rnd.choice(session_ids), rnd, record)
        finally:
            await conn.close()

    tasks = [asyncio.create_task(agent(n)) for n in range(connections)]
    measuring = True
    started = time.perf_counter()
    while (elapsed := time.perf_counter() - started) < seconds:
        await asyncio.sleep(min(1.0, seconds - elapsed))
        if on_tick is not None:
            on_tick(time.perf_counter() - started)
    measuring = False
    took = time.perf_counter() - started
    stop.set()
    await asyncio.gather(*tasks, return_exceptions=True)
    return MixResult(took, classes)


def run_mix(
    base_url: str,
    headers: dict[str, str],
    step: Step,
    session_ids: list[str],
    *,
    connections: int = AGENT_CONNECTIONS,
    seconds: float,
    on_tick: Callable[[float], None] | None = None,
) -> MixResult:
    try:
        import uvloop

        runner = uvloop.run
    except ImportError:  # pragma: no cover
        runner = asyncio.run
    return runner(
        _run_mix(
            base_url,
            headers,
            step,
            session_ids,
            connections=connections,
            seconds=seconds,
            on_tick=on_tick,
        )
    )


def seed_agent_sessions(
    client: httpx.Client, conninfo: str, tenant: str, turn: Callable[[int], list[dict[str, object]]]
) -> list[str]:
    """2,000 sessions like one template of ``TEMPLATE_TURNS`` turns: the template through the
    API, the copies in SQL (session row, items with their search text, events)."""
    import psycopg

    template = f"agent-template-{uuid.uuid4().hex[:6]}"
    items = [item for n in range(TEMPLATE_TURNS) for item in turn(n)]
    r = client.post(f"/v1/sessions/{template}/items?create=true", json={"items": items})
    assert r.status_code == 201, r.text
    ids = [f"agent-{i:04d}-{uuid.uuid4().hex[:6]}" for i in range(AGENT_SESSIONS)]
    with psycopg.connect(conninfo, autocommit=True) as db:
        for table, key in (("sessions", "id"), ("items", "session_id"), ("events", "session_id")):
            columns = [
                row[0]
                for row in db.execute(
                    "SELECT column_name FROM information_schema.columns WHERE table_name = %s "
                    "AND table_schema = current_schema() AND is_generated = 'NEVER' "
                    "ORDER BY ordinal_position",
                    [table],
                ).fetchall()
            ]
            picked = ", ".join("n.id" if c == key else f"t.{c}" for c in columns)
            db.execute(
                f"INSERT INTO {table} ({', '.join(columns)}) SELECT {picked} "  # noqa: S608
                f"FROM {table} t, unnest(%s::text[]) AS n(id) "
                f"WHERE t.tenant_id = %s AND t.{key} = %s",
                [ids, tenant, template],
            )
        db.execute("ANALYZE")
    return ids


def summary_row(name: str, result: MixResult) -> str:
    lat = result.all_latencies()
    return (
        f"| {name} | {result.rps:.0f} | {percentile(lat, 0.5):.2f} | {percentile(lat, 0.99):.2f} "
        f"| {result.errors} |"
    )


def class_rows(result: MixResult) -> list[str]:
    out = []
    for name, stats in sorted(result.classes.items()):
        out.append(
            f"| {name} | {len(stats.latencies)} | {len(stats.latencies) / result.seconds:.1f} | "
            f"{percentile(stats.latencies, 0.5):.2f} | {percentile(stats.latencies, 0.99):.2f} | "
            f"{max(stats.latencies):.1f} | {stats.errors} |"
        )
    return out


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


class RssSeries:
    """RSS of some processes every ``every`` seconds, in a thread."""

    def __init__(self, pids: list[int], every: float, rss: Callable[[int], float]) -> None:
        self.pids, self.every, self.rss = pids, every, rss
        self.samples: list[tuple[float, list[float]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._start = 0.0

    def _run(self) -> None:
        while True:
            self.samples.append((time.monotonic() - self._start, [self.rss(p) for p in self.pids]))
            if self._stop.wait(self.every):
                break

    def __enter__(self) -> RssSeries:
        self._start = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()
        self.samples.append((time.monotonic() - self._start, [self.rss(p) for p in self.pids]))


def main(args: argparse.Namespace) -> None:
    """``harness.py --mode agent|soak``: see the module docstring."""
    import tempfile
    from datetime import UTC, datetime
    from pathlib import Path

    import psycopg

    from bench import harness as h
    from bench.floor_app import CREATE_TABLE

    mode = args.mode
    runs, seconds, warmup = args.runs, args.seconds, args.warmup
    url, db_name = h.create_pg_database()
    conninfo = h.PG_ADMIN_URL.rsplit("/", 1)[0] + "/" + db_name
    log_dir = Path(tempfile.mkdtemp(prefix="sm-agent-"))
    server, bootstrap = h.service_process(url, log_dir / "server.log")
    server.env["EMBEDDINGS__PROVIDER"] = args.embeddings
    floor = h.Floor(conninfo, 1)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(CREATE_TABLE)
    tenant = "bench"
    lines: list[str] = []
    try:
        server.start(workers=1)
        floor.start()
        key = h.api_key(server, bootstrap)
        with httpx.Client(
            base_url=server.url, timeout=120, headers={"Authorization": f"Bearer {key}"}
        ) as client:
            started = time.monotonic()
            ids = seed_agent_sessions(client, conninfo, tenant, h.context_turn)
            seeded = time.monotonic() - started
            probe = client.get(
                f"/v1/sessions/{ids[0]}/context",
                params={"max_tokens": AGENT_BUDGET, "format": "openai-chat"},
            )
            assert probe.status_code == 200, probe.text
            report = probe.json()["report"]
        projected = int(report["projected_items"])
        headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
        assert server.proc is not None and floor.proc is not None
        svc_pids = h.worker_pids(server.proc.pid) or [server.proc.pid]
        floor_pids = h.worker_pids(floor.proc.pid) or [floor.proc.pid]
        print(f"machine: {h.machine()}")
        print(
            f"seeded {len(ids)} sessions in {seeded:.0f} s; a read projects {projected} of "
            f"{report['source_items']} items, {report['projected_tokens']} tokens; "
            f"service pids {svc_pids}, floor pids {floor_pids}",
            flush=True,
        )
        if mode == "soak":
            lines = _soak(args, server.url, headers, ids, svc_pids, h)
        else:
            lines = _agent(args, server.url, floor.url, headers, ids, projected, tenant,
                           svc_pids, floor_pids, h)  # fmt: skip
        header = [
            f"## {args.label}",
            "",
            f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC; {h.machine()}; one worker each "
            f"(service: `serve --workers 1`, Postgres + Redis, auth on, JSON access log, "
            f"EMBEDDINGS__PROVIDER={args.embeddings}; floor: bench/floor_app.py); "
            f"{AGENT_CONNECTIONS} connections over {len(ids)} sessions of "
            f"{report['source_items']} items; a context read at max_tokens={AGENT_BUDGET} "
            f"projects {projected} items ({report['projected_tokens']} tokens), the floor "
            f"SELECTs as many rows. "
            + (
                f"{runs} runs x {seconds:g} s after {warmup:g} s warm-up, mixes interleaved; "
                "client: bench/agent_mix.py (asyncio, uvloop)."
                if mode != "soak"
                else ""
            ),
            "",
        ]
        lines = header + lines
    finally:
        floor.stop()
        server.stop()
        h.drop_pg_database(db_name)
    section = "\n".join(lines) + "\n"
    print()
    print(section)
    if not args.no_write:
        h.write_section(args.label, section)
        print(f"written to {h.RESULTS.relative_to(h.ROOT)}")


def _agent(
    args: argparse.Namespace,
    svc_url: str,
    floor_url: str,
    headers: dict[str, str],
    ids: list[str],
    projected: int,
    tenant: str,
    svc_pids: list[int],
    floor_pids: list[int],
    h: ModuleType,
) -> list[str]:
    runs, seconds, warmup = args.runs, args.seconds, args.warmup
    floor_headers = {"Content-Type": "application/json"}
    mixes: dict[str, tuple[str, dict[str, str], Step, list[int]]] = {
        "service, ?create=true": (
            svc_url, headers, service_step(create=True, transactions=False), svc_pids
        ),
        "floor": (floor_url, floor_headers, floor_step(tenant, projected), floor_pids),
        "service, plain appends": (
            svc_url, headers, service_step(create=False, transactions=False), svc_pids
        ),
        "service, ?create=true + transactions": (
            svc_url, headers, service_step(create=True, transactions=True), svc_pids
        ),
    }  # fmt: skip
    cpu_seconds = h.cpu_seconds
    print(f"warm-up {warmup:g} s per mix ...", flush=True)
    for base, hdrs, step, _ in mixes.values():
        run_mix(base, hdrs, step, ids, seconds=warmup)
    results: dict[str, list[MixResult]] = {name: [] for name in mixes}
    cpu: dict[str, list[float]] = {name: [] for name in mixes}
    for run in range(runs):
        order = list(mixes.items())
        if run % 2:
            order.reverse()
        for name, (base, hdrs, step, pids) in order:
            before = cpu_seconds(pids)
            result = run_mix(base, hdrs, step, ids, seconds=seconds)
            cpu[name].append((cpu_seconds(pids) - before) * 1000 / max(result.requests, 1))
            results[name].append(result)
            lat = result.all_latencies()
            print(
                f"  run {run + 1} {name:<38} {result.rps:7.0f} req/s  p50 "
                f"{percentile(lat, 0.5):7.2f} ms  p99 {percentile(lat, 0.99):7.2f} ms  "
                f"cpu {cpu[name][-1]:.2f} ms/req  errors {result.errors}",
                flush=True,
            )

    def med(name: str, fn: Callable[[MixResult], float]) -> float:
        return median([fn(r) for r in results[name]])

    def p50(r: MixResult) -> float:
        return percentile(r.all_latencies(), 0.5)

    def p99(r: MixResult) -> float:
        return percentile(r.all_latencies(), 0.99)

    def rps(r: MixResult) -> float:
        return r.rps

    lines = [
        "| mix | req/s | p50 (ms) | p99 (ms) | worker CPU per request (ms) | non-2xx |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name in mixes:
        lines.append(
            f"| {name} | {med(name, rps):.0f} | {med(name, p50):.2f} | {med(name, p99):.2f} | "
            f"{median(cpu[name]):.2f} | {sum(r.errors for r in results[name])} |"
        )
    lines += [
        "",
        "| measure | service | floor | ratio | runs | target | met |",
        "|---|---:|---:|---:|---:|---:|:---:|",
    ]
    from bench.harness import verdict

    for svc_name, label in (
        ("service, ?create=true", "agent mix"),
        ("service, plain appends", "agent mix, plain appends"),
    ):
        for measure, fn, target, kind in (("throughput (req/s)", rps, MIX_TARGETS["rps"], "ge"),
                                          ("p99 (ms)", p99, MIX_TARGETS["p99"], "le")):  # fmt: skip
            svc, flo = med(svc_name, fn), med("floor", fn)
            per_run = [
                fn(a) / fn(b) for a, b in zip(results[svc_name], results["floor"], strict=True)
            ]
            ratio = svc / flo
            shown_target = ("" if svc_name != "service, ?create=true" else
                            (f">= {target}" if kind == "ge" else f"<= {target:g}"))  # fmt: skip
            met = verdict(ratio, per_run, target, kind) if shown_target else ""
            lines.append(
                f"| {label}, {measure} | {svc:.2f} | {flo:.2f} | {ratio:.2f} | "
                f"{min(per_run):.2f} to {max(per_run):.2f} | {shown_target} | {met} |"
            )
    merged: dict[str, ClassStats] = {}
    total = 0.0
    for result in results["service, ?create=true + transactions"]:
        total += result.seconds
        for cname, stats in result.classes.items():
            into = merged.setdefault(cname, ClassStats())
            into.latencies += stats.latencies
            into.errors += stats.errors
    lines += [
        "",
        f"The transactions mix, every class over its {runs} runs (one step in "
        f"{TRANSACTION_SHARE} a transaction: a window compaction, a snapshot, or a fork then "
        "its deletion, in equal shares):",
        "",
        "| class | requests | per second | p50 (ms) | p99 (ms) | max (ms) | non-2xx |",
        "|---|---:|---:|---:|---:|---:|---:|",
        *class_rows(MixResult(total, merged)),
        "",
    ]
    return lines


def _soak(
    args: argparse.Namespace,
    svc_url: str,
    headers: dict[str, str],
    ids: list[str],
    svc_pids: list[int],
    h: ModuleType,
) -> list[str]:
    minutes = args.soak_minutes
    rss_mb = h.rss_mb
    step = service_step(create=True, transactions=False)
    print(f"soak: the agent mix for {minutes:g} min, RSS every 30 s", flush=True)
    with RssSeries(svc_pids, 30.0, rss_mb) as series:
        result = run_mix(
            svc_url,
            headers,
            step,
            ids,
            seconds=minutes * 60,
            on_tick=lambda t: None,
        )
    samples = series.samples
    end = samples[-1]
    mid_t = end[0] / 2
    mid = min(samples, key=lambda s: abs(s[0] - mid_t))
    lat = result.all_latencies()
    lines = [
        f"Soak: the agent mix (?create=true appends, reads after writes) for {minutes:g} "
        f"minutes, {result.rps:.0f} req/s, p50 {percentile(lat, 0.5):.2f} ms, p99 "
        f"{percentile(lat, 0.99):.2f} ms, {result.errors} non-2xx. Worker RSS (MB), sampled "
        "every 30 s:",
        "",
        "| minute | " + " | ".join(f"{t / 60:.1f}" for t, _ in samples) + " |",
        "|---|" + "---:|" * len(samples),
    ]
    for i, _pid in enumerate(svc_pids):
        lines.append(f"| worker {i + 1} | " + " | ".join(f"{v[i]:.0f}" for _, v in samples) + " |")
    lines.append("")
    for i, _ in enumerate(svc_pids):
        growth = (end[1][i] - mid[1][i]) / mid[1][i] if mid[1][i] else float("nan")
        within = abs(growth) <= 0.10
        under = end[1][i] < 300
        lines.append(
            f"Worker {i + 1}: {mid[1][i]:.0f} MB at minute {mid[0] / 60:.1f}, {end[1][i]:.0f} MB "
            f"at the end ({growth * 100:+.1f}%): within 10% of the midpoint: "
            f"{'yes' if within else 'NO'}; under 300 MB: {'yes' if under else 'NO'}."
        )
    lines.append("")
    return lines
