"""The shapes the service sends back, as ``TypedDict``s (plain ``dict``s at run time, typed for
checkers). Names follow the OpenAPI components (``SessionRead`` -> ``Session``).

Stored items are dicts whose keys depend on ``type`` (``message``, ``function_call``,
``function_call_output``, ``reasoning``, and every other provider item kept as it was sent)
plus the envelope (``id``, ``seq``, ``format`` (the format it was written in), ``tokens``,
``chars``, ``pinned``, ``metadata``, ``created_at``). Read with ``format=``, items are that
provider's own items or messages. Both are typed as ``Item`` (a ``dict``) rather than a union
so that reading ``item["content"]`` needs no narrowing dance.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

JSON = Any
Item = dict[str, Any]
"""A stored item (canonical fields plus the envelope), or a provider item when read with
``format=``."""

Format = Literal["canonical", "openai-chat", "openai-responses", "anthropic", "gemini"]
CompactPolicy = Literal["window", "structured", "llm"]
SearchScope = Literal["memory", "history"]
SearchMode = Literal["fulltext", "semantic", "hybrid"]


class ProblemFieldError(TypedDict, total=False):
    loc: list[str | int]
    msg: str
    type: str | None


class Problem(TypedDict, total=False):
    """An RFC 9457 problem document."""

    type: str
    title: str
    status: int
    detail: str
    instance: str | None
    errors: list[ProblemFieldError] | None


class Session(TypedDict):
    id: str
    version: int
    summary: str | None
    metadata: dict[str, JSON]
    config: dict[str, JSON]
    item_count: int
    token_count: int
    char_count: int
    last_seq: int
    created_at: str
    updated_at: str


class SessionPage(TypedDict):
    items: list[Session]
    next_cursor: str | None


class AppendResult(TypedDict):
    items: list[Item]
    version: int


class _ItemPage(TypedDict):
    items: list[Item]
    next_cursor: int | None


class ItemPage(_ItemPage, total=False):
    """A page of working memory. Read with ``format=``, it also has ``format``, ``notes``
    (what that format cannot carry and was left out) and, for ``anthropic``, ``system``
    (for ``gemini``, ``system_instruction``)."""

    format: Format
    notes: list[str]
    system: JSON
    system_instruction: JSON


class _PopResult(TypedDict):
    item: Item
    version: int


class PopResult(_PopResult, total=False):
    """The popped stored item; popped with ``format=``, also ``rendered``: the item in that
    format (``None`` when the format cannot carry it)."""

    rendered: Item | None


class ClearResult(TypedDict):
    cleared_items: int
    session: Session


class RecalledEntry(TypedDict):
    seq: int
    session_id: str
    score: float
    tokens: int


class ContextReport(TypedDict):
    source_items: int
    projected_items: int
    dropped_items: int
    source_tokens: int
    projected_tokens: int
    source_chars: int
    projected_chars: int
    limits_applied: list[str]
    dropped_ranges: list[list[int]]
    notes: list[str]
    tokenizer: str
    stable_prefix: NotRequired[int]
    recalled: NotRequired[list[RecalledEntry]]
    recall_query: NotRequired[str | None]


class Context(TypedDict, total=False):
    """The projected prompt. Which payload keys are present depends on ``format``: ``items``
    (canonical), ``messages`` (openai-chat), ``input`` (openai-responses), ``system`` and
    ``messages`` (anthropic), ``system_instruction`` and ``contents`` (gemini). ``format``,
    ``version`` and ``report`` are always there."""

    format: Format
    version: int
    items: list[Item]
    messages: list[dict[str, JSON]]
    input: list[dict[str, JSON]]
    system: JSON
    system_instruction: JSON
    contents: list[dict[str, JSON]]
    report: ContextReport


class CompactReport(TypedDict, total=False):
    items_before: int
    items_after: int
    tokens_before: int
    tokens_after: int
    compacted_tokens: int
    summary_tokens: int
    first_seq: int | None
    last_seq: int | None
    kept_from_seq: int | None
    compacted_ranges: list[list[int]]
    notes: list[str]


class CompactResult(TypedDict, total=False):
    """A compaction's outcome; the ``structured`` policy also fills the section fields
    (``goal``, ``completed``, ``pending``, ``decisions``, ``errors``, ...)."""

    id: str
    policy: CompactPolicy
    summary: str | None
    compacted_items: int
    report: CompactReport
    model: str | None
    created_at: str
    goal: str | None
    completed: list[str]
    pending: list[str]
    decisions: list[str]
    errors: list[str]
    test_results: list[str]
    open_questions: list[str]
    read_files: list[str]
    modified_files: list[str]
    tools_called: dict[str, int]
    earlier_summary: str | None


class CompactionPage(TypedDict):
    items: list[CompactResult]
    next_cursor: str | None


class Snapshot(TypedDict):
    id: str
    label: str | None
    version: int
    item_count: int
    created_at: str


class SnapshotPage(TypedDict):
    items: list[Snapshot]
    next_cursor: str | None


SnapshotDocument = dict[str, Any]
"""An exported snapshot (``schema_version``, ``items``, ...): pass it back to ``restore``."""


class RestoreResult(TypedDict):
    undo_snapshot_id: str
    snapshot_id: str | None
    restored_items: int
    session: Session


class Event(TypedDict):
    seq: int
    type: str
    version: int
    request_id: str | None
    actor: str | None
    data: dict[str, JSON]
    created_at: str


class EventPage(TypedDict):
    items: list[Event]
    next_cursor: int | None


class HistoryPage(TypedDict):
    """Items ever appended; each also has ``archived`` and ``archived_reason``."""

    items: list[Item]
    next_cursor: int | None


class SearchScores(TypedDict):
    """What each ranker scored a hit (None: that ranker did not find it)."""

    fulltext: float | None
    semantic: float | None


class SearchHit(TypedDict):
    session_id: str
    seq: int
    item: Item
    score: float
    snippet: str | None
    archived: bool
    archived_reason: str | None
    scores: SearchScores


class SearchResults(TypedDict):
    items: list[SearchHit]
    next_cursor: str | None
    mode: SearchMode  # the mode that answered (hybrid answers as fulltext without an embedder)
