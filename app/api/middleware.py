"""Request ids and the request body size limit: the rules ``EdgeMiddleware``
(``app.api.observability``) applies to every request."""

from __future__ import annotations

import re
import uuid
from typing import Any

from starlette.responses import Response

from app.api.problems import problem_response

_REQUEST_ID_RE = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")


def request_id_from(headers: list[tuple[bytes, bytes]]) -> str:
    """The client's ``X-Request-ID`` if well-formed, else a new one."""
    for name, value in headers:
        if name == b"x-request-id":
            candidate = value.decode("latin-1")
            if _REQUEST_ID_RE.fullmatch(candidate):
                return candidate
            break
    return uuid.uuid4().hex


def declared_length(headers: list[tuple[bytes, bytes]]) -> int:
    """The ``Content-Length`` header's value (-1: none or unreadable)."""
    for name, value in headers:
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return -1
    return -1


class BodyTooLarge(Exception):
    """Raised from ``receive`` once the body passes the limit."""


def body_too_large(max_bytes: int, scope: Any) -> Response:
    return problem_response(
        status=413,
        code="body-too-large",
        title="Request body too large",
        detail=f"the request body exceeds {max_bytes} bytes (the server's LIMITS__MAX_BODY_BYTES)",
        instance=scope.get("path"),
    )
