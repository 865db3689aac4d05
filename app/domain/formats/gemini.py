"""The ``gemini`` format: Gemini API ``contents`` + ``system_instruction``.

Ingest: every ``Content`` (``role`` ``user``, ``model``, the older ``function``, or none,
which the API reads as ``user``) and every ``Part`` is accepted and stored exactly as sent, in
the REST API's camelCase or the Python SDK's snake_case (``inlineData`` / ``inline_data``;
keys whose value is ``null``, as a dumped SDK model has them, count as absent). Only the
envelope keys ``pinned`` and ``metadata`` are taken off a content. The request's
``systemInstruction`` (a ``Content`` or a string) is stored as one system item, first. A
content is split into canonical items by part, for the projection:

- runs of content parts (``text``, ``inlineData``, ``fileData``, ``executableCode``,
  ``codeExecutionResult``, ``toolCall``, ``toolResponse``, any newer part) form one message
  item: text parts are its text parts (an empty one, which carries nothing, stays in the
  record only: a run of nothing else is an empty message), ``inlineData`` with an
  ``image/*`` type an image (a ``data:`` URL), the rest other parts (a model-run tool's code
  and its result sit in the same run, so they are never parted);
- ``functionCall`` (model side) becomes a ``function_call`` (``args`` serialised with
  ``json.dumps(..., ensure_ascii=False)``), ``functionResponse`` (user side) a
  ``function_call_output`` (``response`` ``{"output": S}`` gives ``S``, ``{"error": S}``
  gives ``S`` with ``is_error``, any other object its JSON);
- a text part with ``thought: true`` becomes reasoning (its text the summary, its
  ``thoughtSignature`` the encrypted content); a signature on any other part stays in the
  record.

A call and its response pair by ``id`` when they have one; without one, by name and order, as
the API does: the k-th response named N in a user content answers the k-th call named N in
the model content before it. Their derived key is ``gm_`` + the name (every character outside
``[A-Za-z0-9-]`` escaped as ``_XX``) + ``_nK`` for K > 0, a valid tool id in every format; an
output answers the latest earlier call with its key, so a name repeated turn after turn pairs
with its own turn's call.

A content that yields one item is stored whole (``{"content": C}``); a longer one as its
parts, item by item, the first item also holding the content without its parts (``head``), so
it can be put back together exactly.

Render: items ingested in this format come back exactly as they were sent (a split content is
rejoined from its parts while they follow each other unchanged). Other items are rendered in
this format's idiom, camelCase:

- ``system_instruction``: the summary, then every system/developer message, as text parts
  (a stored ``systemInstruction`` alone comes back as sent); absent when there is none;
- ``contents``: user-side items (user messages, tool results) in ``user`` contents,
  model-side items (assistant messages, calls, thoughts) in ``model`` contents; consecutive
  contents of one side merge (the API wants turns to alternate; a content stored whole is
  copied, never changed), with ``functionResponse`` parts first in a merged user content; if
  the first content would be a model content, a user content ``[earlier conversation
  omitted]`` is put first (a model turn follows a user turn);
- a call: ``functionCall`` ``{name, args}`` (the arguments parsed as a JSON object, ``{}``
  when empty, ``{"arguments": <raw>}`` otherwise) with ``id`` its call id, unless it was
  written in this format without one; an output: ``functionResponse`` ``{name, response}``
  (``{"output": text}``, ``{"error": text}`` when it is an error), named after its call;
- images: ``data:`` URLs become ``inlineData``, http(s) URLs ``fileData`` (``fileUri``), a
  provider ``file_id`` and images in tool outputs ``[image omitted]``; other parts from other
  formats become their text (or ``[TYPE omitted]``);
- only reasoning written in this format is rendered (from its record); another provider's
  reasoning, trimmed reasoning and opaque items have no counterpart and are left out; so is an
  empty message (Chat's audio-only reply).

Token rule (Gemini's tokenizer is not public: the budget's tokenizer stands in for it, see
docs/api-guide.md): ``system_instruction`` counts ``3`` + its texts; each content ``3`` + its
parts: text (thoughts too), the fixed image charge per ``image/*`` ``inlineData`` or
``fileData``, ``functionCall`` ``3`` + name + ``json.dumps(args, ensure_ascii=False)``,
``functionResponse`` ``3`` + name + ``json.dumps(response, ensure_ascii=False)``; any other
part the texts ``items.opaque_texts`` finds.
"""

