"""The ``anthropic`` format: Messages API ``system`` + ``messages``.

Ingest: the top-level ``system`` (a string, or a list of text blocks) becomes one canonical
system message first. Each message (``id``/``pinned``/``metadata`` accepted as extra keys, put
on the first canonical item it yields) is split into canonical items by block: runs of
``text``/``image`` blocks become one message item (string content stays a string); ``tool_use``
becomes ``function_call`` (``input`` serialised with ``json.dumps(..., ensure_ascii=False)``);
``tool_result`` becomes ``function_call_output`` (text blocks joined; ``is_error`` kept);
``thinking`` becomes reasoning with ``content`` and ``signature``; ``redacted_thinking`` becomes
reasoning with ``encrypted_content`` and ``redacted``. ``cache_control`` hints are dropped;
other block types are rejected.

Render:
- ``system``: the summary, then every system/developer message, as text blocks (a single
  string-content source stays a string); the key is absent when there is none;
- ``messages``: user-side items (user messages, tool results) and assistant-side items
  (assistant messages, tool uses, thinking) become blocks; consecutive same-role blocks merge
  into one message, with ``tool_result`` blocks moved first in a user message; a message from a
  single string-content item keeps string content; if the first message would be an assistant
  message, a user message ``[earlier conversation omitted]`` is put first;
- tool ``input`` is the call's arguments parsed as a JSON object (``{}`` when empty,
  ``{"arguments": <raw>}`` when they are not a JSON object);
- images: data URLs (jpeg/png/gif/webp, base64) become base64 sources, http(s) URLs URL
  sources, anything else ``[image omitted]``; images outside user messages are omitted likewise;
- only Anthropic reasoning (signature or redacted) is rendered.

Token rule: ``system`` counts ``3`` + its texts; each message ``3`` + its blocks: text, thinking
text, the fixed image charge, ``tool_use`` ``3`` + name + ``json.dumps(input,
ensure_ascii=False)``, ``tool_result`` ``3`` + its content text; ``redacted_thinking`` is opaque.
"""

from __future__ import annotations

import json
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
    PER_TOOL_BLOCK_TOKENS,
    Entry,
    Problems,
    Usage,
    build_items,
    check_keys,
    image_to_anthropic_source,
    split_envelope,
)

CONTINUATION = "[earlier conversation omitted]"
_IGNORED = frozenset({"cache_control", "citations"})


def _image(block: dict[str, Any], loc: list[str | int], problems: Problems) -> ImagePart | None:
    source = block.get("source")
    if not isinstance(source, dict):
        problems.add([*loc, "source"], "an image needs a source object")
        return None
    if source.get("type") == "base64":
        check_keys(source, {"type", "media_type", "data"}, [*loc, "source"], problems)
        media, data = source.get("media_type"), source.get("data")
        if not isinstance(media, str) or not isinstance(data, str):
            problems.add([*loc, "source"], "a base64 image needs media_type and data strings")
            return None
        return ImagePart(url=f"data:{media};base64,{data}")
    if source.get("type") == "url":
        check_keys(source, {"type", "url"}, [*loc, "source"], problems)
        return ImagePart(url=source.get("url"))
    problems.add([*loc, "source", "type"], "only base64 and url image sources are supported")
    return None


def _tool_result_text(content: Any, loc: list[str | int], problems: Problems) -> str | None:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts: list[str] = []
        for k, block in enumerate(content):
            if (
                isinstance(block, dict)
                and block.get("type") == "text"
                and isinstance(block.get("text"), str)
            ):
                check_keys(block, {"type", "text"}, [*loc, k], problems, ignored=_IGNORED)
                texts.append(block["text"])
            else:
                problems.add([*loc, k], "only text blocks are supported in a tool_result")
        return "".join(texts)
    problems.add(loc, "tool_result content must be a string or a list of text blocks")
    return None


