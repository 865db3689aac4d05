"""The context report: what was kept and dropped, and why, recomputable from the payload.

``projected_*`` are recomputed from the rendered payload under the format's counting rule
(see each ``app.domain.formats`` module); ``source_*`` are the stored aggregates of working
memory (o200k item tokens, chars) plus the summary. Notes name each tier that acted, the
mandatory part when it alone exceeds a limit, what the format left out, and the stable cut's
grid and steps.

``limits_applied`` names the limits that decided the cut: those the next earlier candidate
breaks, the stable grid's limit when the grid put the cut later than that, or those the
mandatory part alone breaks. What the tiers do is in the notes, not there, even where the
stable clock they run on takes its step from a limit: in ``anthropic`` Tier 2 leaves a trimmed
thinking block out altogether (it cannot be sent without its text), and its note says so.
"""

from __future__ import annotations

import bisect
import operator
from collections.abc import Mapping, Sequence

from pydantic import BaseModel, ConfigDict, Field

from app.domain.formats import (
    FormatName,
    degraded_parts,
    lossy_notes,
    representable,
    unissued_reasoning_note,
)
from app.domain.items import CanonicalItem, StoredItem
from app.domain.tokens import TokenizerName

from .analysis import CALL, OUTPUT, REASONING, Analysis
from .budget import LimitName
from .render import Render


class RecalledEntry(BaseModel):
    """One entry of the recall block: its (first) seq and session, its fused score, and the
    tokens of its line."""

    model_config = ConfigDict(frozen=True)

    seq: int
    session_id: str
    score: float
    tokens: int


class ContextReport(BaseModel):
    """What was kept and dropped; every ``projected_*`` number is recomputable from the payload."""

    model_config = ConfigDict(frozen=True)

    source_items: int
    projected_items: int
    dropped_items: int
    source_tokens: int
    projected_tokens: int
    source_chars: int
    projected_chars: int
    limits_applied: list[LimitName]
    dropped_ranges: list[tuple[int, int]]
    notes: list[str]
    tokenizer: TokenizerName
    stable_prefix: int = Field(
        default=0,
        description="How many leading payload messages (items in canonical, `messages` in "
        "anthropic, whose `system` is always stable) the next reads repeat byte for byte "
        "while only appends happen, until the next step of a stable cut",
    )
    recalled: list[RecalledEntry] = Field(
        default_factory=list,
        description="Entries of the recall block, oldest first (empty without recall)",
    )
    recall_query: str | None = Field(
        default=None, description="The query recall ranked by (null without recall)"
    )


def mandatory_note(result: Render, limits: Mapping[LimitName, int], over: list[LimitName]) -> str:
    details = ", ".join(
        f"{name} {value} > {limits[name]}"
        for name, value in (
            ("max_items", result.items),
            ("max_chars", result.chars),
            ("max_tokens", result.tokens),
        )
        if name in over
    )
    return (
        f"the mandatory part alone exceeds the budget ({details}); only the mandatory part is sent"
    )


