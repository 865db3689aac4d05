"""Per-request observability: latency metrics by route template, the JSON access log line, and
the request id in the logging context.

``EdgeMiddleware`` is the outermost layer: it sets the request id first and applies the body
limit itself (so 413s are measured and logged too). The route label is the matched route's
template (``/v1/sessions/{session_id}/items``), never the raw path, so label cardinality is bounded by
the API; requests that match no route are labelled ``unmatched``.
"""

from __future__ import annotations

import logging
import time

from fastapi import FastAPI
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app import metrics
from app.api.middleware import (
    BodyTooLarge,
    body_too_large,
    declared_length,
    request_id_from,
)
from app.logs import REQUEST_ID, AccessLineWriter
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


class EdgeMiddleware:
    """The outermost layer, one per request: the request id, the body size limit, latency
    metrics and the access log line. One layer with one ``send`` and one ``receive`` wrapper
    (they were three middlewares; each layer costs every request its own wrappers).

    - ``X-Request-ID``: echoed (a new one when missing or malformed), in ``scope["state"]``
      and in the logging context for the whole request.
    - Bodies over ``max_bytes``, declared or streamed, get a 413 problem (measured and logged
      like any other response).
    - The access line goes to the ``app.access`` logger, or to ``access_writer`` when the
      server writes its own (``app.logs.AccessLineWriter``).
    """

    def __init__(
        self, app: ASGIApp, *, max_bytes: int, access_writer: AccessLineWriter | None = None
    ) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.access_writer = access_writer

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        request_id = request_id_from(scope["headers"])
        scope.setdefault("state", {})["request_id"] = request_id
        token = REQUEST_ID.set(request_id)
        raw_id = request_id.encode()
        status = 500  # what the client gets if the app fails before responding
        declared = declared_length(scope["headers"])
        seen = 0
        exceeded = declared > self.max_bytes
        refused = False

        async def edge_receive() -> Message:
            nonlocal seen, exceeded
            if exceeded:
                raise BodyTooLarge
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    exceeded = True
                    raise BodyTooLarge
            return message

        async def edge_send_raw(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
                message["headers"] = [*message.get("headers", []), (b"x-request-id", raw_id)]
            await send(message)

        async def refuse_once() -> None:
            nonlocal refused
            if not refused:
                refused = True
                await body_too_large(self.max_bytes, scope)(scope, receive, edge_send_raw)

        async def edge_send(message: Message) -> None:
            if exceeded:
                # Whatever the app makes of a truncated body (frameworks turn read errors
                # into 400s), the client gets the 413 it deserves.
                await refuse_once()
                return
            await edge_send_raw(message)

        try:
            if exceeded:
                await refuse_once()
            else:
                try:
                    await self.app(scope, edge_receive, edge_send)
                except BodyTooLarge:
                    await refuse_once()
        except BaseException:
            # The id stays set: the error is logged outside this middleware (Starlette's
            # ServerErrorMiddleware, then uvicorn), in this same request task.
            self._observe(scope, status, start)
            raise
        self._observe(scope, status, start)
        REQUEST_ID.reset(token)

    def _observe(self, scope: Scope, status: int, start: float) -> None:
        seconds = time.perf_counter() - start
        method = str(scope.get("method", ""))
        path = str(scope.get("path", ""))
        metrics.observe_request(route_template(scope), method, status, seconds)
        level = logging.DEBUG if path in QUIET_PATHS and status < 400 else logging.INFO
        fields = {
            "method": method,
            "path": path,
            "status": status,
            "duration_ms": round(seconds * 1000, 3),
        }
        writer = self.access_writer
        if writer is not None and (
            not writer.enabled(level) or writer.write(level, f"{method} {path} {status}", fields)
        ):
            return  # written by the server itself, or below its level
        access_log.log(level, "%s %s %d", method, path, status, extra=fields)
