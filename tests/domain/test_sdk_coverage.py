"""The provider corpus (tests/support/sdk_examples.py) covers the installed SDKs' unions, and every
example is a valid request value for its SDK. No server: these are the ground truth the
faithful-storage API tests (tests/api/test_faithful_items.py) stand on.

A new SDK release that adds a member to one of these unions fails here (and the corpus module
refuses to import) until the member has an example and the service has been checked against it.
"""

from __future__ import annotations

import base64
import copy
import typing
from typing import Any

import anthropic.types as at
import openai.types.chat as oc
import pytest
from google.genai import types as gt
from openai.types.responses.response_input_item_param import ResponseInputItemParam

from app.domain.formats.gemini import DATA_FIELDS
from tests.support import provider_validation as pv
from tests.support import sdk_examples as se


def _ids(corpus: list[tuple[Any, dict[str, Any]]]) -> list[str]:
    return [f"{k}-{member.__name__}" for k, (member, _) in enumerate(corpus)]


# -- the member lists are the SDKs' ------------------------------------------------------------


def test_member_lists_are_derived_from_the_unions() -> None:
    assert [m.__name__ for m in pv.RESPONSES_MEMBERS] == [
        m.__name__ for m in typing.get_args(ResponseInputItemParam)
    ]
    assert len(se.RESPONSES_TYPE_NAMES) >= 33
    assert all(se.RESPONSES_TYPE_NAMES.values()), "every Responses member names its type"
    # Every Responses ``type`` literal is covered (several members share ``message``).
    literals = {lit for lits in se.RESPONSES_TYPE_NAMES.values() for lit in lits}
    seen = {
        item.get("type", "message" if "role" in item else "item_reference")
        for item in se.RESPONSES_ITEMS
    }
    assert literals == seen, literals ^ seen

    assert {"UserMessageParam", "AssistantMessageParam"} <= set(se.ANTHROPIC_MESSAGE_NAMES)
    assert len(se.ANTHROPIC_BLOCK_NAMES) >= 16
    blocks = {lit for lits in se.ANTHROPIC_BLOCK_NAMES.values() for lit in lits}
    assert {
        "document",
        "search_result",
        "server_tool_use",
        "web_search_tool_result",
        "container_upload",
    } <= blocks
    assert len(blocks) == len(se.ANTHROPIC_BLOCK_NAMES), "one block type per block param"

    assert len(se.CHAT_ROLE_NAMES) == len(typing.get_args(oc.ChatCompletionMessageParam)) >= 6
    assert {lits[0] for lits in se.CHAT_ROLE_NAMES.values()} >= {
        "developer",
        "system",
        "user",
        "assistant",
        "tool",
        "function",
    }

    # Gemini's union is ``Part``: one data field (the kinds the format knows) or metadata
    assert se.GEMINI_PART_FIELDS == tuple(gt.Part.model_fields)
    assert set(DATA_FIELDS) < set(se.GEMINI_PART_FIELDS)


def test_every_union_member_has_an_example() -> None:
    assert se.missing_examples() == {
        "openai-responses": [],
        "openai-chat": [],
        "anthropic": [],
        "gemini": [],
    }
    se.check_coverage()
    # each data field the format knows, in both spellings somewhere
    for field in DATA_FIELDS:
        camel = field.split("_")[0] + "".join(w.title() for w in field.split("_")[1:])
        spelled = {k for c in se.GEMINI_EXAMPLES[field] for p in c["parts"] for k in p}
        assert camel in spelled or field in spelled, field
    assert {"functionCall", "function_call", "functionResponse", "function_response"} <= {
        k for c in se.GEMINI_CONTENTS for p in c["parts"] for k in p
    }


def test_a_member_without_an_example_fails_loudly(monkeypatch: pytest.MonkeyPatch) -> None:
    for table in (se.RESPONSES_TYPE_NAMES, se.CHAT_ROLE_NAMES, se.ANTHROPIC_BLOCK_NAMES):
        with monkeypatch.context() as m:
            m.setitem(table, "FutureNewThingParam", ("future_new_thing",))
            with pytest.raises(se.MissingExample, match="FutureNewThingParam"):
                se.check_coverage()
    with monkeypatch.context() as m:  # a field a new google-genai adds to ``Part``
        m.setattr(se, "GEMINI_PART_FIELDS", (*se.GEMINI_PART_FIELDS, "future_new_thing"))
        with pytest.raises(se.MissingExample, match="future_new_thing"):
            se.check_coverage()


