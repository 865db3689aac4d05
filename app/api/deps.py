"""Request dependencies: the runtime, the caller, conditional and idempotency headers.

Each is a plain function of the request (``runtime_of``, ``actor_of``, ``expected_version``,
``idempotency_of``) with a ``Depends`` wrapper for the routes. The wrappers are ``async def``
although none awaits: FastAPI runs a plain ``def`` dependency in a worker thread, and three
thread hops per request cost more than the rest of the routing. The append route, every
agent's hot path, calls the plain functions itself and reads its query and headers with
``ReadInRoute``: FastAPI's dependency and parameter solving cost about a fifth of an append's
CPU (cProfile, py-spy)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Annotated, Any, Literal

from fastapi import Depends, Header, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from pydantic import Field, TypeAdapter, ValidationError

from app.domain.errors import InvalidInput
from app.services.runtime import Actor, IdempotencyRequest, Runtime

# Declared in the spec too, so generated clients (and fuzzers) know what is accepted.
IF_MATCH_PATTERN = r'^(\*|(W/)?"?[0-9]{1,18}"?)$'
IDEMPOTENCY_KEY_PATTERN = r"^[\x21-\x7e]{1,255}$"
_ETAG_RE = re.compile(r'^(?:W/)?"?(\d{1,18})"?$')
_IDEMPOTENCY_RE = re.compile(IDEMPOTENCY_KEY_PATTERN)
# Escaped in a decoded path parameter put in an idempotency scope: ``%`` (so an id holding
# ``%3F`` is not the id holding ``?``), and what ``request.url.path`` escapes too (so a scope
# of an id without ``%`` is the one the URL path gave before).
_SCOPE_ESCAPES = str.maketrans({"%": "%25", "?": "%3F", "#": "%23", "\\": "%5C"})


def runtime_of(request: Request) -> Runtime:
    return request.app.state.runtime  # type: ignore[no-any-return]


async def get_runtime(request: Request) -> Runtime:
    return runtime_of(request)


async def get_actor(request: Request) -> Actor:
    return actor_of(request)


def actor_of(request: Request) -> Actor:
    """The caller, as ``AuthMiddleware`` resolved it for every /v1 request. A route outside /v1
    asking for an actor gets one only when auth is off: it never silently runs as a default
    all-powerful caller."""
    state = request.scope.get("state", {})
    actor: Actor | None = state.get("actor")
    if actor is not None:
        return actor
    if getattr(request.app.state, "auth_required", False):
        raise HTTPException(
            status_code=401,
            detail="send the API key as `Authorization: Bearer <key>`",
            headers={"WWW-Authenticate": 'Bearer realm="session-memory"'},
        )
    return Actor(
        tenant_id=getattr(request.app.state, "default_tenant", "default"),
        request_id=state.get("request_id"),
    )


IF_MATCH_DESCRIPTION = 'Session version the write expects, e.g. `"7"`; 412 if it differs'
IDEMPOTENCY_KEY_DESCRIPTION = "Retries with the same key return the stored response (24 h)"
IfMatchHeader = Annotated[
    str | None, Header(description=IF_MATCH_DESCRIPTION, pattern=IF_MATCH_PATTERN)
]
IdempotencyKeyHeader = Annotated[
    str | None, Header(description=IDEMPOTENCY_KEY_DESCRIPTION, pattern=IDEMPOTENCY_KEY_PATTERN)
]


class ReadInRoute:
    """A path, query or header parameter the route reads itself, published in the spec
    through the route's ``openapi_extra`` (``spec``) exactly as FastAPI would publish it. For
    the hot paths (append, context read): FastAPI 0.165 re-inspects each declared
    parameter's annotation on every request, which cost an append more CPU than its
    tokenizing and its SQL together, and a context read (14 query parameters) half its CPU.
    ``kind`` is the parameter's type (validated with pydantic, as FastAPI would); ``schema``
    its published JSON schema. Bad values are refused as FastAPI refuses them: one
    ``RequestValidationError`` (422 ``validation-error``) naming each at
    ``[location, name]`` (``read_all``)."""

    def __init__(
        self,
        location: Literal["path", "query", "header"],
        name: str,
        kind: Any,
        schema: dict[str, Any],
        *,
        title: str | None = None,
        description: str | None = None,
        default: Any = None,
    ) -> None:
        self.location = location
        self.name = name
        self.default = default
        self._adapter: TypeAdapter[Any] = TypeAdapter(kind)
        described = {} if description is None else {"description": description}
        with_default = {} if default is None else {"default": default}
        title = title or name.replace("_", " ").title()
        # FastAPI repeats a query or header parameter's description inside its schema
        inner = {} if location == "path" else described
        self.spec = {
            "name": name,
            "in": location,
            "required": location == "path",
            "schema": {**schema, **inner, **with_default, "title": title},
            **described,
        }

    def read(self, request: Request) -> Any:
        return read_all(request, (self,))[0]

    def _read(self, request: Request, errors: list[Any]) -> Any:
        if self.location == "path":
            raw = request.path_params.get(self.name)
        elif self.location == "query":
            raw = request.query_params.get(self.name)
        else:
            raw = request.headers.get(self.name)
        if raw is None:
            return self.default
        try:
            return self._adapter.validate_python(raw)
        except ValidationError as exc:
            errors.extend(
                {**err, "loc": (self.location, self.name, *err["loc"])} for err in exc.errors()
            )
            return None


def read_all(request: Request, params: Sequence[ReadInRoute]) -> list[Any]:
    """The values of ``params``, in order; every bad one reported in one 422."""
    errors: list[Any] = []
    values = [param._read(request, errors) for param in params]  # noqa: SLF001
    if errors:
        raise RequestValidationError(errors)
    return values


IF_MATCH = ReadInRoute(
    "header",
    "if-match",
    Annotated[str, Field(pattern=IF_MATCH_PATTERN)],
    {"type": "string", "pattern": IF_MATCH_PATTERN},
    description=IF_MATCH_DESCRIPTION,
    title="If-Match",
)
IDEMPOTENCY_KEY = ReadInRoute(
    "header",
    "idempotency-key",
    Annotated[str, Field(pattern=IDEMPOTENCY_KEY_PATTERN)],
    {"type": "string", "pattern": IDEMPOTENCY_KEY_PATTERN},
    description=IDEMPOTENCY_KEY_DESCRIPTION,
    title="Idempotency-Key",
)


async def if_match_version(if_match: IfMatchHeader = None) -> int | None:
    return expected_version(if_match)


def expected_version(if_match: str | None) -> int | None:
    if if_match is None or if_match.strip() == "*":
        return None
    found = _ETAG_RE.fullmatch(if_match.strip())
    if not found:
        raise InvalidInput(
            'If-Match must be a session version ETag such as "7"',
            errors=[{"loc": ["header", "If-Match"], "msg": "not a version ETag"}],
        )
    return int(found.group(1))


async def idempotency(
    request: Request, idempotency_key: IdempotencyKeyHeader = None
) -> IdempotencyRequest | None:
    if idempotency_key is None:
        return None
    return idempotency_of(request, idempotency_key, await request.body())


def idempotency_of(
    request: Request, idempotency_key: str | None, body: bytes
) -> IdempotencyRequest | None:
    """The request's idempotency scope and hash; ``body``: the request body, already read."""
    if idempotency_key is None:
        return None
    if not _IDEMPOTENCY_RE.fullmatch(idempotency_key):
        raise InvalidInput(
            "Idempotency-Key must be 1-255 visible ASCII characters",
            errors=[{"loc": ["header", "Idempotency-Key"], "msg": "invalid"}],
        )
    return IdempotencyRequest(
        key=idempotency_key,
        method=request.method,
        path=idempotency_path(request),
        request_hash=IdempotencyRequest.hash_request(body, request.url.query),
    )


def idempotency_path(request: Request) -> str:
    """The route a request's idempotency record is scoped to: the route's template with its
    decoded path parameters put in, escaped (``_SCOPE_ESCAPES``). Two session ids never share
    a scope: the URL's path did not tell ``q?1`` (``/v1/sessions/q%3F1``) from ``q%3F1``."""
    template = getattr(request.scope.get("route"), "path_format", None)
    if not isinstance(template, str):  # not routed (never for a write): the decoded path
        return str(request.scope["path"]).translate(_SCOPE_ESCAPES)
    params = {
        name: str(value).translate(_SCOPE_ESCAPES) for name, value in request.path_params.items()
    }
    return template.format(**params)


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]
ActorDep = Annotated[Actor, Depends(get_actor)]
IfMatchDep = Annotated[int | None, Depends(if_match_version)]
IdempotencyDep = Annotated[IdempotencyRequest | None, Depends(idempotency)]
