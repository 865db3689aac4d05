"""The ``anthropic`` format: Messages API ``system`` + ``messages``.

Ingest: every message and block of the SDK's ``MessageParam`` is accepted and stored exactly
as sent (``cache_control``, citations, ids, everything); only the envelope keys ``pinned`` and
``metadata`` are taken off a message. The top-level ``system`` (a string or text blocks) is
stored as one system item, first. A message is split into canonical items by block, for the
projection:

- runs of content blocks (``text``, ``image``, ``document``, ``search_result``,
  ``server_tool_use`` and the server tools' ``*_tool_result`` blocks, ``container_upload``,
  any newer block) form one message item: text blocks are its text parts, images its image
  parts, the rest other parts (a server tool's use and its result sit in the same run, so they
  are never parted);
- ``tool_use`` (assistant) becomes a ``function_call`` (``input`` serialised with
  ``json.dumps(..., ensure_ascii=False)``), ``tool_result`` (user) a ``function_call_output``
  (its content a string or parts; ``is_error`` kept);
- ``thinking`` becomes reasoning with ``content`` and ``signature``; ``redacted_thinking``
  reasoning with ``encrypted_content`` and ``redacted``.

A message that yields one item is stored whole (``{"message": M}``); a longer one as its
blocks, item by item, the first item also holding the message without its blocks (``head``),
so the message can be put back together exactly.

Render: items ingested in this format come back exactly as they were sent: a stored message
whole, a split one rejoined from its blocks where they follow each other unchanged (a message
with some blocks left out keeps the rest, in order). Other items are rendered in this format's
idiom:

- ``system``: the summary, then every system/developer message not written as an Anthropic
  message, as text blocks (a single string source stays a string; an Anthropic ``system``
  alone comes back as sent), in order; the key is absent when there is none;
- an Anthropic ``role: system`` message (a member of the SDK's ``MessageParam`` union) stays
  where it was in ``messages``, as sent, except inside a turn: when the nearest user/assistant
  messages before and after it have the same role (no reply between two user messages, or the
  reply has no counterpart here), they are one turn, as the Messages API combines them, and a
  system message cannot split a turn; it then joins ``system`` in its place among the system
  messages (its text blocks as sent, ``cache_control`` included), and the turn is one message.
  Nothing is dropped; a later append that puts a user message right after a trailing system
  message moves it this way, which changes ``system`` (a new cached prefix);
- ``messages``: user-side items (user messages, tool results) and assistant-side items
  (assistant messages, tool uses, thinking) become blocks; consecutive same-role blocks merge
  into one message (a message stored whole is copied, never changed), with ``tool_result``
  blocks moved first in a merged user message; a message from a single string-content item
  keeps string content; if the first user or assistant message would be an assistant message,
  a user message ``[earlier conversation omitted]`` is put first (before any system message);
- tool ``input`` is the call's arguments parsed as a JSON object (``{}`` when empty,
  ``{"arguments": <raw>}`` when they are not a JSON object);
- images: data URLs (jpeg/png/gif/webp, base64) become base64 sources, http(s) URLs URL
  sources, ``file_id`` file sources; anything else, and images outside user messages,
  ``[image omitted]``; other parts from other formats become their text (or ``[TYPE
  omitted]``);
- only Anthropic reasoning (signature or redacted) is rendered; opaque items of other formats
  (hosted tool calls, ...) have no counterpart and are left out.

Token rule: ``system`` counts ``3`` + its texts; each message ``3`` + its blocks: text, thinking
text, the fixed image charge, ``tool_use`` ``3`` + name + ``json.dumps(input,
ensure_ascii=False)``, ``tool_result`` ``3`` + its content texts and images; any other block
the texts ``items.opaque_texts`` finds, and the image charge per ``image_url`` in it; ``redacted_thinking`` is opaque.
"""

from __future__ import annotations

import json
from collections.abc import Sequence, Set
from typing import Any

from pydantic import ValidationError

from app.domain.items import (
    CanonicalItem,
    FunctionCallItem,
    FunctionCallOutputItem,
    ImagePart,
    MessageItem,
    NewItem,
    OpaqueItem,
    OtherPart,
    ReasoningItem,
    TextPart,
)

