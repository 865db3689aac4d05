"""The service against the floor, in one run: latency, throughput and memory as ratios.

Starts, in this run:

- the service in production mode: ``session-memory serve --workers 2`` on a fresh Postgres
  database, Redis locks, JSON access logs (to a file), auth on: every request carries an API
  key created through the admin API (so the realistic key-cache path is measured, not the
  in-memory bootstrap comparison); no semantic indexer unless ``--embeddings builtin``;
- the floor (bench/floor_app.py): bare FastAPI routes doing one INSERT / one indexed SELECT on
  the same Postgres, same uvicorn, 2 workers; and one more route running the service's own
  append statement (DESIGN §6) with nothing of the service around it;

and drives both from a second process, ``wrk`` (``apt-get install -y wrk``), with a warm-up and
several interleaved runs (machines drift: compare ratios taken in the same run, not absolute
times). Scenarios:

- append, single client: ``POST /v1/sessions/{id}/items`` (one small message) against
  ``POST /insert/{id}``, p50 / p99;
- append throughput, 64 concurrent clients over 100 sessions, requests per second;
- both append scenarios once more with ``?create=true`` on the same (existing) sessions, what
  the SDK sessions send on every call, and with ``?create=true`` on a new id every request
  (each one a session's first append), against the plain appends;
- both append scenarios once more against the floor running the service's append statement
  (the same sessions): how much of the gap to the floor the design's one statement takes
  (more rows, the fenced update, the search index) and how much the service adds around it;
- context read, single client: ``GET /v1/sessions/{id}/context?max_tokens=8000`` on
  1,000-item sessions against one indexed SELECT of the same newest rows (and, for reference,
  a one-row primary-key SELECT). wrk repeats the same read, which the prompt cache answers;
- context read after each append (the agent loop), one httpx client: every timed read
  follows an untimed append to the same session, against the floor's INSERT then SELECT;
- server RSS per worker process, sampled during the 64-client run;
- CPU per request of the server's workers and of Postgres (every postgres process), for each
  wrk run. Throughput is bound by their sum: service and floor share the machine's cores
  with Postgres and the client.

Each target's verdict needs every run to agree: the ratio of the medians and each run's own
ratio (service and floor runs alternate, so a run's pair saw the same machine) must all meet
it, or all miss it; otherwise it is ``mixed``. On a noisy machine a ratio within a run's
spread of its target is not decided by one harness run.

``--mode agent`` and ``--mode soak`` run the agent workload instead (bench/agent_mix.py: 32
connections over 2,000 sessions, ``?create=true`` appends each followed by a context read,
against the floor's same I/O; a mix with transactions; a soak with RSS every 30 s).

Prints the table and writes it into bench/RESULTS.md under ``## <label>`` (a section with the
same label is replaced, others are kept, so BEFORE and AFTER can sit side by side).

    .venv/bin/python bench/harness.py [--label NAME] [--runs 3] [--seconds 8]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.store.append import postgres_text  # noqa: E402
from tests.support.services import (  # noqa: E402
    PG_ADMIN_URL,
    REDIS_URL,
    ServerProcess,
    create_pg_database,
    drop_pg_database,
    free_port,
)

RESULTS = ROOT / "bench" / "RESULTS.md"
APPEND_SESSIONS = 100
CONTEXT_SESSIONS = 4
CONTEXT_ITEMS = 1000
CONTEXT_BUDGET = 8000
CONCURRENCY = 64
APPEND_BODY = {
    "items": [
        {
            "type": "message",
            "role": "user",
            "content": "What is the next step? Please run the tests.",
        }
    ]
}
TARGETS = {
    "append_p50": 1.5,  # service p50 <= 1.5 x floor INSERT p50
    "append_rps": 0.6,  # service throughput >= 0.6 x floor INSERT throughput
    "context_p50": 2.0,  # service p50 <= 2 x floor SELECT p50
    "append_cpu": 2.0,  # service worker CPU per append <= 2 x the floor's per INSERT
    "rss_mb": 250.0,  # per worker
}

WRK_SCRIPT = """
local paths = {%(paths)s}
local body = %(body)s
local method = "%(method)s"
local headers = {%(headers)s}
local counter = 0
local run = nil

