"""The API description (the first text on ``/docs`` and ``/redoc``, ``info.description`` of the
OpenAPI document) says what the API does with a query parameter an operation does not declare,
and what it says is checked against a request, on both backends."""

from __future__ import annotations

import httpx

from tests.api.helpers import assert_problem


async def test_the_description_says_what_an_unknown_query_parameter_gets(
    client: httpx.AsyncClient, sid: str
) -> None:
    description = (await client.get("/openapi.json")).json()["info"]["description"]
    # What the description promises...
    assert "ignored" not in description, description
    assert "422" in description and "`unknown-query-parameter`" in description, description
    # ...is what a request gets: the names the operation takes, the closest one suggested.
    r = await client.post("/v1/sessions", json={"id": sid})
    assert r.status_code == 201, r.text
    problem = assert_problem(
        await client.get(f"/v1/sessions/{sid}/context", params={"max_tokns": "1"}),
        422,
        "unknown-query-parameter",
    )
    assert "did you mean 'max_tokens'?" in problem["errors"][0]["msg"], problem
    assert "max_tokens" in problem["detail"], problem  # the parameters it takes
    assert "lists the parameters" in description and "closest" in description, description
