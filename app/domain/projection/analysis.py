"""The structure of the loaded items, before any budget: kinds, tool groups, reasoning
followers, units, and the mandatory part.

Vocabulary (used by every module of the projection):

- *kind*: what an item is for the structural decisions (``SYSTEM`` ... ``INPUT`` below),
  computed once per projection so that the loops branch on a small int;
- *group* (tool group): a run of consecutive calls (parallel calls; reasoning between them
  does not break the run) together with every output answering one of them. An output
  answers the latest earlier call with its pairing key; an output with no such call is an
  *orphan* and is never rendered; a call with no output is *dangling*;
- reasoning belongs to the item it precedes, its *follower*: the next non-reasoning item,
  which must be an assistant message, a call or a hosted item (model output); reasoning that
  precedes anything else has no follower and is never rendered;
- *unit*: the smallest contiguous spans of working memory that contain whole groups and keep
  reasoning with its follower; a kept tail is always a suffix of whole units;
- *mandatory part*: the first ``pinned_prefix_items`` items, pinned items, system and
  developer messages (``keep_system``), the newest user message; and, for each, its whole
  tool group and, for reasoning, its follower (the *closure*).

Items older than ``tail_start`` (a window's mandatory old items) are not contiguous: each
stands alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import accumulate, compress

from app.domain.items import (
    MODEL_OUTPUT_TYPES,
    CanonicalItem,
    FunctionCallItem,
    FunctionCallOutputItem,
    MessageItem,
    OpaqueItem,
    ReasoningItem,
    StoredItem,
    opaque_pairing,
    pair_key,
)

from .budget import Budget

# Messages sort first: ``kind <= ASSISTANT`` means "a message".
SYSTEM = 0  # system or developer message
USER = 1
ASSISTANT = 2  # assistant message
CALL = 3
OUTPUT = 4
REASONING = 5
HOSTED = 6  # an opaque model-side item that pairs with nothing (a hosted tool call, ...)
INPUT = 7  # an opaque item given to the model that pairs with nothing (compaction, ...)

_MESSAGE_KINDS = {"system": SYSTEM, "developer": SYSTEM, "user": USER, "assistant": ASSISTANT}
_BODY_KINDS: dict[type, int] = {
    FunctionCallItem: CALL,
    FunctionCallOutputItem: OUTPUT,
    ReasoningItem: REASONING,
}
_OPAQUE_KINDS = {"call": CALL, "output": OUTPUT}

# Where an item goes when a unit holding calls is reordered for a provider format: the
# assistant side (assistant messages, calls, reasoning) first, then outputs, then the rest.
CATEGORY = (2, 2, 0, 0, 1, 0, 0, 2)  # indexed by kind
N_CATEGORIES = 3
# The role of an item of each kind (system/developer messages: see the message).
ROLE_OF_KIND = (
    "system", "user", "assistant", "assistant", "user", "assistant", "assistant", "user"
)  # fmt: skip


def kinds_of(bodies: Sequence[CanonicalItem]) -> list[int]:
    """The kind of every body: looked up by exact class, which is what validation makes."""
    kinds = [
        _MESSAGE_KINDS[body.role] if type(body) is MessageItem else _BODY_KINDS.get(type(body), -1)
        for body in bodies
    ]
    if -1 in kinds:  # a subclass of a canonical body somewhere: the general path
        kinds = [_kind_of(body) for body in bodies]
    return kinds


def _kind_of(body: CanonicalItem) -> int:
    if isinstance(body, MessageItem):
        return _MESSAGE_KINDS[body.role]
    if isinstance(body, FunctionCallItem):
        return CALL
    if isinstance(body, FunctionCallOutputItem):
        return OUTPUT
    if isinstance(body, OpaqueItem):
        side = opaque_pairing(body)[0]
        if side is not None:
            return _OPAQUE_KINDS[side]
        return HOSTED if body.type in MODEL_OUTPUT_TYPES else INPUT
    return REASONING


@dataclass(slots=True)
class Analysis:
    """Structure of the loaded items, independent of the budget's limits."""

    n: int
    tail_start: int
    kinds: list[int] = field(default_factory=list)  # item -> SYSTEM ... INPUT
    call_of: dict[int, int] = field(default_factory=dict)  # output -> call
    outputs_of: dict[int, list[int]] = field(default_factory=dict)  # call -> outputs
    group_of: dict[int, int] = field(default_factory=dict)  # call/paired output -> group
    groups: list[list[int]] = field(default_factory=list)  # group -> calls + outputs, sorted
    follower: dict[int, int | None] = field(default_factory=dict)  # reasoning -> its item
    unit_starts: list[int] = field(default_factory=list)  # a unit ends where the next starts
    unit_of: list[int] = field(default_factory=list)


