"""The budget of one projection, and how much of working memory a read loads first.

``Budget`` is what a request (on top of the session's ``config.context``) asks for: the hard
limits, the tiers, the cut. ``window_hint`` turns its limits into the minimum of newest
working memory the service loads before projecting; ``ContextSource`` is what it loaded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from app.domain.errors import InvalidInput
from app.domain.items import MAX_SAFE_INTEGER, StoredItem
from app.domain.tokens import TokenizerName

LimitName = Literal["max_items", "max_chars", "max_tokens"]
LIMIT_NAMES: tuple[LimitName, ...] = ("max_items", "max_chars", "max_tokens")
CutName = Literal["tight", "stable"]
RecallScope = Literal["session", "prefix"]
# A search or recall query, at most (characters): what a question needs; the full-text query
# and the query's embedding both grow with it. Search, recall and their schemas read this one.
MAX_QUERY_CHARS = 1000
# The largest recall share a request may reserve (tokens; DESIGN §10 "Bounded by
# construction"): with a token limit the share must also leave room for the rest of the prompt.
MAX_RECALL_TOKENS = 16_384
# Recalled entries, at most (``max_items``' bound and default: the share decides how many fit).
MAX_RECALL_ITEMS = 50
# A recalled entry's text is at most this many characters per token of the share: an entry
# longer than the whole block could never fit, and tokenizing a 5 MB tool output to find that
# out would cost a read more than the rest of it.
CHARS_PER_TOKEN = 4
# ... and at most this many characters whatever the share: recall reminds the model of a turn,
# it does not replay a long tool output, and so a read tokenizes at most
# ``MAX_RECALL_ITEMS`` entries of this size however large the share or the items.
MAX_ENTRY_CHARS = 4000


class RecallSpec(BaseModel):
    """Recall (DESIGN §10): bring back items not in the prompt that match ``query``, in one
    message of at most ``max_tokens`` tokens reserved from the budget. The one declaration
    of the recall fields: the API's request models derive theirs from it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_tokens: int = Field(
        default=0,
        ge=0,
        le=MAX_RECALL_TOKENS,
        description="Tokens of the budget reserved for the recall block (0: no recall; at "
        f"most {MAX_RECALL_TOKENS}, and less than `max_tokens` when that is set)",
    )
    query: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_QUERY_CHARS,
        description="What to recall; default: the text of the newest user message",
    )
    max_items: int = Field(
        default=MAX_RECALL_ITEMS,
        ge=1,
        le=MAX_RECALL_ITEMS,
        description="Recalled entries, at most; by default as many as fill the share",
    )
    min_score: float | None = Field(
        default=None,
        ge=-1,
        le=1,
        description="Cosine similarity below which a hit found by meaning alone is left out",
    )
    scope: RecallScope = Field(
        default="session",
        description="`session` (default): this session; `prefix`: also the sessions the key may see "
        "whose id shares this one's prefix up to its last `:`",
    )


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
    cut: CutName = Field(
        default="tight",
        description="`tight`: the longest tail that fits; `stable`: the tail's start moves in "
        "steps, so consecutive prompts share their prefix (the provider's prompt cache holds)",
    )
    cut_step: float = Field(
        default=0.25,
        gt=0,
        le=0.5,
        description="With `cut: stable`: one step of the grid, as a fraction of the limit",
    )
    cache_breakpoints: bool = Field(
        default=False,
        description="`anthropic` only: mark the system prompt and the end of the stable "
        'prefix with `cache_control: {"type": "ephemeral"}`',
    )
    recall: RecallSpec | None = Field(
        default=None,
        description="Bring back evicted items that match the request's meaning, within a "
        "reserved share of the budget",
    )

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
        # recall merges field by field (``recall: null`` in the request turns it off)
        if isinstance(base.get("recall"), Mapping) and isinstance(extra.get("recall"), Mapping):
            extra["recall"] = {**base["recall"], **extra["recall"]}
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
    def recall_tokens(self) -> int:
        """The tokens reserved for recall (0: recall is off)."""
        return 0 if self.recall is None else self.recall.max_tokens

    def reserved(self) -> Budget:
        """The budget of the rest of the prompt when recall is on: ``max_tokens`` less the
        recall share R (and ``max_chars`` less ``CHARS_PER_TOKEN * R`` if set), without
        recall and without cache markers (they are placed once the block is in). The same
        budget when recall is off. ``InvalidInput`` (loc ``["recall", "max_tokens"]``) when R
        leaves nothing for the rest."""
        r = self.recall_tokens
        if r == 0:
            return self
        update: dict[str, object] = {"recall": None, "cache_breakpoints": False}
        for name, share in (("max_tokens", r), ("max_chars", CHARS_PER_TOKEN * r)):
            limit = getattr(self, name)
            if limit is None:
                continue
            if share >= limit:
                raise InvalidInput(
                    "the recall share leaves nothing of the budget for the prompt",
                    errors=[
                        {
                            "loc": ["recall", "max_tokens"],
                            "msg": f"recall.max_tokens {r} must be less than {name} {limit}"
                            + (f" / {CHARS_PER_TOKEN}" if name == "max_chars" else ""),
                            "type": "value_error",
                        }
                    ],
                )
            update[name] = limit - share
        return self.model_copy(update=update)

    @property
    def limits(self) -> dict[LimitName, int]:
        out: dict[LimitName, int] = {}
        for name in LIMIT_NAMES:
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        return out


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
      memory (stored o200k item tokens and chars), without the summary. They also place the
      window in working memory: the live items older than the window hold the totals minus
      the window's own counts, which is all the stable cut's grid needs (``grid``).

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
    the whole memory. ``cut: stable`` needs nothing more: its grid looks back at most two
    steps (half the limit at most) from the newest item.
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
