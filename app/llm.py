"""The OpenAI-compatible chat-completions client used by LLM compaction.

One ``LLMClient`` is built at start-up (in the app's lifespan) from explicit ``LLMSettings`` and
reused: it keeps one ``httpx.AsyncClient`` (connection pool) until ``aclose()``.

``complete(messages)`` POSTs ``{base_url}/chat/completions`` (``base_url`` includes the version
prefix, e.g. ``http://localhost:8001/v1``, as in the OpenAI SDKs) and returns the assistant
message's text content.

Retries: a timeout, a connection failure, HTTP 5xx, 408 and 429 are retried up to
``settings.retries`` more times, with exponential backoff (``backoff * 2**n`` seconds, capped at
``max_backoff``; a numeric ``Retry-After`` is honoured within the same cap). Other 4xx answers
and malformed responses are not retried: asking again would not change them.

Errors (every one names its cause in its message, fit for a 502 problem ``detail``)::

    UpstreamFailed                      (app.domain.errors)
    └── LLMError                        .cause, .attempts
        ├── LLMStatusError              HTTP error status; .status, .body_excerpt
        ├── LLMTimeout                  no complete answer within ``settings.timeout`` seconds
        ├── LLMConnectionError          refused, DNS, reset, ...
        └── LLMMalformedResponse        2xx, but not a chat completion with text content

The API key is sent as ``Authorization: Bearer`` and is never part of a message or repr.
"""

from __future__ import annotations

import asyncio
import errno
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Self, TypeAlias

import httpx

from app.domain.errors import UpstreamFailed

__all__ = [
    "LLMClient",
    "LLMConnectionError",
    "LLMError",
    "LLMMalformedResponse",
    "LLMSettings",
    "LLMStatusError",
    "LLMTimeout",
]

LLMErrorCause: TypeAlias = Literal["http_status", "timeout", "connection", "malformed_response"]

BODY_EXCERPT_CHARS = 500
_RETRYABLE_STATUSES = frozenset({408, 429})


class LLMError(UpstreamFailed):
    """The LLM endpoint did not produce a usable answer. ``cause`` is machine-readable."""

    cause: LLMErrorCause = "connection"

    def __init__(self, detail: str, *, attempts: int = 1) -> None:
        super().__init__(detail)
        self.attempts = attempts


class LLMStatusError(LLMError):
    cause: LLMErrorCause = "http_status"

    def __init__(self, detail: str, *, status: int, body_excerpt: str, attempts: int = 1) -> None:
        super().__init__(detail, attempts=attempts)
        self.status = status
        self.body_excerpt = body_excerpt


class LLMTimeout(LLMError):
    cause: LLMErrorCause = "timeout"


class LLMConnectionError(LLMError):
    cause: LLMErrorCause = "connection"


class LLMMalformedResponse(LLMError):
    cause: LLMErrorCause = "malformed_response"


@dataclass(frozen=True, slots=True)
class LLMSettings:
    """Everything the client needs, passed in explicitly (built from ``Settings`` by the app).

    ``timeout`` bounds each attempt end to end, in seconds; ``retries`` is the number of
    additional attempts after the first. ``json_mode`` sends
    ``response_format={"type": "json_object"}``; turn it off for servers that reject it.
    """

    base_url: str
    model: str
    api_key: str | None = field(default=None, repr=False)
    timeout: float = 60.0
    retries: int = 2
    backoff: float = 0.5
    max_backoff: float = 8.0
    json_mode: bool = True
    temperature: float | None = 0.0
    max_tokens: int | None = None

    @property
    def endpoint(self) -> str:
        return self.base_url.rstrip("/") + "/chat/completions"


