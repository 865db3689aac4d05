"""An app with an embedder, for the API tests of semantic search and recall: the ``openai``
embedder against the local stand-in server (tests/support/fake_llm.py: a bag-of-words vector
per text, so texts sharing words are near and rankings are deterministic), on a database of
the test module's own (the shared test database holds the whole suite's items: a backlog the
indexer would work through first).

Fixtures (import the ``*_fixture`` names a module uses): ``fake_llm`` and ``own_database``
(one per module and backend), ``indexed`` (a client of a fresh app on them and its runtime,
with a model of its own so that only the test's items count), ``embedding_batch_size`` (4; a
module overrides it by defining its own). ``app_client`` runs an app of any settings;
``embedder_settings`` builds those of the embedder app."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator, Mapping

import httpx
import pytest

from app.main import create_app
from app.services.runtime import Runtime
from app.settings import Settings
from tests.support.fake_llm import FakeLLMServer
from tests.support.services import REDIS_URL, create_pg_database, drop_pg_database
from tests.support.spec_check import ASYNC_HOOKS


async def app_client(settings: Settings) -> AsyncIterator[tuple[httpx.AsyncClient, Runtime]]:
    """A client of an app of ``settings`` (running its lifespan: the indexer too) and the
    app's runtime; ``async for client, rt in app_client(settings)``."""
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://localhost", event_hooks=ASYNC_HOOKS
        ) as client:
            yield client, app.state.runtime


def embedder_settings(
    database: Mapping[str, object],
    fake_llm: FakeLLMServer,
    *,
    model: str | None = None,
    batch_size: int = 4,
    dimensions: int = 256,
    auth: Mapping[str, object] | None = None,
) -> Settings:
    """Settings of an app on ``database`` (``own_database``) embedding with ``fake_llm``:
    ``model`` (a fresh one by default), no retries; auth off unless ``auth`` is given.
    256 dimensions leave few hash collisions: texts sharing no word are far apart."""
    return Settings(
        **database,  # type: ignore[arg-type]
        auth=auth or {"mode": "off"},
        embeddings={
            "provider": "openai",
            "base_url": fake_llm.base_url,
            "model": model or f"fake-{uuid.uuid4().hex[:6]}",
            "batch_size": batch_size,
            "dimensions": dimensions,
            "retries": 0,
        },
    )


@pytest.fixture(name="fake_llm", scope="module")
def fake_llm_fixture() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as server:
        yield server


@pytest.fixture(name="own_database", scope="module")
def own_database_fixture(
    backend: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, object]]:
    """A database of the module's own: ``database_url`` and ``redis_url`` settings."""
    if backend == "sqlite":
        from app.store.migrate import upgrade

        url = f"sqlite+aiosqlite:///{tmp_path_factory.mktemp('embedder') / 'embedder.db'}"
        upgrade(url)
        yield {"database_url": url, "redis_url": None}
        return
    url, name = create_pg_database()
    try:
        yield {"database_url": url, "redis_url": REDIS_URL}
    finally:
        drop_pg_database(name)


@pytest.fixture(name="embedding_batch_size")
def embedding_batch_size_fixture() -> int:
    """Texts per embeddings request in ``indexed``."""
    return 4


@pytest.fixture(name="indexed")
async def indexed_fixture(
    own_database: dict[str, object], fake_llm: FakeLLMServer, embedding_batch_size: int
) -> AsyncIterator[tuple[httpx.AsyncClient, Runtime]]:
    fake_llm.reset()
    settings = embedder_settings(own_database, fake_llm, batch_size=embedding_batch_size)
    async for pair in app_client(settings):
        yield pair
