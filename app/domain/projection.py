"""Projection: working memory + budget → the next-turn prompt in a wire format, with a report.

Projection never mutates memory; it is a pure function of (``ContextSource``, ``Budget``,
format), and byte-identical for the same input (prompt caches keep working).

Vocabulary:
- *group* (tool group): a run of consecutive ``function_call`` items (parallel calls; reasoning
  between them does not break the run) together with every output answering one of them. An
  output answers the latest earlier call with its ``call_id``; an output with no such call is an
  *orphan* and is never rendered; a call with no output is *dangling* (dropped, or answered
  with the synthetic output ``[tool result missing: NAME(CALL_ID)]``, per
  ``dangling_tool_calls``).
- reasoning belongs to the item it precedes: the next non-reasoning item, which must be an
  assistant message or a call (model output); reasoning that precedes anything else is never
  rendered. Reasoning is rendered only when that item is.
- *unit*: the smallest contiguous spans of working memory that contain whole groups and keep
  reasoning with its item; the kept tail is always a suffix of whole units.
- *mandatory part*: the summary; the first ``pinned_prefix_items`` items; pinned items; system
  and developer messages (``keep_system``); the newest user message; plus, for each of them,
  its whole tool group and, for reasoning, the item it precedes.

Selection: the mandatory part plus the longest suffix of whole units that keeps the rendered
payload within ``max_items`` / ``max_chars`` / ``max_tokens``. With ``start_on="user"`` and
always in ``anthropic`` the kept tail starts at a user message (or right after a kept user
message). When the mandatory part alone exceeds a limit, only it is sent and a note containing
``mandatory`` says so. Tier 1 (``max_recent_tool_results``) and Tier 2 (``trim_old_reasoning``)
transform bodies before selection, in place (positions never move).

For provider formats only, the items inside a unit that holds calls are stably reordered as
(assistant side, outputs, the rest), so every call is answered right after its assistant turn
even when working memory interleaved them oddly; in well-formed memory this changes nothing.

The report's ``projected_*`` numbers are recomputed from the rendered payload under the
format's counting rule (see each ``app.domain.formats`` module); ``source_*`` are the stored
aggregates of working memory (o200k item tokens, chars) plus the summary.
"""

from __future__ import annotations

import bisect
import operator
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import accumulate, compress
from typing import Any, Literal, cast

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from app.domain.errors import InvalidInput
from app.domain.formats import (
    Entry,
    FormatName,
    TokenCache,
    degraded_parts,
    lossy_notes,
    payload_usage,
    placeholder_allowed,
    render_entries,
    representable,
)
from app.domain.items import (
    MAX_SAFE_INTEGER,
    MODEL_OUTPUT_TYPES,
    CanonicalItem,
    FunctionCallItem,
    FunctionCallOutputItem,
    MessageItem,
    OpaqueItem,
    ReasoningItem,
    StoredItem,
    item_chars,
    item_images,
    item_texts,
    opaque_pairing,
    pair_key,
)
from app.domain.tokens import DEFAULT_TOKENIZER, TokenizerName, image_tokens

LimitName = Literal["max_items", "max_chars", "max_tokens"]
LIMIT_NAMES: tuple[LimitName, ...] = ("max_items", "max_chars", "max_tokens")


def cleared_placeholder(name: str, call_id: str) -> str:
    """Tier 1 text of an old tool result: ``[tool result cleared: NAME(CALL_ID)]``."""
    return f"[tool result cleared: {name}({call_id})]"


def missing_placeholder(name: str, call_id: str) -> str:
    """Synthetic output for a call still waiting for its result (``placeholder`` mode)."""
    return f"[tool result missing: {name}({call_id})]"


