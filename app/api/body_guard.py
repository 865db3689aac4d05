"""Hostile input stopped at the door: what would crash a parser, a handler or a database is a
4xx problem before any route runs, identically on SQLite and Postgres.

Refused:

- a NUL character in the path or the query string (Postgres text cannot hold one);
- an encoded slash (``%2F``) in the path: no id holds a ``/``, and the server decodes the path
  before routing, so ``/v1/sessions/a%2Fitems`` would otherwise reach the items of ``a``;
- a body that is not declared as JSON (``application/json`` or ``*+json``, what FastAPI
  parses; a missing content type is not one): 415, since every body this API takes is JSON;
- a JSON body that is not valid UTF-8 JSON: syntax errors, lone surrogates (``"\\ud800"``), ``NaN``/``Infinity``,
  numbers that overflow a double;
- a JSON body nesting deeper than ``max_depth`` (Python's own parser would overflow its stack
  at a few thousand levels);
- a NUL character in any string or object key (Postgres JSONB rejects ``\\u0000``), except
  in the items of an append (``POST /v1/sessions/{id}/items``): JSON allows one, and an
  item is stored as JSON text, where the escape survives (the columns derived from it for
  queries and search hold the NUL as a space, ``app.store.items``). An item's ``metadata``
  is held to the rule of every other object (Postgres reads it as JSON).

Integers of any size are accepted and kept exact (``app.jsonutil``).

The body is parsed once here with orjson (fast, and strict where Python's ``json`` is lax),
then handed on unchanged: as bytes to every route, and as the parsed value to the routes that
take it (``parsed_body``, for ``app.api.hot_route``).
"""

from __future__ import annotations

import functools
import json
import re
from email.message import Message as EmailMessage
from typing import Any

import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.problems import problem_response

_LONG_DIGITS = re.compile(rb"\d{19,}")
_ENCODED_SLASH = re.compile(rb"%2f", re.IGNORECASE)


class _Refused(Exception):
    def __init__(
        self, code: str, title: str, detail: str, loc: list[str | int], *, status: int = 422
    ) -> None:
        super().__init__(detail)
        self.code = code
        self.title = title
        self.detail = detail
        self.loc = loc
        self.status = status


def _content_type(scope: Scope) -> str | None:
    for name, value in scope["headers"]:
        if name == b"content-type":
            return str(value.decode("latin-1"))
    return None


@functools.lru_cache(maxsize=64)  # clients send the same few; parsing one costs ~20 calls
def _is_json(content_type: str | None) -> bool:
    """What FastAPI parses as JSON: ``application/json`` or ``application/*+json`` (without a
    content type it passes the body on as bytes, which no route takes)."""
    if not content_type:
        return False
    message = EmailMessage()
    message["content-type"] = content_type
    if message.get_content_maintype() != "application":
        return False
    subtype = message.get_content_subtype()
    return subtype == "json" or subtype.endswith("+json")


# Where the guard leaves the parsed body in the request's scope.
_PARSED = "session_memory.parsed_body"


def parsed_body(scope: Scope) -> Any:
    """The request's JSON body as the guard parsed it (``None``: no body, or ``null``)."""
    return scope.get(_PARSED)


# The requests whose ``items`` are stored as JSON text, where a NUL survives as its escape.
_APPEND_PATH = re.compile(r"/v1/sessions/[^/]+/items")


def _nul_allowed(loc: list[str | int]) -> bool:
    """Whether ``loc`` is inside an item (``["body", "items", i, key, ...]``), not in its
    ``metadata`` envelope."""
    return loc[1:2] == ["items"] and (len(loc) < 4 or loc[3] != "metadata")


