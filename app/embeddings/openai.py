"""The ``openai`` embedder: any OpenAI-compatible ``POST {base_url}/embeddings`` endpoint.

Texts go in batches of ``batch_size``; each request is bounded by ``timeout_seconds`` end to
end. A timeout, a connection failure, HTTP 408, 429 and 5xx are retried up to ``retries`` more
times with exponential backoff (a numeric ``Retry-After`` is honoured, capped); other 4xx
answers and malformed bodies are not (asking again would not change them). Every failure is an
``EmbeddingError`` naming its cause. Vectors are re-normalised to unit length (not every server
normalises) and must all have ``dimensions`` floats when the setting is given (it is also sent,
for models that can shorten their output); otherwise the first answer fixes the size.

The API key is sent as ``Authorization: Bearer`` and never appears in a message or repr.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from typing import Any

import httpx

from app.embeddings import EmbeddingError
from app.settings import EmbeddingsSettings

_BACKOFF = 0.5
_MAX_BACKOFF = 8.0
_EXCERPT = 300


def _excerpt(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _EXCERPT else flat[: _EXCERPT - 1] + "…"


def _unit(vector: list[float]) -> list[float]:
    norm = math.sqrt(math.fsum(x * x for x in vector))
    return [x / norm for x in vector] if norm > 0 else vector


class OpenAIEmbedder:
    """An OpenAI-compatible embeddings client; create once, reuse, ``aclose()``."""

    def __init__(
        self,
        settings: EmbeddingsSettings,
        *,
        backoff: float = _BACKOFF,
        max_backoff: float = _MAX_BACKOFF,
    ) -> None:
        if not settings.base_url or not settings.model:
            raise ValueError(
                "EMBEDDINGS__PROVIDER=openai needs EMBEDDINGS__BASE_URL and EMBEDDINGS__MODEL"
            )
        self._endpoint = settings.base_url.rstrip("/") + "/embeddings"
        self._model = settings.model
        self._dimensions = settings.dimensions
        self._batch_size = settings.batch_size
        self._retries = settings.retries
        self._max_chars = settings.max_chars
        self._backoff = backoff
        self._max_backoff = max_backoff
        headers = {"Accept": "application/json"}
        if settings.api_key is not None and settings.api_key.get_secret_value():
            headers["Authorization"] = f"Bearer {settings.api_key.get_secret_value()}"
        self._client = httpx.AsyncClient(
            headers=headers, timeout=httpx.Timeout(settings.timeout_seconds)
        )

    @property
    def model(self) -> str:
        return self._model

    @property
    def dimensions(self) -> int:
        """The configured size, or the size the endpoint answered with (0 before any)."""
        return self._dimensions or 0

    async def aclose(self) -> None:
        await self._client.aclose()

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self._batch_size):
            batch = [t[: self._max_chars] for t in texts[start : start + self._batch_size]]
            vectors.extend(await self._batch(batch))
        return vectors

    async def _batch(self, texts: list[str]) -> list[list[float]]:
        payload: dict[str, Any] = {"model": self._model, "input": texts, "encoding_format": "float"}
        if self._dimensions:
            payload["dimensions"] = self._dimensions
        attempt = 0
        while True:
            attempt += 1
            retry_after: float | None = None
            try:
                response = await self._client.post(self._endpoint, json=payload)
            except httpx.TimeoutException:
                error = EmbeddingError(
                    f"the embeddings endpoint {self._endpoint} did not answer in time",
                    cause="timeout",
                    attempts=attempt,
                )
            except httpx.TransportError as exc:
                error = EmbeddingError(
                    f"cannot reach the embeddings endpoint {self._endpoint}: "
                    f"{type(exc).__name__}: {exc}",
                    cause="connection",
                    attempts=attempt,
                )
            else:
                if response.is_success:
                    return self._vectors(response, count=len(texts))
                error = EmbeddingError(
                    f"the embeddings endpoint {self._endpoint} answered HTTP "
                    f"{response.status_code}: {_excerpt(response.text) or '(empty)'}",
                    cause="http_status",
                    attempts=attempt,
                )
                if response.status_code not in (408, 429) and response.status_code < 500:
                    raise error
                retry_after = _retry_after(response)
            if attempt > self._retries:
                raise error
            delay = self._backoff * 2 ** (attempt - 1) if retry_after is None else retry_after
            await asyncio.sleep(min(delay, self._max_backoff))

    def _vectors(self, response: httpx.Response, *, count: int) -> list[list[float]]:
        def malformed(what: str) -> EmbeddingError:
            return EmbeddingError(
                f"malformed answer from the embeddings endpoint {self._endpoint}: {what}",
                cause="malformed_response",
            )

        try:
            body = response.json()
        except ValueError:
            raise malformed("not JSON") from None
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, list) or len(data) != count:
            raise malformed(f"expected {count} embeddings in 'data'")
        out: list[list[float] | None] = [None] * count
        for position, entry in enumerate(data):
            index = entry.get("index", position) if isinstance(entry, dict) else None
            vector = entry.get("embedding") if isinstance(entry, dict) else None
            if (
                not isinstance(index, int)
                or not 0 <= index < count
                or out[index] is not None
                or not isinstance(vector, list)
                or not vector
                or not all(
                    isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)
                    for x in vector
                )
            ):
                raise malformed(f"data[{position}] is not an embedding of a distinct index")
            if self._dimensions is None:
                self._dimensions = len(vector)
            if len(vector) != self._dimensions:
                raise malformed(f"a vector of {len(vector)} floats, not {self._dimensions}")
            out[index] = _unit([float(x) for x in vector])
        return [v for v in out if v is not None]


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after", "").strip()
    try:
        return max(0.0, float(value)) if value else None
    except ValueError:
        return None
