"""The ``openai-chat`` format: Chat Completions messages (``{"messages": [...]}``).

Ingest: every member of the SDK's ``ChatCompletionMessageParam`` union is accepted and stored
exactly as sent (``name``, ``refusal``, ``audio``, content parts of every type, ...); only the
envelope keys ``pinned`` and ``metadata`` are taken off a message. Each message becomes
canonical items, for the projection:

- ``system`` / ``developer`` / ``user``: one message item (text parts, ``image_url`` parts as
  images, other parts such as ``input_audio`` or ``file`` kept as other parts);
- ``assistant``: a message item for its ``content`` (or its ``refusal`` when there is no
  content), then one ``function_call`` per ``tool_calls`` entry (``custom`` tool calls too:
  their ``input`` is the arguments); a message with neither yields an empty assistant
  message; the deprecated ``function_call`` makes the message one call, answered by a
  ``function`` message (both keyed ``fn_NAME``);
- ``tool`` (and ``function``): one ``function_call_output``.

A message that yields one item is stored whole; an assistant message with tool calls is
stored as the message with an empty ``tool_calls`` (``head``, on its first item) and each
call entry on its own item, so it can be put back together exactly.

Render: items ingested in this format come back exactly as they were sent (a split assistant
message is rejoined from its calls while they follow each other unchanged). Other items map
back one to one, except that ``function_call`` items join the assistant message right before
them (its ``tool_calls``); inside one projection unit every assistant message and call forms a
single assistant message, so its tool messages follow it. Messages kept whole never merge, so
where working memory put another message with calls (a deprecated ``function_call``, a second
split message, or a plain user message, as LangChain's and Pydantic AI's histories may hold)
between a message's calls and their answers, each ``tool`` / ``function`` answer moves up in
a prompt to right after the message holding its call (after the answers already there): Chat
Completions requires that, and nothing else moves. A listing (``render(prompt=False)``) moves
nothing: it gives the messages back in the order they were added. Reasoning and opaque items of
other formats have no Chat Completions representation and are never rendered. Images in
non-user messages become the text ``[image omitted]``; other parts of other formats their text.

Token rule (OpenAI cookbook): per message ``3`` + tokens of each content text (or part text;
other parts: the texts ``items.opaque_texts`` finds, and the image charge per ``image_url`` in it; a ``refusal`` string) + the fixed image
charge per ``image_url`` part; per tool call ``3`` + tokens of the function name + tokens of
the arguments (custom calls: name and input); tool messages count their content.
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
    OpaqueItem,
    OtherPart,
    StoredItem,
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

FORMAT = "openai-chat"


def _parts(content: Any, loc: list[str | int], problems: Problems) -> str | list[Any] | None:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        problems.add(loc, "content must be a string or a list of content parts")
        return None
    parts: list[Any] = []
    for k, part in enumerate(content):
        ploc = [*loc, k]
        if not isinstance(part, dict) or not isinstance(part.get("type"), str):
            problems.add(ploc, "a content part must be an object with a string type")
            continue
        kind = part["type"]
        if kind == "text":
            if not isinstance(part.get("text"), str):
                problems.add([*ploc, "text"], "a text part needs a string text")
                continue
            parts.append(TextPart(text=part["text"]))
        elif kind == "image_url" and isinstance(part.get("image_url"), dict):
            image = part["image_url"]
            try:
                parts.append(ImagePart(url=image.get("url"), detail=image.get("detail")))
            except ValidationError as exc:
                problems.add_validation([*ploc, "image_url"], exc)
        else:
            parts.append(OtherPart.of(part))
    return parts


def _call(call: Any, loc: list[str | int], problems: Problems) -> FunctionCallItem | None:
    if not isinstance(call, dict):
        problems.add(loc, "a tool call must be an object")
        return None
    kind = call.get("type", "function")
    spec = call.get(kind) if kind in ("function", "custom") else None
    if not isinstance(spec, dict):
        problems.add(loc, "a tool call needs a function (or custom) object")
        return None
    arguments = spec.get("arguments", "") if kind == "function" else spec.get("input", "")
    try:
        return FunctionCallItem(call_id=call.get("id"), name=spec.get("name"), arguments=arguments)
    except ValidationError as exc:
        problems.add_validation(loc, exc)
        return None


def _message(
    data: dict[str, Any], loc: list[str | int], problems: Problems
) -> list[tuple[CanonicalItem, dict[str, Any]]]:
    """(body, record) for each canonical item of one message (see the module docstring)."""
    role = data.get("role")
    whole = {"message": data}
    try:
        if role in ("system", "developer", "user"):
            content = _parts(data.get("content"), [*loc, "content"], problems)
            return [] if content is None else [(MessageItem(role=role, content=content), whole)]
        if role in ("tool", "function"):
            output = _parts(data.get("content") or "", [*loc, "content"], problems)
            if output is None:
                return []
            call_id = data.get("tool_call_id") if role == "tool" else _fn_key(data.get("name"))
            return [(FunctionCallOutputItem(call_id=call_id, output=output), whole)]
        if role != "assistant":
            problems.add([*loc, "role"], f"role {role!r} is not supported")
            return []
        legacy = data.get("function_call")
        if isinstance(legacy, dict):
            call = FunctionCallItem(
                call_id=_fn_key(legacy.get("name")),
                name=legacy.get("name"),
                arguments=legacy.get("arguments", ""),
            )
            return [(call, whole)]
        bodies: list[tuple[CanonicalItem, Any]] = []
        content = data.get("content")
        if content is None and isinstance(data.get("refusal"), str):
            content = data["refusal"]
        if content is not None:
            parsed = _parts(content, [*loc, "content"], problems)
            if parsed is not None:
                bodies.append((MessageItem(role="assistant", content=parsed), None))
        calls = data.get("tool_calls") or []
        if not isinstance(calls, list):
            problems.add([*loc, "tool_calls"], "tool_calls must be a list")
            calls = []
        for k, entry in enumerate(calls):
            call_body = _call(entry, [*loc, "tool_calls", k], problems)
            if call_body is not None:
                bodies.append((call_body, entry))
    except ValidationError as exc:
        problems.add_validation(loc, exc)
        return []
    if not bodies:
        return [(MessageItem(role="assistant", content=""), whole)]
    if len(bodies) == 1 and not calls:
        return [(bodies[0][0], whole)]
    head = {k: ([] if k == "tool_calls" else v) for k, v in data.items()}
    out: list[tuple[CanonicalItem, dict[str, Any]]] = []
    for k, (body, call_entry) in enumerate(bodies):
        record: dict[str, Any] = {"head": head} if k == 0 else {}
        if call_entry is not None:
            record["part"] = call_entry
        out.append((body, record))
    return out


def _fn_key(name: Any) -> Any:
    """The pairing key of a deprecated ``function_call`` and its ``function`` answer (a valid
    tool id in every format: function names are ``[a-zA-Z0-9_-]``)."""
    return f"fn_{name}" if isinstance(name, str) else None


def ingest(items: list[Any]) -> list[NewItem]:
    problems = Problems()
    out: list[NewItem] = []
    for index, raw in enumerate(items):
        loc: list[str | int] = [index]
        if not isinstance(raw, dict):
            problems.add(loc, "a message must be a JSON object")
            continue
        before = len(problems.errors)
        data, envelope = split_provider_envelope(raw)
        pieces = _message(data, loc, problems)
        if len(problems.errors) == before:
            out.extend(build_items(pieces, envelope, loc, problems, format=FORMAT))
    problems.raise_if_any()
    return out


def decode_record(record: dict[str, Any]) -> CanonicalItem:
    """The canonical view of a stored record (trusted: it was validated at ingest)."""
    problems = Problems()
    if "message" in record:
        body = _message(record["message"], [], problems)[0][0]
    elif "part" in record:
        body = _call(record["part"], [], problems)  # type: ignore[assignment]
    else:  # the content of a split assistant message
        body = _message({**record["head"], "tool_calls": []}, [], problems)[0][0]
    problems.raise_if_any()
    assert body is not None
    return body


def representable(body: CanonicalItem, origin: str) -> bool:
    del origin
    return body.type != "reasoning" and type(body) is not OpaqueItem


def _content(body: MessageItem) -> str | list[dict[str, Any]]:
    if isinstance(body.content, str):
        return body.content
    parts: list[dict[str, Any]] = []
    for part in body.content:
        if type(part) is TextPart:
            parts.append({"type": "text", "text": part.text})
        elif type(part) is ImagePart and body.role == "user" and part.url is not None:
            image: dict[str, Any] = {"url": part.url}
            if part.detail is not None:
                image["detail"] = part.detail
            parts.append({"type": "image_url", "image_url": image})
        elif type(part) is ImagePart:
            parts.append({"type": "text", "text": IMAGE_OMITTED})
        else:
            text = other_part_text(part)
            if text is not None:
                parts.append({"type": "text", "text": text})
    return parts or [{"type": "text", "text": CONTENT_OMITTED}]


def _output(body: FunctionCallOutputItem) -> str | list[dict[str, Any]]:
    if isinstance(body.output, str):
        return body.output
    texts = [
        p.text
        if type(p) is TextPart
        else IMAGE_OMITTED
        if type(p) is ImagePart
        else other_part_text(p)
        for p in body.output
    ]
    return [{"type": "text", "text": t} for t in texts if t is not None] or [
        {"type": "text", "text": CONTENT_OMITTED}
    ]


def _legacy_answer(entry: Entry) -> str | None:
    """The function name, if ``entry`` answers a deprecated ``function_call`` (a ``function``
    message): it must be rendered as one, even when the projection changed its text."""
    stored = entry.stored
    if stored is None or stored.format != FORMAT or not stored.record:
        return None
    message = stored.record.get("message")
    if isinstance(message, dict) and message.get("role") == "function":
        name = message.get("name")
        return name if isinstance(name, str) else None
    return None


def is_legacy_call(stored: StoredItem) -> bool:
    """A deprecated ``function_call`` (answered by a ``function`` message, never by a
    placeholder tool message)."""
    record = stored.record
    if stored.format != FORMAT or not record:
        return False
    message = record.get("message")
    return isinstance(message, dict) and isinstance(message.get("function_call"), dict)


def _as_parts(content: str | list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content)


def render(
    summary: str | None, entries: Sequence[Entry], *, prompt: bool = True
) -> dict[str, Any]:
    """The messages of ``entries``; in a ``prompt`` (not in a listing, which keeps the order
    items were added in) each answer moved up after its call (``_answers_after_their_calls``)."""
    messages: list[dict[str, Any]] = []
    if summary is not None:
        messages.append({"role": "system", "content": summary})
    open_assistant: dict[str, Any] | None = None  # last message, while calls may still join it
    open_unit: int | None = None
    for entry in entries:
        body = entry.body
        if is_native(entry, FORMAT):
            record: dict[str, Any] = entry.stored.record  # type: ignore[union-attr,assignment]
            if "message" in record:
                messages.append(record["message"])
                open_assistant = None
                continue
            if "head" in record:
                open_assistant = {
                    k: ([] if k == "tool_calls" else v) for k, v in record["head"].items()
                }
                open_unit = entry.unit
                messages.append(open_assistant)
                if "part" in record:
                    open_assistant["tool_calls"].append(record["part"])
                continue
            # a call of a split message: its entry as sent, into the open assistant message
            # (the message it came from, or the one before it when that one was left out)
            if open_assistant is None:
                open_assistant = {"role": "assistant", "tool_calls": []}
                messages.append(open_assistant)
            open_assistant.setdefault("tool_calls", []).append(record["part"])
            open_unit = entry.unit
            continue
        if body.type == "function_call_output" and _legacy_answer(entry) is not None:
            messages.append(
                {"role": "function", "name": _legacy_answer(entry), "content": _output(body)}  # type: ignore[arg-type]
            )
            open_assistant = None
            continue
        # dispatch on the discriminator: cheaper than a failing isinstance on a pydantic class
        if body.type == "message":
            if body.role != "assistant":  # type: ignore[union-attr]
                content = body.content  # type: ignore[union-attr]
                if type(content) is not str:
                    content = _content(body)  # type: ignore[arg-type]
                messages.append({"role": body.role, "content": content})  # type: ignore[union-attr]
                open_assistant = None
            elif (
                open_assistant is not None
                and "tool_calls" in open_assistant
                and entry.unit is not None
                and entry.unit == open_unit
            ):
                if "content" in open_assistant and open_assistant["content"] is not None:
                    open_assistant["content"] = _as_parts(open_assistant["content"]) + _as_parts(
                        _content(body)  # type: ignore[arg-type]
                    )
                else:
                    open_assistant["content"] = _content(body)  # type: ignore[arg-type]
            else:
                open_assistant = {"role": "assistant", "content": _content(body)}  # type: ignore[arg-type]
                open_unit = entry.unit
                messages.append(open_assistant)
        elif body.type == "function_call":
            call = {
                "id": body.call_id,  # type: ignore[union-attr]
                "type": "function",
                "function": {"name": body.name, "arguments": body.arguments},  # type: ignore[union-attr]
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
            messages.append(
                {"role": "tool", "tool_call_id": body.call_id, "content": _output(body)}  # type: ignore[union-attr,arg-type]
            )
            open_assistant = None
        # reasoning and opaque items: no representation in Chat Completions
    for message in messages:
        if message.get("tool_calls") == [] and message.get("role") == "assistant":
            del message["tool_calls"]  # every call of a split message was left out
    return {"messages": _answers_after_their_calls(messages) if prompt else messages}


def _answers_after_their_calls(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` with each ``tool`` / ``function`` answer right after the message holding
    its call, after that message's earlier answers (stable otherwise; see the module
    docstring). An answer goes to the latest message before it holding its key, as pairing
    does; one with none stays where it is. Nearly always nothing moves and ``messages`` is
    returned as it is."""
    holder: dict[Any, int] = {}  # call key -> the latest message so far holding it
    target: dict[int, int] = {}  # answer -> the message holding its call
    last = -1  # the latest message that is not an answer
    moved = False
    for k, message in enumerate(messages):
        role = message.get("role")
        if role == "tool" or role == "function":
            key = message.get("tool_call_id") if role == "tool" else _fn_key(message.get("name"))
            at = holder.get(key)
            if at is not None:
                target[k] = at
                moved = moved or at != last
            continue
        last = k
        if role == "assistant":
            for call in message.get("tool_calls") or ():
                holder[call.get("id")] = k
            legacy = message.get("function_call")
            if isinstance(legacy, dict):
                holder[_fn_key(legacy.get("name"))] = k
    if not moved:
        return messages
    answers: dict[int, list[dict[str, Any]]] = {}
    for k, at in target.items():
        answers.setdefault(at, []).append(messages[k])
    out: list[dict[str, Any]] = []
    for k, message in enumerate(messages):
        if k not in target:
            out.append(message)
            out.extend(answers.get(k, ()))
    return out


