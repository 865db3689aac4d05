"""DESIGN §2 invariants as property tests, over random sessions and budgets, in every format.

The test side re-derives what it checks from the spec (tool pairing by call id, parallel call
runs, reasoning followers, mandatory items) and reads payloads through the ``<<seq>>`` markers
every generated text carries; tokens are recounted with tiktoken directly under each format's
documented rule.
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.domain.items import (
    FunctionCallItem,
    FunctionCallOutputItem,
    MessageItem,
    ReasoningItem,
    StoredItem,
)
from app.domain.projection import (
    Budget,
    ContextSource,
    ProjectedContext,
    project_context,
    unloaded_gaps,
)
from app.domain.tokens import IMAGE_TOKENS, get_encoding
from tests.domain.strategies import FORMATS, Session, budgets, sessions
from tests.support.provider_validation import validate_payload

PROPS = settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

_CARRIED_RE = re.compile(
    r"<<(\d+)>>|\[tool result cleared: \w+\((call_\d+)\)\]|\"id\": \"itm_(\d+)\""
)


# -- reading a payload --------------------------------------------------------------------------


def carried(
    fmt: str, payload: dict[str, Any], memory: list[StoredItem], *, part: str = "all"
) -> list[int]:
    """Seqs of the memory items a payload carries, in payload order."""
    if fmt == "canonical":
        return [i["seq"] for i in payload["items"] if "seq" in i]
    output_of = {
        it.body.call_id: it.seq for it in memory if isinstance(it.body, FunctionCallOutputItem)
    }
    known = {it.seq for it in memory}
    if fmt == "anthropic" and part != "all":
        doc = payload.get(part) or ""
    else:
        doc = payload
    out: list[int] = []
    for m in _CARRIED_RE.finditer(json.dumps(doc, ensure_ascii=False)):
        if m.group(1):
            seq = int(m.group(1))
        elif m.group(2):
            seq = output_of[m.group(2)]
        else:
            seq = int(m.group(3))
        if seq in known and (not out or out[-1] != seq):
            out.append(seq)
    return out


def recount(fmt: str, payload: dict[str, Any], tokenizer: str) -> tuple[int, int]:
    """(tokens, chars) of a payload under the documented per-format rules, with tiktoken."""
    strings: list[str] = []
    extra = 0

    def image(detail: str | None) -> None:
        nonlocal extra
        extra += IMAGE_TOKENS[detail or "auto"]

    if fmt == "canonical":
        for item in payload["items"]:
            extra += 3
            kind = item["type"]
            if kind == "message":
                c = item["content"]
                for p in [{"type": "text", "text": c}] if isinstance(c, str) else c:
                    if p["type"] == "text":
                        strings.append(p["text"])
                    else:
                        image(p.get("detail"))
            elif kind == "function_call":
                strings += [item["name"], item.get("arguments", "")]
            elif kind == "function_call_output":
                strings.append(item["output"])
            else:
                strings += item.get("summary", [])
                if item.get("content"):
                    strings.append(item["content"])
    elif fmt == "openai-chat":
        for msg in payload["messages"]:
            extra += 3
            c = msg.get("content")
            for p in [{"type": "text", "text": c}] if isinstance(c, str) else c or []:
                if p["type"] == "text":
                    strings.append(p["text"])
                else:
                    image(p["image_url"].get("detail"))
            for call in msg.get("tool_calls", []):
                extra += 3
                strings += [call["function"]["name"], call["function"]["arguments"]]
    elif fmt == "openai-responses":
        for item in payload["input"]:
            extra += 3
            if item["type"] == "message":
                c = item["content"]
                for p in [{"type": "input_text", "text": c}] if isinstance(c, str) else c:
                    if p["type"] == "input_image":
                        image(p["detail"])
                    else:
                        strings.append(p["text"])
            elif item["type"] == "function_call":
                strings += [item["name"], item["arguments"]]
            elif item["type"] == "function_call_output":
                strings.append(item["output"])
            else:
                strings += [s["text"] for s in item["summary"]]
                strings += [s["text"] for s in item.get("content", [])]
    else:
        system = payload.get("system")
        if system is not None:
            extra += 3
            strings += [system] if isinstance(system, str) else [b["text"] for b in system]
        for msg in payload["messages"]:
            extra += 3
            c = msg["content"]
            for b in [{"type": "text", "text": c}] if isinstance(c, str) else c:
                if b["type"] == "text":
                    strings.append(b["text"])
                elif b["type"] == "image":
                    image(None)
                elif b["type"] == "tool_use":
                    extra += 3
                    strings += [b["name"], json.dumps(b["input"], ensure_ascii=False)]
                elif b["type"] == "tool_result":
                    extra += 3
                    strings.append(b["content"])
                elif b["type"] == "thinking":
                    strings.append(b["thinking"])
    if tokenizer == "approx":
        tokens = sum((len(s) + 3) // 4 for s in strings if s)
    else:
        enc = get_encoding(tokenizer)
        tokens = sum(len(enc.encode_ordinary(s)) for s in strings)
    return tokens + extra, sum(len(s) for s in strings)


# -- the spec, re-derived on the test side ------------------------------------------------------


class Spec:
    def __init__(self, memory: list[StoredItem], budget: Budget, fmt: str) -> None:
        self.memory = memory
        self.budget = budget
        self.fmt = fmt
        self.by_seq = {it.seq: it for it in memory}
        bodies = [it.body for it in memory]
        self.call_seq: dict[int, int] = {}  # output -> call
        self.outputs: dict[int, list[int]] = {}  # call -> outputs
        last: dict[str, int] = {}
        self.run: dict[int, int] = {}  # call -> first call of its run
        run_start: int | None = None
        for it in memory:
            b = it.body
            if isinstance(b, FunctionCallItem):
                run_start = it.seq if run_start is None else run_start
                self.run[it.seq] = run_start
                last[b.call_id] = it.seq
                self.outputs[it.seq] = []
            elif not isinstance(b, ReasoningItem):
                run_start = None
            if isinstance(b, FunctionCallOutputItem) and b.call_id in last:
                self.call_seq[it.seq] = last[b.call_id]
                self.outputs[last[b.call_id]].append(it.seq)
        self.follower: dict[int, int | None] = {}
        for k, it in enumerate(memory):
            if isinstance(it.body, ReasoningItem):
                j = k + 1
                while j < len(memory) and isinstance(bodies[j], ReasoningItem):
                    j += 1
                ok = j < len(memory) and (
                    isinstance(bodies[j], FunctionCallItem)
                    or (isinstance(bodies[j], MessageItem) and bodies[j].role == "assistant")
                )
                self.follower[it.seq] = memory[j].seq if ok else None
        users = [it.seq for it in memory if _role(it) == "user"]
        self.newest_user = users[-1] if users else None

    def run_members(self, call: int) -> set[int]:
        start = self.run[call]
        calls = {c for c, s in self.run.items() if s == start}
        return calls | {o for c in calls for o in self.outputs[c]}

    def mandatory(self) -> set[int]:
        b = self.budget
        out = {it.seq for it in self.memory[: b.pinned_prefix_items]}
        out |= {it.seq for it in self.memory if it.pinned}
        if b.keep_system:
            out |= {it.seq for it in self.memory if _role(it) in ("system", "developer")}
        if self.newest_user is not None:
            out.add(self.newest_user)
        return out

    def closure(self) -> set[int]:
        todo, out = list(self.mandatory()), set()
        while todo:
            s = todo.pop()
            if s in out:
                continue
            out.add(s)
            if s in self.run:
                todo += self.run_members(s)
            if s in self.call_seq:
                todo += self.run_members(self.call_seq[s])
            if self.follower.get(s) is not None:
                todo.append(self.follower[s])  # type: ignore[arg-type]
        return out

    def renderable(self, seq: int) -> bool:
        b = self.by_seq[seq].body
        if isinstance(b, FunctionCallOutputItem):
            return seq in self.call_seq
        if isinstance(b, FunctionCallItem):
            return bool(self.outputs[seq]) or self.budget.dangling_tool_calls == "placeholder"
        if isinstance(b, ReasoningItem):
            f = self.follower.get(seq)
            if f is None or not self.renderable(f):
                return False
            anthropic_style = b.signature is not None or bool(b.redacted)
            trimmed = (
                self.budget.trim_old_reasoning
                and self.newest_user is not None
                and seq < self.newest_user
            )
            return {
                "canonical": True,
                "openai-chat": False,
                "openai-responses": not anthropic_style,
                "anthropic": anthropic_style and not trimmed,
            }[self.fmt]
        return True


def _role(it: StoredItem) -> str | None:
    return it.body.role if isinstance(it.body, MessageItem) else None


def project(session: Session, budget: Budget, fmt: str) -> ProjectedContext:
    return project_context(session.source(), budget, format=fmt)  # type: ignore[arg-type]


# -- invariants ---------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
@PROPS
@given(session=sessions(), budget=budgets())
def test_invariants(fmt: str, session: Session, budget: Budget) -> None:
    result = project(session, budget, fmt)
    payload, report = result.payload, result.report
    memory = session.items
    spec = Spec(memory, budget, fmt)
    assert result.needs_more is False
    validate_payload(fmt, payload)

    seqs = (
        carried(fmt, payload, memory)
        if fmt != "anthropic"
        else carried(fmt, payload, memory, part="messages")
    )
    kept = set(carried(fmt, payload, memory))

    # 1. order: a subsequence of working memory in seq order
    assert seqs == sorted(set(seqs)), seqs
    if fmt == "anthropic":
        sys_seqs = carried(fmt, payload, memory, part="system")
        assert sys_seqs == sorted(set(sys_seqs))

    # 2. mandatory part (and the summary) is present
    closure = spec.closure()
    for seq in spec.mandatory():
        if spec.renderable(seq):
            assert seq in kept, f"mandatory item {seq} missing"
    if session.summary is not None:
        assert json.dumps(session.summary, ensure_ascii=False)[1:-1] in json.dumps(
            payload, ensure_ascii=False, default=str
        )

    # 3. tool pairing, whole groups
    for seq in kept:
        body = spec.by_seq[seq].body
        if isinstance(body, FunctionCallOutputItem):
            assert spec.call_seq[seq] in kept
        if isinstance(body, FunctionCallItem):
            assert set(spec.outputs[seq]) <= kept
            members = {m for m in spec.run_members(seq) if spec.renderable(m)}
            assert members <= kept, "a tool group was split"
            if not spec.outputs[seq]:
                assert budget.dangling_tool_calls == "placeholder"
                assert f"[tool result missing: {body.name}({body.call_id})]" in json.dumps(
                    payload, default=str
                )

    # 4. reasoning only with the item it precedes
    for seq in kept:
        if isinstance(spec.by_seq[seq].body, ReasoningItem):
            assert spec.follower[seq] in kept

    # 5. budget
    mandatory_note = [n for n in report.notes if "mandatory" in n]
    if mandatory_note:
        assert kept <= closure
        assert report.limits_applied
    else:
        for name, actual in (
            ("max_items", report.projected_items),
            ("max_chars", report.projected_chars),
            ("max_tokens", report.projected_tokens),
        ):
            limit = getattr(budget, name)
            assert limit is None or actual <= limit, (name, actual, limit)

    # 6. recency: the non-mandatory kept items are a suffix with no holes
    tail = kept - closure
    if tail:
        oldest = min(tail)
        for it in memory:
            if it.seq > oldest and spec.renderable(it.seq):
                assert it.seq in kept, f"hole at {it.seq}"

    # 7. honest report
    tokens, chars = recount(fmt, payload, budget.tokenizer)
    assert report.projected_tokens == tokens
    assert report.projected_chars == chars
    assert report.projected_items == len(kept)
    assert report.source_items == len(memory)
    assert report.dropped_items == len(memory) - len(kept)
    in_ranges = {it.seq for it in memory for lo, hi in report.dropped_ranges if lo <= it.seq <= hi}
    assert in_ranges == {it.seq for it in memory} - kept
    if budget.max_recent_tool_results is not None:
        cleared = json.dumps(payload, default=str).count("[tool result cleared: ")
        if cleared:
            assert any(n.startswith(f"tier1: cleared {cleared} tool results") for n in report.notes)
    unlimited = replace_budget(budget, max_items=None, max_chars=None, max_tokens=None)
    everything = set(carried(fmt, project(session, unlimited, fmt).payload, memory))
    assert kept <= everything
    if kept != everything and not mandatory_note:
        assert report.limits_applied, "items dropped for budget, but no limit reported"

    # 8. determinism
    again = project_context(copy.deepcopy(session.source()), budget, format=fmt)  # type: ignore[arg-type]
    assert json.dumps(again.payload, default=str) == json.dumps(payload, default=str)
    assert again.report == report


@pytest.mark.parametrize("fmt", FORMATS)
@PROPS
@given(session=sessions(), budget=budgets(), extra=st.integers(1, 200))
def test_recency_is_monotone_and_tight(
    fmt: str, session: Session, budget: Budget, extra: int
) -> None:
    """More budget never keeps less; the reported usage is itself a budget giving the same
    projection; with the whole memory's usage as budget, nothing is dropped."""
    result = project(session, budget, fmt)
    kept = set(carried(fmt, result.payload, session.items))
    if budget.max_tokens is not None:
        bigger = project(session, replace_budget(budget, max_tokens=budget.max_tokens + extra), fmt)
        assert kept <= set(carried(fmt, bigger.payload, session.items))
    if not any("mandatory" in n for n in result.report.notes):
        tight = replace_budget(
            budget,
            max_items=result.report.projected_items or None if budget.max_items else None,
            max_chars=result.report.projected_chars or None if budget.max_chars else None,
            max_tokens=max(1, result.report.projected_tokens) if budget.max_tokens else None,
        )
        assert project(session, tight, fmt).payload == result.payload
    unlimited = replace_budget(budget, max_items=None, max_chars=None, max_tokens=None)
    full = project(session, unlimited, fmt)
    exact = replace_budget(
        budget,
        max_items=full.report.projected_items or None,
        max_chars=full.report.projected_chars or None,
        max_tokens=max(1, full.report.projected_tokens),
    )
    assert project(session, exact, fmt).payload == full.payload