def _excerpt(text: str, limit: int = BODY_EXCERPT_CHARS) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _connection_reason(exc: BaseException) -> str:
    """A short, specific reason for a transport failure (``connection refused``, ...)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, ConnectionRefusedError) or (
            isinstance(current, OSError) and current.errno == errno.ECONNREFUSED
        ):
            return "connection refused"
        if isinstance(current, ConnectionResetError):
            return "connection reset"
        current = current.__cause__ or current.__context__
    text = str(exc).strip()
    if "refused" in text.lower() or "all connection attempts failed" in text.lower():
        return "connection refused"
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after", "").strip()
    try:
        return max(0.0, float(value)) if value else None
    except ValueError:
        return None


def _content(response: httpx.Response, endpoint: str) -> str:
    """The assistant text of a chat completion, or ``LLMMalformedResponse``."""

    def malformed(what: str) -> LLMMalformedResponse:
        return LLMMalformedResponse(
            f"malformed response from the LLM endpoint {endpoint}: {what}; "
            f"body: {_excerpt(response.text) or '(empty)'}"
        )

    try:
        data: Any = response.json()
    except (ValueError, UnicodeDecodeError):
        raise malformed("not JSON") from None
    if not isinstance(data, dict):
        raise malformed("not a JSON object")
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise malformed("no choices")
    message = choices[0].get("message")
    if not isinstance(message, dict):
        raise malformed("choices[0] has no message")
    content = message.get("content")
    if isinstance(content, list):  # some servers answer with content parts
        texts = [p.get("text") for p in content if isinstance(p, dict)]
        content = "".join(t for t in texts if isinstance(t, str)) if texts else None
    if not isinstance(content, str):
        reason = choices[0].get("finish_reason")
        raise malformed(f"choices[0].message.content is not text (finish_reason={reason!r})")
    return content


class LLMClient:
    """An async OpenAI-compatible chat-completions client; create once, reuse, ``aclose()``."""

    def __init__(
        self, settings: LLMSettings, *, transport: httpx.AsyncBaseTransport | None = None
    ) -> None:
        self.settings = settings
        headers = {"Accept": "application/json"}
        if settings.api_key:
            headers["Authorization"] = f"Bearer {settings.api_key}"
        self._client = httpx.AsyncClient(
            headers=headers,
            timeout=httpx.Timeout(settings.timeout),
            transport=transport,
        )

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._client.aclose()

    def _payload(
        self,
        messages: Sequence[Mapping[str, str]],
        *,
        model: str | None,
        json_mode: bool | None,
    ) -> dict[str, Any]:
        settings = self.settings
        payload: dict[str, Any] = {
            "model": model or settings.model,
            "messages": [dict(m) for m in messages],
        }
        if settings.temperature is not None:
            payload["temperature"] = settings.temperature
        if settings.max_tokens is not None:
            payload["max_tokens"] = settings.max_tokens
        if settings.json_mode if json_mode is None else json_mode:
            payload["response_format"] = {"type": "json_object"}
        return payload

    async def complete(
        self,
        messages: Sequence[Mapping[str, str]],
        *,
        model: str | None = None,
        json_mode: bool | None = None,
    ) -> str:
        """The assistant's text for ``messages``; raises an ``LLMError`` naming the cause.

        ``model`` and ``json_mode`` override the settings for this call.
        """
        settings = self.settings
        endpoint = settings.endpoint
        body = json.dumps(
            self._payload(messages, model=model, json_mode=json_mode), ensure_ascii=False
        ).encode()
        attempts = max(1, settings.retries + 1)
        failure: LLMError | None = None
        for attempt in range(1, attempts + 1):
            wait: float | None = None
            try:
                async with asyncio.timeout(settings.timeout):
                    response = await self._client.post(
                        endpoint, content=body, headers={"Content-Type": "application/json"}
                    )
            except (TimeoutError, httpx.TimeoutException):
                failure = LLMTimeout(
                    f"the LLM endpoint {endpoint} did not answer within {settings.timeout:g} s "
                    f"(timeout; {attempt} attempt{'s' if attempt > 1 else ''})",
                    attempts=attempt,
                )
            except httpx.TransportError as exc:
                failure = LLMConnectionError(
                    f"could not reach the LLM endpoint {endpoint}: {_connection_reason(exc)} "
                    f"({attempt} attempt{'s' if attempt > 1 else ''})",
                    attempts=attempt,
                )
            else:
                status = response.status_code
                if status < 400:
                    return _content(response, endpoint)
                excerpt = _excerpt(response.text)
                failure = LLMStatusError(
                    f"the LLM endpoint {endpoint} answered HTTP {status} "
                    f"({attempt} attempt{'s' if attempt > 1 else ''}): {excerpt or '(empty body)'}",
                    status=status,
                    body_excerpt=excerpt,
                    attempts=attempt,
                )
                if status < 500 and status not in _RETRYABLE_STATUSES:
                    raise failure
                wait = _retry_after(response)
            if attempt < attempts:
                delay = settings.backoff * 2 ** (attempt - 1) if wait is None else wait
                await asyncio.sleep(min(delay, settings.max_backoff))
        assert failure is not None
        raise failure
