"""Errors a client can act on (issue 16): a 4xx when retrying cannot help, a 503 only when it
can; 405 and OPTIONS say what a path allows; a body that is not JSON is told so."""

from __future__ import annotations

import json
import random
import re
import string
from collections.abc import AsyncIterator

import httpx
import pytest

from app.main import create_app
from tests.api.helpers import all_items, append, assert_problem, create, user
from tests.conftest import make_settings
from tests.support.spec_check import ASYNC_HOOKS


def allow_of(response: httpx.Response) -> list[str]:
    return [m.strip() for m in response.headers["allow"].split(",")]


# -- policy: llm without an LLM endpoint ------------------------------------------------------


async def test_llm_policy_without_an_endpoint_is_a_4xx_not_a_retry(
    client: httpx.AsyncClient, sid: str
) -> None:
    await create(client, sid)
    await append(client, sid, [user(f"turn {n}") for n in range(6)])
    before = await all_items(client, sid)
    for body in ({"policy": "llm"}, {"policy": "llm", "dry_run": True}):
        r = await client.post(f"/v1/sessions/{sid}/compact", json=body)
        # 403: the request is valid by the spec (schemathesis, without an LLM, checks that
        # no valid request gets a 422), but this deployment refuses it
        problem = assert_problem(r, 403, "llm-not-configured")
        assert "retry-after" not in r.headers
        assert "LLM__BASE_URL" in problem["detail"] and "structured" in problem["detail"]
        assert "retrying will not help" in problem["detail"]
        assert problem["errors"][0]["loc"] == ["body", "policy"]
    assert await all_items(client, sid) == before


# -- 405 and OPTIONS --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("PUT", "/v1/sessions", ["GET", "POST", "OPTIONS"]),
        ("DELETE", "/v1/sessions", ["GET", "POST", "OPTIONS"]),
        ("POST", "/v1/sessions/{sid}", ["GET", "PATCH", "DELETE", "OPTIONS"]),
        ("PUT", "/v1/sessions/{sid}/items", ["GET", "POST", "DELETE", "OPTIONS"]),
        # `pop` is a path of its own: it shadows `/items/{item_id}`, as paths resolve in the
        # spec (a literal path before a template), so `Allow` names what the spec documents
        ("DELETE", "/v1/sessions/{sid}/items/pop", ["POST", "OPTIONS"]),
        ("POST", "/v1/sessions/{sid}/items/itm_1", ["GET", "OPTIONS"]),
        ("PATCH", "/v1/sessions/{sid}/snapshots/snp_1", ["GET", "DELETE", "OPTIONS"]),
        ("DELETE", "/v1/search", ["GET", "OPTIONS"]),
        ("POST", "/healthz", ["GET", "OPTIONS"]),
    ],
)
async def test_405_names_every_allowed_method(
    client: httpx.AsyncClient, sid: str, method: str, path: str, allowed: list[str]
) -> None:
    url = path.format(sid=sid)
    r = await client.request(method, url)
    problem = assert_problem(r, 405, "method-not-allowed")
    assert allow_of(r) == allowed
    assert method in problem["detail"] and ", ".join(allowed) in problem["detail"]


@pytest.mark.parametrize(
    ("path", "allowed"),
    [
        ("/v1/sessions", ["GET", "POST", "OPTIONS"]),
        ("/v1/sessions/{sid}/context", ["GET", "POST", "OPTIONS"]),
        ("/v1/sessions/{sid}/compact", ["POST", "OPTIONS"]),
        ("/v1/sessions/{sid}/items/pop", ["POST", "OPTIONS"]),
        ("/v1/sessions/{sid}/items/itm_1", ["GET", "OPTIONS"]),
        ("/v1/admin/keys/smk_000000000000", ["DELETE", "OPTIONS"]),
        ("/openapi.json", ["GET", "HEAD", "OPTIONS"]),
    ],
)
async def test_options_answers_204_with_allow(
    client: httpx.AsyncClient, sid: str, path: str, allowed: list[str]
) -> None:
    r = await client.options(path.format(sid=sid))
    assert r.status_code == 204, r.text
    assert allow_of(r) == allowed and r.content == b""


async def test_options_advertises_what_the_spec_declares_on_every_path(
    client: httpx.AsyncClient,
) -> None:
    """For every path of the OpenAPI document, `Allow` is the methods it declares there (and
    OPTIONS): a path of its own, such as `/items/pop`, is not also a `{item_id}`."""
    paths = (await client.get("/openapi.json")).json()["paths"]
    for template, operations in paths.items():
        path = re.sub(r"\{[^}]+\}", "x1", template)
        r = await client.options(path)
        assert r.status_code == 204, (path, r.text)
        declared = {m.upper() for m in operations}
        assert set(allow_of(r)) == declared | {"OPTIONS"}, template