def replace_budget(budget: Budget, **changes: Any) -> Budget:
    return Budget.model_validate({**budget.model_dump(), **changes})


# -- windowed projection ------------------------------------------------------------------------


def windowed_source(session: Session, budget: Budget, start: int) -> ContextSource:
    """What the service loads for a window starting at memory index ``start``."""
    memory = session.items
    spec = Spec(memory, budget, "canonical")
    window_start = memory[start].seq
    old = set(spec.mandatory())
    loaded = [it for it in memory if it.seq >= window_start or it.seq in old]
    runs: list[tuple[int, int]] = []
    for after, before in unloaded_gaps([it.seq for it in loaded], window_start):
        inside = [it.seq for it in memory if (after is None or it.seq > after) and it.seq < before]
        if inside:
            runs.append((min(inside), max(inside)))
    return ContextSource(
        summary=session.summary,
        items=loaded,
        total_items=len(memory),
        total_tokens=sum(i.tokens for i in memory),
        total_chars=sum(i.chars for i in memory),
        window_start_seq=window_start,
        unloaded_runs=runs,
    )


@pytest.mark.parametrize("fmt", FORMATS)
@PROPS
@given(session=sessions(max_turns=5), budget=budgets(), data=st.data())
def test_windowed_projection_equals_full(
    fmt: str, session: Session, budget: Budget, data: st.DataObject
) -> None:
    if not session.items:
        return
    full = project(session, budget, fmt)
    start = data.draw(st.integers(0, len(session.items) - 1))
    rounds = 0
    while True:
        result = project_context(windowed_source(session, budget, start), budget, format=fmt)  # type: ignore[arg-type]
        if not result.needs_more:
            break
        assert start > 0, "needs_more on a window that is the whole memory"
        start //= 2
        rounds += 1
    assert json.dumps(result.payload, default=str) == json.dumps(full.payload, default=str)
    assert result.report == full.report


def test_windowed_projection_settles_without_loading_everything() -> None:
    """A small budget over a long session is decided from the newest items alone."""
    from app.domain.items import NewItem
    from tests.domain.strategies import store

    news = []
    for k in range(200):
        news.append(NewItem(body=MessageItem(role="user", content=f"question {k} " * 5)))
        news.append(NewItem(body=MessageItem(role="assistant", content=f"answer {k} " * 5)))
    session = Session(items=store(news), summary=None)
    budget = Budget(max_tokens=100)
    for fmt in FORMATS:
        full = project(session, budget, fmt)
        result = project_context(windowed_source(session, budget, 380), budget, format=fmt)  # type: ignore[arg-type]
        assert not result.needs_more
        assert result.payload == full.payload and result.report == full.report
        tiny = project_context(windowed_source(session, budget, 398), budget, format=fmt)  # type: ignore[arg-type]
        assert tiny.needs_more


_ = replace  # dataclasses.replace kept for readers extending these tests
