"""Reading working memory back in a provider format: pages end on message boundaries, pops
return the item as sent, snapshots and forks keep the records, cross-format reads name what
they leave out."""

from __future__ import annotations

import json
from typing import Any

import httpx

from tests.api.helpers import create

SPLIT = {  # one Anthropic message that the service stores as three items
    "role": "assistant",
    "content": [
        {"type": "thinking", "thinking": "plan", "signature": "sig"},
        {"type": "text", "text": "Reading it.", "citations": None},
        {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "a.py"}},
    ],
}
MESSAGES: list[dict[str, Any]] = [
    {"role": "user", "content": "Read a.py", "cache_control": None},
    SPLIT,
    {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "x = 1"}],
    },
    {"role": "assistant", "content": "It sets x."},
]


async def _all(client: httpx.AsyncClient, sid: str, fmt: str, limit: int) -> tuple[list[Any], int]:
    out: list[Any] = []
    after: int | None = None
    pages = 0
    while True:
        params: dict[str, Any] = {"format": fmt, "limit": limit}
        if after is not None:
            params["after_seq"] = after
        r = await client.get(f"/v1/sessions/{sid}/items", params=params)
        assert r.status_code == 200, r.text
        body = r.json()
        out += body["items"]
        pages += 1
        after = body["next_cursor"]
        if after is None:
            return out, pages


async def test_pages_never_split_a_provider_message(client: httpx.AsyncClient, sid: str) -> None:
    await create(client, sid)
    r = await client.post(
        f"/v1/sessions/{sid}/items", json={"format": "anthropic", "items": MESSAGES}
    )
    assert r.status_code == 201, r.text
    assert len(r.json()["items"]) == 6  # 1 + 3 + 1 + 1 canonical items
    for limit in (1, 2, 3, 4, 100):
        got, pages = await _all(client, sid, "anthropic", limit)
        assert json.dumps(got) == json.dumps(MESSAGES), limit
        assert pages >= (1 if limit >= 6 else 2)
    last = (
        await client.get(f"/v1/sessions/{sid}/items", params={"format": "anthropic", "last": 1})
    ).json()
    assert last["items"] == [MESSAGES[-1]]


async def test_pop_and_snapshots_keep_the_record(client: httpx.AsyncClient, sid: str) -> None:
    await create(client, sid)
    items = [
        {"type": "message", "role": "user", "content": "hi"},
        {
            "type": "message",
            "role": "assistant",
            "id": "msg_7",
            "status": "completed",
            "phase": "commentary",
            "content": [
                {"type": "output_text", "text": "hello", "annotations": [], "logprobs": []}
            ],
        },
    ]
    r = await client.post(
        f"/v1/sessions/{sid}/items", json={"format": "openai-responses", "items": items}
    )
    assert r.status_code == 201, r.text
    snap = (await client.post(f"/v1/sessions/{sid}/snapshots", json={})).json()
    fork = await client.post(f"/v1/sessions/{sid}/fork", json={"new_session_id": sid + "-fork"})
    assert fork.status_code == 201, fork.text
    popped = (
        await client.post(f"/v1/sessions/{sid}/items/pop", params={"format": "openai-responses"})
    ).json()
    assert json.dumps(popped["rendered"]) == json.dumps(items[1])
    assert popped["item"]["format"] == "openai-responses" and popped["item"]["id"].startswith(
        "itm_"
    )
    assert (
        await client.post(f"/v1/sessions/{sid}/restore", json={"snapshot_id": snap["id"]})
    ).status_code == 200
    for session in (sid, sid + "-fork"):
        got = (
            await client.get(f"/v1/sessions/{session}/items", params={"format": "openai-responses"})
        ).json()
        assert json.dumps(got["items"]) == json.dumps(items), session
    document = (await client.get(f"/v1/sessions/{sid}/snapshots/{snap['id']}")).json()
    restored = await client.post(f"/v1/sessions/{sid}/restore", json={"snapshot": document})
    assert restored.status_code == 200, restored.text
    got = (
        await client.get(f"/v1/sessions/{sid}/items", params={"format": "openai-responses"})
    ).json()
    assert json.dumps(got["items"]) == json.dumps(items)


async def test_cross_format_reads_name_what_they_leave_out(
    client: httpx.AsyncClient, sid: str
) -> None:
    await create(client, sid)
    items = [
        {"type": "message", "role": "user", "content": "search"},
        {
            "type": "web_search_call",
            "id": "ws_1",
            "status": "completed",
            "action": {"type": "search", "query": "q"},
        },
        {"type": "message", "role": "assistant", "content": "found"},
    ]
    assert (
        await client.post(
            f"/v1/sessions/{sid}/items", json={"format": "openai-responses", "items": items}
        )
    ).status_code == 201
    for fmt in ("openai-chat", "anthropic"):
        listed = (await client.get(f"/v1/sessions/{sid}/items", params={"format": fmt})).json()
        assert [m["role"] for m in listed["items"]] == ["user", "assistant"]
        assert any("web_search_call" in note for note in listed["notes"]), listed
        context = (await client.post(f"/v1/sessions/{sid}/context", json={"format": fmt})).json()
        assert any("web_search_call" in note for note in context["report"]["notes"]), context[
            "report"
        ]
    canonical = (await client.get(f"/v1/sessions/{sid}/items")).json()["items"]
    assert canonical[1]["type"] == "web_search_call" and canonical[1]["action"]["query"] == "q"
    assert all(i["format"] == "openai-responses" for i in canonical)


async def test_pop_renders_in_every_format_canonical_included(
    client: httpx.AsyncClient, sid: str
) -> None:
    """``?format=canonical`` renders the popped item with its envelope, like a canonical
    page of ``GET /items`` (it used to be a 500)."""
    await create(client, sid)
    r = await client.post(
        f"/v1/sessions/{sid}/items",
        json={"items": [{"type": "message", "role": "user", "content": f"n{n}"} for n in range(5)]},
    )
    assert r.status_code == 201, r.text
    for fmt in ("canonical", "openai-chat", "openai-responses", "anthropic"):
        r = await client.post(f"/v1/sessions/{sid}/items/pop", params={"format": fmt})
        assert r.status_code == 200, (fmt, r.text)
        body = r.json()
        assert body["rendered"] is not None, fmt
        assert body["rendered"]["content"] == body["item"]["content"], fmt
        if fmt == "canonical":
            assert body["rendered"] == body["item"]
