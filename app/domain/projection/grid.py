"""The stable cut's grid and clock (``cut: stable``), derived from stored per-item counts.

Positions. Every live item has a position: how much working memory lies before it, counted in
one *unit*, from the start of working memory: stored o200k tokens (``max_tokens`` set), else
stored chars (``max_chars``), else items (``max_items``); the first of these the budget sets
(with no limit at all, tokens on a grid as if the budget were ``DEFAULT_GRID_TOKENS``). A
window does not need the older items to place itself: they hold the session's totals minus
the window's own counts. Nothing is stored for the grid, every replica derives the same one,
and the work follows the window, not the session.

The *grid* is every multiple of one *step* (``cut_step`` x the limit, in the unit). The *end*
is the position just past the newest item; the *clock point* is the last grid point at or
before the end. The clock moves once per step of growth, and everything the stable mode
decides depends on the items before the clock point (which appends never change) and on the
clock itself, not on the newest items:

- the tiers (``tiers``) count only the items before the clock point;
- the cut starts at the first candidate (group boundary, user message where the format or
  ``start_on`` asks for one) at or after the *grid point*: the smallest grid point such that
  the tail up to the clock point, estimated, plus one step of growth, fits the binding limit.
  If what is there now does not fit from that grid point (an estimate was short), the grid
  point moves ahead to the first one that does: a step outside the clock, said in the report.

So between two clock moves the payload only grows at its end, and its first messages repeat
byte for byte (``cache.stable_prefix``).
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate

from app.domain.items import StoredItem

from .budget import Budget, ContextSource, LimitName

DEFAULT_GRID_TOKENS = 8192
_UNIT_ORDER: tuple[LimitName, ...] = ("max_tokens", "max_chars", "max_items")
UNIT_WORDS: dict[LimitName, str] = {
    "max_tokens": "tokens",
    "max_chars": "chars",
    "max_items": "items",
}


@dataclass(frozen=True, slots=True)
class Clock:
    """The grid of one read. ``positions[i]`` is loaded item ``i``'s position (``None`` for a
    window's old mandatory items, which all lie before the window); ``frozen_end``: the index
    of the first item at or after the clock ``point`` (``len(items)`` if none); ``stepped``:
    the newest append (the trailing items written at the same time) moved the clock."""

    unit: LimitName
    step: int
    end: int
    point: int
    positions: list[int | None]
    sizes: list[int]
    frozen_end: int
    stepped: bool

    @property
    def unit_word(self) -> str:
        return UNIT_WORDS[self.unit]

    def grid_above(self, position: int) -> int:
        """The smallest grid point strictly after ``position``."""
        return (position // self.step + 1) * self.step


def clock_for(
    source: ContextSource,
    items: Sequence[StoredItem],
    *,
    tail_start: int,
    partial: bool,
    budget: Budget,
) -> Clock:
    """The clock of a read of ``items`` (``source.items``; the tail from ``tail_start``;
    ``partial``: a window with unloaded older items)."""
    limits = budget.limits
    unit = next((name for name in _UNIT_ORDER if name in limits), "max_tokens")
    basis = limits.get(unit, DEFAULT_GRID_TOKENS)
    step = max(1, int(budget.cut_step * basis))
    if unit == "max_tokens":
        sizes = [it.tokens for it in items]
        total = source.total_tokens
    elif unit == "max_chars":
        sizes = [it.chars for it in items]
        total = source.total_chars
    else:
        sizes = [1] * len(items)
        total = source.total_items
    window = sizes[tail_start:]
    in_window = sum(window)
    # the whole memory places itself; a window from the session's totals
    base = max(total - in_window, 0) if partial else 0
    starts = list(accumulate(window, initial=base))
    end = starts[-1]
    point = end // step * step
    positions: list[int | None] = [None] * tail_start
    positions.extend(starts[:-1])
    frozen_end = tail_start + bisect.bisect_left(starts, point, hi=len(window))
    stepped = False
    if len(items) > tail_start:
        newest = items[-1].created_at
        first = len(items) - 1
        while first > tail_start and items[first - 1].created_at == newest:
            first -= 1
        stepped = starts[first - tail_start] < point
    return Clock(
        unit=unit,
        step=step,
        end=end,
        point=point,
        positions=positions,
        sizes=sizes,
        frozen_end=frozen_end,
        stepped=stepped,
    )


@dataclass(frozen=True, slots=True)
class StableCut:
    """The stable cut of one read: ``chosen`` candidate, its ``grid_point``; ``forced``: the
    grid point moved ahead of the clock to fit; ``needs_more``: the estimate reached the start
    of the window (a window decides nothing there); ``fallback``: no candidate at or after the
    grid point, so the latest one that fits was taken."""

    chosen: int
    grid_point: int
    forced: bool
    needs_more: bool
    fallback: bool


def stable_cut(
    clock: Clock,
    *,
    tight: int,
    cut_starts: Sequence[int],
    costs: Sequence[int],
    base_cost: int,
    mandatory: set[int],
    limit: int | None,
    partial: bool,
) -> StableCut:
    """Choose the stable cut among the candidates (``cut_starts``, ascending; the last one is
    the empty tail) given the tight cut ``tight`` (the earliest candidate that fits).

    ``costs[i]``: item ``i``'s estimated cost in the clock's unit as rendered (0 where it is
    not rendered), ``base_cost`` what the summary costs, ``mandatory``: the items that are
    mandatory whatever the newest items (the newest user message is not among them: it
    changes with every turn), ``limit``: the limit in the clock's unit (``None``: not set, and
    only the tight cut decides).
    """
    last = len(cut_starts) - 1
    positions = clock.positions

    def position(k: int) -> int:
        if k >= last:
            return clock.end
        p = positions[cut_starts[k]]
        assert p is not None  # every candidate is in the tail
        return p

    needs_more = False
    grid_clock = 0
    if limit is not None:
        n = len(costs)
        frozen = clock.frozen_end
        # the tail up to the clock point, from candidate k: the mandatory items before the
        # cut plus everything from the cut to the clock point
        ahead = list(accumulate((costs[i] if i in mandatory else 0 for i in range(n)), initial=0))
        upto = list(accumulate(costs, initial=0))
        # one step of growth, with the framing the last step's items were charged on top
        reserve = clock.step
        for i in range(frozen - 1, -1, -1):
            p = positions[i]
            if p is None or p < clock.point - clock.step:
                break
            reserve += max(0, costs[i] - clock.sizes[i])
        cap = limit - reserve - base_cost
        fitting = last
        for k in range(last, -1, -1):
            start = cut_starts[k]
            cost = ahead[start] + max(0, upto[min(frozen, n)] - upto[min(start, frozen)])
            if cost > cap:
                break
            fitting = k
        if partial and (fitting == 0 or _reaches_window(clock, cut_starts)):
            needs_more = True
        grid_clock = 0 if fitting == 0 else clock.grid_above(position(fitting - 1))
    grid_fit = 0 if tight == 0 else clock.grid_above(position(tight - 1))
    grid_point = max(grid_clock, grid_fit)
    found = next((k for k in range(tight, last) if position(k) >= grid_point), None)
    fallback = found is None and tight < last
    if found is None:  # no boundary at or after the grid point: the latest one that fits
        found = last - 1 if fallback else last
    return StableCut(
        chosen=found,
        grid_point=grid_point,
        forced=grid_fit > grid_clock,
        needs_more=needs_more,
        fallback=fallback,
    )


def _reaches_window(clock: Clock, cut_starts: Sequence[int]) -> bool:
    """Whether the window starts after the last step before the clock point (the reserve
    looks at that step)."""
    first = next((p for p in clock.positions if p is not None), None)
    return first is not None and first > max(0, clock.point - clock.step)
