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
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from app.domain.errors import InvalidInput
from app.domain.formats import (
    Entry,
    FormatName,
    TokenCache,
    payload_usage,
    render_entries,
    representable,
)
from app.domain.items import (
    MAX_SAFE_INTEGER,
    CanonicalItem,
    FunctionCallItem,
    FunctionCallOutputItem,
    MessageItem,
    ReasoningItem,
    StoredItem,
    item_images,
    item_texts,
)
from app.domain.tokens import DEFAULT_TOKENIZER, IMAGE_TOKENS, TokenizerName, count_text

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

    For each interval the service looks up ``min(seq)``/``max(seq)`` of live items with
    ``after < seq < before`` (``after=None``: no lower bound); each non-empty result is one
    ``unloaded_runs`` entry.
    """
    old = sorted(s for s in loaded_seqs if s < window_start_seq)
    return list(zip([None, *old], [*old, window_start_seq], strict=True))


# ---------------------------------------------------------------------------------------------


def _is_message(body: CanonicalItem, *roles: str) -> bool:
    return isinstance(body, MessageItem) and body.role in roles


def _assistant_side(body: CanonicalItem) -> bool:
    return isinstance(body, FunctionCallItem | ReasoningItem) or _is_message(body, "assistant")


@dataclass(slots=True)
class _Analysis:
    """Structure of the loaded items, independent of the budget's limits."""

    n: int
    tail_start: int
    call_of: dict[int, int] = field(default_factory=dict)  # output -> call
    outputs_of: dict[int, list[int]] = field(default_factory=dict)  # call -> outputs
    group_of: dict[int, int] = field(default_factory=dict)  # call/paired output -> group
    groups: list[list[int]] = field(default_factory=list)  # group -> calls + outputs, sorted
    follower: dict[int, int | None] = field(default_factory=dict)  # reasoning -> its item
    units: list[tuple[int, int]] = field(default_factory=list)  # inclusive spans
    unit_of: list[int] = field(default_factory=list)


