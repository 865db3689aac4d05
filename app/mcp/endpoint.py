"""``/mcp``: the MCP endpoint (streamable HTTP) in front of ``app.mcp.tools``.

Authentication is the REST API's (``app.api.auth``): ``Authorization: Bearer <key>`` resolved
by the application's ``KeyResolver``; 401 ``api-key-required`` or ``invalid-api-key``
(``application/problem+json``, ``WWW-Authenticate: Bearer``) before any MCP message is read.
With auth off (loopback only) every caller is the default tenant, and a request that reached
the server on another address is refused as the REST API refuses it. Scopes are checked per
tool (``app.mcp.tools``).

The transport runs stateless with JSON responses: every POST carries its own credentials and
is answered in full, so any replica can serve any request (no sticky MCP sessions, nothing to
hijack) and no stream is held open. The SDK itself is loaded on the first MCP request (see
``McpEndpoint``).

With auth off, DNS rebinding is refused before this endpoint runs, as on every other route
(``app.api.host_guard``: the ``Host`` and any ``Origin`` must be a loopback or listed name), so
the SDK's own check of the same headers is left off.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
from fastapi import FastAPI
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from app.api.auth import bearer_token, received_off_loopback
from app.api.problems import problem_response
from app.services.keys import KeyResolver, actor_for
from app.services.runtime import Actor

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

MCP_PATH = "/mcp"


def _build_server() -> MCPServer:
    from app.mcp.tools import build_server  # the SDK is imported here, off the start-up path

    return build_server()


class McpEndpoint:
    """The ASGI app at ``/mcp``: authenticate, then hand the request to the SDK.

    The SDK (a second or more to import on a busy machine) is loaded on the first MCP request,
    in a worker thread, not while the server starts: a deployment that never uses MCP never
    pays for it, and start-up (what health checks and rolling deploys wait for) is unchanged.
    The SDK's session manager then runs in a task of the application's lifespan, until it
    ends; a manager runs only once, so each run of the lifespan starts its own."""

    def __init__(self, *, max_body_bytes: int) -> None:
        self.max_body_bytes = max_body_bytes
        self.auth_required = True
        self.default_tenant = "default"
        self._server: MCPServer | None = None
        self._manager: StreamableHTTPSessionManager | None = None
        self._open = False
        self._task: asyncio.Task[None] | None = None
        self._starting: anyio.Lock | None = None
        self._stop: anyio.Event | None = None

    def mount(self, app: FastAPI) -> None:
        """Serve ``/mcp`` on ``app`` (not in the OpenAPI document: it is not a REST route)."""
        self.auth_required = bool(app.state.auth_required)
        self.default_tenant = str(app.state.default_tenant)
        app.router.routes.append(
            # POST only: stateless, there is no event stream to GET and no session to DELETE
            # (the transport's specification lets a server answer both with 405).
            Route(MCP_PATH, endpoint=self, methods=["POST"], include_in_schema=False)
        )

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """While the application's lifespan runs. The SDK's manager runs in a task of its own
        (started on first use): a lifespan may be entered and left in different tasks (test
        fixtures do), which an anyio task group held across it would refuse."""
        self._starting, self._stop = anyio.Lock(), anyio.Event()
        self._open = True
        try:
            yield
        finally:
            self._open = False
            self._manager = None
            self._stop.set()  # the manager's task ends
            task, self._task = self._task, None
            if task is not None:
                await asyncio.gather(task, return_exceptions=True)

    async def _running_manager(self) -> StreamableHTTPSessionManager | None:
        """The SDK's session manager, started on first use; None outside the lifespan."""
        if self._manager is not None or not self._open or self._starting is None:
            return self._manager
        async with self._starting:
            if self._manager is None and self._open:
                if self._server is None:
                    self._server = await anyio.to_thread.run_sync(_build_server)
                started = asyncio.Event()
                self._task = asyncio.create_task(self._serve(started), name="mcp-manager")
                await started.wait()
                if self._task.done() and self._manager is None:
                    self._task.result()  # the manager failed to start: raise its error
        return self._manager

    async def _serve(self, started: asyncio.Event) -> None:
        from mcp.server.transport_security import TransportSecuritySettings

        assert self._server is not None and self._stop is not None
        # Host and Origin are checked for every route by app.api.host_guard (module doc).
        security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
        self._server.streamable_http_app(  # builds a new session manager
            streamable_http_path=MCP_PATH,
            stateless_http=True,
            json_response=True,
            max_request_body_size=self.max_body_bytes,
            transport_security=security,
        )
        manager = self._server.session_manager
        stop = self._stop
        try:
            async with manager.run():
                self._manager = manager
                started.set()
                await stop.wait()
        finally:
            self._manager = None
            started.set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        state: dict[str, Any] = scope.setdefault("state", {})
        refusal = await self._authenticate(scope, state)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        manager = await self._running_manager()
        if manager is None:
            await problem_response(
                status=503,
                code="unavailable",
                title="Service unavailable",
                detail="the MCP endpoint is not running (the server is starting or stopping)",
                headers={"Retry-After": "1"},
                instance=MCP_PATH,
            )(scope, receive, send)
            return
        await manager.handle_request(scope, receive, send)

    async def _authenticate(self, scope: Scope, state: dict[str, Any]) -> Any:
        """Put the caller in ``state["actor"]``; or return the 401 response to send."""
        request_id = state.get("request_id")
        if not self.auth_required:
            if received_off_loopback(scope):
                return _unauthorized(
                    "api-key-required",
                    "API key required",
                    "authentication is off only on loopback and this request reached the "
                    f"server on {scope['server'][0]}; turn authentication on (AUTH__MODE=on) "
                    "to serve other addresses",
                )
            state["actor"] = Actor(tenant_id=self.default_tenant, request_id=request_id)
            return None
        token = bearer_token(scope)
        if token is None:
            return _unauthorized(
                "api-key-required",
                "API key required",
                "send the API key as `Authorization: Bearer <key>`",
            )
        resolver: KeyResolver = scope["app"].state.key_resolver
        key = await resolver.resolve(token)
        if key is None:
            return _unauthorized(
                "invalid-api-key", "Invalid API key", "the API key is unknown or revoked"
            )
        state["actor"] = actor_for(key, request_id=request_id)
        return None


def _unauthorized(code: str, title: str, detail: str) -> Any:
    error = ', error="invalid_token"' if code == "invalid-api-key" else ""
    return problem_response(
        status=401,
        code=code,
        title=title,
        detail=detail,
        headers={"WWW-Authenticate": f'Bearer realm="session-memory"{error}'},
        instance=MCP_PATH,
    )
