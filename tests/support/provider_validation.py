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

import functools
import re
import types
import typing
from collections.abc import Iterable, Mapping
from functools import cache
from typing import Any

import anthropic.types as at
import openai.types.chat as oc
import openai.types.responses as orr
import typing_extensions as te
from anthropic.types.system_message_param import SystemMessageParam
from anthropic.types.user_message_param import UserMessageParam
from openai.types.responses.response_input_item_param import (
    FunctionCallOutput,
    ResponseInputItemParam,
)
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


# -- Gemini -------------------------------------------------------------------------------------


def _gemini_kind(part: Mapping[str, Any]) -> str | None:
    for snake in ("function_call", "function_response"):
        camel = snake.split("_")[0] + snake.split("_")[1].title()
        if part.get(camel) is not None or part.get(snake) is not None:
            return snake
    return None


def _gemini_spec(part: Mapping[str, Any], kind: str) -> Mapping[str, Any]:
    camel = kind.split("_")[0] + kind.split("_")[1].title()
    spec = part.get(camel)
    return spec if spec is not None else part[kind]  # type: ignore[no-any-return]


def validate_gemini(payload: Mapping[str, Any]) -> None:
    """``system_instruction`` and every content validated by the ``google-genai`` SDK's own
    pydantic types (``extra="forbid"``: an unknown key fails; camelCase and snake_case both
    read, as the SDK does); the turn rules the types cannot express: roles ``user`` /
    ``model`` (none reads as user) alternating from a user turn, no content without parts, and
    every model turn with function calls answered by the very next user turn, whose
    ``functionResponse`` parts answer exactly those calls (by ``id``, or by name where the
    calls have none); no function response anywhere else."""
    from google.genai import types as gt

    extra = set(payload) - {"system_instruction", "contents"}
    if extra:
        raise PayloadError(f"unexpected payload keys {extra}")
    system = payload.get("system_instruction")
    if system is not None and not isinstance(system, str):
        try:
            content = gt.Content.model_validate(system)
        except ValidationError as exc:
            raise PayloadError(f"system_instruction: {exc}") from exc
        if not content.parts or any(p.text is None for p in content.parts):
            raise PayloadError("system_instruction: text parts only, at least one")
    contents = payload["contents"]
    previous: str | None = None
    waiting: list[Mapping[str, Any]] = []  # the calls of the model turn just before
    for k, content in enumerate(contents):
        try:
            gt.Content.model_validate(content)
        except ValidationError as exc:
            raise PayloadError(f"contents[{k}]: {exc}") from exc
        role = content.get("role") or "user"
        if role == "function":
            role = "user"
        if role not in ("user", "model"):
            raise PayloadError(f"contents[{k}]: role {role!r}")
        if k == 0 and role != "user":
            raise PayloadError("the first content must be a user turn")
        if previous == role:
            raise PayloadError(f"contents[{k}]: roles must alternate")
        parts = content["parts"]
        if not parts:
            raise PayloadError(f"contents[{k}]: no parts")
        calls = [
            _gemini_spec(p, "function_call") for p in parts if _gemini_kind(p) == "function_call"
        ]
        responses = [
            _gemini_spec(p, "function_response")
            for p in parts
            if _gemini_kind(p) == "function_response"
        ]
        if role == "model" and responses:
            raise PayloadError(f"contents[{k}]: a function response in a model turn")
        if role == "user" and calls:
            raise PayloadError(f"contents[{k}]: a function call in a user turn")
        if responses or waiting:
            if any(c.get("id") is not None for c in waiting):
                want = sorted(str(c.get("id")) for c in waiting)
                got = sorted(str(r.get("id")) for r in responses)
            else:
                want = sorted(c["name"] for c in waiting)
                got = sorted(r["name"] for r in responses)
            if want != got:
                raise PayloadError(f"contents[{k}]: function responses {got} answer {want}")
        waiting = calls
        previous = role
    if waiting:
        raise PayloadError("the last model turn's function calls are not answered")


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
    elif format == "gemini":
        validate_gemini(payload)


# == Faithful validators: every member of the SDK unions ====================================
#
# The validators above check what the service renders from canonical items (a narrow subset of
# each SDK). Those below admit every member of the installed SDKs' request unions, found from the
# unions themselves, and add the cross-item rules the types cannot express for every call/output
# pair type. They back the faithful-storage tests (issue 13).

_CONTAINERS = {list, tuple, set, frozenset}


