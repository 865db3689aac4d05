"""Faithful items (issue 13) as properties of the projection, beside the DESIGN §2 invariants of
``test_projection_properties`` (which run over the same faithful sessions):

- invariant 9, round trip: a well-formed session written wholly in a provider format, opaque
  items, other parts and every extra field included, comes back byte for byte from a
  projection in that format with no budget (and from a listing), and is a valid request;
- the pair families the generator and the test side use are the SDK's;
- known defects, each as the smallest session that shows it (see the flags in
  ``strategies`` and ``test_projection_properties`` that keep the property tests clear of
  them until they are fixed).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.domain.formats import ingest, render_listing
from app.domain.items import NewItem
from app.domain.projection import Budget, ProjectedContext, project_context
from tests.domain.strategies import OPAQUE_FAMILIES, Session, sessions, store
from tests.domain.test_projection_properties import PROPS
from tests.support.provider_validation import (
    RESPONSES_PAIRS,
    validate_payload_faithful,
)

PROVIDER_FORMATS = ["openai-responses", "anthropic", "openai-chat"]


def _project(news: list[NewItem], fmt: str, budget: Budget | None = None) -> ProjectedContext:
    session = Session(items=store(news), summary=None)
    return project_context(session.source(), budget or Budget(), format=fmt)  # type: ignore[arg-type]


# -- invariant 9: round trip ------------------------------------------------------------------


@pytest.mark.parametrize("fmt", PROVIDER_FORMATS)
@PROPS
@given(data=st.data())
def test_native_sessions_come_back_byte_for_byte(fmt: str, data: st.DataObject) -> None:
    """Ingest a well-formed conversation in F, project it in F with no budget: the same
    payload, byte for byte (key order included); the same from a listing of working memory;
    and the conversation is a request the provider's SDK accepts."""
    session: Session = data.draw(sessions(profile=fmt, faithful=True))  # type: ignore[arg-type]
    native = session.native
    assert native is not None and session.native_format == fmt
    validate_payload_faithful(fmt, native)  # the generator writes valid requests
    assert all(it.format == fmt and it.record is not None for it in session.items)

    full = project_context(session.source(), Budget(), format=fmt)  # type: ignore[arg-type]
    assert json.dumps(full.payload, ensure_ascii=False) == json.dumps(native, ensure_ascii=False)
    assert full.report.notes == []  # nothing left out, dropped or turned into text
    listing = render_listing(fmt, session.items)  # type: ignore[arg-type]
    assert json.dumps(listing, ensure_ascii=False) == json.dumps(native, ensure_ascii=False)

    # a budget that fits everything, and options that change nothing in a well-formed
    # conversation, give the same bytes too
    roomy = Budget(
        max_items=full.report.projected_items or None,
        max_tokens=max(1, full.report.projected_tokens),
        max_chars=full.report.projected_chars or None,
        dangling_tool_calls="placeholder",
        pinned_prefix_items=1,
    )
    again = project_context(session.source(), roomy, format=fmt)  # type: ignore[arg-type]
    assert json.dumps(again.payload, ensure_ascii=False) == json.dumps(native, ensure_ascii=False)
    assert again.report.limits_applied == []

    # and what was sent, ingested again, is stored the same way
    if fmt == "anthropic":
        news = ingest(fmt, native["messages"], system=native.get("system"))
    else:
        news = ingest(fmt, native["input" if fmt == "openai-responses" else "messages"])  # type: ignore[arg-type]
    assert [(n.record, n.body) for n in news] == [(it.record, it.body) for it in session.items]


def test_pair_families_are_the_sdks() -> None:
    """The pairing table of the generator and the test side is the SDK's (provider_validation,
    read off the SDK types), function calls aside."""
    derived = {
        out: (call, out_key, call_key) for call, out, call_key, out_key in OPAQUE_FAMILIES.values()
    }
    assert derived == {k: v for k, v in RESPONSES_PAIRS.items() if k != "function_call_output"}


# -- known defects: the smallest sessions that show them -------------------------------------

_USER = {"type": "message", "role": "user", "content": "look it up"}
_WEB_SEARCH = {
    "type": "web_search_call",
    "id": "ws_1",
    "status": "completed",
    "action": {"type": "search", "query": "postgres 17 release date"},
}
_MCP_REQUEST = {
    "type": "mcp_approval_request",
    "id": "mcpr_1",
    "server_label": "stripe",
    "name": "refund",
    "arguments": "{}",
}
_MCP_RESPONSE = {"type": "mcp_approval_response", "approval_request_id": "mcpr_1", "approve": True}
_LOCAL_SHELL = {
    "type": "local_shell_call",
    "id": "lsh_1",
    "call_id": "call_1",
    "status": "completed",
    "action": {"type": "exec", "command": ["ls"], "env": {}},
}
_LOCAL_SHELL_OUTPUT = {"type": "local_shell_call_output", "id": "call_1", "output": "a.py"}


