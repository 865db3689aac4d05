"""A listing gives items back in the order they were added, in every format (DESIGN §1,
faithful storage; issue 44): LangChain and Pydantic AI keep a Chat Completions history in
which a plain user message may come between a tool call and its answer. Only a provider
prompt may reorder, where the provider requires it: Chat Completions wants each ``tool``
answer right after the assistant message holding its call."""

from __future__ import annotations

from typing import Any

import httpx

from tests.api.helpers import create

CALL = {
    "role": "assistant",
    "content": None,
    "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
    ],
}
HISTORY: list[dict[str, Any]] = [
    {"role": "user", "content": "look it up"},
    CALL,
    {"role": "user", "content": "and be quick"},  # added before the tool answered
    {"role": "tool", "tool_call_id": "c1", "content": "found it"},
    {"role": "assistant", "content": "done"},
]


async def test_a_chat_listing_keeps_the_order_items_were_added_in(
    client: httpx.AsyncClient, sid: str
) -> None:
    await create(client, sid)
    for message in HISTORY:  # one append per message, as the SDKs' stores add them
        r = await client.post(
            f"/v1/sessions/{sid}/items", json={"format": "openai-chat", "items": [message]}
        )
        assert r.status_code == 201, r.text

    listed = await client.get(f"/v1/sessions/{sid}/items", params={"format": "openai-chat"})
    assert listed.status_code == 200, listed.text
    assert listed.json()["items"] == HISTORY
    # page by page too
    first = await client.get(
        f"/v1/sessions/{sid}/items", params={"format": "openai-chat", "limit": 3}
    )
    rest = await client.get(
        f"/v1/sessions/{sid}/items",
        params={"format": "openai-chat", "cursor": first.json()["next_cursor"]},
    )
    assert first.json()["items"] + rest.json()["items"] == HISTORY

    # the prompt is what Chat Completions accepts: the answer right after its call
    ctx = await client.post(f"/v1/sessions/{sid}/context", json={"format": "openai-chat"})
    assert ctx.status_code == 200, ctx.text
    assert ctx.json()["messages"] == [HISTORY[0], CALL, HISTORY[3], HISTORY[2], HISTORY[4]]