from __future__ import annotations

import hashlib
import json
import re
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
    is_native,
    other_part_text,
    split_provider_envelope,
)

FORMAT = "gemini"
CONTINUATION = "[earlier conversation omitted]"
_ROLES = (None, "user", "model", "function")
_MODEL = "model"

# A part holds one of these (snake_case as the SDK names them; the REST API's camelCase too).
DATA_FIELDS = (
    "text",
    "inline_data",
    "file_data",
    "function_call",
    "function_response",
    "executable_code",
    "code_execution_result",
    "tool_call",
    "tool_response",
)
_ITEM_PARTS = {"function_call": "model", "function_response": "user"}
_SAFE_NAME = re.compile(r"[A-Za-z0-9-]")
_IMAGE_DATA_URL = re.compile(r"^data:(image/[A-Za-z0-9.+-]+);base64,(.*)$", re.DOTALL)


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(word.title() for word in rest)


_CAMEL = {name: camel(name) for name in (*DATA_FIELDS, "thought_signature", "mime_type")}


def field(data: dict[str, Any], name: str) -> Any:
    """``data``'s value for the snake_case ``name``, written in either case (``None`` if
    absent or null)."""
    value = data.get(_CAMEL.get(name) or camel(name))
    return data.get(name) if value is None else value


def part_kind(part: dict[str, Any]) -> str:
    """The snake_case data field a part holds; ``"part"`` for one with none (a part carrying
    only metadata, such as a bare ``thoughtSignature``)."""
    for name in DATA_FIELDS:
        if field(part, name) is not None:
            return name
    return "part"


def data_keys(part: dict[str, Any]) -> list[str]:
    """The data fields a part sets, as spelled (the API takes exactly one, or none)."""
    return [
        key
        for name in DATA_FIELDS
        for key in dict.fromkeys((_CAMEL[name], name))
        if part.get(key) is not None
    ]


def _side(role: Any) -> str:
    return "model" if role == _MODEL else "user"


def derived_call_id(name: str, nth: int) -> str:
    """The pairing key of a call or response without an ``id`` (see the module docstring)."""
    escaped = "".join(c if _SAFE_NAME.match(c) else f"_{ord(c):02x}" for c in name)
    key = f"gm_{escaped}" + (f"_n{nth}" if nth else "")
    if len(key) > 200:  # a very long name: still a valid tool id in every format
        key = "gm_" + hashlib.sha256(key.encode()).hexdigest()[:40]
    return key


def _other(kind: str, part: dict[str, Any]) -> OtherPart:
    # the canonical view of a part it has no field for: the part with its kind as ``type``
    return OtherPart.model_construct(type=kind, data={"type": kind, **part})


def _content_part(part: dict[str, Any], kind: str) -> Any:
    if kind == "text":
        return TextPart(text=part["text"])
    if kind == "inline_data":
        blob = field(part, "inline_data")
        if isinstance(blob, dict):
            mime, data = field(blob, "mime_type"), blob.get("data")
            if isinstance(mime, str) and mime.startswith("image/") and isinstance(data, str):
                if data:
                    return ImagePart(url=f"data:{mime};base64,{data}")
    return _other(kind, part)


def _response_output(response: Any) -> tuple[str, bool | None]:
    if isinstance(response, dict) and len(response) == 1:
        ((key, value),) = response.items()
        if isinstance(value, str) and key in ("output", "error"):
            return value, (True if key == "error" else None)
    if response is None:
        return "", None
    return json.dumps(response, ensure_ascii=False), None


