"""Wire formats: ingest tables, round trips (DESIGN §2 invariant 9), strict SDK validation."""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from typing import Any

import pytest
import typing_extensions as te
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openai.types.responses import ResponseReasoningItemParam

from app.domain.errors import InvalidInput
from app.domain.formats import ingest, left_out, payload_usage, render, render_listing
from app.domain.items import (
    FunctionCallItem,
    FunctionCallOutputItem,
    MessageItem,
    ReasoningItem,
    StoredItem,
    TextPart,
    body_to_dict,
)
from app.domain.projection import Budget, project_context
from tests.domain.strategies import FORMATS, Session, sessions, store
from tests.support.provider_validation import PayloadError, validate_payload

PROPS = settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
_WIRE_ONLY = {"seq", "tokens", "chars", "created_at", "format"}
FMT_R = "openai-responses"


def _full(session: Session, fmt: str) -> dict[str, Any]:
    return project_context(session.source(), Budget(), format=fmt).payload  # type: ignore[arg-type]


def _ingest_payload(fmt: str, payload: dict[str, Any]) -> list[Any]:
    if fmt == "canonical":
        return ingest(
            "canonical",
            [{k: v for k, v in i.items() if k not in _WIRE_ONLY} for i in payload["items"]],
        )
    if fmt == "openai-chat":
        return ingest("openai-chat", payload["messages"])
    if fmt == "openai-responses":
        return ingest("openai-responses", payload["input"])
    if fmt == "gemini":
        return ingest(
            "gemini", payload["contents"], system_instruction=payload.get("system_instruction")
        )
    return ingest("anthropic", payload["messages"], system=payload.get("system"))


@pytest.mark.parametrize("fmt", FORMATS)
@PROPS
@given(session=sessions())
def test_render_ingest_render_is_identity(fmt: str, session: Session) -> None:
    """Ingest what a projection sent, project again with no budget: the same payload back."""
    first = _full(session, fmt)
    again = _full(Session(items=store(_ingest_payload(fmt, first)), summary=None), fmt)
    if fmt == "canonical":
        strip = lambda p: [body_to_dict(x.body) for x in _ingest_payload("canonical", p)]  # noqa: E731
        assert strip(again) == strip(first)
    else:
        assert json.dumps(again) == json.dumps(first)


def _well_formed(items: list[StoredItem]) -> list[StoredItem]:
    """Without calls still waiting for output and reasoning left with no model output after."""
    answered = {it.body.call_id for it in items if isinstance(it.body, FunctionCallOutputItem)}
    items = [
        it
        for it in items
        if not (isinstance(it.body, FunctionCallItem) and it.body.call_id not in answered)
    ]
    out: list[StoredItem] = []
    for k, it in enumerate(items):
        if isinstance(it.body, ReasoningItem):
            nxt = next(
                (x.body for x in items[k + 1 :] if not isinstance(x.body, ReasoningItem)), None
            )
            if not (
                isinstance(nxt, FunctionCallItem)
                or (isinstance(nxt, MessageItem) and nxt.role == "assistant")
            ):
                continue
        out.append(it)
    return out


@pytest.mark.parametrize("fmt", ["canonical", "openai-chat", "openai-responses"])
@PROPS
@given(data=st.data())
def test_ingest_of_render_gives_the_items_back(fmt: str, data: st.DataObject) -> None:
    """Round trip: items written natively in a format come back unchanged from a projection."""
    session = data.draw(sessions(profile=fmt))  # type: ignore[arg-type]
    memory = _well_formed(session.items)
    back = [n.body for n in _ingest_payload(fmt, _full(Session(items=memory, summary=None), fmt))]
    assert back == [it.body for it in memory]


