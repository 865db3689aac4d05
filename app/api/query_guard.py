"""Unknown query parameters are refused on every ``/v1`` route: a typo such as
``?max_tokns=1`` would otherwise be ignored and the request served as if it had not been sent
(no budget at all), while the same typo in a JSON body is a 422.

``GuardedRoute`` is the route class of every ``/v1`` router (and the base of ``HotRoute``).
Its known names are those the route declares (FastAPI's query parameters, its dependencies'
included) and those a ``HotRoute`` reads itself and publishes through ``openapi_extra``
(``app.api.deps.ReadInRoute``), computed once when the handler is built. The check runs in the
chosen route's handler, before anything else: a request without a query string passes on one
comparison, the append's ``?create=true`` on one set lookup. ``/mcp``, ``/ui/`` and the
operations routes are not ``/v1`` routes and are left alone.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Coroutine, Iterable
from typing import Any
from urllib.parse import unquote_plus

from fastapi import Request
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from starlette.responses import Response

from app.api.problems import problem_response

Handler = Callable[[Request], Coroutine[Any, Any, Response]]


def _query_names(dependant: Dependant) -> set[str]:
    names = {param.alias for param in dependant.query_params}
    for sub in dependant.dependencies:
        names |= _query_names(sub)
    return names


def declared_query_names(route: APIRoute) -> frozenset[str]:
    names = _query_names(route.dependant)
    extra: dict[str, Any] = route.openapi_extra or {}
    names |= {p["name"] for p in extra.get("parameters", []) if p.get("in") == "query"}
    return frozenset(names)


def _names(query_string: bytes) -> Iterable[str]:
    for part in query_string.split(b"&"):
        if part:
            yield unquote_plus(part.split(b"=", 1)[0].decode("latin-1"))


def unknown_query_problem(unknown: Iterable[str], known: frozenset[str], path: str) -> Response:
    """422 ``unknown-query-parameter``: each unknown name, and the closest known one."""
    errors = []
    for name in dict.fromkeys(unknown):
        close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        errors.append(
            {
                "loc": ["query", name],
                "msg": f"unknown query parameter {name!r}{hint}",
                "type": "unknown_query_parameter",
            }
        )
    takes = ", ".join(sorted(known)) or "no query parameter"
    return problem_response(
        status=422,
        code="unknown-query-parameter",
        title="Unknown query parameter",
        detail="; ".join(e["msg"] for e in errors) + f" (this route takes: {takes})",
        errors=errors,
        instance=path,
    )


def guard_handler(handler: Handler, known: frozenset[str]) -> Handler:
    # the names as they usually arrive (no percent-encoding): one set lookup each
    raw = frozenset(name.encode("latin-1") for name in known if name.isascii())

    async def guarded(request: Request) -> Response:
        query_string: bytes = request.scope.get("query_string", b"")
        if query_string:
            for part in query_string.split(b"&"):
                if part and part.partition(b"=")[0] not in raw:
                    unknown = [name for name in _names(query_string) if name not in known]
                    if unknown:
                        return unknown_query_problem(unknown, known, request.url.path)
                    break
        return await handler(request)

    return guarded


class GuardedRoute(APIRoute):
    """An ``APIRoute`` that refuses a query parameter it does not declare (module doc)."""

    def get_route_handler(self) -> Handler:
        handler: Handler = super().get_route_handler()
        return guard_handler(handler, declared_query_names(self))