def typed_dict_members(tp: Any, *, through_containers: bool = False) -> list[Any]:
    """The ``TypedDict`` members of a type: a union is flattened (also through ``Optional`` and
    ``Annotated``); with ``through_containers`` also through ``list`` / ``Iterable`` / ``Sequence``.
    Non-TypedDict members (``str``, response ``BaseModel``s) are skipped. Order kept, no dupes."""
    out: list[Any] = []

    def walk(t: Any) -> None:
        origin = typing.get_origin(t)
        if origin is typing.Annotated or origin is te.Annotated:
            walk(typing.get_args(t)[0])
        elif origin is typing.Union or origin is types.UnionType:
            for arg in typing.get_args(t):
                walk(arg)
        elif (
            through_containers
            and origin is not None
            and (
                origin in _CONTAINERS
                or (
                    isinstance(origin, type)
                    and issubclass(origin, Iterable)
                    and origin not in (str, bytes, dict)
                )
            )
        ):
            for arg in typing.get_args(t):
                walk(arg)
        elif te.is_typeddict(t) and t not in out:
            out.append(t)

    walk(tp)
    return out


def field_type(td: Any, field: str) -> Any:
    """The resolved annotation of one field of a ``TypedDict`` (``Required`` etc. stripped)."""
    return te.get_type_hints(td)[field]


def field_members(td: Any, field: str) -> list[Any]:
    """The TypedDicts a field of ``td`` may hold, through containers."""
    return typed_dict_members(field_type(td, field), through_containers=True)


@functools.cache
def literal_values(td: Any, key: str = "type") -> tuple[str, ...]:
    """The string literals a ``TypedDict``'s ``key`` field admits (``()`` without such a field)."""
    hints = te.get_type_hints(td)
    if key not in hints:
        return ()
    values: list[str] = []

    def walk(t: Any) -> None:
        origin = typing.get_origin(t)
        if origin is typing.Literal or origin is te.Literal:
            values.extend(a for a in typing.get_args(t) if isinstance(a, str))
        elif origin is typing.Union or origin is types.UnionType:
            for arg in typing.get_args(t):
                walk(arg)

    walk(hints[key])
    return tuple(values)


def type_is_optional(td: Any) -> bool:
    """Whether ``type`` may be left out of ``td`` (its annotation is not ``Required[...]``). The
    SDK modules use ``from __future__ import annotations``, which leaves ``__required_keys__``
    empty, so the annotation's source text is read."""
    raw = td.__annotations__.get("type")
    if raw is None:
        for base in getattr(td, "__orig_bases__", ()):
            raw = getattr(base, "__annotations__", {}).get("type")
    return raw is not None and "Required[" not in str(raw)


_EAGER: dict[Any, Any] = {}


def eager_type(tp: Any) -> Any:
    """``tp`` with every ``Iterable[X]`` made ``list[X]``, through unions and nested TypedDicts.

    Pydantic validates ``Iterable`` lazily, and inside a union a lazy ``Iterable`` accepts any
    iterable, a dict included: ``Union[Iterable[ResultBlock], ErrorObject]`` picks the iterable
    for an error object and fails later, when forced (a false rejection ``strict_validate``
    cannot avoid). Eager lists make the union choose correctly. TypedDicts are rebuilt with the
    same required and optional keys; anything else is kept as it is."""
    if tp in _EAGER:
        return _EAGER[tp]
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if te.is_typeddict(tp):
        _EAGER[tp] = tp  # a recursive reference validates with the original type
        hints = te.get_type_hints(tp, include_extras=True)
        fields: dict[str, Any] = {}
        for name, hint in hints.items():
            wrapper = typing.get_origin(hint)
            if wrapper is te.Required or wrapper is te.NotRequired:
                inner = eager_type(typing.get_args(hint)[0])
                fields[name] = (
                    te.Required[inner] if wrapper is te.Required else te.NotRequired[inner]
                )
            else:
                inner = eager_type(hint)
                fields[name] = inner if getattr(tp, "__total__", True) else te.NotRequired[inner]
        rebuilt = te.TypedDict(tp.__name__, fields, total=True)  # type: ignore[operator]
        _EAGER[tp] = rebuilt
        return rebuilt
    if origin is typing.Union or origin is types.UnionType:
        new: Any = typing.Union[tuple(eager_type(a) for a in args)]  # noqa: UP007
    elif origin is typing.Annotated or origin is te.Annotated:
        new = typing.Annotated[(eager_type(args[0]), *tp.__metadata__)]
    elif origin is not None and origin in (Iterable, list) and args:
        new = list[eager_type(args[0])]  # type: ignore[misc]
    else:
        new = tp
    _EAGER[tp] = new
    return new


