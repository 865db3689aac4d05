"""Client tests: one real `session-memory serve` process (Postgres + Redis, auth on with a
bootstrap key) that every client in this package talks to over HTTP."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.support.services import REDIS_URL, ServerProcess

API_KEY = "sm-client-tests-" + "0123456789abcdef" * 2


@pytest.fixture(scope="package")
def live_server(
    pg_database: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    server = ServerProcess(
        env={
            "DATABASE_URL": pg_database,
            "REDIS_URL": REDIS_URL,
            "AUTO_MIGRATE": "false",
            "LOG_LEVEL": "warning",
            "AUTH__MODE": "on",
            "AUTH__BOOTSTRAP_KEY": API_KEY,
            # short, so that a held lock answers 503 quickly (retry tests)
            "LOCK__WAIT_SECONDS": "0.3",
        },
        log_path=tmp_path_factory.mktemp("client-logs") / "server.log",
    )
    server.start()
    yield server
    server.stop()


@pytest.fixture
def new_id() -> str:
    return f"cli-{uuid.uuid4().hex[:12]}"