from ._common import (
    CONTENT_OMITTED,
    IMAGE_OMITTED,
    PER_MESSAGE_TOKENS,
    PER_TOOL_BLOCK_TOKENS,
    Entry,
    Problems,
    Usage,
    build_items,
    image_to_anthropic_source,
    is_native,
    other_part_text,
    split_provider_envelope,
)

FORMAT = "anthropic"
CONTINUATION = "[earlier conversation omitted]"
_ROLES = ("user", "assistant", "system")
# Blocks that are canonical items of their own; every other block joins a content run.
_ITEM_BLOCKS = {
    "tool_use": "assistant",
    "tool_result": "user",
    "thinking": "assistant",
    "redacted_thinking": "assistant",
}


def _image(block: dict[str, Any]) -> ImagePart | OtherPart:
    source = block.get("source")
    if isinstance(source, dict):
        kind = source.get("type")
        media, data = source.get("media_type"), source.get("data")
        if kind == "base64" and isinstance(media, str) and isinstance(data, str):
            return ImagePart(url=f"data:{media};base64,{data}")
        if kind == "url" and isinstance(source.get("url"), str) and source["url"]:
            return ImagePart(url=source["url"])
        if kind == "file" and isinstance(source.get("file_id"), str) and source["file_id"]:
            return ImagePart(file_id=source["file_id"])
    return OtherPart.of(block)


def _content_part(block: dict[str, Any], loc: list[str | int], problems: Problems) -> Any:
    kind = block["type"]
    if kind == "text":
        if not isinstance(block.get("text"), str):
            problems.add([*loc, "text"], "a text block needs a string text")
            return None
        return TextPart(text=block["text"])
    if kind == "image":
        image = _image(block)
        if type(image) is OtherPart:
            problems.add(
                [*loc, "source"],
                "an image needs a source: base64 (media_type, data), url (url) or file (file_id)",
            )
            return None
        return image
    return OtherPart.of(block)


def _tool_result_output(
    content: Any, loc: list[str | int], problems: Problems
) -> str | list[Any] | None:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        problems.add(loc, "tool_result content must be a string or a list of blocks")
        return None
    parts: list[Any] = []
    for k, block in enumerate(content):
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            problems.add([*loc, k], "a content block must be an object with a string type")
            continue
        part = _content_part(block, [*loc, k], problems)
        if part is not None:
            parts.append(part)
    return parts


def _item_block(
    role: str, block: dict[str, Any], loc: list[str | int], problems: Problems
) -> CanonicalItem | None:
    kind = block["type"]
    if _ITEM_BLOCKS[kind] != role:
        problems.add([*loc, "type"], f"a {kind} block belongs in a {_ITEM_BLOCKS[kind]} message")
        return None
    try:
        if kind == "tool_use":
            args = block.get("input", {})
            if not isinstance(args, dict):
                problems.add([*loc, "input"], "tool_use input must be an object")
                return None
            return FunctionCallItem(
                call_id=block.get("id"),
                name=block.get("name"),
                arguments=json.dumps(args, ensure_ascii=False),
            )
        if kind == "tool_result":
            output = _tool_result_output(block.get("content"), [*loc, "content"], problems)
            if output is None:
                return None
            return FunctionCallOutputItem(
                call_id=block.get("tool_use_id"), output=output, is_error=block.get("is_error")
            )
        if kind == "thinking":
            return ReasoningItem(content=block.get("thinking"), signature=block.get("signature"))
        return ReasoningItem(encrypted_content=block.get("data"), redacted=True)
    except ValidationError as exc:
        problems.add_validation(loc, exc)
        return None


