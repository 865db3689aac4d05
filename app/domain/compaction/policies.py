"""The three compaction policies, each turning a ``CutPlan`` into a ``CompactResult``.

- ``window``: the compacted items just leave working memory; the summary stays what it was.
- ``structured``: deterministic, no LLM; the compacted items are folded into sections extracted
  mechanically (goal, tools called, failures and how they were resolved, test results, files
  read and modified, the decisions and conclusions the assistant stated, its open questions;
  each with the seq it came from: ``extract``).
- ``llm``: the service sends ``build_llm_messages(...)`` to a model and hands the answer, parsed
  by ``parse_llm_summary``, to ``llm_compaction_result``.

Carrying the previous state forward. Each policy takes ``previous`` (the session's last compact
result, or ``None``) and ``previous_summary`` (the session's summary right now). The summary is
the source of truth: the previous result's sections are merged only while the session summary
is still the text that result wrote ("in sync"). Otherwise (a hand-written or edited summary)
the summary text itself is carried forward verbatim in ``earlier_summary``. Likewise a previous
summary that cannot be rebuilt from its sections (an LLM's prose answer) is carried verbatim.
So nothing in a summary is ever silently dropped.

Merging, per policy:
- ``structured``: goal kept from the previous result (else the first user request); the
  ``completed``/``pending`` lists are carried; decisions, open questions, errors, test
  results, files and tool counts accumulate, de-duplicated, keeping the newest
  ``MAX_DECISIONS``/``MAX_OPEN_QUESTIONS``/``MAX_ERRORS``/``MAX_TEST_RESULTS``/``MAX_FILES``
  entries (a report note says when older ones were dropped from the summary).
- ``llm``: the model saw the previous summary, so its lists replace the previous ones; its goal
  wins, else the previous goal, else the first user request; files and tool counts are
  accumulated mechanically (a model is not trusted to copy them).
- ``window``: the previous sections and summary are carried unchanged.

An empty plan (nothing to compact) gives a no-op result under every policy: ``compacted_items
== 0``, the summary unchanged, and the plan's ``reason`` as the first report note.
"""

from __future__ import annotations

from datetime import datetime

from app.domain.compaction.cut import CutPlan
from app.domain.compaction.extract import ExtractedFacts, extract_facts
from app.domain.compaction.llm_parse import ParsedSummary
from app.domain.compaction.result import (
    CompactPolicy,
    CompactReport,
    CompactResult,
    SummarySections,
    dedupe,
    new_compaction_id,
    render_summary,
    utc_now,
)
from app.domain.tokens import count_text

__all__ = [
    "MAX_DECISIONS",
    "MAX_ERRORS",
    "MAX_OPEN_QUESTIONS",
    "MAX_FILES",
    "MAX_TEST_RESULTS",
    "llm_compaction_result",
    "structured_compaction",
    "window_compaction",
]

MAX_ERRORS = 20
MAX_DECISIONS = 20
MAX_OPEN_QUESTIONS = 10
MAX_TEST_RESULTS = 10
MAX_FILES = 200


def _carried(
    previous: CompactResult | None, previous_summary: str | None
) -> tuple[SummarySections, str | None]:
    """Sections to merge from ``previous`` and the text to carry verbatim (see module doc)."""
    text = (previous_summary or "").strip()
    if previous is not None and (previous.summary or "").strip() == text:
        sections = previous.sections()
        if render_summary(sections) == text:
            return sections, sections.earlier_summary
        return sections.model_copy(update={"earlier_summary": None}), text or None
    return SummarySections(), text or None


def _newest(values: list[str], limit: int, label: str, notes: list[str]) -> list[str]:
    values = dedupe(values)
    if len(values) > limit:
        notes.append(
            f"summary keeps the newest {limit} {label}; {len(values) - limit} older dropped"
        )
        return values[-limit:]
    return values