@pytest.mark.parametrize("fmt", ["canonical", "openai-chat", "openai-responses", "anthropic"])
def test_native_round_trip_examples(fmt: str) -> None:
    """Hand-written native conversations come back exactly."""
    native: dict[str, Any] = {
        "openai-chat": {
            "messages": [
                {"role": "system", "content": "Be brief."},
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "What is in a.py?"},
                        {
                            "type": "image_url",
                            "image_url": {"url": "https://x.test/a.png", "detail": "low"},
                        },
                        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                    ],
                },
                {
                    "role": "assistant",
                    "content": "Reading it.",
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "read", "arguments": '{"p": "a.py"}'},
                        },
                        {
                            "id": "call_2",
                            "type": "function",
                            "function": {"name": "read", "arguments": "{}"},
                        },
                    ],
                },
                {"role": "tool", "tool_call_id": "call_1", "content": "print(1)"},
                {"role": "tool", "tool_call_id": "call_2", "content": "x"},
                {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "id": "call_3",
                            "type": "function",
                            "function": {"name": "run", "arguments": ""},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "call_3", "content": "ok"},
                {"role": "assistant", "content": "It prints 1."},
                {"role": "developer", "content": [{"type": "text", "text": "Now be verbose."}]},
                {"role": "user", "content": "thanks"},
            ]
        },
        "openai-responses": {
            "input": [
                {"type": "message", "role": "developer", "content": "Be brief."},
                {
                    "type": "message",
                    "role": "user",
                    "content": [
                        {"type": "input_text", "text": "Look"},
                        {
                            "type": "input_image",
                            "image_url": "data:image/jpeg;base64,AAAA",
                            "detail": "auto",
                        },
                    ],
                },
                {
                    "type": "reasoning",
                    "id": "rs_1",
                    "summary": [{"type": "summary_text", "text": "think"}],
                    "encrypted_content": "gAAA",
                },
                {"type": "function_call", "call_id": "call_1", "name": "read", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "call_1", "output": "data"},
                {
                    "type": "reasoning",
                    "id": "rs_2",
                    "summary": [],
                    "content": [{"type": "reasoning_text", "text": "more"}],
                },
                {"type": "message", "role": "assistant", "content": "done"},
                {"type": "message", "role": "user", "content": "thanks"},
            ]
        },
        "anthropic": {
            "system": "Be brief.",
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "Look"},
                        {
                            "type": "image",
                            "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"},
                        },
                        {"type": "image", "source": {"type": "url", "url": "https://x.test/a.png"}},
                    ],
                },
                {
                    "role": "assistant",
                    "content": [
                        {"type": "thinking", "thinking": "hmm", "signature": "sig1"},
                        {"type": "text", "text": "Reading."},
                        {
                            "type": "tool_use",
                            "id": "toolu_1",
                            "name": "read",
                            "input": {"p": "a.py", "n": [1, 2]},
                        },
                        {"type": "tool_use", "id": "toolu_2", "name": "read", "input": {}},
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "print(1)"},
                        {
                            "type": "tool_result",
                            "tool_use_id": "toolu_2",
                            "content": "boom",
                            "is_error": True,
                        },
                        {"type": "text", "text": "and?"},
                    ],
                },
                {
                    "role": "assistant",
                    "content": [
                        {"type": "redacted_thinking", "data": "opaque"},
                        {"type": "text", "text": "It prints 1."},
                    ],
                },
                {"role": "user", "content": "thanks"},
            ],
        },
        "canonical": {
            "items": [
                {
                    "type": "message",
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "hi"},
                        {"type": "image", "url": "https://x.test/i.png", "detail": "high"},
                    ],
                },
                {"type": "reasoning", "summary": ["s"], "content": "c", "encrypted_content": "e"},
                {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "c1", "output": "o"},
            ]
        },
    }[fmt]
    payload = copy.deepcopy(native)
    news = _ingest_payload(fmt, payload)
    out = _full(Session(items=store(news), summary=None), fmt)
    if fmt == "canonical":
        assert [
            {k: v for k, v in i.items() if k in native["items"][n]}
            for n, i in enumerate(out["items"])
        ] == native["items"]
    else:
        assert out == native
        validate_payload(fmt, out)


