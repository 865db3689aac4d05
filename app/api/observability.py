"""Per-request observability: latency metrics by route template, the JSON access log line, and
the request id in the logging context.

The middleware sits inside ``RequestIdMiddleware`` (so the id is known) and outside the body
limit (so 413s are measured and logged too). The route label is the matched route's template
(``/v1/sessions/{session_id}/items``), never the raw path, so label cardinality is bounded by
the API; requests that match no route are labelled ``unmatched``.
"""

from __future__ import annotations

import logging
import time

from fastapi import FastAPI
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app import metrics
from app.api.middleware import request_id_of
from app.logs import REQUEST_ID
from app.services.runtime import Runtime

access_log = logging.getLogger("app.access")

# Successful probes and scrapes would drown the access log: they are logged at DEBUG.
QUIET_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})


def route_template(scope: Scope) -> str:
    route = scope.get("route")
    template = getattr(route, "path_format", None) or getattr(route, "path", None)
    return str(template) if template else metrics.UNMATCHED_ROUTE


def route_labels(app: FastAPI) -> list[tuple[str, str, int]]:
    """(template, method, success status) of every documented operation, read from the
    OpenAPI document (the public view of the routes; the router's internals vary by version)."""
    out = []
    for template, operations in app.openapi().get("paths", {}).items():
        for method, operation in operations.items():
            statuses = [s for s in operation.get("responses", {}) if s.startswith("2")]
            out.append((template, method.upper(), int(statuses[0]) if statuses else 200))
    return out


def instrument(app: FastAPI, runtime: Runtime) -> None:
    """At start-up: create every route's latency series, connect hooks and lock waits."""
    metrics.init_routes([*route_labels(app), ("/metrics", "GET", 200)])
    metrics.install(runtime, runtime.locks)


class ObservabilityMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        token = REQUEST_ID.set(request_id_of(scope.get("state")))
        status = 500  # what the client gets if the app fails before responding

        async def send_with_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_with_status)
        except BaseException:
            # The id stays set: the error is logged outside this middleware (Starlette's
            # ServerErrorMiddleware, then uvicorn), in this same request task.
            self._observe(scope, status, start)
            raise
        self._observe(scope, status, start)
        REQUEST_ID.reset(token)

    @staticmethod
    def _observe(scope: Scope, status: int, start: float) -> None:
        seconds = time.perf_counter() - start
        method = str(scope.get("method", ""))
        path = str(scope.get("path", ""))
        metrics.observe_request(route_template(scope), method, status, seconds)
        quiet = path in QUIET_PATHS and status < 400
        access_log.log(
            logging.DEBUG if quiet else logging.INFO,
            "%s %s %d",
            method,
            path,
            status,
            extra={
                "method": method,
                "path": path,
                "status": status,
                "duration_ms": round(seconds * 1000, 3),
            },
        )
