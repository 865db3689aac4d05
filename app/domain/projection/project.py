"""``project_context``: working memory + budget -> the next-turn prompt in a format, with a
report. The steps, each in its own module:

1. ``analysis``: kinds, tool groups, reasoning followers, units, the mandatory part;
2. ``grid`` (``cut: stable`` only): positions, the clock and the grid;
3. ``tiers``: Tier 1 and Tier 2 body transforms (positions never move);
4. the candidate cuts (suffixes of whole units; at user messages where the format or
   ``start_on`` asks), built by ``render`` and searched by ``search`` (tight) then moved onto
   the grid (stable);
5. ``cache``: the stable prefix and the Anthropic breakpoints; ``report``: the report.

Selection: the mandatory part plus a suffix of whole units that keeps the rendered payload
within ``max_items`` / ``max_chars`` / ``max_tokens``: with ``cut: tight`` the longest such
suffix, with ``cut: stable`` the one starting at the first candidate at or after the grid
point (in gemini, whose filler user content before a first model content may make a later
candidate's payload the larger, the first there that fits: ``search.filler_cut``). When the
mandatory part alone exceeds a limit, only it is sent and a note containing ``mandatory``
says so.

For provider formats only, the items inside a unit that holds calls are stably reordered as
(assistant side, outputs, the rest), so every call is answered right after its assistant turn
even when working memory interleaved them oddly; in well-formed memory this changes nothing.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, replace
from typing import Any

from app.domain.formats import FormatName, TokenCache, carried_by, placeholder_allowed
from app.domain.tokens import DEFAULT_TOKENIZER

from .analysis import (
    ASSISTANT,
    CALL,
    OUTPUT,
    REASONING,
    SYSTEM,
    USER,
    analyse,
    closure_of,
    last_index,
    mandatory_items,
)
from .budget import Budget, ContextSource, LimitName
from .cache import mark_breakpoints, stable_prefix
from .grid import StableCut, clock_for, stable_cut
from .render import Builder, Render
from .report import ContextReport, dropped_ranges, mandatory_note, selection_notes
from .search import estimated_cut, filler_cut, item_costs, summary_costs, tight_cut
from .tiers import apply_tiers

_COLUMN_OF_UNIT: dict[LimitName, int] = {"max_items": 0, "max_tokens": 1, "max_chars": 2}


@dataclass(frozen=True, slots=True)
class ProjectedContext:
    """``payload``: the format's fields (as ``formats.render``); ``needs_more``: see
    ``project_context``."""

    payload: dict[str, Any]
    report: ContextReport
    needs_more: bool
    # What the payload holds of working memory: (seq, item id) of every item rendered in it
    # (recall leaves out exactly these, and archived copies of them).
    held: tuple[tuple[int, str], ...] = ()


def project_context(
    source: ContextSource, budget: Budget, *, format: FormatName
) -> ProjectedContext:
    """Project working memory (or a window of it) into ``format`` under ``budget``.

    Invariants (DESIGN §2, each a property test): order (a subsequence of working memory in seq
    order; placeholders and trimmed reasoning keep their position; in openai-chat a tool
    answer may move up to right after the message holding its call, which Chat Completions
    requires where another message with calls came between them), mandatory part always
    present, tool pairing, reasoning only with its item, budget (unless the mandatory part alone
    exceeds it, then only that part and a ``mandatory`` note), recency (tight: the longest
    suffix of whole units; stable: the suffix from the first candidate at or after the grid
    point; no holes either way), honest report, determinism, round trip, and cache stability
    (stable: while only appends happen and the grid point stays, the payload begins with the
    previous read's first ``stable_prefix`` messages).

    ``needs_more`` is only ever true for a window with unloaded items: the answer might differ
    if older items were loaded (the kept tail reached the start of what the window can decide,
    or a mandatory old item belongs to a tool group or is reasoning). The service then loads a
    bigger window and calls again. When ``needs_more`` is false the output is byte-identical to
    projecting the whole working memory. The work done follows the size of ``source.items``.
    """
    items = list(source.items)
    bodies = [it.body for it in items]
    n = len(items)
    unloaded = source.total_items - n if source.window_start_seq is not None else 0
    partial = unloaded > 0
    tail_start = (
        bisect.bisect_left([it.seq for it in items], source.window_start_seq)
        if partial and source.window_start_seq is not None
        else 0
    )
    a = analyse(bodies, tail_start)
    kinds = a.kinds
    stable = budget.cut == "stable"

    # --- mandatory part -----------------------------------------------------------------
    newest_user = last_index(kinds, USER)
    mandatory = mandatory_items(items, kinds, budget, newest_user=newest_user)
    closure = closure_of(a, mandatory)
    force_more = partial and any(
        (i < tail_start and kinds[i] > ASSISTANT)  # not a message
        or (kinds[i] == OUTPUT and i not in a.call_of)
        for i in mandatory
    )

    # --- the clock (stable) and the tiers -------------------------------------------------
    clock = (
        clock_for(source, items, tail_start=tail_start, partial=partial, budget=budget)
        if stable
        else None
    )
    tiers = apply_tiers(bodies, a, budget, newest_user=newest_user, clock=clock)
    transformed, cleared, trimmed = tiers.transformed, tiers.cleared, tiers.trimmed
    shown = [transformed.get(i, b) for i, b in enumerate(bodies)] if transformed else bodies
    dangling = {c for c, outs in a.outputs_of.items() if not outs}
    drop_dangling = budget.dangling_tool_calls == "drop"

    # Renderable: what the format can carry (an opaque item only in its own format; in
    # openai-responses, reasoning it writes itself, trimmed reasoning included, only under an
    # id OpenAI issued, hence ``changed``): messages, paired outputs, calls unless dropped as
    # dangling (only a function call can get a placeholder output); then reasoning, whose
    # follower (a call, an assistant message or a hosted item, never reasoning) is decided by
    # now.
    carried = carried_by(format, items, changed=trimmed)
    can_render = [(kind != OUTPUT or i in a.call_of) and carried[i] for i, kind in enumerate(kinds)]
    for i in dangling:
        if drop_dangling or not placeholder_allowed(items[i], format):
            can_render[i] = False
    for i, follower in a.follower.items():
        can_render[i] = (
            follower is not None
            and can_render[follower]
            and carried[i]
            and (format not in ("anthropic", "gemini") or i not in trimmed)
        )
    cache = TokenCache(budget.tokenizer)
    builder = Builder(
        items=items,
        shown=shown,
        can_render=can_render,
        analysis=a,
        dangling=dangling,
        drop_dangling=drop_dangling,
        summary=source.summary,
        format=format,
        tokenizer=budget.tokenizer,
        cache=cache,
    )

    # --- cut candidates -------------------------------------------------------------------
    unit_of = a.unit_of
    unit_starts = a.unit_starts
    n_units = len(unit_starts)
    first_tail_unit = unit_of[tail_start] if tail_start < n else n_units
    needs_user = budget.start_on == "user" or format == "anthropic"
    valid: list[bool] = []
    if not needs_user:
        valid = [True] * n_units
    else:
        for u, start in enumerate(unit_starts):
            ok = kinds[start] == USER
            if not ok and u > first_tail_unit:
                ok = valid[u - 1] and all(m in closure for m in range(unit_starts[u - 1], start))
            valid.append(ok)
    first_candidate_unit = first_tail_unit
    if partial and first_tail_unit < n_units:
        # The first unit of the window may extend into unloaded items (reasoning before it, a
        # call before it), and so may every unit up to an output whose call is not loaded.
        last_uncertain = first_tail_unit
        for i in range(tail_start, n):
            if kinds[i] == OUTPUT and i not in a.call_of:
                last_uncertain = max(last_uncertain, unit_of[i])
        first_candidate_unit = last_uncertain + 1
        # a mandatory tool group there may have members among the unloaded items
        force_more = force_more or any(
            i >= tail_start and unit_of[i] < first_candidate_unit and kinds[i] in (CALL, OUTPUT)
            for i in closure
        )
    candidates = [u for u in range(first_candidate_unit, n_units) if valid[u]]
    candidates.append(n_units)
    cut_starts = [unit_starts[cut] for cut in candidates[:-1]] + [n]  # ascending

    closure_sorted = sorted(closure)

    def selection(k: int) -> list[int]:
        """``sorted(closure | range(start, n))`` for candidate ``k``."""
        start = cut_starts[k]
        return closure_sorted[: bisect.bisect_left(closure_sorted, start)] + list(range(start, n))

    builds: dict[int, Render] = {}

    def attempt(k: int) -> Render:
        if k not in builds:
            builds[k] = builder.build(selection(k))
        return builds[k]

    limits = budget.limits

    told: dict[int, list[LimitName]] = {}  # candidate -> its violations, told without a build

    def violated(k: int) -> list[LimitName]:
        """The limits candidate ``k``'s payload exceeds. Without building it when the
        nearest later candidate built tells (the search's usual probe, one unit before the
        one that fits): k's selection is that one's plus the units in between, measured
        alone (``Builder.extended``), unless a mandatory item lies among them (it is
        rendered elsewhere in the later payload)."""
        if k in told:
            return told[k]
        if k not in builds:
            later = min((j for j in builds if j > k), default=None)
            if later is not None:
                start, end = cut_starts[k], cut_starts[later]
                between = bisect.bisect_left(closure_sorted, end) - bisect.bisect_left(
                    closure_sorted, start
                )
                if not between:
                    extension = builder.extended(builds[later], range(start, end))
                    known = None if extension is None else extension.violated(limits)
                    if known is not None:
                        told[k] = known
                        return known
        return attempt(k).violated(limits)

    def fits(k: int) -> bool:
        return not violated(k)

    filler_cost = builder.filler_cost

    def bare_fits(k: int, room: bool) -> bool:
        assert filler_cost is not None
        return not attempt(k).bare_violated(limits, room=filler_cost if room else (0, 0))

    def opens_with_filler(k: int) -> bool:
        if k in builds:
            return builds[k].filler != (0, 0)
        return builder.opens_with_filler(selection(k))

    last = len(cut_starts) - 1
    mandatory_over = False
    costs = None
    summary_cost = (0, 0, 0)
    if limits or stable:
        costs = item_costs(items, shown, kinds, transformed, can_render, format=format, cache=cache)
        summary_cost = summary_costs(source.summary, cache)
    # with a filler (gemini), the earliest candidate whose payload without it fits: if that is
    # a window's first, an older one might fit too
    earliest_bare: int | None = None
    if not limits:
        chosen = 0
    else:
        assert costs is not None
        guess = estimated_cut(
            cut_starts, limits, columns=costs, closure=closure, summary=summary_cost
        )
        if filler_cost is not None:
            found, earliest_bare = filler_cut(
                bare_fits, opens_with_filler, first=0, last=last, guess=guess
            )
        else:
            first_mandatory = min(
                (i for i in closure if can_render[i] and kinds[i] != SYSTEM),
                default=n,
            )
            # the first candidate starting after it (the last one, the empty tail, at the latest)
            split = min(bisect.bisect_right(cut_starts, first_mandatory), last)
            found = tight_cut(fits, last=last, split=split, guess=guess)
        mandatory_over = found is None
        chosen = last if found is None else found

    grid: StableCut | None = None
    filler_moved = False
    if clock is not None and not mandatory_over and limits:
        assert costs is not None
        column = _COLUMN_OF_UNIT[clock.unit]
        grid = stable_cut(
            clock,
            tight=chosen,
            cut_starts=cut_starts,
            costs=costs[column],
            base_cost=summary_cost[column],
            mandatory=closure_of(a, mandatory_items(items, kinds, budget, newest_user=None)),
            limit=limits.get(clock.unit),
            partial=partial,
        )
        if filler_cost is not None and grid.chosen != chosen and not fits(grid.chosen):
            # past the tight cut a filler can still make a tail too long: the first one after
            # the grid's that fits, else the latest one before it that does (the tight cut
            # fits); the cut then settles nothing more than a tight one
            later, _ = filler_cut(
                bare_fits, opens_with_filler, first=grid.chosen, last=last, guess=grid.chosen
            )
            if later is None:
                later = next(k for k in range(grid.chosen - 1, chosen - 1, -1) if fits(k))
            grid = replace(grid, chosen=later, fallback=grid.fallback or later < grid.chosen)
            filler_moved = True
        chosen = grid.chosen
        force_more = force_more or grid.needs_more
    result = attempt(chosen)
    needs_more = force_more or (
        partial
        and (
            (not mandatory_over and chosen == 0)
            # with a filler, an older user turn may still make a longer tail fit
            or (filler_cost is not None and earliest_bare == 0)
        )
    )

    limits_applied: list[LimitName] = []
    if mandatory_over:
        limits_applied = result.violated(limits)
    elif chosen > 0:
        limits_applied = violated(chosen - 1)
        if grid is not None and not limits_applied:
            # the stable cut dropped more than the budget needed: the grid's limit applied
            limits_applied = [clock.unit] if clock is not None else []

    # --- report ---------------------------------------------------------------------------
    selected = selection(chosen)
    notes: list[str] = []
    if mandatory_over:
        notes.append(mandatory_note(result, limits, limits_applied))
    notes += selection_notes(
        result=result,
        selected=selected,
        items=items,
        shown=shown,
        a=a,
        cleared=cleared,
        trimmed=trimmed,
        stale=tiers.stale,
        dangling=dangling,
        can_render=can_render,
        carried=carried,
        drop_dangling=drop_dangling,
        format=format,
    )
    if clock is not None:
        unit = clock.unit_word
        point = 0 if grid is None else grid.grid_point
        notes.append(f"stable: grid point {point} {unit}, step {clock.step}, clock {clock.point}")
        if clock.stepped:
            notes.append(f"stable: step at this read (the clock reached {clock.point} {unit})")
        if grid is not None and grid.forced:
            notes.append("stable: step ahead of the clock (the tail would not fit otherwise)")
        if grid is not None and grid.fallback:
            notes.append(
                "stable: no boundary at or after the grid point; the tail starts at the latest one"
            )

    # What the next reads repeat: only settled items (see ``cache``).
    settled_before = a.unit_starts[-1] if a.unit_starts else n
    if dangling:
        settled_before = min(settled_before, min(dangling))
    trailing = n
    while trailing > tail_start and kinds[trailing - 1] == REASONING:
        trailing -= 1
    settled_before = min(settled_before, trailing)
    if clock is not None and not filler_moved:
        settled_before = min(settled_before, clock.frozen_end)
    else:
        settled_before = min(settled_before, cut_starts[chosen])
    if newest_user is not None and newest_user < cut_starts[chosen]:
        # kept only as the newest user message: the next one drops it
        settled_before = min(settled_before, newest_user)
    if settled_before < n:  # whole units only: a unit is rendered (reordered) as a whole
        settled_before = unit_starts[unit_of[settled_before]]
    prefix = stable_prefix(
        builder, selected, result.payload, settled_before=settled_before, format=format
    )
    payload = result.payload
    if budget.cache_breakpoints:
        if format == "anthropic":
            payload, _ = mark_breakpoints(payload, stable_prefix=prefix)
        else:
            notes.append(f"cache_breakpoints: {format} has no cache markers; nothing marked")

    # the summary's o200k count through the process-wide counts (texts repeat across reads)
    summary_tokens = TokenCache(DEFAULT_TOKENIZER).count(source.summary or "")
    report = ContextReport(
        source_items=source.total_items,
        projected_items=result.items,
        dropped_items=source.total_items - result.items,
        source_tokens=source.total_tokens + summary_tokens,
        projected_tokens=result.tokens,
        source_chars=source.total_chars + len(source.summary or ""),
        projected_chars=result.chars,
        limits_applied=limits_applied,
        dropped_ranges=dropped_ranges(
            items, set(result.rendered), source.unloaded_runs if partial else ()
        ),
        notes=notes,
        tokenizer=budget.tokenizer,
        stable_prefix=prefix,
    )
    held = tuple((items[i].seq, items[i].id) for i in result.rendered)
    return ProjectedContext(payload=payload, report=report, needs_more=needs_more, held=held)