def _split(
    role: str, content: list[Any], loc: list[str | int], problems: Problems
) -> list[tuple[CanonicalItem, list[dict[str, Any]]]]:
    """(canonical body, the blocks it came from) for each item of a message's content."""
    out: list[tuple[CanonicalItem, list[dict[str, Any]]]] = []
    run: list[Any] = []
    run_blocks: list[dict[str, Any]] = []

    def flush() -> None:
        if run_blocks:
            out.append((MessageItem(role=role, content=list(run)), list(run_blocks)))  # type: ignore[arg-type]
            run.clear()
            run_blocks.clear()

    for k, block in enumerate(content):
        bloc = [*loc, k]
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            problems.add(bloc, "a content block must be an object with a string type")
            continue
        if block["type"] in _ITEM_BLOCKS:
            flush()
            body = _item_block(role, block, bloc, problems)
            if body is not None:
                out.append((body, [block]))
            continue
        part = _content_part(block, bloc, problems)
        if part is not None:
            run.append(part)
            run_blocks.append(block)
    flush()
    return out


def _system_body(system: Any, loc: list[str | int], problems: Problems) -> MessageItem | None:
    if isinstance(system, str):
        return MessageItem(role="system", content=system)
    if not isinstance(system, list):
        problems.add(loc, "system must be a string or a list of text blocks")
        return None
    parts: list[Any] = []
    for k, block in enumerate(system):
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            problems.add([*loc, k], "a system block must be an object with a string type")
            continue
        part = _content_part(block, [*loc, k], problems)
        if part is not None:
            parts.append(part)
    return MessageItem(role="system", content=parts)


def _message(
    data: dict[str, Any], loc: list[str | int], problems: Problems
) -> list[tuple[CanonicalItem, dict[str, Any]]]:
    """(body, record) for each canonical item of one message (see the module docstring)."""
    role = data.get("role")
    if role not in _ROLES:
        problems.add([*loc, "role"], f"role {role!r} is not supported")
        return []
    content = data.get("content")
    if isinstance(content, str):
        return [(MessageItem(role=role, content=content), {"message": data})]
    if role == "system":
        body = _system_body(content, [*loc, "content"], problems)
        return [] if body is None else [(body, {"message": data})]
    if not isinstance(content, list):
        problems.add([*loc, "content"], "content must be a string or a list of blocks")
        return []
    before = len(problems.errors)
    pieces = _split(role, content, [*loc, "content"], problems)
    if not pieces:
        if len(problems.errors) == before:
            problems.add([*loc, "content"], "a message needs at least one block")
        return []
    if len(pieces) == 1:
        return [(pieces[0][0], {"message": data})]
    head = {k: ([] if k == "content" else v) for k, v in data.items()}
    out: list[tuple[CanonicalItem, dict[str, Any]]] = [
        (pieces[0][0], {"head": head, "part": pieces[0][1]})
    ]
    out += [(body, {"role": role, "part": blocks}) for body, blocks in pieces[1:]]
    return out


def ingest(items: list[Any], *, system: Any = None) -> list[NewItem]:
    problems = Problems()
    out: list[NewItem] = []
    if system is not None:
        body = _system_body(system, ["system"], problems)
        if body is not None:
            out.append(NewItem(body=body, format=FORMAT, record={"system": system}))
    for index, raw in enumerate(items):
        loc: list[str | int] = [index]
        if not isinstance(raw, dict):
            problems.add(loc, "a message must be a JSON object")
            continue
        before = len(problems.errors)
        data, envelope = split_provider_envelope(raw)
        pieces = _message(data, loc, problems)  # every other key of a message is kept
        if len(problems.errors) == before:
            out.extend(build_items(pieces, envelope, loc, problems, format=FORMAT))
    problems.raise_if_any()
    return out


def decode_record(record: dict[str, Any]) -> CanonicalItem:
    """The canonical view of a stored record (trusted: it was validated at ingest)."""
    problems = Problems()
    body: CanonicalItem | None
    if "system" in record:
        body = _system_body(record["system"], [], problems)
    elif "message" in record:
        body = _message(record["message"], [], problems)[0][0]
    else:
        role = record["head"]["role"] if "head" in record else record["role"]
        body = _split(role, record["part"], [], problems)[0][0]
    problems.raise_if_any()
    assert body is not None
    return body


def _empty(body: MessageItem) -> bool:
    """A message with no text at all: ``""`` (Chat's audio-only reply) or only empty text
    parts (a Responses ``output_text`` of ``""``). The Messages API refuses empty content and
    empty text blocks alike."""
    content = body.content
    if isinstance(content, str):
        return content == ""
    return bool(content) and all(type(part) is TextPart and not part.text for part in content)