def _item_part(
    side: str, part: dict[str, Any], kind: str, nth: int, loc: list[str | int], problems: Problems
) -> CanonicalItem | None:
    if _ITEM_PARTS[kind] != side:
        where = "model" if _ITEM_PARTS[kind] == "model" else "user"
        problems.add([*loc, camel(kind)], f"a {camel(kind)} part belongs in a {where} content")
        return None
    spec = field(part, kind)
    if not isinstance(spec, dict):
        problems.add([*loc, camel(kind)], f"{camel(kind)} must be an object")
        return None
    name, own_id = spec.get("name"), spec.get("id")
    if own_id is not None and (not isinstance(own_id, str) or not 0 < len(own_id) <= 256):
        problems.add([*loc, camel(kind), "id"], "id must be a string of 1 to 256 characters")
        return None
    if not isinstance(name, str) or not 0 < len(name) <= 256:
        problems.add([*loc, camel(kind), "name"], "a name is required (1 to 256 characters)")
        return None
    call_id = own_id if own_id is not None else derived_call_id(name, nth)
    try:
        if kind == "function_call":
            args = spec.get("args")
            if args is not None and not isinstance(args, dict):
                problems.add([*loc, camel(kind), "args"], "args must be an object")
                return None
            arguments = json.dumps(args or {}, ensure_ascii=False)
            return FunctionCallItem(call_id=call_id, name=name, arguments=arguments)
        response = spec.get("response")
        if response is not None and not isinstance(response, dict):
            problems.add([*loc, camel(kind), "response"], "response must be an object")
            return None
        output, is_error = _response_output(response)
        extra = spec.get("parts")
        if extra is not None and (
            not isinstance(extra, list) or not all(isinstance(p, dict) for p in extra)
        ):
            problems.add([*loc, camel(kind), "parts"], "parts must be a list of objects")
            return None
        if extra:  # a multimodal result: its media (FunctionResponsePart) after the response
            parts: list[Any] = [TextPart(text=output)] if output else []
            for inner in extra:
                kind = part_kind(inner)
                parts.append(_content_part(inner, "part" if kind == "text" else kind))
            return FunctionCallOutputItem(call_id=call_id, output=parts, is_error=is_error)
        return FunctionCallOutputItem(call_id=call_id, output=output, is_error=is_error)
    except ValidationError as exc:
        problems.add_validation(loc, exc)
        return None


def _split(
    role: Any, parts: list[Any], loc: list[str | int], problems: Problems, *, first_nth: int = 0
) -> list[tuple[CanonicalItem, list[dict[str, Any]], int]]:
    """(canonical body, the parts it came from, its call's ordinal) for each item of a
    content's parts. ``first_nth``: the ordinal of a lone call part (a stored split item)."""
    side = _side(role)
    out: list[tuple[CanonicalItem, list[dict[str, Any]], int]] = []
    run: list[Any] = []
    run_parts: list[dict[str, Any]] = []
    seen: dict[tuple[str, str], int] = {}  # (kind, name) -> calls/responses without id so far

    def flush() -> None:
        if run_parts:
            content = list(run) or ""  # only empty texts: an empty message (as Chat's audio reply)
            out.append((MessageItem(role="assistant" if side == "model" else "user", content=content), list(run_parts), 0))  # fmt: skip
            run.clear()
            run_parts.clear()

    for k, part in enumerate(parts):
        ploc = [*loc, k]
        if not isinstance(part, dict):
            problems.add(ploc, "a part must be an object")
            continue
        keys = data_keys(part)
        if len(keys) > 1:
            problems.add(ploc, f"a part holds one of its data fields, not {', '.join(keys)}")
            continue
        kind = part_kind(part)
        if kind in _ITEM_PARTS:
            flush()
            spec = field(part, kind)
            nth = first_nth
            if isinstance(spec, dict) and spec.get("id") is None:
                key = (kind, str(spec.get("name")))
                nth += seen.get(key, 0)
                seen[key] = seen.get(key, 0) + 1
            body = _item_part(side, part, kind, nth, ploc, problems)
            if body is not None:
                out.append((body, [part], nth))
            continue
        if kind == "text" and not isinstance(part["text"], str):
            problems.add([*ploc, "text"], "text must be a string")
            continue
        if kind == "text" and part.get("thought") is True and side == "model":
            flush()
            signature = field(part, "thought_signature")
            body = ReasoningItem(
                summary=[part["text"]],
                encrypted_content=signature if isinstance(signature, str) else None,
            )
            out.append((body, [part], 0))
            continue
        if kind != "text" or part["text"]:  # an empty text carries nothing to another format
            run.append(_content_part(part, kind))
        run_parts.append(part)
    flush()
    return out


