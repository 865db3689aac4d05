"""Shared fixtures: every API test runs on both backends (SQLite + in-process lock, Postgres +
Redis), in-process through ASGI; system tests start real server processes."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from app.main import create_app
from app.settings import Settings
from tests.support.services import REDIS_URL, create_pg_database, drop_pg_database
from tests.support.spec_check import ASYNC_HOOKS

# TEST_BACKENDS=sqlite narrows the API tests to one backend for a quick local loop
# (`scripts/test --quick`); CI and `scripts/test` run both.
BACKENDS = [b for b in os.environ.get("TEST_BACKENDS", "sqlite,postgres").split(",") if b]

# The suite runs without the semantic indexer (embedding every test's items on a 2-core CI
# machine would slow everything else); the tests of semantic search turn it on themselves
# with ``embeddings={"provider": ...}``. Server processes the tests start inherit this.
os.environ.setdefault("EMBEDDINGS__PROVIDER", "none")


@pytest.fixture(scope="session")
def pg_database() -> Iterator[str]:
    url, name = create_pg_database()
    yield url
    drop_pg_database(name)


@pytest.fixture(scope="session")
def sqlite_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    from app.store.migrate import upgrade

    path = tmp_path_factory.mktemp("sqlite") / "test.db"
    url = f"sqlite+aiosqlite:///{path}"
    upgrade(url)
    return url


def make_settings(backend: str, request: pytest.FixtureRequest, **overrides: object) -> Settings:
    if backend == "sqlite":
        base: dict[str, object] = {"database_url": request.getfixturevalue("sqlite_url"), "redis_url": None}
    else:
        base = {"database_url": request.getfixturevalue("pg_database"), "redis_url": REDIS_URL}
    base.update(overrides)
    return Settings(**base)  # type: ignore[arg-type]


@pytest.fixture(scope="session", params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="session")
def settings(backend: str, request: pytest.FixtureRequest) -> Settings:
    return make_settings(
        backend,
        request,
        limits={
            "max_body_bytes": 512 * 1024,
            "max_items_per_append": 50,
            "max_item_bytes": 64 * 1024,
            "max_metadata_bytes": 1024,
        },
    )


@pytest.fixture(scope="session")
async def app_client(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost", event_hooks=ASYNC_HOOKS) as client:
            yield client


@pytest.fixture
def client(app_client: httpx.AsyncClient) -> httpx.AsyncClient:
    return app_client


@pytest.fixture
def sid() -> str:
    """A fresh session id: tests share one database per backend and never collide."""
    return f"t-{uuid.uuid4().hex[:12]}"


ROOT = Path(__file__).resolve().parents[1]


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """In CI no test may skip: a skipped Postgres or Redis test would hide a broken backend."""
    import os

    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = reporter.stats.get("skipped", []) if reporter else []
    if os.environ.get("CI") and skipped:
        reporter.write_line(f"CI forbids skipped tests; {len(skipped)} skipped", red=True)
        session.exitstatus = 1
