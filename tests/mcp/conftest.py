"""MCP tests: the official `mcp` client library against real `session-memory serve` processes.

Two servers for the package: Postgres + Redis with auth on (a bootstrap key, and keys made
with the CLI), and SQLite with auth off on loopback (no token at all)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult

from tests.support.services import REDIS_URL, ROOT, ServerProcess
from tests.support.spec_check import SYNC_HOOKS

# generous: the machine running the suite may be busy with other work
STARTUP_SECONDS = 120
BOOTSTRAP_KEY = "sm-mcp-tests-" + "0123456789abcdef" * 2


@dataclass(frozen=True)
class Served:
    """A live server and the key to call it with (None: auth is off)."""

    name: str
    url: str
    token: str | None
    database_url: str

    def rest(self, token: str | None = None) -> httpx.Client:
        key = token or self.token
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30, event_hooks=SYNC_HOOKS)


@pytest.fixture(scope="package")
def postgres_served(pg_database: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    server = ServerProcess(
        env={
            "DATABASE_URL": pg_database,
            "REDIS_URL": REDIS_URL,
            "AUTO_MIGRATE": "false",
            "LOG_LEVEL": "warning",
            "AUTH__MODE": "on",
            "AUTH__BOOTSTRAP_KEY": BOOTSTRAP_KEY,
            "AUTH__BOOTSTRAP_TENANT": "mcp-tests",
        },
        log_path=tmp_path_factory.mktemp("mcp-pg") / "server.log",
    )
    server.start(timeout=STARTUP_SECONDS)
    yield Served("postgres", server.url, BOOTSTRAP_KEY, pg_database)
    server.stop()


@pytest.fixture(scope="package")
def sqlite_served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("mcp-sqlite")
    database_url = f"sqlite+aiosqlite:///{root / 'memory.db'}"
    # Loopback, no bootstrap key: `serve` turns auth off, as the REST API has it.
    server = ServerProcess(
        env={"DATABASE_URL": database_url, "LOG_LEVEL": "warning"},
        log_path=root / "server.log",
    )
    server.start(timeout=STARTUP_SECONDS)
    yield Served("sqlite", server.url, None, database_url)
    server.stop()


@pytest.fixture(params=["postgres", "sqlite"])
def served(request: pytest.FixtureRequest) -> Served:
    """Each test using it runs on both servers (auth on with Postgres, off with SQLite)."""
    return request.getfixturevalue(f"{request.param}_served")  # type: ignore[no-any-return]


@pytest.fixture
def sid() -> str:
    return f"mcp-{uuid.uuid4().hex[:12]}"


@asynccontextmanager
async def mcp_session(
    url: str, token: str | None = None, *, headers: dict[str, str] | None = None
) -> AsyncIterator[ClientSession]:
    """An initialized MCP client session on ``url``/mcp, with the key as a bearer header."""
    sent = dict(headers or {})
    if token:
        sent["Authorization"] = f"Bearer {token}"
    async with (
        httpx2.AsyncClient(headers=sent, timeout=30) as http,
        streamable_http_client(url + "/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def body(result: CallToolResult) -> Any:
    """A successful tool result's JSON; its text block says the same."""
    assert not result.is_error, result.content
    assert json.loads(result.content[0].text) == result.structured_content  # type: ignore[union-attr]
    return result.structured_content


def refusal(result: CallToolResult) -> dict[str, Any]:
    """A tool error's problem document."""
    assert result.is_error, result.structured_content
    problem = result.structured_content
    assert isinstance(problem, dict)
    assert json.loads(result.content[0].text) == problem  # type: ignore[union-attr]
    assert {"type", "title", "status", "detail"} <= set(problem)
    return problem


def create_key(database_url: str, *, tenant: str, scopes: str) -> str:
    """A key made by the operator's CLI, as a user would; its secret."""
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "app.cli",
            "keys",
            "create",
            "--tenant",
            tenant,
            "--name",
            f"mcp-{tenant}",
            "--scopes",
            scopes,
        ],  # fmt: skip
        env={**os.environ, "DATABASE_URL": database_url},
        cwd=str(ROOT),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return str(json.loads(result.stdout)["secret"])
