"""The README's first command on a fresh clone: `scripts/serve` answers, and the virtualenv it
made holds the service alone (no test tools, no npm packages). A second `scripts/serve` on the
same port fails fast, naming the setting that changes it.

The clone is of the committed HEAD of the repository the suite runs in (in CI, CI's own clean
clone). pip's download cache (~/.cache/pip) is used as for any user, so the time measured here
is the install and start, not the network."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import httpx

from tests.conftest import ROOT
from tests.support.services import free_port

TEST_TOOLS = ["pytest", "hypothesis", "schemathesis", "openai", "anthropic", "agents", "ruff"]


def _env() -> dict[str, str]:
    # What a user's shell would have: nothing of this test run's virtualenv or settings.
    drop = {"VIRTUAL_ENV", "PYTHONPATH", "DATABASE_URL", "REDIS_URL", "HOST", "PORT", "PIP_NO_CACHE_DIR"}
    env = {k: v for k, v in os.environ.items() if k not in drop and not k.startswith("AUTH__")}
    venv_bin = str(ROOT / ".venv" / "bin")
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != venv_bin)
    return env


def test_scripts_serve_on_a_fresh_clone_installs_the_runtime_only(tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True, timeout=120)
    port = free_port()
    started = time.monotonic()
    server = subprocess.Popen(
        ["scripts/serve", "--port", str(port)], cwd=clone, env=_env(),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
    )
    try:
        answered = None
        while time.monotonic() - started < 240 and server.poll() is None:
            try:
                answered = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2)
                break
            except httpx.TransportError:
                time.sleep(0.5)
        assert answered is not None and answered.status_code == 200, server.poll()
        first_answer = time.monotonic() - started

        venv = clone / ".venv"
        for tool in TEST_TOOLS:
            probe = subprocess.run([str(venv / "bin" / "python"), "-c", f"import {tool}"],
                                   capture_output=True, timeout=60)
            assert probe.returncode != 0, f"scripts/serve installed the test tool {tool!r}"
        assert not list(clone.glob("**/node_modules")), "scripts/serve ran npm"
        size = sum(f.stat().st_size for f in venv.rglob("*") if f.is_file() and not f.is_symlink())
        print(f"first answer after {first_answer:.1f} s; .venv {size / 2**20:.0f} MiB")
        # The runtime carries the builtin embedding model and its ONNX runtime (~200 MiB of the
        # ~355 MiB); the full test bench is ~600 MiB.
        assert size < 420 * 2**20, size

        # A second server on the taken port: the install is skipped, and the refusal names
        # the way out instead of "startup complete" followed by exit 3.
        again = time.monotonic()
        second = subprocess.run(["scripts/serve", "--port", str(port)], cwd=clone, env=_env(),
                                capture_output=True, text=True, timeout=120)
        assert second.returncode == 2, (second.returncode, second.stderr)
        assert "--port" in second.stderr and "PORT" in second.stderr, second.stderr
        assert "startup complete" not in second.stderr.lower()
        assert time.monotonic() - again < 30
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=40)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
