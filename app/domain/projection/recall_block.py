"""The recall block: recalled items as one text message placed in a projected prompt.

Recall (DESIGN §10) brings back items that are not in the prompt (dropped by the budget, or
archived by compaction, or from the user's other sessions) as *text*: each recalled entry
becomes one line ``[seq N, YYYY-MM-DD HH:MM UTC] role: text`` (``[seq N-M, ...] tool call
NAME(ARGS) returned: OUT`` for a call with its output, ``[session X, seq N, ...]`` for another
session's entry), oldest first, under a short header. Text only: a call never goes without its
output, an image becomes ``[image]``, reasoning and system/developer items are never recalled,
and nothing a format cannot carry is sent.

Where it goes: right before the newest user message, so the stable prefix before it (``cut:
stable``, ``cache_breakpoints``) is untouched. ``canonical``, ``openai-chat`` and
``openai-responses``: a ``system`` message of its own. ``anthropic`` has no mid-prompt system
message and its turns alternate: the block is a text block of the newest user message, after
its ``tool_result`` blocks (which must come first), before the user's own text. ``gemini``
likewise (its system instruction is outside ``contents``): a text part of the newest user
content, after its ``functionResponse`` parts.

Choice: the candidates come best first; each is taken when the block with it still fits in
the reserved share (``recall.max_tokens``, measured as the growth of the payload's exact count
under the format's rule) and the whole prompt still fits every limit; at most ``max_items``.
The rest of the prompt is the projection of the reserved budget, so its invariants hold; the
same candidates and payload give the same bytes.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from app.domain.formats import FormatName, TokenCache, payload_usage
from app.domain.formats.gemini import part_kind
from app.domain.items import (
    FunctionCallItem,
    FunctionCallOutputItem,
    MessageItem,
    StoredItem,
    parts_text,
)

from .budget import CHARS_PER_TOKEN, Budget
from .cache import MESSAGES_KEY, mark_breakpoints
from .project import ProjectedContext
from .report import RecalledEntry

# formats whose block is a part of the newest user message rather than a message of its own
_MERGED = frozenset({"anthropic", "gemini"})

HEADER_SESSION = "Earlier in this conversation (recalled, oldest first):"
HEADER_PREFIX = (
    "Earlier in this conversation and from this user's earlier sessions (recalled, oldest first):"
)
_ELLIPSIS = " […]"


@dataclass(frozen=True, slots=True)
class RecallCandidate:
    """One recallable entry: a message, or a call with its output (``last_seq`` its output's
    seq). ``own``: from the session being projected."""

    session_id: str
    seq: int
    last_seq: int
    created_at: datetime
    text: str
    score: float
    own: bool


def candidate_of(
    items: Sequence[StoredItem], *, session_id: str, score: float, own: bool, max_chars: int
) -> RecallCandidate | None:
    """The entry of one message, or of a call and its output (in either order); ``None``
    for what recall never brings back (reasoning, system/developer messages, an opaque item,
    a call without its output, an empty text). The text is cut at ``max_chars``."""
    bodies = [it.body for it in items]
    text: str | None = None
    if len(items) == 1 and type(bodies[0]) is MessageItem:
        body = bodies[0]
        if body.role in ("user", "assistant"):
            content = parts_text(body.content).strip()
            text = f"{body.role}: {content}" if content else None
    elif len(items) == 2:
        call = next((b for b in bodies if type(b) is FunctionCallItem), None)
        output = next((b for b in bodies if type(b) is FunctionCallOutputItem), None)
        if call is not None and output is not None and call.call_id == output.call_id:
            text = f"tool call {call.name}({call.arguments}) returned: {parts_text(output.output)}"
    if text is None:
        return None
    text = " ".join(text.split())  # one line per entry
    if len(text) > max_chars:
        text = text[: max(0, max_chars - len(_ELLIPSIS))] + _ELLIPSIS
    first = min(items, key=lambda it: it.seq)
    return RecallCandidate(
        session_id=session_id,
        seq=first.seq,
        last_seq=max(it.seq for it in items),
        created_at=first.created_at,
        text=text,
        score=score,
        own=own,
    )


def _stamp(when: datetime) -> str:
    if when.tzinfo is not None:
        when = when.astimezone(UTC)
    return when.strftime("%Y-%m-%d %H:%M UTC")


def entry_line(c: RecallCandidate) -> str:
    seqs = f"seq {c.seq}" if c.seq == c.last_seq else f"seq {c.seq}-{c.last_seq}"
    where = "" if c.own else f"session {c.session_id}, "
    return f"[{where}{seqs}, {_stamp(c.created_at)}] {c.text}"


def _oldest_first(chosen: Sequence[RecallCandidate]) -> list[RecallCandidate]:
    return sorted(chosen, key=lambda c: (c.created_at, not c.own, c.session_id, c.seq))


def block_text(chosen: Sequence[RecallCandidate]) -> str:
    """The block: the header, then one line per entry, oldest first."""
    header = HEADER_SESSION if all(c.own for c in chosen) else HEADER_PREFIX
    return "\n".join([header, *(entry_line(c) for c in _oldest_first(chosen))])


def _is_user_turn(message: Any, format: FormatName) -> bool:
    if not isinstance(message, dict):
        return False
    # a Gemini content without a role is the user's, as the API reads it
    role = message.get("role", "user" if format == "gemini" else None)
    if role != "user":
        return False
    if format == "canonical":
        return message.get("type") == "message"
    if format == "openai-responses":
        return message.get("type", "message") == "message"
    if format == "anthropic":
        content = message.get("content")
        return isinstance(content, str) or any(
            isinstance(b, dict) and b.get("type") != "tool_result" for b in content or []
        )
    if format == "gemini":
        return any(
            isinstance(p, dict) and part_kind(p) != "function_response"
            for p in message.get("parts") or []
        )
    return True


def insertion_index(payload: dict[str, Any], format: FormatName) -> int | None:
    """The index of the newest user message in the payload's messages (where the block goes);
    ``None`` when there is none."""
    messages = payload[MESSAGES_KEY[format]]
    for k in range(len(messages) - 1, -1, -1):
        if _is_user_turn(messages[k], format):
            return k
    return None


def with_block(
    payload: dict[str, Any], text: str, *, at: int, format: FormatName
) -> dict[str, Any]:
    """``payload`` with the block before (anthropic: inside) message ``at``; the input is not
    changed."""
    key = MESSAGES_KEY[format]
    messages = list(payload[key])
    if format == "anthropic":
        message = messages[at]
        content = message["content"]
        block = {"type": "text", "text": text}
        if isinstance(content, str):
            blocks: list[Any] = [block, {"type": "text", "text": content}]
        else:
            blocks = list(content)
            first = 0
            while (
                first < len(blocks)
                and isinstance(blocks[first], dict)
                and (blocks[first].get("type") == "tool_result")
            ):
                first += 1
            blocks.insert(first, block)
        messages[at] = {**copy.copy(message), "content": blocks}
    elif format == "gemini":
        message = messages[at]
        parts = list(message.get("parts") or [])
        first = 0
        while (
            first < len(parts)
            and isinstance(parts[first], dict)
            and part_kind(parts[first]) == "function_response"
        ):
            first += 1
        parts.insert(first, {"text": text})
        messages[at] = {**copy.copy(message), "parts": parts}
    elif format == "canonical":
        messages.insert(at, {"type": "message", "role": "system", "content": text})
    else:
        messages.insert(at, {"role": "system", "content": text})
    return {**payload, key: messages}


def recall_into(
    projected: ProjectedContext,
    candidates: Sequence[RecallCandidate],
    *,
    budget: Budget,
    format: FormatName,
    query: str | None,
    notes: Sequence[str] = (),
) -> ProjectedContext:
    """The projection of ``budget.reserved()`` (``projected``) with the recall block of the
    best ``candidates`` (best first) that fit.

    Invariants: the block grows the payload by at most ``budget.recall.max_tokens`` tokens
    (and ``CHARS_PER_TOKEN`` times that in chars) and the whole payload stays within every
    limit of ``budget``; at most ``max_items`` entries; every message of ``projected`` is
    kept, in order, unchanged but for the newest user message in ``anthropic`` (which gains
    the block as a text block); the report's counts are recomputed from the final payload;
    the same inputs give the same bytes. With no candidate chosen the payload is
    ``projected``'s (cache markers placed as ``budget`` asks)."""
    spec = budget.recall
    assert spec is not None
    r = spec.max_tokens
    payload = projected.payload
    report = projected.report
    cache = TokenCache(budget.tokenizer)
    at = insertion_index(payload, format)
    extra_notes = list(notes)
    chosen: list[RecallCandidate] = []
    final = payload
    # the rest's counts: the report is honest (its counts are the payload's)
    base_tokens, base_chars = report.projected_tokens, report.projected_chars
    tokens, chars = base_tokens, base_chars
    if at is None:
        if candidates:
            extra_notes.append("recall: no user message in the prompt to recall before")
    else:
        key = MESSAGES_KEY[format]
        # Each trial is measured on the message the block changes alone (the formats count
        # message by message), then the whole payload once at the end, exactly; should the
        # whole disagree, the last entries taken are given back until it fits.
        alone = {key: [payload[key][at]]} if format in _MERGED else {key: []}
        alone_tokens, alone_chars = payload_usage(
            format, alone, tokenizer=budget.tokenizer, cache=cache
        )

        def fits(tokens: int, chars: int) -> bool:
            return (
                tokens - base_tokens <= r
                and chars - base_chars <= CHARS_PER_TOKEN * r
                and (budget.max_tokens is None or tokens <= budget.max_tokens)
                and (budget.max_chars is None or chars <= budget.max_chars)
            )

        for candidate in candidates:
            if len(chosen) >= spec.max_items:
                break
            trial = [*chosen, candidate]
            one = with_block(alone, block_text(trial), at=0, format=format)
            one_tokens, one_chars = payload_usage(
                format, one, tokenizer=budget.tokenizer, cache=cache
            )
            if fits(base_tokens + one_tokens - alone_tokens, base_chars + one_chars - alone_chars):
                chosen = trial
        while chosen:
            final = with_block(payload, block_text(chosen), at=at, format=format)
            tokens, chars = payload_usage(format, final, tokenizer=budget.tokenizer, cache=cache)
            if fits(tokens, chars):
                break
            chosen.pop()
            final, tokens, chars = payload, base_tokens, base_chars
    prefix = report.stable_prefix
    if chosen:
        assert at is not None
        prefix = min(prefix, at)
    notes_out = list(report.notes)
    if budget.cache_breakpoints:
        if format == "anthropic":
            final, _ = mark_breakpoints(final, stable_prefix=prefix)
        else:
            notes_out.append(f"cache_breakpoints: {format} has no cache markers; nothing marked")
    # (cache markers change no count)
    recalled = [
        RecalledEntry(
            seq=c.seq,
            session_id=c.session_id,
            score=c.score,
            tokens=cache.count(entry_line(c)),
        )
        for c in _oldest_first(chosen)
    ]
    if chosen:
        notes_out.append(f"recall: {len(chosen)} entries, {tokens - base_tokens} tokens of {r}")
    notes_out += extra_notes
    new_report = report.model_copy(
        update={
            "projected_tokens": tokens,
            "projected_chars": chars,
            "stable_prefix": prefix,
            "notes": notes_out,
            "recalled": recalled,
            "recall_query": query,
        }
    )
    return ProjectedContext(payload=final, report=new_report, needs_more=projected.needs_more)
