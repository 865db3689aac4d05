"""Validate provider payloads against the official SDK request types, strictly.

The SDK request types are ``TypedDict``s; ``pydantic.TypeAdapter(T, config=ConfigDict(
extra="forbid"))`` turns them into strict validators (unknown keys fail). Two traps, handled
here:

- ``Iterable[...]`` fields validate lazily (pydantic returns a ``ValidatorIterator``); every
  value is forced recursively, or nested errors would never surface;
- Anthropic's ``MessageParam`` content union also admits *response* models (``TextBlock``
  etc.) that allow extra keys, so each Anthropic block is validated against its own ``*Param``
  type, chosen by its ``type``.

On top of the types, the cross-message rules the types cannot express are checked (tool
pairing and ordering, Anthropic alternation). Every validator raises ``PayloadError``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import cache
from typing import Any

import anthropic.types as at
import openai.types.chat as oc
import openai.types.responses as orr
from openai.types.responses.response_input_item_param import FunctionCallOutput
from pydantic import ConfigDict, TypeAdapter, ValidationError

STRICT = ConfigDict(extra="forbid")


class PayloadError(AssertionError):
    pass


@cache
def _adapter(tp: Any) -> TypeAdapter[Any]:
    # A bare TypedDict refuses ``config``; inside a container the config reaches every nested
    # TypedDict (checked by tests/domain/test_provider_validation.py).
    return TypeAdapter(list[tp], config=STRICT)  # type: ignore[valid-type]


def _force(value: Any) -> Any:
    """Materialise lazily validated iterables, recursively (this is where their errors rise)."""
    if isinstance(value, Mapping):
        return {k: _force(v) for k, v in value.items()}
    if isinstance(value, str | bytes | int | float | bool) or value is None:
        return value
    if isinstance(value, Iterable):
        return [_force(v) for v in value]
    return value


def strict_validate(tp: Any, value: Any, *, where: str) -> Any:
    try:
        return _force(_adapter(tp).validate_python([value]))[0]
    except ValidationError as exc:
        raise PayloadError(f"{where}: {exc}") from exc


# -- OpenAI Chat Completions ------------------------------------------------------------------

_CHAT_TYPES: dict[str, Any] = {
    "system": oc.ChatCompletionSystemMessageParam,
    "developer": oc.ChatCompletionDeveloperMessageParam,
    "user": oc.ChatCompletionUserMessageParam,
    "assistant": oc.ChatCompletionAssistantMessageParam,
    "tool": oc.ChatCompletionToolMessageParam,
}


def validate_openai_chat(messages: list[dict[str, Any]]) -> None:
    """Each message strictly typed; every assistant ``tool_calls`` is answered by the tool
    messages right after it (one per call id, nothing else in between); no tool message
    without such a call."""
    if not isinstance(messages, list):
        raise PayloadError("messages must be a list")
    for k, message in enumerate(messages):
        role = message.get("role") if isinstance(message, dict) else None
        if role not in _CHAT_TYPES:
            raise PayloadError(f"messages[{k}]: bad role {role!r}")
        strict_validate(_CHAT_TYPES[role], message, where=f"messages[{k}]")
        strict_validate(oc.ChatCompletionMessageParam, message, where=f"messages[{k}] (union)")
    k = 0
    while k < len(messages):
        message = messages[k]
        if message["role"] == "tool":
            raise PayloadError(f"messages[{k}]: tool message without a preceding tool call")
        calls = [c["id"] for c in message.get("tool_calls") or []]
        k += 1
        if not calls:
            continue
        if len(set(calls)) != len(calls):
            raise PayloadError(f"messages[{k - 1}]: duplicate tool call ids")
        answered: list[str] = []
        while k < len(messages) and messages[k]["role"] == "tool":
            answered.append(messages[k]["tool_call_id"])
            k += 1
        if sorted(answered) != sorted(calls):
            raise PayloadError(f"tool calls {calls} answered by {answered}")


# -- OpenAI Responses -------------------------------------------------------------------------

_RESPONSES_TYPES: dict[str, Any] = {
    "message": orr.EasyInputMessageParam,
    "function_call": orr.ResponseFunctionToolCallParam,
    "function_call_output": FunctionCallOutput,
    "reasoning": orr.ResponseReasoningItemParam,
}


def validate_openai_responses(items: list[dict[str, Any]]) -> None:
    """Each input item strictly typed; assistant messages are easy-input messages with string
    content; every output follows its call and every call has an output; reasoning is
    followed by a call or an assistant message."""
    if not isinstance(items, list):
        raise PayloadError("input must be a list")
    seen_calls: set[str] = set()
    answered: set[str] = set()
    for k, item in enumerate(items):
        kind = item.get("type") if isinstance(item, dict) else None
        if kind not in _RESPONSES_TYPES:
            raise PayloadError(f"input[{k}]: unexpected item type {kind!r}")
        strict_validate(_RESPONSES_TYPES[kind], item, where=f"input[{k}]")
        strict_validate(orr.ResponseInputItemParam, item, where=f"input[{k}] (union)")
        if (
            kind == "message"
            and item["role"] == "assistant"
            and not isinstance(item["content"], str)
        ):
            raise PayloadError(f"input[{k}]: assistant content must be a string")
        if kind == "function_call":
            if item["call_id"] in seen_calls:
                raise PayloadError(f"input[{k}]: duplicate call id")
            seen_calls.add(item["call_id"])
        if kind == "function_call_output":
            if item["call_id"] not in seen_calls:
                raise PayloadError(f"input[{k}]: output without an earlier call")
            answered.add(item["call_id"])
        if kind == "reasoning":
            nxt = next((i for i in items[k + 1 :] if i.get("type") != "reasoning"), None)
            if nxt is None or not (
                nxt["type"] == "function_call"
                or (nxt["type"] == "message" and nxt["role"] == "assistant")
            ):
                raise PayloadError(f"input[{k}]: reasoning not followed by model output")
    if seen_calls - answered:
        raise PayloadError(f"calls without output: {sorted(seen_calls - answered)}")


# -- Anthropic Messages -----------------------------------------------------------------------

_ANTHROPIC_BLOCKS: dict[str, Any] = {
    "text": at.TextBlockParam,
    "image": at.ImageBlockParam,
    "tool_use": at.ToolUseBlockParam,
    "tool_result": at.ToolResultBlockParam,
    "thinking": at.ThinkingBlockParam,
    "redacted_thinking": at.RedactedThinkingBlockParam,
}
_USER_BLOCKS = {"text", "image", "tool_result"}
_ASSISTANT_BLOCKS = {"text", "tool_use", "thinking", "redacted_thinking"}


def validate_anthropic(payload: Mapping[str, Any]) -> None:
    """``system`` and ``messages`` strictly typed, block by block; roles alternate starting
    with ``user``; every ``tool_use`` is answered in the very next user message, whose
    ``tool_result`` blocks come first; no ``tool_result`` without that ``tool_use``; no empty
    text."""
    extra = set(payload) - {"system", "messages"}
    if extra:
        raise PayloadError(f"unexpected payload keys {extra}")
    system = payload.get("system")
    if system is not None:
        if isinstance(system, str):
            if not system:
                raise PayloadError("empty system")
        else:
            for k, block in enumerate(system):
                strict_validate(at.TextBlockParam, block, where=f"system[{k}]")
    messages = payload["messages"]  # empty only when working memory has nothing to send
    for k, message in enumerate(messages):
        strict_validate(at.MessageParam, message, where=f"messages[{k}]")
        if set(message) != {"role", "content"}:
            raise PayloadError(f"messages[{k}]: keys {set(message)}")
        role = message["role"]
        if role not in ("user", "assistant"):
            raise PayloadError(f"messages[{k}]: role {role!r}")
        if k == 0 and role != "user":
            raise PayloadError("the first message must be a user message")
        if k > 0 and messages[k - 1]["role"] == role:
            raise PayloadError(f"messages[{k}]: roles must alternate")
        content = message["content"]
        if isinstance(content, str):
            if not content:
                raise PayloadError(f"messages[{k}]: empty content")
            continue
        if not content:
            raise PayloadError(f"messages[{k}]: no blocks")
        allowed = _USER_BLOCKS if role == "user" else _ASSISTANT_BLOCKS
        for j, block in enumerate(content):
            kind = block.get("type")
            if kind not in allowed:
                raise PayloadError(f"messages[{k}][{j}]: {kind!r} not allowed in a {role} message")
            strict_validate(_ANTHROPIC_BLOCKS[kind], block, where=f"messages[{k}][{j}]")
            if kind == "text" and not block["text"]:
                raise PayloadError(f"messages[{k}][{j}]: empty text block")
    for k, message in enumerate(messages):
        blocks = message["content"] if isinstance(message["content"], list) else []
        uses = [b["id"] for b in blocks if b["type"] == "tool_use"]
        results = [b for b in blocks if b["type"] == "tool_result"]
        if results:
            prev = messages[k - 1]["content"] if k > 0 else []
            prev_uses = [
                b["id"] for b in prev if isinstance(prev, list) and b["type"] == "tool_use"
            ]
            if sorted(b["tool_use_id"] for b in results) != sorted(prev_uses):
                raise PayloadError(f"messages[{k}]: tool_result blocks do not answer {prev_uses}")
            if any(b["type"] != "tool_result" for b in blocks[: len(results)]):
                raise PayloadError(f"messages[{k}]: tool_result blocks must come first")
        if uses:
            if len(set(uses)) != len(uses):
                raise PayloadError(f"messages[{k}]: duplicate tool_use ids")
            if k + 1 >= len(messages):
                raise PayloadError(f"messages[{k}]: tool_use without a following user message")


def validate_payload(format: str, payload: Mapping[str, Any]) -> None:
    """Validate a context payload of any provider format (canonical is not checked here)."""
    if format == "openai-chat":
        assert set(payload) == {"messages"}, set(payload)
        validate_openai_chat(payload["messages"])
    elif format == "openai-responses":
        assert set(payload) == {"input"}, set(payload)
        validate_openai_responses(payload["input"])
    elif format == "anthropic":
        validate_anthropic(payload)