def _system_body(system: Any, loc: list[str | int], problems: Problems) -> MessageItem | None:
    if isinstance(system, str):
        return MessageItem(role="system", content=system)
    parts = system.get("parts") if isinstance(system, dict) else system
    if not isinstance(parts, list):
        problems.add(loc, "systemInstruction must be a string or a Content with parts")
        return None
    out: list[Any] = []
    for k, part in enumerate(parts):
        if isinstance(part, str):  # the SDK takes a list of strings too
            if part:
                out.append(TextPart(text=part))
        elif isinstance(part, dict):
            kind = part_kind(part)
            if kind == "text" and not isinstance(part["text"], str):
                problems.add([*loc, k, "text"], "text must be a string")
                continue
            if kind != "text" or part["text"]:  # an empty text carries nothing
                out.append(_content_part(part, kind))
        else:
            problems.add([*loc, k], "a part must be an object")
    return MessageItem(role="system", content=out or "")


def _content(
    data: dict[str, Any], loc: list[str | int], problems: Problems
) -> list[tuple[CanonicalItem, dict[str, Any]]]:
    """(body, record) for each canonical item of one content (see the module docstring)."""
    role = data.get("role")
    if role not in _ROLES:
        problems.add([*loc, "role"], f"role {role!r} is not supported (user or model)")
        return []
    parts = data.get("parts")
    if not isinstance(parts, list):
        problems.add([*loc, "parts"], "parts must be a list of parts")
        return []
    before = len(problems.errors)
    pieces = _split(role, parts, [*loc, "parts"], problems)
    if not pieces:
        if len(problems.errors) == before:
            problems.add([*loc, "parts"], "a content needs at least one part")
        return []
    if len(pieces) == 1:
        return [(pieces[0][0], {"content": data})]
    head = {k: ([] if k == "parts" else v) for k, v in data.items()}
    out: list[tuple[CanonicalItem, dict[str, Any]]] = []
    for k, (body, part_list, nth) in enumerate(pieces):
        record: dict[str, Any] = {"head": head} if k == 0 else {"role": role}
        record["part"] = part_list
        if nth:
            record["nth"] = nth
        out.append((body, record))
    return out


def ingest(items: list[Any], *, system_instruction: Any = None) -> list[NewItem]:
    problems = Problems()
    out: list[NewItem] = []
    if system_instruction is not None:
        body = _system_body(system_instruction, ["system_instruction"], problems)
        if body is not None:
            out.append(
                NewItem(body=body, format=FORMAT, record={"system_instruction": system_instruction})
            )
    for index, raw in enumerate(items):
        loc: list[str | int] = [index]
        if not isinstance(raw, dict):
            problems.add(loc, "a content must be a JSON object")
            continue
        before = len(problems.errors)
        data, envelope = split_provider_envelope(raw)
        pieces = _content(data, loc, problems)
        if len(problems.errors) == before:
            out.extend(build_items(pieces, envelope, loc, problems, format=FORMAT))
    if problems.errors:
        for error in problems.errors:  # the systemInstruction's loc is not under ``items``
            if error["loc"][:2] == ["items", "system_instruction"]:
                error["loc"] = error["loc"][1:]
    problems.raise_if_any()
    return out


