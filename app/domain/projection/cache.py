"""What the provider's prompt cache can reuse: the stable prefix, and Anthropic breakpoints.

A provider caches a byte-identical prompt prefix. ``stable_prefix`` counts the leading
payload messages that the next reads repeat byte for byte while only appends happen (until
the next step of a stable cut): the messages rendered wholly from *settled* items, minus the
last of them (a message can still grow by merging with what is appended after it). An item is
settled when nothing appended can change how it renders: it is before the clock point (stable
cut; with a tight cut, only the mandatory part before the kept tail is), before the last unit
(which may still grow), before a dangling call (its output may still come) and before
trailing reasoning (its follower may still come). An output appended for a call that already
has one regroups that call; that is an edit of the past, and the promise does not cover it.

``mark_breakpoints`` (``cache_breakpoints: true``, ``anthropic``): ``cache_control:
{"type": "ephemeral"}`` on the last block of the system prompt and of the stable prefix's
last message, never more than the API's four markers in all (markers a client stored on its
own messages count, and are kept).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from app.domain.formats import FormatName

from .render import Builder

MESSAGES_KEY: dict[str, str] = {
    "canonical": "items",
    "openai-chat": "messages",
    "openai-responses": "input",
    "anthropic": "messages",
    "gemini": "contents",
}
MAX_BREAKPOINTS = 4
EPHEMERAL: dict[str, Any] = {"type": "ephemeral"}
# Message content blocks whose Messages API param type has ``cache_control``.
_CACHEABLE_BLOCKS = frozenset(
    {
        "text",
        "image",
        "document",
        "search_result",
        "tool_use",
        "tool_result",
        "server_tool_use",
        "container_upload",
        "web_search_tool_result",
        "web_fetch_tool_result",
        "code_execution_tool_result",
        "bash_code_execution_tool_result",
        "text_editor_code_execution_tool_result",
        "tool_search_tool_result",
    }
)


def stable_prefix(
    builder: Builder,
    selected: Sequence[int],
    payload: dict[str, Any],
    *,
    settled_before: int,
    format: FormatName,
) -> int:
    """The report's ``stable_prefix`` for ``payload`` (the build of ``selected``): items with
    an index below ``settled_before`` are settled (see the module docstring)."""
    settled = [i for i in selected if i < settled_before]
    if not settled:
        return 0
    key = MESSAGES_KEY[format]
    if len(settled) == len(selected):
        return max(0, len(payload[key]) - 1)
    if 2 * len(settled) > len(selected):
        # Mostly settled (a stable cut): render only the rest, which starts at a unit
        # boundary. Rendering merges neighbours only, so the payload is the settled part's
        # messages and the rest's, less at most one merged at the seam (or the rest's leading
        # filler message): what precedes the rest's messages, but its last, is settled.
        rest = builder.payload([i for i in selected if i >= settled_before], summary=False)
        return max(0, len(payload[key]) - len(rest[key]) - 1)
    prefix = builder.payload(settled)
    if format == "anthropic" and prefix.get("system") != payload.get("system"):
        return 0
    if format == "gemini" and prefix.get("system_instruction") != payload.get("system_instruction"):
        return 0
    common = 0
    for mine, theirs in zip(prefix[key], payload[key], strict=False):
        if mine != theirs:
            break
        common += 1
    return max(0, common - 1)


def _markers(value: Any) -> int:
    if isinstance(value, dict):
        return ("cache_control" in value) + sum(_markers(v) for v in value.values())
    if isinstance(value, list):
        return sum(_markers(v) for v in value)
    return 0


def _marked_blocks(content: Any, *, system: bool) -> list[Any] | None:
    """``content`` (a string or blocks) with a marker on its last block that takes one; the
    same object when that block already has one; ``None`` when no block takes one."""
    if isinstance(content, str):
        return [{"type": "text", "text": content, "cache_control": dict(EPHEMERAL)}]
    if not isinstance(content, list):
        return None
    for k in range(len(content) - 1, -1, -1):
        block = content[k]
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text" or (not system and kind in _CACHEABLE_BLOCKS):
            if "cache_control" in block:
                return content
            blocks = list(content)
            blocks[k] = {**block, "cache_control": dict(EPHEMERAL)}
            return blocks
    return None


def mark_breakpoints(payload: dict[str, Any], *, stable_prefix: int) -> tuple[dict[str, Any], int]:
    """An anthropic payload with its breakpoints (the input is not changed: stored records
    may share its objects), and how many markers were added. Text, and so every count of the
    report, stays the same: a string content becomes one text block with the same text."""
    out = dict(payload)
    budget = MAX_BREAKPOINTS - _markers(payload)
    added = 0
    if budget > 0 and out.get("system") is not None:
        blocks = _marked_blocks(out["system"], system=True)
        if blocks is not None and blocks is not out["system"]:
            out["system"] = blocks
            added += 1
            budget -= 1
    messages = out.get("messages") or []
    if budget > 0 and 0 < stable_prefix <= len(messages):
        at = stable_prefix - 1
        message = messages[at]
        blocks = _marked_blocks(message.get("content"), system=False)
        if blocks is not None and blocks is not message.get("content"):
            messages = list(messages)
            messages[at] = {**copy.copy(message), "content": blocks}
            out["messages"] = messages
            added += 1
    return out, added
