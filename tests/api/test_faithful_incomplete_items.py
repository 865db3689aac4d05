"""Items the SDKs' own session stores keep are accepted (DESIGN §1, issue 44): a
``function_call`` or ``function_call_output`` whose ``call_id`` is missing, ``null`` or ``""``,
and a ``message`` without a ``role``. They are stored and listed back exactly as sent, pair with
nothing, and no provider prompt carries them (left out with a note), on both backends."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.api.helpers import create, user

INCOMPLETE: list[dict[str, Any]] = [
    {"type": "function_call", "call_id": "", "name": "read", "arguments": '{"p": "a.py"}'},
    {"type": "function_call_output", "call_id": "", "output": "output of the first"},
    {"type": "function_call", "call_id": None, "name": "read", "arguments": '{"p": "b.py"}'},
    {"type": "function_call", "name": "run", "arguments": "{}"},
    {"type": "function_call_output", "output": "output with no call_id at all"},
    {"type": "message", "content": "a message with no role"},
    {"type": "message", "role": None, "content": [{"type": "output_text", "text": "null"}]},
]
WHOLE_CALL = {"type": "function_call", "call_id": "c1", "name": "read", "arguments": "{}"}
WHOLE_OUTPUT = {"type": "function_call_output", "call_id": "c1", "output": "fine"}
ENVELOPE = {"id", "seq", "tokens", "chars", "pinned", "metadata", "created_at", "format"}


def _raw(items: list[dict[str, Any]], fmt: str) -> bytes:
    return json.dumps({"format": fmt, "items": items}).encode()


async def _post(client: httpx.AsyncClient, sid: str, items: list[Any], fmt: str) -> httpx.Response:
    return await client.post(
        f"/v1/sessions/{sid}/items",
        content=_raw(items, fmt),
        headers={"content-type": "application/json"},
    )


@pytest.mark.parametrize("fmt", ["canonical", "openai-responses"])
async def test_incomplete_items_are_stored_listed_as_sent_and_kept_out_of_prompts(
    client: httpx.AsyncClient, sid: str, fmt: str
) -> None:
    await create(client, sid)
    sent = [user("hi"), *INCOMPLETE, WHOLE_CALL, WHOLE_OUTPUT, user("bye")]
    r = await _post(client, sid, sent, fmt)
    assert r.status_code == 201, r.text
    assert [i["seq"] for i in r.json()["items"]] == list(range(1, len(sent) + 1))

    listed = await client.get(f"/v1/sessions/{sid}/items", params={"format": fmt})
    assert listed.status_code == 200, listed.text
    page = listed.json()
    if fmt == "openai-responses":
        assert page["items"] == sent
        assert json.dumps(page["items"]) == json.dumps(sent)  # key order too
        assert page["notes"] == []
    else:
        bodies = [{k: v for k, v in i.items() if k not in ENVELOPE} for i in page["items"]]
        assert bodies == sent

    # No provider prompt carries them; the whole pair is there, and nothing pairs with them.
    for target, key in (("openai-responses", "input"), ("openai-chat", "messages")):
        ctx = await client.post(f"/v1/sessions/{sid}/context", json={"format": target})
        assert ctx.status_code == 200, ctx.text
        payload = ctx.json()
        assert len(payload[key]) == 4, payload[key]
        notes = " ".join(payload["report"]["notes"])
        assert f"left out {len(INCOMPLETE)} items" in notes, notes
        assert (
            "(function_call without call_id x3, function_call_output without call_id x2, "
            "message without role x2)" in notes
        ), notes
    responses = (
        await client.post(f"/v1/sessions/{sid}/context", json={"format": "openai-responses"})
    ).json()["input"]
    assert [i.get("call_id") for i in responses[1:3]] == ["c1", "c1"]
    anthropic = (
        await client.post(f"/v1/sessions/{sid}/context", json={"format": "anthropic"})
    ).json()
    tool_ids = [
        block.get("id") or block.get("tool_use_id")
        for m in anthropic["messages"]
        if isinstance(m["content"], list)
        for block in m["content"]
        if block["type"] in ("tool_use", "tool_result")
    ]
    assert tool_ids == ["c1", "c1"], anthropic

    # the service's own (canonical) view keeps all of them
    ctx = await client.post(f"/v1/sessions/{sid}/context", json={"format": "canonical"})
    assert len(ctx.json()["items"]) == len(sent)

    # pop gives the newest back as sent
    r = await _post(client, sid, [INCOMPLETE[0]], fmt)
    assert r.status_code == 201, r.text
    popped = await client.post(f"/v1/sessions/{sid}/items/pop", params={"format": fmt})
    assert popped.status_code == 200, popped.text
    rendered = popped.json()["rendered"]
    if fmt == "canonical":
        rendered = {k: v for k, v in rendered.items() if k not in ENVELOPE}
    assert rendered == INCOMPLETE[0]


@pytest.mark.parametrize("fmt", ["canonical", "openai-responses"])
@pytest.mark.parametrize(
    "item",
    [
        {"type": "function_call", "call_id": 7, "name": "f"},  # a call id, but not a string
        {"type": "function_call", "call_id": "c", "name": ""},  # an id, and a broken name
        {"type": "message", "role": "wizard", "content": "hi"},  # a role nobody has
    ],
)
async def test_other_flaws_of_a_core_item_are_still_422(
    client: httpx.AsyncClient, sid: str, fmt: str, item: dict[str, Any]
) -> None:
    await create(client, sid)
    r = await _post(client, sid, [user("fine"), item], fmt)
    assert r.status_code == 422, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    assert r.json()["errors"][0]["loc"][:2] == ["items", 1], r.text
    listed = await client.get(f"/v1/sessions/{sid}/items")
    assert listed.json()["items"] == []


async def test_an_output_without_call_id_never_answers_a_call_without_one(
    client: httpx.AsyncClient, sid: str
) -> None:
    """Two calls with an empty call_id and their outputs: nothing pairs, so a prompt never
    holds a call answered by another call's output (nor a dangling placeholder for one)."""
    await create(client, sid)
    items = [
        user("go"),
        {"type": "function_call", "call_id": "", "name": "a", "arguments": "{}"},
        {"type": "function_call", "call_id": "", "name": "b", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "", "output": "from b?"},
        {"type": "function_call_output", "call_id": "", "output": "from a?"},
        user("next"),
    ]
    r = await _post(client, sid, items, "openai-responses")
    assert r.status_code == 201, r.text
    for dangling in ("drop", "placeholder"):
        ctx = await client.post(
            f"/v1/sessions/{sid}/context",
            json={"format": "openai-chat", "dangling_tool_calls": dangling},
        )
        assert ctx.status_code == 200, ctx.text
        messages = ctx.json()["messages"]
        assert messages == [{"role": "user", "content": "go"}, {"role": "user", "content": "next"}]