def decode_record(record: dict[str, Any]) -> CanonicalItem:
    """The canonical view of a stored record (trusted: it was validated at ingest)."""
    problems = Problems()
    body: CanonicalItem | None
    if "system_instruction" in record:
        body = _system_body(record["system_instruction"], [], problems)
    elif "content" in record:
        body = _content(record["content"], [], problems)[0][0]
    else:
        role = record["head"].get("role") if "head" in record else record.get("role")
        body = _split(role, record["part"], [], problems, first_nth=record.get("nth", 0))[0][0]
    problems.raise_if_any()
    assert body is not None
    return body


def representable(body: CanonicalItem, origin: str) -> bool:
    if type(body) is MessageItem:
        return body.content != "" or origin == FORMAT
    if isinstance(body, ReasoningItem):
        return origin == FORMAT
    return type(body) in (FunctionCallItem, FunctionCallOutputItem)


# -- render -------------------------------------------------------------------------------------


def tool_args(arguments: str) -> dict[str, Any]:
    """The ``functionCall.args`` object for canonical call arguments."""
    if not arguments.strip():
        return {}
    try:
        parsed = json.loads(arguments)
    except ValueError:
        return {"arguments": arguments}
    return parsed if isinstance(parsed, dict) else {"arguments": arguments}


def _image(part: ImagePart) -> dict[str, Any] | None:
    if part.url is None:
        return None
    match = _IMAGE_DATA_URL.match(part.url)
    if match:
        return {"inlineData": {"mimeType": match.group(1), "data": match.group(2)}}
    if part.url.startswith(("https://", "http://")):
        return {"fileData": {"fileUri": part.url}}
    return None


def image_usable(part: ImagePart, *, in_output: bool) -> bool:
    """Whether an image is rendered as an image here (else ``[image omitted]``)."""
    return not in_output and _image(part) is not None


def _parts_of(content: str | list[Any], *, images: bool = True) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"text": content}]
    out: list[dict[str, Any]] = []
    for part in content:
        if type(part) is TextPart:
            out.append({"text": part.text})
        elif type(part) is ImagePart:
            image = _image(part) if images else None
            out.append(image if image is not None else {"text": IMAGE_OMITTED})
        else:
            text = other_part_text(part)
            if text is not None:
                out.append({"text": text})
    return out or [{"text": CONTENT_OMITTED}]


def _text_of(output: str | list[Any]) -> str:
    if isinstance(output, str):
        return output
    return "\n".join(p["text"] for p in _parts_of(output, images=False))


def _written(entry: Entry) -> dict[str, Any] | None:
    """The ``functionCall`` / ``functionResponse`` a call or output was written as in this
    format (``None`` for an item from elsewhere)."""
    stored = entry.stored
    if stored is None or stored.format != FORMAT or not stored.record:
        return None
    record = stored.record
    parts = record["part"] if "part" in record else record["content"]["parts"]
    for part in parts:
        kind = part_kind(part)
        if kind in _ITEM_PARTS:
            return field(part, kind)  # type: ignore[no-any-return]
    return None


def _native_call_id(entry: Entry) -> bool:
    """Whether a call or output is sent with its ``id``: unless it was written in this format
    without one (an item from elsewhere always has one to give)."""
    written = _written(entry)
    return written is None or written.get("id") is not None


class _Content:
    """A content being assembled: ``sealed`` ones were stored whole and take nothing more
    (but are copied to merge with a neighbour); ``native`` ones were rejoined from stored parts."""

    __slots__ = ("content", "side", "sealed", "native")

    def __init__(
        self, content: dict[str, Any], side: str, *, sealed: bool = False, native: bool = False
    ) -> None:
        self.content = content
        self.side = side
        self.sealed = sealed
        self.native = native

    def absorb(self, parts: list[dict[str, Any]]) -> None:
        if self.sealed:
            self.content = {**self.content, "parts": list(self.content["parts"])}
            self.sealed, self.native = False, True
        self.content["parts"].extend(parts)