def answered_calls(kinds: Sequence[int], keys: Mapping[int, str | None]) -> dict[int, int]:
    """The one pairing rule of the codebase (the projection's; recall and the inspector call
    it too): output index -> the index of the call it answers, the latest earlier call with
    its pairing key (``keys``: the ``pair_key`` of every call and output). An output with no
    such call is an orphan and is absent.

    By position, not by key alone: keys repeat (Gemini's derived ids every turn, LangChain's
    ``call_{k}``), and each output answers its own turn's call. The rule looks only at the
    items sharing a key, so the calls and outputs of one key, in seq order, pair as they do
    among all items."""
    last_call: dict[str | None, int] = {}
    call_of: dict[int, int] = {}
    for i, kind in enumerate(kinds):
        if kind == CALL:
            last_call[keys[i]] = i
        elif kind == OUTPUT:
            call = last_call.get(keys[i])
            if call is not None:
                call_of[i] = call
    return call_of


def analyse(bodies: Sequence[CanonicalItem], tail_start: int) -> Analysis:
    """Kinds, pairing, groups, followers and units of ``bodies`` (items before ``tail_start``
    are a window's old mandatory items: not contiguous, each stands alone)."""
    n = len(bodies)
    kinds = kinds_of(bodies)
    a = Analysis(n=n, tail_start=tail_start, kinds=kinds)
    keys = {i: pair_key(bodies[i]) for i, kind in enumerate(kinds) if kind in (CALL, OUTPUT)}
    a.call_of = answered_calls(kinds, keys)
    run: list[int] | None = None
    runs: list[list[int]] = []
    for i, kind in enumerate(kinds):
        if kind == CALL:
            if run is None:
                run = []
                runs.append(run)
            run.append(i)
            a.outputs_of[i] = []
            if i < tail_start:  # loaded old items are not contiguous: each stands alone
                run = None
        elif kind != REASONING or i < tail_start:
            run = None
    for output, call in a.call_of.items():  # ascending outputs: each call's list is sorted
        a.outputs_of[call].append(output)
    for g, calls in enumerate(runs):
        if len(calls) == 1:
            # outputs answer an earlier call and are appended in order: already sorted
            members = [calls[0], *a.outputs_of[calls[0]]]
        else:
            members = sorted({*calls, *(o for c in calls for o in a.outputs_of[c])})
        a.groups.append(members)
        for m in members:
            a.group_of[m] = g
    if REASONING in kinds:  # a scan in C; many sessions have none
        for i, kind in enumerate(kinds):
            if kind == REASONING:
                j = i + 1
                while i >= tail_start and j < n and kinds[j] == REASONING:
                    j += 1
                ok = i >= tail_start and j < n and kinds[j] in (CALL, ASSISTANT, HOSTED)
                a.follower[i] = j if ok else None
    # Units. Old items stand alone. In the tail, a group reaches from its first member to its
    # last, and reasoning to its follower; an item inside such a reach, after its start, joins
    # the unit before it; every other item starts a unit.
    unit_start = [1] * n
    for members in a.groups:
        if members[0] >= tail_start:
            unit_start[members[0] + 1 : members[-1] + 1] = [0] * (members[-1] - members[0])
    for i, follower in a.follower.items():
        if follower is not None:
            unit_start[i + 1 : follower + 1] = [0] * (follower - i)
    a.unit_starts = list(compress(range(n), unit_start))
    # the unit of an item: how many units start at or before it, minus one (summed in C)
    a.unit_of = list(accumulate(unit_start, initial=-1))[1:]
    return a


def last_index(values: list[int], value: int) -> int | None:
    """Index of the last occurrence of ``value`` (``list.index`` on the reversed list runs in
    C), or ``None``."""
    try:
        return len(values) - 1 - values[::-1].index(value)
    except ValueError:
        return None


def mandatory_items(
    items: Sequence[StoredItem], kinds: Sequence[int], budget: Budget, *, newest_user: int | None
) -> set[int]:
    """The mandatory items themselves (before the closure): pinned prefix, pinned items,
    system/developer messages (``keep_system``), the newest user message."""
    mandatory: set[int] = set(range(min(budget.pinned_prefix_items, len(items))))
    mandatory.update(i for i, it in enumerate(items) if it.pinned)
    if budget.keep_system:
        mandatory.update(i for i, kind in enumerate(kinds) if kind == SYSTEM)
    if newest_user is not None:
        mandatory.add(newest_user)
    return mandatory


def closure_of(a: Analysis, seeds: set[int]) -> set[int]:
    """``seeds`` with, for each, its whole tool group and, for reasoning, its follower."""
    closure: set[int] = set()
    stack = sorted(seeds, reverse=True)
    while stack:
        i = stack.pop()
        if i in closure:
            continue
        closure.add(i)
        group = a.group_of.get(i)
        if group is not None:
            stack.extend(m for m in a.groups[group] if m not in closure)
        follower = a.follower.get(i)
        if follower is not None and follower not in closure:
            stack.append(follower)
    return closure
