"""The Google ADK adapter (session_memory_client.adk) against a live server on both backends.

google-adk cannot live in the test venv (it pins opentelemetry-api, websockets and
google-genai below the service's pins), so its tests (clients/python/tests_adk) run in
``.venv-adk``, which scripts/bootstrap makes, as a pytest subprocess pointed at each server."""

from __future__ import annotations

import os
import re
import subprocess

from tests.clients.agents_support import service_url_fixture  # noqa: F401 (a fixture)
from tests.clients.conftest import API_KEY
from tests.conftest import ROOT

PYTHON = ROOT / ".venv-adk" / "bin" / "python"
SUITE = ROOT / "clients" / "python" / "tests_adk"
EXPECTED = 11  # the tests in clients/python/tests_adk


def test_the_adk_adapter_suite_passes(service_url: str) -> None:
    assert PYTHON.exists(), "run scripts/bootstrap: it makes .venv-adk with google-adk"
    done = subprocess.run(
        [str(PYTHON), "-m", "pytest", "-q", "-p", "no:cacheprovider", str(SUITE)],
        cwd=ROOT,
        env={**os.environ, "SM_URL": service_url, "SM_API_KEY": API_KEY},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-8000:] + done.stderr[-2000:]
    summary = done.stdout.strip().splitlines()[-1]
    assert re.search(rf"\b{EXPECTED} passed\b", summary), summary
    assert not re.search(r"failed|error|skipped|xfail", summary), summary