request = function()
  if run == nil then  -- per thread: its own seed and a tag for ids made fresh ({n})
    math.randomseed(os.time() + tonumber(tostring({}):match("0x(%%x+)") or "0", 16) %% 100000)
    run = string.format("%%08x", math.random(0, 0x7fffffff))
  end
  counter = counter + 1
  local path = paths[math.random(#paths)]
  path = path:gsub("{n}", run .. "-" .. counter)
  return wrk.format(method, path, headers, body)
end

done = function(summary, latency, requests)
  io.write(string.format(
    "\\nRESULT {\\"requests\\": %%d, \\"duration_us\\": %%d, \\"p50_us\\": %%d, \\"p99_us\\": %%d, " ..
    "\\"mean_us\\": %%f, \\"status_errors\\": %%d, \\"socket_errors\\": %%d}\\n",
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    latency.mean, summary.errors.status,
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout))
end
"""


def lua_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


@dataclass
class Scenario:
    name: str
    base_url: str
    method: str
    paths: list[str]
    body: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    connections: int = 1

    def script(self, directory: Path) -> Path:
        text = WRK_SCRIPT % {
            "paths": ", ".join(lua_string(p) for p in self.paths),
            "body": lua_string(self.body) if self.body is not None else "nil",
            "method": self.method,
            "headers": ", ".join(
                f"[{lua_string(k)}] = {lua_string(v)}" for k, v in self.headers.items()
            ),
        }
        path = directory / f"{self.name}.lua"
        path.write_text(text)
        return path


@dataclass
class Sample:
    requests: int
    seconds: float
    p50_ms: float
    p99_ms: float
    errors: int
    cpu_ms: float = 0.0  # server workers' CPU time per request
    db_cpu_ms: float = 0.0  # Postgres server processes' CPU time per request

    @property
    def rps(self) -> float:
        return self.requests / self.seconds


def run_wrk(scenario: Scenario, script: Path, seconds: float) -> Sample:
    wrk = shutil.which("wrk")
    if wrk is None:
        raise SystemExit("wrk is required: apt-get install -y wrk")
    threads = 1 if scenario.connections == 1 else 2
    out = subprocess.run(
        [
            wrk,
            "-t",
            str(threads),
            "-c",
            str(scenario.connections),
            "-d",
            f"{seconds:g}s",
            "--timeout",
            "30s",
            "-s",
            str(script),
            scenario.base_url,
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    found = re.search(r"^RESULT (\{.*\})$", out, re.M)
    if not found:
        raise RuntimeError(f"no result from wrk:\n{out}")
    data = json.loads(found.group(1))
    return Sample(
        requests=data["requests"],
        seconds=data["duration_us"] / 1e6,
        p50_ms=data["p50_us"] / 1000,
        p99_ms=data["p99_us"] / 1000,
        errors=data["status_errors"] + data["socket_errors"],
    )


def worker_pids(parent: int) -> list[int]:
    """The uvicorn worker processes under ``parent`` (multiprocessing spawn children)."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            cmdline = (entry / "cmdline").read_bytes()
        except (OSError, ValueError, IndexError):
            continue
        if ppid == parent and b"spawn_main" in cmdline:
            out.append(int(entry.name))
    return sorted(out)


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU time used so far by ``pids``."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick
        except (OSError, ValueError, IndexError):
            pass
    return total


def postgres_pids() -> list[int]:
    """Every Postgres server process on the machine (backends and background workers): the
    database is shared by the service and the floor, measured one at a time. A backend that
    exits during a run takes its CPU time with it, so this can only undercount."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().strip() == "postgres":
                    out.append(int(entry.name))
            except OSError:
                continue
    return out


def rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


class RssSampler:
    """Peak RSS of each worker while a load runs."""

    def __init__(self, pids: list[int]) -> None:
        self.pids = pids
        self.peak: dict[int, float] = {pid: 0.0 for pid in pids}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            for pid in self.pids:
                self.peak[pid] = max(self.peak[pid], rss_mb(pid))
            self._stop.wait(0.25)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


class Floor:
    """bench/floor_app.py under uvicorn, 2 workers."""

    def __init__(self, conninfo: str, workers: int) -> None:
        self.port = free_port()
        self.conninfo = conninfo
        self.append_sql = postgres_text()
        self.workers = workers
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        uvicorn = Path(sys.executable).with_name("uvicorn")
        self.proc = subprocess.Popen(
            [
                str(uvicorn),
                "bench.floor_app:create_app",
                "--factory",
                "--port",
                str(self.port),
                "--workers",
                str(self.workers),
                "--log-level",
                "warning",
                "--no-access-log",
            ],
            cwd=str(ROOT),
            env={**os.environ, "FLOOR_PG": self.conninfo, "FLOOR_APPEND_SQL": self.append_sql},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if httpx.get(self.url + "/select-one/x/x", timeout=0.5).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise RuntimeError("the floor app did not start")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(20)


def context_turn(n: int) -> list[dict[str, object]]:
    """One agent turn: a request, a tool call, its output, an answer (about 150 tokens)."""
    call_id = f"call_{n}"
    return [
        {
            "type": "message",
            "role": "user",
            "content": f"Step {n}: please look at module_{n % 37}.py and tell me whether the "
            f"retry logic handles a timeout after {n % 11} attempts.",
        },
        {
            "type": "function_call",
            "call_id": call_id,
            "name": "read_file",
            "arguments": json.dumps({"path": f"src/module_{n % 37}.py"}),
        },
        {
            "type": "function_call_output",
            "call_id": call_id,
            "output": f"def retry(fn, attempts={n % 11}):\n    for i in range(attempts):\n"
            "        try:\n            return fn()\n        except TimeoutError:\n"
            "            sleep(backoff(i))\n    raise GiveUp()\n",
        },
        {
            "type": "message",
            "role": "assistant",
            "content": f"module_{n % 37}.py retries {n % 11} times with backoff and then gives up; "
            "a timeout on the last attempt raises GiveUp, which the caller handles.",
        },
    ]


def seed(client: httpx.Client) -> tuple[list[str], list[str]]:
    append_ids = [f"bench-a-{i:03d}-{uuid.uuid4().hex[:6]}" for i in range(APPEND_SESSIONS)]
    for sid in append_ids:
        r = client.post("/v1/sessions", json={"id": sid})
        assert r.status_code == 201, r.text
    context_ids = [f"bench-c-{i}-{uuid.uuid4().hex[:6]}" for i in range(CONTEXT_SESSIONS)]
    for sid in context_ids:
        r = client.post("/v1/sessions", json={"id": sid})
        assert r.status_code == 201, r.text
        items = [item for n in range(CONTEXT_ITEMS // 4) for item in context_turn(n)]
        for start in range(0, len(items), 250):
            r = client.post(f"/v1/sessions/{sid}/items", json={"items": items[start : start + 250]})
            assert r.status_code == 201, r.text
    return append_ids, context_ids


def reads_after_appends(
    svc_url: str,
    floor_url: str,
    auth: dict[str, str],
    context_ids: list[str],
    tenant: str,
    body: str,
    ctx_query: str,
    rounds: int = 300,
) -> tuple[list[float], list[float], list[int]]:
    """The agent loop: append, then read the prompt. wrk repeats one request, and a repeated
    context read is answered from the prompt cache; here every timed read follows an untimed
    append to the same session (floor: an INSERT, then the SELECT), one client, interleaved.

    The floor's SELECT returns as many rows as the service's read of that round projected:
    the loop's appends are small messages, so the prompt holds more items as they accumulate
    (the context probe's count is only the first round's). Also returned: those counts."""
    svc: list[float] = []
    flo: list[float] = []
    rows: list[int] = []
    with httpx.Client(timeout=30) as client:
        for n in range(rounds + 20):
            sid = context_ids[n % len(context_ids)]
            r = client.post(f"{svc_url}/v1/sessions/{sid}/items", content=body, headers=auth)
            assert r.status_code == 201, r.text
            start = time.perf_counter()
            r = client.get(f"{svc_url}/v1/sessions/{sid}/context{ctx_query}", headers=auth)
            elapsed = time.perf_counter() - start
            assert r.status_code == 200, r.text
            projected = int(r.json()["report"]["projected_items"])
            if n >= 20:
                svc.append(elapsed * 1000)
                rows.append(projected)
            r = client.post(
                f"{floor_url}/insert/{sid}",
                content=body,
                headers={"Content-Type": "application/json"},
            )
            assert r.status_code < 300, r.text
            start = time.perf_counter()
            r = client.get(f"{floor_url}/select/{tenant}/{sid}?limit={projected}")
            elapsed = time.perf_counter() - start
            assert r.status_code == 200, r.text
            if n >= 20:
                flo.append(elapsed * 1000)
    return svc, flo, rows


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def machine() -> str:
    cpu = "unknown cpu"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{os.cpu_count()} CPUs ({cpu}), Python {platform.python_version()}"


def service_process(database_url: str, log_path: Path) -> tuple[ServerProcess, str]:
    """The service as benchmarks run it (not started): Redis, auth on, a bootstrap key
    (returned with it), JSON access log to ``log_path``."""
    bootstrap = "bench-bootstrap-" + secrets.token_hex(16)
    server = ServerProcess(
        env={
            "DATABASE_URL": database_url,
            "REDIS_URL": REDIS_URL,
            "AUTO_MIGRATE": "false",
            "AUTH__MODE": "on",
            "AUTH__BOOTSTRAP_KEY": bootstrap,
            "AUTH__BOOTSTRAP_TENANT": "bench",
        },
        log_path=log_path,
    )
    return server, bootstrap


def api_key(server: ServerProcess, bootstrap: str) -> str:
    """A read/write key created through the admin API, so requests take the realistic
    key-cache path rather than the bootstrap comparison."""
    with httpx.Client(
        base_url=server.url, timeout=60, headers={"Authorization": f"Bearer {bootstrap}"}
    ) as admin:
        r = admin.post("/v1/admin/keys", json={"name": "bench", "scopes": ["read", "write"]})
        assert r.status_code == 201, r.text
        return str(r.json()["secret"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--label", default="latest", help="section name in RESULTS.md")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=8.0, help="length of one run")
    parser.add_argument("--warmup", type=float, default=3.0, help="warm-up per scenario")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--no-write", action="store_true", help="print only")
    parser.add_argument(
        "--mode",
        choices=("standard", "agent", "soak"),
        default="standard",
        help="agent: the agent mix against the floor's, and a mix with transactions; soak: "
        "the agent mix for --soak-minutes with RSS every 30 s (bench/agent_mix.py; one worker)",
    )
    parser.add_argument("--soak-minutes", type=float, default=10.0)
    parser.add_argument(
        "--embeddings",
        default="none",
        help="EMBEDDINGS__PROVIDER of the service (none: no indexer)",
    )
    args = parser.parse_args()
    if args.mode != "standard":
        from bench.agent_mix import main as agent_main

        if args.label == "latest":
            args.label = "agent mix" if args.mode == "agent" else "soak"
        agent_main(args)
        return

    url, db_name = create_pg_database()
    conninfo = PG_ADMIN_URL.rsplit("/", 1)[0] + "/" + db_name
    log_dir = Path(tempfile.mkdtemp(prefix="sm-bench-"))
    server, bootstrap = service_process(url, log_dir / "server.log")
    # (the builtin embedder's indexer embeds every appended item in the worker: work the
    # floor does not do; --embeddings builtin measures the default configuration)
    server.env["EMBEDDINGS__PROVIDER"] = args.embeddings
    floor = Floor(conninfo, args.workers)
    import psycopg

    from bench.floor_app import CREATE_TABLE

    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(CREATE_TABLE)
    try:
        server.start(workers=args.workers)
        floor.start()
        key = api_key(server, bootstrap)
        with httpx.Client(
            base_url=server.url, timeout=60, headers={"Authorization": f"Bearer {key}"}
        ) as client:
            append_ids, context_ids = seed(client)
            probe = client.get(
                f"/v1/sessions/{context_ids[0]}/context",
                params={"max_tokens": CONTEXT_BUDGET, "format": "openai-chat"},
            )
            assert probe.status_code == 200, probe.text
            report = probe.json()["report"]
        projected = int(report["projected_items"])
        tenant = "bench"
        auth = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
        body = json.dumps(APPEND_BODY)
        ctx_query = f"?max_tokens={CONTEXT_BUDGET}&format=openai-chat"
        scenarios = {
            "append_1": (
                Scenario(
                    "svc_append_1",
                    server.url,
                    "POST",
                    [f"/v1/sessions/{s}/items" for s in append_ids],
                    body,
                    auth,
                ),
                Scenario(
                    "floor_insert_1",
                    floor.url,
                    "POST",
                    [f"/insert/{s}" for s in append_ids],
                    body,
                    {"Content-Type": "application/json"},
                ),
                Scenario(
                    "statement_append_1",
                    floor.url,
                    "POST",
                    [f"/append/{tenant}/{s}" for s in append_ids],
                    body,
                    {"Content-Type": "application/json"},
                ),
                Scenario(  # what the SDK sessions send: ?create=true on sessions that exist
                    "svc_create_append_1",
                    server.url,
                    "POST",
                    [f"/v1/sessions/{s}/items?create=true" for s in append_ids],
                    body,
                    auth,
                ),
                Scenario(  # ... and the first append of each session: a new id every request
                    "svc_create_new_1",
                    server.url,
                    "POST",
                    ["/v1/sessions/new-{n}/items?create=true"],
                    body,
                    auth,
                ),
            ),
            "append_64": (
                Scenario(
                    "svc_append_64",
                    server.url,
                    "POST",
                    [f"/v1/sessions/{s}/items" for s in append_ids],
                    body,
                    auth,
                    CONCURRENCY,
                ),
                Scenario(
                    "floor_insert_64",
                    floor.url,
                    "POST",
                    [f"/insert/{s}" for s in append_ids],
                    body,
                    {"Content-Type": "application/json"},
                    CONCURRENCY,
                ),
                Scenario(
                    "statement_append_64",
                    floor.url,
                    "POST",
                    [f"/append/{tenant}/{s}" for s in append_ids],
                    body,
                    {"Content-Type": "application/json"},
                    CONCURRENCY,
                ),
                Scenario(
                    "svc_create_append_64",
                    server.url,
                    "POST",
                    [f"/v1/sessions/{s}/items?create=true" for s in append_ids],
                    body,
                    auth,
                    CONCURRENCY,
                ),
                Scenario(
                    "svc_create_new_64",
                    server.url,
                    "POST",
                    ["/v1/sessions/new-{n}/items?create=true"],
                    body,
                    auth,
                    CONCURRENCY,
                ),
            ),
            "context_1": (
                Scenario(
                    "svc_context_1",
                    server.url,
                    "GET",
                    [f"/v1/sessions/{s}/context{ctx_query}" for s in context_ids],
                    None,
                    auth,
                ),
                Scenario(
                    "floor_select_1",
                    floor.url,
                    "GET",
                    [f"/select/{tenant}/{s}?limit={projected}" for s in context_ids],
                ),
            ),
        }
        one_row = Scenario(
            "floor_select_one_1",
            floor.url,
            "GET",
            [f"/select-one/{tenant}/{s}?seq={CONTEXT_ITEMS // 2}" for s in context_ids],
        )
        scripts_dir = log_dir
        scripts = {s.name: s.script(scripts_dir) for group in scenarios.values() for s in group}
        scripts[one_row.name] = one_row.script(scripts_dir)

        print(f"machine: {machine()}")
        print(
            f"context probe: {projected} of {report['source_items']} items, "
            f"{report['projected_tokens']} tokens"
        )
        print(f"warm-up {args.warmup:g} s per scenario ...", flush=True)
        for group in scenarios.values():
            for s in group:
                run_wrk(s, scripts[s.name], args.warmup)
        run_wrk(one_row, scripts[one_row.name], args.warmup)

        samples: dict[str, list[Sample]] = {name: [] for name in scripts}
        # (one worker: the server process serves itself, no spawned child)
        svc_parent = server.proc.pid if server.proc else -1
        floor_parent = floor.proc.pid if floor.proc else -1
        svc_workers = worker_pids(svc_parent) or [svc_parent]
        floor_workers = worker_pids(floor_parent) or [floor_parent]
        rss_svc: list[float] = []
        rss_floor: list[float] = []
        for run in range(args.runs):
            for key_name, group in scenarios.items():
                svc, flo = group[0], group[1]
                order = group if run % 2 == 0 else group[::-1]
                for s in order:
                    pids = svc_workers if s.base_url == server.url else floor_workers
                    database = postgres_pids()
                    cpu_before, db_before = cpu_seconds(pids), cpu_seconds(database)
                    with RssSampler(pids) as sampler:
                        sample = run_wrk(s, scripts[s.name], args.seconds)
                    sample.cpu_ms = (
                        (cpu_seconds(pids) - cpu_before) * 1000 / max(sample.requests, 1)
                    )
                    sample.db_cpu_ms = (
                        (cpu_seconds(database) - db_before) * 1000 / max(sample.requests, 1)
                    )
                    samples[s.name].append(sample)
                    if key_name == "append_64" and s in (svc, flo):
                        (rss_svc if s is svc else rss_floor).extend(sampler.peak.values())
                    last = samples[s.name][-1]
                    print(
                        f"  run {run + 1} {s.name:<20} p50 {last.p50_ms:7.2f} ms  "
                        f"p99 {last.p99_ms:7.2f} ms  {last.rps:8.0f} req/s  "
                        f"cpu {last.cpu_ms:5.2f} ms/req  db {last.db_cpu_ms:5.2f} ms/req  "
                        f"errors {last.errors}",
                        flush=True,
                    )
            samples[one_row.name].append(run_wrk(one_row, scripts[one_row.name], args.seconds))
        # RSS after all the load, too (steady state, not only peaks during one run).
        rss_after = [rss_mb(p) for p in svc_workers]
        fresh_svc, fresh_floor, fresh_rows = reads_after_appends(
            server.url, floor.url, auth, context_ids, tenant, body, ctx_query
        )
    finally:
        floor.stop()
        server.stop()
        drop_pg_database(db_name)

    def m(name: str, attr: str) -> float:
        return median([getattr(s, attr) for s in samples[name]])

    def spread(svc_name: str, floor_name: str, attr: str) -> list[float]:
        """The ratio of each run (the service's and the floor's runs alternate)."""
        return [
            getattr(a, attr) / getattr(b, attr) if getattr(b, attr) else float("nan")
            for a, b in zip(samples[svc_name], samples[floor_name], strict=True)
        ]

    errors = {name: sum(s.errors for s in ss) for name, ss in samples.items()}
    rows = [
        (
            "append p50, 1 client (ms)",
            m("svc_append_1", "p50_ms"),
            m("floor_insert_1", "p50_ms"),
            "<= 1.5",
            TARGETS["append_p50"],
            "le",
        ),
        (
            "append p99, 1 client (ms)",
            m("svc_append_1", "p99_ms"),
            m("floor_insert_1", "p99_ms"),
            "",
            None,
            "",
        ),
        (
            f"append throughput, {CONCURRENCY} clients / {APPEND_SESSIONS} sessions (req/s)",
            m("svc_append_64", "rps"),
            m("floor_insert_64", "rps"),
            ">= 0.6",
            TARGETS["append_rps"],
            "ge",
        ),
        (
            f"append p50, {CONCURRENCY} clients (ms)",
            m("svc_append_64", "p50_ms"),
            m("floor_insert_64", "p50_ms"),
            "",
            None,
            "",
        ),
        (
            f"append p99, {CONCURRENCY} clients (ms)",
            m("svc_append_64", "p99_ms"),
            m("floor_insert_64", "p99_ms"),
            "",
            None,
            "",
        ),
        (
            "context p50, 1 client (ms)",
            m("svc_context_1", "p50_ms"),
            m("floor_select_1", "p50_ms"),
            "<= 2",
            TARGETS["context_p50"],
            "le",
        ),
        (
            "context p99, 1 client (ms)",
            m("svc_context_1", "p99_ms"),
            m("floor_select_1", "p99_ms"),
            "",
            None,
            "",
        ),
        (
            "append worker CPU per request, 1 client (ms)",
            m("svc_append_1", "cpu_ms"),
            m("floor_insert_1", "cpu_ms"),
            "<= 2",
            TARGETS["append_cpu"],
            "le",
        ),
        (
            f"append worker CPU per request, {CONCURRENCY} clients (ms)",
            m("svc_append_64", "cpu_ms"),
            m("floor_insert_64", "cpu_ms"),
            "<= 2",
            TARGETS["append_cpu"],
            "le",
        ),
        (
            "append Postgres CPU per request, 1 client (ms)",
            m("svc_append_1", "db_cpu_ms"),
            m("floor_insert_1", "db_cpu_ms"),
            "",
            None,
            "",
        ),
        (
            f"append Postgres CPU per request, {CONCURRENCY} clients (ms)",
            m("svc_append_64", "db_cpu_ms"),
            m("floor_insert_64", "db_cpu_ms"),
            "",
            None,
            "",
        ),
        (
            "context worker CPU per request (ms)",
            m("svc_context_1", "cpu_ms"),
            m("floor_select_1", "cpu_ms"),
            "",
            None,
            "",
        ),
        (
            "context p50 vs one-row SELECT (ms)",
            m("svc_context_1", "p50_ms"),
            m("floor_select_one_1", "p50_ms"),
            "",
            None,
            "",
        ),
    ]
    thirds = [slice(k * len(fresh_svc) // 3, (k + 1) * len(fresh_svc) // 3) for k in range(3)]
    runs_of = {  # the ratio of each run, for the rows with a target
        rows[0][0]: spread("svc_append_1", "floor_insert_1", "p50_ms"),
        rows[2][0]: spread("svc_append_64", "floor_insert_64", "rps"),
        rows[5][0]: spread("svc_context_1", "floor_select_1", "p50_ms"),
        rows[7][0]: spread("svc_append_1", "floor_insert_1", "cpu_ms"),
        rows[8][0]: spread("svc_append_64", "floor_insert_64", "cpu_ms"),
        # the agent loop's rounds in thirds (rounds alternate service and floor)
        "context p50 after each append, 1 client, httpx (ms)": [
            median(fresh_svc[t]) / median(fresh_floor[t]) for t in thirds
        ],
    }
    rows.append(
        (
            "context p50 after each append, 1 client, httpx (ms)",
            median(fresh_svc),
            median(fresh_floor),
            "<= 2",
            TARGETS["context_p50"],
            "le",
        )
    )
    peak_rss = max(rss_svc) if rss_svc else float("nan")
    lines = [
        f"## {args.label}",
        "",
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC; {machine()}; {args.workers} workers each; "
        f"{args.runs} runs x {args.seconds:g} s after {args.warmup:g} s warm-up, medians of "
        "the runs (runs: the ratio of each run, low to high; a target the runs fall on both "
        "sides of is mixed, not met); wrk as the client. Service: Postgres + Redis, auth on (API key), JSON access "
        f"log, EMBEDDINGS__PROVIDER={args.embeddings}. Context: {CONTEXT_ITEMS}-item sessions, max_tokens={CONTEXT_BUDGET}, "
        f"format=openai-chat ({projected} items, {report['projected_tokens']} tokens projected); "
        f"the floor SELECT returns the same {projected} newest rows (in the agent loop, as "
        f"many as that round's read projected: {min(fresh_rows)} to {max(fresh_rows)}).",
        "",
        "| measure | service | floor | ratio | runs | target | met |",
        "|---|---:|---:|---:|---:|---:|:---:|",
    ]
    verdicts = []
    for label, svc_v, floor_v, target_text, target, kind in rows:
        ratio = svc_v / floor_v if floor_v else float("nan")
        runs = runs_of.get(label, [])
        met = ""
        if kind:
            assert runs, label  # every row with a target shows its runs
            met = verdict(ratio, runs, target, kind)
            verdicts.append(met == "yes")
        shown = f"{min(runs):.2f} to {max(runs):.2f}" if runs else ""
        lines.append(
            f"| {label} | {svc_v:.2f} | {floor_v:.2f} | {ratio:.2f} | {shown} | {target_text} "
            f"| {met} |"
        )
    rss_ok = peak_rss <= TARGETS["rss_mb"]
    verdicts.append(rss_ok)
    lines.append(
        f"| RSS per worker under {CONCURRENCY}-client load (MB, peak) | {peak_rss:.0f} | "
        f"{max(rss_floor) if rss_floor else float('nan'):.0f} | | | <= 250 MB | "
        f"{'yes' if rss_ok else 'NO'} |"
    )
    lines.append("")
    lines.append(
        f"Service workers' RSS after the runs: {', '.join(f'{v:.0f}' for v in rss_after)} MB. "
        f"Non-2xx or socket errors: {sum(errors.values())} "
        f"({', '.join(f'{k} {v}' for k, v in errors.items() if v) or 'none'})."
    )
    lines.append("")
    lines += statement_table(m)
    create_lines, create_verdicts = create_table(m, spread)
    lines += create_lines
    verdicts += create_verdicts
    section = "\n".join(lines) + "\n"
    print()
    print(section)
    print(f"targets met: {sum(verdicts)} of {len(verdicts)}")
    if not args.no_write:
        write_section(args.label, section)
        print(f"written to {RESULTS.relative_to(ROOT)}")


def statement_table(m: Callable[[str, str], float]) -> list[str]:
    """The append scenarios against the floor running the service's own append statement
    (``m``: the median of a scenario's attribute): how far the statement alone is from the
    plain INSERT, and how far the service is from the statement."""
    measures = [
        ("append p50, 1 client (ms)", "append_1", "p50_ms"),
        (f"append throughput, {CONCURRENCY} clients (req/s)", "append_64", "rps"),
        ("append worker CPU per request, 1 client (ms)", "append_1", "cpu_ms"),
        (f"append worker CPU per request, {CONCURRENCY} clients (ms)", "append_64", "cpu_ms"),
        ("append Postgres CPU per request, 1 client (ms)", "append_1", "db_cpu_ms"),
        (f"append Postgres CPU per request, {CONCURRENCY} clients (ms)", "append_64", "db_cpu_ms"),
    ]
    names = {
        "append_1": ("svc_append_1", "statement_append_1", "floor_insert_1"),
        "append_64": ("svc_append_64", "statement_append_64", "floor_insert_64"),
    }
    lines = [
        "The service's append statement alone (DESIGN §6: fenced session-row update, item with "
        "search text, `appended` event; one statement in autocommit), run by the floor with "
        "nothing of the service around it, on the same sessions:",
        "",
        "| measure | service | statement alone | floor | service / statement | statement / floor |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for label, group, attr in measures:
        svc, alone, floor = (m(name, attr) for name in names[group])
        lines.append(
            f"| {label} | {svc:.2f} | {alone:.2f} | {floor:.2f} | "
            f"{svc / alone if alone else float('nan'):.2f} | "
            f"{alone / floor if floor else float('nan'):.2f} |"
        )
    lines.append("")
    return lines


def create_table(
    m: Callable[[str, str], float], spread: Callable[[str, str, str], list[float]]
) -> tuple[list[str], list[bool]]:
    """``?create=true`` appends to sessions that exist (what the SDK sessions send on every
    call) against plain appends of the same server, same sessions (issue 36's targets)."""
    measures = [
        ("p50, 1 client (ms)", "append", "1", "p50_ms", "<= 1.1", 1.1, "le"),
        (f"throughput, {CONCURRENCY} clients (req/s)", "append", "64", "rps", ">= 0.9", 0.9, "ge"),
        (f"p99, {CONCURRENCY} clients (ms)", "append", "64", "p99_ms", "", None, ""),
        ("first append of a new session, p50, 1 client (ms)", "new", "1", "p50_ms", "", None, ""),
        (
            f"first append of a new session, throughput, {CONCURRENCY} clients (req/s)",
            "new", "64", "rps", "", None, "",
        ),
    ]  # fmt: skip
    lines = [
        "Appends with `?create=true` to sessions that exist (and, last two rows, to a new id "
        "each time), against plain appends to sessions that exist:",
        "",
        "| measure | create=true | plain | ratio | runs | target | met |",
        "|---|---:|---:|---:|---:|---:|:---:|",
    ]
    verdicts = []
    for label, what, clients, attr, target_text, target, kind in measures:
        name = f"svc_create_{what}_{clients}"
        create, plain = m(name, attr), m(f"svc_append_{clients}", attr)
        ratio = create / plain if plain else float("nan")
        runs = spread(name, f"svc_append_{clients}", attr)
        met = ""
        if target is not None:
            met = verdict(ratio, runs, target, kind)
            verdicts.append(met == "yes")
        lines.append(
            f"| {label} | {create:.2f} | {plain:.2f} | {ratio:.2f} | "
            f"{min(runs):.2f} to {max(runs):.2f} | {target_text} | {met} |"
        )
    lines.append("")
    return lines, verdicts


def verdict(ratio: float, runs: list[float], target: float, kind: str) -> str:
    """``yes`` or ``NO`` when the ratio of the medians and every run's ratio agree on the
    target; ``mixed`` when the runs fall on both sides of it: on a noisy machine a ratio near
    the target is then not decided by one harness run."""

    def meets(value: float) -> bool:
        return value <= target if kind == "le" else value >= target

    sides = {meets(value) for value in [ratio, *runs]}
    if len(sides) == 2:
        return f"mixed ({sum(map(meets, runs))} of {len(runs)} runs)"
    return "yes" if sides == {True} else "NO"


def write_section(label: str, section: str) -> None:
    header = (
        "# Benchmark results\n\n"
        "Written by `bench/harness.py` (one section per `--label`; rerun to replace it). "
        "Ratios are service / floor, measured in the same run.\n\n"
    )
    text = RESULTS.read_text() if RESULTS.exists() else header
    if not text.startswith("# "):
        text = header + text
    pattern = re.compile(rf"^## {re.escape(label)}\n.*?(?=^## |\Z)", re.S | re.M)
    if pattern.search(text):
        text = pattern.sub(lambda _: section + "\n", text, count=1)
    else:
        text = text.rstrip("\n") + "\n\n" + section
    RESULTS.write_text(text.rstrip("\n") + "\n")


if __name__ == "__main__":
    main()