def test_envelope_keys_in_provider_formats_go_on_the_first_item() -> None:
    """``pinned`` and ``metadata`` are envelope keys in every format; a provider's ``id`` is
    the provider's (kept in the record), never our item id."""
    news = ingest(
        "openai-chat",
        [
            {
                "role": "assistant",
                "content": "x",
                "tool_calls": [
                    {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                ],
                "id": "msg-1",
                "pinned": True,
                "metadata": {"k": 1},
            }
        ],
    )
    assert [(n.id, n.pinned, n.metadata) for n in news] == [
        (None, True, {"k": 1}),
        (None, False, {}),
    ]
    assert isinstance(news[1].body, FunctionCallItem)
    assert news[0].record is not None and news[0].record["head"]["id"] == "msg-1"
    assert "pinned" not in news[0].record["head"]


@pytest.mark.parametrize(
    ("fmt", "items", "system", "locs"),
    [
        ("openai-chat", [{"role": "user", "content": "x"}, 3], None, [["items", 1]]),
        ("openai-chat", [{"role": "wizard", "content": "x"}], None, [["items", 0, "role"]]),
        (
            "openai-chat",
            [{"role": "user", "content": [{"type": "text", "text": 1}]}],
            None,
            [["items", 0, "content", 0, "text"]],
        ),
        ("openai-chat", [{"role": "user", "content": "x"}], "sys", [["system"]]),
        # a message (it has a role) whose type is not a string; without a role, an object
        # is an opaque item (tests/api/test_any_object.py)
        (
            "openai-responses",
            [{"type": None, "role": "user", "content": "x"}],
            None,
            [["items", 0, "type"]],
        ),
        (
            "openai-responses",
            # without a call_id a call is kept as an incomplete item; a call_id not a string
            # is an error
            [{"type": "function_call", "call_id": 5, "name": "f", "arguments": "{}"}],
            None,
            [["items", 0, "call_id"]],
        ),
        (
            "anthropic",
            [{"role": "user", "content": [{"type": "tool_use", "id": "t", "name": "f"}]}],
            None,
            [["items", 0, "content", 0, "type"]],
        ),
        ("anthropic", [{"role": "tool", "content": "x"}], None, [["items", 0, "role"]]),
        (
            "anthropic",
            [{"role": "user", "content": "x", "metadata": []}],
            [{"text": "no type"}],
            [["items", "system", 0], ["items", 0, "metadata"]],
        ),
        (
            "canonical",
            [{"type": "message", "role": "user", "content": "x", "extra": 1}],
            None,
            [["items", 0, "extra"]],  # wire fields only: no union member's tag
        ),
        (
            "canonical",
            [{"type": "message", "role": "user", "content": [{"type": "text", "text": 5}]}],
            None,
            [["items", 0, "content", 0, "text"]],
        ),
        (
            "canonical",
            [{"type": "function_call", "call_id": [], "name": "f"}],
            None,
            [["items", 0, "call_id"]],
        ),
        ("canonical", [{"role": "user", "content": "hi"}], None, [["items", 0]]),
        # a role and a type that is no type: a message missing its type (without a role, an
        # object is an untyped opaque item)
        ("canonical", [{"type": 5, "role": "user", "content": "hi"}], None, [["items", 0, "type"]]),
    ],
)
def test_ingest_rejects_only_what_is_not_valid_in_the_format(
    fmt: str, items: list[Any], system: Any, locs: list[list[Any]]
) -> None:
    with pytest.raises(InvalidInput) as info:
        ingest(fmt, items, system=system)  # type: ignore[arg-type]
    assert [e["loc"] for e in info.value.errors or []] == locs


@pytest.mark.parametrize(
    ("fmt", "items"),
    [
        ("openai-chat", [{"role": "user", "content": "x", "name": "bob"}]),
        (
            "openai-chat",
            [
                {
                    "role": "user",
                    "content": [
                        {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}}
                    ],
                }
            ],
        ),
        (
            "openai-responses",
            [
                {
                    "type": "web_search_call",
                    "id": "ws_1",
                    "status": "completed",
                    "action": {"type": "search", "query": "q"},
                }
            ],
        ),
        (
            "openai-responses",
            [
                {
                    "type": "message",
                    "role": "assistant",
                    "id": "msg_1",
                    "phase": "final_answer",
                    "status": "completed",
                    "content": [
                        {
                            "type": "output_text",
                            "text": "hi",
                            "annotations": [
                                {
                                    "type": "url_citation",
                                    "url": "https://a.b",
                                    "title": "t",
                                    "start_index": 0,
                                    "end_index": 2,
                                }
                            ],
                            "logprobs": [],
                        }
                    ],
                }
            ],
        ),
        (
            "anthropic",
            [
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "document",
                            "source": {"type": "text", "media_type": "text/plain", "data": "doc"},
                            "cache_control": {"type": "ephemeral"},
                        }
                    ],
                }
            ],
        ),
        ("anthropic", [{"role": "system", "content": "x"}]),
    ],
)
def test_what_used_to_be_refused_is_kept_exactly(fmt: str, items: list[Any]) -> None:
    news = ingest(fmt, items)  # type: ignore[arg-type]
    assert [
        n.record["message"] if "message" in (n.record or {}) else n.record for n in news
    ] == items
    out = render(fmt, summary=None, items=store(news))  # type: ignore[arg-type]
    assert json.dumps(out.get("input", out.get("messages"))) == json.dumps(items)


