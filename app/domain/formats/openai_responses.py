"""The ``openai-responses`` format: Responses API input items (``{"input": [...]}``).

Ingest: every member of the SDK's input item union is accepted and stored exactly as sent
(its ``id``, ``status``, ``phase``, annotations, logprobs, ``namespace``, ...: all of it); only
the envelope keys ``pinned`` and ``metadata`` are taken off. ``id`` is the provider's item id:
data that comes back, never our item id. Each input item is one canonical item whose body is
a normalised view of it, for the projection:

- ``message`` (with or without ``type``): text parts (``input_text``, ``output_text``) become
  text parts, ``input_image`` (by URL or ``file_id``) image parts, anything else (``refusal``,
  ``input_file``, ...) is kept as an other part;
- ``function_call`` / ``function_call_output`` (``output`` a string or a list of parts);
- ``reasoning``: ``summary_text`` parts become the summary, ``reasoning_text`` parts are
  joined into ``content``;
- every other type is an opaque item (``app.domain.items.OpaqueItem``); call/output pairs
  among them (``computer_call`` / ``computer_call_output``, ...) pair by their ids;
- an object without a usable ``type`` and without a ``role`` (an SDK wrapper's encrypted
  envelope) is an untyped opaque item: listed back exactly as sent, never put in a prompt
  (the projection leaves it out with a note). With a ``role`` and a ``type`` that is not a
  string, it is a broken message: an error;
- an incomplete item (``items.incomplete_kind``: a ``function_call`` or
  ``function_call_output`` whose ``call_id`` is missing, ``null`` or ``""``, a ``message``
  with ``"type": "message"`` and no ``role``), which the SDKs' own session stores keep, is an
  opaque item too: listed back exactly as sent, paired with nothing, never put in a prompt.

Render: an item ingested in this format comes back exactly as it was sent, unless the
projection changed it (a cleared tool output, trimmed reasoning). Other items are rendered in
this format's idiom: messages as easy-input messages (assistant content a string: text parts
joined with ``"\\n"``, images ``[image omitted]``), other roles keep the string or part list
(images get ``detail`` ``auto`` when unset); other parts become their text (or ``[TYPE
omitted]``); opaque items written in the canonical format, whose shapes are this format's, as
they were sent.

Reasoning: the Responses API requires a reasoning input item's ``id``
(``ResponseReasoningItemParam``) and takes back only ids it issued (``rs_...``). Reasoning
appended in this format is sent as it was appended, like every native item. Reasoning this
format writes itself is carried only under such an id (``carries``): trimmed reasoning (Tier 2:
``{"type": "reasoning", "id": ..., "summary": []}``) under the ``id`` of its own Responses
record, reasoning written in the canonical format under its item id when the client named it
``rs_...``. Without one (canonical reasoning under our ``itm_...`` id, trimmed reasoning
whose record has no ``id``) it is left out, never sent under an id of ours, and the
projection's report says so; so is another provider's reasoning (Anthropic thinking, Gemini
thoughts), whatever its id.

Token rule: per item ``3`` + tokens of each text (message content, text parts, call name and
arguments, output, reasoning summary and content texts; for any other part or item, the texts
``items.opaque_texts`` finds, and the image charge per ``image_url`` in it) + the fixed image charge per ``input_image``.
``encrypted_content`` is opaque and not counted.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from app.domain.items import (
    CORE_TYPES,
    CanonicalItem,
    FunctionCallItem,
    FunctionCallOutputItem,
    ImagePart,
    MessageItem,
    NewItem,
    OpaqueItem,
    OtherPart,
    ReasoningItem,
    StoredItem,
    TextPart,
    incomplete_kind,
    is_unsendable,
    is_usable_type,
)

from ._common import (
    CONTENT_OMITTED,
    IMAGE_OMITTED,
    PER_MESSAGE_TOKENS,
    Entry,
    Problems,
    Usage,
    build_items,
    is_native,
    other_part_text,
    split_provider_envelope,
)

FORMAT = "openai-responses"
_ROLES = ("user", "assistant", "system", "developer")
_TEXT_PARTS = ("input_text", "output_text")
# The prefix of the reasoning ids OpenAI issues (its reasoning output items' ``id``).
REASONING_ID_PREFIX = "rs_"


def _parts(content: Any, loc: list[str | int], problems: Problems) -> list[Any] | None:
    if not isinstance(content, list):
        problems.add(loc, "must be a string or a list of content parts")
        return None
    parts: list[Any] = []
    for k, part in enumerate(content):
        ploc = [*loc, k]
        if not isinstance(part, dict) or not isinstance(part.get("type"), str):
            problems.add(ploc, "a content part must be an object with a string type")
            continue
        kind = part["type"]
        if kind in _TEXT_PARTS:
            if not isinstance(part.get("text"), str):
                problems.add([*ploc, "text"], "a text part needs a string text")
                continue
            parts.append(TextPart(text=part["text"]))
        elif kind == "input_image" and (part.get("image_url") or part.get("file_id")):
            try:
                parts.append(
                    ImagePart(
                        url=part.get("image_url"),
                        file_id=part.get("file_id"),
                        detail=part.get("detail"),
                    )
                )
            except ValidationError as exc:
                problems.add_validation(ploc, exc)
        else:
            parts.append(OtherPart.of(part))
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
        out.append(part["text"])
    return out


def decode(data: dict[str, Any], loc: list[str | int], problems: Problems) -> CanonicalItem | None:
    """The canonical view of one input item (``None`` with problems added if it is invalid)."""
    kind = data.get("type", "message" if "role" in data else None)
    if incomplete_kind(data) is not None:
        # a call without its call_id, a message without its role: what the SDKs' stores keep
        return OpaqueItem.of(data)
    try:
        if kind == "message":
            if data.get("role") not in _ROLES:
                problems.add([*loc, "role"], f"role {data.get('role')!r} is not supported")
                return None
            content = data.get("content")
            if not isinstance(content, str):
                content = _parts(content, [*loc, "content"], problems)
                if content is None:
                    return None
            return MessageItem(role=data["role"], content=content)
        if kind == "function_call":
            return FunctionCallItem(
                call_id=data.get("call_id"),
                name=data.get("name"),
                arguments=data.get("arguments", ""),
            )
        if kind == "function_call_output":
            output = data.get("output")
            if not isinstance(output, str):
                output = _parts(output, [*loc, "output"], problems)
                if output is None:
                    return None
            return FunctionCallOutputItem(call_id=data.get("call_id"), output=output)
        if kind == "reasoning":
            summary = _texts(data.get("summary", []), "summary_text", [*loc, "summary"], problems)
            content = data.get("content")
            joined = (
                None
                if content is None
                else "".join(_texts(content, "reasoning_text", [*loc, "content"], problems))
            )
            return ReasoningItem(
                summary=summary, content=joined, encrypted_content=data.get("encrypted_content")
            )
    except ValidationError as exc:
        problems.add_validation(loc, exc)
        return None
    if kind is None and isinstance(data.get("id"), str) and set(data) <= {"id", "type"}:
        # an ``item_reference``, whose ``type`` the SDK makes optional
        return OpaqueItem.model_construct(type="item_reference", data=data)
    if "role" in data and not is_usable_type(kind):
        problems.add([*loc, "type"], 'a message\'s type is "message" (or absent)')
        return None
    # Any other object is an opaque item, stored as sent; without a usable ``type`` (an SDK
    # wrapper's encrypted envelope) an untyped one, which only its writer reads.
    return OpaqueItem.of(data)


def ingest(items: list[Any]) -> list[NewItem]:
    problems = Problems()
    out: list[NewItem] = []
    for index, raw in enumerate(items):
        loc: list[str | int] = [index]
        if not isinstance(raw, dict):
            problems.add(loc, "an input item must be a JSON object")
            continue
        before = len(problems.errors)
        data, envelope = split_provider_envelope(raw)
        body = decode(data, loc, problems)
        if body is not None and len(problems.errors) == before:
            out.extend(build_items([(body, data)], envelope, loc, problems, format=FORMAT))
    problems.raise_if_any()
    return out


def decode_record(record: dict[str, Any]) -> CanonicalItem:
    """The canonical view of a stored record (trusted: it was validated at ingest)."""
    problems = Problems()
    body = decode(record, [], problems)
    problems.raise_if_any()
    assert body is not None
    return body


def representable(body: CanonicalItem, origin: str) -> bool:
    """Whether this format has a counterpart for ``body``, ingested in ``origin``, at all.
    For reasoning that is only the first condition: see ``carries``."""
    if isinstance(body, ReasoningItem):  # OpenAI-style (a Gemini thought is Gemini's own)
        return body.signature is None and not body.redacted and origin != "gemini"
    if type(body) is OpaqueItem:
        return origin in (FORMAT, "canonical") and not is_unsendable(body)
    return True


def reasoning_id(item: StoredItem) -> str | None:
    """The id OpenAI issued for a stored reasoning item, if it has one: the ``id`` of its own
    Responses record, or, for an item written in the canonical format (whose envelope ``id``
    the client chose), its id when that is one of OpenAI's (``rs_...``). ``None`` otherwise:
    our own ids (``itm_...``) and a client's names are no reasoning ids."""
    if item.format == FORMAT:
        own = item.record.get("id") if item.record is not None else None
        return own if isinstance(own, str) else None
    if item.format == "canonical" and item.id.startswith(REASONING_ID_PREFIX):
        return item.id
    return None