@cache
def _eager_adapter(tp: Any) -> TypeAdapter[Any]:
    # Rebuilt TypedDicts lose whatever let pydantic accept the SDK's ``IO[bytes]`` file inputs;
    # those validate by isinstance here (our payloads are JSON: strings).
    config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)
    return TypeAdapter(list[eager_type(tp)], config=config)  # type: ignore[misc]


def strict_validate_eager(tp: Any, value: Any, *, where: str) -> Any:
    """``strict_validate`` against ``eager_type(tp)``: no lazy iterable in a union."""
    try:
        return _force(_eager_adapter(tp).validate_python([value]))[0]
    except ValidationError as exc:
        raise PayloadError(f"{where}: {exc}") from exc


def _try_each(candidates: list[Any], value: Any, *, where: str) -> Any:
    errors: list[str] = []
    for tp in candidates:
        try:
            return strict_validate_eager(tp, value, where=f"{where} as {tp.__name__}")
        except PayloadError as exc:
            errors.append(str(exc))
    raise PayloadError(
        f"{where}: matches none of {[t.__name__ for t in candidates]}:\n" + "\n".join(errors)
    )


# -- OpenAI Responses, every input item -------------------------------------------------------

RESPONSES_MEMBERS: list[Any] = typed_dict_members(ResponseInputItemParam)


def responses_members_for(item: Mapping[str, Any]) -> list[Any]:
    """The union members an item may be, chosen by its ``type`` (all members whose ``type`` is
    optional when the item has none)."""
    kind = item.get("type")
    if kind is None:
        return [m for m in RESPONSES_MEMBERS if type_is_optional(m)]
    return [m for m in RESPONSES_MEMBERS if kind in literal_values(m)]


def validate_responses_item(item: Any, *, where: str = "item") -> None:
    """One Responses input item, strictly, against the members its ``type`` names and the union."""
    if not isinstance(item, dict):
        raise PayloadError(f"{where}: not an object")
    candidates = responses_members_for(item)
    if not candidates:
        raise PayloadError(
            f"{where}: type {item.get('type')!r} is not in the SDK's input item union"
        )
    _try_each(candidates, item, where=where)
    strict_validate_eager(ResponseInputItemParam, item, where=f"{where} (union)")


# output type -> (call type, key on the output, key on the call): how each output names its call.
RESPONSES_PAIRS: dict[str, tuple[str, str, str]] = {
    "function_call_output": ("function_call", "call_id", "call_id"),
    "custom_tool_call_output": ("custom_tool_call", "call_id", "call_id"),
    "computer_call_output": ("computer_call", "call_id", "call_id"),
    # The SDK type has no call_id: the output's ``id`` is "the unique ID of the local shell tool
    # call generated by the model", i.e. the call's ``call_id``. (The Agents SDK sends ``call_id``.)
    "local_shell_call_output": ("local_shell_call", "id", "call_id"),
    "shell_call_output": ("shell_call", "call_id", "call_id"),
    "apply_patch_call_output": ("apply_patch_call", "call_id", "call_id"),
    "mcp_approval_response": ("mcp_approval_request", "approval_request_id", "id"),
    "tool_search_output": ("tool_search_call", "call_id", "call_id"),
    "program_output": ("program", "call_id", "call_id"),
}
# Calls the client must answer before the next request.
RESPONSES_CLIENT_CALLS = {
    "function_call",
    "custom_tool_call",
    "computer_call",
    "local_shell_call",
    "shell_call",
    "apply_patch_call",
}
# Items that are not produced by the model (what may not follow reasoning).
_NOT_MODEL_OUTPUT = set(RESPONSES_PAIRS) | {
    "additional_tools",
    "configuration_update",
    "compaction_trigger",
}


def _output_key(item: Mapping[str, Any]) -> Any:
    _, out_key, _ = RESPONSES_PAIRS[item["type"]]
    if item["type"] == "local_shell_call_output" and "call_id" in item:
        return item["call_id"]
    return item.get(out_key)