def _merge_counts(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
    out = dict(a)
    for name, count in b.items():
        out[name] = out.get(name, 0) + count
    return out


def _files(base: SummarySections, facts: ExtractedFacts, notes: list[str]) -> dict[str, list[str]]:
    return {
        "read_files": _newest(base.read_files + facts.read_files, MAX_FILES, "files read", notes),
        "modified_files": _newest(
            base.modified_files + facts.modified_files, MAX_FILES, "files modified", notes
        ),
    }


def _result(
    plan: CutPlan,
    *,
    policy: CompactPolicy,
    sections: SummarySections,
    summary: str | None,
    notes: list[str],
    model: str | None,
    now: datetime | None,
    result_id: str | None,
) -> CompactResult:
    report = CompactReport(
        items_before=plan.items_before,
        items_after=plan.items_after,
        tokens_before=plan.tokens_before,
        tokens_after=plan.kept_tokens,
        compacted_tokens=plan.compacted_tokens,
        summary_tokens=count_text(summary or ""),
        first_seq=plan.first_seq,
        last_seq=plan.last_seq,
        kept_from_seq=plan.tail_start_seq,
        compacted_ranges=plan.compacted_ranges,
        notes=[*([plan.reason] if plan.reason else []), *plan.notes, *notes],
    )
    return CompactResult(
        **sections.model_dump(),
        id=result_id or new_compaction_id(),
        policy=policy,
        summary=summary,
        compacted_items=len(plan.compacted),
        report=report,
        model=model,
        created_at=now or utc_now(),
    )


def _noop(
    plan: CutPlan,
    *,
    policy: CompactPolicy,
    previous: CompactResult | None,
    previous_summary: str | None,
    model: str | None,
    now: datetime | None,
    result_id: str | None,
    notes: list[str] | None = None,
) -> CompactResult:
    """A result that carries the summary and sections over unchanged."""
    sections, _ = _carried(previous, previous_summary)
    return _result(
        plan,
        policy=policy,
        sections=sections,
        summary=previous_summary,
        notes=notes or [],
        model=model,
        now=now,
        result_id=result_id,
    )


def window_compaction(
    plan: CutPlan,
    *,
    previous: CompactResult | None,
    previous_summary: str | None,
    now: datetime | None = None,
    result_id: str | None = None,
) -> CompactResult:
    """Drop ``plan.compacted`` from working memory; summary and sections stay as they were."""
    notes = [] if plan.is_empty else ["window policy: the compacted items were not summarised"]
    return _noop(
        plan,
        policy="window",
        previous=previous,
        previous_summary=previous_summary,
        model=None,
        now=now,
        result_id=result_id,
        notes=notes,
    )


def structured_compaction(
    plan: CutPlan,
    *,
    previous: CompactResult | None,
    previous_summary: str | None,
    now: datetime | None = None,
    result_id: str | None = None,
) -> CompactResult:
    """Fold ``plan.compacted`` into the previous sections mechanically (no LLM).

    Invariant: ``result.summary == render_summary(result)`` (or ``None`` when empty).
    """
    if plan.is_empty:
        return _noop(
            plan,
            policy="structured",
            previous=previous,
            previous_summary=previous_summary,
            model=None,
            now=now,
            result_id=result_id,
        )
    base, earlier = _carried(previous, previous_summary)
    facts = extract_facts(plan.compacted)
    notes: list[str] = []
    sections = SummarySections(
        goal=base.goal or facts.goal,
        completed=base.completed,
        pending=base.pending,
        decisions=_newest(base.decisions + facts.decisions, MAX_DECISIONS, "decisions", notes),
        open_questions=_newest(
            base.open_questions + facts.open_questions,
            MAX_OPEN_QUESTIONS,
            "open questions",
            notes,
        ),
        errors=_newest(base.errors + facts.errors, MAX_ERRORS, "errors", notes),
        test_results=_newest(
            base.test_results + facts.test_results, MAX_TEST_RESULTS, "test results", notes
        ),
        tools_called=_merge_counts(base.tools_called, facts.tools_called),
        earlier_summary=earlier,
        **_files(base, facts, notes),
    )
    summary = render_summary(sections)
    return _result(
        plan,
        policy="structured",
        sections=sections,
        summary=summary or None,
        notes=notes,
        model=None,
        now=now,
        result_id=result_id,
    )


def llm_compaction_result(
    plan: CutPlan,
    parsed: ParsedSummary,
    *,
    previous: CompactResult | None,
    previous_summary: str | None,
    model: str | None = None,
    now: datetime | None = None,
    result_id: str | None = None,
) -> CompactResult:
    """The result of an LLM compaction, from the model's parsed answer.

    - JSON answer: the model's sections, plus files and tool counts accumulated mechanically;
      ``summary == render_summary(result)``.
    - prose answer: the text is the summary as-is; goal, files and tool counts are still set.
    - empty answer: falls back to ``structured_compaction`` (a note says so), so an LLM that
      returns nothing never erases what the items said.
    """
    if plan.is_empty:
        return _noop(
            plan,
            policy="llm",
            previous=previous,
            previous_summary=previous_summary,
            model=model,
            now=now,
            result_id=result_id,
        )
    if not parsed.structured and not parsed.text.strip():
        fallback = structured_compaction(
            plan, previous=previous, previous_summary=previous_summary, now=now,
            result_id=result_id,
        )  # fmt: skip
        notes = [
            *parsed.notes,
            "the structured policy wrote the summary instead",
            *fallback.report.notes,
        ]
        report = fallback.report.model_copy(update={"notes": notes})
        return fallback.model_copy(update={"policy": "llm", "model": model, "report": report})

    base, _ = _carried(previous, previous_summary)
    facts = extract_facts(plan.compacted)
    notes = list(parsed.notes)
    common = {
        "tools_called": _merge_counts(base.tools_called, facts.tools_called),
        **_files(base, facts, notes),
    }
    if parsed.structured:
        sections = SummarySections(
            goal=parsed.goal or base.goal or facts.goal,
            completed=dedupe(parsed.completed),
            pending=dedupe(parsed.pending),
            decisions=dedupe(parsed.decisions),
            errors=dedupe(parsed.errors),
            test_results=dedupe(parsed.test_results),
            open_questions=dedupe(parsed.open_questions),
            **common,
        )
        summary = render_summary(sections)
    else:
        sections = SummarySections(goal=base.goal or facts.goal, **common)
        summary = parsed.text.strip()
    return _result(
        plan,
        policy="llm",
        sections=sections,
        summary=summary or None,
        notes=notes,
        model=model,
        now=now,
        result_id=result_id,
    )
