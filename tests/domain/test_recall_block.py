"""The recall block (``app.domain.projection.recall_block``) as property tests, over random
sessions, budgets and candidates, in every format.

What is checked: the prompt without the block is exactly the projection of the reserved
budget (so DESIGN §2's invariants, property-tested on that projection in
test_projection_properties.py, hold for the rest of the prompt); the block sits right before
the newest user message (in anthropic: a text block of it, after its tool results; in gemini:
a text part of it, after its functionResponse parts); it grows
the payload by at most the share and the whole stays within the budget; the report is
recounted independently; the payload passes the SDK types; the same inputs give the same
bytes; a call is never recalled without its output.
"""

from __future__ import annotations

import copy
import json
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from app.domain.formats import TokenCache
from app.domain.items import NewItem, StoredItem
from app.domain.projection import Budget, RecallSpec, project_context, recall_block
from app.domain.projection.cache import MESSAGES_KEY
from app.domain.projection.recall_block import (
    HEADER_PREFIX,
    HEADER_SESSION,
    RecallCandidate,
    block_text,
    candidate_of,
    insertion_index,
    recall_into,
)
from app.domain.tokens import count_text
from tests.domain.strategies import CREATED, FORMATS, Session, budgets, sessions, store
from tests.domain.test_projection_properties import PROPS, recount, replace_budget, validate

WORDS = st.sampled_from(
    ["deploy", "staging", "password", "rotates", "tuesday", "parser", "E1042", "é", "日本", "  "]
)
# Line endings the tokenizers' pre-token rules treat differently before a newline: letters,
# digits, punctuation (which ``[\r\n/]*`` may glue to the newline), closing brackets, the
# block's own `` […]``, contractions, symbols and marks.
ENDINGS = st.sampled_from(
    ["", ".", "...", ")", "]", " […]", "123", "4567", "'s", "?!", "/", "//", "—", "😀", "é", "ˆ",
     "\\", "e\u0301", "\u00a0x", "日本語", "ABC", "aBc"]
)  # fmt: skip


@st.composite
def candidates(draw: st.DrawFn) -> list[RecallCandidate]:
    n = draw(st.integers(1, 8))
    out = []
    seen: set[tuple[str, int]] = set()
    for k in range(n):
        text = " ".join(draw(st.lists(WORDS, min_size=1, max_size=25))) + draw(ENDINGS)
        text = " ".join(text.split()) or "x"  # one line, as ``candidate_of`` makes it
        own = draw(st.booleans())
        seq = draw(st.integers(1, 500))
        session_id = "s:1" if own else f"s:{draw(st.integers(2, 4))}"
        if (session_id, seq) in seen:  # a search finds an item once
            continue
        seen.add((session_id, seq))
        out.append(
            RecallCandidate(
                session_id=session_id,
                seq=seq,
                last_seq=seq + draw(st.sampled_from([0, 0, 1])),
                created_at=CREATED + timedelta(minutes=draw(st.integers(0, 10_000))),
                text=f"user: {text}",
                score=1.0 / (k + 1),
                own=own,
            )
        )
    return out


def with_recall(budget: Budget, r: int, max_items: int, extra: int) -> Budget:
    limit = r + extra
    return replace_budget(
        budget,
        max_tokens=limit,
        max_chars=None if budget.max_chars is None else max(budget.max_chars, 4 * r + 1),
        recall={"max_tokens": r, "max_items": max_items},
    )


def is_block_text(text: Any) -> bool:
    return isinstance(text, str) and text.startswith((HEADER_SESSION, HEADER_PREFIX))


