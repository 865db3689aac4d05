"""System tests: real `session-memory serve` processes on the real Postgres and Redis."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.services import REDIS_URL, ServerProcess


@pytest.fixture(scope="module")
def pg_server(pg_database: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """One server process on Postgres + Redis."""
    server = ServerProcess(
        env={"DATABASE_URL": pg_database, "REDIS_URL": REDIS_URL, "AUTO_MIGRATE": "false",
             "LOG_LEVEL": "warning"},
        log_path=tmp_path_factory.mktemp("logs") / "server.log",
    )
    server.start()
    yield server
    server.stop()