def _system_instruction(summary: str | None, entries: Sequence[Entry]) -> Any:
    sources: list[str | Entry] = [] if summary is None else [summary]
    sources += [
        e for e in entries if type(e.body) is MessageItem and e.body.role in ("system", "developer")
    ]
    if not sources:
        return None
    if len(sources) == 1 and not isinstance(sources[0], str) and is_native(sources[0], FORMAT):
        return sources[0].stored.record["system_instruction"]  # type: ignore[union-attr,index]
    parts: list[dict[str, Any]] = []
    for source in sources:
        if isinstance(source, str):
            parts.append({"text": source})
            continue
        if is_native(source, FORMAT):
            native = source.stored.record["system_instruction"]  # type: ignore[union-attr,index]
            if isinstance(native, str):
                parts.append({"text": native})
                continue
            listed = native.get("parts") if isinstance(native, dict) else native
            parts += [{"text": p} if isinstance(p, str) else p for p in listed]
            continue
        parts += [
            p if "text" in p else {"text": IMAGE_OMITTED}
            for p in _parts_of(source.body.content)  # type: ignore[union-attr]
        ]
    return {"parts": parts}


def _idiom(entry: Entry, names: dict[str, tuple[str, bool]]) -> list[dict[str, Any]]:
    """The parts of an item rendered in this format's idiom (one ``_side_of`` places);
    ``names``: call id -> (name, whether to send the id), filled by the calls rendered so
    far."""
    body = entry.body
    if type(body) is MessageItem:
        return _parts_of(body.content)
    if type(body) is FunctionCallItem:
        with_id = _native_call_id(entry)
        names[body.call_id] = (body.name, with_id)
        call: dict[str, Any] = {"name": body.name, "args": tool_args(body.arguments)}
        if with_id:
            call = {"id": body.call_id, **call}
        return [{"functionCall": call}]
    assert type(body) is FunctionCallOutputItem  # ``_side_of`` places nothing else
    name, with_id = names.get(body.call_id, (body.call_id, True))
    written = _written(entry)
    if written is not None:  # a response of this format (its text cleared, say)
        name, with_id = written["name"], written.get("id") is not None
    text = _text_of(body.output)
    response: dict[str, Any] = {
        "name": name,
        "response": {"error": text} if body.is_error else {"output": text},
    }
    if with_id:
        response = {"id": body.call_id, **response}
    return [{"functionResponse": response}]


def _native_side(record: dict[str, Any]) -> str:
    if "content" in record:
        return _side(record["content"].get("role"))
    if "head" in record:
        return _side(record["head"].get("role"))
    return _side(record.get("role"))


def _side_of(entry: Entry) -> str | None:
    """The side of ``contents`` an entry goes to (``model`` or ``user``); ``None`` for one that
    is not in ``contents``: a system instruction, a system/developer message, an empty
    message, what this format has no counterpart for."""
    body = entry.body
    if is_native(entry, FORMAT):
        record: dict[str, Any] = entry.stored.record  # type: ignore[union-attr,assignment]
        return None if "system_instruction" in record else _native_side(record)
    if type(body) is MessageItem:
        if body.role in ("system", "developer") or body.content == "":
            return None
        return "model" if body.role == "assistant" else "user"
    if type(body) is FunctionCallItem:
        return "model"
    if type(body) is FunctionCallOutputItem:
        return "user"
    return None


def opens_on_model(entries: Sequence[Entry]) -> bool:
    """Whether ``render`` puts the ``[earlier conversation omitted]`` user content first in the
    payload of ``entries``: its first content would be a model content."""
    for entry in entries:
        side = _side_of(entry)
        if side is not None:
            return side == _MODEL
    return False


def filler() -> dict[str, Any]:
    """The user content ``render`` puts first when the first content would be a model
    content (``opens_on_model``)."""
    return {"role": "user", "parts": [{"text": CONTINUATION}]}


