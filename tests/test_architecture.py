"""Layering contracts (import-linter): the domain stays pure, services know nothing of HTTP."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_import_contracts_hold() -> None:
    lint = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run(
        [str(lint), str(ROOT / "pyproject.toml")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "BROKEN" not in result.stdout and "KEPT" in result.stdout


def test_the_contract_would_catch_a_violation(tmp_path: Path) -> None:
    """A contract that cannot fail proves nothing: plant a violation in a copy and see it fail."""
    import shutil

    copy = tmp_path / "proj"
    shutil.copytree(ROOT / "app", copy / "app")
    shutil.copy(ROOT / "pyproject.toml", copy / "pyproject.toml")
    (copy / "app" / "domain" / "planted.py").write_text("import sqlalchemy\n")
    lint = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run(
        [str(lint), str(copy / "pyproject.toml")],
        cwd=copy,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(copy), "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode != 0, result.stdout
    assert "BROKEN" in result.stdout