def validate_openai_responses_faithful(items: Any) -> None:
    """Every item a member of the SDK union; every output answers an earlier call of its pair
    type (table ``RESPONSES_PAIRS``) and no call key repeats; every client-executed call (and a
    client ``tool_search_call``) is answered; reasoning is followed by model output; a
    ``compaction_trigger`` only as the final item."""
    if not isinstance(items, list):
        raise PayloadError("input must be a list")
    calls: dict[tuple[str, Any], int] = {}
    answered: set[tuple[str, Any]] = set()
    for k, item in enumerate(items):
        validate_responses_item(item, where=f"input[{k}]")
        kind = item.get("type", "message" if "role" in item else "item_reference")
        call_types = {call: key for call, _, key in RESPONSES_PAIRS.values()}
        if kind in call_types:
            key = (kind, item.get(call_types[kind]))
            if key in calls:
                raise PayloadError(f"input[{k}]: {kind} {key[1]!r} repeats input[{calls[key]}]")
            calls[key] = k
        if kind in RESPONSES_PAIRS:
            call_type = RESPONSES_PAIRS[kind][0]
            key = (call_type, _output_key(item))
            if key not in calls:
                raise PayloadError(f"input[{k}]: {kind} {key[1]!r} answers no earlier {call_type}")
            answered.add(key)
        if kind == "reasoning":
            nxt = next((i for i in items[k + 1 :] if i.get("type") != "reasoning"), None)
            if (
                nxt is None
                or nxt.get("type") in _NOT_MODEL_OUTPUT
                or ("role" in nxt and nxt["role"] != "assistant")
            ):
                raise PayloadError(f"input[{k}]: reasoning not followed by model output")
        if kind == "compaction_trigger" and k != len(items) - 1:
            raise PayloadError(f"input[{k}]: compaction_trigger must be the final input item")
    for (kind, key), k in calls.items():
        needs_output = kind in RESPONSES_CLIENT_CALLS or (
            kind == "tool_search_call" and items[k].get("execution") == "client"
        )
        if needs_output and (kind, key) not in answered:
            raise PayloadError(f"input[{k}]: {kind} {key!r} has no output")


# -- Anthropic Messages, every content block --------------------------------------------------

ANTHROPIC_MESSAGE_MEMBERS: list[Any] = typed_dict_members(at.MessageParam)
ANTHROPIC_BLOCK_MEMBERS: list[Any] = field_members(UserMessageParam, "content")
ANTHROPIC_BLOCK_PARAMS: dict[str, Any] = {
    literal: tp for tp in ANTHROPIC_BLOCK_MEMBERS for literal in literal_values(tp)
}
# Blocks the model writes for its server tools: every ``*_tool_result`` but the client's own.
ANTHROPIC_SERVER_RESULTS = {
    t for t in ANTHROPIC_BLOCK_PARAMS if t.endswith("_tool_result") and t != "tool_result"
}
ANTHROPIC_USER_ONLY = {"tool_result", "image", "document", "search_result"}
ANTHROPIC_USER_BLOCKS = ANTHROPIC_USER_ONLY | {"text", "container_upload"}
ANTHROPIC_ASSISTANT_BLOCKS = set(ANTHROPIC_BLOCK_PARAMS) - ANTHROPIC_USER_ONLY
# server_tool_use ``name`` -> the result block type that answers it (by ``tool_use_id`` == ``id``).
ANTHROPIC_SERVER_TOOL_RESULTS: dict[str, str] = {
    "web_search": "web_search_tool_result",
    "web_fetch": "web_fetch_tool_result",
    "code_execution": "code_execution_tool_result",
    "bash_code_execution": "bash_code_execution_tool_result",
    "text_editor_code_execution": "text_editor_code_execution_tool_result",
    "tool_search_tool_regex": "tool_search_tool_result",
    "tool_search_tool_bm25": "tool_search_tool_result",
}


# The API refuses other tool ids ("String should match pattern '^[a-zA-Z0-9_-]+$'").
ANTHROPIC_TOOL_ID = re.compile(r"^[a-zA-Z0-9_-]+$")