@pytest.mark.parametrize(
    "items",
    [
        pytest.param([_USER, _WEB_SEARCH], id="web_search_call"),
        pytest.param([_USER, _MCP_REQUEST, _MCP_RESPONSE], id="mcp_approval"),
        pytest.param([_USER, _LOCAL_SHELL, _LOCAL_SHELL_OUTPUT], id="local_shell"),
    ],
)
def test_canonical_opaque_items_keep_their_provider_id(items: list[dict[str, Any]]) -> None:
    """Regression: A Responses item written in the canonical
    format loses its ``id`` to the envelope (the service's item id), so in openai-responses it
    is not "as it was sent": a web_search_call without its required ``id`` fails the SDK type,
    and the pairs keyed by ``id`` fall apart (an mcp_approval_request is sent without the
    response that answers it, which is dropped as an orphan; a local_shell_call is dropped as
    dangling and its output sent alone).

    Expected: the openai-responses payload is the items as sent, and validates.
    """
    result = _project(ingest("canonical", items), "openai-responses")
    assert result.payload["input"][1:] == items[1:], result.report.notes
    validate_payload_faithful("openai-responses", result.payload)


def _anthropic(*messages: dict[str, Any]) -> list[NewItem]:
    return ingest("anthropic", list(messages))


@pytest.mark.parametrize(
    ("news", "budget"),
    [
        pytest.param(
            _anthropic(
                {"role": "user", "content": "first"},
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}],
                },
                {"role": "user", "content": "second"},
            ),
            Budget(),
            id="dropped-dangling-call",
        ),
        pytest.param(
            _anthropic(
                {"role": "user", "content": "pinned", "pinned": True},
                {"role": "assistant", "content": "a1"},
                {"role": "user", "content": "u2"},
                {"role": "assistant", "content": "a2"},
                {"role": "user", "content": "newest"},
            ),
            Budget(max_items=2),
            id="pinned-before-tail",
        ),
        pytest.param(
            _anthropic(
                {"role": "user", "content": "q"},
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}],
                },
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "r"}],
                },
            )
            + ingest("canonical", [{"type": "message", "role": "user", "content": "next turn"}]),
            Budget(),
            id="next-turn-in-another-format",
        ),
    ],
)
def test_anthropic_native_messages_still_alternate(news: list[NewItem], budget: Budget) -> None:
    """Regression: An Anthropic message
    stored whole is never merged with a neighbour, so when the projection leaves an item out
    between two messages of one role, keeps a pinned message before the tail, or follows a
    native message with an item from another format, the payload has two user messages in a
    row (DESIGN §2: in anthropic, messages alternate).

    Expected: roles alternate, every kept text still there. Actual: ``[user, user]``.
    """
    result = _project(news, "anthropic", budget)
    roles = [m["role"] for m in result.payload["messages"]]
    assert all(a != b for a, b in zip(roles, roles[1:], strict=False)), result.payload
    validate_payload_faithful("anthropic", result.payload)


_LEGACY = [
    {"role": "user", "content": "weather in Lyon?"},
    {
        "role": "assistant",
        "content": None,
        "function_call": {"name": "get_weather", "arguments": "{}"},
    },
    {"role": "function", "name": "get_weather", "content": "sunny"},
    {"role": "assistant", "content": "It is sunny."},
]


def test_chat_function_call_keeps_a_function_answer() -> None:
    """A deprecated Chat ``function_call`` whose answer Tier 1 clears is still answered by a
    ``function`` message (``{"role": "tool", "tool_call_id": "fn_..."}`` would answer no
    ``tool_calls`` and leave the call unanswered: Chat Completions rejects that)."""
    result = _project(
        ingest("openai-chat", _LEGACY), "openai-chat", Budget(max_recent_tool_results=0)
    )
    answer = result.payload["messages"][2]
    assert answer["role"] == "function" and answer["name"] == "get_weather", answer
    assert answer["content"].startswith("[tool result cleared")
    validate_payload_faithful("openai-chat", result.payload)


