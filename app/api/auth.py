"""Authentication and scopes for every ``/v1`` request (and the inspector's reads under
``/ui/api/``), before any route runs.

``AuthMiddleware`` turns ``Authorization: Bearer <key>`` into the request's ``Actor`` (kept in
the request state, read by ``deps.get_actor``), so no route can forget it:

- no or malformed header: 401 ``api-key-required``; unknown or revoked key: 401
  ``invalid-api-key``; both with ``WWW-Authenticate: Bearer``;
- the scope a request needs: ``admin`` under ``/v1/admin``, ``read`` for GET/HEAD (and
  ``POST .../context``, which only computes a projection), ``write`` for everything else;
  missing it: 403 ``insufficient-scope``.

Tenancy and session prefixes are not decided here: the services scope every query to the
actor's tenant and answer 404 for a session of another tenant or outside the key's prefix.

With auth off (loopback only), every caller is the default tenant with every scope; a request
the server received on a non-loopback address (the ASGI ``scope["server"]``) is refused with 401
``api-key-required`` instead, whatever HOST says.
"""

from __future__ import annotations

import ipaddress
import logging
import re
from typing import Any

from fastapi import FastAPI
from starlette.types import ASGIApp, Receive, Scope, Send

from app.api.problems import PROBLEM_MEDIA_TYPE, problem_response
from app.services.keys import KeyResolver, actor_for, is_loopback
from app.services.runtime import Actor

log = logging.getLogger(__name__)

API_PREFIX = "/v1"
SECURITY_SCHEME = "bearerAuth"
_READ_ONLY_POSTS = re.compile(r"^/v1/sessions/[^/]+/context$")
_BEARER = re.compile(r"^[Bb][Ee][Aa][Rr][Ee][Rr] +(\S+) *$")


# The inspector's own reads (``/ui/api/...``): outside the API contract, same keys and scopes.
UI_API_PREFIX = "/ui/api/"


def protected(path: str) -> bool:
    return path == API_PREFIX or path.startswith((API_PREFIX + "/", UI_API_PREFIX))


def required_scope(method: str, path: str) -> str:
    if path == "/v1/admin" or path.startswith("/v1/admin/"):
        return "admin"
    if method in ("GET", "HEAD", "OPTIONS"):
        return "read"
    if method == "POST" and _READ_ONLY_POSTS.match(path):
        return "read"
    return "write"


def received_off_loopback(scope: Scope) -> bool:
    """Whether the server received the request on a network address other than loopback.
    ASGI servers report the listening socket's IP (uvicorn, hypercorn, gunicorn's workers);
    ``None`` is a Unix socket, and a name instead of an IP comes only from in-process
    transports (httpx's ASGITransport): neither is a network address."""
    server = scope.get("server")
    if not server:
        return False
    host = str(server[0]).strip("[]").split("%", 1)[0]
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return not is_loopback(host)


def bearer_token(scope: Scope) -> str | None:
    for name, value in scope["headers"]:
        if name == b"authorization":
            found = _BEARER.match(value.decode("latin-1"))
            return found.group(1) if found else None
    return None