def validate_anthropic_message(message: Any, *, where: str = "message") -> None:
    """One message strictly: the ``MessageParam`` union, then each block against its own
    ``*Param`` type (the union also admits lenient response models), allowed in its role;
    tool ids as the API accepts them; no empty text."""
    if not isinstance(message, dict):
        raise PayloadError(f"{where}: not an object")
    strict_validate_eager(at.MessageParam, message, where=where)
    if set(message) - {"role", "content"}:
        raise PayloadError(f"{where}: keys {sorted(message)}")
    role = message.get("role")
    if role == "system":
        strict_validate_eager(SystemMessageParam, message, where=where)
    elif role not in ("user", "assistant"):
        raise PayloadError(f"{where}: role {role!r}")
    content = message["content"]
    if isinstance(content, str):
        if not content:
            raise PayloadError(f"{where}: empty content")
        return
    if not content:
        raise PayloadError(f"{where}: no blocks")
    allowed = {
        "user": ANTHROPIC_USER_BLOCKS,
        "assistant": ANTHROPIC_ASSISTANT_BLOCKS,
        "system": {"text"},
    }[role]
    for j, block in enumerate(content):
        kind = block.get("type") if isinstance(block, dict) else None
        if kind not in ANTHROPIC_BLOCK_PARAMS:
            raise PayloadError(f"{where}[{j}]: unknown block type {kind!r}")
        if kind not in allowed:
            raise PayloadError(f"{where}[{j}]: {kind!r} not allowed in a {role} message")
        strict_validate_eager(ANTHROPIC_BLOCK_PARAMS[kind], block, where=f"{where}[{j}]")
        if kind == "text" and not block["text"]:
            raise PayloadError(f"{where}[{j}]: empty text block")
        block_id = (
            block.get("id") if kind in ("tool_use", "server_tool_use") else block.get("tool_use_id")
        )
        if block_id is not None and not ANTHROPIC_TOOL_ID.fullmatch(block_id):
            raise PayloadError(
                f"{where}[{j}]: tool id {block_id!r} does not match {ANTHROPIC_TOOL_ID.pattern}"
            )


def validate_anthropic_faithful(payload: Mapping[str, Any]) -> None:
    """``system`` and ``messages`` strictly typed block by block (every block type of the SDK);
    user and assistant turns alternate from a user turn (``role: system`` messages aside); each
    ``tool_use`` is answered by ``tool_result`` blocks first in the very next user message and
    no ``tool_result`` answers anything else; each ``server_tool_use`` is answered later in the
    assistant side by the result type its ``name`` calls for (only the last assistant message
    may hold an unanswered one), and no server result answers anything else."""
    extra = set(payload) - {"system", "messages"}
    if extra:
        raise PayloadError(f"unexpected payload keys {extra}")
    system = payload.get("system")
    if system is not None:
        if isinstance(system, str):
            if not system:
                raise PayloadError("empty system")
        else:
            if not system:
                raise PayloadError("empty system blocks")
            for k, block in enumerate(system):
                strict_validate_eager(at.TextBlockParam, block, where=f"system[{k}]")
    messages = payload["messages"]
    if not isinstance(messages, list):
        raise PayloadError("messages must be a list")
    for k, message in enumerate(messages):
        validate_anthropic_message(message, where=f"messages[{k}]")
    turns = [(k, m) for k, m in enumerate(messages) if m["role"] != "system"]
    for n, (k, message) in enumerate(turns):
        if n == 0 and message["role"] != "user":
            raise PayloadError("the first message must be a user message")
        if n > 0 and turns[n - 1][1]["role"] == message["role"]:
            raise PayloadError(f"messages[{k}]: roles must alternate")

    def blocks(m: Mapping[str, Any]) -> list[dict[str, Any]]:
        return m["content"] if isinstance(m["content"], list) else []

    pending_server: dict[str, tuple[str, int]] = {}
    last_assistant = max((k for k, m in turns if m["role"] == "assistant"), default=-1)
    for n, (k, message) in enumerate(turns):
        content = blocks(message)
        results = [b for b in content if b["type"] == "tool_result"]
        prev_uses = (
            [b["id"] for b in blocks(turns[n - 1][1]) if b["type"] == "tool_use"] if n else []
        )
        if results or prev_uses:
            if sorted(b["tool_use_id"] for b in results) != sorted(prev_uses):
                raise PayloadError(
                    f"messages[{k}]: tool_result blocks {[b['tool_use_id'] for b in results]} do not answer {prev_uses}"
                )
            if any(b["type"] != "tool_result" for b in content[: len(results)]):
                raise PayloadError(f"messages[{k}]: tool_result blocks must come first")
        uses = [b["id"] for b in content if b["type"] == "tool_use"]
        if len(set(uses)) != len(uses):
            raise PayloadError(f"messages[{k}]: duplicate tool_use ids")
        if uses and n + 1 >= len(turns):
            raise PayloadError(f"messages[{k}]: tool_use without a following user message")
        for j, block in enumerate(content):
            if block["type"] == "server_tool_use":
                if block["name"] not in ANTHROPIC_SERVER_TOOL_RESULTS:
                    raise PayloadError(f"messages[{k}][{j}]: unknown server tool {block['name']!r}")
                if block["id"] in pending_server:
                    raise PayloadError(f"messages[{k}][{j}]: duplicate server_tool_use id")
                pending_server[block["id"]] = (ANTHROPIC_SERVER_TOOL_RESULTS[block["name"]], k)
            elif block["type"] in ANTHROPIC_SERVER_RESULTS:
                want = pending_server.pop(block["tool_use_id"], None)
                if want is None or want[0] != block["type"]:
                    raise PayloadError(
                        f"messages[{k}][{j}]: {block['type']} answers no earlier server_tool_use"
                    )
    for use_id, (_, k) in pending_server.items():
        if k != last_assistant:
            raise PayloadError(f"messages[{k}]: server_tool_use {use_id!r} never answered")


