"""``format: "gemini"`` over HTTP (issue 35), on both backends: Gemini contents and the
system instruction are stored as sent and come back byte for byte from ``GET /items`` (every
page) and the unbudgeted context; the context in gemini validates against the google-genai
types and the turn rules from items of any format; bad input is a 422 problem that changes
nothing."""

from __future__ import annotations

import copy
import json
from typing import Any

import httpx

from tests.api.helpers import create
from tests.support.provider_validation import validate_gemini

SYSTEM = {"parts": [{"text": "You are a careful coding agent."}]}
CONTENTS: list[dict[str, Any]] = [
    {
        "role": "user",
        "parts": [
            {"text": "Which tests fail? Here is the screen:"},
            {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}},
        ],
    },
    {
        "role": "model",
        "parts": [
            {"text": "Let me run them.", "thought": True, "thoughtSignature": "c2lnMQ=="},
            {"functionCall": {"name": "run_tests", "args": {"path": "tests/"}}},
            {"functionCall": {"name": "run_tests", "args": {"path": "docs/"}}},
            {"function_call": {"id": "fc_9", "name": "read_file", "args": {"path": "a.py"}}},
        ],
    },
    {
        "role": "user",
        "parts": [
            {"function_response": {"id": "fc_9", "name": "read_file", "response": {"output": "x"}}},
            {"functionResponse": {"name": "run_tests", "response": {"output": "2 failed"}}},
            {"functionResponse": {"name": "run_tests", "response": {"error": "no tests"}}},
        ],
    },
    {
        "role": "model",
        "parts": [
            {"executableCode": {"language": "PYTHON", "code": "print(2 + 2)"}},
            {"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": "4"}},
            {"text": "Two tests fail in tests/."},
        ],
    },
    {"role": "user", "parts": [{"text": "Fix them."}], "pinned": True},
]


def _sent() -> list[dict[str, Any]]:
    return [{k: v for k, v in c.items() if k != "pinned"} for c in CONTENTS]


async def _append(client: httpx.AsyncClient, sid: str, **body: Any) -> httpx.Response:
    return await client.post(f"/v1/sessions/{sid}/items", json={"format": "gemini", **body})


async def test_gemini_contents_round_trip(client: httpx.AsyncClient, sid: str) -> None:
    await create(client, sid)
    r = await _append(
        client, sid, items=copy.deepcopy(CONTENTS), system_instruction=copy.deepcopy(SYSTEM)
    )
    assert r.status_code == 201, r.text
    stored = r.json()["items"]
    assert [i["format"] for i in stored] == ["gemini"] * len(stored)
    assert [i["type"] for i in stored] == [
        "message",  # the system instruction
        "message",
        "reasoning",
        "function_call",
        "function_call",
        "function_call",
        "function_call_output",
        "function_call_output",
        "function_call_output",
        "message",
        "message",
    ]
    assert stored[-1]["pinned"] is True
    # pages of 3 never end inside a content
    contents: list[Any] = []
    systems = []
    after = None
    while True:
        params: dict[str, Any] = {"format": "gemini", "limit": 3}
        if after is not None:
            params["after_seq"] = after
        page = (await client.get(f"/v1/sessions/{sid}/items", params=params)).json()
        contents += page["items"]
        if page.get("system_instruction") is not None:
            systems.append(page["system_instruction"])
        assert page["notes"] == []
        after = page["next_cursor"]
        if after is None:
            break
    assert json.dumps(contents) == json.dumps(_sent())
    assert systems == [SYSTEM]
    r = await client.get(f"/v1/sessions/{sid}/context", params={"format": "gemini"})
    body = r.json()
    assert json.dumps({k: body[k] for k in ("system_instruction", "contents")}) == json.dumps(
        {"system_instruction": SYSTEM, "contents": _sent()}
    )
    validate_gemini({k: body[k] for k in ("system_instruction", "contents")})
    assert body["report"]["dropped_items"] == 0