def _blocks(
    role: str, content: Any, loc: list[str | int], problems: Problems
) -> list[CanonicalItem]:
    if isinstance(content, str):
        return [MessageItem(role=role, content=content)]  # type: ignore[arg-type]
    if not isinstance(content, list):
        problems.add(loc, "content must be a string or a list of blocks")
        return []
    bodies: list[CanonicalItem] = []
    run: list[TextPart | ImagePart] = []

    def flush() -> None:
        if run:
            bodies.append(MessageItem(role=role, content=list(run)))  # type: ignore[arg-type]
            run.clear()

    for k, block in enumerate(content):
        bloc = [*loc, k]
        if not isinstance(block, dict):
            problems.add(bloc, "a content block must be an object")
            continue
        kind = block.get("type")
        ignorable = _IGNORED
        try:
            if kind == "text":
                check_keys(block, {"type", "text"}, bloc, problems, ignored=ignorable)
                run.append(TextPart(text=block.get("text")))
            elif kind == "image" and role == "user":
                check_keys(block, {"type", "source"}, bloc, problems, ignored=ignorable)
                image = _image(block, bloc, problems)
                if image is not None:
                    run.append(image)
            elif kind == "tool_use" and role == "assistant":
                flush()
                check_keys(
                    block,
                    {"type", "id", "name", "input"},
                    bloc,
                    problems,
                    ignored=ignorable,
                )
                args = block.get("input", {})
                if not isinstance(args, dict):
                    problems.add([*bloc, "input"], "tool_use input must be an object")
                    continue
                bodies.append(
                    FunctionCallItem(
                        call_id=block.get("id"),
                        name=block.get("name"),
                        arguments=json.dumps(args, ensure_ascii=False),
                    )
                )
            elif kind == "tool_result" and role == "user":
                flush()
                check_keys(
                    block,
                    {"type", "tool_use_id", "content", "is_error"},
                    bloc,
                    problems,
                    ignored=ignorable,
                )
                output = _tool_result_text(block.get("content"), [*bloc, "content"], problems)
                if output is not None:
                    bodies.append(
                        FunctionCallOutputItem(
                            call_id=block.get("tool_use_id"),
                            output=output,
                            is_error=block.get("is_error"),
                        )
                    )
            elif kind == "thinking" and role == "assistant":
                flush()
                check_keys(block, {"type", "thinking", "signature"}, bloc, problems)
                bodies.append(
                    ReasoningItem(content=block.get("thinking"), signature=block.get("signature"))
                )
            elif kind == "redacted_thinking" and role == "assistant":
                flush()
                check_keys(block, {"type", "data"}, bloc, problems)
                bodies.append(ReasoningItem(encrypted_content=block.get("data"), redacted=True))
            else:
                problems.add(
                    [*bloc, "type"], f"block type {kind!r} is not supported in a {role} message"
                )
        except ValidationError as exc:
            problems.add_validation(bloc, exc)
    flush()
    return bodies


def ingest(items: list[Any], *, system: Any = None) -> list[NewItem]:
    problems = Problems()
    out: list[NewItem] = []
    if system is not None:
        sys_content: str | list[TextPart | ImagePart] | None = None
        if isinstance(system, str):
            sys_content = system
        elif isinstance(system, list):
            parts: list[TextPart | ImagePart] = []
            for k, block in enumerate(system):
                if (
                    isinstance(block, dict)
                    and block.get("type") == "text"
                    and isinstance(block.get("text"), str)
                ):
                    check_keys(
                        block,
                        {"type", "text"},
                        ["system", k],
                        problems,
                        ignored=_IGNORED,
                    )
                    parts.append(TextPart(text=block["text"]))
                else:
                    problems.add(["system", k], "system blocks must be text blocks")
            sys_content = parts
        else:
            problems.add(["system"], "system must be a string or a list of text blocks")
        if sys_content is not None:
            out.append(NewItem(body=MessageItem(role="system", content=sys_content)))
    for index, raw in enumerate(items):
        loc: list[str | int] = [index]
        if not isinstance(raw, dict):
            problems.add(loc, "a message must be a JSON object")
            continue
        before = len(problems.errors)
        data, envelope = split_envelope(raw)
        role = data.get("role")
        check_keys(data, {"role", "content"}, loc, problems)
        if role not in ("user", "assistant"):
            problems.add([*loc, "role"], f"role {role!r} is not supported")
            continue
        bodies = _blocks(role, data.get("content"), [*loc, "content"], problems)
        if not bodies and len(problems.errors) == before:
            problems.add([*loc, "content"], "a message needs at least one block")
        if len(problems.errors) == before:
            out.extend(build_items(bodies, envelope, loc, problems))
    problems.raise_if_any()
    return out


def representable(body: CanonicalItem) -> bool:
    if isinstance(body, ReasoningItem):
        if body.redacted:
            return body.encrypted_content is not None
        return body.signature is not None
    return True


def tool_input(arguments: str) -> dict[str, Any]:
    """The ``tool_use.input`` object for canonical call arguments."""
    if not arguments.strip():
        return {}
    try:
        parsed = json.loads(arguments)
    except ValueError:
        return {"arguments": arguments}
    return parsed if isinstance(parsed, dict) else {"arguments": arguments}


