"""The ``openai-chat`` format: Chat Completions messages (``{"messages": [...]}``).

Ingest (per message; ``id``/``pinned``/``metadata`` are accepted as extra keys and go on the
first canonical item the message yields):
- ``system``/``developer``/``user``: one ``message`` item (text parts, ``image_url`` parts);
- ``assistant``: a ``message`` item for its ``content`` (absent or ``null`` content yields none;
  a ``refusal`` string stands in for missing content), then one ``function_call`` per
  ``tool_calls`` entry; ``audio``/``function_call``/``annotations``/``name`` are tolerated only
  when empty;
- ``tool``: one ``function_call_output`` (text parts are joined).
Anything else (audio or file parts, ``role: function``, participant ``name``) is rejected.

Render: canonical items map back one to one, except that ``function_call`` items join the
assistant message right before them (its ``tool_calls``); inside one projection unit every
assistant message and call forms a single assistant message, so its tool messages follow it.
Reasoning has no Chat Completions representation and is never rendered. Images in non-user
messages become the text ``[image omitted]``.

Token rule (OpenAI cookbook): per message ``3`` + tokens of each content text (or part text) +
the fixed image charge per ``image_url`` part; per tool call ``3`` + tokens of the function
name + tokens of the arguments; tool messages count their content.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from app.domain.items import (
    CanonicalItem,
    FunctionCallItem,
    FunctionCallOutputItem,
    ImagePart,
    MessageItem,
    NewItem,
    TextPart,
)

from ._common import (
    IMAGE_OMITTED,
    PER_MESSAGE_TOKENS,
    PER_TOOL_BLOCK_TOKENS,
    Entry,
    Problems,
    Usage,
    build_items,
    check_keys,
    split_envelope,
)

_TOLERATED_EMPTY = frozenset({"name", "audio", "function_call", "annotations", "refusal"})


def _parse_parts(
    content: Any, loc: list[str | int], problems: Problems, *, images: bool
) -> str | list[TextPart | ImagePart] | None:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        problems.add(loc, "content must be a string or a list of content parts")
        return None
    parts: list[TextPart | ImagePart] = []
    for k, part in enumerate(content):
        ploc = [*loc, k]
        if not isinstance(part, dict):
            problems.add(ploc, "a content part must be an object")
            continue
        kind = part.get("type")
        try:
            if kind == "text":
                check_keys(part, {"type", "text"}, ploc, problems)
                parts.append(TextPart(text=part.get("text")))
            elif kind == "image_url" and images:
                check_keys(part, {"type", "image_url"}, ploc, problems)
                image = part.get("image_url")
                if not isinstance(image, dict):
                    problems.add([*ploc, "image_url"], "image_url must be an object")
                    continue
                check_keys(image, {"url", "detail"}, [*ploc, "image_url"], problems)
                parts.append(ImagePart(url=image.get("url"), detail=image.get("detail")))
            else:
                problems.add([*ploc, "type"], f"content part type {kind!r} is not supported here")
        except ValidationError as exc:
            problems.add_validation(ploc, exc)
    return parts


def _join_text(content: Any, loc: list[str | int], problems: Problems) -> str | None:
    parsed = _parse_parts(content, loc, problems, images=False)
    if parsed is None or isinstance(parsed, str):
        return parsed
    return "".join(p.text for p in parsed if isinstance(p, TextPart))


def ingest(items: list[Any]) -> list[NewItem]:
    problems = Problems()
    out: list[NewItem] = []
    for index, raw in enumerate(items):
        loc: list[str | int] = [index]
        if not isinstance(raw, dict):
            problems.add(loc, "a message must be a JSON object")
            continue
        before = len(problems.errors)
        data, envelope = split_envelope(raw)
        role = data.get("role")
        bodies: list[CanonicalItem] = []
        try:
            if role in ("system", "developer", "user"):
                check_keys(
                    data, {"role", "content"}, loc, problems, ignorable_if_empty=_TOLERATED_EMPTY
                )
                content = _parse_parts(
                    data.get("content"), [*loc, "content"], problems, images=role == "user"
                )
                if content is not None:
                    bodies.append(MessageItem(role=role, content=content))
            elif role == "assistant":
                check_keys(
                    data,
                    {"role", "content", "tool_calls"},
                    loc,
                    problems,
                    ignorable_if_empty=_TOLERATED_EMPTY,
                )
                raw_content = data.get("content")
                if raw_content is None and isinstance(data.get("refusal"), str):
                    raw_content = data["refusal"]
                if raw_content is not None:
                    content = _parse_parts(raw_content, [*loc, "content"], problems, images=False)
                    if content is not None:
                        bodies.append(MessageItem(role="assistant", content=content))
                calls = data.get("tool_calls") or []
                if not isinstance(calls, list):
                    problems.add([*loc, "tool_calls"], "tool_calls must be a list")
                    calls = []
                for k, call in enumerate(calls):
                    cloc: list[str | int] = [*loc, "tool_calls", k]
                    if not isinstance(call, dict) or not isinstance(call.get("function"), dict):
                        problems.add(cloc, "a tool call must be an object with a function")
                        continue
                    check_keys(call, {"id", "type", "function"}, cloc, problems)
                    if call.get("type", "function") != "function":
                        problems.add([*cloc, "type"], "only function tool calls are supported")
                    fn = call["function"]
                    check_keys(fn, {"name", "arguments"}, [*cloc, "function"], problems)
                    try:
                        bodies.append(
                            FunctionCallItem(
                                call_id=call.get("id"),
                                name=fn.get("name"),
                                arguments=fn.get("arguments", ""),
                            )
                        )
                    except ValidationError as exc:
                        problems.add_validation(cloc, exc)
                if not bodies and len(problems.errors) == before:
                    problems.add(loc, "an assistant message needs content or tool_calls")
            elif role == "tool":
                check_keys(data, {"role", "content", "tool_call_id"}, loc, problems)
                output = _join_text(data.get("content"), [*loc, "content"], problems)
                if output is not None:
                    bodies.append(
                        FunctionCallOutputItem(call_id=data.get("tool_call_id"), output=output)
                    )
            else:
                problems.add([*loc, "role"], f"role {role!r} is not supported")
        except ValidationError as exc:
            problems.add_validation(loc, exc)
        if len(problems.errors) == before:
            out.extend(build_items(bodies, envelope, loc, problems))
    problems.raise_if_any()
    return out


def _content(body: MessageItem) -> str | list[dict[str, Any]]:
    if isinstance(body.content, str):
        return body.content
    parts: list[dict[str, Any]] = []
    for part in body.content:
        if isinstance(part, TextPart):
            parts.append({"type": "text", "text": part.text})
        elif body.role == "user":
            image: dict[str, Any] = {"url": part.url}
            if part.detail is not None:
                image["detail"] = part.detail
            parts.append({"type": "image_url", "image_url": image})
        else:
            parts.append({"type": "text", "text": IMAGE_OMITTED})
    return parts


def _as_parts(content: str | list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content)


def representable(body: CanonicalItem) -> bool:
    return body.type != "reasoning"


def render(summary: str | None, entries: Sequence[Entry]) -> dict[str, Any]:
    messages: list[dict[str, Any]] = []
    if summary is not None:
        messages.append({"role": "system", "content": summary})
    open_assistant: dict[str, Any] | None = None  # last message, while calls may still join it
    open_unit: int | None = None
    # dispatch on the discriminator: cheaper than a failing isinstance on a pydantic class
    for entry in entries:
        body = entry.body
        if body.type == "message":
            if body.role != "assistant":
                messages.append({"role": body.role, "content": _content(body)})
                open_assistant = None
            elif (
                open_assistant is not None
                and "tool_calls" in open_assistant
                and entry.unit is not None
                and entry.unit == open_unit
            ):
                if "content" in open_assistant:
                    open_assistant["content"] = _as_parts(open_assistant["content"]) + _as_parts(
                        _content(body)
                    )
                else:
                    open_assistant["content"] = _content(body)
            else:
                open_assistant = {"role": "assistant", "content": _content(body)}
                open_unit = entry.unit
                messages.append(open_assistant)
        elif body.type == "function_call":
            call = {
                "id": body.call_id,
                "type": "function",
                "function": {"name": body.name, "arguments": body.arguments},
            }
            if open_assistant is not None and (
                "tool_calls" not in open_assistant or open_unit == entry.unit
            ):
                open_assistant.setdefault("tool_calls", []).append(call)
                open_unit = entry.unit
            else:
                open_assistant = {"role": "assistant", "tool_calls": [call]}
                open_unit = entry.unit
                messages.append(open_assistant)
        elif body.type == "function_call_output":
            messages.append({"role": "tool", "tool_call_id": body.call_id, "content": body.output})
            open_assistant = None
        # reasoning: no representation in Chat Completions
    return {"messages": messages}


def count(payload: dict[str, Any], usage: Usage) -> None:
    texts: list[str] = []  # counted in one go at the end (``Usage.texts``)
    calls = 0
    for message in payload["messages"]:
        content = message.get("content")
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            for part in content:
                if part["type"] == "text":
                    texts.append(part["text"])
                elif part["type"] == "image_url":
                    usage.image(part["image_url"].get("detail"))
        for call in message.get("tool_calls", ()):
            calls += 1
            texts.append(call["function"]["name"])
            texts.append(call["function"]["arguments"])
    usage.overhead(PER_MESSAGE_TOKENS * len(payload["messages"]) + PER_TOOL_BLOCK_TOKENS * calls)
    usage.texts(texts)