def render(
    summary: str | None, entries: Sequence[Entry], *, continuation: bool = True
) -> dict[str, Any]:
    """The payload (see the module docstring). ``continuation=False`` lists stored items as
    they were: contents stored whole take no neighbour's parts and no user content is put
    first."""
    contents: list[_Content] = []
    names: dict[str, tuple[str, bool]] = {}
    for entry in entries:
        side = _side_of(entry)
        if side is None:
            continue  # the system instruction, or not sent
        body = entry.body
        last = contents[-1] if contents else None
        if is_native(entry, FORMAT):
            record: dict[str, Any] = entry.stored.record  # type: ignore[union-attr,assignment]
            if type(body) is FunctionCallItem:
                names[body.call_id] = (body.name, _native_call_id(entry))
            if "content" in record:
                content = record["content"]
                if continuation and last is not None and last.side == side:
                    last.absorb(list(content["parts"]))
                    continue
                contents.append(_Content(content, side, sealed=True))
                continue
            if "head" in record:
                content = {
                    k: (list(record["part"]) if k == "parts" else v)
                    for k, v in record["head"].items()
                }
                if continuation and last is not None and last.side == side:
                    last.absorb(content["parts"])
                    last.native = True
                    continue
                contents.append(_Content(content, side, native=True))
                continue
            if last is not None and last.side == side and (last.native or continuation):
                last.absorb(list(record["part"]))  # its content, or (a neighbour left out,
                last.native = True  # or changed) the turn of its side before it
                continue
            role = record.get("role")
            fresh = {"role": role, "parts": list(record["part"])} if role else {"parts": list(record["part"])}  # fmt: skip
            contents.append(_Content(fresh, side, native=True))
            continue
        parts = _idiom(entry, names)
        if last is not None and last.side == side and (continuation or not last.sealed):
            last.absorb(parts)
        else:
            contents.append(_Content({"role": side, "parts": parts}, side))
    out: list[dict[str, Any]] = []
    if continuation and contents and contents[0].side == _MODEL:  # as ``opens_on_model``
        out.append(filler())
    for c in contents:
        if c.sealed or c.native or c.side == "model":
            out.append(c.content)
            continue
        parts = c.content["parts"]
        responses = [p for p in parts if part_kind(p) == "function_response"]
        if responses and len(responses) < len(parts):
            parts = responses + [p for p in parts if part_kind(p) != "function_response"]
        out.append({**c.content, "parts": parts})
    payload: dict[str, Any] = {}
    system = _system_instruction(summary, entries)
    if system is not None:
        payload["system_instruction"] = system
    payload["contents"] = out
    return payload


# -- count -------------------------------------------------------------------------------------


def _count_parts(parts: Any, texts: list[str], usage: Usage) -> None:
    if isinstance(parts, str):
        texts.append(parts)
        return
    for part in parts:
        if isinstance(part, str):
            texts.append(part)
            continue
        kind = part_kind(part)
        if kind == "text":
            texts.append(part["text"])
        elif kind in ("inline_data", "file_data"):
            blob = field(part, kind)
            mime = field(blob, "mime_type") if isinstance(blob, dict) else None
            if kind == "file_data" or (isinstance(mime, str) and mime.startswith("image/")):
                usage.image(None)
            else:
                usage.opaque(part, texts)
        elif kind == "function_call":
            spec = field(part, kind)
            usage.overhead(PER_TOOL_BLOCK_TOKENS)
            texts.append(spec.get("name") or "")
            texts.append(json.dumps(spec.get("args") or {}, ensure_ascii=False))
        elif kind == "function_response":
            spec = field(part, kind)
            usage.overhead(PER_TOOL_BLOCK_TOKENS)
            texts.append(spec.get("name") or "")
            texts.append(json.dumps(spec.get("response") or {}, ensure_ascii=False))
            if isinstance(spec.get("parts"), list):
                _count_parts(spec["parts"], texts, usage)
        else:
            usage.opaque(part, texts)


def count(payload: dict[str, Any], usage: Usage) -> None:
    texts: list[str] = []  # counted in one call: the hot path of a context read
    system = payload.get("system_instruction")
    if system is not None:
        usage.overhead(PER_MESSAGE_TOKENS)
        _count_parts(system.get("parts", []) if isinstance(system, dict) else system, texts, usage)
    for content in payload["contents"]:
        usage.overhead(PER_MESSAGE_TOKENS)
        _count_parts(content["parts"], texts, usage)
    usage.texts(texts)