class AuthMiddleware:
    """Resolve the caller of every /v1 and /ui/api/ request (see module doc)."""

    def __init__(self, app: ASGIApp, *, enabled: bool, default_tenant: str) -> None:
        self.app = app
        self.enabled = enabled
        self.default_tenant = default_tenant

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not protected(scope["path"]):
            await self.app(scope, receive, send)
            return
        state: dict[str, Any] = scope.setdefault("state", {})
        request_id = state.get("request_id")
        if not self.enabled:
            if received_off_loopback(scope):
                await self._refuse(
                    scope,
                    receive,
                    send,
                    401,
                    "api-key-required",
                    "API key required",
                    "authentication is off only on loopback and this request reached the "
                    f"server on {scope['server'][0]}; turn authentication on (AUTH__MODE=on) "
                    "to serve other addresses",
                )
                return
            state["actor"] = Actor(tenant_id=self.default_tenant, request_id=request_id)
            await self.app(scope, receive, send)
            return
        token = bearer_token(scope)
        if token is None:
            await self._refuse(
                scope,
                receive,
                send,
                401,
                "api-key-required",
                "API key required",
                "send the API key as `Authorization: Bearer <key>`",
            )
            return
        resolver: KeyResolver = scope["app"].state.key_resolver
        key = await resolver.resolve(token)
        if key is None:
            await self._refuse(
                scope,
                receive,
                send,
                401,
                "invalid-api-key",
                "Invalid API key",
                "the API key is unknown or revoked",
            )
            return
        needed = required_scope(scope["method"], scope["path"])
        if needed not in key.scopes:
            await self._refuse(
                scope,
                receive,
                send,
                403,
                "insufficient-scope",
                "Insufficient scope",
                f"this request needs the {needed!r} scope; the key has "
                f"{', '.join(sorted(key.scopes))}",
            )
            return
        state["actor"] = actor_for(key, request_id=request_id)
        await self.app(scope, receive, send)

    async def _refuse(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        status: int,
        code: str,
        title: str,
        detail: str,
    ) -> None:
        headers = None
        if status == 401:
            error = ', error="invalid_token"' if code == "invalid-api-key" else ""
            headers = {"WWW-Authenticate": f'Bearer realm="session-memory"{error}'}
        response = problem_response(
            status=status,
            code=code,
            title=title,
            detail=detail,
            headers=headers,
            instance=scope.get("path"),
        )
        await response(scope, receive, send)


def declare_security(app: FastAPI) -> None:
    """Every /v1 operation needs a bearer key and may answer 401 and 403, in the spec too; and
    every operation may answer 421 (and 403 for a foreign ``Origin``) with auth off."""
    original = app.openapi
    done: list[dict[str, Any]] = []

    def openapi() -> dict[str, Any]:
        if done:
            return done[0]
        schema = original()
        schemes = schema.setdefault("components", {}).setdefault("securitySchemes", {})
        schemes[SECURITY_SCHEME] = {
            "type": "http",
            "scheme": "bearer",
            "description": "An API key (`smk_...`); optional when the server runs with auth "
            "off on loopback",
        }
        problem = {PROBLEM_MEDIA_TYPE: {"schema": {"$ref": "#/components/schemas/Problem"}}}
        for path, methods in schema.get("paths", {}).items():
            for method, operation in methods.items():
                _parameters_are_never_null(operation)
                responses = operation.setdefault("responses", {})
                if protected(path) and method == "post" and not _READ_ONLY_POSTS.match(path):
                    # a create by a key still cached after its tenant's erasure began
                    responses.setdefault(
                        "410",
                        {"description": "The key's tenant has been erased", "content": problem},
                    )
                if protected(path):
                    operation["security"] = [{SECURITY_SCHEME: []}]
                    responses.setdefault(
                        "401",
                        {"description": "Missing, unknown or revoked API key", "content": problem},
                    )
                    responses.setdefault(
                        "403", {"description": "The key lacks the scope", "content": problem}
                    )
                else:
                    responses.setdefault(
                        "403",
                        {
                            "description": "Auth off: the Origin is another site's",
                            "content": problem,
                        },
                    )
                # app.api.host_guard, on every route of a server without authentication
                responses.setdefault(
                    "421",
                    {
                        "description": "Auth off: the Host is not a loopback name or in "
                        "ALLOWED_HOSTS (DNS rebinding)",
                        "content": problem,
                    },
                )
                operation["responses"] = dict(
                    sorted(responses.items(), key=lambda kv: (kv[0] != "default", kv[0]))
                )
        app.openapi_schema = schema
        done.append(schema)
        return schema

    app.openapi = openapi  # type: ignore[method-assign]


def _parameters_are_never_null(operation: dict[str, Any]) -> None:
    """An optional header or query parameter is absent or a string, never JSON ``null``:
    FastAPI writes ``str | None`` as ``anyOf [string, null]``, which tells clients (and
    fuzzers) they may send the text "null". Keep only the non-null alternative."""
    for param in operation.get("parameters", []):
        schema = param.get("schema", {})
        options = schema.get("anyOf")
        if not isinstance(options, list):
            continue
        concrete = [o for o in options if o != {"type": "null"}]
        if len(concrete) == 1 and len(concrete) < len(options):
            rest = {k: v for k, v in schema.items() if k != "anyOf"}
            param["schema"] = {**concrete[0], **rest}