def representable(body: CanonicalItem, origin: str) -> bool:
    if type(body) is MessageItem and origin != FORMAT and _empty(body):
        return False  # an empty message: Anthropic refuses them
    if isinstance(body, ReasoningItem):
        if body.redacted:
            return body.encrypted_content is not None
        return body.signature is not None
    return type(body) is not OpaqueItem


def tool_input(arguments: str) -> dict[str, Any]:
    """The ``tool_use.input`` object for canonical call arguments."""
    if not arguments.strip():
        return {}
    try:
        parsed = json.loads(arguments)
    except ValueError:
        return {"arguments": arguments}
    return parsed if isinstance(parsed, dict) else {"arguments": arguments}


def _blocks_of_parts(parts: list[Any], *, images: bool) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for part in parts:
        if type(part) is TextPart:
            if part.text:  # an empty text block is refused; it says nothing
                blocks.append({"type": "text", "text": part.text})
        elif type(part) is ImagePart:
            source = image_to_anthropic_source(part) if images else None
            if source is None:
                blocks.append({"type": "text", "text": IMAGE_OMITTED})
            else:
                blocks.append({"type": "image", "source": source})
        else:
            text = other_part_text(part)
            if text is not None:
                blocks.append({"type": "text", "text": text})
    return blocks or [{"type": "text", "text": CONTENT_OMITTED}]


def _content_blocks(body: MessageItem) -> list[dict[str, Any]]:
    if isinstance(body.content, str):
        return [{"type": "text", "text": body.content}]
    return _blocks_of_parts(body.content, images=body.role == "user")


def _is_native_system(entry: Entry) -> bool:
    return is_native(entry, FORMAT) and "system" in entry.stored.record  # type: ignore[union-attr,operator]


def _is_native_message(entry: Entry) -> bool:
    return is_native(entry, FORMAT) and "message" in entry.stored.record  # type: ignore[union-attr,operator]


def _system(
    summary: str | None, entries: Sequence[Entry], moved: Set[int]
) -> str | list[dict[str, Any]] | None:
    """The top-level ``system``: the summary, then the system/developer messages not written
    as Anthropic messages, and the Anthropic ``role: system`` messages ``moved`` out of
    ``messages`` (entry indices), in order."""
    sources: list[str | Entry] = [] if summary is None else [summary]
    sources += [
        e
        for k, e in enumerate(entries)
        if type(e.body) is MessageItem
        and e.body.role in ("system", "developer")
        and (k in moved or not _is_native_message(e))
    ]
    if not sources:
        return None
    if len(sources) == 1:
        only = sources[0]
        if isinstance(only, str):
            return only
        if _is_native_system(only):
            return only.stored.record["system"]  # type: ignore[union-attr,index,no-any-return]
        if isinstance(only.body.content, str):  # type: ignore[union-attr]
            return only.body.content  # type: ignore[union-attr]
    blocks: list[dict[str, Any]] = []
    for source in sources:
        if isinstance(source, str):
            blocks.append({"type": "text", "text": source})
            continue
        native: Any = None
        if _is_native_system(source):
            native = source.stored.record["system"]  # type: ignore[union-attr,index]
        elif _is_native_message(source):
            native = source.stored.record["message"]["content"]  # type: ignore[union-attr,index]
        if isinstance(native, str):
            blocks.append({"type": "text", "text": native})
        elif isinstance(native, list) and all(b.get("type") == "text" for b in native):
            blocks += native  # text blocks as sent (``cache_control``, citations, ...)
        else:
            blocks += [
                b if b["type"] == "text" else {"type": "text", "text": IMAGE_OMITTED}
                for b in _content_blocks(source.body)  # type: ignore[arg-type]
            ]
    return blocks