# How a payload's count grows when whole units are rendered into it, after the mandatory items
# and before the rest (``formats.extension_slack``). Every entry brings its own texts, calls and
# images wherever it lands, and every message costs PER_MESSAGE_TOKENS; only the number of
# messages can differ from the sum of the parts, where a call (or a stored call of a split
# message) joins the open message before it across a junction. The inserted run has two
# junctions, so up to two messages fewer; and the one junction the payload had between those
# neighbours is gone, so up to one message more. (Inside a unit nothing depends on what lies
# outside it: an assistant message joins only calls of its own unit.)
EXTENSION_SLACK = (2 * PER_MESSAGE_TOKENS, PER_MESSAGE_TOKENS)


def _count_content(content: Any, texts: list[str], usage: Usage) -> None:
    if isinstance(content, str):
        texts.append(content)
    elif isinstance(content, list):
        for part in content:
            kind = part.get("type")
            if kind == "text":
                texts.append(part["text"])
            elif kind == "image_url" and isinstance(part.get("image_url"), dict):
                usage.image(part["image_url"].get("detail"))
            else:
                usage.opaque(part, texts)


def count(payload: dict[str, Any], usage: Usage) -> None:
    texts: list[str] = []  # counted in one go at the end (``Usage.texts``)
    calls = 0
    for message in payload["messages"]:
        content = message.get("content")
        if type(content) is str:  # the usual case, counted without a call
            texts.append(content)
        else:
            _count_content(content, texts, usage)
            if content is None and isinstance(message.get("refusal"), str):
                texts.append(message["refusal"])
        if "tool_calls" not in message and "function_call" not in message:
            continue
        for call in message.get("tool_calls") or ():
            calls += 1
            kind = call.get("type", "function")
            spec = call.get(kind) or {}
            texts.append(spec.get("name", ""))
            texts.append(spec.get("arguments", "") if kind == "function" else spec.get("input", ""))
        legacy = message.get("function_call")
        if isinstance(legacy, dict):
            calls += 1
            texts.append(legacy.get("name", ""))
            texts.append(legacy.get("arguments", ""))
    usage.overhead(PER_MESSAGE_TOKENS * len(payload["messages"]) + PER_TOOL_BLOCK_TOKENS * calls)
    usage.texts(texts)