class Budget(BaseModel):
    """Budget of one projection. Every field is optional on the wire; see DESIGN §2."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_items: int | None = Field(default=None, ge=1, le=MAX_SAFE_INTEGER)
    max_chars: int | None = Field(default=None, ge=1, le=MAX_SAFE_INTEGER)
    max_tokens: int | None = Field(default=None, ge=1, le=MAX_SAFE_INTEGER)
    tokenizer: TokenizerName = "o200k_base"
    pinned_prefix_items: int = Field(default=0, ge=0, le=MAX_SAFE_INTEGER)
    keep_system: bool = True
    max_recent_tool_results: int | None = Field(default=None, ge=0, le=MAX_SAFE_INTEGER)
    trim_old_reasoning: bool = False
    start_on: Literal["any", "user"] = "any"
    dangling_tool_calls: Literal["drop", "placeholder"] = "drop"

    @classmethod
    def merged(
        cls,
        defaults: Mapping[str, object] | None = None,
        overrides: Mapping[str, object] | None = None,
    ) -> Budget:
        """The session's ``config.context`` defaults with the request's fields on top.

        A key present in ``overrides`` wins even when its value is ``None`` (``max_tokens:
        null`` lifts a default limit); pass only the fields the request actually set. Bad
        values or unknown keys raise ``InvalidInput`` with ``loc`` ``["config", "context",
        field]`` (defaults) or ``[field]`` (overrides).
        """
        errors: list[dict[str, Any]] = []
        base = dict(defaults or {})
        extra = dict(overrides or {})
        for data, prefix, keys in (
            (base, ["config", "context"], set(base)),
            ({**base, **extra}, [], set(extra)),
        ):
            try:
                cls.model_validate(data)
            except ValidationError as exc:
                errors.extend(
                    {"loc": [*prefix, *e["loc"]], "msg": e["msg"], "type": e["type"]}
                    for e in exc.errors(
                        include_url=False, include_context=False, include_input=False
                    )
                    if e["loc"] and e["loc"][0] in keys
                )
        if errors:
            raise InvalidInput("invalid context budget", errors=errors)
        return cls.model_validate({**base, **extra})

    @property
    def limits(self) -> dict[LimitName, int]:
        out: dict[LimitName, int] = {}
        for name in LIMIT_NAMES:
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        return out


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


@dataclass(frozen=True, slots=True)
class ContextSource:
    """What the service loaded for one projection.

    Either the whole working memory (``window_start_seq=None``), or a window:

    - ``items``: ascending ``seq``; every live item with ``seq >= window_start_seq``, plus, older
      than that, exactly the mandatory ones: the first ``pinned_prefix_items`` items of working
      memory, every pinned item, every system/developer message (when ``keep_system``), and the
      newest user message (wherever it is);
    - ``unloaded_runs``: for the items older than ``window_start_seq`` that were not loaded, the
      ``(first_seq, last_seq)`` of each maximal run of them between two loaded items (see
      ``unloaded_gaps`` for the intervals to query); used only for ``dropped_ranges``;
    - ``total_items`` / ``total_tokens`` / ``total_chars``: aggregates of the whole working
      memory (stored o200k item tokens and chars), without the summary.

    If ``total_items == len(items)`` the window is the whole memory and is treated as such.
    """

    summary: str | None
    items: Sequence[StoredItem]
    total_items: int
    total_tokens: int
    total_chars: int
    window_start_seq: int | None = None
    unloaded_runs: Sequence[tuple[int, int]] = ()


@dataclass(frozen=True, slots=True)
class ProjectedContext:
    """``payload``: the format's fields (as ``formats.render``); ``needs_more``: see
    ``project_context``."""

    payload: dict[str, Any]
    report: ContextReport
    needs_more: bool


@dataclass(frozen=True, slots=True)
class WindowHint:
    """Load the newest items until every given minimum is reached (``None``: no minimum)."""

    min_items: int | None
    min_tokens: int | None
    min_chars: int | None


def window_hint(budget: Budget, *, attempt: int = 0) -> WindowHint | None:
    """How much of the newest working memory to load first; ``None``: load all of it.

    The first window is a tenth larger than the budget: a rendered item never costs fewer
    tokens or chars than its stored counts (and most formats charge framing on top), so that
    usually decides; a window too small to decide only costs a retry. Each ``needs_more`` retry
    doubles the window (``attempt`` 0, 1, 2, ...); the service stops growing once the window is
    the whole memory.
    """
    limits = budget.limits
    if not limits:
        return None
    factor = 1.1 * 2**attempt
    items = limits.get("max_items")
    tokens = limits.get("max_tokens")
    chars = limits.get("max_chars")
    return WindowHint(
        min_items=None if items is None else int((items + 1) * factor) + 1,
        min_tokens=None if tokens is None else int(tokens * factor) + 1,
        min_chars=None if chars is None else int(chars * factor) + 1,
    )


def unloaded_gaps(
    loaded_seqs: Sequence[int], window_start_seq: int
) -> list[tuple[int | None, int]]:
    """Open seq intervals ``(after, before)`` between loaded items older than the window.

    The ``min(seq)``/``max(seq)`` of live items with ``after < seq < before`` (``after=None``:
    no lower bound), where there are any, are the ``unloaded_runs`` entries. (The service gets
    the same bounds as the live neighbours of the loaded items, in the query that loads them.)
    """
    old = sorted(s for s in loaded_seqs if s < window_start_seq)
    return list(zip([None, *old], [*old, window_start_seq], strict=True))


# ---------------------------------------------------------------------------------------------

# What each item is, for the structural decisions below. Computed once per projection
# (``_kinds``) so that the per-item loops, which run several times per projection (analysis,
# every candidate build, estimates, report), branch on a small int instead of repeating
# ``isinstance`` checks and role comparisons. Messages sort first: ``kind <= _ASSISTANT`` means
# "a message".
_SYSTEM = 0  # system or developer message
_USER = 1
_ASSISTANT = 2  # assistant message
_CALL = 3
_OUTPUT = 4
_REASONING = 5
_HOSTED = 6  # an opaque model-side item that pairs with nothing (a hosted tool call, ...)
_INPUT = 7  # an opaque item given to the model that pairs with nothing (compaction, ...)

_MESSAGE_KINDS = {"system": _SYSTEM, "developer": _SYSTEM, "user": _USER, "assistant": _ASSISTANT}
_BODY_KINDS: dict[type, int] = {
    FunctionCallItem: _CALL,
    FunctionCallOutputItem: _OUTPUT,
    ReasoningItem: _REASONING,
}

# Where an item goes when a unit holding calls is reordered for a provider format: the
# assistant side (assistant messages, calls, reasoning) first, then outputs, then the rest.
_CATEGORY = (2, 2, 0, 0, 1, 0, 0, 2)  # indexed by kind
# The role of an item of each kind (system/developer messages: see the message).
_ROLE_OF_KIND = (
    "system", "user", "assistant", "assistant", "user", "assistant", "assistant", "user"
)  # fmt: skip
_OPAQUE_KINDS = {"call": _CALL, "output": _OUTPUT}
_N_CATEGORIES = 3


def _kinds(bodies: Sequence[CanonicalItem]) -> list[int]:
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
        return _CALL
    if isinstance(body, FunctionCallOutputItem):
        return _OUTPUT
    if isinstance(body, OpaqueItem):
        side = opaque_pairing(body)[0]
        if side is not None:
            return _OPAQUE_KINDS[side]
        return _HOSTED if body.type in MODEL_OUTPUT_TYPES else _INPUT
    return _REASONING


@dataclass(slots=True)
class _Analysis:
    """Structure of the loaded items, independent of the budget's limits."""

    n: int
    tail_start: int
    kinds: list[int] = field(default_factory=list)  # item -> _SYSTEM ... _REASONING
    call_of: dict[int, int] = field(default_factory=dict)  # output -> call
    outputs_of: dict[int, list[int]] = field(default_factory=dict)  # call -> outputs
    group_of: dict[int, int] = field(default_factory=dict)  # call/paired output -> group
    groups: list[list[int]] = field(default_factory=list)  # group -> calls + outputs, sorted
    follower: dict[int, int | None] = field(default_factory=dict)  # reasoning -> its item
    unit_starts: list[int] = field(default_factory=list)  # a unit ends where the next starts
    unit_of: list[int] = field(default_factory=list)


