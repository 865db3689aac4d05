"""Compaction: fold the oldest part of working memory into a summary, turn-safely.

Pure domain (stdlib + pydantic): the service loads working memory, calls ``plan_cut``, runs one
policy, and commits ``plan.compacted_seqs`` away with the result, all under the session lock.

Typical use by the service::

    plan = plan_cut(items, keep_last_items=..., keep_last_tokens=..., pinned_prefix_items=...)
    if policy == "llm" and not plan.is_empty:
        messages = build_llm_messages(plan, previous_summary=summary, instructions=...)
        text = await llm_client.complete(messages)           # app.llm, outside the domain
        result = llm_compaction_result(plan, parse_llm_summary(text), previous=last,
                                       previous_summary=summary, model=model)
    elif policy == "structured":
        result = structured_compaction(plan, previous=last, previous_summary=summary)
    else:
        result = window_compaction(plan, previous=last, previous_summary=summary)

Modules: ``cut`` (turn-safe cut), ``extract`` (mechanical facts), ``llm_prompt`` (request),
``llm_parse`` (forgiving answer parsing), ``policies`` (window/structured/llm results),
``result`` (``CompactResult`` wire model and ``render_summary``).
"""

from app.domain.compaction.cut import CutPlan, plan_cut
from app.domain.compaction.extract import ExtractedFacts, classify_tool, extract_facts
from app.domain.compaction.llm_parse import ParsedSummary, parse_llm_summary
from app.domain.compaction.llm_prompt import SYSTEM_PROMPT, build_llm_messages, render_transcript
from app.domain.compaction.policies import (
    llm_compaction_result,
    structured_compaction,
    window_compaction,
)
from app.domain.compaction.result import (
    CompactPolicy,
    CompactReport,
    CompactResult,
    SummarySections,
    new_compaction_id,
    render_summary,
    without_nul,
)

__all__ = [
    "without_nul",
    "SYSTEM_PROMPT",
    "CompactPolicy",
    "CompactReport",
    "CompactResult",
    "CutPlan",
    "ExtractedFacts",
    "ParsedSummary",
    "SummarySections",
    "build_llm_messages",
    "classify_tool",
    "extract_facts",
    "llm_compaction_result",
    "new_compaction_id",
    "parse_llm_summary",
    "plan_cut",
    "render_summary",
    "render_transcript",
    "structured_compaction",
    "window_compaction",
]
