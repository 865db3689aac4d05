"""The TypeScript client (clients/typescript): its own test suite (`npm test`, node's test
runner) against the package's live server (Postgres + Redis, auth on); the example of its
README run as pasted against a server started like `scripts/serve` (SQLite, auth off); and
its retries against a real 503 (another writer holding the session's row).

The npm packages come from `npm ci` in clients/typescript (scripts/bootstrap runs it; this
test runs it too when node_modules is missing)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import threading
import time
import uuid
from pathlib import Path

import psycopg
import pytest
from session_memory_client import SessionMemoryClient

from tests.clients.conftest import API_KEY
from tests.conftest import ROOT
from tests.support.services import ServerProcess

PACKAGE = ROOT / "clients" / "typescript"


def run(
    cmd: list[str], *, cwd: Path, env: dict[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        cmd,
        cwd=cwd,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, (
        f"{' '.join(cmd)} failed:\n{failures(done.stdout)}\n{done.stderr[-4000:]}"
    )
    return done


def failures(tap: str) -> str:
    """The failed tests of a node test run (TAP), with their diagnostics; else its tail."""
    lines = tap.splitlines()
    picked = [
        "\n".join(lines[i : i + 30])
        for i, line in enumerate(lines)
        if line.lstrip().startswith("not ok") and "subtestsFailed" not in "".join(lines[i : i + 6])
    ]
    return "\n...\n".join(picked) if picked else tap[-6000:]


@pytest.fixture(scope="module")
def npm() -> str:
    npm = shutil.which("npm")
    assert npm and shutil.which("node"), "Node.js 20 and npm are needed for the TypeScript client"
    if not (PACKAGE / "node_modules" / ".bin" / "tsc").exists():
        run([npm, "ci", "--no-audit", "--no-fund"], cwd=PACKAGE)
    return npm


@pytest.fixture(scope="module")
def built(npm: str) -> Path:
    """dist/ (ESM + .d.ts), built by tsc (incremental: a no-op when nothing changed)."""
    run([str(PACKAGE / "node_modules" / ".bin" / "tsc"), "-b"], cwd=PACKAGE)
    assert (PACKAGE / "dist" / "index.js").exists() and (PACKAGE / "dist" / "index.d.ts").exists()
    assert (PACKAGE / "dist" / "agents.d.ts").exists() and (PACKAGE / "dist" / "ai.d.ts").exists()
    return PACKAGE / "dist"


def test_npm_test_passes_against_a_live_server_with_auth_on(
    npm: str, live_server: ServerProcess
) -> None:
    done = run(
        [npm, "test"],
        cwd=PACKAGE,
        env={
            "SESSION_MEMORY_URL": live_server.url,
            "SESSION_MEMORY_API_KEY": API_KEY,
            "OPENAI_AGENTS_DISABLE_TRACING": "1",
        },
    )
    counts = dict(
        re.findall(r"^# (tests|pass|fail|skipped|todo|cancelled) (\d+)$", done.stdout, re.M)
    )
    assert counts.get("fail") == "0" and counts.get("cancelled") == "0", done.stdout[-3000:]
    assert counts.get("skipped") == "0" and counts.get("todo") == "0"
    assert int(counts["pass"]) >= 38 and counts["pass"] == counts["tests"]


def readme_example() -> str:
    text = (PACKAGE / "README.md").read_text()
    usage = text.split("## Use", 1)[1]
    match = re.search(r"```js\n(.*?)```", usage, re.S)
    assert match, "the README's Use section has no js example"
    return match.group(1)


def test_the_readme_example_runs_as_pasted_against_a_local_server(
    built: Path, tmp_path: Path
) -> None:
    # as `scripts/serve` starts it: SQLite, in-process lock, loopback, auth off (auto)
    server = ServerProcess(
        env={
            "DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'sm.db'}",
            "REDIS_URL": "",
            "AUTH__MODE": "auto",
            "AUTH__BOOTSTRAP_KEY": "",
            "LOG_LEVEL": "warning",
        },
        log_path=tmp_path / "server.log",
    )
    env = {k: v for k, v in os.environ.items() if k != "SESSION_MEMORY_API_KEY"}
    (tmp_path / "node_modules").mkdir()
    os.symlink(PACKAGE, tmp_path / "node_modules" / "session-memory-client")
    (tmp_path / "example.mjs").write_text(readme_example())
    server.start(timeout=120)  # a loaded machine is slow to import the app
    try:
        done = subprocess.run(
            ["node", "example.mjs"],
            cwd=tmp_path,
            env={**env, "SESSION_MEMORY_URL": server.url},
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        server.stop()
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert re.fullmatch(r"prompt: 6 messages, \d+ tokens", lines[0]), lines
    assert lines[1] == "compacted 4 items"
    assert re.fullmatch(r"restored 2 items \(undo with \S+\)", lines[2])
    assert re.fullmatch(r'"Paris" found in [1-9]\d* items', lines[3])
    assert lines[4].startswith("404 session-not-found: ")


RETRY_SCRIPT = """
import { SessionMemoryClient } from "session-memory-client";
const [url, key, id] = process.argv.slice(2);
const statuses = [];
const counting = async (input, init) => {
  const response = await fetch(input, init);
  if (String(input).includes("/items")) statuses.push(response.status);
  return response;
};
const sm = new SessionMemoryClient({ baseUrl: url, apiKey: key, fetch: counting,
  retry: { maxAttempts: 8, backoffMs: 100, maxDelayMs: 1000 } });
const result = await sm.appendItems(id, { items: [{ type: "message", role: "user", content: "hi" }] });
console.log(JSON.stringify({ statuses, version: result.version }));
"""


def test_a_real_503_is_retried_until_the_session_is_free(
    built: Path, live_server: ServerProcess, pg_database: str, tmp_path: Path
) -> None:
    sid = f"ts-busy-{uuid.uuid4().hex[:8]}"
    with SessionMemoryClient(live_server.url, api_key=API_KEY) as sm:
        sm.create_session(sid)
        (tmp_path / "node_modules").mkdir()
        os.symlink(PACKAGE, tmp_path / "node_modules" / "session-memory-client")
        (tmp_path / "retry.mjs").write_text(RETRY_SCRIPT)
        # another writer holds the session's row for 1 s; the server waits 0.3 s for it
        # (LOCK__WAIT_SECONDS), then answers 503 with Retry-After
        db = psycopg.connect(pg_database.replace("postgresql+psycopg://", "postgresql://"))
        try:
            held = db.execute(
                "SELECT 1 FROM sessions WHERE tenant_id = 'default' AND id = %s FOR UPDATE", (sid,)
            )
            assert held.fetchall() == [(1,)]
            timer = threading.Timer(1.0, db.rollback)
            timer.start()
            started = time.monotonic()
            done = run(["node", "retry.mjs", live_server.url, API_KEY, sid], cwd=tmp_path)
            timer.join()
        finally:
            db.close()
        seen = json.loads(done.stdout)
        assert seen["statuses"][0] == 503 and seen["statuses"][-1] == 201, seen
        assert seen["version"] == 2 and time.monotonic() - started < 30
        assert sm.get_session(sid)["item_count"] == 1
