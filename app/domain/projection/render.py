"""Building one candidate payload: the selected items, rendered in the format, and measured.

A selection is a sorted list of loaded item indices. Building it keeps the items that can be
rendered, adds the synthetic output of each dangling call (``placeholder`` mode) right after
its group's last member, reorders the items of each unit holding calls for provider formats
(assistant side, outputs, the rest; stable), renders, and counts the payload under the
format's rule. Candidate builds overlap almost entirely, so each item's entry is made once.

Function calls that share an id (a Gemini call written without one gets a key derived from
its name, which the next turn's call repeats; a client may send its own ids twice) keep it
where they are rendered from their own record; rendered into another format, each after the
first call with that id in the payload is sent with an id of its own, ``<id>_s<seq>``, and its
outputs with it, so every call id in a prompt names one call.

A build also says what the filler message a format may put first (gemini: a user content
before a first model content, ``formats.opens_with_filler``) costs in it: the payload without
it, the *bare* payload, grows with the selection, the filler does not (see ``search``).
"""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from app.domain.formats import (
    Entry,
    FormatName,
    TokenCache,
    extension_slack,
    filler_usage,
    opens_with_filler,
    payload_usage,
    render_entries,
)
from app.domain.items import (
    CanonicalItem,
    FunctionCallItem,
    FunctionCallOutputItem,
    OpaqueItem,
    StoredItem,
)
from app.domain.tokens import TokenizerName

from .analysis import CALL, CATEGORY, N_CATEGORIES, OUTPUT, Analysis
from .budget import LimitName
from .tiers import missing_placeholder


@dataclass(slots=True)
class Render:
    payload: dict[str, Any]
    tokens: int
    chars: int
    items: int
    rendered: list[int]  # indices of stored items in the payload
    placeholders: int
    filler: tuple[int, int] = (0, 0)  # (tokens, chars) of the filler put first, if any

    def violated(self, limits: Mapping[LimitName, int]) -> list[LimitName]:
        actual = {"max_items": self.items, "max_chars": self.chars, "max_tokens": self.tokens}
        return [name for name, limit in limits.items() if actual[name] > limit]

    def bare_violated(
        self, limits: Mapping[LimitName, int], *, room: tuple[int, int] = (0, 0)
    ) -> list[LimitName]:
        """The limits the payload without its filler exceeds once ``room`` (tokens, chars)
        is set aside in them (for a filler: ``Builder.filler_cost``)."""
        actual = {
            "max_items": self.items,
            "max_chars": self.chars - self.filler[1] + room[1],
            "max_tokens": self.tokens - self.filler[0] + room[0],
        }
        return [name for name, limit in limits.items() if actual[name] > limit]


