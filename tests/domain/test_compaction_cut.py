"""The turn-safe cut: table-driven cases and property tests over random sessions."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.domain.compaction import CutPlan, plan_cut
from app.domain.errors import InvalidInput
from app.domain.items import (
    CanonicalItem,
    FunctionCallItem,
    FunctionCallOutputItem,
    MessageItem,
    ReasoningItem,
    StoredItem,
)

T0 = datetime(2025, 1, 1, tzinfo=UTC)
ROLES = {"S": "system", "D": "developer", "U": "user", "A": "assistant"}


def body_for(kind: str) -> CanonicalItem:
    if kind in ROLES:
        return MessageItem.model_validate({"role": ROLES[kind], "content": f"{ROLES[kind]} text"})
    if kind.startswith("C"):
        return FunctionCallItem(call_id=kind[1:], name="read_file", arguments='{"path": "a.py"}')
    if kind.startswith("O"):
        return FunctionCallOutputItem(call_id=kind[1:], output="contents")
    if kind == "R":
        return ReasoningItem(summary=["thinking"])
    raise ValueError(kind)


def memory(spec: str) -> list[StoredItem]:
    """``"U A C1 O1! R A:50"``: kinds S D U A R, Cn/On calls and outputs; ``!`` pins,
    ``:n`` sets tokens (default 10). Seqs have gaps (10, 20, ...) so they differ from indexes."""
    items = []
    for index, token in enumerate(spec.split()):
        kind, _, tokens = token.partition(":")
        pinned = kind.endswith("!")
        kind = kind.rstrip("!")
        items.append(
            StoredItem(
                body=body_for(kind),
                id=f"i{index}",
                seq=10 * (index + 1),
                tokens=int(tokens or 10),
                chars=10,
                pinned=pinned,
                metadata={},
                created_at=T0,
            )
        )
    return items


def marks(items: list[StoredItem], plan: CutPlan) -> str:
    compacted = set(plan.compacted_seqs)
    return "".join("x" if item.seq in compacted else "." for item in items)


CASES = [
    # (memory, settings, expected marks: x = compacted, . = kept)
    ("U A U A", {}, "xx.."),
    ("U A C1 O1 A U A", {}, "xxxxx.."),
    ("U A U", {}, "xx."),
    ("S U A U A", {}, ".xx.."),
    ("D U A U", {}, ".xx."),
    ("U A U A U A", {"keep_last_items": 0}, "xxxx.."),
    ("U A U A U A", {"keep_last_items": 3}, "xx...."),
    ("U A U A U A", {"keep_last_items": 4}, "xx...."),
    ("U A U A U A", {"keep_last_items": 5}, "......"),
    ("U A U A U A", {"keep_last_items": 60}, "......"),
    ("U A U A U A", {"pinned_prefix_items": 2}, "..xx.."),
    ("U A! U A U A", {}, "x.xx.."),
    ("U C1! O1 A U A", {}, "x..x.."),
    ("U C1 O1! A U A", {}, "x..x.."),
    ("U C1 U O1 A U A", {}, "xxxxx.."),
    ("U C1 U O1 A U A", {"keep_last_items": 5}, "......."),
    ("U A U A R U A", {}, "xx....."),
    ("U R R C1 O1 A U A", {}, "xxxxxx.."),
    ("U C1 C2 O1 O2 A U A", {}, "xxxxxx.."),
    ("U C1 C2 O1 U O2 A U", {"keep_last_items": 4}, "........"),
    ("U C1 C2 O1 U O2 A U", {}, "xxxxxxx."),
    ("U:10 A:10 U:10 A:100", {"keep_last_tokens": 50}, "xx.."),
    ("U:10 A:10 U:10 A:100", {"keep_last_tokens": 115}, "...."),
    ("U:10 A:10 U:10 A:10 U:10 A:10", {"keep_last_tokens": 15, "keep_last_items": 3}, "xx...."),
    ("U:10 A:10 U:10 A:10 U:10 A:10", {"keep_last_tokens": 35, "keep_last_items": 1}, "xx...."),
    ("A C1 O1 A", {}, "...."),
    ("S U A", {}, "..."),
    ("S! U A S U", {"pinned_prefix_items": 3}, "....."),
    ("U A S U A", {}, "xx..."),
    # a key repeated turn after turn (Gemini's derived ids): each output goes with its own call
    ("U C1 O1 A U C1 O1 A U", {"keep_last_items": 5}, "xxxx....."),
]


@pytest.mark.parametrize(("spec", "options", "expected"), CASES)
def test_cut_table(spec: str, options: dict[str, int], expected: str) -> None:
    items = memory(spec)
    plan = plan_cut(items, **options)
    assert marks(items, plan) == expected
    if "x" in expected:
        assert plan.reason is None
        assert plan.tail_start_seq is not None
        tail_start = next(i for i, item in enumerate(items) if item.seq == plan.tail_start_seq)
        assert spec.split()[tail_start].startswith("U")
    else:
        assert plan.is_empty and plan.reason and plan.tail_start_seq is None
        assert plan.kept == tuple(items)


def test_plan_numbers_and_ranges() -> None:
    items = memory("U:5 A:7 S:1 C1:3 O1:4 U:2 A:9")
    plan = plan_cut(items)
    assert plan.compacted_seqs == (10, 20, 40, 50)
    assert (plan.first_seq, plan.last_seq, plan.tail_start_seq) == (10, 50, 60)
    assert plan.compacted_ranges == [(10, 20), (40, 50)]
    assert (plan.items_before, plan.items_after) == (7, 3)
    assert (plan.tokens_before, plan.compacted_tokens, plan.kept_tokens) == (31, 19, 12)
    assert any("system item" in note for note in plan.notes)


def test_cut_moved_back_is_noted() -> None:
    plan = plan_cut(memory("U A U A C1 O1 A"), keep_last_items=2)
    assert plan.tail_start_seq == 30
    assert any("moved back from seq 60 to the user message at seq 30" in n for n in plan.notes)


@pytest.mark.parametrize(
    ("spec", "options", "words"),
    [
        ("", {}, "empty"),
        ("A C1 O1", {}, "no user message"),
        ("U A U A", {"keep_last_items": 4}, "first one"),
        ("A U A", {"keep_last_items": 3}, "first one"),
        ("C1 U O1 A", {}, "split"),
        ("U A R U", {}, "split"),
        ("S U", {}, "pinned"),
    ],
)
def test_nothing_to_compact_says_why(spec: str, options: dict[str, int], words: str) -> None:
    plan = plan_cut(memory(spec), **options)
    assert plan.is_empty
    assert plan.reason is not None and words in plan.reason


def test_invalid_settings() -> None:
    with pytest.raises(InvalidInput) as info:
        plan_cut(memory("U A"), keep_last_items=-1, pinned_prefix_items=-2)
    assert [e["loc"] for e in info.value.errors or []] == [
        ["keep_last_items"],
        ["pinned_prefix_items"],
    ]
    with pytest.raises(ValueError, match="ascending"):
        plan_cut(list(reversed(memory("U A"))))


# --- properties over random sessions -------------------------------------------------------


@st.composite
def sessions(draw: st.DrawFn) -> list[StoredItem]:
    """Random working memory: turns with messages, reasoning, calls answered now, later or never,
    outputs without calls, pinned items, and arbitrary seq gaps and token counts."""
    tokens: list[str] = []
    open_calls: list[str] = []
    next_call = 0
    for _ in range(draw(st.integers(0, 30))):
        event = draw(
            st.sampled_from(["U", "U", "A", "S", "D", "R", "call", "call", "late", "orphan"])
        )
        if event == "call":
            tokens += [f"C{next_call}", f"O{next_call}"]
            next_call += 1
        elif event == "late":
            tokens.append(f"C{next_call}")
            open_calls.append(str(next_call))
            next_call += 1
        elif event == "orphan":
            if bool(open_calls) and draw(st.booleans()):
                tokens.append(f"O{open_calls.pop(0)}")
            else:
                tokens.append(f"O{next_call + 1000}")
        else:
            tokens.append(event)
    items = []
    seq = 0
    for index, kind in enumerate(tokens):
        seq += draw(st.integers(1, 5))
        items.append(
            StoredItem(
                body=body_for(kind),
                id=f"i{index}",
                seq=seq,
                tokens=draw(st.integers(0, 50)),
                chars=1,
                pinned=draw(st.integers(0, 9)) == 0,
                metadata={},
                created_at=T0,
            )
        )
    return items


def _is_user(item: StoredItem) -> bool:
    return isinstance(item.body, MessageItem) and item.body.role == "user"


def _oracle(
    items: list[StoredItem],
    keep_last_items: int | None,
    keep_last_tokens: int | None,
    pinned_prefix_items: int,
) -> set[int]:
    """Seqs to compact, by the rules stated pairwise (no union-find): a naive fixpoint for what
    stays, then the latest user position that splits nothing and satisfies the keep minimums."""
    n = len(items)
    stays = [
        i < pinned_prefix_items
        or item.pinned
        or (isinstance(item.body, MessageItem) and item.body.role in ("system", "developer"))
        for i, item in enumerate(items)
    ]

    def call_id(i: int) -> str | None:
        body = items[i].body
        return body.call_id if isinstance(body, FunctionCallItem | FunctionCallOutputItem) else None

    # an output and the latest earlier call of its call_id (the projection's pairing rule,
    # stated pairwise here)
    pairs = [
        (
            max(
                i
                for i in range(j)
                if isinstance(items[i].body, FunctionCallItem) and call_id(i) == call_id(j)
            ),
            j,
        )
        for j in range(n)
        if isinstance(items[j].body, FunctionCallOutputItem)
        and any(
            isinstance(items[i].body, FunctionCallItem) and call_id(i) == call_id(j)
            for i in range(j)
        )
    ]
    pairs += [(i, i + 1) for i in range(n - 1) if isinstance(items[i].body, ReasoningItem)]
    changed = True
    while changed:
        changed = False
        for i, j in pairs:
            if stays[i] != stays[j]:
                stays[i] = stays[j] = True
                changed = True

    def valid(p: int) -> bool:
        if not _is_user(items[p]):
            return False
        if keep_last_items is not None and n - p < keep_last_items:
            return False
        if keep_last_tokens is not None and sum(x.tokens for x in items[p:]) < keep_last_tokens:
            return False
        return all(stays[i] or (i < p) == (j < p) for i, j in pairs)

    for p in range(n - 1, -1, -1):
        if valid(p):
            return {items[i].seq for i in range(p) if not stays[i]}
    return set()


@settings(max_examples=400, deadline=None)
@given(
    items=sessions(),
    keep_last_items=st.none() | st.integers(0, 35),
    keep_last_tokens=st.none() | st.integers(0, 600),
    pinned_prefix_items=st.integers(0, 4),
)
def test_cut_properties(
    items: list[StoredItem],
    keep_last_items: int | None,
    keep_last_tokens: int | None,
    pinned_prefix_items: int,
) -> None:
    plan = plan_cut(
        items,
        keep_last_items=keep_last_items,
        keep_last_tokens=keep_last_tokens,
        pinned_prefix_items=pinned_prefix_items,
    )
    compacted = set(plan.compacted_seqs)
    kept = {item.seq for item in plan.kept}
    # Partition, order preserved.
    assert compacted.isdisjoint(kept)
    assert compacted | kept == {item.seq for item in items}
    assert list(plan.compacted_seqs) == sorted(plan.compacted_seqs)
    assert [i.seq for i in plan.kept] == sorted(kept)

    side = {item.seq: item.seq in compacted for item in items}
    for i, item in enumerate(items):
        body = item.body
        # Tool pairing: an output lands with the call it answers (the latest earlier call of
        # its call_id; an output with none is an orphan and stands alone).
        if isinstance(body, FunctionCallOutputItem):
            calls = [
                other.seq
                for other in items[:i]
                if isinstance(other.body, FunctionCallItem) and other.body.call_id == body.call_id
            ]
            if calls:
                assert side[calls[-1]] == side[item.seq]
        # Reasoning goes with the item it precedes.
        if isinstance(body, ReasoningItem) and i + 1 < len(items):
            assert side[item.seq] == side[items[i + 1].seq]
        # Stays are never compacted.
        is_system = isinstance(body, MessageItem) and body.role in ("system", "developer")
        if i < pinned_prefix_items or item.pinned or is_system:
            assert item.seq in kept

    if plan.compacted:
        assert plan.reason is None
        start_seq = plan.tail_start_seq
        assert start_seq is not None
        start = next(i for i, item in enumerate(items) if item.seq == start_seq)
        assert _is_user(items[start])
        tail = items[start:]
        assert all(item.seq in kept for item in tail)
        assert all(item.seq < start_seq for item in plan.compacted)
        if keep_last_items is not None:
            assert len(tail) >= keep_last_items
        if keep_last_tokens is not None:
            assert sum(item.tokens for item in tail) >= keep_last_tokens
    else:
        assert plan.reason
        assert plan.kept == tuple(items)
    # The newest user message is always kept.
    users = [item for item in items if _is_user(item)]
    if users:
        assert users[-1].seq in kept
    # Maximal: exactly what the pairwise oracle compacts.
    assert compacted == _oracle(items, keep_last_items, keep_last_tokens, pinned_prefix_items)