def test_anthropic_ingest_maps_blocks() -> None:
    news = ingest(
        "anthropic",
        [
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "t", "signature": "s"},
                    {"type": "tool_use", "id": "u1", "name": "f", "input": {"é": 1}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "u1",
                        "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
                        "is_error": False,
                    }
                ],
            },
        ],
        system=[{"type": "text", "text": "S", "cache_control": {"type": "ephemeral"}}],
    )
    bodies = [n.body for n in news]
    assert bodies[0] == MessageItem(role="system", content=[{"type": "text", "text": "S"}])  # type: ignore[list-item]
    assert bodies[1] == ReasoningItem(content="t", signature="s")
    assert bodies[2] == FunctionCallItem(call_id="u1", name="f", arguments='{"é": 1}')
    assert bodies[3] == FunctionCallOutputItem(
        call_id="u1", output=[TextPart(text="a"), TextPart(text="b")], is_error=False
    )


def test_render_payload_shapes_and_summary_first() -> None:
    items = store(
        ingest(
            "openai-chat", [{"role": "system", "content": "S"}, {"role": "user", "content": "hi"}]
        )
    )
    assert render("openai-chat", summary="SUM", items=items) == {
        "messages": [
            {"role": "system", "content": "SUM"},
            {"role": "system", "content": "S"},
            {"role": "user", "content": "hi"},
        ]
    }
    assert render("anthropic", summary="SUM", items=items) == {
        "system": [{"type": "text", "text": "SUM"}, {"type": "text", "text": "S"}],
        "messages": [{"role": "user", "content": "hi"}],
    }
    assert render("openai-responses", summary=None, items=items)["input"][0] == {
        "type": "message",
        "role": "system",
        "content": "S",
    }
    assert render("canonical", summary="SUM", items=items)["items"][0] == {
        "type": "message",
        "role": "system",
        "content": "SUM",
    }


def test_chat_token_rule_is_the_cookbook_rule() -> None:
    payload = {
        "messages": [
            {"role": "user", "content": "hello world"},
            {
                "role": "assistant",
                "tool_calls": [
                    {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                ],
            },
        ]
    }
    tokens, chars = payload_usage("openai-chat", payload, tokenizer="o200k_base")
    assert tokens == 3 + 2 + 3 + 3 + 1 + 1  # 2 messages, "hello world", one call: "f", "{}"
    assert chars == len("hello world") + 1 + 2


@pytest.mark.parametrize(
    ("fmt", "payload"),
    [
        ("openai-chat", {"messages": [{"role": "user", "content": "x", "bogus": 1}]}),
        (
            "openai-chat",
            {
                "messages": [
                    {"role": "user", "content": [{"type": "text", "text": "x", "bogus": 1}]}
                ]
            },
        ),
        (
            "openai-chat",
            {
                "messages": [
                    {
                        "role": "assistant",
                        "tool_calls": [
                            {
                                "id": "c",
                                "type": "function",
                                "function": {"name": "f", "arguments": "{}"},
                            }
                        ],
                    }
                ]
            },
        ),
        ("openai-chat", {"messages": [{"role": "tool", "tool_call_id": "c", "content": "x"}]}),
        (
            "openai-responses",
            {
                "input": [
                    {
                        "type": "message",
                        "role": "assistant",
                        "content": [{"type": "input_text", "text": "x"}],
                    }
                ]
            },
        ),
        (
            "openai-responses",
            {"input": [{"type": "function_call_output", "call_id": "c", "output": "x"}]},
        ),
        (
            "openai-responses",
            {
                "input": [
                    {
                        "type": "reasoning",
                        "id": "r",
                        "summary": [{"type": "summary_text", "text": "x", "bogus": 1}],
                    },
                    {"type": "message", "role": "assistant", "content": "x"},
                ]
            },
        ),
        (
            "openai-responses",
            {"input": [{"type": "message", "role": "user", "content": "x", "bogus": 1}]},
        ),
        (
            "anthropic",
            {
                "messages": [
                    {"role": "user", "content": [{"type": "text", "text": "x", "bogus": 1}]}
                ]
            },
        ),
        (
            "anthropic",
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "image", "source": {"type": "url", "url": "u", "bogus": 1}}
                        ],
                    }
                ]
            },
        ),
        ("anthropic", {"messages": [{"role": "assistant", "content": "x"}]}),
        (
            "anthropic",
            {"messages": [{"role": "user", "content": "x"}, {"role": "user", "content": "y"}]},
        ),
        (
            "anthropic",
            {
                "messages": [
                    {"role": "user", "content": "x"},
                    {
                        "role": "assistant",
                        "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}],
                    },
                    {
                        "role": "user",
                        "content": [
                            {"type": "text", "text": "y"},
                            {"type": "tool_result", "tool_use_id": "t", "content": "r"},
                        ],
                    },
                ]
            },
        ),
        (
            "anthropic",
            {
                "system": [{"type": "text", "text": "s", "bogus": 1}],
                "messages": [{"role": "user", "content": "x"}],
            },
        ),
    ],
)
def test_provider_validators_reject_bad_payloads(fmt: str, payload: dict[str, Any]) -> None:
    with pytest.raises(PayloadError):
        validate_payload(fmt, payload)