class Builder:
    """Renders selections of one projection's items (``shown``: each item's body after the
    tiers; ``can_render``: whether the format carries it at all)."""

    def __init__(
        self,
        *,
        items: Sequence[StoredItem],
        shown: Sequence[CanonicalItem],
        can_render: Sequence[bool],
        analysis: Analysis,
        dangling: set[int],
        drop_dangling: bool,
        summary: str | None,
        format: FormatName,
        tokenizer: TokenizerName,
        cache: TokenCache,
    ) -> None:
        self.items = items
        self.shown = shown
        self.can_render = can_render
        self.a = analysis
        self.dangling = dangling
        self.drop_dangling = drop_dangling
        self.summary = summary
        self.format = format
        self.tokenizer = tokenizer
        self.cache = cache
        # the partition key of an item: its unit, then its category (see ``partition_units``)
        self.order_key = [
            u * N_CATEGORIES + CATEGORY[kind]
            for u, kind in zip(analysis.unit_of, analysis.kinds, strict=True)
        ]
        self.entry_of: list[Entry | None] = [None] * len(items)
        # whether function calls share an id (then ``own_ids`` looks at each selection)
        call_ids = [
            it.body.call_id
            for it, kind in zip(items, analysis.kinds, strict=True)
            if kind == CALL and type(it.body) is FunctionCallItem
        ]
        self.shared_ids = format != "canonical" and len(set(call_ids)) < len(call_ids)
        self.own_id_entry_of: dict[int, Entry] = {}
        # what a filler message costs in a payload (None: the format puts none first that
        # the cut search must know of; ``formats.opens_with_filler``)
        self.filler_cost = filler_usage(format, tokenizer=tokenizer, cache=cache)

    def own_ids(self, rendered: Sequence[int]) -> dict[int, str]:
        """call index -> the id it is sent with, for each function call of another format
        whose id an earlier call of the payload (``rendered``, ascending) already has."""
        if not self.shared_ids:
            return {}
        items, kinds = self.items, self.a.kinds
        seen: set[str] = set()
        out: dict[int, str] = {}
        for i in rendered:
            body = items[i].body
            if kinds[i] == CALL and type(body) is FunctionCallItem:
                if body.call_id in seen and items[i].format != self.format:
                    out[i] = f"{body.call_id}_s{items[i].seq}"
                seen.add(body.call_id)
        return out

    def _with_own_id(self, i: int, entry: Entry, own: dict[int, str]) -> Entry:
        """``entry``, or (a call ``own`` renames, or one of its outputs) the entry sent with
        the id of its own."""
        call = i if i in own else self.a.call_of.get(i)
        body = entry.body
        if call is None or call not in own:
            return entry
        if type(body) is not FunctionCallItem and type(body) is not FunctionCallOutputItem:
            return entry
        renamed = self.own_id_entry_of.get(i)
        if renamed is None:
            renamed = self.own_id_entry_of[i] = Entry(
                body=body.model_copy(update={"call_id": own[call]}),
                stored=entry.stored,
                unit=entry.unit,
            )
        return renamed

    def entries(self, selected: Sequence[int]) -> tuple[list[Entry], list[int], int]:
        """The entries a selection renders, in payload order, and its placeholder count."""
        can_render, unit_of, a = self.can_render, self.a.unit_of, self.a
        rendered = [i for i in selected if can_render[i]]
        own = self.own_ids(rendered)
        entries: list[Entry] = []
        for i in rendered:
            entry = self.entry_of[i]
            if entry is None:
                entry = self.entry_of[i] = Entry(
                    body=self.shown[i], stored=self.items[i], unit=unit_of[i]
                )
            entries.append(entry)
        if own:
            entries = [self._with_own_id(i, e, own) for i, e in zip(rendered, entries, strict=True)]
        keys = [self.order_key[i] for i in rendered]
        placeholders = 0
        if not self.drop_dangling and self.dangling:
            # each dangling call gets a synthetic output, right after its group's last member
            keyed = [((i, 0, 0), e, k) for i, e, k in zip(rendered, entries, keys, strict=True)]
            for i in rendered:
                if i in self.dangling:
                    call = self.items[i].body
                    assert isinstance(call, FunctionCallItem)  # others are never rendered
                    anchor = a.groups[a.group_of[i]][-1]
                    synthetic = FunctionCallOutputItem(
                        call_id=own.get(i, call.call_id),
                        output=missing_placeholder(call.name, call.call_id),
                    )
                    key = unit_of[i] * N_CATEGORIES + CATEGORY[OUTPUT]
                    keyed.append(((anchor, 1, i), Entry(body=synthetic, unit=unit_of[i]), key))
                    placeholders += 1
            if placeholders:
                keyed.sort(key=lambda k: k[0])
                entries = [e for _, e, _ in keyed]
                keys = [k for _, _, k in keyed]
        if self.format != "canonical":
            entries = partition_units(entries, keys)
        return entries, rendered, placeholders

    def payload(self, selected: Sequence[int], *, summary: bool = True) -> dict[str, Any]:
        """Only the rendered payload of a selection (not measured); ``summary=False``: without
        the summary."""
        entries, _, _ = self.entries(selected)
        return render_entries(
            self.format, summary=self.summary if summary else None, entries=entries
        )

    def opens_with_filler(self, selected: Sequence[int]) -> bool:
        """Whether the payload of a selection begins with a filler message (not built)."""
        return self.filler_cost is not None and opens_with_filler(
            self.format, self.entries(selected)[0]
        )

    def build(self, selected: Sequence[int], *, summary: bool = True) -> Render:
        entries, rendered, placeholders = self.entries(selected)
        payload = render_entries(
            self.format, summary=self.summary if summary else None, entries=entries
        )
        tokens, chars = payload_usage(
            self.format, payload, tokenizer=self.tokenizer, cache=self.cache
        )
        filler = (0, 0)
        if self.filler_cost is not None and opens_with_filler(self.format, entries):
            filler = self.filler_cost
        return Render(payload, tokens, chars, len(rendered), rendered, placeholders, filler)

    def extended(self, base: Render, added: Sequence[int]) -> Extension | None:
        """What ``base``'s selection with the whole units ``added`` (items after every
        mandatory one of ``base`` and before the rest of it) would measure, from a build of
        ``added`` alone; ``None`` where the format's count does not add up
        (``formats.extension_slack``)."""
        slack = extension_slack(self.format)
        if slack is None:
            return None
        part = self.build(added, summary=False)
        tokens = base.tokens + part.tokens
        return Extension(
            items=base.items + part.items,
            chars=base.chars + part.chars,
            min_tokens=tokens - slack[0],
            max_tokens=tokens + slack[1],
        )


@dataclass(frozen=True, slots=True)
class Extension:
    """A selection measured without building it: items and chars exactly, tokens within
    ``[min_tokens, max_tokens]``."""

    items: int
    chars: int
    min_tokens: int
    max_tokens: int

    def violated(self, limits: Mapping[LimitName, int]) -> list[LimitName] | None:
        """``Render.violated`` of the selection, or ``None`` if the token range straddles
        the token limit."""
        out: list[LimitName] = []
        for name, limit in limits.items():
            if name == "max_items":
                over = self.items > limit
            elif name == "max_chars":
                over = self.chars > limit
            elif self.min_tokens > limit:
                over = True
            elif self.max_tokens <= limit:
                over = False
            else:
                return None
            if over:
                out.append(name)
        return out


def partition_units(entries: list[Entry], keys: list[int]) -> list[Entry]:
    """Within each unit holding calls: assistant side, then outputs, then the rest (stable).

    ``keys[k]`` is ``unit * N_CATEGORIES + category`` of ``entries[k]``; units never decrease
    along the entries, so the keys decrease somewhere only where a unit's categories do. Where
    they never do (well-formed memory, nearly always) every per-unit sort would be a no-op and
    the entries are returned as they are.
    """
    if all(map(operator.le, keys, keys[1:])):
        return entries
    out: list[Entry] = []
    k = 0
    while k < len(entries):
        unit = entries[k].unit
        j = k
        while j < len(entries) and entries[j].unit == unit:
            j += 1
        chunk = list(zip(entries[k:j], keys[k:j], strict=True))
        if any(type(e.body) is FunctionCallItem or type(e.body) is OpaqueItem for e, _ in chunk):
            chunk.sort(key=lambda ek: ek[1])  # one unit: the same order as by category
        out.extend(e for e, _ in chunk)
        k = j
    return out
