"""Tier 1 and Tier 2: body transforms applied before the cut, in place (positions never move).

- Tier 1 (``max_recent_tool_results: N``): older tool outputs become
  ``[tool result cleared: NAME(CALL_ID)]``. Stale outputs go first (``stale_outputs``: an
  output superseded by a later answered call of the same tool with the same arguments, the
  same file read again, the same tests run again): the N outputs that keep their text are
  the newest current ones, then, only if fewer than N are current, the newest stale ones.
- Tier 2 (``trim_old_reasoning``): reasoning before the anchor user message loses its payload
  (type and id stay).

With ``cut: tight`` they follow the newest items: the N newest outputs keep their text, the
anchor is the newest user message, so both move on every turn. With ``cut: stable`` they run
on the grid's clock (``grid.Clock``): only the items before the clock point count, so the N
newest of those keep their text (at least N in all: everything after the clock point keeps
its text too) and the anchor is the newest user message before the clock point. Both then
change only when the clock moves, in the same read as the cut.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from app.domain.items import (
    CanonicalItem,
    FunctionCallItem,
    FunctionCallOutputItem,
    ReasoningItem,
)

from .analysis import OUTPUT, REASONING, USER, Analysis, last_index
from .budget import Budget
from .grid import Clock


def cleared_placeholder(name: str, call_id: str) -> str:
    """Tier 1 text of an old tool result: ``[tool result cleared: NAME(CALL_ID)]``."""
    return f"[tool result cleared: {name}({call_id})]"


def missing_placeholder(name: str, call_id: str) -> str:
    """Synthetic output for a call still waiting for its result (``placeholder`` mode)."""
    return f"[tool result missing: {name}({call_id})]"


def call_signature(body: FunctionCallItem) -> tuple[str, str]:
    """What makes two calls the same call: the tool's name and its arguments, compared as
    JSON values when they parse (key order and spacing aside), else as the text sent."""
    try:
        value = json.loads(body.arguments)
    except ValueError:
        return body.name, body.arguments
    return body.name, json.dumps(value, sort_keys=True, separators=(",", ":"))


def stale_outputs(
    bodies: Sequence[CanonicalItem], call_of: Mapping[int, int], *, end: int | None = None
) -> dict[int, int]:
    """The stale tool outputs among ``bodies[:end]``, each mapped to its successor.

    An output (of a ``function_call``, paired as ``call_of`` says: output index -> call index)
    is stale when a later function call with the same ``call_signature`` has an output of its
    own before ``end``: the newest such output is its successor, which says what the tool
    says now. A call still waiting for its output supersedes nothing (the older answer is the
    only one). Pure and deterministic: it depends on the bodies and the pairing alone, so a
    prompt and recall agree on it (recall can skip a stale output whose successor is in the
    prompt)."""
    end = len(bodies) if end is None else end
    newest: dict[tuple[str, str], int] = {}  # signature -> the newest answered call's output
    stale: dict[int, int] = {}
    for i in range(end - 1, -1, -1):  # newest first: the first output seen per signature wins
        call = call_of.get(i)
        if call is None:
            continue
        call_body = bodies[call]
        if type(call_body) is not FunctionCallItem or type(bodies[i]) is not FunctionCallOutputItem:
            continue
        key = call_signature(call_body)
        successor = newest.get(key)
        if successor is None:
            newest[key] = i
        elif call_of[successor] != call:  # another output of the same call is no successor
            stale[i] = successor
    return stale


@dataclass(frozen=True, slots=True)
class Tiers:
    """``transformed``: the items whose body differs from the stored one, and how;
    ``cleared`` (Tier 1) and ``trimmed`` (Tier 2): the items each tier acted on; ``stale``:
    the cleared outputs that were stale (``stale_outputs``)."""

    transformed: dict[int, CanonicalItem]
    cleared: set[int]
    trimmed: set[int]
    stale: frozenset[int] = frozenset()


def apply_tiers(
    bodies: Sequence[CanonicalItem],
    a: Analysis,
    budget: Budget,
    *,
    newest_user: int | None,
    clock: Clock | None,
) -> Tiers:
    """The tiers' transforms (see the module docstring); ``clock`` is given with ``cut:
    stable``."""
    kinds = a.kinds
    # items at or after ``horizon`` are newer than the clock point: the tiers leave them alone
    horizon = len(bodies) if clock is None else clock.frozen_end
    transformed: dict[int, CanonicalItem] = {}
    cleared: set[int] = set()
    keep_n = budget.max_recent_tool_results
    stale: dict[int, int] = {}
    if keep_n is not None:
        # Staleness is judged before the horizon only, so that with ``cut: stable`` it
        # changes with the clock, as the rest of the tier does.
        stale = stale_outputs(bodies, a.call_of, end=horizon)
        outputs_newest_first = [i for i in range(horizon - 1, -1, -1) if kinds[i] == OUTPUT]
        if stale:  # current outputs keep their text first; sorted() is stable
            outputs_newest_first.sort(key=lambda i: i in stale)
        for i in outputs_newest_first[keep_n:]:
            call = a.call_of.get(i)
            body = bodies[i]
            if call is None or not isinstance(body, FunctionCallOutputItem):
                continue
            call_body = bodies[call]
            if not isinstance(call_body, FunctionCallItem):
                continue
            text = cleared_placeholder(call_body.name, body.call_id)
            if body.output != text:
                transformed[i] = body.model_copy(update={"output": text})
            cleared.add(i)
    trimmed: set[int] = set()
    if budget.trim_old_reasoning:
        anchor = newest_user if clock is None else last_index(list(kinds[:horizon]), USER)
        if anchor is not None:
            for i in range(anchor):
                if kinds[i] == REASONING:
                    trimmed.add(i)
                    transformed[i] = ReasoningItem()
    return Tiers(
        transformed=transformed,
        cleared=cleared,
        trimmed=trimmed,
        stale=frozenset(i for i in cleared if i in stale),
    )