# -- openai-responses reasoning: only under an id OpenAI issued ----------------------------------

_UNISSUED = "openai-responses: left out {} reasoning items without a reasoning id OpenAI issued"


def _agent_turn() -> list[StoredItem]:
    """Canonical memory: reasoning under our id (pinned), a call, reasoning under the client's
    ``rs_`` id, Anthropic thinking named ``rs_`` too, the answer and the next question."""
    return store(
        ingest(
            "canonical",
            [
                {"type": "message", "role": "user", "content": "look"},
                {"type": "reasoning", "summary": ["plan A"], "encrypted_content": "gAAA1"},
                {"type": "function_call", "call_id": "c1", "name": "read", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "c1", "output": "data"},
                {"type": "reasoning", "id": "rs_5", "summary": ["plan B"]},
                {"type": "message", "role": "assistant", "content": "first"},
                {"type": "reasoning", "id": "rs_7", "content": "hmm", "signature": "sig"},
                {"type": "message", "role": "assistant", "content": "done"},
                {"type": "message", "role": "user", "content": "thanks"},
            ],
        )
    )


def _reasoning_of(payload: dict[str, Any]) -> list[dict[str, Any]]:
    return [i for i in payload["input"] if i.get("type") == "reasoning"]


def test_openai_responses_sends_reasoning_only_with_an_id_openai_issued() -> None:
    """The Responses API requires a reasoning input item's ``id`` (the SDK's
    ``ResponseReasoningItemParam``) and refuses one it did not issue: reasoning under our
    ``itm_`` id is left out, with a note saying why, and nothing it precedes goes with it."""
    # (the SDK module's postponed annotations leave ``__required_keys__`` empty: read them)
    hints = te.get_type_hints(ResponseReasoningItemParam, include_extras=True)
    assert [k for k, t in hints.items() if te.get_origin(t) is te.Required] == [
        "id",
        "summary",
        "type",
    ]
    items = _agent_turn()
    assert items[1].id == "itm_2"
    result = project_context(Session(items=items, summary=None).source(), Budget(), format=FMT_R)
    payload, report = result.payload, result.report
    validate_payload(FMT_R, payload)
    assert _reasoning_of(payload) == [
        {"type": "reasoning", "id": "rs_5", "summary": [{"type": "summary_text", "text": "plan B"}]}
    ]
    assert "plan A" not in json.dumps(payload) and "itm_" not in json.dumps(payload)
    # the call and its output it preceded are sent (reasoning never strands its item)
    assert [i.get("call_id") for i in payload["input"][1:3]] == ["c1", "c1"]
    # honest report: 7 of 9 items, the two reasoning items left out named, each for its reason
    assert (report.projected_items, report.dropped_items) == (7, 2)
    assert report.dropped_ranges == [(2, 2), (7, 7)]
    assert (report.projected_tokens, report.projected_chars) == payload_usage(FMT_R, payload)
    assert _UNISSUED.format(
        1
    ) + " (rs_...): the Responses API requires one and refuses any other" in (report.notes)
    assert "openai-responses: left out 1 reasoning items it cannot represent" in report.notes
    # pinned, it is still left out (the format cannot carry it), and no limit is blamed
    pinned = [replace(items[1], pinned=True), *items[2:]]
    result = project_context(
        Session(items=[items[0], *pinned], summary=None).source(),
        Budget(max_tokens=10_000),
        format=FMT_R,
    )
    assert _reasoning_of(result.payload) == _reasoning_of(payload)
    assert result.report.limits_applied == [] and not any(
        "mandatory" in n for n in result.report.notes
    )


