"""Errors that teach (issue 34 item 5): a provider's chat message appended without
``"format"`` is told which format it looks like; ``loc`` and ``msg`` name wire fields only,
never pydantic's names of union members. On both backends; a refused append stores nothing."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.api.helpers import assert_problem

CHAT_TOOL_CALL = {
    "role": "assistant",
    "content": None,
    "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
}


@pytest.mark.parametrize(
    ("item", "fmt"),
    [
        ({"role": "user", "content": "hi"}, "openai-chat"),
        (CHAT_TOOL_CALL, "openai-chat"),
        ({"role": "tool", "tool_call_id": "c1", "content": "ok"}, "openai-chat"),
        (
            {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]},
            "openai-chat",
        ),
        ({"role": "user", "content": [{"type": "input_text", "text": "hi"}]}, "openai-responses"),
        (
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}],
            },
            "anthropic",
        ),
        (
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t", "content": "ok"}],
            },
            "anthropic",
        ),
        ({"role": "user", "parts": [{"text": "hi"}]}, "gemini"),
        ({"role": "model", "parts": [{"functionCall": {"name": "f", "args": {}}}]}, "gemini"),
    ],
)
async def test_a_chat_message_without_format_is_told_the_format_it_looks_like(
    client: httpx.AsyncClient, sid: str, item: dict[str, Any], fmt: str
) -> None:
    r = await client.post(f"/v1/sessions/{sid}/items?create=true", json={"items": [item]})
    problem = assert_problem(r, 422, "invalid-input")
    hint = f'set "format": "{fmt}"'
    assert hint in problem["detail"], problem
    assert problem["errors"] == [
        {"loc": ["items", 0], "msg": problem["errors"][0]["msg"], "type": "probably_another_format"}
    ]
    article = "an" if fmt[0] in "aeiou" else "a"
    assert f"looks like {article} {fmt} message" in problem["errors"][0]["msg"]
    assert_problem(await client.get(f"/v1/sessions/{sid}"), 404)  # nothing created
    # and with the format it names, the same item is stored
    if fmt != "anthropic" or item["role"] == "user":
        follow = [item] if item.get("role") != "tool" else [CHAT_TOOL_CALL, item]
        if item.get("tool_calls"):
            follow = [item, {"role": "tool", "tool_call_id": "c1", "content": "ok"}]
        r = await client.post(
            f"/v1/sessions/{sid}/items?create=true", json={"format": fmt, "items": follow}
        )
        assert r.status_code == 201, r.text


INTERNAL = ("[", "tagged-union", "function-after", "opaque", "TextPart", "ImagePart")


@pytest.mark.parametrize(
    ("body", "loc"),
    [
        ({"items": [{"type": "message", "role": "user", "content": 5}]}, ["items", 0, "content"]),
        (
            {
                "items": [
                    {"type": "message", "role": "user", "content": [{"type": "text", "text": 5}]}
                ]
            },
            ["items", 0, "content", 0, "text"],
        ),
        (
            {
                "items": [
                    {"type": "message", "role": "user", "content": [{"type": "image", "url": 5}]}
                ]
            },
            ["items", 0, "content", 0, "url"],
        ),
        (
            # without a call_id at all it is an incomplete item, kept (test_faithful_incomplete_items)
            {"items": [{"type": "function_call", "call_id": 5, "name": "f", "arguments": "{}"}]},
            ["items", 0, "call_id"],
        ),
        ({"items": [{"type": 5, "role": "user", "content": "x"}]}, ["items", 0, "type"]),
        (
            {"items": [{"type": "function_call_output", "call_id": "c", "output": 5}]},
            ["items", 0, "output"],
        ),
    ],
)
async def test_loc_and_msg_name_only_wire_fields(
    client: httpx.AsyncClient, sid: str, body: dict[str, Any], loc: list[Any]
) -> None:
    r = await client.post(f"/v1/sessions/{sid}/items?create=true", json=body)
    problem = assert_problem(r, 422)
    assert [e["loc"] for e in problem["errors"]] == [loc], problem
    for error in problem["errors"]:
        words = [str(part) for part in error["loc"]] + [error["msg"]]
        assert not [w for w in words for bad in INTERNAL if bad in w], error


async def test_a_context_body_error_names_wire_fields_only(
    client: httpx.AsyncClient, sid: str
) -> None:
    r = await client.post(
        f"/v1/sessions/{sid}/items?create=true",
        json={"items": [{"type": "message", "role": "user", "content": "x"}]},
    )
    assert r.status_code == 201
    r = await client.post(
        f"/v1/sessions/{sid}/context", json={"max_tokens": "lots", "recall": {"max_tokens": []}}
    )
    problem = assert_problem(r, 422)
    locs = [e["loc"] for e in problem["errors"]]
    assert ["body", "max_tokens"] in locs, locs
    for entry in locs:
        assert not [
            part for part in entry if isinstance(part, str) and ("[" in part or "(" in part)
        ]