def _content_blocks(body: MessageItem) -> list[dict[str, Any]]:
    if isinstance(body.content, str):
        return [{"type": "text", "text": body.content}]
    blocks: list[dict[str, Any]] = []
    for part in body.content:
        if isinstance(part, TextPart):
            blocks.append({"type": "text", "text": part.text})
            continue
        source = image_to_anthropic_source(part) if body.role == "user" else None
        if source is None:
            blocks.append({"type": "text", "text": IMAGE_OMITTED})
        else:
            blocks.append({"type": "image", "source": source})
    return blocks


def _system(summary: str | None, entries: Sequence[Entry]) -> str | list[dict[str, Any]] | None:
    sources: list[str | MessageItem] = [] if summary is None else [summary]
    sources += [
        e.body
        for e in entries
        if isinstance(e.body, MessageItem) and e.body.role in ("system", "developer")
    ]
    if not sources:
        return None
    if len(sources) == 1:
        only = sources[0]
        if isinstance(only, str):
            return only
        if isinstance(only.content, str):
            return only.content
    blocks: list[dict[str, Any]] = []
    for source in sources:
        if isinstance(source, str):
            blocks.append({"type": "text", "text": source})
        else:
            blocks += [
                b if b["type"] == "text" else {"type": "text", "text": IMAGE_OMITTED}
                for b in _content_blocks(source)
            ]
    return blocks


def render(summary: str | None, entries: Sequence[Entry]) -> dict[str, Any]:
    # (role, blocks, string content if the message came from one string-content item)
    messages: list[tuple[str, list[dict[str, Any]], list[str | None]]] = []
    for entry in entries:
        body = entry.body
        role: str
        block: list[dict[str, Any]]
        plain: str | None = None
        if isinstance(body, MessageItem):
            if body.role in ("system", "developer"):
                continue
            role, block = body.role, _content_blocks(body)
            if isinstance(body.content, str):
                plain = body.content
        elif isinstance(body, FunctionCallItem):
            role = "assistant"
            block = [
                {
                    "type": "tool_use",
                    "id": body.call_id,
                    "name": body.name,
                    "input": tool_input(body.arguments),
                }
            ]
        elif isinstance(body, FunctionCallOutputItem):
            role = "user"
            result: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": body.call_id,
                "content": body.output,
            }
            if body.is_error is not None:
                result["is_error"] = body.is_error
            block = [result]
        else:
            if not representable(body):
                continue
            role = "assistant"
            if body.redacted:
                block = [{"type": "redacted_thinking", "data": body.encrypted_content}]
            else:
                block = [
                    {
                        "type": "thinking",
                        "thinking": body.content or "",
                        "signature": body.signature,
                    }
                ]
        if messages and messages[-1][0] == role:
            messages[-1][1].extend(block)
            messages[-1][2].append(None)
        else:
            messages.append((role, block, [plain]))
    out: list[dict[str, Any]] = []
    if messages and messages[0][0] == "assistant":
        out.append({"role": "user", "content": CONTINUATION})
    for role, blocks, plains in messages:
        if len(plains) == 1 and plains[0] is not None:
            out.append({"role": role, "content": plains[0]})
            continue
        if role == "user":
            results = [b for b in blocks if b["type"] == "tool_result"]
            blocks = results + [b for b in blocks if b["type"] != "tool_result"]
        out.append({"role": role, "content": blocks})
    payload: dict[str, Any] = {}
    system = _system(summary, entries)
    if system is not None:
        payload["system"] = system
    payload["messages"] = out
    return payload


def count(payload: dict[str, Any], usage: Usage) -> None:
    texts: list[str] = []  # counted in one call: the hot path of a context read
    system = payload.get("system")
    if system is not None:
        usage.overhead(PER_MESSAGE_TOKENS)
        if isinstance(system, str):
            texts.append(system)
        else:
            for block in system:
                texts.append(block["text"])
    for message in payload["messages"]:
        usage.overhead(PER_MESSAGE_TOKENS)
        content = message["content"]
        if isinstance(content, str):
            texts.append(content)
            continue
        for block in content:
            kind = block["type"]
            if kind == "text":
                texts.append(block["text"])
            elif kind == "image":
                usage.image(None)
            elif kind == "tool_use":
                usage.overhead(PER_TOOL_BLOCK_TOKENS)
                texts.append(block["name"])
                texts.append(json.dumps(block["input"], ensure_ascii=False))
            elif kind == "tool_result":
                usage.overhead(PER_TOOL_BLOCK_TOKENS)
                texts.append(block["content"])
            elif kind == "thinking":
                texts.append(block["thinking"])
    usage.texts(texts)
