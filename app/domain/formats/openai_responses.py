"""The ``openai-responses`` format: Responses API input items (``{"input": [...]}``).

Ingest: one canonical item per input item. ``id`` is both the Responses item id and our item
envelope id (``rs_...``/``fc_...``/``msg_...`` ids become stored item ids); ``pinned`` and
``metadata`` may be added as extra keys. Message parts: ``input_text``/``output_text`` become
text parts (output annotations and logprobs are dropped), ``input_image`` with ``image_url``
becomes an image part. Reasoning: ``summary_text`` parts become the summary, ``reasoning_text``
parts are joined into ``content``. ``status`` is ignored. Other item types, file inputs and
``file_id`` images are rejected.

Render: every message is an easy-input message ``{"type": "message", "role", "content"}``;
assistant content is always a string (text parts joined with ``"\\n"``; images become
``[image omitted]``), other roles keep the string or part list (images get ``detail`` ``auto``
when unset). Calls and outputs map one to one. Reasoning is rendered only when it is
OpenAI-style (no Anthropic signature, not redacted), with the stored item id as its ``id``.

Token rule: per item ``3`` + tokens of each text (message content, ``input_text`` parts, call
name and arguments, output, reasoning summary texts and content texts) + the fixed image
charge per ``input_image``. ``encrypted_content`` is opaque and not counted.
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
    ReasoningItem,
    TextPart,
)

from ._common import (
    IMAGE_OMITTED,
    PER_MESSAGE_TOKENS,
    Entry,
    Problems,
    Usage,
    build_items,
    check_keys,
    split_envelope,
)

_ROLES = ("user", "assistant", "system", "developer")
_TOLERATED_EMPTY = frozenset({"phase", "namespace", "caller"})


def _parts(
    content: Any, loc: list[str | int], problems: Problems
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
            if kind in ("input_text", "output_text"):
                check_keys(part, {"type", "text", "annotations", "logprobs"}, ploc, problems)
                parts.append(TextPart(text=part.get("text")))
            elif kind == "input_image":
                check_keys(
                    part,
                    {"type", "image_url", "detail"},
                    ploc,
                    problems,
                    ignorable_if_empty=frozenset({"file_id"}),
                )
                parts.append(ImagePart(url=part.get("image_url"), detail=part.get("detail")))
            else:
                problems.add([*ploc, "type"], f"content part type {kind!r} is not supported")
        except ValidationError as exc:
            problems.add_validation(ploc, exc)
    return parts


def _texts(value: Any, kind: str, loc: list[str | int], problems: Problems) -> list[str]:
    if not isinstance(value, list):
        problems.add(loc, f"must be a list of {kind} parts")
        return []
    out: list[str] = []
    for k, part in enumerate(value):
        if (
            not isinstance(part, dict)
            or part.get("type") != kind
            or not isinstance(part.get("text"), str)
        ):
            problems.add([*loc, k], f"must be a {kind} part with a text")
            continue
        check_keys(part, {"type", "text"}, [*loc, k], problems)
        out.append(part["text"])
    return out


def ingest(items: list[Any]) -> list[NewItem]:
    problems = Problems()
    out: list[NewItem] = []
    for index, raw in enumerate(items):
        loc: list[str | int] = [index]
        if not isinstance(raw, dict):
            problems.add(loc, "an input item must be a JSON object")
            continue
        before = len(problems.errors)
        data, envelope = split_envelope(raw)
        kind = data.get("type", "message" if "role" in data else None)
        body: CanonicalItem | None = None
        try:
            if kind == "message":
                check_keys(
                    data,
                    {"type", "role", "content", "status"},
                    loc,
                    problems,
                    ignorable_if_empty=_TOLERATED_EMPTY,
                )
                if data.get("role") not in _ROLES:
                    problems.add([*loc, "role"], f"role {data.get('role')!r} is not supported")
                else:
                    content = _parts(data.get("content"), [*loc, "content"], problems)
                    if content is not None:
                        body = MessageItem(role=data["role"], content=content)
            elif kind == "function_call":
                check_keys(
                    data,
                    {"type", "call_id", "name", "arguments", "status"},
                    loc,
                    problems,
                    ignorable_if_empty=_TOLERATED_EMPTY,
                )
                body = FunctionCallItem(
                    call_id=data.get("call_id"),
                    name=data.get("name"),
                    arguments=data.get("arguments", ""),
                )
            elif kind == "function_call_output":
                check_keys(
                    data,
                    {"type", "call_id", "output", "status"},
                    loc,
                    problems,
                    ignorable_if_empty=_TOLERATED_EMPTY,
                )
                output = data.get("output")
                if isinstance(output, list):
                    output = "".join(_texts(output, "input_text", [*loc, "output"], problems))
                body = FunctionCallOutputItem(call_id=data.get("call_id"), output=output)
            elif kind == "reasoning":
                check_keys(
                    data,
                    {"type", "summary", "content", "encrypted_content", "status"},
                    loc,
                    problems,
                )
                summary = _texts(
                    data.get("summary", []), "summary_text", [*loc, "summary"], problems
                )
                content = data.get("content")
                joined = (
                    None
                    if content is None
                    else "".join(_texts(content, "reasoning_text", [*loc, "content"], problems))
                )
                body = ReasoningItem(
                    summary=summary,
                    content=joined,
                    encrypted_content=data.get("encrypted_content"),
                )
            else:
                problems.add([*loc, "type"], f"input item type {kind!r} is not supported")
        except ValidationError as exc:
            problems.add_validation(loc, exc)
        if body is not None and len(problems.errors) == before:
            out.extend(build_items([body], envelope, loc, problems))
    problems.raise_if_any()
    return out


def representable(body: CanonicalItem) -> bool:
    if isinstance(body, ReasoningItem):
        return body.signature is None and not body.redacted
    return True


def _message(body: MessageItem) -> dict[str, Any]:
    if isinstance(body.content, str):
        content: str | list[dict[str, Any]] = body.content
    elif body.role == "assistant":
        content = "\n".join(
            p.text if isinstance(p, TextPart) else IMAGE_OMITTED for p in body.content
        )
    else:
        content = [
            {"type": "input_text", "text": p.text}
            if isinstance(p, TextPart)
            else {"type": "input_image", "image_url": p.url, "detail": p.detail or "auto"}
            for p in body.content
        ]
    return {"type": "message", "role": body.role, "content": content}


def render(summary: str | None, entries: Sequence[Entry]) -> dict[str, Any]:
    out: list[dict[str, Any]] = []
    if summary is not None:
        out.append({"type": "message", "role": "system", "content": summary})
    for entry in entries:
        body = entry.body
        if isinstance(body, MessageItem):
            out.append(_message(body))
        elif isinstance(body, FunctionCallItem):
            out.append(
                {
                    "type": "function_call",
                    "call_id": body.call_id,
                    "name": body.name,
                    "arguments": body.arguments,
                }
            )
        elif isinstance(body, FunctionCallOutputItem):
            out.append(
                {"type": "function_call_output", "call_id": body.call_id, "output": body.output}
            )
        elif representable(body) and entry.stored is not None:
            item: dict[str, Any] = {
                "type": "reasoning",
                "id": entry.stored.id,
                "summary": [{"type": "summary_text", "text": s} for s in body.summary],
            }
            if body.content is not None:
                item["content"] = [{"type": "reasoning_text", "text": body.content}]
            if body.encrypted_content is not None:
                item["encrypted_content"] = body.encrypted_content
            out.append(item)
    return {"input": out}


def count(payload: dict[str, Any], usage: Usage) -> None:
    texts: list[str] = []  # counted in one call: the hot path of a context read
    for item in payload["input"]:
        usage.overhead(PER_MESSAGE_TOKENS)
        kind = item["type"]
        if kind == "message":
            content = item["content"]
            if isinstance(content, str):
                texts.append(content)
            else:
                for part in content:
                    if part["type"] == "input_image":
                        usage.image(part.get("detail"))
                    else:
                        texts.append(part["text"])
        elif kind == "function_call":
            texts.append(item["name"])
            texts.append(item["arguments"])
        elif kind == "function_call_output":
            texts.append(item["output"])
        elif kind == "reasoning":
            for part in item["summary"]:
                texts.append(part["text"])
            for part in item.get("content", ()):
                texts.append(part["text"])
    usage.texts(texts)
