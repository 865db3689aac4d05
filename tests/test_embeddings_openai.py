"""The ``openai`` embedder against a real local HTTP server (tests/support/fake_llm.py)."""

from __future__ import annotations

import math
import socket
import time
from collections.abc import Iterator

import pytest
from pydantic import SecretStr

from app.embeddings import EmbeddingError, build_embedder
from app.embeddings.openai import OpenAIEmbedder
from app.settings import EmbeddingsSettings
from tests.support.fake_llm import FakeLLMServer, fake_embedding


@pytest.fixture(scope="module")
def fake_llm() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as server:
        yield server


@pytest.fixture(autouse=True)
def fresh_fake(fake_llm: FakeLLMServer) -> None:
    fake_llm.reset()


def settings(fake: FakeLLMServer, **overrides: object) -> EmbeddingsSettings:
    values: dict[str, object] = {
        "provider": "openai",
        "base_url": fake.base_url,
        "model": "fake-embed",
        "api_key": SecretStr("sk-test-embeddings"),
        "batch_size": 3,
        "timeout_seconds": 2.0,
        "retries": 2,
    }
    values.update(overrides)
    return EmbeddingsSettings.model_validate(values)


def unit(vector: list[float]) -> list[float]:
    norm = math.sqrt(sum(x * x for x in vector))
    return [x / norm for x in vector]


async def test_batches_in_order_and_normalised(fake_llm: FakeLLMServer) -> None:
    texts = [f"text number {i} about {'cats' if i % 2 else 'dogs'}" for i in range(7)]
    embedder = build_embedder(settings(fake_llm))
    assert isinstance(embedder, OpenAIEmbedder)
    try:
        vectors = await embedder.embed(texts)
    finally:
        await embedder.aclose()
    # The server answers each batch in reverse order: vectors are placed by index.
    expected = [unit(fake_embedding(t)) for t in texts]
    assert len(vectors) == len(texts)
    for got, want in zip(vectors, expected, strict=True):
        assert got == pytest.approx(want)
    assert len({tuple(v) for v in vectors}) > 1
    assert embedder.dimensions == 8 and embedder.model == "fake-embed"
    requests = fake_llm.requests()
    assert [len(r["body"]["input"]) for r in requests] == [3, 3, 1]
    assert requests[0]["body"]["model"] == "fake-embed"
    assert requests[0]["headers"]["authorization"] == "Bearer sk-test-embeddings"


async def test_dimensions_are_sent_and_checked(fake_llm: FakeLLMServer) -> None:
    embedder = OpenAIEmbedder(settings(fake_llm, dimensions=16))
    try:
        [vector] = await embedder.embed(["hello world"])
    finally:
        await embedder.aclose()
    assert len(vector) == 16
    assert fake_llm.requests()[0]["body"]["dimensions"] == 16


async def test_a_vector_of_the_wrong_size_is_malformed(fake_llm: FakeLLMServer) -> None:
    fake_llm.script({"mode": "raw", "content": {"data": [{"index": 0, "embedding": [1.0, 0.0]}]}})
    embedder = OpenAIEmbedder(settings(fake_llm, dimensions=16))
    try:
        with pytest.raises(EmbeddingError) as caught:
            await embedder.embed(["hello"])
    finally:
        await embedder.aclose()
    assert caught.value.cause == "malformed_response"
    assert "2 floats, not 16" in str(caught.value)


@pytest.mark.parametrize("status", [429, 500, 503])
async def test_retryable_statuses_are_retried(fake_llm: FakeLLMServer, status: int) -> None:
    fake_llm.script({"mode": "error", "status": status}, {"mode": "error", "status": status})
    embedder = OpenAIEmbedder(settings(fake_llm), backoff=0.01)
    try:
        [vector] = await embedder.embed(["after two failures"])
    finally:
        await embedder.aclose()
    assert vector == pytest.approx(unit(fake_embedding("after two failures")))
    assert len(fake_llm.requests()) == 3


async def test_retries_run_out_with_the_cause_named(fake_llm: FakeLLMServer) -> None:
    fake_llm.configure("error", status=503)
    embedder = OpenAIEmbedder(settings(fake_llm, retries=1), backoff=0.01)
    try:
        with pytest.raises(EmbeddingError) as caught:
            await embedder.embed(["never"])
    finally:
        await embedder.aclose()
    assert caught.value.cause == "http_status" and caught.value.attempts == 2
    assert "HTTP 503" in str(caught.value)
    assert len(fake_llm.requests()) == 2


async def test_client_errors_are_not_retried(fake_llm: FakeLLMServer) -> None:
    fake_llm.configure("error", status=400)
    embedder = OpenAIEmbedder(settings(fake_llm), backoff=0.01)
    try:
        with pytest.raises(EmbeddingError) as caught:
            await embedder.embed(["bad"])
    finally:
        await embedder.aclose()
    assert caught.value.cause == "http_status"
    assert len(fake_llm.requests()) == 1
    assert "sk-test-embeddings" not in str(caught.value)


async def test_a_hanging_server_times_out(fake_llm: FakeLLMServer) -> None:
    fake_llm.configure("hang", hang_seconds=5)
    embedder = OpenAIEmbedder(settings(fake_llm, timeout_seconds=0.3, retries=1), backoff=0.01)
    started = time.monotonic()
    try:
        with pytest.raises(EmbeddingError) as caught:
            await embedder.embed(["slow"])
    finally:
        await embedder.aclose()
    assert caught.value.cause == "timeout" and caught.value.attempts == 2
    assert time.monotonic() - started < 3


async def test_malformed_answer(fake_llm: FakeLLMServer) -> None:
    fake_llm.configure("malformed")
    embedder = OpenAIEmbedder(settings(fake_llm), backoff=0.01)
    try:
        with pytest.raises(EmbeddingError) as caught:
            await embedder.embed(["x"])
    finally:
        await embedder.aclose()
    assert caught.value.cause == "malformed_response"
    assert len(fake_llm.requests()) == 1


async def test_connection_refused() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    embedder = OpenAIEmbedder(
        EmbeddingsSettings(
            provider="openai", base_url=f"http://127.0.0.1:{port}/v1", model="m", retries=0
        )
    )
    try:
        with pytest.raises(EmbeddingError) as caught:
            await embedder.embed(["x"])
    finally:
        await embedder.aclose()
    assert caught.value.cause == "connection"


def test_openai_needs_a_base_url_and_model() -> None:
    with pytest.raises(ValueError, match="EMBEDDINGS__BASE_URL"):
        build_embedder(EmbeddingsSettings(provider="openai"))


def test_none_turns_semantic_search_off() -> None:
    assert build_embedder(EmbeddingsSettings(provider="none")) is None