@pytest.mark.parametrize(
    ("nested", "corpus", "discriminator"),
    [
        (se.NESTED_RESPONSES, se.RESPONSES_ITEMS, "type"),
        (se.NESTED_ANTHROPIC, se.ANTHROPIC_EXCHANGES + se.ANTHROPIC_SYSTEM_ROLE_EXCHANGES, "type"),
        (se.NESTED_CHAT, se.CHAT_MESSAGES, "role"),
    ],
    ids=["openai-responses", "anthropic", "openai-chat"],
)
def test_every_member_of_the_nested_unions_appears(
    nested: Any, corpus: Any, discriminator: str
) -> None:
    """Content parts, annotations, actions, block contents...: each member somewhere."""
    assert se.nested_missing(nested, corpus, discriminator=discriminator) == {}


def test_every_field_of_the_nested_gemini_types_appears() -> None:
    """functionCall, functionResponse (and its media parts), inlineData, ...: each field
    somewhere (a field a new SDK adds fails here)."""
    assert se.gemini_nested_missing() == {}
    without = copy.deepcopy(se.GEMINI_CONTENTS)
    for content in without:
        for part in content["parts"]:
            call = part.get("functionCall") or part.get("function_call") or {}
            call.pop("partialArgs", None)
    assert se.gemini_nested_missing(without) == {"functionCall fields": ["partial_args"]}


def test_nested_coverage_notices_a_missing_part() -> None:
    without_refusal = [
        {**item, "content": [p for p in item["content"] if p.get("type") != "refusal"]}
        if item.get("role") == "assistant" and isinstance(item.get("content"), list)
        else item
        for item in se.RESPONSES_ITEMS
    ]
    assert se.nested_missing(se.NESTED_RESPONSES, without_refusal) == {
        "output message parts": ["refusal"]
    }


# -- every example is valid for its SDK --------------------------------------------------------


@pytest.mark.parametrize(("member", "item"), se.RESPONSES_CORPUS, ids=_ids(se.RESPONSES_CORPUS))
def test_responses_example_validates(member: Any, item: dict[str, Any]) -> None:
    se.validate_example("openai-responses", member, item, where=member.__name__)


@pytest.mark.parametrize(("member", "item"), se.CHAT_CORPUS, ids=_ids(se.CHAT_CORPUS))
def test_chat_example_validates(member: Any, item: dict[str, Any]) -> None:
    se.validate_example("openai-chat", member, item, where=member.__name__)


@pytest.mark.parametrize(
    "content",
    [se.GEMINI_SYSTEM_INSTRUCTION, *se.GEMINI_CONTENTS],
    ids=["system_instruction", *(f"{k}-{c.get('role')}" for k, c in enumerate(se.GEMINI_CONTENTS))],
)
def test_gemini_example_validates(content: dict[str, Any]) -> None:
    se.validate_gemini_example(content, where=str(content.get("role")))
    pv.validate_item_faithful("gemini", content)


def test_gemini_example_validation_refuses_what_the_sdk_would_not_write() -> None:
    content = copy.deepcopy(se.GEMINI_CONTENTS[0])
    content["parts"][1]["inlineData"]["colour"] = "red"  # an unknown key
    with pytest.raises(pv.PayloadError):
        se.validate_gemini_example(content, where="extra key")
    content = copy.deepcopy(se.GEMINI_CONTENTS[0])
    content["parts"][0]["function_call"] = None  # a null the SDK would leave out
    with pytest.raises(pv.PayloadError):
        se.validate_gemini_example(content, where="null")


ANTHROPIC_MESSAGES = se.anthropic_messages(
    se.ANTHROPIC_EXCHANGES + se.ANTHROPIC_SYSTEM_ROLE_EXCHANGES
)


@pytest.mark.parametrize(
    "message",
    ANTHROPIC_MESSAGES,
    ids=[f"{k}-{m['role']}" for k, m in enumerate(ANTHROPIC_MESSAGES)],
)
def test_anthropic_example_validates(message: dict[str, Any]) -> None:
    member = {
        "user": at.UserMessageParam,
        "assistant": at.AssistantMessageParam,
        "system": at.SystemMessageParam,
    }
    se.validate_example("anthropic", member[message["role"]], message, where=message["role"])
    for block in message["content"] if isinstance(message["content"], list) else []:
        assert (
            pv.strict_validate_eager(pv.ANTHROPIC_BLOCK_PARAMS[block["type"]], block, where="block")
            == block
        )


