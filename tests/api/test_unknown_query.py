"""Unknown query parameters are a 422 naming the parameter and the closest known one, on
every /v1 operation (issue 34 item 7); what a route declares still works, and the routes
outside /v1 (the inspector, MCP, operations) are left alone. On both backends."""

from __future__ import annotations

import re

import httpx

from tests.api.helpers import assert_problem, user
from tests.support.spec_check import _spec


def v1_operations() -> list[tuple[str, str]]:
    return [
        (method, path)
        for path, methods in _spec()["paths"].items()
        if path.startswith("/v1/")
        for method in methods
    ]


async def test_every_v1_operation_refuses_a_query_parameter_it_does_not_take(
    client: httpx.AsyncClient, sid: str
) -> None:
    operations = v1_operations()
    assert len(operations) > 30
    for method, template in operations:
        path = re.sub(r"\{[^}]+\}", sid, template)
        body = {} if method in ("post", "put", "patch") else None
        r = await client.request(method.upper(), path, params={"zq_not_a_param": "1"}, json=body)
        problem = assert_problem(r, 422, "unknown-query-parameter")
        assert problem["errors"] == [
            {
                "loc": ["query", "zq_not_a_param"],
                "msg": "unknown query parameter 'zq_not_a_param'",
                "type": "unknown_query_parameter",
            }
        ], (method, template, problem)
    # nothing was created by any of them
    assert_problem(await client.get(f"/v1/sessions/{sid}"), 404)


async def test_a_typo_names_the_parameter_that_was_meant(
    client: httpx.AsyncClient, sid: str
) -> None:
    r = await client.post(f"/v1/sessions/{sid}/items?create=true", json={"items": [user("hi")]})
    assert r.status_code == 201, r.text
    r = await client.get(f"/v1/sessions/{sid}/context", params={"max_tokns": 1})
    problem = assert_problem(r, 422, "unknown-query-parameter")
    assert problem["errors"][0]["loc"] == ["query", "max_tokns"]
    assert "did you mean 'max_tokens'?" in problem["errors"][0]["msg"]
    assert "max_tokens" in problem["detail"]
    r = await client.post(f"/v1/sessions/{sid}/items?creat=true", json={"items": [user("x")]})
    problem = assert_problem(r, 422, "unknown-query-parameter")
    assert "did you mean 'create'?" in problem["detail"]
    r = await client.get("/v1/sessions", params={"limt": 5, "prefix": sid})
    assert "did you mean 'limit'?" in assert_problem(r, 422)["detail"]
    # the refused append stored nothing; known parameters are served as before
    r = await client.get(f"/v1/sessions/{sid}/items", params={"limit": 10, "cursor": 0})
    assert r.status_code == 200 and len(r.json()["items"]) == 1
    r = await client.get(f"/v1/sessions/{sid}/context", params={"max_tokens": 1000})
    assert r.status_code == 200, r.text
    r = await client.get(f"/v1/sessions/{sid}/context?max_tokens=1000&format=openai-chat")
    assert r.status_code == 200 and r.json()["format"] == "openai-chat"


async def test_routes_outside_v1_ignore_query_parameters(client: httpx.AsyncClient) -> None:
    assert (await client.get("/healthz", params={"anything": "1"})).status_code == 200
    assert (await client.get("/ui/", params={"session": "x"})).status_code == 200
    r = await client.post(
        "/mcp?anything=1",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        headers={"Accept": "application/json, text/event-stream"},
    )
    assert r.status_code == 200, r.text
    assert "append_items" in r.text