@pytest.mark.parametrize("fmt", ["canonical", "openai-responses"])
async def test_incomplete_items_go_through_snapshots_restore_and_fork(
    client: httpx.AsyncClient, sid: str, fmt: str
) -> None:
    """A snapshot document holds them as they were sent; restoring it (by id, or as a
    document into another session) and forking give them back the same."""
    await create(client, sid)
    sent = [user("hi"), *INCOMPLETE, user("bye")]
    assert (await _post(client, sid, sent, fmt)).status_code == 201

    async def listed(session_id: str) -> list[Any]:
        r = await client.get(f"/v1/sessions/{session_id}/items", params={"format": fmt})
        assert r.status_code == 200, r.text
        items = r.json()["items"]
        if fmt == "canonical":
            return [{k: v for k, v in i.items() if k not in ENVELOPE} for i in items]
        return items  # type: ignore[no-any-return]

    snap = await client.post(f"/v1/sessions/{sid}/snapshots", json={"label": "incomplete"})
    assert snap.status_code == 201, snap.text
    document = await client.get(f"/v1/sessions/{sid}/snapshots/{snap.json()['id']}")
    assert document.status_code == 200, document.text

    other = sid + "-copy"
    await create(client, other)
    r = await client.post(f"/v1/sessions/{other}/restore", json={"snapshot": document.json()})
    assert r.status_code == 200, r.text
    assert await listed(other) == sent

    assert (await _post(client, sid, [user("after the snapshot")], fmt)).status_code == 201
    r = await client.post(f"/v1/sessions/{sid}/restore", json={"snapshot_id": snap.json()["id"]})
    assert r.status_code == 200, r.text
    assert await listed(sid) == sent
    fork = await client.post(f"/v1/sessions/{sid}/fork", json={"new_session_id": sid + "-fork"})
    assert fork.status_code == 201, fork.text
    assert await listed(sid + "-fork") == sent