def test_the_transcripts_are_valid_requests() -> None:
    """In the order stored, each corpus is a request its provider accepts."""
    pv.validate_payload_faithful("openai-responses", {"input": se.RESPONSES_ITEMS})
    pv.validate_payload_faithful("openai-chat", {"messages": se.CHAT_MESSAGES})
    pv.validate_payload_faithful(
        "anthropic", {"system": se.ANTHROPIC_SYSTEM, "messages": se.anthropic_messages()}
    )
    pv.validate_payload_faithful(
        "anthropic",
        {
            "system": se.ANTHROPIC_SYSTEM_STRING,
            "messages": se.anthropic_messages(se.ANTHROPIC_SYSTEM_ROLE_EXCHANGES),
        },
    )
    for exchange in se.ANTHROPIC_EXCHANGES:  # each exchange stands alone too
        pv.validate_anthropic_faithful({"messages": exchange})
    pv.validate_payload_faithful(
        "gemini",
        {"system_instruction": se.GEMINI_SYSTEM_INSTRUCTION, "contents": se.GEMINI_CONTENTS},
    )


def test_the_big_screenshot_is_a_real_png_of_about_1_2_mb() -> None:
    url = se.BIG_SCREENSHOT_URL
    assert url.startswith("data:image/png;base64,")
    assert 1_150_000 < len(url) < 1_400_000
    png = base64.b64decode(url.split(",", 1)[1], validate=True)
    assert (
        png[:8] == b"\x89PNG\r\n\x1a\n"
        and png[12:16] == b"IHDR"
        and png.endswith(b"IEND\xaeB`\x82")
    )
    outputs = [i for i in se.RESPONSES_ITEMS if i.get("type") == "computer_call_output"]
    assert any(o["output"].get("image_url") == url for o in outputs)


# -- the pairing tables follow the SDKs --------------------------------------------------------


def test_every_responses_output_type_has_a_pairing_rule() -> None:
    literals = {lit for lits in se.RESPONSES_TYPE_NAMES.values() for lit in lits}
    outputs = {t for t in literals if t.endswith(("_output", "_response"))}
    assert outputs == set(pv.RESPONSES_PAIRS), outputs ^ set(pv.RESPONSES_PAIRS)
    for output, (call, out_key, call_key) in pv.RESPONSES_PAIRS.items():
        assert call in literals
        out_member = next(m for m in pv.RESPONSES_MEMBERS if output in pv.literal_values(m))
        call_member = next(m for m in pv.RESPONSES_MEMBERS if call in pv.literal_values(m))
        assert out_key in typing.get_type_hints(out_member), (output, out_key)
        assert call_key in typing.get_type_hints(call_member), (call, call_key)


def test_every_server_tool_has_its_result_block() -> None:
    names = set(pv.literal_values(at.ServerToolUseBlockParam, "name"))
    assert names == set(pv.ANTHROPIC_SERVER_TOOL_RESULTS), names ^ set(
        pv.ANTHROPIC_SERVER_TOOL_RESULTS
    )
    assert set(pv.ANTHROPIC_SERVER_TOOL_RESULTS.values()) == pv.ANTHROPIC_SERVER_RESULTS
    for result in pv.ANTHROPIC_SERVER_RESULTS:
        assert "tool_use_id" in typing.get_type_hints(pv.ANTHROPIC_BLOCK_PARAMS[result])


# -- the validators bite -----------------------------------------------------------------------


def _responses_with(change: Any) -> list[dict[str, Any]]:
    items = copy.deepcopy(se.RESPONSES_ITEMS)
    change(items)
    return items


def _index(items: list[dict[str, Any]], kind: str) -> int:
    return next(k for k, i in enumerate(items) if i.get("type") == kind)


RESPONSES_BROKEN = {
    "nested extra key": lambda items: items[_index(items, "function_call_output") + 2]["output"][
        1
    ].update(colour="red"),
    "unknown item type": lambda items: items.insert(3, {"type": "hologram_call", "id": "h1"}),
    "missing required field": lambda items: items[_index(items, "reasoning")].pop("summary"),
    "lax coercion is not enough": lambda items: items[_index(items, "shell_call_output")]["output"][
        0
    ]["outcome"].update(exit_code="zero"),
    "output without its call": lambda items: items.pop(_index(items, "shell_call")),
    "call without its output": lambda items: items.pop(_index(items, "computer_call_output")),
    "local shell output naming the call's item id": lambda items: items[
        _index(items, "local_shell_call_output")
    ].update(id="lsh_68a1f0f2aebd8190"),
    "approval response to no request": lambda items: items[
        _index(items, "mcp_approval_response")
    ].update(approval_request_id="mcpr_nope"),
    "reasoning followed by a user message": lambda items: items.insert(
        _index(items, "reasoning") + 1, {"role": "user", "content": "hi"}
    ),
    "compaction_trigger not last": lambda items: items.append(
        {"role": "user", "content": "one more"}
    ),
    "a call id twice": lambda items: items.insert(
        _index(items, "custom_tool_call"), copy.deepcopy(items[_index(items, "custom_tool_call")])
    ),
}


