"""Small helpers for API tests."""

from __future__ import annotations

from typing import Any

import httpx

PROBLEM = "application/problem+json"


def assert_problem(response: httpx.Response, status: int, code: str | None = None) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith(PROBLEM), response.headers
    body = response.json()
    assert body["status"] == status
    assert body["title"] and body["detail"] and body["type"].startswith("https://")
    if code is not None:
        assert body["type"].endswith("/" + code), body
    return body


def user(text: str, **extra: Any) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": text, **extra}


def assistant(text: str, **extra: Any) -> dict[str, Any]:
    return {"type": "message", "role": "assistant", "content": text, **extra}


async def create(client: httpx.AsyncClient, sid: str, **body: Any) -> dict[str, Any]:
    r = await client.post("/v1/sessions", json={"id": sid, **body})
    assert r.status_code == 201, r.text
    return r.json()


async def append(
    client: httpx.AsyncClient, sid: str, items: list[dict[str, Any]], **kwargs: Any
) -> httpx.Response:
    return await client.post(f"/v1/sessions/{sid}/items", json={"items": items}, **kwargs)


async def all_items(client: httpx.AsyncClient, sid: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"limit": 1000}
        if cursor is not None:
            params["after_seq"] = cursor
        r = await client.get(f"/v1/sessions/{sid}/items", params=params)
        assert r.status_code == 200, r.text
        page = r.json()
        out.extend(page["items"])
        cursor = page["next_cursor"]
        if cursor is None:
            return out