def selection_notes(
    *,
    result: Render,
    selected: Sequence[int],
    items: Sequence[StoredItem],
    shown: Sequence[CanonicalItem],
    a: Analysis,
    cleared: set[int],
    trimmed: set[int],
    dangling: set[int],
    stale: frozenset[int] = frozenset(),
    can_render: Sequence[bool],
    carried: Sequence[bool],
    drop_dangling: bool,
    format: FormatName,
) -> list[str]:
    """The notes on what the tiers did and what the selection left out, and why
    (``carried``: whether the format carries each item at all, ``formats.carries``)."""
    kinds = a.kinds
    notes: list[str] = []
    out_rendered = [i for i in result.rendered if kinds[i] == OUTPUT]
    n_cleared = sum(1 for i in out_rendered if i in cleared)
    if n_cleared:
        notes.append(
            f"tier1: cleared {n_cleared} tool results, kept {len(out_rendered) - n_cleared}"
        )
    n_stale = sum(1 for i in out_rendered if i in stale)
    if n_stale:
        # stale: a later call of the same tool with the same arguments was answered
        notes.append(f"tier1: cleared {n_stale} stale")
    # counts over the selected calls, outputs and reasoning (messages need no note)
    n_trimmed = sel_dangling = orphans = stray = unrepresentable = unissued = 0
    left_out: dict[str, int] = {}
    for i in selected:
        kind = kinds[i]
        if kind != REASONING and not carried[i]:
            kind_name = items[i].body.type
            left_out[kind_name] = left_out.get(kind_name, 0) + 1
        elif kind == CALL:
            if i in dangling:
                sel_dangling += 1
        elif kind == OUTPUT:
            if i not in a.call_of:
                orphans += 1
        elif kind == REASONING:
            follower = a.follower.get(i)
            if follower is None:
                stray += 1
            elif not carried[i]:
                # no counterpart at all, or (openai-responses) no reasoning id OpenAI issued
                body, origin = items[i].body, items[i].format
                if representable(format, body, origin=origin):
                    unissued += 1
                else:
                    unrepresentable += 1
            elif i in trimmed and can_render[follower]:
                n_trimmed += 1
    if n_trimmed and format in ("anthropic", "gemini"):
        # A thinking block (a Gemini thought) is sent whole (text and signature) or not at
        # all: trimmed, it is left out, and the note says so (it is among ``dropped_ranges``,
        # and no limit did it).
        notes.append(f"tier2: trimmed {n_trimmed} reasoning items; {format} left them out")
    elif n_trimmed:
        notes.append(f"tier2: trimmed {n_trimmed} reasoning items")
    if sel_dangling and drop_dangling:
        notes.append(f"dangling tool calls: dropped {sel_dangling} calls without output")
    elif result.placeholders:
        notes.append(f"dangling tool calls: added {result.placeholders} placeholder outputs")
    if orphans:
        notes.append(f"dropped {orphans} tool outputs whose call is not in working memory")
    if stray:
        notes.append(f"dropped {stray} reasoning items that precede no model output")
    if unrepresentable:
        notes.append(f"{format}: left out {unrepresentable} reasoning items it cannot represent")
    if unissued:
        notes.append(unissued_reasoning_note(format, unissued))
    parts = degraded_parts(format, [(items[i], shown[i]) for i in result.rendered])
    notes += lossy_notes(format, left_out, parts)
    return notes


def dropped_ranges(
    items: Sequence[StoredItem], rendered: set[int], unloaded: Sequence[tuple[int, int]]
) -> list[tuple[int, int]]:
    """Maximal seq ranges of what was dropped: loaded items not rendered, and unloaded runs.

    Walks items (ascending seq, as ``ContextSource`` promises) with the unloaded runs slotted
    in between, as parallel columns; any other input takes the general path, which sorts a
    tuple per item."""
    seqs = [it.seq for it in items]
    dropped = [i not in rendered for i in range(len(seqs))]
    ascending = all(map(operator.lt, seqs, seqs[1:]))
    if not ascending or (unloaded and not {first for first, _ in unloaded}.isdisjoint(seqs)):
        return _dropped_ranges_sorted(seqs, dropped, unloaded)
    firsts, lasts = seqs, seqs
    if unloaded:
        firsts, lasts = list(seqs), list(seqs)
        for first, last in sorted(unloaded, reverse=True):  # each insert leaves the rest in place
            at = bisect.bisect_left(seqs, first)
            firsts.insert(at, first)
            lasts.insert(at, last)
            dropped.insert(at, True)
    ranges: list[tuple[int, int]] = []
    open_first: int | None = None
    open_last = 0
    for first, last, drop in zip(firsts, lasts, dropped, strict=True):
        if drop:
            if open_first is None:
                open_first = first
            open_last = last
        elif open_first is not None:
            ranges.append((open_first, open_last))
            open_first = None
    if open_first is not None:
        ranges.append((open_first, open_last))
    return ranges


def _dropped_ranges_sorted(
    seqs: Sequence[int], dropped: Sequence[bool], unloaded: Sequence[tuple[int, int]]
) -> list[tuple[int, int]]:
    segments = [(seq, seq, drop) for seq, drop in zip(seqs, dropped, strict=True)]
    segments += [(first, last, True) for first, last in unloaded]
    segments.sort()
    ranges: list[tuple[int, int]] = []
    open_range: list[int] | None = None
    for first, last, drop in segments:
        if drop:
            if open_range is None:
                open_range = [first, last]
            else:
                open_range[1] = last
        elif open_range is not None:
            ranges.append((open_range[0], open_range[1]))
            open_range = None
    if open_range is not None:
        ranges.append((open_range[0], open_range[1]))
    return ranges