@pytest.mark.parametrize("change", RESPONSES_BROKEN.values(), ids=RESPONSES_BROKEN.keys())
def test_responses_validator_refuses(change: Any) -> None:
    with pytest.raises(pv.PayloadError):
        pv.validate_openai_responses_faithful(_responses_with(change))


def _anthropic_with(change: Any) -> dict[str, Any]:
    payload = {
        "system": copy.deepcopy(se.ANTHROPIC_SYSTEM),
        "messages": copy.deepcopy(se.anthropic_messages()),
    }
    change(payload)
    return payload


def _block(payload: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(
        b
        for m in payload["messages"]
        if isinstance(m["content"], list)
        for b in m["content"]
        if b["type"] == kind
    )


def _rename_tool_use(payload: dict[str, Any], new_id: str) -> None:
    use = _block(payload, "tool_use")
    result = next(
        b
        for m in payload["messages"]
        if isinstance(m["content"], list)
        for b in m["content"]
        if b["type"] == "tool_result" and b["tool_use_id"] == use["id"]
    )
    use["id"] = result["tool_use_id"] = new_id


def _tool_result_parts(payload: dict[str, Any]) -> list[dict[str, Any]]:
    return next(
        b["content"]
        for m in payload["messages"]
        if isinstance(m["content"], list)
        for b in m["content"]
        if b["type"] == "tool_result" and isinstance(b.get("content"), list)
    )


def _server_result_error(payload: dict[str, Any]) -> dict[str, Any]:
    return next(
        b
        for m in payload["messages"]
        if isinstance(m["content"], list)
        for b in m["content"]
        if b["type"] == "web_search_tool_result" and isinstance(b["content"], dict)
    )


ANTHROPIC_BROKEN = {
    "bad error code in a server result": lambda p: _server_result_error(p)["content"].update(
        error_code="nope"
    ),
    "extra key in a tool_result image": lambda p: _tool_result_parts(p)[1].update(
        alt="a dashboard"
    ),
    "result type not the server tool's": lambda p: _block(p, "server_tool_use").update(
        name="web_fetch"
    ),
    "server result answering nothing": lambda p: _block(p, "code_execution_tool_result").update(
        tool_use_id="srvtoolu_nope"
    ),
    "tool_result in an assistant turn": lambda p: p["messages"][1]["content"].append(
        {"type": "tool_result", "tool_use_id": "toolu_x", "content": "x"}
    ),
    "tool_use never answered": lambda p: _block(p, "tool_use").update(id="toolu_unanswered"),
    "first turn an assistant's": lambda p: p["messages"].pop(0),
    "two user turns in a row": lambda p: p["messages"].insert(
        1, {"role": "user", "content": "again"}
    ),
    "system block not text": lambda p: p["system"].append(
        {"type": "image", "source": se._B64_IMAGE}
    ),
    "empty text block": lambda p: p["messages"][0]["content"].append({"type": "text", "text": ""}),
    "unknown message key": lambda p: p["messages"][0].update(name="alice"),
    "a tool id the API refuses": lambda p: _rename_tool_use(p, "function:read_file"),
    "an empty assistant turn": lambda p: p["messages"][-1].update(content=""),
}


@pytest.mark.parametrize("change", ANTHROPIC_BROKEN.values(), ids=ANTHROPIC_BROKEN.keys())
def test_anthropic_validator_refuses(change: Any) -> None:
    with pytest.raises(pv.PayloadError):
        pv.validate_anthropic_faithful(_anthropic_with(change))


def _chat_with(change: Any) -> list[dict[str, Any]]:
    messages = copy.deepcopy(se.CHAT_MESSAGES)
    change(messages)
    return messages


def _chat_index(messages: list[dict[str, Any]], role: str) -> int:
    return next(k for k, m in enumerate(messages) if m["role"] == role)


CHAT_BROKEN = {
    "tool message without a call": lambda ms: ms.insert(
        1, {"role": "tool", "tool_call_id": "call_x", "content": "x"}
    ),
    "a tool call left unanswered": lambda ms: ms.pop(_chat_index(ms, "tool")),
    "function message of another name": lambda ms: ms[_chat_index(ms, "function")].update(
        name="get_time"
    ),
    "custom tool call without input": lambda ms: next(m for m in ms if m.get("tool_calls"))[
        "tool_calls"
    ][1]["custom"].pop("input"),
    "an empty assistant message": lambda ms: ms.append({"role": "assistant", "content": None}),
    "audio part with a bad format": lambda ms: next(
        p
        for m in ms
        if isinstance(m["content"], list)
        for p in m["content"]
        if p["type"] == "input_audio"
    )["input_audio"].update(format="ogg"),
}


@pytest.mark.parametrize("change", CHAT_BROKEN.values(), ids=CHAT_BROKEN.keys())
def test_chat_validator_refuses(change: Any) -> None:
    with pytest.raises(pv.PayloadError):
        pv.validate_openai_chat_faithful(_chat_with(change))


def test_eager_validation_avoids_the_lazy_iterable_trap() -> None:
    """``Union[Iterable[ResultBlock], ErrorObject]``: lazily, a dict is taken for the iterable
    and fails when forced; eagerly, the error object validates. Both refuse a bad one."""
    block = copy.deepcopy(_server_result_error({"messages": se.anthropic_messages()}))
    with pytest.raises(pv.PayloadError):
        pv.strict_validate(at.WebSearchToolResultBlockParam, block, where="lazy")
    assert pv.strict_validate_eager(at.WebSearchToolResultBlockParam, block, where="eager") == block
    block["content"]["colour"] = "red"
    with pytest.raises(pv.PayloadError):
        pv.strict_validate_eager(at.WebSearchToolResultBlockParam, block, where="eager")


def test_eager_types_keep_required_and_optional_keys() -> None:
    minimal = {"type": "reasoning", "id": "rs_1", "summary": []}
    assert pv.strict_validate_eager(ResponseInputItemParam, minimal, where="minimal") == minimal
    with pytest.raises(pv.PayloadError):
        pv.strict_validate_eager(
            ResponseInputItemParam, {"type": "reasoning", "id": "rs_1"}, where="no summary"
        )
    with pytest.raises(pv.PayloadError):
        pv.strict_validate_eager(
            at.ToolUseBlockParam, {"type": "tool_use", "id": "t", "name": "f"}, where="no input"
        )


def test_example_validation_refuses_a_coerced_value() -> None:
    member, item = next(
        (m, i)
        for m, i in se.RESPONSES_CORPUS
        if i.get("type") == "computer_call" and "actions" in i
    )
    broken = copy.deepcopy(item)
    broken["actions"][0]["x"] = "412"  # lax pydantic would make it 412
    with pytest.raises(pv.PayloadError):
        se.validate_example("openai-responses", member, broken, where="coerced")


def _gemini_with(change: Any) -> dict[str, Any]:
    payload = {
        "system_instruction": copy.deepcopy(se.GEMINI_SYSTEM_INSTRUCTION),
        "contents": copy.deepcopy(se.GEMINI_CONTENTS),
    }
    change(payload)
    return payload


def _gemini_part(payload: dict[str, Any], key: str) -> dict[str, Any]:
    return next(p for c in payload["contents"] for p in c["parts"] if key in p)


GEMINI_BROKEN = {
    "first turn the model's": lambda p: p["contents"].pop(0),
    "two user turns in a row": lambda p: p["contents"].insert(
        1, {"role": "user", "parts": [{"text": "again"}]}
    ),
    "a call left unanswered": lambda p: p["contents"][2]["parts"].pop(0),
    "a response to another id": lambda p: _gemini_part(p, "functionResponse")[
        "functionResponse"
    ].update(id="fc_nope"),
    "an unknown part key": lambda p: p["contents"][0]["parts"][0].update(colour="red"),
    "a role the API does not know": lambda p: p["contents"][1].update(role="assistant"),
    "a content without parts": lambda p: p["contents"][-1].update(parts=[]),
    "a system instruction with media": lambda p: p["system_instruction"]["parts"].append(
        {"inlineData": {"mimeType": "image/png", "data": se.SMALL_PNG_B64}}
    ),
}


@pytest.mark.parametrize("change", GEMINI_BROKEN.values(), ids=GEMINI_BROKEN.keys())
def test_gemini_validator_refuses(change: Any) -> None:
    with pytest.raises(pv.PayloadError):
        pv.validate_payload_faithful("gemini", _gemini_with(change))
