"""Schemathesis over the committed ``openapi/openapi.json`` against real `session-memory serve`
processes (SQLite + in-process lock, and Postgres + Redis), with auth on, each deployed twice:
with an LLM endpoint and without one (then `policy: llm` is a declared 403, never a 5xx).

Every operation gets generated valid (positive) and invalid (negative) requests; every response
goes through all of schemathesis' checks (no 5xx, status codes, content types, headers and
bodies as declared, invalid input rejected, valid input accepted, auth not ignored, ...). What
it finds is fixed in the app or the spec, never excluded here.

Budget: ``FUZZ_EXAMPLES`` (default 24) examples per operation and mode, on each backend, so
about 2 x 2 x 27 x 24 > 2,000 cases per deployment; the test asserts the total it actually ran.
"""

from __future__ import annotations

import copy
import os
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode

from tests.conftest import ROOT
from tests.support.fake_llm import FakeLLMServer
from tests.support.services import REDIS_URL, ServerProcess

SPEC = ROOT / "openapi" / "openapi.json"
KEY = "fuzz-bootstrap-key-" + "f" * 32
EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "24"))
MIN_CASES_PER_BACKEND = 1000


@pytest.fixture(scope="module")
def fake_llm() -> Iterator[FakeLLMServer]:
    """An LLM endpoint (a real local stand-in), so `policy: llm` is exercised end to end."""
    with FakeLLMServer() as server:
        yield server


DEPLOYMENTS = [("sqlite", "llm"), ("postgres", "llm"), ("sqlite", "no-llm"), ("postgres", "no-llm")]


@pytest.fixture(scope="module", params=DEPLOYMENTS, ids=["-".join(d) for d in DEPLOYMENTS])
def live_server(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[str, ServerProcess]]:
    backend, llm = request.param
    tmp = tmp_path_factory.mktemp(f"fuzz-{backend}-{llm}")
    env = {
        "AUTH__BOOTSTRAP_KEY": KEY,
        "AUTH__BOOTSTRAP_TENANT": "fuzz",
        "LOG_LEVEL": "warning",
        "LOCK__WAIT_SECONDS": "2",
    }
    if llm == "llm":
        fake_llm: FakeLLMServer = request.getfixturevalue("fake_llm")
        env |= {
            "LLM__BASE_URL": fake_llm.base_url,
            "LLM__MODEL": "fake-model",
            "LLM__RETRIES": "0",
        }
    if backend == "sqlite":
        env |= {"DATABASE_URL": f"sqlite+aiosqlite:///{tmp / 'fuzz.db'}"}
    else:
        env |= {
            "DATABASE_URL": request.getfixturevalue("pg_database"),
            "REDIS_URL": REDIS_URL,
            "AUTO_MIGRATE": "false",
        }
    server = ServerProcess(env=env, log_path=tmp / "server.log")
    server.start(timeout=180)
    try:
        yield f"{backend} ({llm})", server
    finally:
        server.stop()
        log = (tmp / "server.log").read_text(errors="replace")
        assert "Traceback" not in log, log[-4000:]


def _fresh_idempotency_key(case: schemathesis.Case) -> None:
    """A reused Idempotency-Key with another body is a 422 by design (DESIGN §6), a rule about
    server state that no schema can express; generated keys collide ("0", "0", ...), so each
    valid case gets a key of its own. Reuse is tested in tests/api/test_items.py."""
    for name in list(case.headers or {}):
        if name.lower() == "idempotency-key":
            case.headers[name] = f"{case.headers[name][:200]}-{uuid.uuid4().hex}"  # type: ignore[index]


def _current_if_match(case: schemathesis.Case, base_url: str, http: requests.Session) -> None:
    """`If-Match` is a precondition on server state: a generated version ("775") almost never is
    the session's, and the 412 that follows is the header working, not a rejected request (412
    is tested in tests/api). So a valid case keeps the generated form (quotes, `W/`, `*`) with
    the session's current version in it, or drops the header when there is no session yet."""
    headers = case.headers or {}
    name = next((n for n in headers if n.lower() == "if-match"), None)
    if name is None or "*" in headers[name]:
        return
    session_id = (case.path_parameters or {}).get("session_id")
    version = None
    if session_id is not None:
        r = http.get(
            f"{base_url}/v1/sessions/{quote(str(session_id), safe='')}",
            headers={"Authorization": f"Bearer {KEY}"},
        )
        if r.status_code == 200:
            version = str(r.json()["version"])
    if version is None:
        del headers[name]
    else:
        headers[name] = re.sub(r"[0-9]+", version, headers[name], count=1)


