"""The committed spec tells the truth (issue 16): what the server answers validates against
``openapi/openapi.json``, including the entries of a canonical context that are not stored
items, and the errors an operation can give are declared, each with a problem example."""

from __future__ import annotations

import json
from typing import Any

import httpx
import jsonschema

from tests.api.helpers import create, user
from tests.conftest import ROOT

SPEC = json.loads((ROOT / "openapi" / "openapi.json").read_text())


def validator(component: str) -> jsonschema.protocols.Validator:
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$ref": f"#/components/schemas/{component}",
        "components": SPEC["components"],
    }
    return jsonschema.Draft202012Validator(schema)


async def test_a_canonical_context_with_summary_and_placeholder_matches_context_read(
    client: httpx.AsyncClient, sid: str
) -> None:
    await create(client, sid, summary="## Goal\n\nship it")
    items: list[dict[str, Any]] = [
        user("what is the weather?"),
        {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": "{}"},
    ]
    r = await client.post(f"/v1/sessions/{sid}/items", json={"items": items})
    assert r.status_code == 201, r.text
    r = await client.post(
        f"/v1/sessions/{sid}/context", json={"dangling_tool_calls": "placeholder"}
    )
    assert r.status_code == 200, r.text
    body = r.json()
    summary, *_, placeholder = body["items"]
    assert summary == {"type": "message", "role": "system", "content": "## Goal\n\nship it"}
    assert placeholder["type"] == "function_call_output" and "seq" not in placeholder
    errors = [e.message for e in validator("ContextRead").iter_errors(body)]
    assert errors == []
    # ... and the declaration is not so loose that anything passes
    bad = {**body, "items": [{**summary, "role": "user"}, *body["items"][1:]]}
    assert list(validator("ContextRead").iter_errors(bad))


def test_update_session_declares_its_transaction_conflict() -> None:
    """PATCH can meet a serialization failure or deadlock (a 409 `transaction-conflict`,
    tests/store/test_db_errors.py): the spec says so, with an example of that problem."""
    response = SPEC["paths"]["/v1/sessions/{session_id}"]["patch"]["responses"]["409"]
    media = response["content"]["application/problem+json"]
    assert media["example"]["type"].endswith("/transaction-conflict")
    assert media["example"]["status"] == 409
    assert "transaction-conflict" in response["description"]
    assert not list(validator("Problem").iter_errors(media["example"]))


WEB_SEARCH = {
    "type": "web_search_call",
    "id": "ws_1",
    "status": "completed",
    "action": {"type": "search", "query": "weather"},
}


async def test_every_listing_admits_opaque_items(client: httpx.AsyncClient, sid: str) -> None:
    """A session holding items of a type the canonical model does not render (a hosted web
    search, a computer call) answers every list and search with a body the spec admits: the
    client fixture validates each response against ``openapi/openapi.json``
    (``tests.support.spec_check``), so a listing whose schema leaves them out fails here."""
    await create(client, sid)
    canonical = [user("find the weather"), {**WEB_SEARCH, "id": "ws_0"}, user("weather")]
    r = await client.post(f"/v1/sessions/{sid}/items", json={"items": canonical})
    assert r.status_code == 201, r.text
    r = await client.post(
        f"/v1/sessions/{sid}/items",
        json={"format": "openai-responses", "items": [WEB_SEARCH, user("and tomorrow?")]},
    )
    assert r.status_code == 201, r.text
    r = await client.post(f"/v1/sessions/{sid}/snapshots", json={})
    assert r.status_code == 201, r.text
    snapshot_id = r.json()["id"]
    reads = [
        ("GET", f"/v1/sessions/{sid}/items", {}),
        *[("GET", f"/v1/sessions/{sid}/items", {"format": f}) for f in FORMATS],
        ("GET", f"/v1/sessions/{sid}/context", {}),
        *[("GET", f"/v1/sessions/{sid}/context", {"format": f}) for f in FORMATS],
        ("GET", f"/v1/sessions/{sid}/history", {}),
        ("GET", f"/v1/sessions/{sid}/events", {}),
        ("GET", f"/v1/sessions/{sid}/search", {"q": "weather"}),
        ("GET", "/v1/search", {"q": "weather"}),
        ("GET", f"/v1/sessions/{sid}/snapshots/{snapshot_id}", {}),
    ]
    for method, url, params in reads:
        r = await client.request(method, url, params=params)
        assert r.status_code == 200, (url, params, r.text)
    search = (await client.get(f"/v1/sessions/{sid}/search", params={"q": "weather"})).json()
    assert any(hit["item"]["type"] == "web_search_call" for hit in search["items"]), search
    history = (await client.get(f"/v1/sessions/{sid}/history")).json()["items"]
    assert [i["type"] for i in history].count("web_search_call") == 2
    # pop each (newest first, in every format) until working memory is empty; then the history
    # holds the popped ones, archived
    for fmt in (None, *FORMATS):
        params = {"format": fmt} if fmt else {}
        r = await client.post(f"/v1/sessions/{sid}/items/pop", params=params)
        assert r.status_code == 200, (fmt, r.text)
    archived = (await client.get(f"/v1/sessions/{sid}/history")).json()["items"]
    assert {i["type"] for i in archived if i["archived"]} >= {"web_search_call", "message"}


FORMATS = ("canonical", "openai-chat", "openai-responses", "anthropic")