def _idiom(entry: Entry) -> tuple[str, list[dict[str, Any]], str | None] | None:
    """(role, blocks, string content if any) of an item rendered in this format's idiom."""
    body = entry.body
    if type(body) is MessageItem:
        if _empty(body):
            return None  # an empty message: Anthropic refuses them
        plain = body.content if isinstance(body.content, str) else None
        return body.role, _content_blocks(body), plain
    if type(body) is FunctionCallItem:
        block = {
            "type": "tool_use",
            "id": body.call_id,
            "name": body.name,
            "input": tool_input(body.arguments),
        }
        return "assistant", [block], None
    if type(body) is FunctionCallOutputItem:
        content: Any = (
            body.output
            if isinstance(body.output, str)
            else _blocks_of_parts(body.output, images=True)
        )
        result: dict[str, Any] = {"type": "tool_result", "tool_use_id": body.call_id}
        result["content"] = content
        if body.is_error is not None:
            result["is_error"] = body.is_error
        return "user", [result], None
    if isinstance(body, ReasoningItem) and representable(body, FORMAT):
        if body.redacted:
            return (
                "assistant",
                [{"type": "redacted_thinking", "data": body.encrypted_content}],
                None,
            )
        block = {"type": "thinking", "thinking": body.content or "", "signature": body.signature}
        return "assistant", [block], None
    return None


