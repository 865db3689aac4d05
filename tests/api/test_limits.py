"""Limits that fit agents: with the default settings a 5 MB base64 screenshot (computer use) is
one item, stored and read back identical; an item or a body over its limit is a 413 problem
whose detail names the limit and the setting that raises it. Both backends."""

from __future__ import annotations

import base64
import json
import os
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from app.main import create_app
from app.settings import Limits
from tests.api.helpers import all_items, assert_problem, create, user
from tests.conftest import make_settings
from tests.support.spec_check import ASYNC_HOOKS

MiB = 1024 * 1024
SCREENSHOT_B64_BYTES = 5_000_000


def test_default_limits_fit_a_screenshot() -> None:
    limits = Limits()
    assert limits.max_item_bytes == 8 * MiB
    assert limits.max_body_bytes == 16 * MiB
    assert limits.max_body_bytes >= 2 * limits.max_item_bytes


@pytest.fixture(scope="module")
async def default_client(
    backend: str, request: pytest.FixtureRequest
) -> AsyncIterator[httpx.AsyncClient]:
    """A server with the default limits (the shared `client` runs with small ones)."""
    app = create_app(make_settings(backend, request))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://localhost", event_hooks=ASYNC_HOOKS, timeout=120
        ) as client:
            yield client


def screenshot_b64(size: int) -> str:
    """``size`` characters of base64 (random bytes: nothing compresses or repeats)."""
    text = base64.b64encode(os.urandom(size * 3 // 4 + 3)).decode()[:size]
    assert len(text) == size
    return text


def tool_turn(call_id: str, data_url: str) -> list[dict[str, Any]]:
    return [
        {"type": "function_call", "call_id": call_id, "name": "screenshot", "arguments": "{}"},
        {
            "type": "function_call_output",
            "call_id": call_id,
            "output": [
                {"type": "text", "text": "the screen now"},
                {"type": "image", "url": data_url},
            ],
        },
    ]


async def test_a_5mb_screenshot_is_one_item(default_client: httpx.AsyncClient) -> None:
    sid = f"shot-{uuid.uuid4().hex[:10]}"
    await create(default_client, sid)
    data_url = "data:image/png;base64," + screenshot_b64(SCREENSHOT_B64_BYTES)
    items = [user("take a screenshot"), *tool_turn("call_1", data_url)]
    body = json.dumps({"format": "canonical", "items": items}).encode()
    assert len(body) > SCREENSHOT_B64_BYTES
    r = await default_client.post(
        f"/v1/sessions/{sid}/items", content=body, headers={"content-type": "application/json"}
    )
    assert r.status_code == 201, r.text[:500]
    stored = await all_items(default_client, sid)
    assert [i["type"] for i in stored] == ["message", "function_call", "function_call_output"]
    output = stored[2]["output"]
    assert output[1]["url"] == data_url
    assert output == items[2]["output"]
    # The projection (no budget) carries it too.
    r = await default_client.post(f"/v1/sessions/{sid}/context", json={"format": "canonical"})
    assert r.status_code == 200, r.text[:500]
    assert data_url in r.text


async def test_an_item_over_the_limit_is_413_naming_the_setting(
    default_client: httpx.AsyncClient,
) -> None:
    sid = f"big-{uuid.uuid4().hex[:10]}"
    await create(default_client, sid)
    data_url = "data:image/png;base64," + screenshot_b64(8 * MiB + 1)
    body = json.dumps({"items": tool_turn("call_1", data_url)}).encode()
    assert len(body) < 16 * MiB  # the item is refused, not the body
    r = await default_client.post(
        f"/v1/sessions/{sid}/items", content=body, headers={"content-type": "application/json"}
    )
    problem = assert_problem(r, 413, "limit-exceeded")
    assert "LIMITS__MAX_ITEM_BYTES" in problem["detail"] and str(8 * MiB) in problem["detail"]
    assert [e["loc"] for e in problem["errors"]] == [["items", 1]]
    assert "LIMITS__MAX_ITEM_BYTES" in problem["errors"][0]["msg"]
    assert await all_items(default_client, sid) == []


async def test_a_body_over_the_limit_is_413_naming_the_setting(
    default_client: httpx.AsyncClient,
) -> None:
    sid = f"body-{uuid.uuid4().hex[:10]}"
    await create(default_client, sid)
    url = f"/v1/sessions/{sid}/items"
    items = [user(screenshot_b64(4 * MiB)) for _ in range(5)]
    body = json.dumps({"items": items}).encode()
    assert len(body) > 16 * MiB
    r = await default_client.post(url, content=body, headers={"content-type": "application/json"})
    problem = assert_problem(r, 413, "body-too-large")
    assert "LIMITS__MAX_BODY_BYTES" in problem["detail"] and str(16 * MiB) in problem["detail"]

    async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: counted as it streams
        for start in range(0, len(body), MiB):
            yield body[start : start + MiB]

    r = await default_client.post(
        url, content=chunks(), headers={"content-type": "application/json"}
    )
    problem = assert_problem(r, 413, "body-too-large")
    assert "LIMITS__MAX_BODY_BYTES" in problem["detail"]
    assert (await default_client.get(f"/v1/sessions/{sid}")).json()["version"] == 1


async def test_configured_limits_are_named_too(client: httpx.AsyncClient, sid: str) -> None:
    # The shared `client` runs with 64 KiB items and 512 KiB bodies (tests/conftest.py).
    await create(client, sid)
    r = await client.post(f"/v1/sessions/{sid}/items", json={"items": [user("x" * 70_000)]})
    problem = assert_problem(r, 413, "limit-exceeded")
    assert "LIMITS__MAX_ITEM_BYTES" in problem["detail"] and str(64 * 1024) in problem["detail"]
    big = json.dumps({"items": [user("x" * 600_000)]}).encode()
    r = await client.post(
        f"/v1/sessions/{sid}/items", content=big, headers={"content-type": "application/json"}
    )
    problem = assert_problem(r, 413, "body-too-large")
    assert "LIMITS__MAX_BODY_BYTES" in problem["detail"] and str(512 * 1024) in problem["detail"]