# -- OpenAI Chat Completions, every message ---------------------------------------------------

CHAT_MEMBERS: list[Any] = typed_dict_members(oc.ChatCompletionMessageParam)
CHAT_BY_ROLE: dict[str, Any] = {literal_values(m, "role")[0]: m for m in CHAT_MEMBERS}


def validate_chat_message(message: Any, *, where: str = "message") -> None:
    if not isinstance(message, dict) or message.get("role") not in CHAT_BY_ROLE:
        raise PayloadError(f"{where}: bad message {message!r:.200}")
    strict_validate_eager(CHAT_BY_ROLE[message["role"]], message, where=where)
    strict_validate_eager(oc.ChatCompletionMessageParam, message, where=f"{where} (union)")
    if message["role"] == "assistant" and not any(
        message.get(k) for k in ("content", "tool_calls", "function_call", "audio", "refusal")
    ):
        raise PayloadError(f"{where}: an assistant message with nothing in it")


def validate_openai_chat_faithful(messages: Any) -> None:
    """Every message a member of the SDK union (every role, part and field); an assistant's
    ``tool_calls`` (function and custom) are answered by ``tool`` messages right after it, one
    per id; a deprecated ``function_call`` by a ``function`` message of that name right after;
    no tool or function message answers anything else."""
    if not isinstance(messages, list):
        raise PayloadError("messages must be a list")
    for k, message in enumerate(messages):
        validate_chat_message(message, where=f"messages[{k}]")
    k = 0
    while k < len(messages):
        message = messages[k]
        if message["role"] in ("tool", "function"):
            raise PayloadError(f"messages[{k}]: {message['role']} message without a preceding call")
        k += 1
        calls = [c["id"] for c in message.get("tool_calls") or []]
        if len(set(calls)) != len(calls):
            raise PayloadError(f"messages[{k - 1}]: duplicate tool call ids")
        answered: list[str] = []
        while calls and k < len(messages) and messages[k]["role"] == "tool":
            answered.append(messages[k]["tool_call_id"])
            k += 1
        if sorted(answered) != sorted(calls):
            raise PayloadError(f"tool calls {calls} answered by {answered}")
        if message.get("function_call"):
            if (
                k >= len(messages)
                or messages[k]["role"] != "function"
                or (messages[k]["name"] != message["function_call"]["name"])
            ):
                raise PayloadError(
                    f"messages[{k - 1}]: function_call not answered by its function message"
                )
            k += 1


def validate_item_faithful(format: str, item: Any, *, where: str = "item") -> None:
    """One provider item of ``format`` (a Responses item, a Chat or Anthropic message)."""
    if format == "openai-responses":
        validate_responses_item(item, where=where)
    elif format == "openai-chat":
        validate_chat_message(item, where=where)
    elif format == "anthropic":
        validate_anthropic_message(item, where=where)
    elif format == "gemini":
        from google.genai import types as gt

        try:
            gt.Content.model_validate(item)
        except ValidationError as exc:
            raise PayloadError(f"{where}: {exc}") from exc
    else:
        raise PayloadError(f"unknown format {format!r}")


def validate_payload_faithful(format: str, payload: Mapping[str, Any]) -> None:
    """A context payload of a provider format, admitting every member of the SDK unions."""
    if format == "openai-chat":
        if set(payload) != {"messages"}:
            raise PayloadError(f"payload keys {set(payload)}")
        validate_openai_chat_faithful(payload["messages"])
    elif format == "openai-responses":
        if set(payload) != {"input"}:
            raise PayloadError(f"payload keys {set(payload)}")
        validate_openai_responses_faithful(payload["input"])
    elif format == "anthropic":
        validate_anthropic_faithful(payload)
    elif format == "gemini":
        validate_gemini(payload)
    else:
        raise PayloadError(f"unknown format {format!r}")
