"""The turn-safe cut: which working-memory items a compaction folds away and which stay.

Working memory is split three ways:

- **stays**: items that survive every compaction wherever they are: the pinned prefix (the first
  ``pinned_prefix_items`` items), pinned items, and system/developer messages. A call, its
  outputs and the reasoning before them form one *unit*; if any member of a unit stays, the
  whole unit stays, so pinning a call also keeps its output.
- **kept tail**: every item from the cut position on. The cut sits on a user message, so the
  tail starts a turn.
- **compacted**: every other item, i.e. the non-staying items before the cut.

Invariants of ``plan_cut`` (each is a property test):

1. ``compacted`` and ``kept`` are disjoint, their union is the input, and both keep seq order.
2. The kept tail starts at a user message; the newest user message is always kept.
3. A function call and every output answering it (the projection's pairing rule,
   ``answered_calls``: the latest earlier call with its key) land on the same side; a
   reasoning item lands on the same side as the item it precedes.
4. Stays are never compacted.
5. If anything is compacted, the kept tail holds at least ``keep_last_items`` items and at least
   ``keep_last_tokens`` tokens (both are minimums: moving the cut back to a turn boundary keeps
   more). Among the cuts that satisfy 2-4, the plan takes the latest one, so it compacts as much
   as the keep settings allow.
6. When nothing can be compacted the plan says so: ``compacted`` is empty and ``reason`` is a
   sentence a client can read. This is a normal outcome, not an error.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

from app.domain.errors import InvalidInput
from app.domain.items import (
    MessageItem,
    ReasoningItem,
    StoredItem,
    pair_key,
)
from app.domain.projection.analysis import CALL, OUTPUT, answered_calls, kinds_of

__all__ = ["CutPlan", "is_user_message", "plan_cut", "seq_ranges"]


@dataclass(frozen=True, slots=True)
class CutPlan:
    """What a compaction would do to working memory.

    ``compacted`` and ``kept`` are both in seq order. ``kept`` holds the stays (pinned prefix,
    pinned items, system/developer messages, and their units) plus the kept tail.
    ``tail_start_seq`` is the seq of the user message the kept tail starts at (``None`` when
    nothing is compacted). ``reason`` is set exactly when nothing is compacted.
    """

    compacted: tuple[StoredItem, ...]
    kept: tuple[StoredItem, ...]
    tail_start_seq: int | None
    reason: str | None
    notes: tuple[str, ...] = ()

    @property
    def is_empty(self) -> bool:
        """Nothing to compact (``reason`` says why)."""
        return not self.compacted

    @property
    def compacted_seqs(self) -> tuple[int, ...]:
        return tuple(item.seq for item in self.compacted)

    @property
    def first_seq(self) -> int | None:
        return self.compacted[0].seq if self.compacted else None

    @property
    def last_seq(self) -> int | None:
        return self.compacted[-1].seq if self.compacted else None

    @property
    def compacted_ranges(self) -> list[tuple[int, int]]:
        """Runs of compacted items as ``(first_seq, last_seq)``; stays split the runs."""
        return seq_ranges(self.compacted, self.compacted + self.kept)

    @property
    def items_before(self) -> int:
        return len(self.compacted) + len(self.kept)

    @property
    def items_after(self) -> int:
        return len(self.kept)

    @property
    def tokens_before(self) -> int:
        return self.compacted_tokens + self.kept_tokens

    @property
    def compacted_tokens(self) -> int:
        return sum(item.tokens for item in self.compacted)

    @property
    def kept_tokens(self) -> int:
        return sum(item.tokens for item in self.kept)


def is_user_message(item: StoredItem) -> bool:
    return isinstance(item.body, MessageItem) and item.body.role == "user"


def _is_system(item: StoredItem) -> bool:
    return isinstance(item.body, MessageItem) and item.body.role in ("system", "developer")


def seq_ranges(
    selected: Sequence[StoredItem], universe: Sequence[StoredItem]
) -> list[tuple[int, int]]:
    """Maximal runs of ``selected`` items that are adjacent in ``universe`` (by seq order)."""
    chosen = {item.seq for item in selected}
    ranges: list[tuple[int, int]] = []
    run_start: int | None = None
    run_end: int | None = None
    for item in sorted(universe, key=lambda i: i.seq):
        if item.seq in chosen:
            if run_start is None:
                run_start = item.seq
            run_end = item.seq
        elif run_start is not None and run_end is not None:
            ranges.append((run_start, run_end))
            run_start = run_end = None
    if run_start is not None and run_end is not None:
        ranges.append((run_start, run_end))
    return ranges


class _Units:
    """Union-find over item indexes: calls with their outputs, reasoning with its successor."""

    def __init__(self, items: Sequence[StoredItem]) -> None:
        self.parent = list(range(len(items)))
        bodies = [item.body for item in items]
        kinds = kinds_of(bodies)
        keys = {i: pair_key(bodies[i]) for i, kind in enumerate(kinds) if kind in (CALL, OUTPUT)}
        # Each output with the call it answers, by the projection's one pairing rule (keys
        # repeat across turns: Gemini's derived ids, a client's ``call_{k}``).
        for output, call in answered_calls(kinds, keys).items():
            self.union(call, output)
        for index, body in enumerate(bodies):
            if isinstance(body, ReasoningItem) and index + 1 < len(items):
                self.union(index, index + 1)

    def find(self, index: int) -> int:
        while self.parent[index] != index:
            self.parent[index] = self.parent[self.parent[index]]
            index = self.parent[index]
        return index

    def union(self, a: int, b: int) -> None:
        root_a, root_b = self.find(a), self.find(b)
        if root_a != root_b:
            self.parent[max(root_a, root_b)] = min(root_a, root_b)


def _check_options(
    keep_last_items: int | None, keep_last_tokens: int | None, pinned_prefix_items: int
) -> None:
    errors = [
        {"loc": [name], "msg": f"{name} must be >= 0"}
        for name, value in (
            ("keep_last_items", keep_last_items),
            ("keep_last_tokens", keep_last_tokens),
            ("pinned_prefix_items", pinned_prefix_items),
        )
        if value is not None and value < 0
    ]
    if errors:
        raise InvalidInput("invalid compaction settings", errors=errors)


def _desired_cut(
    items: Sequence[StoredItem], keep_last_items: int | None, keep_last_tokens: int | None
) -> int:
    """Latest index such that the suffix from it satisfies both keep minimums."""
    n = len(items)
    cut = n
    if keep_last_items is not None:
        cut = min(cut, max(0, n - keep_last_items))
    if keep_last_tokens is not None and keep_last_tokens > 0:
        total = 0
        index = n
        while index > 0 and total < keep_last_tokens:
            index -= 1
            total += items[index].tokens
        cut = min(cut, index)
    return cut


def _nothing_reason(
    items: Sequence[StoredItem],
    user_positions: list[int],
    blocked: list[bool],
    desired: int,
    cut: int | None,
) -> str:
    """Why the plan compacts nothing, in words a client can act on."""
    if any(blocked[p] for p in user_positions if (cut or 0) < p <= desired):
        return (
            "nothing to compact: the user messages where the kept tail could start would split "
            "a tool call from its output or a reasoning item from what follows it"
        )
    if cut is None or cut == 0:
        first = items[user_positions[0]].seq
        return (
            "nothing to compact: the kept tail must start at a user message, and the keep "
            f"settings reach back to the first one (seq {first}) or past it"
        )
    return (
        f"nothing to compact: the kept tail starts at the user message at seq {items[cut].seq} "
        "and every item before it is pinned, in the pinned prefix or a system/developer message"
    )


def plan_cut(
    items: Sequence[StoredItem],
    *,
    keep_last_items: int | None = None,
    keep_last_tokens: int | None = None,
    pinned_prefix_items: int = 0,
) -> CutPlan:
    """Choose the turn-safe cut for compacting ``items`` (working memory, ascending seq).

    Without keep settings (or with ``keep_last_items=0``) the kept tail is the newest user turn:
    everything from the last user message on. See the module docstring for the invariants.

    Raises ``InvalidInput`` for negative settings and ``ValueError`` if ``items`` is not in
    strictly ascending seq order (a caller bug).
    """
    _check_options(keep_last_items, keep_last_tokens, pinned_prefix_items)
    if any(b.seq <= a.seq for a, b in pairwise(items)):
        raise ValueError("working memory must be in strictly ascending seq order")
    items = tuple(items)
    n = len(items)
    if n == 0:
        return CutPlan((), (), None, "nothing to compact: working memory is empty")

    units = _Units(items)
    staying_roots = {
        units.find(i)
        for i, item in enumerate(items)
        if i < pinned_prefix_items or item.pinned or _is_system(item)
    }
    stays = [units.find(i) in staying_roots for i in range(n)]

    # A cut at position p (tail = items[p:]) splits a unit if the unit has members on both
    # sides; staying units never split since they are kept whole. Mark those positions.
    lo: dict[int, int] = {}
    hi: dict[int, int] = {}
    for i in range(n):
        root = units.find(i)
        if root in staying_roots:
            continue
        lo.setdefault(root, i)
        hi[root] = i
    splits = [0] * (n + 1)
    for root, first in lo.items():
        if hi[root] > first:
            splits[first + 1] += 1
            splits[hi[root] + 1] -= 1
    blocked = [False] * (n + 1)
    running = 0
    for p in range(n + 1):
        running += splits[p]
        blocked[p] = running > 0

    user_positions = [i for i in range(n) if is_user_message(items[i])]
    if not user_positions:
        return CutPlan(
            (), items, None, "nothing to compact: no user message to start the kept tail at"
        )

    wanted = _desired_cut(items, keep_last_items, keep_last_tokens)
    desired = min(wanted, user_positions[-1])
    cut: int | None = None
    for p in reversed(user_positions):
        if p <= desired and not blocked[p]:
            cut = p
            break
    compacted = () if cut is None else tuple(items[i] for i in range(cut) if not stays[i])
    if cut is None or not compacted:
        return CutPlan(
            (), items, None, _nothing_reason(items, user_positions, blocked, desired, cut)
        )

    kept = tuple(items[i] for i in range(n) if i >= cut or stays[i])
    notes: list[str] = []
    if cut < wanted < n:
        notes.append(
            f"cut moved back from seq {items[wanted].seq} to the user message at seq "
            f"{items[cut].seq} to keep the turn whole"
        )
    staying_inside = sum(stays[:cut])
    if staying_inside:
        notes.append(
            f"{staying_inside} pinned, pinned-prefix or system item(s) before the cut were kept"
        )
    return CutPlan(compacted, kept, items[cut].seq, None, tuple(notes))