async def test_gemini_context_under_a_budget_stays_valid(
    client: httpx.AsyncClient, sid: str
) -> None:
    await create(client, sid)
    assert (await _append(client, sid, items=copy.deepcopy(CONTENTS))).status_code == 201
    for budget in (
        {"max_tokens": 60},
        {"max_items": 4},
        {"max_recent_tool_results": 0, "trim_old_reasoning": True},
    ):
        r = await client.post(f"/v1/sessions/{sid}/context", json={"format": "gemini", **budget})
        assert r.status_code == 200, r.text
        body = r.json()
        payload = {k: body[k] for k in ("system_instruction", "contents") if k in body}
        validate_gemini(payload)
        assert body["contents"][-1] == {"role": "user", "parts": [{"text": "Fix them."}]}


async def test_other_formats_project_into_gemini(client: httpx.AsyncClient, sid: str) -> None:
    await create(client, sid)
    chat = [
        {"role": "system", "content": "Be terse."},
        {"role": "user", "content": "List files."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "a.py"},
    ]
    r = await client.post(
        f"/v1/sessions/{sid}/items", json={"format": "openai-chat", "items": chat}
    )
    assert r.status_code == 201, r.text
    anthropic = [
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "hm", "signature": "sig"},
                {"type": "text", "text": "One file: a.py."},
            ],
        }
    ]
    r = await client.post(
        f"/v1/sessions/{sid}/items", json={"format": "anthropic", "items": anthropic}
    )
    assert r.status_code == 201, r.text
    body = (await client.get(f"/v1/sessions/{sid}/context", params={"format": "gemini"})).json()
    assert body["system_instruction"] == {"parts": [{"text": "Be terse."}]}
    assert body["contents"] == [
        {"role": "user", "parts": [{"text": "List files."}]},
        {"role": "model", "parts": [{"functionCall": {"id": "call_1", "name": "ls", "args": {}}}]},
        {
            "role": "user",
            "parts": [
                {
                    "functionResponse": {
                        "id": "call_1",
                        "name": "ls",
                        "response": {"output": "a.py"},
                    }
                }
            ],
        },
        {"role": "model", "parts": [{"text": "One file: a.py."}]},
    ]
    validate_gemini({k: body[k] for k in ("system_instruction", "contents")})
    assert any("reasoning" in note for note in body["report"]["notes"]), body["report"]["notes"]
    # and the gemini listing says what it left out
    page = (await client.get(f"/v1/sessions/{sid}/items", params={"format": "gemini"})).json()
    assert any("reasoning" in note for note in page["notes"]), page["notes"]


async def test_bad_gemini_input_is_a_problem_and_changes_nothing(
    client: httpx.AsyncClient, sid: str
) -> None:
    await create(client, sid)
    bad = [
        ({"items": [{"role": "assistant", "parts": [{"text": "x"}]}]}, ["items", 0, "role"]),
        (
            {"items": [{"role": "user", "parts": [{"functionCall": {"name": "f"}}]}]},
            ["items", 0, "parts", 0, "functionCall"],
        ),
        ({"items": [{"parts": [{"text": "x"}]}], "system": "x"}, ["system"]),
        ({"items": [{"parts": [{"text": "x"}]}], "system_instruction": 5}, ["system_instruction"]),
    ]
    for body, loc in bad:
        r = await _append(client, sid, **body)
        assert r.status_code == 422, r.text
        assert r.headers["content-type"].startswith("application/problem+json")
        assert [e["loc"] for e in r.json()["errors"]] == [loc], r.json()
    r = await client.post(
        "/v1/sessions/" + sid + "/items",
        json={"format": "openai-chat", "items": [{"role": "user", "content": "x"}],
              "system_instruction": "y"},
    )  # fmt: skip
    assert r.status_code == 422, r.text
    session = (await client.get(f"/v1/sessions/{sid}")).json()
    assert session["item_count"] == 0 and session["version"] == 1, session
