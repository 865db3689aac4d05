"""Embedders: text to vectors, behind one small interface (docs/semantic-search.md).

An ``Embedder`` has a ``model`` name (stored with every vector: vectors of two models are never
compared), its ``dimensions`` and ``async embed(texts)``, which returns one unit-length vector
per text, in order. No embedder runs inference on the event loop: the builtin one runs in one
worker thread with a bounded number of CPU threads, the ``openai`` one waits on the network.

``build_embedder(settings)`` picks the provider named by ``EMBEDDINGS__PROVIDER``; ``none``
gives ``None`` (semantic search off). Infrastructure like ``app.llm``, not domain: numpy and
onnxruntime live here, never in ``app.domain``.

Errors::

    UpstreamFailed                  (app.domain.errors)
    └── EmbeddingError              .cause ("http_status", "timeout", "connection",
                                     "malformed_response", "model")
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from app.domain.errors import UpstreamFailed
from app.settings import EmbeddingsSettings

__all__ = ["Embedder", "EmbeddingError", "build_embedder", "embed_query"]


class EmbeddingError(UpstreamFailed):
    """The embedder produced no usable vectors. ``cause`` is machine-readable."""

    def __init__(self, detail: str, *, cause: str, attempts: int = 1) -> None:
        super().__init__(detail)
        self.cause = cause
        self.attempts = attempts


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into unit-length float vectors of ``dimensions`` floats each."""

    @property
    def model(self) -> str: ...

    @property
    def dimensions(self) -> int: ...

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order (an empty input gives an empty list)."""
        ...

    async def aclose(self) -> None: ...


async def embed_query(embedder: Embedder, text: str) -> list[float]:
    """One query's vector, ahead of any indexing backlog where the embedder can do that (the
    builtin one has a query thread of its own); otherwise as ``embed([text])``."""
    fast = getattr(embedder, "embed_query", None)
    if fast is not None:
        vector: list[float] = await fast(text)
        return vector
    [vector] = await embedder.embed([text])
    return vector


def build_embedder(settings: EmbeddingsSettings) -> Embedder | None:
    """The embedder the settings name, or None for ``provider=none``. Nothing is loaded or
    connected here: the builtin model loads on first use, in its worker thread."""
    if settings.provider == "none":
        return None
    if settings.provider == "openai":
        from app.embeddings.openai import OpenAIEmbedder

        return OpenAIEmbedder(settings)
    from app.embeddings.builtin import BuiltinEmbedder

    return BuiltinEmbedder(settings)