async def test_options_on_an_unknown_path_is_a_404(client: httpx.AsyncClient) -> None:
    assert_problem(await client.options("/v1/nothing-here"), 404)


# -- bodies that are not JSON -----------------------------------------------------------------


@pytest.mark.parametrize(
    "headers",
    [
        {},  # no Content-Type at all (what FastAPI does not parse)
        {"content-type": "text/plain"},
        {"content-type": "application/x-www-form-urlencoded"},  # curl -d without -H
        {"content-type": "application/octet-stream"},
    ],
)
async def test_a_body_not_declared_as_json_is_a_415_that_says_so(
    client: httpx.AsyncClient, sid: str, headers: dict[str, str]
) -> None:
    body = json.dumps({"id": sid}).encode()
    r = await client.post("/v1/sessions", content=body, headers=headers)
    problem = assert_problem(r, 415, "unsupported-media-type")
    assert problem["detail"].startswith("a JSON body is required")
    assert "Content-Type: application/json" in problem["detail"]
    declared = headers.get("content-type")
    assert (repr(declared) if declared else "no Content-Type") in problem["detail"]
    assert "valid dictionary" not in r.text
    assert_problem(await client.get(f"/v1/sessions/{sid}"), 404)  # nothing was created
    r = await client.post(f"/v1/sessions/{sid}/items", content=b'{"items": []}', headers=headers)
    assert_problem(r, 415, "unsupported-media-type")


async def test_json_content_types_are_still_parsed(client: httpx.AsyncClient, sid: str) -> None:
    for n, content_type in enumerate(
        ("application/json", "application/json; charset=utf-8", "application/merge-patch+json")
    ):
        body = json.dumps({"id": f"{sid}-{n}"}).encode()
        r = await client.post("/v1/sessions", content=body, headers={"content-type": content_type})
        assert r.status_code == 201, (content_type, r.text)


async def test_a_missing_or_non_object_body_is_explained(
    client: httpx.AsyncClient, sid: str
) -> None:
    for r in (
        await client.post("/v1/sessions"),
        await client.post("/v1/sessions", content=b"", headers={"content-type": "application/json"}),
    ):
        problem = assert_problem(r, 422, "validation-error")
        assert problem["detail"].startswith("a JSON body is required")
        assert problem["errors"][0]["loc"] == ["body"]
    for raw in (b"[1, 2]", b'"text"', b"42"):
        r = await client.post(
            "/v1/sessions", content=raw, headers={"content-type": "application/json"}
        )
        problem = assert_problem(r, 422, "validation-error")
        assert problem["detail"] == "the JSON body must be an object", raw
        assert "valid dictionary" not in r.text


async def test_bodiless_posts_need_no_content_type(client: httpx.AsyncClient, sid: str) -> None:
    await create(client, sid)
    await append(client, sid, [user("one"), user("two")])
    r = await client.post(f"/v1/sessions/{sid}/items/pop")
    assert r.status_code == 200, r.text
    assert r.json()["item"]["content"] == "two"


# -- database errors through the API ----------------------------------------------------------


@pytest.fixture(scope="module")
async def roomy_pg_client(request: pytest.FixtureRequest) -> AsyncIterator[httpx.AsyncClient]:
    """A Postgres server with the default item limit (8 MiB), room for a 1 MB text."""
    app = create_app(make_settings("postgres", request))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost", event_hooks=ASYNC_HOOKS) as client:
            yield client


async def test_a_text_past_the_search_index_limit_is_stored_whole_and_found_by_its_start(
    roomy_pg_client: httpx.AsyncClient, sid: str
) -> None:
    """A text of ~1 MB of distinct words overflows a Postgres tsvector (1 MB; SQLSTATE 54000,
    an OperationalError in psycopg). It used to fail its append every time (a 503 "connection
    failed" that the shipped client retried, then a 413): the search index now holds the first
    100,000 characters of a text, so the append succeeds, the item is stored whole, and it is
    found by words of its first part (a database limit is still a 413: tests/store/
    test_db_errors.py). (SQLite's FTS5 has no such limit.)"""
    client = roomy_pg_client
    await create(client, sid)
    rng = random.Random(16)
    words = ["w" + "".join(rng.choices(string.ascii_lowercase, k=7)) for _ in range(130_000)]
    text = " ".join(words)
    r = await client.post(f"/v1/sessions/{sid}/items", json={"items": [user(text)]})
    assert r.status_code == 201, r.text[:500]
    (item,) = await all_items(client, sid)
    assert item["content"] == text and item["chars"] == len(text)
    url = f"/v1/sessions/{sid}/search"
    hit = (await client.get(url, params={"q": words[10]})).json()["items"]
    assert [h["seq"] for h in hit] == [item["seq"]] and words[10] in hit[0]["snippet"]
    late = next(w for w in reversed(words) if w not in set(words[:12_000]))
    assert (await client.get(url, params={"q": late})).json()["items"] == []