def _analyse(bodies: Sequence[CanonicalItem], tail_start: int) -> _Analysis:
    n = len(bodies)
    a = _Analysis(n=n, tail_start=tail_start)
    last_call: dict[str, int] = {}
    run: list[int] | None = None
    runs: list[list[int]] = []
    for i, body in enumerate(bodies):
        old = i < tail_start  # loaded old items are not contiguous: each stands alone
        if isinstance(body, FunctionCallItem):
            if run is None:
                run = []
                runs.append(run)
            run.append(i)
            last_call[body.call_id] = i
            a.outputs_of[i] = []
            if old:
                run = None
        elif not (isinstance(body, ReasoningItem) and not old):
            run = None
        if isinstance(body, FunctionCallOutputItem):
            call = last_call.get(body.call_id)
            if call is not None:
                a.call_of[i] = call
                a.outputs_of[call].append(i)
    for g, calls in enumerate(runs):
        members = sorted({*calls, *(o for c in calls for o in a.outputs_of[c])})
        a.groups.append(members)
        for m in members:
            a.group_of[m] = g
    for i, body in enumerate(bodies):
        if isinstance(body, ReasoningItem):
            j = i + 1
            while i >= tail_start and j < n and isinstance(bodies[j], ReasoningItem):
                j += 1
            ok = (
                i >= tail_start
                and j < n
                and (isinstance(bodies[j], FunctionCallItem) or _is_message(bodies[j], "assistant"))
            )
            a.follower[i] = j if ok else None
    reach = list(range(n))
    for members in a.groups:
        start = members[0]
        if start >= tail_start:
            reach[start] = max(reach[start], members[-1])
    for i, j in a.follower.items():
        if j is not None:
            reach[i] = max(reach[i], j)
    a.unit_of = [0] * n
    for i in range(tail_start):
        a.unit_of[i] = len(a.units)
        a.units.append((i, i))
    i = tail_start
    while i < n:
        start, end, k = i, reach[i], i
        while k <= end:
            end = max(end, reach[k])
            k += 1
        for m in range(start, end + 1):
            a.unit_of[m] = len(a.units)
        a.units.append((start, end))
        i = end + 1
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

    user_positions = [i for i, b in enumerate(bodies) if _is_message(b, "user")]
    newest_user = user_positions[-1] if user_positions else None

    # --- mandatory part -----------------------------------------------------------------
    mandatory: set[int] = set(range(min(budget.pinned_prefix_items, n)))
    mandatory.update(i for i, it in enumerate(items) if it.pinned)
    if budget.keep_system:
        mandatory.update(i for i, b in enumerate(bodies) if _is_message(b, "system", "developer"))
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
        (i < tail_start and not isinstance(bodies[i], MessageItem))
        or (isinstance(bodies[i], FunctionCallOutputItem) and i not in a.call_of)
        for i in mandatory
    )

    # --- tier 1 / tier 2 / dangling: body transforms (positions never move) -------------
    transformed: dict[int, CanonicalItem] = {}
    outputs_newest_first = [
        i for i in range(n - 1, -1, -1) if isinstance(bodies[i], FunctionCallOutputItem)
    ]
    keep_n = budget.max_recent_tool_results
    cleared: set[int] = set()
    if keep_n is not None:
        for i in outputs_newest_first[keep_n:]:
            call = a.call_of.get(i)
            body = bodies[i]
            if call is None or not isinstance(body, FunctionCallOutputItem):
                continue
            call_body = bodies[call]
            assert isinstance(call_body, FunctionCallItem)
            text = cleared_placeholder(call_body.name, body.call_id)
            if body.output != text:
                transformed[i] = body.model_copy(update={"output": text})
            cleared.add(i)
    trimmed: set[int] = set()
    if budget.trim_old_reasoning and newest_user is not None:
        for i in range(newest_user):
            if isinstance(bodies[i], ReasoningItem):
                trimmed.add(i)
                transformed[i] = ReasoningItem()
    dangling = {c for c, outs in a.outputs_of.items() if not outs}

    def renderable(i: int) -> bool:
        body = bodies[i]
        if isinstance(body, FunctionCallOutputItem):
            return i in a.call_of
        if isinstance(body, FunctionCallItem):
            return not (i in dangling and budget.dangling_tool_calls == "drop")
        if isinstance(body, ReasoningItem):
            follower = a.follower.get(i)
            return (
                follower is not None
                and renderable(follower)
                and representable(format, body)
                and (format != "anthropic" or i not in trimmed)
            )
        return True

    can_render = [renderable(i) for i in range(n)]
    cache = TokenCache(budget.tokenizer)
    provider = format != "canonical"

    def build(selected: Sequence[int]) -> _Render:
        keyed: list[tuple[tuple[int, int, int], Entry, int]] = []
        rendered: list[int] = []
        placeholders = 0
        for i in selected:
            if not can_render[i]:
                continue
            rendered.append(i)
            unit = a.unit_of[i]
            body = transformed.get(i, bodies[i])
            keyed.append(((i, 0, 0), Entry(body=body, stored=items[i], unit=unit), _category(body)))
            if i in dangling and budget.dangling_tool_calls == "placeholder":
                call = bodies[i]
                assert isinstance(call, FunctionCallItem)
                anchor = a.groups[a.group_of[i]][-1]
                synthetic = FunctionCallOutputItem(
                    call_id=call.call_id, output=missing_placeholder(call.name, call.call_id)
                )
                keyed.append(((anchor, 1, i), Entry(body=synthetic, unit=unit), 1))
                placeholders += 1
        keyed.sort(key=lambda k: k[0])
        entries = [e for _, e, _ in keyed]
        if provider:
            entries = _partition_units(entries, [c for _, _, c in keyed])
        payload = render_entries(format, summary=source.summary, entries=entries)
        tokens, chars = payload_usage(format, payload, tokenizer=budget.tokenizer, cache=cache)
        return _Render(payload, tokens, chars, len(rendered), rendered, placeholders)

    # --- cut candidates -------------------------------------------------------------------
    units = a.units
    first_tail_unit = a.unit_of[tail_start] if tail_start < n else len(units)
    needs_user = budget.start_on == "user" or format == "anthropic"
    valid: list[bool] = []
    for u in range(len(units)):
        start, end = units[u]
        ok = not needs_user or _is_message(bodies[start], "user")
        if not ok and u > first_tail_unit:
            prev_start, prev_end = units[u - 1]
            ok = valid[u - 1] and all(m in closure for m in range(prev_start, prev_end + 1))
        valid.append(ok)
    first_candidate_unit = first_tail_unit
    if partial and first_tail_unit < len(units):
        # The first unit of the window may extend into unloaded items (reasoning before it, a
        # call before it), and so may every unit up to an output whose call is not loaded.
        last_uncertain = first_tail_unit
        for i in range(tail_start, n):
            if isinstance(bodies[i], FunctionCallOutputItem) and i not in a.call_of:
                last_uncertain = max(last_uncertain, a.unit_of[i])
        first_candidate_unit = last_uncertain + 1
        # a mandatory tool group there may have members among the unloaded items
        force_more = force_more or any(
            i >= tail_start
            and a.unit_of[i] < first_candidate_unit
            and isinstance(bodies[i], FunctionCallItem | FunctionCallOutputItem)
            for i in closure
        )
    candidates = [u for u in range(first_candidate_unit, len(units)) if valid[u]]
    candidates.append(len(units))

    def selection(cut: int) -> list[int]:
        start = units[cut][0] if cut < len(units) else n
        return sorted(closure.union(range(start, n)))

    builds: dict[int, _Render] = {}

    def attempt(k: int) -> _Render:
        cut = candidates[k]
        if cut not in builds:
            builds[cut] = build(selection(cut))
        return builds[cut]

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
            (
                i
                for i in closure
                if can_render[i] and not _is_message(bodies[i], "system", "developer")
            ),
            default=n,
        )
        split = next(
            (
                k
                for k, cut in enumerate(candidates)
                if cut >= len(units) or units[cut][0] > first_mandatory
            ),
            last,
        )
        guess = _estimated_cut(
            candidates,
            limits,
            start_of=lambda cut: units[cut][0] if cut < len(units) else n,
            estimates=_estimates(
                items,
                bodies,
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
    selected = selection(candidates[chosen])
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
    out_rendered = [i for i in result.rendered if isinstance(bodies[i], FunctionCallOutputItem)]
    n_cleared = sum(1 for i in out_rendered if i in cleared)
    if n_cleared:
        notes.append(
            f"tier1: cleared {n_cleared} tool results, kept {len(out_rendered) - n_cleared}"
        )
    n_trimmed = sum(
        1
        for i in selected
        if i in trimmed
        and representable(format, bodies[i])
        and (follower := a.follower.get(i)) is not None
        and can_render[follower]
    )
    if n_trimmed:
        notes.append(f"tier2: trimmed {n_trimmed} reasoning items")
    sel_dangling = sum(1 for i in selected if i in dangling)
    if sel_dangling and budget.dangling_tool_calls == "drop":
        notes.append(f"dangling tool calls: dropped {sel_dangling} calls without output")
    elif result.placeholders:
        notes.append(f"dangling tool calls: added {result.placeholders} placeholder outputs")
    orphans = sum(
        1 for i in selected if isinstance(bodies[i], FunctionCallOutputItem) and i not in a.call_of
    )
    if orphans:
        notes.append(f"dropped {orphans} tool outputs whose call is not in working memory")
    stray = sum(
        1 for i in selected if isinstance(bodies[i], ReasoningItem) and a.follower.get(i) is None
    )
    if stray:
        notes.append(f"dropped {stray} reasoning items that precede no model output")
    unrepresentable = sum(
        1
        for i in selected
        if isinstance(bodies[i], ReasoningItem)
        and a.follower.get(i) is not None
        and not representable(format, bodies[i])
    )
    if unrepresentable:
        notes.append(f"{format}: left out {unrepresentable} reasoning items it cannot represent")

    summary_tokens = count_text(source.summary or "", "o200k_base")
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


def _category(body: CanonicalItem) -> int:
    if _assistant_side(body):
        return 0
    if isinstance(body, FunctionCallOutputItem):
        return 1
    return 2


def _partition_units(entries: list[Entry], categories: list[int]) -> list[Entry]:
    """Within each unit holding calls: assistant side, then outputs, then the rest (stable)."""
    out: list[Entry] = []
    k = 0
    while k < len(entries):
        unit = entries[k].unit
        j = k
        while j < len(entries) and entries[j].unit == unit:
            j += 1
        chunk = list(zip(entries[k:j], categories[k:j], strict=True))
        if any(isinstance(e.body, FunctionCallItem) for e, _ in chunk):
            chunk.sort(key=lambda ec: ec[1])
        out.extend(e for e, _ in chunk)
        k = j
    return out


_EST_PER_ITEM = 3  # the framing every format charges per message, item or tool block


def _role(body: CanonicalItem) -> str:
    if isinstance(body, MessageItem):
        return body.role
    return "user" if isinstance(body, FunctionCallOutputItem) else "assistant"


def _estimates(
    items: Sequence[StoredItem],
    bodies: Sequence[CanonicalItem],
    transformed: Mapping[int, CanonicalItem],
    can_render: Sequence[bool],
    closure: set[int],
    summary: str | None,
    *,
    format: FormatName,
    cache: TokenCache,
) -> tuple[list[tuple[int, int, int]], tuple[int, int, int]]:
    """(items, tokens, chars) per item under the format's counting rule, assuming each item's
    framing depends only on the item before it, and the same for the mandatory part. Only used
    to choose where the exact search starts probing: a good guess makes it build the payload
    twice instead of a dozen times. Stored counts serve for the default tokenizer; others go
    through the projection's cache, so the builds that follow count nothing twice."""
    per: list[tuple[int, int, int]] = []
    previous = ""
    for i in range(len(items)):
        if not can_render[i]:
            per.append((0, 0, 0))
            continue
        body = transformed.get(i, bodies[i])
        texts = item_texts(body)
        if i not in transformed and cache.tokenizer == DEFAULT_TOKENIZER:
            tokens = items[i].tokens  # counted at write time, with the same rule
        else:
            tokens = sum(cache.count(t) for t in texts) + sum(
                IMAGE_TOKENS.get(p.detail or "auto", IMAGE_TOKENS["auto"])
                for p in item_images(body)
            )
        role = _role(body)
        framing = _EST_PER_ITEM
        if format == "openai-chat" and isinstance(body, FunctionCallItem):
            framing += 0 if previous == "assistant" else _EST_PER_ITEM
        elif format == "openai-chat" and isinstance(body, FunctionCallOutputItem):
            role = "tool"
        elif format == "anthropic":
            block = isinstance(body, FunctionCallItem | FunctionCallOutputItem)
            framing = (_EST_PER_ITEM if block else 0) + (0 if role == previous else _EST_PER_ITEM)
        previous = role
        per.append((1, tokens + framing, sum(len(t) for t in texts)))
    base_chars = len(summary or "")
    base = [0, (cache.count(summary) + _EST_PER_ITEM) if summary else 0, base_chars]
    for i in closure:  # always sent: counted once, in the base, not again in the tail
        for k in range(3):
            base[k] += per[i][k]
        per[i] = (0, 0, 0)
    return per, (base[0], base[1], base[2])


def _estimated_cut(
    candidates: Sequence[int],
    limits: Mapping[LimitName, int],
    *,
    start_of: Callable[[int], int],
    estimates: tuple[list[tuple[int, int, int]], tuple[int, int, int]],
) -> int:
    """Index of the earliest candidate cut whose estimated cost fits every limit."""
    per, base = estimates
    n = len(per)
    # suffix sums of the non-mandatory estimates are implied: walk from the newest cut back
    totals = list(base)
    caps = (
        limits.get("max_items", 1 << 62),
        limits.get("max_tokens", 1 << 62),
        limits.get("max_chars", 1 << 62),
    )
    position = n
    best = len(candidates) - 1
    for k in range(len(candidates) - 1, -1, -1):
        start = start_of(candidates[k])
        while position > start:
            position -= 1
            for m in range(3):
                totals[m] += per[position][m]
        if any(totals[m] > caps[m] for m in range(3)):
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


def _first_true_near(
    lo: int, hi: int, predicate: Callable[[int], bool], guess: int
) -> int | None:
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
    segments = [(it.seq, it.seq, i not in rendered) for i, it in enumerate(items)]
    segments += [(first, last, True) for first, last in unloaded]
    segments.sort()
    ranges: list[tuple[int, int]] = []
    open_range: list[int] | None = None
    for first, last, dropped in segments:
        if dropped:
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