def _analyse(bodies: Sequence[CanonicalItem], tail_start: int) -> _Analysis:
    n = len(bodies)
    kinds = _kinds(bodies)
    a = _Analysis(n=n, tail_start=tail_start, kinds=kinds)
    last_call: dict[str, int] = {}
    run: list[int] | None = None
    runs: list[list[int]] = []
    for i, kind in enumerate(kinds):
        if kind == _CALL:
            if run is None:
                run = []
                runs.append(run)
            run.append(i)
            last_call[cast(str, pair_key(bodies[i]))] = i
            a.outputs_of[i] = []
            if i < tail_start:  # loaded old items are not contiguous: each stands alone
                run = None
        elif kind != _REASONING or i < tail_start:
            run = None
            if kind == _OUTPUT:
                call = last_call.get(cast(str, pair_key(bodies[i])))
                if call is not None:
                    a.call_of[i] = call
                    a.outputs_of[call].append(i)
    for g, calls in enumerate(runs):
        if len(calls) == 1:
            # outputs answer an earlier call and are appended in order: already sorted
            members = [calls[0], *a.outputs_of[calls[0]]]
        else:
            members = sorted({*calls, *(o for c in calls for o in a.outputs_of[c])})
        a.groups.append(members)
        for m in members:
            a.group_of[m] = g
    if _REASONING in kinds:  # a scan in C; many sessions have none
        for i, kind in enumerate(kinds):
            if kind == _REASONING:
                j = i + 1
                while i >= tail_start and j < n and kinds[j] == _REASONING:
                    j += 1
                ok = i >= tail_start and j < n and kinds[j] in (_CALL, _ASSISTANT, _HOSTED)
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


