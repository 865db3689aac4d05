"""The docs and ``scripts/check-deploy`` agree on the compose command: the docs run
``docker compose`` (Compose v2), and the check validates with ``docker compose`` whenever the
Docker CLI has it, falling back to the standalone ``docker-compose`` only without it.

The check is run from a scratch copy of the repository's deployment files, with stand-ins on
``PATH`` for the programs it calls (``docker``, ``docker-compose``, ``apt-get``; our own
``scripts/bootstrap`` and ``.venv/bin/hadolint`` as no-ops), each recording its arguments.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from tests.support.services import ROOT

STANDALONE_COMMAND = re.compile(
    r"docker-compose\s+(?:-f\s+\S+\s+)*(up|exec|config|down|run|ps|logs|pull|build)\b"
)


def _doc_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_the_docs_run_compose_as_docker_compose() -> None:
    wrong = [
        f"{path.relative_to(ROOT)}: {match.group(0)}"
        for path in _doc_files()
        for match in STANDALONE_COMMAND.finditer(path.read_text(encoding="utf-8"))
    ]
    assert not wrong, wrong
    ops = (ROOT / "docs" / "operations.md").read_text(encoding="utf-8")
    assert "docker compose up -d --build" in ops


def _scratch(tmp_path: Path, *, plugin: bool) -> tuple[Path, dict[str, str], Path]:
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    (repo / "deploy").mkdir()
    (repo / ".venv" / "bin").mkdir(parents=True)
    shutil.copy2(ROOT / "scripts" / "check-deploy", repo / "scripts" / "check-deploy")
    shutil.copy2(ROOT / "docker-compose.yml", repo / "docker-compose.yml")
    shutil.copy2(ROOT / "deploy" / "compose.tls.yml", repo / "deploy" / "compose.tls.yml")
    log = tmp_path / "calls.log"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    # `docker compose version` answers only when the plugin is "installed".
    docker_status = "0" if plugin else '$([ "$1" = compose ] && echo 1 || echo 0)'
    stand_ins = {
        bin_dir / "docker": f'echo "docker $*" >> "{log}"; exit {docker_status}',
        bin_dir / "docker-compose": f'echo "docker-compose $*" >> "{log}"',
        bin_dir / "apt-get": f'echo "apt-get $*" >> "{log}"; exit 1',
        repo / "scripts" / "bootstrap": "exit 0",
        repo / ".venv" / "bin" / "hadolint": f'echo "hadolint $*" >> "{log}"',
    }
    for path, body in stand_ins.items():
        path.write_text(f"#!/bin/sh\n{body}\n")
        path.chmod(0o755)
    env = {"PATH": f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin", "HOME": str(tmp_path)}
    return repo, env, log


def _run(repo: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(repo / "scripts" / "check-deploy")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_check_deploy_validates_with_docker_compose(tmp_path: Path) -> None:
    repo, env, log = _scratch(tmp_path, plugin=True)
    done = _run(repo, env)
    assert done.returncode == 0, done.stdout + done.stderr
    calls = log.read_text().splitlines()
    assert "docker compose -f docker-compose.yml config -q" in calls, calls
    assert "docker compose -f docker-compose.yml -f deploy/compose.tls.yml config -q" in calls, (
        calls
    )
    assert not [c for c in calls if c.startswith(("docker-compose", "apt-get"))], calls
    assert "hadolint Dockerfile" in calls


def test_without_the_plugin_check_deploy_falls_back_to_the_standalone_binary(
    tmp_path: Path,
) -> None:
    repo, env, log = _scratch(tmp_path, plugin=False)
    done = _run(repo, env)
    assert done.returncode == 0, done.stdout + done.stderr
    calls = log.read_text().splitlines()
    assert "docker-compose -f docker-compose.yml config -q" in calls, calls
    assert "validating with: docker-compose" in done.stdout
