"""RFC 9457 problem details: every error leaves the service as ``application/problem+json``
with a stable ``type`` per error kind."""

from __future__ import annotations

import logging
import re
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from app import jsonutil
from app.domain import errors as e
from app.domain.retention import TenantErased
from app.domain.wire_errors import is_type_label, merge_union_errors, wire_loc

log = logging.getLogger(__name__)

PROBLEM_BASE = "https://session-memory.dev/problems/"
PROBLEM_MEDIA_TYPE = "application/problem+json"

_STATUS: list[tuple[type[e.DomainError], int]] = [
    # a key still cached on some replica after its tenant's erasure began: gone for good
    (TenantErased, 410),
    (e.NotFound, 404),
    (e.Conflict, 409),
    (e.PreconditionFailed, 412),
    (e.Forbidden, 403),
    (e.LimitExceeded, 413),
    (e.InvalidInput, 422),
    (e.IdempotencyKeyReused, 422),
    (e.Unavailable, 503),
    # Not temporary (no retry helps until an operator configures an endpoint), not the
    # session's state, and not a malformed request (the spec offers `llm` to every client):
    # this deployment refuses what the request asks for.
    (e.LLMNotConfigured, 403),
    (e.SemanticSearchOff, 403),
    (e.UpstreamFailed, 502),
]


class ProblemError(BaseModel):
    loc: list[str | int] = Field(
        default_factory=list,
        description="Where: `body`, `query`, `path` or `header`, then wire field names and "
        "list indexes",
    )
    msg: str
    type: str = Field(
        description="The kind of error, snake_case (`missing`, `string_type`, "
        "`probably_another_format`, ...)"
    )


class Problem(BaseModel):
    """An RFC 9457 problem document."""

    type: str = Field(examples=[PROBLEM_BASE + "session-not-found"])
    title: str = Field(examples=["Session not found"])
    status: int = Field(examples=[404])
    detail: str = Field(examples=["session 'demo' not found"])
    instance: str | None = None
    errors: list[ProblemError] | None = None


def status_for(exc: e.DomainError) -> int:
    for cls, status in _STATUS:
        if isinstance(exc, cls):
            return status
    return 400


def problem_response(
    *,
    status: int,
    code: str,
    title: str,
    detail: str,
    errors: list[dict[str, Any]] | None = None,
    headers: dict[str, str] | None = None,
    instance: str | None = None,
) -> Response:
    body: dict[str, Any] = {
        "type": PROBLEM_BASE + code,
        "title": title,
        "status": status,
        "detail": detail,
    }
    if instance:
        body["instance"] = instance
    if errors is not None:
        body["errors"] = errors
    return Response(
        jsonutil.dumps_bytes(body, default=str),
        status_code=status,
        media_type=PROBLEM_MEDIA_TYPE,
        headers=headers,
    )


def _clean_errors(raw: list[Any], *, default_type: str, body: Any = None) -> list[dict[str, Any]]:
    """``loc``, ``msg`` and ``type`` of each error; an error that names no ``type`` takes
    ``default_type`` (never null: a client can switch on it). ``loc`` names wire fields only
    (``app.domain.wire_errors``): inside the request ``body`` (when given) the keys and indexes
    it holds, elsewhere everything but pydantic's labels of union members."""
    out = []
    for err in raw:
        loc = [x if isinstance(x, int) else str(x) for x in err.get("loc", [])]
        kind = str(err.get("type") or default_type)
        if body is not None and loc[:1] == ["body"]:
            loc = ["body", *wire_loc(body, loc[1:], missing=kind == "missing")]
        else:
            loc = [x for x in loc if not is_type_label(x)]
        out.append({"loc": loc, "msg": str(err.get("msg", "")), "type": kind})
    return merge_union_errors(out)


async def _domain_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, e.DomainError)
    headers = None
    if isinstance(exc, e.Unavailable):
        headers = {"Retry-After": str(exc.retry_after)}
    errors = (
        _clean_errors(exc.errors, default_type=exc.code.replace("-", "_"))
        if exc.errors is not None
        else None
    )
    status = status_for(exc)
    if status == 422 and errors is None:
        errors = []
    return problem_response(
        status=status,
        code=exc.code,
        title=exc.title,
        detail=exc.detail,
        errors=errors,
        headers=headers,
        instance=request.url.path,
    )


_BODY_REQUIRED = "a JSON body is required (send an object with Content-Type: application/json)"
_BODY_NOT_OBJECT = "the JSON body must be an object"


def _explain_body(error: dict[str, Any]) -> dict[str, Any]:
    """Pydantic's words for a missing or non-object body name its internals ("a valid
    dictionary or object to extract fields from"): say what the request lacks instead."""
    if error["loc"] == ["body"]:
        if error["type"] == "missing":
            return error | {"msg": _BODY_REQUIRED}
        if error["type"] == "model_attributes_type":
            return error | {"msg": _BODY_NOT_OBJECT}
    return error


async def _validation_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    errors = [
        _explain_body(err)
        for err in _clean_errors(list(exc.errors()), default_type="invalid", body=exc.body)
    ]
    whole_body = len(errors) == 1 and errors[0]["loc"] == ["body"]
    return problem_response(
        status=422,
        code="validation-error",
        title="Request validation failed",
        detail=errors[0]["msg"] if whole_body else f"{len(errors)} invalid field(s)",
        errors=errors,
        instance=request.url.path,
    )