@dataclass(slots=True)
class _Render:
    payload: dict[str, Any]
    tokens: int
    chars: int
    items: int
    rendered: list[int]  # indices of stored items in the payload
    placeholders: int

    def violated(self, limits: Mapping[LimitName, int]) -> list[LimitName]:
        actual = {"max_items": self.items, "max_chars": self.chars, "max_tokens": self.tokens}
        return [name for name, limit in limits.items() if actual[name] > limit]


def project_context(
    source: ContextSource, budget: Budget, *, format: FormatName
) -> ProjectedContext:
    """Project working memory (or a window of it) into ``format`` under ``budget``.

    Invariants (DESIGN §2, each a property test): order (a subsequence of working memory in seq
    order; placeholders and trimmed reasoning keep their position), mandatory part always
    present, tool pairing, reasoning only with its item, budget (unless the mandatory part alone
    exceeds it, then only that part and a ``mandatory`` note), recency (longest suffix of whole
    units, no holes), honest report, determinism, round trip.

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
    a = _analyse(bodies, tail_start)
    kinds = a.kinds

    newest_user = _last_index(kinds, _USER)

    # --- mandatory part -----------------------------------------------------------------
    mandatory: set[int] = set(range(min(budget.pinned_prefix_items, n)))
    mandatory.update(i for i, it in enumerate(items) if it.pinned)
    if budget.keep_system:
        mandatory.update(i for i, kind in enumerate(kinds) if kind == _SYSTEM)
    if newest_user is not None:
        mandatory.add(newest_user)
    closure: set[int] = set()

    def close(i: int) -> None:
        if i in closure:
            return
        closure.add(i)
        group = a.group_of.get(i)
        if group is not None:
            for m in a.groups[group]:
                close(m)
        follower = a.follower.get(i)
        if follower is not None:
            close(follower)

    for i in sorted(mandatory):
        close(i)

    force_more = partial and any(
        (i < tail_start and kinds[i] > _ASSISTANT)  # not a message
        or (kinds[i] == _OUTPUT and i not in a.call_of)
        for i in mandatory
    )

    # --- tier 1 / tier 2 / dangling: body transforms (positions never move) -------------
    transformed: dict[int, CanonicalItem] = {}
    keep_n = budget.max_recent_tool_results
    cleared: set[int] = set()
    if keep_n is not None:
        outputs_newest_first = [i for i in range(n - 1, -1, -1) if kinds[i] == _OUTPUT]
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
    if budget.trim_old_reasoning and newest_user is not None:
        for i in range(newest_user):
            if kinds[i] == _REASONING:
                trimmed.add(i)
                transformed[i] = ReasoningItem()
    # what each item renders as
    shown = [transformed.get(i, b) for i, b in enumerate(bodies)] if transformed else bodies
    dangling = {c for c, outs in a.outputs_of.items() if not outs}
    drop_dangling = budget.dangling_tool_calls == "drop"

    # Renderable: what the format can carry (an opaque item only in its own format): messages,
    # paired outputs, calls unless dropped as dangling (only a function call can get a
    # placeholder output); then reasoning, whose follower (a call, an assistant message or a
    # hosted item, never reasoning) is decided by now.
    origins = [it.format for it in items]
    can_render = [
        (kind != _OUTPUT or i in a.call_of) and representable(format, bodies[i], origin=origins[i])
        for i, kind in enumerate(kinds)
    ]
    for i in dangling:
        if drop_dangling or not placeholder_allowed(items[i]):
            can_render[i] = False
    for i, follower in a.follower.items():
        can_render[i] = (
            follower is not None
            and can_render[follower]
            and representable(format, bodies[i], origin=origins[i])
            and (format != "anthropic" or i not in trimmed)
        )
    cache = TokenCache(budget.tokenizer)
    provider = format != "canonical"
    unit_of = a.unit_of
    # The partition key of an item: its unit, then its category (see ``_partition_units``).
    order_key = [
        u * _N_CATEGORIES + _CATEGORY[kind] for u, kind in zip(unit_of, kinds, strict=True)
    ]
    # Candidate builds overlap almost entirely: make each item's entry once.
    entry_of: list[Entry | None] = [None] * n

    def build(selected: Sequence[int]) -> _Render:
        rendered = [i for i in selected if can_render[i]]
        entries: list[Entry] = []
        for i in rendered:
            entry = entry_of[i]
            if entry is None:
                entry = entry_of[i] = Entry(body=shown[i], stored=items[i], unit=unit_of[i])
            entries.append(entry)
        keys = [order_key[i] for i in rendered]
        placeholders = 0
        if not drop_dangling and dangling:
            # each dangling call gets a synthetic output, right after its group's last member
            keyed = [((i, 0, 0), e, k) for i, e, k in zip(rendered, entries, keys, strict=True)]
            for i in rendered:
                if i in dangling:
                    call = bodies[i]
                    assert isinstance(call, FunctionCallItem)  # others are never rendered
                    anchor = a.groups[a.group_of[i]][-1]
                    synthetic = FunctionCallOutputItem(
                        call_id=call.call_id, output=missing_placeholder(call.name, call.call_id)
                    )
                    key = unit_of[i] * _N_CATEGORIES + _CATEGORY[_OUTPUT]
                    keyed.append(((anchor, 1, i), Entry(body=synthetic, unit=unit_of[i]), key))
                    placeholders += 1
            if placeholders:
                keyed.sort(key=lambda k: k[0])
                entries = [e for _, e, _ in keyed]
                keys = [k for _, _, k in keyed]
        if provider:
            entries = _partition_units(entries, keys)
        payload = render_entries(format, summary=source.summary, entries=entries)
        tokens, chars = payload_usage(format, payload, tokenizer=budget.tokenizer, cache=cache)
        return _Render(payload, tokens, chars, len(rendered), rendered, placeholders)

    # --- cut candidates -------------------------------------------------------------------
    unit_starts = a.unit_starts
    n_units = len(unit_starts)
    first_tail_unit = unit_of[tail_start] if tail_start < n else n_units
    needs_user = budget.start_on == "user" or format == "anthropic"
    valid: list[bool] = []
    if not needs_user:
        valid = [True] * n_units
    else:
        for u, start in enumerate(unit_starts):
            ok = kinds[start] == _USER
            if not ok and u > first_tail_unit:
                ok = valid[u - 1] and all(m in closure for m in range(unit_starts[u - 1], start))
            valid.append(ok)
    first_candidate_unit = first_tail_unit
    if partial and first_tail_unit < n_units:
        # The first unit of the window may extend into unloaded items (reasoning before it, a
        # call before it), and so may every unit up to an output whose call is not loaded.
        last_uncertain = first_tail_unit
        for i in range(tail_start, n):
            if kinds[i] == _OUTPUT and i not in a.call_of:
                last_uncertain = max(last_uncertain, unit_of[i])
        first_candidate_unit = last_uncertain + 1
        # a mandatory tool group there may have members among the unloaded items
        force_more = force_more or any(
            i >= tail_start and unit_of[i] < first_candidate_unit and kinds[i] in (_CALL, _OUTPUT)
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

    builds: dict[int, _Render] = {}

    def attempt(k: int) -> _Render:
        if k not in builds:
            builds[k] = build(selection(k))
        return builds[k]

    limits = budget.limits

    def fits(k: int) -> bool:
        return not attempt(k).violated(limits)

    last = len(candidates) - 1
    mandatory_over = False
    if not limits:
        chosen = 0
    else:
        # Cost grows as the cut moves earlier, except that in anthropic a selection starting
        # before the whole mandatory part may drop the leading continuation message; search
        # the two monotone segments separately (earliest segment first).
        first_mandatory = min(
            (i for i in closure if can_render[i] and kinds[i] != _SYSTEM),
            default=n,
        )
        # the first candidate starting after it (the last one, the empty tail, at the latest)
        split = min(bisect.bisect_right(cut_starts, first_mandatory), last)
        guess = _estimated_cut(
            cut_starts,
            limits,
            estimates=_estimates(
                items,
                shown,
                kinds,
                transformed,
                can_render,
                closure,
                source.summary,
                format=format,
                cache=cache,
            ),
        )
        found: int | None = None
        for lo, hi in ((0, split - 1), (split, last)):
            found = _first_true_near(lo, hi, fits, guess)
            if found is not None:
                break
        mandatory_over = found is None
        chosen = last if found is None else found
    result = attempt(chosen)
    needs_more = force_more or (partial and not mandatory_over and chosen == 0)

    limits_applied: list[LimitName] = []
    if mandatory_over:
        limits_applied = result.violated(limits)
    elif chosen > 0:
        limits_applied = attempt(chosen - 1).violated(limits)

    # --- report ---------------------------------------------------------------------------
    rendered = set(result.rendered)
    selected = selection(chosen)
    notes: list[str] = []
    if mandatory_over:
        details = ", ".join(
            f"{name} {value} > {limits[name]}"
            for name, value in (
                ("max_items", result.items),
                ("max_chars", result.chars),
                ("max_tokens", result.tokens),
            )
            if name in limits_applied
        )
        notes.append(
            f"the mandatory part alone exceeds the budget ({details}); only the mandatory part is sent"
        )
    out_rendered = [i for i in result.rendered if kinds[i] == _OUTPUT]
    n_cleared = sum(1 for i in out_rendered if i in cleared)
    if n_cleared:
        notes.append(
            f"tier1: cleared {n_cleared} tool results, kept {len(out_rendered) - n_cleared}"
        )
    # counts over the selected calls, outputs and reasoning (messages need no note)
    n_trimmed = sel_dangling = orphans = stray = unrepresentable = 0
    left_out: dict[str, int] = {}
    for i in selected:
        kind = kinds[i]
        if kind != _REASONING and not representable(format, bodies[i], origin=origins[i]):
            left_out[bodies[i].type] = left_out.get(bodies[i].type, 0) + 1
        elif kind == _CALL:
            if i in dangling:
                sel_dangling += 1
        elif kind == _OUTPUT:
            if i not in a.call_of:
                orphans += 1
        elif kind == _REASONING:
            follower = a.follower.get(i)
            if follower is None:
                stray += 1
            elif not representable(format, bodies[i], origin=origins[i]):
                unrepresentable += 1
            elif i in trimmed and can_render[follower]:
                n_trimmed += 1
    if n_trimmed:
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
    parts: dict[str, int] = {}
    for i in result.rendered:
        for kind in degraded_parts(format, items[i], shown[i]):
            parts[kind] = parts.get(kind, 0) + 1
    notes += lossy_notes(format, left_out, parts)

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
        dropped_ranges=_dropped_ranges(items, rendered, source.unloaded_runs if partial else ()),
        notes=notes,
        tokenizer=budget.tokenizer,
    )
    return ProjectedContext(payload=result.payload, report=report, needs_more=needs_more)


def _last_index(values: list[int], value: int) -> int | None:
    """Index of the last occurrence of ``value`` (``list.index`` on the reversed list runs in
    C), or ``None``."""
    try:
        return len(values) - 1 - values[::-1].index(value)
    except ValueError:
        return None


def _partition_units(entries: list[Entry], keys: list[int]) -> list[Entry]:
    """Within each unit holding calls: assistant side, then outputs, then the rest (stable).

    ``keys[k]`` is ``unit * _N_CATEGORIES + category`` of ``entries[k]``; units never decrease
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