def check_json_body(body: bytes, *, max_depth: int, nul_in_items: bool = False) -> Any:
    """The value of ``body``; ``_Refused`` if it is not JSON the service can store and send
    back (``nul_in_items``: a NUL is fine inside the top-level ``items``)."""
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise _Refused(
            "invalid-json", "Invalid JSON body", f"the body is not valid JSON: {exc}", ["body"]
        ) from None
    # A NUL can only be in a string as the escape \u0000 (a raw one is invalid JSON), and a
    # body with no more brackets than the depth allowed cannot nest deeper: most bodies need
    # no walk at all (both counts are done in C).
    nul = b"\\u0000" in body
    deep = body.count(b"[") + body.count(b"{") > max_depth
    stack: list[tuple[Any, int, list[str | int]]] = [(value, 1, ["body"])] if nul or deep else []
    while stack:
        node, depth, loc = stack.pop()
        if isinstance(node, str):
            if "\x00" in node and not (nul_in_items and _nul_allowed(loc)):
                raise _Refused(
                    "invalid-json",
                    "Invalid JSON body",
                    "NUL characters (\\u0000) are not allowed in strings",
                    loc,
                )
            continue
        if isinstance(node, dict | list):
            if depth > max_depth:
                raise _Refused(
                    "json-too-deep",
                    "JSON nested too deeply",
                    f"the body nests deeper than {max_depth} levels",
                    loc,
                )
            if isinstance(node, dict):
                for key, child in node.items():
                    if "\x00" in key and not (nul_in_items and _nul_allowed([*loc, key])):
                        raise _Refused(
                            "invalid-json",
                            "Invalid JSON body",
                            "NUL characters (\\u0000) are not allowed in keys",
                            loc,
                        )
                    if isinstance(child, str | dict | list):
                        stack.append((child, depth + 1, [*loc, key[:64]][:16]))
            else:
                for index, child in enumerate(node):
                    if isinstance(child, str | dict | list):
                        stack.append((child, depth + 1, [*loc, index][:16]))
    if _LONG_DIGITS.search(body):
        # orjson reads an integer beyond 64 bits as a float; Python's json (FastAPI's parser)
        # keeps it exact, and refuses one of more than 4,300 digits.
        try:
            return json.loads(body)
        except ValueError as exc:
            raise _Refused(
                "invalid-json", "Invalid JSON body", f"the body is not valid JSON: {exc}", ["body"]
            ) from None
    return value


def _not_json(content_type: str | None) -> _Refused:
    declared = f"Content-Type {content_type!r}" if content_type else "no Content-Type"
    return _Refused(
        "unsupported-media-type",
        "Unsupported media type",
        f"a JSON body is required: send it with Content-Type: application/json "
        f"(this request has {declared})",
        ["header", "content-type"],
        status=415,
    )


def _path_problem(scope: Scope) -> _Refused | None:
    raw_path: bytes = scope.get("raw_path") or b""
    if _ENCODED_SLASH.search(raw_path):
        return _Refused(
            "invalid-input",
            "Invalid input",
            "an encoded slash (%2F) is not allowed in a URL path: no session, item or snapshot "
            "id contains '/'",
            ["path"],
        )
    return None


class JsonGuardMiddleware:
    """Refuse NUL and encoded slashes in the URL, bodies not declared as JSON, and unstorable
    JSON bodies, with a 422 (415 for the content type) problem (see module doc)."""

    def __init__(self, app: ASGIApp, *, max_depth: int) -> None:
        self.app = app
        self.max_depth = max_depth

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        query: bytes = scope.get("query_string", b"")
        if "\x00" in scope["path"] or b"%00" in query:
            await self._refuse(
                scope,
                receive,
                send,
                _Refused(
                    "invalid-input",
                    "Invalid input",
                    "NUL characters are not allowed in a URL",
                    ["path" if "\x00" in scope["path"] else "query"],
                ),
            )
            return
        refused = _path_problem(scope)
        if refused is not None:
            await self._refuse(scope, receive, send, refused)
            return
        if scope.get("method") in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        content_type = _content_type(scope)
        chunks: list[bytes] = []
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunks.append(message.get("body", b""))
            more = bool(message.get("more_body", False))
        body = b"".join(chunks)
        if body and not _is_json(content_type):
            await self._refuse(scope, receive, send, _not_json(content_type))
            return
        if body:
            try:
                scope[_PARSED] = check_json_body(
                    body,
                    max_depth=self.max_depth,
                    nul_in_items=scope.get("method") == "POST"
                    and _APPEND_PATH.fullmatch(scope["path"]) is not None,
                )
            except _Refused as refused:
                await self._refuse(scope, receive, send, refused)
                return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send, refused: _Refused) -> None:
        response = problem_response(
            status=refused.status,
            code=refused.code,
            title=refused.title,
            detail=refused.detail,
            errors=[{"loc": refused.loc, "msg": refused.detail, "type": refused.code}],
            instance=scope.get("path") if "\x00" not in scope.get("path", "") else None,
        )
        await response(scope, receive, send)
