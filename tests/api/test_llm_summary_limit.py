"""An LLM-written summary obeys LIMITS__MAX_SUMMARY_CHARS like any other (issue 16): a model
that writes more is a 413 naming the setting, and nothing is compacted."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from app.main import create_app
from tests.api.helpers import all_items, append, assert_problem, assistant, create, user
from tests.conftest import make_settings
from tests.support.fake_llm import SUMMARY, FakeLLMServer
from tests.support.spec_check import ASYNC_HOOKS


@pytest.fixture(scope="module")
def fake_llm() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as server:
        yield server


@pytest.fixture(scope="module")
async def small_summary_client(
    backend: str, fake_llm: FakeLLMServer, request: pytest.FixtureRequest
) -> AsyncIterator[httpx.AsyncClient]:
    settings = make_settings(
        backend,
        request,
        llm={"base_url": fake_llm.base_url, "model": "fake-model", "retries": 0},
        limits={"max_summary_chars": 1000},
    )
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost", event_hooks=ASYNC_HOOKS) as client:
            yield client


async def test_a_summary_past_the_limit_is_a_413_and_compacts_nothing(
    small_summary_client: httpx.AsyncClient, fake_llm: FakeLLMServer, sid: str
) -> None:
    client = small_summary_client
    await create(client, sid)
    await append(client, sid, [user(f"question {n}") if n % 2 == 0 else assistant(f"answer {n}")
                               for n in range(8)])
    before = await all_items(client, sid)
    fake_llm.configure("json", content={**SUMMARY, "goal": "g" * 2000})
    r = await client.post(f"/v1/sessions/{sid}/compact", json={"policy": "llm", "keep_last_items": 2})
    problem = assert_problem(r, 413, "limit-exceeded")
    assert "LIMITS__MAX_SUMMARY_CHARS" in problem["detail"]
    assert await all_items(client, sid) == before
    assert (await client.get(f"/v1/sessions/{sid}")).json()["summary"] is None
    fake_llm.configure("json")  # the usual, short summary fits
    r = await client.post(f"/v1/sessions/{sid}/compact", json={"policy": "llm", "keep_last_items": 2})
    assert r.status_code == 200, r.text
    assert len((await client.get(f"/v1/sessions/{sid}")).json()["summary"]) <= 1000
