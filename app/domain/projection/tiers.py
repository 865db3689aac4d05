"""Tier 1 and Tier 2: body transforms applied before the cut, in place (positions never move).

- Tier 1 (``max_recent_tool_results: N``): older tool outputs become
  ``[tool result cleared: NAME(CALL_ID)]``.
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

from collections.abc import Sequence
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


@dataclass(frozen=True, slots=True)
class Tiers:
    """``transformed``: the items whose body differs from the stored one, and how;
    ``cleared`` (Tier 1) and ``trimmed`` (Tier 2): the items each tier acted on."""

    transformed: dict[int, CanonicalItem]
    cleared: set[int]
    trimmed: set[int]


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
    if keep_n is not None:
        outputs_newest_first = [i for i in range(horizon - 1, -1, -1) if kinds[i] == OUTPUT]
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
    return Tiers(transformed=transformed, cleared=cleared, trimmed=trimmed)
