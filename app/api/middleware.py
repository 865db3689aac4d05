"""Pure ASGI middleware: request ids and the request body size limit."""

from __future__ import annotations

import re
import uuid
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.problems import problem_response

_REQUEST_ID_RE = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")


class RequestIdMiddleware:
    """Echo ``X-Request-ID`` (generate one when missing or malformed) and expose it in scope."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = None
        for name, value in scope["headers"]:
            if name == b"x-request-id":
                candidate = value.decode("latin-1")
                if _REQUEST_ID_RE.fullmatch(candidate):
                    request_id = candidate
                break
        request_id = request_id or uuid.uuid4().hex
        scope.setdefault("state", {})["request_id"] = request_id
        raw = request_id.encode()

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), (b"x-request-id", raw)]
            await send(message)

        await self.app(scope, receive, send_with_id)


class _TooLarge(Exception):
    pass


class BodyLimitMiddleware:
    """Refuse bodies over ``max_bytes`` with a 413 problem, declared or streamed."""

    def __init__(self, app: ASGIApp, *, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope["headers"]:
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = -1
                if declared > self.max_bytes:
                    await self._refuse(scope, receive, send)
                    return
        seen = 0
        exceeded = False
        refused = False

        async def limited_receive() -> Message:
            nonlocal seen, exceeded
            if exceeded:
                raise _TooLarge
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    exceeded = True
                    raise _TooLarge
            return message

        async def guarded_send(message: Message) -> None:
            # Whatever the app makes of a truncated body (frameworks turn read errors into
            # 400s), the client gets the 413 it deserves.
            nonlocal refused
            if exceeded:
                if not refused:
                    refused = True
                    await self._refuse(scope, receive, send)
                return
            await send(message)

        try:
            await self.app(scope, limited_receive, guarded_send)
        except _TooLarge:
            if not refused:
                await self._refuse(scope, receive, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = problem_response(
            status=413,
            code="body-too-large",
            title="Request body too large",
            detail=f"the request body exceeds {self.max_bytes} bytes "
            "(the server's LIMITS__MAX_BODY_BYTES)",
            instance=scope.get("path"),
        )
        await response(scope, receive, send)


def request_id_of(scope_state: Any) -> str | None:
    return scope_state.get("request_id") if isinstance(scope_state, dict) else None
