"""Field errors that name only what is on the wire.

Pydantic locates an error inside a union by the member it tried: ``str``, a tag such as
``message`` or ``opaque``, or a type's own name (``list[tagged-union[TextPart, ...]]``,
``function-after[_one_source(), ImagePart]``). None of that is a field a client wrote. The
helpers here keep a location's wire part (the keys and indexes of the document that was sent)
and merge what the union's members said about the same field into one message; and a chat
message sent without ``"format"`` is recognised and the client told which format it looks like.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

# Pydantic's names for the builtin members of a union (``str | list[...]``)
_BUILTIN_LABELS = frozenset({"str", "int", "float", "bool", "list", "dict", "none", "bytes"})


def is_type_label(part: object) -> bool:
    """A location part that names a pydantic type or union member, never a wire field."""
    return isinstance(part, str) and ("[" in part or "(" in part or part.lower() in _BUILTIN_LABELS)


def wire_loc(document: Any, loc: Sequence[Any], *, missing: bool = False) -> list[str | int]:
    """``loc`` reduced to the keys and indexes that exist in ``document`` (walked from its
    root); with ``missing``, the last part is kept too (the absent key the error names).
    Union members' labels, which name nothing in the document, are left out."""
    out: list[str | int] = []
    node = document
    last = len(loc) - 1
    for n, part in enumerate(loc):
        if isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            out.append(part)
            node = node[part]
        elif isinstance(node, Mapping) and isinstance(part, str) and part in node:
            out.append(part)
            node = node[part]
        elif n == last and missing and isinstance(node, Mapping) and not is_type_label(part):
            out.append(part)
    return out


def merge_union_errors(errors: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One error per location: what several union members said of the same field is joined
    ("Input should be a valid string or a valid list"); an error whose location is a strict
    prefix of another's (a member that failed earlier than the one that got further) goes."""
    by_loc: dict[tuple[Any, ...], dict[str, Any]] = {}
    for error in errors:
        key = tuple(error["loc"])
        seen = by_loc.get(key)
        if seen is None:
            by_loc[key] = dict(error)
            continue
        msg = error["msg"]
        if msg in seen["msg"]:
            continue
        if msg.startswith("Input should be ") and seen["msg"].startswith("Input should be "):
            msg = msg.removeprefix("Input should be ")
        seen["msg"] = f"{seen['msg']} or {msg}"
    keys = list(by_loc)
    return [by_loc[k] for k in keys if not any(len(o) > len(k) and o[: len(k)] == k for o in keys)]


_RESPONSES_PARTS = frozenset(
    {"input_text", "output_text", "input_image", "input_file", "input_audio", "refusal"}
)
_ANTHROPIC_PARTS = frozenset(
    {
        "tool_use",
        "tool_result",
        "thinking",
        "redacted_thinking",
        "document",
        "server_tool_use",
        "search_result",
    }
)
_CHAT_PARTS = frozenset({"image_url", "input_audio", "file"})


def probable_format(entry: Mapping[str, Any]) -> str | None:
    """The wire format a canonical item that failed validation was most likely written in:
    a message with a ``role`` but no ``type`` is a provider's chat message. None when the
    entry does not look like one."""
    if "type" in entry or "role" not in entry:
        return None
    if "parts" in entry:
        return "gemini"
    if entry.get("role") == "tool" or "tool_calls" in entry or "tool_call_id" in entry:
        return "openai-chat"
    content = entry.get("content")
    kinds = (
        {p.get("type") for p in content if isinstance(p, Mapping)}
        if isinstance(content, list)
        else set()
    )
    if kinds & _RESPONSES_PARTS - {"input_audio", "refusal"}:
        return "openai-responses"
    if kinds & _ANTHROPIC_PARTS or any(
        isinstance(p, Mapping) and isinstance(p.get("source"), Mapping)
        for p in (content if isinstance(content, list) else [])
    ):
        return "anthropic"
    return "openai-chat"


def format_hint(fmt: str) -> str:
    article = "an" if fmt[0] in "aeiou" else "a"
    return (
        f'this looks like {article} {fmt} message; set "format": "{fmt}" on the append '
        '(or add "type": "message" to write it in the canonical format)'
    )