_EST_PER_ITEM = 3  # the framing every format charges per message, item or tool block
_Columns = tuple[list[int], list[int], list[int]]  # items, tokens, chars; one int per item


def _estimates(
    items: Sequence[StoredItem],
    shown: Sequence[CanonicalItem],
    kinds: Sequence[int],
    transformed: Mapping[int, CanonicalItem],
    can_render: Sequence[bool],
    closure: set[int],
    summary: str | None,
    *,
    format: FormatName,
    cache: TokenCache,
) -> tuple[_Columns, tuple[int, int, int]]:
    """(items, tokens, chars) per item under the format's counting rule, assuming each item's
    framing depends only on the item before it, and the same for the mandatory part. Only used
    to choose where the exact search starts probing: a good guess makes it build the payload
    twice instead of a dozen times. Stored counts serve for the default tokenizer; others go
    through the projection's cache, so the builds that follow count nothing twice.

    ``shown`` is each item's body as rendered; ``transformed`` holds the items whose body
    differs from the stored one. Returned as three columns of plain ints (no tuple per item).
    """
    n = len(kinds)
    item_col = [1 if ok else 0 for ok in can_render]
    token_col = [0] * n
    char_col = [0] * n
    previous = ""
    stored_tokens = cache.tokenizer == DEFAULT_TOKENIZER
    chat = format == "openai-chat"
    anthropic = format == "anthropic"
    for i, kind in enumerate(kinds):
        if not can_render[i]:
            continue
        body = shown[i]
        if stored_tokens and i not in transformed:
            tokens = items[i].tokens  # counted at write time, with the same rule
            chars = item_chars(body)
        else:
            texts = item_texts(body)
            tokens = sum(cache.count(t) for t in texts) + sum(
                image_tokens(p.detail) for p in item_images(body)
            )
            chars = sum(len(t) for t in texts)
        # the role ``_role`` would give: a message's own, "user" for outputs, else "assistant"
        role = cast(MessageItem, body).role if kind == _SYSTEM else _ROLE_OF_KIND[kind]
        framing = _EST_PER_ITEM
        if chat and kind == _CALL:
            framing += 0 if previous == "assistant" else _EST_PER_ITEM
        elif chat and kind == _OUTPUT:
            role = "tool"
        elif anthropic:
            block = kind == _CALL or kind == _OUTPUT
            framing = (_EST_PER_ITEM if block else 0) + (0 if role == previous else _EST_PER_ITEM)
        previous = role
        token_col[i] = tokens + framing
        char_col[i] = chars
    base_items = 0
    base_tokens = (cache.count(summary) + _EST_PER_ITEM) if summary else 0
    base_chars = len(summary or "")
    for i in closure:  # always sent: counted once, in the base, not again in the tail
        base_items += item_col[i]
        base_tokens += token_col[i]
        base_chars += char_col[i]
        item_col[i] = token_col[i] = char_col[i] = 0
    return (item_col, token_col, char_col), (base_items, base_tokens, base_chars)


