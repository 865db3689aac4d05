"""``HotRoute``: the route class of the two requests every agent makes every turn (append, read
the context), which skips FastAPI's per-request parameter solving.

A FastAPI route runs every request through its dependency solver: it builds the parameter
values, reads the body, parses it again with Python's ``json`` and validates it. The append
profiled that at about a seventh of its CPU, for a route whose only parameters are the request
and one body. A ``HotRoute`` endpoint takes exactly those, ``(request)`` or ``(request, body)``,
reads its path, query and headers itself (``app.api.deps.ReadInRoute``), and gets its body:

- parsed once, by the JSON guard (``app.api.body_guard``), which hands its value on;
- validated by the route's own body field (FastAPI's, the same call and error locations as
  FastAPI's solver, so a bad body is the same 422 problem);
- when there is none, left to FastAPI's own handler (which reports the missing body).

The route is declared as any other (``hot_route(router, "POST", path, ...)``), so the OpenAPI
document is the one FastAPI writes for it. It is served by a copy on the app's own router,
ahead of every included router (``serve_hot_routes_first``): FastAPI matches a request to an
included router's route twice, once to choose the router and once inside it."""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute, APIRouter
from starlette.responses import Response

from app.api.body_guard import parsed_body
from app.api.query_guard import declared_query_names, guard_handler

Handler = Callable[[Request], Coroutine[Any, Any, Response]]


class HotRoute(APIRoute):
    def get_route_handler(self) -> Handler:  # called by APIRoute.__init__
        # what any /v1 route refuses first: a query parameter it does not read
        return guard_handler(self._hot_handler(), declared_query_names(self))

    def _hot_handler(self) -> Handler:
        dependant = self.dependant
        declared = (
            dependant.path_params,
            dependant.query_params,
            dependant.header_params,
            dependant.cookie_params,
            dependant.dependencies,
        )
        if any(declared) or dependant.request_param_name is None or len(dependant.body_params) > 1:
            raise TypeError(
                f"{self.path}: a HotRoute endpoint takes the request and at most one body, "
                "and reads its parameters itself"
            )
        solved = super().get_route_handler()  # FastAPI's, for a request without a body
        call = self.endpoint
        request_name: str = dependant.request_param_name
        body_field = self.body_field
        if body_field is None:

            async def without_body(request: Request) -> Response:
                response: Response = await call(**{request_name: request})
                return response

            return without_body
        body_name = body_field.name

        async def with_body(request: Request) -> Response:
            value = parsed_body(request.scope)
            if value is None:
                return await solved(request)
            body, errors = body_field.validate(value, {}, loc=("body",))
            if errors:
                raise RequestValidationError(errors, body=value)
            response: Response = await call(**{request_name: request, body_name: body})
            return response

        return with_body


def hot_route(
    router: APIRouter, method: str, path: str, **declared: Any
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``@router.post(path, ...)`` for a ``HotRoute`` (the decorators take no route class)."""

    def add(endpoint: Callable[..., Any]) -> Callable[..., Any]:
        router.add_api_route(
            path, endpoint, methods=[method], route_class_override=HotRoute, **declared
        )
        return endpoint

    return add


def serve_hot_routes_first(app: FastAPI, routers: Sequence[APIRouter]) -> None:
    """Before the routers are included: a copy of each of their ``HotRoute`` s on the app's
    own router, out of the document (the routers' originals are in it, where they are
    declared). A request for another method of the same path matches the copy only
    partially, and goes on to the route that matches it fully."""
    for router in routers:
        for route in router.routes:
            if isinstance(route, HotRoute):
                app.router.add_api_route(
                    route.path,
                    route.endpoint,
                    methods=sorted(route.methods),
                    name=route.name,
                    include_in_schema=False,
                    openapi_extra=route.openapi_extra,  # the names it reads (query_guard)
                    route_class_override=HotRoute,
                )
