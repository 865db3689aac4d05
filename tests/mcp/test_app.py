"""The endpoint inside the application: off the OpenAPI document, and alive exactly while the
application's lifespan runs (each run gets a fresh SDK session manager)."""

from __future__ import annotations

import json

import httpx

from app.main import create_app
from app.settings import Settings
from tests.support.services import ROOT

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "in-process", "version": "1"},
    },
}
HEADERS = {"Accept": "application/json, text/event-stream"}


def test_mcp_is_not_a_rest_operation(sqlite_url: str) -> None:
    app = create_app(Settings(database_url=sqlite_url, redis_url=None))  # type: ignore[call-arg]
    assert not [path for path in app.openapi()["paths"] if path.startswith("/mcp")]
    committed = json.loads((ROOT / "openapi" / "openapi.json").read_text())
    assert not [path for path in committed["paths"] if path.startswith("/mcp")]
    assert any(getattr(route, "path", None) == "/mcp" for route in app.router.routes)


async def test_the_endpoint_serves_during_each_lifespan_run(sqlite_url: str) -> None:
    app = create_app(Settings(database_url=sqlite_url, redis_url=None))  # type: ignore[call-arg]
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        before = await client.post("/mcp", json=INITIALIZE, headers=HEADERS)
        for _ in range(2):  # the SDK's manager runs once: each lifespan builds its own
            async with app.router.lifespan_context(app):
                served = await client.post("/mcp", json=INITIALIZE, headers=HEADERS)
                assert served.status_code == 200, served.text
                assert served.json()["result"]["serverInfo"]["name"] == "session-memory"
        after = await client.post("/mcp", json=INITIALIZE, headers=HEADERS)
        # Stateless: no event stream to GET, no MCP session to DELETE (405, as the transport
        # allows), so no request can hold a connection open.
        async with app.router.lifespan_context(app):
            stream = await client.get("/mcp", headers={"Accept": "text/event-stream"})
            delete = await client.delete("/mcp")
    for response in (before, after):
        assert response.status_code == 503
        assert response.headers["content-type"].startswith("application/problem+json")
    for response in (stream, delete):
        assert response.status_code == 405 and "POST" in response.headers["allow"]


async def test_tool_arguments_follow_the_rest_request_models() -> None:
    """A budget field or compact option added to the REST API must reach the tools too."""
    from app.api.memory_schemas import RestoreRequest
    from app.api.routes.compaction import CompactRequest
    from app.api.routes.context import ContextRequest
    from app.api.schemas import ItemsAppend
    from app.mcp.tools import build_server

    tools = {tool.name: tool for tool in await build_server().list_tools()}

    def arguments(name: str) -> set[str]:
        return set(tools[name].input_schema["properties"])

    assert arguments("get_context") == {"session_id", *ContextRequest.model_fields}
    assert arguments("compact") == {"session_id", "idempotency_key", *CompactRequest.model_fields}
    assert arguments("append_items") == {
        "session_id", "create", "idempotency_key", *ItemsAppend.model_fields,
    }  # fmt: skip
    assert arguments("restore_snapshot") == {
        "session_id", "idempotency_key", *RestoreRequest.model_fields,
    }  # fmt: skip


def test_the_sdk_is_not_loaded_while_the_server_starts() -> None:
    """Start-up (what health checks and rolling deploys wait for) does not pay for MCP."""
    import subprocess
    import sys

    probe = "import sys; from app.main import create_app; print('mcp' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=str(ROOT), capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"
