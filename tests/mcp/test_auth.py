"""/mcp takes the REST API's keys: the same 401s, the same scopes per operation, the same
tenancy and session prefixes; with auth off (loopback) no key, and loopback names only."""

from __future__ import annotations

from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from tests.mcp.conftest import Served, body, create_key, mcp_session, refusal

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw-test", "version": "1"},
    },
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}


def post_initialize(url: str, headers: dict[str, str]) -> httpx.Response:
    return httpx.post(url + "/mcp", json=INITIALIZE, headers={**MCP_HEADERS, **headers}, timeout=30)


def user(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": text}


@pytest.fixture(scope="module")
def keys(postgres_served: Served) -> dict[str, str]:
    """Read-only, write-only and prefixed keys from the admin API; another tenant's from the
    operator's CLI (the API makes keys in the caller's tenant only)."""

    def admin_key(scopes: list[str], prefix: str | None = None) -> str:
        with postgres_served.rest() as rest:
            r = rest.post(
                "/v1/admin/keys",
                json={
                    "name": "mcp-" + "-".join(scopes),
                    "scopes": scopes,
                    "session_prefix": prefix,
                },
            )
        assert r.status_code == 201, r.text
        return str(r.json()["secret"])

    return {
        "read": admin_key(["read"]),
        "write": admin_key(["write"]),
        "prefixed": admin_key(["read", "write"], "agent-7-"),
        "stranger": create_key(
            postgres_served.database_url, tenant="mcp-strangers", scopes="read,write"
        ),
    }


def test_no_key_or_a_wrong_key_is_a_401_problem_like_the_rest_api(postgres_served: Served) -> None:
    url = postgres_served.url
    missing = post_initialize(url, {})
    wrong = post_initialize(url, {"Authorization": "Bearer smk_not-a-real-key-0000000000000000"})
    rest_missing = httpx.get(url + "/v1/sessions", timeout=30)
    for response, code in ((missing, "api-key-required"), (wrong, "invalid-api-key")):
        assert response.status_code == 401, response.text
        assert response.headers["content-type"].startswith("application/problem+json")
        assert response.headers["www-authenticate"].startswith("Bearer")
        assert response.json()["type"].endswith("/" + code)
    assert 'error="invalid_token"' in wrong.headers["www-authenticate"]
    assert {k: v for k, v in missing.json().items() if k != "instance"} == {
        k: v for k, v in rest_missing.json().items() if k != "instance"
    }
    good = post_initialize(url, {"Authorization": f"Bearer {postgres_served.token}"})
    assert good.status_code == 200, good.text
    assert good.json()["result"]["serverInfo"]["name"] == "session-memory"


async def test_the_mcp_client_without_a_key_cannot_connect(postgres_served: Served) -> None:
    statuses: list[int] = []

    async def record(response: httpx2.Response) -> None:
        statuses.append(response.status_code)

    with anyio.fail_after(60), pytest.raises(Exception) as failure:  # noqa: B017, PT011
        async with (
            httpx2.AsyncClient(timeout=30, event_hooks={"response": [record]}) as http,
            streamable_http_client(postgres_served.url + "/mcp", http_client=http) as (r, w),
            ClientSession(r, w) as mcp,
        ):
            await mcp.initialize()
    assert "MCPError" in repr(failure.value)
    assert statuses == [401]


async def test_a_read_only_key_reads_but_cannot_write(
    postgres_served: Served, keys: dict[str, str], sid: str
) -> None:
    async with mcp_session(postgres_served.url, postgres_served.token) as admin:
        body(
            await admin.call_tool(
                "append_items", {"session_id": sid, "items": [user("hi")], "create": True}
            )
        )
    async with mcp_session(postgres_served.url, keys["read"]) as reader:
        context = body(await reader.call_tool("get_context", {"session_id": sid}))
        items = await reader.read_resource(f"session://{sid}/items")
        denied = [
            refusal(await reader.call_tool(name, {"session_id": sid, **args}))
            for name, args in (
                ("append_items", {"items": [user("sneaky")]}),
                ("compact", {"dry_run": True}),  # POST .../compact needs write, dry or not
                ("create_snapshot", {}),
                ("restore_snapshot", {"snapshot_id": "x"}),
            )
        ]
        no_create = refusal(await reader.call_tool("create_session", {"session_id": sid + "-new"}))
    assert [i["content"] for i in context["items"]] == ["hi"]
    assert '"hi"' in items.contents[0].text  # type: ignore[union-attr]
    for problem in [*denied, no_create]:
        assert problem["status"] == 403 and problem["type"].endswith("/insufficient-scope")
        assert "'write'" in problem["detail"]
    with postgres_served.rest() as rest:
        session = rest.get(f"/v1/sessions/{sid}").json()
        assert session["item_count"] == 1 and session["version"] == 1  # nothing was written
        assert rest.get(f"/v1/sessions/{sid}-new").status_code == 404
        assert rest.get(f"/v1/sessions/{sid}/snapshots").json()["items"] == []
    # The REST API refuses the same key the same way.
    with postgres_served.rest(keys["read"]) as rest:
        rest_denied = rest.post(f"/v1/sessions/{sid}/items", json={"items": [user("sneaky")]})
    assert rest_denied.status_code == 403
    assert rest_denied.json()["type"] == denied[0]["type"]


async def test_a_write_only_key_cannot_read(
    postgres_served: Served, keys: dict[str, str], sid: str
) -> None:
    async with mcp_session(postgres_served.url, keys["write"]) as writer:
        body(
            await writer.call_tool(
                "append_items", {"session_id": sid, "items": [user("x")], "create": True}
            )
        )
        denied = refusal(await writer.call_tool("get_context", {"session_id": sid}))
        searched = refusal(await writer.call_tool("search", {"q": "x"}))
        with pytest.raises(Exception) as failure:  # noqa: PT011 - the SDK's MCPError
            await writer.read_resource(f"session://{sid}/summary")
    assert denied["status"] == 403 and searched["status"] == 403
    assert getattr(failure.value, "data", {})["status"] == 403


async def test_tenants_and_session_prefixes_are_kept_apart(
    postgres_served: Served, keys: dict[str, str], sid: str
) -> None:
    word = f"walrus{sid[-6:]}"
    async with mcp_session(postgres_served.url, postgres_served.token) as owner:
        body(
            await owner.call_tool(
                "append_items", {"session_id": sid, "items": [user(word)], "create": True}
            )
        )
    async with mcp_session(postgres_served.url, keys["stranger"]) as stranger:
        hidden = refusal(await stranger.call_tool("get_context", {"session_id": sid}))
        overwrite = refusal(
            await stranger.call_tool("append_items", {"session_id": sid, "items": [user("boo")]})
        )
        found = body(await stranger.call_tool("search", {"q": word}))
        listed = body(await stranger.call_tool("list_sessions", {"prefix": sid}))
        # Its own session of the same id is another session altogether.
        own = body(
            await stranger.call_tool(
                "append_items", {"session_id": sid, "items": [user("mine")], "create": True}
            )
        )
    async with mcp_session(postgres_served.url, keys["prefixed"]) as agent:
        outside = refusal(await agent.call_tool("get_session", {"session_id": sid}))
        inside = body(
            await agent.call_tool(
                "append_items",
                {"session_id": f"agent-7-{sid}", "items": [user("ok")], "create": True},
            )
        )
        mine = body(await agent.call_tool("list_sessions", {}))
    assert hidden["status"] == 404 and hidden["type"].endswith("/session-not-found")
    assert overwrite["status"] == 404
    assert found["items"] == [] and listed["items"] == []
    assert own["items"][0]["seq"] == 1
    assert outside["status"] == 404 and inside["version"] >= 1
    assert [s["id"] for s in mine["items"]] == [f"agent-7-{sid}"]
    with postgres_served.rest() as rest:
        context = rest.get(f"/v1/sessions/{sid}/context").json()
        assert [i["content"] for i in context["items"]] == [word]  # the stranger wrote elsewhere


async def test_with_auth_off_no_key_is_needed_and_only_loopback_names_are_served(
    sqlite_served: Served, sid: str
) -> None:
    async with mcp_session(sqlite_served.url) as mcp:
        appended = body(
            await mcp.call_tool(
                "append_items", {"session_id": sid, "items": [user("open")], "create": True}
            )
        )
    assert appended["items"][0]["content"] == "open"
    assert post_initialize(sqlite_served.url, {}).status_code == 200
    assert (
        post_initialize(
            sqlite_served.url, {"Host": f"localhost:{sqlite_served.url.rsplit(':', 1)[1]}"}
        ).status_code
        == 200
    )
    # A page on another site that got a rebound name pointed at 127.0.0.1 is refused.
    # Both refusals are problem documents, like every other error of the service.
    for headers, status, code in (
        ({"Host": "attacker.example"}, 421, "misdirected-request"),
        ({"Origin": "http://attacker.example"}, 403, "origin-not-allowed"),
    ):
        refused = post_initialize(sqlite_served.url, headers)
        assert refused.status_code == status, refused.text
        assert refused.headers["content-type"].startswith("application/problem+json")
        problem = refused.json()
        assert problem["status"] == status and problem["type"].endswith("/" + code), problem


def test_with_auth_on_any_host_name_is_served(postgres_served: Served) -> None:
    """Behind a proxy the Host is the public name; the key, not the name, is the guard."""
    response = post_initialize(
        postgres_served.url,
        {"Authorization": f"Bearer {postgres_served.token}", "Host": "memory.example.com"},
    )
    assert response.status_code == 200, response.text
