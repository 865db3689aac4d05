"""The builtin embedder: the shipped MiniLM model, offline, off the event loop."""

from __future__ import annotations

import asyncio
import math
import threading
from collections.abc import AsyncIterator

import pytest

from app.domain.recall import cosine
from app.embeddings import EmbeddingError, build_embedder
from app.embeddings.builtin import DIMENSIONS, MODEL_NAME, BuiltinEmbedder, _package_dir
from app.settings import EmbeddingsSettings


@pytest.fixture(scope="module")
async def embedder() -> AsyncIterator[BuiltinEmbedder]:
    built = build_embedder(EmbeddingsSettings(provider="builtin", threads=1, batch_size=4))
    assert isinstance(built, BuiltinEmbedder)
    yield built
    await built.aclose()


async def test_vectors_are_unit_length_and_ordered(embedder: BuiltinEmbedder) -> None:
    texts = ["short", "a somewhat longer sentence about databases", "x" * 5000, ""]
    vectors = await embedder.embed(texts)
    assert embedder.model == MODEL_NAME and embedder.dimensions == DIMENSIONS == 384
    assert [len(v) for v in vectors] == [384] * 4
    for v in vectors:
        assert math.isclose(math.sqrt(sum(x * x for x in v)), 1.0, rel_tol=1e-4)
    # Batched with other texts or alone, a text gets the same vector (order is kept).
    [alone] = await embedder.embed([texts[1]])
    assert cosine(alone, vectors[1]) > 0.9999


async def test_a_paraphrase_is_nearer_than_an_unrelated_text(embedder: BuiltinEmbedder) -> None:
    fact, question, other = await embedder.embed(
        [
            "The staging database password rotates every Tuesday at 03:00 UTC.",
            "When does the credential for the pre-production DB get changed?",
            "Please refactor src/cli.py and tell me what you find.",
        ]
    )
    assert cosine(fact, question) > 0.4
    assert cosine(fact, question) > cosine(question, other) + 0.2


async def test_inference_runs_off_the_event_loop(embedder: BuiltinEmbedder) -> None:
    await embedder.embed(["load the model first"])
    loop_thread = threading.get_ident()
    ticks = 0
    stop = asyncio.Event()

    async def ticker() -> None:
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            await asyncio.sleep(0.001)

    task = asyncio.create_task(ticker())
    await embedder.embed([f"sentence number {i} about a build failure" for i in range(48)])
    stop.set()
    await task
    assert ticks >= 5  # the loop kept running while the batch was embedded
    assert embedder._model is not None
    options = embedder._model.session.get_session_options()
    assert options.intra_op_num_threads == 1
    assert loop_thread == threading.get_ident()


async def test_empty_input_needs_no_model() -> None:
    fresh = BuiltinEmbedder(EmbeddingsSettings())
    assert await fresh.embed([]) == []
    assert fresh._model is None
    await fresh.aclose()


def test_a_missing_package_is_named() -> None:
    with pytest.raises(EmbeddingError, match="no_such_model_package") as caught:
        _package_dir("no_such_model_package")
    assert caught.value.cause == "model"


async def test_the_model_gives_the_vectors_it_always_gave(embedder: BuiltinEmbedder) -> None:
    """Stored vectors are only comparable with new ones if the model computes what it always
    did: onnxruntime's session options (memory arena, graph optimisations, prepacking) must not
    change the arithmetic. The first components of one text's vector, as the pinned model gave
    them when the index was built (a tolerance for CPU-specific kernels)."""
    [vector] = await embedder.embed(["The deploy key rotates on Mondays."])
    expected = [0.01402, -0.02808, 0.04099, -0.03627, 0.00308, -0.00442]
    assert all(math.isclose(a, b, abs_tol=5e-5) for a, b in zip(vector, expected, strict=False))