def without_block(fmt: str, payload: dict[str, Any], at: int) -> dict[str, Any]:
    """``payload`` with the recall block taken out again."""
    key = MESSAGES_KEY[fmt]
    messages = list(payload[key])
    if fmt == "gemini":
        content = messages[at]
        parts = [p for p in content["parts"] if not is_block_text(p.get("text"))]
        assert len(parts) == len(content["parts"]) - 1
        return {**payload, key: [*messages[:at], {**content, "parts": parts}, *messages[at + 1 :]]}
    if fmt != "anthropic":
        del messages[at]
        return {**payload, key: messages}
    message = messages[at]
    blocks = [
        b
        for b in message["content"]
        if not (b.get("type") == "text" and b["text"].startswith((HEADER_SESSION, HEADER_PREFIX)))
    ]
    assert len(blocks) == len(message["content"]) - 1
    return {**payload, key: [*messages[:at], {**message, "content": blocks}, *messages[at + 1 :]]}


def same_text(fmt: str, a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Equal, but that anthropic may have turned a string content into one text block."""
    if a == b:
        return True
    if fmt != "anthropic":
        return False

    def norm(p: dict[str, Any]) -> Any:
        out = copy.deepcopy(p)
        for m in out["messages"]:
            if isinstance(m["content"], str):
                m["content"] = [{"type": "text", "text": m["content"]}]
        return out

    return bool(norm(a) == norm(b))


@pytest.mark.parametrize("fmt", FORMATS)
@PROPS
@given(
    session=sessions(faithful=True),
    budget=budgets(),
    found=candidates(),
    r=st.integers(1, 400),
    extra=st.integers(1, 3000),
    max_items=st.integers(1, 6),
)
def test_recall_block_invariants(
    fmt: str,
    session: Session,
    budget: Budget,
    found: list[RecallCandidate],
    r: int,
    extra: int,
    max_items: int,
) -> None:
    full = with_recall(budget, r, max_items, extra)
    rest_budget = full.reserved()
    assert rest_budget.recall is None and rest_budget.max_tokens == extra
    rest = project_context(session.source(), rest_budget, format=fmt)  # type: ignore[arg-type]
    result = recall_into(rest, found, budget=full, format=fmt, query="q")  # type: ignore[arg-type]
    payload, report = result.payload, result.report
    chosen = report.recalled
    assert len(chosen) <= max_items
    if fmt != "canonical":
        validate(fmt, payload)

    # honest report, independently recounted
    tokens, chars = recount(fmt, payload, full.tokenizer)
    assert (report.projected_tokens, report.projected_chars) == (tokens, chars)
    assert report.projected_items == rest.report.projected_items
    assert report.dropped_ranges == rest.report.dropped_ranges
    base_tokens, base_chars = recount(fmt, rest.payload, full.tokenizer)

    event("recalled" if chosen else "nothing recalled")
    if not chosen:
        assert payload == rest.payload
        return
    # the block: within the share, the whole within the budget
    assert tokens - base_tokens <= r
    assert full.max_chars is None or chars - base_chars <= 4 * r
    assert tokens <= full.max_tokens  # type: ignore[operator]
    assert full.max_chars is None or chars <= full.max_chars
    # placed right before (anthropic: in) the newest user message; the rest is the reserved
    # projection, message for message
    at = insertion_index(rest.payload, fmt)  # type: ignore[arg-type]
    assert at is not None
    assert same_text(fmt, without_block(fmt, payload, at), rest.payload)
    key = MESSAGES_KEY[fmt]
    text = json.dumps(payload[key][at], ensure_ascii=False)
    if fmt == "gemini":
        # a text part of the newest user content, after its functionResponse parts
        parts = payload[key][at]["parts"]
        first_text = next(k for k, p in enumerate(parts) if "functionResponse" not in p)
        assert all("functionResponse" in p for p in parts[:first_text])
        assert is_block_text(parts[first_text].get("text"))
        assert insertion_index(payload, fmt) == at  # type: ignore[arg-type]
    elif fmt != "anthropic":
        assert payload[key][at]["role"] == "system"
        assert insertion_index(payload, fmt) == at + 1  # type: ignore[arg-type]
    else:
        content = payload[key][at]["content"]
        kinds = [b.get("type") for b in content]
        first_text = kinds.index("text")
        assert all(k == "tool_result" for k in kinds[:first_text])
        assert content[first_text]["text"].startswith((HEADER_SESSION, HEADER_PREFIX))
    # entries oldest first, each the seq and session of a candidate
    by_key = {(c.session_id, c.seq): c for c in found}
    picked = [by_key[(e.session_id, e.seq)] for e in chosen]
    assert [c.created_at for c in picked] == sorted(c.created_at for c in picked)
    for c in picked:
        assert f"seq {c.seq}" in text
    assert report.stable_prefix <= min(rest.report.stable_prefix, at)
    # the share is filled: no candidate left out would still have fit (issue 42), checked by
    # an exact recount of the block with it
    if len(chosen) < max_items:
        taken = {(e.session_id, e.seq) for e in chosen}
        for c in found:
            if (c.session_id, c.seq) in taken:
                continue
            more = recall_block.with_block(
                rest.payload,
                block_text([*picked, c]),
                at=at,
                format=fmt,  # type: ignore[arg-type]
            )
            t, ch = recount(fmt, more, full.tokenizer)
            assert (
                t - base_tokens > r
                or (full.max_chars is not None and ch - base_chars > 4 * r)
                or t > full.max_tokens  # type: ignore[operator]
                or (full.max_chars is not None and ch > full.max_chars)
            ), c
    # each entry's tokens are its line's share of the block: with the header and the
    # message's framing, they add up to what the block added
    header = recall_block._header(picked)
    framing = recall_block.BlockCost.measure(
        rest.payload,
        at=at,
        format=fmt,  # type: ignore[arg-type]
        cache=TokenCache(full.tokenizer),
    )
    if full.tokenizer != "approx":
        assert (
            sum(e.tokens for e in chosen) + count_text(header + "\n", full.tokenizer)
            == tokens - base_tokens - framing.framing_tokens
        )
    assert sum(e.tokens for e in chosen) <= tokens - base_tokens
    # deterministic
    again = recall_into(
        copy.deepcopy(rest),
        copy.deepcopy(found),
        budget=full,
        format=fmt,
        query="q",  # type: ignore[arg-type]
    )
    assert json.dumps(again.payload, default=str) == json.dumps(payload, default=str)
    assert again.report == report


def _stored(*bodies: dict[str, Any]) -> list[StoredItem]:
    from app.domain.items import parse_canonical_items

    news: list[NewItem] = parse_canonical_items(list(bodies))
    return store(news)


def test_a_call_is_recalled_only_with_its_output() -> None:
    call = {"type": "function_call", "call_id": "c1", "name": "grep", "arguments": '{"q": "x"}'}
    output = {"type": "function_call_output", "call_id": "c1", "output": "a\nb"}
    other = {"type": "function_call_output", "call_id": "c2", "output": "nope"}
    pair = _stored(call, output)
    made = candidate_of(pair, session_id="s", score=1.0, own=True, max_chars=1000)
    assert made is not None
    assert made.text == 'tool call grep({"q": "x"}) returned: a b'
    assert (made.seq, made.last_seq) == (1, 2)
    assert candidate_of(pair[:1], session_id="s", score=1.0, own=True, max_chars=1000) is None
    assert candidate_of(pair[1:], session_id="s", score=1.0, own=True, max_chars=1000) is None
    mismatched = _stored(call, other)
    assert candidate_of(mismatched, session_id="s", score=1.0, own=True, max_chars=1000) is None
    for body in (
        {"type": "message", "role": "system", "content": "sys"},
        {"type": "message", "role": "developer", "content": "dev"},
        {"type": "reasoning", "summary": ["thinking"]},
    ):
        assert (
            candidate_of(_stored(body), session_id="s", score=1.0, own=True, max_chars=99) is None
        )
    long = _stored({"type": "message", "role": "user", "content": "word " * 100})
    cut = candidate_of(long, session_id="s", score=1.0, own=True, max_chars=40)
    assert cut is not None and len(cut.text) == 40 and cut.text.endswith("[…]")


def test_block_lines() -> None:
    own = RecallCandidate("a:1", 7, 7, CREATED, "user: hi", 0.5, True)
    pair = RecallCandidate(
        "a:1", 3, 4, CREATED + timedelta(hours=1), "tool call f() returned: x", 0.9, True
    )
    other = RecallCandidate("a:0", 2, 2, CREATED - timedelta(days=1), "assistant: old", 0.1, False)
    assert block_text([own, pair]) == (
        f"{HEADER_SESSION}\n[seq 7, 2025-01-01 00:00 UTC] user: hi\n"
        "[seq 3-4, 2025-01-01 01:00 UTC] tool call f() returned: x\n"
    )
    assert block_text([own, other]).splitlines() == [
        HEADER_PREFIX,
        "[session a:0, seq 2, 2024-12-31 00:00 UTC] assistant: old",
        "[seq 7, 2025-01-01 00:00 UTC] user: hi",
    ]


def test_recall_share_must_leave_room() -> None:
    from app.domain.errors import InvalidInput

    b = Budget(max_tokens=100, recall=RecallSpec(max_tokens=100))
    with pytest.raises(InvalidInput) as info:
        b.reserved()
    assert info.value.errors[0]["loc"] == ["recall", "max_tokens"]
    assert Budget(max_tokens=100).reserved() == Budget(max_tokens=100)
    assert Budget(recall=RecallSpec(max_tokens=5)).reserved().max_tokens is None


def test_a_gemini_content_without_a_role_is_the_users() -> None:
    """The Gemini API reads a content without ``role`` as the user's: the block goes into the
    newest one, after its function responses."""
    from app.domain.projection.recall_block import insertion_index, with_block

    payload = {
        "contents": [
            {"parts": [{"text": "first"}]},
            {"role": "model", "parts": [{"functionCall": {"name": "f", "args": {}}}]},
            {"parts": [{"functionResponse": {"name": "f", "response": {}}}, {"text": "now?"}]},
        ]
    }
    at = insertion_index(payload, "gemini")
    assert at == 2
    out = with_block(payload, "RECALLED", at=at, format="gemini")
    assert out["contents"][2]["parts"][1] == {"text": "RECALLED"}
    assert out["contents"][2]["parts"][0] == payload["contents"][2]["parts"][0]
    assert payload["contents"][2]["parts"][1] == {"text": "now?"}  # the input is not changed


def test_an_entry_is_bounded_whatever_the_item_or_the_share() -> None:
    """Issue 41 item 4: an entry keeps at most ``entry_chars(share)`` characters, and the
    bound holds for the largest share a request may ask for."""
    from app.domain.projection.budget import MAX_ENTRY_CHARS, MAX_RECALL_TOKENS
    from app.domain.projection.recall_block import entry_chars

    huge = "a tool output line\n" * 12_000  # ~230 KB
    output = {"type": "function_call_output", "call_id": "c", "output": huge}
    call = {"type": "function_call", "call_id": "c", "name": "cat", "arguments": "{}"}
    for share in (10, 500, MAX_RECALL_TOKENS):
        bound = entry_chars(share)
        assert bound <= MAX_ENTRY_CHARS
        message = {"type": "message", "role": "user", "content": huge}
        for items in (_stored(call, output), _stored(message)):
            made = candidate_of(items, session_id="s", score=1.0, own=True, max_chars=bound)
            assert made is not None and len(made.text) <= bound
            assert made.text.endswith("[…]") and "\n" not in made.text
    with pytest.raises(ValueError):
        RecallSpec(max_tokens=MAX_RECALL_TOKENS + 1)


def test_a_call_recalls_with_every_output_answering_it() -> None:
    call = {"type": "function_call", "call_id": "c1", "name": "grep", "arguments": "{}"}
    first = {"type": "function_call_output", "call_id": "c1", "output": "one"}
    second = {"type": "function_call_output", "call_id": "c1", "output": "two"}
    made = candidate_of(
        _stored(call, first, second), session_id="s", score=1.0, own=True, max_chars=1000
    )
    assert made is not None and made.text == "tool call grep({}) returned: one two"
    assert (made.seq, made.last_seq) == (1, 3)
