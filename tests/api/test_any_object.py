"""Any JSON object a session is given is stored (DESIGN §1): an object the service cannot read
is an opaque item, kept and listed exactly as sent, never put in a prompt; an object that
looks like a message (it has a ``role``) is held to a message's rules. Strings may hold NUL
(``\\u0000``, valid JSON) in items, on both backends."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
import pytest

from tests.api.helpers import all_items, assert_problem, create, user

# The Agents SDK's EncryptedSession envelope: no ``type`` at all.
ENVELOPE = {"__enc__": 1, "v": 1, "kid": "hkdf-2025-01", "payload": "gAAAAABo" + "x" * 300}
STRANGERS: list[dict[str, Any]] = [
    ENVELOPE,
    {"type": 7, "payload": "a non-string type"},
    {"type": None, "note": "a null type"},
    {"type": "", "note": "an empty type"},
    {"type": "t" * 65, "note": "a type longer than any the service names"},
    {"type": ["message"], "note": "a list"},
    {},
]


def raw(items: list[dict[str, Any]], fmt: str) -> bytes:
    return json.dumps({"format": fmt, "items": items}, ensure_ascii=False).encode()


async def post(client: httpx.AsyncClient, sid: str, body: bytes) -> httpx.Response:
    return await client.post(
        f"/v1/sessions/{sid}/items", content=body, headers={"content-type": "application/json"}
    )


@pytest.mark.parametrize("fmt", ["canonical", "openai-responses"])
async def test_objects_without_a_usable_type_are_stored_and_listed_as_sent(
    client: httpx.AsyncClient, sid: str, fmt: str
) -> None:
    await create(client, sid)
    r = await post(client, sid, raw([user("hi"), *STRANGERS, user("bye")], fmt))
    assert r.status_code == 201, r.text
    stored = r.json()["items"]
    assert [i["seq"] for i in stored] == list(range(1, len(STRANGERS) + 3))

    listed = await client.get(f"/v1/sessions/{sid}/items", params={"format": fmt})
    assert listed.status_code == 200, listed.text
    page = listed.json()
    if fmt == "openai-responses":
        assert page["items"][1:-1] == STRANGERS
        assert page["notes"] == []
    else:  # the canonical view adds the service's envelope to each, as to every item
        envelope = {"id", "seq", "tokens", "chars", "pinned", "metadata", "created_at", "format"}
        bodies = [{k: v for k, v in i.items() if k not in envelope} for i in page["items"]]
        assert bodies[1:-1] == STRANGERS
    # the bytes too: key order and values exactly as sent
    assert json.dumps(page["items"][1]).startswith('{"__enc__": 1, "v": 1, "kid": "hkdf-2025-01"')

    # a prompt never holds them: left out of every provider format, with a note
    for target, key in (("openai-responses", "input"), ("openai-chat", "messages")):
        ctx = await client.post(f"/v1/sessions/{sid}/context", json={"format": target})
        assert ctx.status_code == 200, ctx.text
        payload = ctx.json()
        assert len(payload[key]) == 2, payload[key]
        notes = " ".join(payload["report"]["notes"])
        assert f"left out {len(STRANGERS)} items" in notes and "untyped" in notes, notes
    # ... but the canonical projection is the service's own view: all of them
    ctx = await client.post(f"/v1/sessions/{sid}/context", json={"format": "canonical"})
    assert len(ctx.json()["items"]) == len(STRANGERS) + 2

    # pop gives the newest back as sent, in the format it was written in
    r = await post(client, sid, raw([ENVELOPE], "openai-responses"))
    assert r.status_code == 201, r.text
    popped = await client.post(
        f"/v1/sessions/{sid}/items/pop", params={"format": "openai-responses"}
    )
    assert popped.status_code == 200, popped.text
    assert popped.json()["rendered"] == ENVELOPE


@pytest.mark.parametrize(
    ("fmt", "item"),
    [
        ("canonical", {"role": "user", "content": "hi"}),  # a Chat message sent as canonical
        ("canonical", {"type": None, "role": "user", "content": "hi"}),
        ("canonical", {"role": "assistant", "tool_calls": []}),
        ("openai-responses", {"type": None, "role": "user", "content": "hi"}),
        ("openai-responses", {"type": 1, "role": "user", "content": "hi"}),
        ("openai-responses", {"role": "wizard", "content": "hi"}),
    ],
)
async def test_objects_with_a_role_are_messages_and_a_broken_one_is_422(
    client: httpx.AsyncClient, sid: str, fmt: str, item: dict[str, Any]
) -> None:
    await create(client, sid)
    r = await post(client, sid, raw([user("fine"), item], fmt))
    problem = assert_problem(r, 422)
    assert problem["errors"][0]["loc"][:2] == ["items", 1], problem
    if fmt == "canonical":  # says what to do: name the message's format
        assert '"format"' in problem["errors"][0]["msg"], problem
    assert await all_items(client, sid) == []


async def test_nul_in_item_strings_keys_and_metadata_round_trips(
    client: httpx.AsyncClient, sid: str
) -> None:
    word = "zq" + uuid.uuid4().hex[:10].replace("0", "x")
    await create(client, sid)
    items = [
        {"type": "message", "role": "user", "content": f"a\u0000b {word}\u0000c"},
        {"type": "function_call", "call_id": "c\u00001", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c\u00001", "output": "\u0000"},
        {"type": "x\u0000y", "k\u0000": "v\u0000", "metadata": {"m": "n"}},
        {**ENVELOPE, "payload": "\u0000"},
    ]
    r = await post(client, sid, raw(items, "canonical"))
    assert r.status_code == 201, r.text
    listed = (await client.get(f"/v1/sessions/{sid}/items")).json()["items"]
    assert listed[0]["content"] == f"a\u0000b {word}\u0000c"
    assert listed[1]["call_id"] == "c\u00001" and listed[2]["output"] == "\u0000"
    assert listed[3]["k\u0000"] == "v\u0000" and listed[3]["type"] == "x\u0000y"
    assert listed[3]["metadata"] == {"m": "n"}
    assert listed[4]["payload"] == "\u0000"
    # the call and its output still pair: the prompt has both
    ctx = (await client.post(f"/v1/sessions/{sid}/context", json={"format": "openai-chat"})).json()
    assert [m["role"] for m in ctx["messages"]] == ["user", "assistant", "tool"]
    assert ctx["messages"][0]["content"] == f"a\u0000b {word}\u0000c"
    # full-text search reads the text around the NUL
    hits = (await client.get(f"/v1/sessions/{sid}/search", params={"q": word})).json()["items"]
    assert [h["item"]["seq"] for h in hits] == [1]
    # a provider format too
    r = await post(client, sid, raw([{"role": "user", "content": "\u0000 in chat"}], "openai-chat"))
    assert r.status_code == 201, r.text
    again = await client.get(f"/v1/sessions/{sid}/items", params={"format": "openai-chat"})
    assert again.json()["items"][-1] == {"role": "user", "content": "\u0000 in chat"}


async def test_nul_outside_items_is_still_422(client: httpx.AsyncClient, sid: str) -> None:
    """Metadata (of a session, or an item's envelope) is read as JSON by Postgres, which
    cannot hold a NUL."""
    await create(client, sid)
    for method, url, body in [
        ("POST", f"/v1/sessions/{sid}/items", {"items": [user("x", metadata={"k": "\u0000"})]}),
        ("POST", f"/v1/sessions/{sid}/items", {"items": [user("x", metadata={"\u0000": 1})]}),
        ("POST", "/v1/sessions", {"id": sid + "-2", "metadata": {"k": "a\u0000"}}),
        ("PATCH", f"/v1/sessions/{sid}", {"metadata": {"k": "a\u0000"}}),
        ("POST", f"/v1/sessions/{sid}/items", {"format": "canonical\u0000", "items": [user("x")]}),
    ]:
        r = await client.request(method, url, json=body)
        assert_problem(r, 422, "invalid-json")
    assert await all_items(client, sid) == []


async def test_items_with_nul_and_untyped_items_go_through_compaction_and_snapshots(
    client: httpx.AsyncClient, sid: str
) -> None:
    """What the service makes of items (a structured summary, a snapshot, a restore, a fork)
    holds NUL and untyped items as well as the items themselves do."""
    await create(client, sid)
    items = [
        user("first\u0000question"),
        {"type": "message", "role": "assistant", "content": "an\u0000answer"},
        ENVELOPE,
        user("second"),
        {"type": "message", "role": "assistant", "content": "ok"},
    ]
    assert (await post(client, sid, raw(items, "canonical"))).status_code == 201
    snap = await client.post(f"/v1/sessions/{sid}/snapshots", json={"label": "nul"})
    assert snap.status_code == 201, snap.text
    r = await client.post(
        f"/v1/sessions/{sid}/compact", json={"policy": "structured", "keep_last_items": 2}
    )
    assert r.status_code == 200, r.text
    ctx = (await client.post(f"/v1/sessions/{sid}/context", json={"format": "openai-chat"})).json()
    assert ctx["messages"][0]["role"] == "system"
    r = await client.post(f"/v1/sessions/{sid}/restore", json={"snapshot_id": snap.json()["id"]})
    assert r.status_code == 200, r.text
    restored = await all_items(client, sid)
    assert [i.get("content") for i in restored] == [
        "first\u0000question",
        "an\u0000answer",
        None,
        "second",
        "ok",
    ]
    assert {k: restored[2][k] for k in ENVELOPE} == ENVELOPE
    fork = await client.post(f"/v1/sessions/{sid}/fork", json={"new_session_id": sid + "-fork"})
    assert fork.status_code == 201, fork.text
    forked = await all_items(client, sid + "-fork")
    assert [i.get("content") for i in forked] == [i.get("content") for i in restored]
