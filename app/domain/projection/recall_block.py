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
the reserved share (``recall.max_tokens``, the growth of the payload's count under the
format's rule) and the whole prompt still fits every limit, until the share is full or
``max_items`` are taken. Each entry is tokenized once: its line, with the newline that ends
it, is a piece of the block the tokenizers split on their own (a line starts with ``[`` after
a newline, where no pre-token of ``o200k_base`` or ``cl100k_base`` spans), so the block's count
is the header's plus its lines' (``approx``: a quarter of the summed characters, rounded up),
and the message around it adds a fixed framing measured once (``BlockCost``). The rest of the
prompt is the projection of the reserved budget, so its invariants hold; the same candidates
and payload give the same bytes.
"""

from __future__ import annotations

import copy
import math
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
from app.domain.tokens import TokenizerName

from .budget import CHARS_PER_TOKEN, MAX_ENTRY_CHARS, Budget
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
# No entry's line (with its newline) is shorter than ``[seq 1, 2025-01-01 00:00 UTC] x``: its
# bracket alone splits into more than this many tokens under every tokenizer.
MIN_LINE_CHARS = len("[seq 1, 2025-01-01 00:00 UTC] x\n")
MIN_LINE_TOKENS = 8


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


def entry_chars(share_tokens: int) -> int:
    """The most characters an entry's text keeps for a share of ``share_tokens`` tokens (see
    ``MAX_ENTRY_CHARS``)."""
    return min(CHARS_PER_TOKEN * share_tokens, MAX_ENTRY_CHARS)


def candidate_of(
    items: Sequence[StoredItem], *, session_id: str, score: float, own: bool, max_chars: int
) -> RecallCandidate | None:
    """The entry of one message, or of a call and the output(s) answering it (the call
    first; the caller pairs them by the projection's rule); ``None`` for what recall never
    brings back (reasoning, system/developer messages, an opaque item, a call without its
    output, an empty text). The text is one line of at most ``max_chars`` characters (cut
    with `` […]``); a longer item is cut before its whitespace is collapsed, so the work
    stays bounded by ``max_chars`` whatever the item's size."""
    bodies = [it.body for it in items]
    limit = 4 * max_chars + 64  # raw text kept before collapsing whitespace (which shrinks it)
    text: str | None = None
    if len(items) == 1 and type(bodies[0]) is MessageItem:
        body = bodies[0]
        if body.role in ("user", "assistant"):
            content = parts_text(body.content)[:limit].strip()
            text = f"{body.role}: {content}" if content else None
    elif len(items) >= 2 and type(bodies[0]) is FunctionCallItem:
        call = bodies[0]
        outputs = [b for b in bodies[1:] if type(b) is FunctionCallOutputItem]
        if len(outputs) == len(bodies) - 1 and all(o.call_id == call.call_id for o in outputs):
            returned = " ".join(parts_text(o.output)[:limit] for o in outputs)
            text = f"tool call {call.name}({call.arguments[:limit]}) returned: {returned}"
    if text is None:
        return None
    text = " ".join(text[: 2 * limit].split())  # one line per entry
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


def _header(chosen: Sequence[RecallCandidate]) -> str:
    return HEADER_SESSION if all(c.own for c in chosen) else HEADER_PREFIX


def block_text(chosen: Sequence[RecallCandidate]) -> str:
    """The block: the header, then one line per entry, oldest first, each line (the header's
    too) ended by a newline: so each line is a piece of the block's count on its own."""
    lines = [_header(chosen), *(entry_line(c) for c in _oldest_first(chosen))]
    return "".join(f"{line}\n" for line in lines)


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


@dataclass(frozen=True, slots=True)
class BlockCost:
    """What a block adds to the payload under one format and tokenizer, by arithmetic: the
    framing of the message that carries it (measured once, with the header as the text), plus
    the block text's own count, which is the sum of its pieces' (``piece``)."""

    tokenizer: TokenizerName
    cache: TokenCache
    framing_tokens: int
    framing_chars: int

    @classmethod
    def measure(
        cls, payload: dict[str, Any], *, at: int, format: FormatName, cache: TokenCache
    ) -> BlockCost:
        """The framing of a block placed at ``at`` in ``payload``: the count of the message it
        changes (merged formats) or adds, less the text's own count (the formats count message
        by message, and a text once as a whole)."""
        key = MESSAGES_KEY[format]
        alone = {key: [payload[key][at]]} if format in _MERGED else {key: []}
        probe = HEADER_PREFIX
        before = payload_usage(format, alone, tokenizer=cache.tokenizer, cache=cache)
        after = payload_usage(
            format,
            with_block(alone, probe, at=0, format=format),
            tokenizer=cache.tokenizer,
            cache=cache,
        )
        return cls(
            tokenizer=cache.tokenizer,
            cache=cache,
            framing_tokens=after[0] - before[0] - cache.count(probe),
            framing_chars=after[1] - before[1] - len(probe),
        )

    def piece(self, line: str) -> tuple[int, int]:
        """(tokens, chars) of one line of the block with its newline (``approx``: tokens are
        not additive there, see ``total``; its share is the floor of a quarter)."""
        text = f"{line}\n"
        if self.tokenizer == "approx":
            return len(text) // 4, len(text)
        return self.cache.count(text), len(text)

    def total(self, tokens: int, chars: int) -> tuple[int, int]:
        """(tokens, chars) the payload grows by for a block whose pieces sum to these."""
        if self.tokenizer == "approx":  # one text: a quarter of its characters, rounded up
            tokens = (chars + 3) // 4
        return self.framing_tokens + tokens, self.framing_chars + chars


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
    (and, with a chars limit, ``CHARS_PER_TOKEN`` times that in chars, the share
    ``Budget.reserved`` set aside) and the whole payload stays within every
    limit of ``budget``; at most ``max_items`` entries; every message of ``projected`` is
    kept, in order, unchanged but for the newest user message in ``anthropic`` and
    ``gemini`` (which gains the block as a text block or part); the report's counts are the
    final payload's, computed by arithmetic (``BlockCost``) and equal to a recount; each
    candidate's line is tokenized at most once, and none after the share is full; the same
    inputs give the same bytes. With no candidate chosen the payload is ``projected``'s
    (cache markers placed as ``budget`` asks)."""
    spec = budget.recall
    assert spec is not None
    r = spec.max_tokens
    payload = projected.payload
    report = projected.report
    cache = TokenCache(budget.tokenizer)
    at = insertion_index(payload, format)
    extra_notes = list(notes)
    chosen: list[RecallCandidate] = []
    line_tokens: dict[int, int] = {}  # id(candidate) -> its line's tokens
    final = payload
    # the rest's counts: the report is honest (its counts are the payload's)
    base_tokens, base_chars = report.projected_tokens, report.projected_chars
    tokens, chars = base_tokens, base_chars
    if at is None:
        if candidates:
            extra_notes.append("recall: no user message in the prompt to recall before")
    elif candidates:
        cost = BlockCost.measure(payload, at=at, format=format, cache=cache)
        room_tokens = r if budget.max_tokens is None else min(r, budget.max_tokens - base_tokens)
        # chars bind only with a chars limit: then the share is CHARS_PER_TOKEN chars a token
        room_chars: float = math.inf
        if budget.max_chars is not None:
            room_chars = min(CHARS_PER_TOKEN * r, budget.max_chars - base_chars)
        headers = {h: cost.piece(h) for h in (HEADER_SESSION, HEADER_PREFIX)}
        sum_tokens = sum_chars = 0
        all_own = True
        for candidate in candidates:
            if len(chosen) >= spec.max_items:
                break
            own = all_own and candidate.own
            header_tokens, header_chars = headers[HEADER_SESSION if own else HEADER_PREFIX]
            line = entry_line(candidate)
            grown_chars = sum_chars + header_chars + len(line) + 1
            if cost.total(0, grown_chars)[1] > room_chars:  # too long: no need to count it
                continue
            line_cost, line_chars = cost.piece(line)
            grown = cost.total(sum_tokens + header_tokens + line_cost, grown_chars)
            if grown[0] <= room_tokens and grown[1] <= room_chars:
                chosen.append(candidate)
                line_tokens[id(candidate)] = line_cost
                sum_tokens += line_cost
                sum_chars += line_chars
                all_own = own
                # an early end, once not even the shortest line could fit any more
                now = cost.total(sum_tokens + header_tokens, sum_chars + header_chars)
                if now[0] + MIN_LINE_TOKENS > room_tokens or now[1] + MIN_LINE_CHARS > room_chars:
                    break
        if chosen:
            header_tokens, header_chars = headers[_header(chosen)]
            delta_tokens, delta_chars = cost.total(
                sum_tokens + header_tokens, sum_chars + header_chars
            )
            final = with_block(payload, block_text(chosen), at=at, format=format)
            tokens, chars = base_tokens + delta_tokens, base_chars + delta_chars
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
        RecalledEntry(seq=c.seq, session_id=c.session_id, score=c.score, tokens=line_tokens[id(c)])
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
    return ProjectedContext(
        payload=final, report=new_report, needs_more=projected.needs_more, held=projected.held
    )