def _estimated_cut(
    cut_starts: Sequence[int],
    limits: Mapping[LimitName, int],
    *,
    estimates: tuple[_Columns, tuple[int, int, int]],
) -> int:
    """Index of the earliest candidate cut (given by the item each starts at) whose estimated
    cost fits every limit."""
    (item_col, token_col, char_col), (base_items, base_tokens, base_chars) = estimates
    n = len(item_col)

    def tail_sums(column: list[int]) -> list[int]:
        """``[s]``: the sum over the last ``s`` items (accumulated in C)."""
        return list(accumulate(reversed(column), initial=0))

    tail_items, tail_tokens, tail_chars = map(tail_sums, (item_col, token_col, char_col))
    cap_items = limits.get("max_items", 1 << 62) - base_items
    cap_tokens = limits.get("max_tokens", 1 << 62) - base_tokens
    cap_chars = limits.get("max_chars", 1 << 62) - base_chars
    # walk from the newest cut back; stop at the first one over a limit
    best = len(cut_starts) - 1
    for k in range(len(cut_starts) - 1, -1, -1):
        size = n - cut_starts[k]
        if (
            tail_items[size] > cap_items
            or tail_tokens[size] > cap_tokens
            or tail_chars[size] > cap_chars
        ):
            break
        best = k
    return best


def _gallop() -> Iterator[int]:
    """Probe steps 1, 1, 2, 4, ...: guesses are usually right or off by one."""
    yield 1
    step = 1
    while True:
        yield step
        step *= 2


def _first_true_near(lo: int, hi: int, predicate: Callable[[int], bool], guess: int) -> int | None:
    """Smallest k in [lo, hi] with predicate(k), for a predicate monotone in k (false...true),
    probing outward from ``guess``: close guesses need few (expensive) predicate calls. Returns
    exactly what a binary search over [lo, hi] would."""
    if lo > hi:
        return None
    g = min(max(guess, lo), hi)
    steps = _gallop()
    if predicate(g):
        true_at, false_at = g, lo - 1
        while true_at > lo:
            probe = max(true_at - next(steps), lo)
            if predicate(probe):
                true_at = probe
            else:
                false_at = probe
                break
    else:
        false_at = g
        while True:
            if false_at == hi:
                return None
            probe = min(false_at + next(steps), hi)
            if predicate(probe):
                true_at = probe
                break
            false_at = probe
    lo, hi = false_at + 1, true_at
    while lo < hi:
        mid = (lo + hi) // 2
        if predicate(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


def _dropped_ranges(
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
