"""Where an append's (or an agent-loop read's) CPU goes: py-spy on one worker under load.

Starts ``session-memory serve --workers 1`` on a fresh Postgres database with Redis and auth on
(as bench/harness.py does), drives it with wrk from a second process, records the worker with
``py-spy record --format raw`` and prints the frames that hold the most samples, inclusive and
self, plus the worker's CPU per request read from /proc.

    .venv/bin/python bench/profile_append.py [--scenario append|loop] [--seconds 15]

``mix`` is the agent mix of bench/agent_mix.py (32 connections over 2,000 sessions,
``?create=true`` appends each followed by a context read of the same session).

``loop`` is the agent loop's read: a context read (8,000-token budget, openai-chat) right after
an append to the same session, seeded as bench/harness.py seeds its context sessions (1,000
items of agent turns), driven by one httpx client (no cache answers it).
Needs ``py-spy`` (``pip install py-spy``) and ``wrk`` (``apt-get install -y wrk``).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.harness import (  # noqa: E402
    APPEND_BODY,
    CONTEXT_BUDGET,
    CONTEXT_ITEMS,
    api_key,
    context_turn,
    service_process,
)
from tests.support.services import (  # noqa: E402
    create_pg_database,
    drop_pg_database,
)


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def summarize(raw: Path, top: int) -> None:
    inclusive: collections.Counter[str] = collections.Counter()
    own: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack:
            continue
        count = int(count_text)
        frames = [f.split(" (")[0] + " (" + f.split(" (")[-1] for f in stack.split(";")]
        frames = [f for f in frames if not f.startswith("process ") and not f.startswith("thread ")]
        if not frames:
            continue
        total += count
        for frame in set(frames):
            inclusive[frame] += count
        own[frames[-1]] += count
    print(f"\n{total} samples")
    print("\ninclusive (share of samples with the frame on the stack):")
    for frame, count in inclusive.most_common(top):
        print(f"  {100 * count / total:5.1f}%  {frame}")
    print("\nself:")
    for frame, count in own.most_common(top):
        print(f"  {100 * count / total:5.1f}%  {frame}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--scenario", choices=["append", "loop", "mix"], default="append")
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--connections", type=int, default=1)
    parser.add_argument("--top", type=int, default=45)
    parser.add_argument("--rate", type=int, default=250, help="py-spy samples per second")
    parser.add_argument(
        "--embeddings", default="none", help="EMBEDDINGS__PROVIDER of the service (none: no indexer)"
    )
    args = parser.parse_args()

    url, db_name = create_pg_database()
    out = Path(tempfile.mkdtemp(prefix="sm-profile-"))
    server, bootstrap = service_process(url, out / "server.log")
    server.env["EMBEDDINGS__PROVIDER"] = args.embeddings
    try:
        server.start(workers=1)
        assert server.proc is not None
        key = api_key(server, bootstrap)
        headers = {"Authorization": f"Bearer {key}"}
        client = httpx.Client(base_url=server.url, timeout=60, headers=headers)
        session = client.post("/v1/sessions", json={}).json()["id"]
        if args.scenario == "loop":
            # the harness's context sessions: agent turns (a request, a call, its output, an
            # answer), then the loop appends short messages
            items = [item for n in range(CONTEXT_ITEMS // 4) for item in context_turn(n)]
            for start in range(0, len(items), 250):
                batch = {"items": items[start : start + 250]}
                assert client.post(f"/v1/sessions/{session}/items", json=batch).status_code == 201
        if args.scenario == "mix":
            from bench import agent_mix

            conninfo = url.replace("postgresql+psycopg://", "postgresql://")
            ids = agent_mix.seed_agent_sessions(client, conninfo, "bench", context_turn)
        pid = server.proc.pid
        spy = subprocess.Popen(
            ["py-spy", "record", "--pid", str(pid), "--format", "raw", "--rate", str(args.rate),
             "--duration", str(int(args.seconds)), "--nonblocking", "--output",
             str(out / "raw.txt")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        time.sleep(1.0)
        cpu0, t0 = cpu_seconds(pid), time.monotonic()
        requests = 0
        if args.scenario == "append":
            script = out / "append.lua"
            script.write_text(
                'wrk.method = "POST"\n'
                f"wrk.body = {json.dumps(json.dumps(APPEND_BODY))}\n"
                f'wrk.headers["Authorization"] = "Bearer {key}"\n'
                'wrk.headers["Content-Type"] = "application/json"\n'
                "done = function(s, l, r) io.write(string.format('\\nREQUESTS %d\\n', s.requests)) end\n"
            )
            run = subprocess.run(
                ["wrk", "-t1", f"-c{args.connections}", f"-d{int(args.seconds) - 2}s", "-s",
                 str(script), f"{server.url}/v1/sessions/{session}/items"],
                capture_output=True, text=True, check=True,
            )  # fmt: skip
            requests = int(run.stdout.rsplit("REQUESTS", 1)[1].split()[0])
        elif args.scenario == "mix":
            mixed = agent_mix.run_mix(
                server.url,
                {**headers, "Content-Type": "application/json"},
                agent_mix.service_step(create=True, transactions=False),
                ids,
                seconds=args.seconds - 2,
            )
            requests = mixed.requests
        else:
            deadline = time.monotonic() + args.seconds - 2
            query = {"max_tokens": CONTEXT_BUDGET, "format": "openai-chat"}
            while time.monotonic() < deadline:
                client.post(f"/v1/sessions/{session}/items", json=APPEND_BODY)
                assert client.get(f"/v1/sessions/{session}/context", params=query).is_success
                requests += 1
        cpu = cpu_seconds(pid) - cpu0
        elapsed = time.monotonic() - t0
        spy.wait()
        unit = {"append": "append", "loop": "append + context read", "mix": "request"}[
            args.scenario
        ]
        print(
            f"{requests} x {unit} in {elapsed:.1f} s: "
            f"worker CPU {1000 * cpu / max(requests, 1):.3f} ms per {unit}"
        )
        summarize(out / "raw.txt", args.top)
        print(f"\nraw profile: {out / 'raw.txt'}")
    finally:
        server.stop()
        drop_pg_database(db_name)


if __name__ == "__main__":
    main()