def _absorb(last: _Message, message: dict[str, Any]) -> None:
    """Append ``message``'s blocks to ``last`` (same role). A message stored whole is copied
    first: a record is never changed."""
    if last.sealed:
        content = last.message["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
        last.message = {**last.message, "content": blocks}
        last.sealed, last.native = False, True
    more = message["content"]
    last.message["content"].extend(
        [{"type": "text", "text": more}] if isinstance(more, str) else more
    )
    last.plains.append(None)


class _Message:
    """A message being assembled: ``sealed`` ones were stored whole and take nothing more;
    ``native`` ones were rejoined from stored blocks and keep their order."""

    __slots__ = ("message", "sealed", "native", "plains")

    def __init__(
        self,
        message: dict[str, Any],
        *,
        sealed: bool = False,
        native: bool = False,
        plain: str | None = None,
    ) -> None:
        self.message = message
        self.sealed = sealed
        self.native = native
        self.plains: list[str | None] = [plain]


def _role_in_messages(entry: Entry) -> str | None:
    """The role of the message a native item lands in (``system`` for a ``role: system``
    message); ``None`` for the top-level ``system`` record."""
    record: dict[str, Any] = entry.stored.record  # type: ignore[union-attr,assignment]
    if "message" in record:
        return record["message"]["role"]  # type: ignore[no-any-return]
    if "head" in record:
        return record["head"]["role"]  # type: ignore[no-any-return]
    return record.get("role")


def _inside_a_turn(roles: Sequence[str | None]) -> set[int]:
    """Indices of the ``role: system`` messages whose nearest user/assistant messages on both
    sides have one role: those messages merge into one turn, which a system message cannot
    split. ``roles[k]``: the role of entry ``k``'s message, ``None`` if it has none."""
    inside: set[int] = set()
    before: str | None = None
    waiting: list[int] = []
    for k, role in enumerate(roles):
        if role is None:
            continue
        if role == "system":
            waiting.append(k)
            continue
        if role == before:
            inside.update(waiting)
        waiting.clear()
        before = role
    return inside


def render(
    summary: str | None, entries: Sequence[Entry], *, continuation: bool = True
) -> dict[str, Any]:
    """The payload (see the module docstring). ``continuation=False`` lists stored items as
    they were: messages stored whole take no neighbour's blocks, ``role: system`` messages stay
    in place, and no user message is put first."""
    # Where each entry goes: (its role in ``messages``, its rendering in this format's idiom,
    # ``None`` for a native item); ``None``: not in ``messages`` (``system``, or left out).
    slots: list[tuple[str, tuple[str, list[dict[str, Any]], str | None] | None] | None] = []
    for entry in entries:
        body = entry.body
        if is_native(entry, FORMAT):
            role = _role_in_messages(entry)
            slots.append(None if role is None else (role, None))
        elif type(body) is MessageItem and body.role in ("system", "developer"):
            slots.append(None)  # goes to ``system``
        else:
            rendered = _idiom(entry)
            slots.append(None if rendered is None else (rendered[0], rendered))
    # A prompt alternates (DESIGN §2): an Anthropic ``role: system`` message between two turns
    # of one side (a reply left out, or not written yet) would split the turn they merge into,
    # which the Messages API refuses; its text joins ``system`` instead (never dropped).
    moved = (
        _inside_a_turn([None if slot is None else slot[0] for slot in slots])
        if continuation
        else set()
    )
    messages: list[_Message] = []
    for k, (entry, slot) in enumerate(zip(entries, slots, strict=True)):
        if slot is None or k in moved:
            continue
        last = messages[-1] if messages else None
        idiom = slot[1]
        if idiom is None:  # native: rendered from its record
            record: dict[str, Any] = entry.stored.record  # type: ignore[union-attr,assignment]
            if "message" in record:
                message = record["message"]
                if continuation and last is not None and last.message["role"] == message["role"]:
                    # A prompt alternates (DESIGN §2): a neighbour left out made two turns of
                    # one side meet, so they become one, as the Messages API would combine them.
                    _absorb(last, message)
                    continue
                messages.append(_Message(message, sealed=True))
                continue
            if "head" in record:
                message = {
                    key: (list(record["part"]) if key == "content" else value)
                    for key, value in record["head"].items()
                }
                if continuation and last is not None and last.message["role"] == message["role"]:
                    _absorb(last, message)
                    last.native = True  # the rest of this message joins it too
                    continue
                messages.append(_Message(message, native=True))
                continue
            if last is not None and last.native and last.message["role"] == record["role"]:
                last.message["content"].extend(record["part"])
                continue
            role, blocks, plain = record["role"], list(record["part"]), None
        else:
            role, blocks, plain = idiom
        if last is not None and last.message["role"] == role and (continuation or not last.sealed):
            _absorb(last, {"role": role, "content": blocks})
        else:
            messages.append(_Message({"role": role, "content": blocks}, plain=plain))
    out: list[dict[str, Any]] = []
    first_turn = next((m.message["role"] for m in messages if m.message["role"] != "system"), None)
    if continuation and first_turn == "assistant":
        out.append({"role": "user", "content": CONTINUATION})
    for m in messages:
        if m.sealed or m.native:
            out.append(m.message)
            continue
        if len(m.plains) == 1 and m.plains[0] is not None:
            out.append({"role": m.message["role"], "content": m.plains[0]})
            continue
        blocks = m.message["content"]
        if m.message["role"] == "user":
            results = [b for b in blocks if b.get("type") == "tool_result"]
            if results:
                blocks = results + [b for b in blocks if b.get("type") != "tool_result"]
        out.append({"role": m.message["role"], "content": blocks})
    payload: dict[str, Any] = {}
    system = _system(summary, entries, moved)
    if system is not None:
        payload["system"] = system
    payload["messages"] = out
    return payload


def _count_blocks(blocks: Any, texts: list[str], usage: Usage) -> None:
    if isinstance(blocks, str):
        texts.append(blocks)
        return
    for block in blocks:
        kind = block.get("type")
        if kind == "text":
            texts.append(block["text"])
        elif kind == "image" and not isinstance(_image(block), OtherPart):
            usage.image(None)
        elif kind == "tool_use":
            usage.overhead(PER_TOOL_BLOCK_TOKENS)
            texts.append(block["name"])
            texts.append(json.dumps(block.get("input", {}), ensure_ascii=False))
        elif kind == "tool_result":
            usage.overhead(PER_TOOL_BLOCK_TOKENS)
            content = block.get("content")
            if content is not None:
                _count_blocks(content, texts, usage)
        elif kind == "thinking":
            texts.append(block.get("thinking") or "")
        elif kind != "redacted_thinking":
            usage.opaque(block, texts)


def count(payload: dict[str, Any], usage: Usage) -> None:
    texts: list[str] = []  # counted in one call: the hot path of a context read
    system = payload.get("system")
    if system is not None:
        usage.overhead(PER_MESSAGE_TOKENS)
        _count_blocks(system, texts, usage)
    for message in payload["messages"]:
        usage.overhead(PER_MESSAGE_TOKENS)
        _count_blocks(message["content"], texts, usage)
    usage.texts(texts)
