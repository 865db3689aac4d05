"""``scripts/test --help`` prints its usage and exits 0, installing and running nothing: the
script is run from a scratch copy of the repository layout whose ``scripts/bootstrap`` and
``scripts/services`` only leave a mark, so a run that goes past the usage shows."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.services import ROOT


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_prints_the_usage_and_runs_nothing(tmp_path: Path, flag: str) -> None:
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    shutil.copy2(ROOT / "scripts" / "test", scripts / "test")
    for name in ("bootstrap", "services"):
        marker = scripts / name
        marker.write_text(f"#!/bin/sh\ntouch '{tmp_path}/ran-{name}'\nexit 3\n")
        marker.chmod(0o755)
    done = subprocess.run(
        [str(scripts / "test"), flag, "--quick"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: scripts/test"), done.stdout
    assert "--quick" in done.stdout and "TEST_PG_ADMIN_URL" in done.stdout
    assert not list(tmp_path.glob("ran-*")), "the usage went on to install or start services"
    assert "pytest's own help follows" not in done.stdout