_HTTP_CODES = {
    400: ("bad-request", "Bad request"),
    401: ("unauthorized", "Unauthorized"),
    403: ("forbidden", "Forbidden"),
    404: ("not-found", "Not found"),
    405: ("method-not-allowed", "Method not allowed"),
    406: ("not-acceptable", "Not acceptable"),
    413: ("body-too-large", "Request body too large"),
    415: ("unsupported-media-type", "Unsupported media type"),
}


# Problem types answered without a ``DomainError`` (the ASGI guards, authentication, request
# validation, the last-resort handler), by status; with the domain errors' codes and
# ``_HTTP_CODES`` they are every type this service answers (docs/api-guide.md's error table
# lists each: tests/api/test_problem_types.py).
OTHER_PROBLEM_TYPES: dict[str, int] = {
    "api-key-required": 401,  # app.api.auth
    "invalid-api-key": 401,
    "insufficient-scope": 403,
    "origin-not-allowed": 403,  # app.api.host_guard
    "misdirected-request": 421,
    "invalid-json": 422,  # app.api.body_guard
    "json-too-deep": 422,
    "validation-error": 422,  # request validation, below
    "unknown-query-parameter": 422,  # app.api.query_guard
    "internal-error": 500,
    "http-error": 500,  # an HTTP status no row of _HTTP_CODES names
}


# Probed in this order for ``Allow`` (RFC 9110 §10.2.1); OPTIONS is always allowed.
_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")


def allowed_methods(request: Request) -> list[str]:
    """Every method some route serves at the request's path, then OPTIONS. Starlette's own
    ``Allow`` names only the first route that matched the path, not all of them.

    On a path of the API, only what its OpenAPI document declares there: paths resolve as the
    document resolves them (the path with the fewest parameters wins), so ``/items/pop`` is
    the pop operation, whose path declares POST, and not the item ``{item_id}`` = ``pop``
    that the template ``/items/{item_id}`` also matches."""
    routes = request.app.router.routes
    path = request.scope["path"]
    allowed: list[str] = []
    for method in _METHODS:
        # A fresh scope per probe: matching may write into the scope it is given.
        probe = {
            "type": "http",
            "path": path,
            "root_path": request.scope.get("root_path", ""),
            "method": method,
            "headers": [],
            "query_string": b"",
        }
        if any(route.matches(probe)[0] == Match.FULL for route in routes):
            allowed.append(method)
    declared = _declared_methods(request.app.openapi()["paths"], path)
    if declared is not None:
        allowed = [m for m in allowed if m in declared]
    return [*allowed, "OPTIONS"]


def _declared_methods(paths: dict[str, Any], path: str) -> set[str] | None:
    """The methods the OpenAPI document declares for ``path`` (None: no path of it matches),
    a literal path before a template (OpenAPI 3.1, "Path Templating Matching")."""
    matching = [
        template
        for template in paths
        if re.fullmatch(re.sub(r"\\\{[^/]+?\\\}", "[^/]+", re.escape(template)), path)
    ]
    if not matching:
        return None
    fewest = min(template.count("{") for template in matching)
    return {
        method.upper()
        for template in matching
        if template.count("{") == fewest
        for method in paths[template]
    }


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    headers = dict(exc.headers) if exc.headers else {}
    if exc.status_code == 405:
        headers["Allow"] = ", ".join(allowed_methods(request))
        if request.method == "OPTIONS":
            # The path exists (else this would be a 404): OPTIONS says what it allows.
            return Response(status_code=204, headers=headers)
    code, title = _HTTP_CODES.get(exc.status_code, ("http-error", "HTTP error"))
    detail = exc.detail if isinstance(exc.detail, str) else title
    if exc.status_code == 405 and detail == "Method Not Allowed":
        detail = f"{request.method} is not allowed here; allowed: {headers['Allow']}"
    return problem_response(
        status=exc.status_code,
        code=code,
        title=title,
        detail=detail,
        headers=headers or None,
        instance=request.url.path,
    )


async def _unhandled(request: Request, exc: Exception) -> Response:
    log.exception("unhandled error on %s %s", request.method, request.url.path)
    return problem_response(
        status=500,
        code="internal-error",
        title="Internal server error",
        detail="an unexpected error occurred; it has been logged",
        instance=request.url.path,
    )


def install_problem_handlers(app: FastAPI) -> None:
    app.add_exception_handler(e.DomainError, _domain_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Exception, _unhandled)


def problem_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI declarations of the problem responses a route can give."""
    descriptions = {
        400: "Bad request (malformed header)",
        401: "Missing or invalid API key",
        403: "The key lacks the scope",
        404: "Not found (or not visible to this key)",
        409: "Conflict",
        412: "If-Match does not match the session version",
        413: "Body, batch or item too large",
        415: "The body is not declared as JSON (Content-Type: application/json)",
        422: "Invalid input",
        502: "The upstream model failed",
        503: "Session busy or lock backend unavailable (see Retry-After)",
    }
    return {
        s: {
            "model": Problem,
            "description": descriptions.get(s, "Problem"),
            "content": {PROBLEM_MEDIA_TYPE: {"schema": {"$ref": "#/components/schemas/Problem"}}},
        }
        for s in statuses
    }
