"""The chat-completion request an LLM compaction sends: system prompt, previous summary,
transcript of the compacted items, optional user instructions.

Invariants of ``build_llm_messages``:
- deterministic: the same plan and inputs give the same messages (byte-identical);
- exactly two messages, ``system`` then ``user``, both with string content (every
  OpenAI-compatible server accepts that shape);
- the previous summary, when there is one, appears verbatim under the heading
  ``Previous summary``, so the model can carry it forward;
- the transcript is bounded: each item's text is shortened (head and tail kept) and, past
  ``max_transcript_chars``, items from the middle of the range are left out with a marker saying
  how many. Encrypted reasoning is never sent.
"""

from __future__ import annotations

from collections.abc import Sequence

from app.domain.compaction.cut import CutPlan
from app.domain.compaction.extract import message_text
from app.domain.items import (
    FunctionCallItem,
    FunctionCallOutputItem,
    MessageItem,
    OpaqueItem,
    ReasoningItem,
    StoredItem,
    opaque_texts,
    parts_text,
)

__all__ = ["SYSTEM_PROMPT", "build_llm_messages", "render_transcript"]

SYSTEM_PROMPT = """\
You compact the working memory of an AI agent. You receive the transcript of the oldest part \
of its conversation (user requests, assistant replies, tool calls and their results, \
reasoning) and, when there is one, the summary of what came before it ("Previous summary").

Write one summary that replaces both, so the agent can continue the task without the \
transcript. Carry forward everything from the previous summary that still matters. Be \
specific: keep file names, function names, commands, error messages, numbers and decisions \
exactly as they appear. Do not invent anything.

Answer with a single JSON object and nothing else, with exactly these keys:
- "goal": string, the user's overall goal in one or two sentences
- "completed": list of strings, what has been done
- "pending": list of strings, what remains to be done, next steps first
- "decisions": list of strings, decisions made, conclusions reached (causes found, what \
was ruled out) and constraints agreed, with their reasons
- "errors": list of strings, errors met and how each was resolved (or that it was not)
- "test_results": list of strings, the latest test results (command and outcome)
- "open_questions": list of strings, questions still unanswered
End each entry of "decisions", "errors" and "open_questions" with the seq of the transcript \
line it came from, as "(seq N)"; for a resolved error, also where it was resolved, as \
"; resolved at seq M: how". Use an empty list when a key has nothing to say."""

ITEM_MAX_CHARS = 4000
TOOL_OUTPUT_MAX_CHARS = 2000
DEFAULT_MAX_TRANSCRIPT_CHARS = 200_000


def _clip(text: str, limit: int) -> str:
    """Head and tail of ``text`` (the end of a tool output is usually where the verdict is)."""
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    tail = limit - head
    omitted = len(text) - head - tail
    return f"{text[:head]}\n[... {omitted} chars omitted ...]\n{text[-tail:]}"


def _render_item(item: StoredItem, call_names: dict[str, str]) -> str:
    body = item.body
    prefix = f"[seq {item.seq}]"
    if isinstance(body, MessageItem):
        return f"{prefix} {body.role}: {_clip(message_text(body), ITEM_MAX_CHARS)}"
    if isinstance(body, FunctionCallItem):
        arguments = _clip(body.arguments, ITEM_MAX_CHARS)
        return f"{prefix} assistant called {body.name} (call {body.call_id}) with {arguments}"
    if isinstance(body, FunctionCallOutputItem):
        name = call_names.get(body.call_id, "a tool")
        output = _clip(parts_text(body.output), TOOL_OUTPUT_MAX_CHARS)
        return f"{prefix} result of {name} (call {body.call_id}):\n{output}"
    if isinstance(body, OpaqueItem):
        return f"{prefix} {body.type}: {_clip(' '.join(opaque_texts(body.data)), ITEM_MAX_CHARS)}"
    assert isinstance(body, ReasoningItem)
    texts = [*body.summary, *([body.content] if body.content else [])]
    if not texts:
        return f"{prefix} reasoning: [not readable]"
    return f"{prefix} reasoning: {_clip(' '.join(texts), ITEM_MAX_CHARS)}"


def render_transcript(
    items: Sequence[StoredItem], *, max_chars: int = DEFAULT_MAX_TRANSCRIPT_CHARS
) -> str:
    """A readable transcript of ``items``; at most about ``max_chars`` (see module invariants)."""
    call_names = {
        item.body.call_id: item.body.name
        for item in items
        if isinstance(item.body, FunctionCallItem)
    }
    blocks = [_render_item(item, call_names) for item in items]
    if sum(len(b) + 2 for b in blocks) <= max_chars:
        return "\n\n".join(blocks)
    # Keep the beginning (the goal) and the end (the latest state); drop from the middle.
    head: list[str] = []
    tail: list[str] = []
    budget = max_chars
    left, right = 0, len(blocks) - 1
    take_left = True
    while left <= right:
        block = blocks[left] if take_left else blocks[right]
        if len(block) + 2 > budget:
            break
        budget -= len(block) + 2
        if take_left:
            head.append(block)
            left += 1
        else:
            tail.append(block)
            right -= 1
        take_left = not take_left
    omitted = right - left + 1
    marker = f"[... {omitted} items omitted to fit the request ...]"
    return "\n\n".join([*head, marker, *reversed(tail)])


def build_llm_messages(
    plan: CutPlan,
    *,
    previous_summary: str | None,
    instructions: str | None = None,
    max_transcript_chars: int = DEFAULT_MAX_TRANSCRIPT_CHARS,
) -> list[dict[str, str]]:
    """The chat messages asking a model to summarise ``plan.compacted``.

    ``previous_summary`` is the session's current summary (fed as "Previous summary");
    ``instructions`` are the caller's extra wishes, appended last.
    """
    parts: list[str] = []
    if previous_summary and previous_summary.strip():
        parts.append(f"Previous summary:\n\n{previous_summary.strip()}")
    else:
        parts.append("Previous summary: none (this is the first compaction).")
    span = (
        f" (seq {plan.first_seq} to {plan.last_seq}, {len(plan.compacted)} items)"
        if plan.compacted
        else ""
    )
    transcript = render_transcript(plan.compacted, max_chars=max_transcript_chars)
    parts.append(f"Transcript to compact{span}:\n\n{transcript or '(empty)'}")
    if instructions and instructions.strip():
        parts.append(f"Additional instructions from the user:\n\n{instructions.strip()}")
    parts.append("Answer with the JSON object only.")
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": "\n\n---\n\n".join(parts)},
    ]