# A record as an export writes it, per format (what `GET .../snapshots/{id}` gave for one
# user message).
_EXPORTED_RECORDS: dict[str, dict[str, object]] = {
    "anthropic": {"message": {"role": "user", "content": "hi"}},
    "openai-chat": {"message": {"role": "user", "content": "hi"}},
    "gemini": {"content": {"role": "user", "parts": [{"text": "hi"}]}},
    "openai-responses": {"type": "message", "role": "user", "content": "hi"},
}


def _exported_records(case: schemathesis.Case) -> None:
    """A snapshot item kept in a provider format carries its `record`: the item as the service
    stored it, which only an export writes (the spec says so; its shape per format is the
    service's stored form, which the schema does not spell out). A generated record is almost
    never one, and the 422 that follows is the validation working (tested in
    tests/api/test_snapshots.py). So a valid restore case gets an exported record of its
    format in each such item."""
    body = case.body if isinstance(case.body, dict) else None
    document = body.get("snapshot") if body is not None else None
    items = document.get("items") if isinstance(document, dict) else None
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict) and item.get("format") in _EXPORTED_RECORDS:
            item["record"] = copy.deepcopy(_EXPORTED_RECORDS[item["format"]])


def _run_operation(
    operation: schemathesis.APIOperation,
    mode: GenerationMode,
    base_url: str,
    http: requests.Session,
    failures: dict[tuple[str, str], str],
) -> int:
    count = 0

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        derandomize=True,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=operation.as_strategy(generation_mode=mode))
    def run(case: schemathesis.Case) -> None:
        nonlocal count
        count += 1
        if mode == GenerationMode.POSITIVE:
            _fresh_idempotency_key(case)
            _current_if_match(case, base_url, http)
            _exported_records(case)
        try:
            # The key comes from the config's auth (not a header forced onto every case), so
            # a negative case that leaves the key out is sent without it, as schemathesis meant.
            case.call_and_validate(base_url=base_url, session=http)
        except BaseException as exc:  # a FailureGroup: keep one report per kind of failure
            text = str(exc)
            kind = next((ln for ln in text.splitlines() if ln.startswith("- ")), text[:80])
            failures.setdefault((f"{operation.label} [{mode.value}]", kind), text[:3000])

    try:
        run()
    except Unsatisfiable:
        pass  # no invalid request exists for an operation without inputs (GET /healthz)
    return count


@pytest.mark.timeout(1200)  # ~2 minutes on a quiet machine; far more on a loaded one
def test_the_committed_spec_holds_against_a_live_server(
    live_server: tuple[str, ServerProcess],
) -> None:
    backend, server = live_server
    # Strings carry no NUL: neither Postgres text nor JSONB can hold one, and the service
    # refuses it on every backend (tests/api/test_hostile_input.py); the fuzzer is told so.
    config = schemathesis.Config.from_dict(
        {
            "generation": {"allow-x00": False},
            "auth": {"openapi": {"bearerAuth": {"bearer": KEY}}},
        }
    )
    schema = schemathesis.openapi.from_path(str(Path(SPEC)), config=config)
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 20
    total = 0
    failures: dict[tuple[str, str], str] = {}
    with requests.Session() as http:
        for operation in operations:
            for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
                total += _run_operation(operation, mode, server.url, http, failures)
    report = "\n\n".join(f"### {op}: {kind}\n{text}" for (op, kind), text in failures.items())
    assert not failures, (
        f"{len(failures)} distinct failure(s) in {total} cases on {backend}:\n\n{report}"
    )
    assert total >= MIN_CASES_PER_BACKEND, f"only {total} cases on {backend}"
