"""``HotRoute`` (the append's and the context read's route class) answers every body exactly as
FastAPI's own route would: the same endpoint mounted both ways, behind the same JSON guard and
problem handlers, gets the same status and document for good and bad bodies alike."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from fastapi import APIRouter, FastAPI, Query, Request
from fastapi.responses import JSONResponse, Response

from app.api.body_guard import JsonGuardMiddleware
from app.api.hot_route import HotRoute, hot_route
from app.api.problems import install_problem_handlers
from app.api.schemas import ItemsAppend
from app.main import create_app
from tests.conftest import make_settings
from tests.support.spec_check import ASYNC_HOOKS

MESSAGE = {"type": "message", "role": "user", "content": "hi"}
BODIES: list[bytes | str] = [
    '{"items": [{"type": "message", "role": "user", "content": "hi"}]}',
    '{"format": "openai-chat", "items": [{"role": "user", "content": "hi"}]}',
    '{"items": []}',
    '{"items": [{"type": "message", "role": "wizard", "content": "hi"}]}',
    '{"items": [{"type": "message", "role": "user", "content": 5}]}',
    '{"items": [{"type": "message", "role": "user", "content": "hi"}], "surprise": 1}',
    '{"format": "klingon", "items": []}',
    '{"items": "not a list"}',
    "{}",
    "[]",
    "null",
    "5",
    '"text"',
    '{"items": [{"type": "function_call_output", "call_id": 12345678901234567890123}]}',
    b"",
]


def _app() -> FastAPI:
    async def echo(request: Request, body: ItemsAppend) -> Response:
        return JSONResponse(body.model_dump(mode="json"))

    router = APIRouter()
    router.add_api_route("/plain", echo, methods=["POST"])
    hot_route(router, "POST", "/hot")(echo)
    app = FastAPI()
    install_problem_handlers(app)
    app.include_router(router)
    app.add_middleware(JsonGuardMiddleware, max_depth=64)
    return app


def _comparable(response: httpx.Response) -> tuple[int, Any]:
    document = response.json() if response.content else None
    if isinstance(document, dict):
        document.pop("instance", None)
    return response.status_code, document


@pytest.mark.parametrize("body", BODIES, ids=range(len(BODIES)))
async def test_a_hot_route_answers_as_fastapi_does(body: bytes | str) -> None:
    transport = httpx.ASGITransport(app=_app())
    headers = {"content-type": "application/json"}
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost", event_hooks=ASYNC_HOOKS) as client:
        plain = await client.post("/plain", content=body, headers=headers)
        hot = await client.post("/hot", content=body, headers=headers)
    assert _comparable(hot) == _comparable(plain)
    assert plain.status_code in (200, 422)


async def test_the_valid_body_reaches_the_endpoint_validated() -> None:
    transport = httpx.ASGITransport(app=_app())
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost", event_hooks=ASYNC_HOOKS) as client:
        hot = await client.post("/hot", json={"items": [MESSAGE]})
    assert hot.status_code == 200
    assert hot.json()["items"][0]["content"] == "hi"
    assert hot.json()["format"] == "canonical"


def test_a_hot_route_refuses_declared_parameters() -> None:
    async def with_query(request: Request, limit: int = Query(5)) -> Response:
        return Response()

    async def without_request(body: ItemsAppend) -> Response:
        return Response()

    for endpoint in (with_query, without_request):
        with pytest.raises(TypeError, match="HotRoute"):
            HotRoute("/x", endpoint, methods=["POST"])


async def test_the_app_serves_its_hot_routes_before_any_router(
    backend: str, request: pytest.FixtureRequest
) -> None:
    """The append and the context read are matched first, by their copies on the app's own
    router (out of the document), and a request of another method on their paths still gets
    the route that takes it."""
    app = create_app(make_settings(backend, request))
    hot = [route for route in app.router.routes if isinstance(route, HotRoute)]
    assert [(r.path, sorted(r.methods)) for r in hot] == [
        ("/v1/sessions/{session_id}/items", ["POST"]),
        ("/v1/sessions/{session_id}/context", ["GET"]),
    ]
    first = app.router.routes[: app.router.routes.index(hot[-1]) + 1]
    assert [r for r in first if r not in hot] == [app.router.routes[0]]  # FastAPI's /openapi.json
    assert app.router.routes[0].path == "/openapi.json"
    assert not any(route.include_in_schema for route in hot)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost", event_hooks=ASYNC_HOOKS) as client:
            created = await client.post("/v1/sessions", json={})
            items = f"/v1/sessions/{created.json()['id']}/items"
            appended = await client.post(items, json={"items": [MESSAGE]})
            listed = await client.get(items)
            read = await client.get(items.replace("/items", "/context"))
            put = await client.put(items, json={})
    assert appended.status_code == 201, appended.text
    assert [item["content"] for item in listed.json()["items"]] == ["hi"]
    assert [item["content"] for item in read.json()["items"]] == ["hi"]
    assert put.status_code == 405