def test_openai_responses_trimmed_reasoning_keeps_its_openai_id_or_is_left_out() -> None:
    """Tier 2 empties reasoning but keeps its id: ``rs_`` reasoning is sent as
    ``{"type": "reasoning", "id": "rs_5", "summary": []}``; without an OpenAI id it is left out
    as untrimmed reasoning is."""
    items = _agent_turn()
    budget = Budget(trim_old_reasoning=True)
    result = project_context(Session(items=items, summary=None).source(), budget, format=FMT_R)
    assert _reasoning_of(result.payload) == [{"type": "reasoning", "id": "rs_5", "summary": []}]
    assert result.report.dropped_ranges == [(2, 2), (7, 7)]
    notes = result.report.notes
    assert "tier2: trimmed 1 reasoning items" in notes
    assert any(n.startswith(_UNISSUED.format(1)) for n in notes), notes
    validate_payload(FMT_R, result.payload)


def test_openai_responses_native_reasoning_is_sent_as_appended_and_trimmed_under_its_id() -> None:
    """Reasoning appended in openai-responses goes back as it was appended, ``id`` or none (the
    client's own item: the TypeScript AI SDK adapter appends reasoning without one); trimmed,
    this format writes it itself, under its record's ``id`` only: without one it is left out,
    never sent under our item id."""
    items = store(
        ingest(
            FMT_R,
            [
                {"type": "message", "role": "user", "content": "q"},
                {"type": "reasoning", "summary": [{"type": "summary_text", "text": "no id"}]},
                {"type": "message", "role": "assistant", "content": "a"},
                {"type": "reasoning", "id": "rs_x", "summary": [], "encrypted_content": "gAAA"},
                {"type": "message", "role": "assistant", "content": "b"},
                {"type": "message", "role": "user", "content": "next"},
            ],
        )
    )
    source = Session(items=items, summary=None).source()
    result = project_context(source, Budget(), format=FMT_R)
    assert result.payload["input"] == [it.record for it in items]
    assert result.report.notes == [] and result.report.dropped_ranges == []
    assert render_listing(FMT_R, items)["input"] == [it.record for it in items]
    assert left_out(FMT_R, items) == []

    trimmed = project_context(source, Budget(trim_old_reasoning=True), format=FMT_R)
    assert _reasoning_of(trimmed.payload) == [{"type": "reasoning", "id": "rs_x", "summary": []}]
    assert "itm_" not in json.dumps(trimmed.payload)
    assert trimmed.report.dropped_ranges == [(2, 2)]
    assert (trimmed.report.projected_items, trimmed.report.dropped_items) == (5, 1)
    assert "tier2: trimmed 1 reasoning items" in trimmed.report.notes
    assert any(n.startswith(_UNISSUED.format(1)) for n in trimmed.report.notes)
    usage = payload_usage(FMT_R, trimmed.payload)
    assert (trimmed.report.projected_tokens, trimmed.report.projected_chars) == usage
    validate_payload(FMT_R, trimmed.payload)


def test_empty_texts_from_other_formats_never_reach_anthropic() -> None:
    """The Messages API refuses empty content and empty text blocks. A message with no text
    at all from another format (Chat's ``""`` reply, a Responses ``output_text`` of ``""``) is
    left out with a note; an empty text part beside others is dropped; the prompt is valid."""
    from app.domain.projection import ContextSource

    news = [
        *ingest("canonical", [{"type": "message", "role": "user", "content": "hi"}]),
        *ingest(
            "openai-responses",
            [
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": ""}],
                },
                {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "c1", "output": "ok"},
            ],
        ),  # fmt: skip
        *ingest(
            "canonical",
            [
                {"type": "message", "role": "user", "content": [{"type": "text", "text": ""}]},
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "text", "text": ""}, {"type": "text", "text": "done"}],
                },
            ],
        ),  # fmt: skip
        *ingest("openai-chat", [{"role": "user", "content": "next"}]),
    ]
    items = store(news)
    source = ContextSource(
        summary=None,
        items=items,
        total_items=len(items),
        total_tokens=sum(i.tokens for i in items),
        total_chars=sum(i.chars for i in items),
        window_start_seq=None,
        unloaded_runs=(),
    )
    projected = project_context(source, Budget(), format="anthropic")
    validate_payload("anthropic", projected.payload)
    assert projected.report.projected_items == len(items) - 2
    assert any("left out 2" in note for note in projected.report.notes), projected.report.notes
    assert projected.payload["messages"][-2] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "done"}],
    }