def carries(item: StoredItem, *, changed: bool = False) -> bool:
    """Whether a prompt in this format carries ``item`` (``changed``: the projection changed
    its body, as Tier 2 trims reasoning): ``representable``; and reasoning either as it was
    appended in this format (its record, untouched: the client's own item, nothing of ours
    added), or, where this format writes the item itself, only under an id OpenAI issued
    (``reasoning_id``), which the Responses API requires of a reasoning input item and checks
    against its own."""
    body = item.body
    if type(body) is ReasoningItem:
        if not representable(body, item.format):
            return False
        if item.format == FORMAT and not changed:
            return True
        return reasoning_id(item) is not None
    return representable(body, item.format)


def _part(part: Any) -> dict[str, Any] | None:
    if type(part) is TextPart:
        return {"type": "input_text", "text": part.text}
    if type(part) is ImagePart:
        image: dict[str, Any] = {"type": "input_image", "detail": part.detail or "auto"}
        if part.url is not None:
            image["image_url"] = part.url
        if part.file_id is not None:
            image["file_id"] = part.file_id
        return image
    text = other_part_text(part)
    return None if text is None else {"type": "input_text", "text": text}


def _parts_out(parts: list[Any]) -> list[dict[str, Any]]:
    out = [r for r in map(_part, parts) if r is not None]
    return out or [{"type": "input_text", "text": CONTENT_OMITTED}]


