"""Errors the clients raise: every non-2xx answer becomes a ``ProblemError`` carrying the
service's RFC 9457 problem document; the status picks a subclass so callers can catch
``NotFoundError`` or ``ConflictError`` without comparing numbers."""

from __future__ import annotations

from typing import Any

import httpx

from session_memory_client.types import Problem

PROBLEM_BASE = "https://session-memory.dev/problems/"


class SessionMemoryError(Exception):
    """Base class of everything this package raises on purpose."""


class ProblemError(SessionMemoryError):
    """The service answered with an error status. ``problem`` is its problem document (a
    synthetic one, ``type`` ``about:blank``, if the body was not one)."""

    def __init__(self, problem: Problem, *, status: int, headers: httpx.Headers | None = None):
        self.problem: Problem = problem
        self.status: int = status
        self.headers: httpx.Headers = headers if headers is not None else httpx.Headers()
        super().__init__(f"{status} {problem.get('title', '')}: {problem.get('detail', '')}")

    @property
    def type(self) -> str:
        """The problem ``type`` URI, stable per error kind."""
        return self.problem.get("type", "about:blank")

    @property
    def code(self) -> str:
        """The last segment of ``type`` (``session-not-found``, ``version-mismatch``, ...)."""
        return self.type.removeprefix(PROBLEM_BASE)

    @property
    def title(self) -> str:
        return self.problem.get("title", "")

    @property
    def detail(self) -> str:
        return self.problem.get("detail", "")

    @property
    def errors(self) -> list[dict[str, Any]]:
        """Field-level errors of a 422 (``loc``, ``msg``, ``type``); empty otherwise."""
        return list(self.problem.get("errors") or [])

    @property
    def retry_after(self) -> float | None:
        """Seconds the service asked to wait (503), if it said."""
        value = self.headers.get("retry-after")
        try:
            return float(value) if value is not None else None
        except ValueError:
            return None


class BadRequestError(ProblemError):
    """400: a malformed header."""


class AuthenticationError(ProblemError):
    """401: missing, unknown or revoked API key."""


class PermissionDeniedError(ProblemError):
    """403: the key lacks the scope."""


class NotFoundError(ProblemError):
    """404: no such session, item or snapshot (or not visible to this key)."""


class ConflictError(ProblemError):
    """409: the session exists, an item id is taken, working memory is empty (pop), ..."""


class PreconditionFailedError(ProblemError):
    """412: ``If-Match`` did not match the session version."""


class PayloadTooLargeError(ProblemError):
    """413: body, batch, item or metadata too large."""


class InvalidInputError(ProblemError):
    """422: invalid input (see ``errors``), or an ``Idempotency-Key`` reused with another body."""


class UpstreamError(ProblemError):
    """502: the model used for an ``llm`` compaction failed."""


class UnavailableError(ProblemError):
    """503: session busy or a backend unavailable; retried automatically before it is raised."""


_BY_STATUS: dict[int, type[ProblemError]] = {
    400: BadRequestError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    412: PreconditionFailedError,
    413: PayloadTooLargeError,
    422: InvalidInputError,
    502: UpstreamError,
    503: UnavailableError,
}


def error_from_response(response: httpx.Response) -> ProblemError:
    """The typed exception for an error response."""
    problem: Problem
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("type"), str):
        problem = body  # type: ignore[assignment]
    else:
        problem = {
            "type": "about:blank",
            "title": response.reason_phrase,
            "status": response.status_code,
            "detail": response.text[:500],
        }
    cls = _BY_STATUS.get(response.status_code, ProblemError)
    return cls(problem, status=response.status_code, headers=response.headers)
