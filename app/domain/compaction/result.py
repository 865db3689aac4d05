"""The compact result (a wire shape) and the markdown rendering of a summary.

``CompactResult`` carries the DESIGN wire names (``id``, ``policy``, ``summary``, ``goal``,
``completed``, ``pending``, ``decisions``, ``errors``, ``test_results``, ``open_questions``,
``read_files``, ``modified_files``, ``compacted_items``, ``report``, ``created_at``) plus a few
added fields (``tools_called``, ``earlier_summary``, ``model``).

Invariants:
- every list field is a list of non-empty strings without duplicates, in first-seen order;
- ``render_summary`` is deterministic, omits empty sections, and renders sections in the fixed
  order of ``SECTION_TITLES``; when every section is empty it returns ``""``;
- for the ``structured`` policy and for an ``llm`` answer that parsed as JSON,
  ``summary == render_summary(result)``; when it is not (window, prose LLM answer), the summary
  text is carried forward verbatim by the next structured compaction (never silently lost).
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, field_serializer

__all__ = [
    "SECTION_TITLES",
    "CompactPolicy",
    "CompactReport",
    "CompactResult",
    "SummarySections",
    "dedupe",
    "new_compaction_id",
    "render_summary",
    "utc_now",
]

CompactPolicy: TypeAlias = Literal["window", "structured", "llm"]

# Rendering order; ``tools_called`` and ``earlier_summary`` are rendered specially.
SECTION_TITLES: dict[str, str] = {
    "goal": "Goal",
    "completed": "Completed",
    "pending": "Pending",
    "decisions": "Decisions",
    "tools_called": "Tools called",
    "errors": "Errors",
    "test_results": "Test results",
    "open_questions": "Open questions",
    "read_files": "Files read",
    "modified_files": "Files modified",
    "earlier_summary": "Earlier summary",
}


class SummarySections(BaseModel):
    """The structured content of a summary, section by section."""

    model_config = ConfigDict(extra="forbid")

    goal: str | None = None
    completed: list[str] = Field(default_factory=list)
    pending: list[str] = Field(default_factory=list)
    decisions: list[str] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list)
    test_results: list[str] = Field(default_factory=list)
    open_questions: list[str] = Field(default_factory=list)
    read_files: list[str] = Field(default_factory=list)
    modified_files: list[str] = Field(default_factory=list)
    tools_called: dict[str, int] = Field(
        default_factory=dict, description="tool name -> number of calls, accumulated"
    )
    earlier_summary: str | None = Field(
        default=None,
        description="a previous summary that could not be merged section by section "
        "(hand-written, or an LLM's prose answer), carried forward verbatim",
    )


class CompactReport(BaseModel):
    """What the compaction did, in numbers. Token counts are the stored per-item counts."""

    model_config = ConfigDict(extra="forbid")

    items_before: int
    items_after: int
    tokens_before: int
    tokens_after: int = Field(description="tokens of the items left in working memory")
    compacted_tokens: int
    summary_tokens: int = Field(description="tokens of the new summary (o200k_base)")
    first_seq: int | None = Field(description="seq of the first compacted item")
    last_seq: int | None = Field(description="seq of the last compacted item")
    kept_from_seq: int | None = Field(description="seq of the user message the kept tail starts at")
    compacted_ranges: list[tuple[int, int]] = Field(
        default_factory=list, description="runs of compacted items as [first_seq, last_seq]"
    )
    notes: list[str] = Field(default_factory=list)


class CompactResult(SummarySections):
    """The answer of ``POST /v1/sessions/{id}/compact`` and one entry of ``.../compactions``."""

    id: str
    policy: CompactPolicy
    summary: str | None = Field(description="the session summary after this compaction")
    compacted_items: int = Field(description="number of items that left working memory")
    report: CompactReport
    model: str | None = Field(default=None, description="the model that wrote an llm summary")
    created_at: datetime = Field(json_schema_extra={"format": "date-time"})

    @field_serializer("created_at")
    def _rfc3339(self, value: datetime) -> str:
        # The form every other timestamp of the API takes (``+00:00``; pydantic would write
        # ``Z``). Results stored before this change are rewritten as they are read.
        return value.isoformat()

    def sections(self) -> SummarySections:
        return SummarySections.model_validate(
            self.model_dump(include=set(SummarySections.model_fields))
        )


def new_compaction_id() -> str:
    return "cmp_" + secrets.token_hex(12)


def utc_now() -> datetime:
    return datetime.now(UTC)


def dedupe(values: Iterable[str]) -> list[str]:
    """Stripped, non-empty, first occurrence kept, order preserved."""
    seen: set[str] = set()
    out: list[str] = []
    for value in values:
        text = value.strip()
        if text and text not in seen:
            seen.add(text)
            out.append(text)
    return out


def _bullets(values: list[str]) -> str:
    # A multi-line entry stays one bullet: continuation lines are indented under it.
    return "\n".join("- " + value.replace("\n", "\n  ") for value in values)


def render_summary(sections: SummarySections) -> str:
    """Markdown: ``## Goal``, ``## Completed``, ... in a fixed order, empty sections omitted."""
    parts: list[str] = []
    for name, title in SECTION_TITLES.items():
        if name == "goal" or name == "earlier_summary":
            text = (getattr(sections, name) or "").strip()
            body = text
        elif name == "tools_called":
            body = _bullets(
                [
                    f"{tool} ({count} call{'s' if count != 1 else ''})"
                    for tool, count in sections.tools_called.items()
                ]
            )
        else:
            body = _bullets(getattr(sections, name))
        if body:
            parts.append(f"## {title}\n\n{body}")
    return "\n\n".join(parts)


def without_nul(result: CompactResult) -> CompactResult:
    """``result`` with every NUL in its texts a space. Items may hold NUL (JSON allows it, and
    they are stored as JSON text); a summary and a result are stored where Postgres text and
    JSONB cannot hold one, and a reader of a summary loses nothing by the space."""

    def clean(value: Any) -> Any:
        if isinstance(value, str):
            return value.replace("\x00", " ") if "\x00" in value else value
        if isinstance(value, dict):
            return {clean(k): clean(v) for k, v in value.items()}
        if isinstance(value, list):
            return [clean(v) for v in value]
        return value

    if "\\u0000" not in result.model_dump_json():  # the JSON text escapes each NUL
        return result
    return CompactResult.model_validate(clean(result.model_dump()))