def _message(body: MessageItem) -> dict[str, Any]:
    if isinstance(body.content, str):
        content: str | list[dict[str, Any]] = body.content
    elif body.role == "assistant":
        texts = [
            p.text
            if type(p) is TextPart
            else IMAGE_OMITTED
            if type(p) is ImagePart
            else other_part_text(p)
            for p in body.content
        ]
        content = "\n".join(t for t in texts if t is not None) or CONTENT_OMITTED
    else:
        content = _parts_out(body.content)
    return {"type": "message", "role": body.role, "content": content}


def render(summary: str | None, entries: Sequence[Entry]) -> dict[str, Any]:
    out: list[dict[str, Any]] = []
    if summary is not None:
        out.append({"type": "message", "role": "system", "content": summary})
    for entry in entries:
        body = entry.body
        if type(body) is ReasoningItem:
            reasoning = _reasoning(entry)
            if reasoning is not None:
                out.append(reasoning)
        elif is_native(entry, FORMAT):
            out.append(entry.stored.record)  # type: ignore[union-attr,arg-type]
        elif type(body) is MessageItem:
            out.append(_message(body))
        elif type(body) is FunctionCallItem:
            out.append(
                {
                    "type": "function_call",
                    "call_id": body.call_id,
                    "name": body.name,
                    "arguments": body.arguments,
                }
            )
        elif type(body) is FunctionCallOutputItem:
            output: Any = body.output if isinstance(body.output, str) else _parts_out(body.output)
            out.append({"type": "function_call_output", "call_id": body.call_id, "output": output})
        elif type(body) is OpaqueItem and not is_unsendable(body):
            out.append(body.data)
    return {"input": out}


def _reasoning(entry: Entry) -> dict[str, Any] | None:
    """A reasoning entry as an input item: only with the id OpenAI issued for it (trimmed
    reasoning keeps it: DESIGN §2, tier 2), else ``None`` (left out; see ``carries``)."""
    stored = entry.stored
    if stored is None or not carries(stored, changed=entry.body is not stored.body):
        return None
    if is_native(entry, FORMAT):
        return stored.record
    body = entry.body
    assert isinstance(body, ReasoningItem)
    item: dict[str, Any] = {"type": "reasoning", "id": reasoning_id(stored)}
    item["summary"] = [{"type": "summary_text", "text": s} for s in body.summary]
    if body.content is not None:
        item["content"] = [{"type": "reasoning_text", "text": body.content}]
    if body.encrypted_content is not None:
        item["encrypted_content"] = body.encrypted_content
    return item


def _count_parts(parts: Any, texts: list[str], usage: Usage) -> None:
    if isinstance(parts, str):
        texts.append(parts)
        return
    for part in parts:
        kind = part.get("type")
        if kind in _TEXT_PARTS:
            texts.append(part["text"])
        elif kind == "input_image" and (part.get("image_url") or part.get("file_id")):
            usage.image(part.get("detail"))
        else:
            usage.opaque(part, texts)


def count(payload: dict[str, Any], usage: Usage) -> None:
    texts: list[str] = []  # counted in one call: the hot path of a context read
    for item in payload["input"]:
        usage.overhead(PER_MESSAGE_TOKENS)
        kind = item.get("type") or ("message" if "role" in item else "item_reference")
        if kind == "message":
            _count_parts(item["content"], texts, usage)
        elif kind == "function_call":
            texts.append(item["name"])
            texts.append(item.get("arguments", ""))
        elif kind == "function_call_output":
            _count_parts(item["output"], texts, usage)
        elif kind == "reasoning":
            for part in item.get("summary", ()):
                texts.append(part["text"])
            for part in item.get("content") or ():
                texts.append(part["text"])
        elif kind not in CORE_TYPES:
            usage.opaque(item, texts)
    usage.texts(texts)