def test_a_dangling_chat_function_call_is_dropped_even_with_placeholders() -> None:
    """A placeholder answer is a tool message, which cannot answer a deprecated
    ``function_call``: such a call still waiting for its answer is left out in both modes."""
    result = _project(
        ingest("openai-chat", _LEGACY[:2]), "openai-chat", Budget(dangling_tool_calls="placeholder")
    )
    assert [m["role"] for m in result.payload["messages"]] == ["user"]
    validate_payload_faithful("openai-chat", result.payload)


def _chat_calls(*kinds: str) -> list[dict[str, Any]]:
    return [
        {"id": f"call_{k}", "type": "function", "function": {"name": f"f{k}", "arguments": "{}"}}
        if kind == "function"
        else {"id": f"call_{k}", "type": "custom", "custom": {"name": f"f{k}", "input": "x"}}
        for k, kind in enumerate(kinds, start=1)
    ]


def test_chat_message_keeps_its_other_calls() -> None:
    """Regression: An assistant message with content and three
    tool calls, the middle one never answered: the projection drops that call (right), but
    sends the third in a second assistant message, so the first message's ``tool_calls`` are
    not answered by the tool messages right after it. Chat Completions rejects that.

    Expected: ``[user, assistant(content, tool_calls [call_1, call_3]), tool, tool]``.
    """
    calls = _chat_calls("function", "function", "function")
    messages = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "Checking.", "tool_calls": calls},
        {"role": "tool", "tool_call_id": "call_1", "content": "r1"},
        {"role": "tool", "tool_call_id": "call_3", "content": "r3"},
    ]
    result = _project(ingest("openai-chat", messages), "openai-chat")
    assert result.payload["messages"] == [
        messages[0],
        {"role": "assistant", "content": "Checking.", "tool_calls": [calls[0], calls[2]]},
        messages[2],
        messages[3],
    ]


def test_chat_custom_call_stays_custom() -> None:
    """Regression: A Chat ``custom`` tool call that is not rendered from its stored message (here the
    call before it in the same message was never answered and is left out) is sent as a
    ``function`` call whose ``arguments`` are the custom input: a different call, to a tool
    that is not a function (the input need not even be JSON).

    Expected: the call as it was sent, ``{"type": "custom", "custom": {...}}``.
    """
    calls = _chat_calls("function", "custom")
    messages = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": calls},
        {"role": "tool", "tool_call_id": "call_2", "content": "r2"},
    ]
    result = _project(ingest("openai-chat", messages), "openai-chat")
    assert result.payload["messages"][1]["tool_calls"] == [calls[1]]


_THINK = {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "plan"}]}
_TOOLS = {
    "type": "additional_tools",
    "role": "developer",
    "tools": [
        {
            "type": "function",
            "name": "query_db",
            "description": "Run a query.",
            "parameters": {"type": "object", "properties": {}},
            "strict": True,
        }
    ],
}


def test_reasoning_before_an_item_that_is_not_model_output_is_not_sent() -> None:
    """Regression: Every standalone opaque item counts as model output for reasoning (``_HOSTED``),
    also those a client writes (``additional_tools``, ``configuration_update``,
    ``compaction_trigger``), so reasoning followed by one is sent, and the Responses payload
    has reasoning that is not followed by model output (DESIGN §2: reasoning that precedes
    anything but model output is never rendered; the faithful validator rejects it).

    Expected: the reasoning is dropped with the ``precede no model output`` note.
    """
    items = [
        {"role": "user", "content": "hi"},
        _THINK,
        _TOOLS,
        {"type": "message", "role": "assistant", "content": "ok"},
    ]
    result = _project(ingest("openai-responses", items), "openai-responses")
    assert _THINK not in result.payload["input"]
    assert any("precede no model output" in n for n in result.report.notes), result.report.notes
    validate_payload_faithful("openai-responses", result.payload)


def test_trimmed_native_reasoning_keeps_its_provider_id() -> None:
    """Regression: Tier 2 (``trim_old_reasoning``) keeps a reasoning item's "type and id" (DESIGN §2),
    but a reasoning item ingested in openai-responses is sent with the service's item id
    (``itm_...``) instead of its own (``rs_1``): an id the provider never issued, which it
    cannot resolve (the trimmed item has no content left to stand on its own).

    Expected: ``{"type": "reasoning", "id": "rs_1", "summary": []}``.
    """
    items = [
        {"role": "user", "content": "hi"},
        _THINK,
        {"type": "message", "role": "assistant", "content": "ok"},
        {"role": "user", "content": "more"},
    ]
    result = _project(
        ingest("openai-responses", items), "openai-responses", Budget(trim_old_reasoning=True)
    )
    assert result.payload["input"][1] == {"type": "reasoning", "id": "rs_1", "summary": []}
