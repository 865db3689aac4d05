"""DESIGN §2 invariants as property tests, over random sessions and budgets, in every format.

The sessions are faithful ones (``sessions(faithful=True)``): items ingested in every provider
format, opaque call/output pairs of every family, hosted items, other content parts, tool
outputs with images. The test side re-derives what it checks from the spec (tool pairing by
family and key, parallel call runs, reasoning followers, mandatory items, what each format can
carry) and reads payloads through the ``<<seq>>`` markers every generated item carries; tokens
are recounted with tiktoken directly under each format's documented rule (for the texts of
opaque items and other parts, the rule is "the texts ``items.opaque_texts`` finds", so that
function is used as the definition). Provider payloads are validated against the SDK types,
every member of the unions admitted.
"""

from __future__ import annotations

import copy
import json
import re
from collections import Counter
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.domain.formats import ingest, render_listing
from app.domain.formats.anthropic import CONTINUATION
from app.domain.formats.gemini import CONTINUATION as GEMINI_FILLER
from app.domain.formats.openai_chat import is_legacy_call
from app.domain.items import (
    FunctionCallItem,
    FunctionCallOutputItem,
    MessageItem,
    NewItem,
    OpaqueItem,
    ReasoningItem,
    StoredItem,
    opaque_texts,
)
from app.domain.projection import (
    Budget,
    ContextSource,
    ProjectedContext,
    project_context,
    unloaded_gaps,
)
from app.domain.tokens import IMAGE_TOKENS, get_encoding
from tests.domain.strategies import (
    FORMATS,
    OPAQUE_FAMILIES,
    Session,
    budgets,
    repeated_call_sessions,
    sessions,
    store,
)
from tests.support.provider_validation import validate_payload_faithful

PROPS = settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

_CARRIED_RE = re.compile(
    # a marker; a cleared output (by its call id); an item id: ours, or a reasoning item's
    # OpenAI id (``rs_<seq>``, its own record's or its canonical item id: Tier 2 trims its
    # text, and its id is all that is left to see)
    r"<<(\d+)>>|\[tool result cleared: [^()\]]*\(([^()]*)\)\]|\"id\": \"(?:itm|rs)_(\d+)\""
)


# -- reading a payload --------------------------------------------------------------------------


def carried(
    fmt: str, payload: dict[str, Any], memory: list[StoredItem], *, part: str = "all"
) -> list[int]:
    """Seqs of the memory items a payload carries, in payload order."""
    if fmt == "canonical":
        return [i["seq"] for i in payload["items"] if "seq" in i]
    # a key may answer several calls (gemini's derived keys repeat turn after turn): a cleared
    # output is one not yet read that answers the call with its key read last (an output
    # answers the latest earlier call with its key), else the first one with its key not yet
    # read
    output_of: dict[str, list[int]] = {}
    answers: dict[int, int] = {}  # output -> call, as the projection pairs them
    latest: dict[str, int] = {}
    for it in memory:
        if isinstance(it.body, FunctionCallItem):
            latest[it.body.call_id] = it.seq
        if isinstance(it.body, FunctionCallOutputItem):
            output_of.setdefault(it.body.call_id, []).append(it.seq)
            if it.body.call_id in latest:
                answers[it.seq] = latest[it.body.call_id]
    read_call: dict[str, int] = {}
    calls = {it.seq: it.body.call_id for it in memory if isinstance(it.body, FunctionCallItem)}
    known = {it.seq for it in memory}
    if fmt in ("anthropic", "gemini") and part != "all":
        doc = payload.get(part) or ""
    else:
        doc = payload
    out: list[int] = []
    for m in _CARRIED_RE.finditer(json.dumps(doc, ensure_ascii=False)):
        if m.group(1):
            seq = int(m.group(1))
        elif m.group(2):
            key = m.group(2)
            unread = [s for s in output_of[key] if s not in out] or output_of[key][-1:]
            seq = next((s for s in unread if answers.get(s) == read_call.get(key)), unread[0])
        else:
            seq = int(m.group(3))
        if seq in known and (not out or out[-1] != seq):
            out.append(seq)
            if seq in calls:
                read_call[calls[seq]] = seq
    return out


def recount(fmt: str, payload: dict[str, Any], tokenizer: str) -> tuple[int, int]:
    """(tokens, chars) of a payload under the documented per-format rules, with tiktoken."""
    strings: list[str] = []
    extra = 0

    def image(detail: str | None) -> None:
        nonlocal extra
        extra += IMAGE_TOKENS.get(detail or "auto", IMAGE_TOKENS["auto"])

    def overhead(tokens: int) -> None:
        nonlocal extra
        extra += tokens

    if fmt == "canonical":
        _recount_canonical(payload, strings, image, overhead)
    elif fmt == "openai-chat":
        _recount_chat(payload, strings, image, overhead)
    elif fmt == "openai-responses":
        _recount_responses(payload, strings, image, overhead)
    elif fmt == "gemini":
        _recount_gemini(payload, strings, image, overhead)
    else:
        _recount_anthropic(payload, strings, image, overhead)
    if tokenizer == "approx":
        tokens = sum((len(s) + 3) // 4 for s in strings if s)
    else:
        enc = get_encoding(tokenizer)
        tokens = sum(len(enc.encode_ordinary(s)) for s in strings)
    return tokens + extra, sum(len(s) for s in strings)


_WIRE_KEYS = {"id", "seq", "tokens", "chars", "pinned", "metadata", "created_at", "format"}


def image_urls(value: Any) -> int:
    """How many ``image_url`` strings data kept verbatim holds: each is charged as an image
    (the documented rule for opaque items and other parts)."""
    if isinstance(value, dict):
        return sum(
            1 if k == "image_url" and isinstance(v, str) and v else image_urls(v)
            for k, v in value.items()
        )
    if isinstance(value, list):
        return sum(map(image_urls, value))
    return 0


def _opaque(value: Any, strings: list[str], image: Any) -> None:
    strings.extend(opaque_texts(value))
    for _ in range(image_urls(value)):
        image(None)


def _recount_canonical(
    payload: dict[str, Any], strings: list[str], image: Any, overhead: Any
) -> None:
    def parts(content: Any) -> None:
        if isinstance(content, str):
            strings.append(content)
            return
        for p in content:
            if p["type"] == "text":
                strings.append(p["text"])
            elif p["type"] == "image":
                image(p.get("detail"))
            else:
                _opaque(p, strings, image)

    for wire in payload["items"]:
        item = {k: v for k, v in wire.items() if k not in _WIRE_KEYS}
        overhead(3)
        kind = item.get("type")  # an untyped opaque item has none
        if kind == "message":
            parts(item["content"])
        elif kind == "function_call":
            strings.extend([item["name"], item.get("arguments", "")])
        elif kind == "function_call_output":
            parts(item["output"])
        elif kind == "reasoning":
            strings.extend(item.get("summary", []))
            if item.get("content"):
                strings.append(item["content"])
        else:
            _opaque(item, strings, image)


def _recount_chat(payload: dict[str, Any], strings: list[str], image: Any, overhead: Any) -> None:
    for msg in payload["messages"]:
        overhead(3)
        c = msg.get("content")
        if c is None and isinstance(msg.get("refusal"), str):
            strings.append(msg["refusal"])
        for p in [{"type": "text", "text": c}] if isinstance(c, str) else c or []:
            if p["type"] == "text":
                strings.append(p["text"])
            elif p["type"] == "image_url":
                image(p["image_url"].get("detail"))
            else:
                _opaque(p, strings, image)
        for call in msg.get("tool_calls") or []:
            overhead(3)
            if call["type"] == "function":
                strings += [call["function"]["name"], call["function"]["arguments"]]
            else:
                strings += [call["custom"]["name"], call["custom"]["input"]]
        if msg.get("function_call"):
            overhead(3)
            strings += [msg["function_call"]["name"], msg["function_call"]["arguments"]]


def _recount_responses(
    payload: dict[str, Any], strings: list[str], image: Any, overhead: Any
) -> None:
    def parts(content: Any) -> None:
        for p in [{"type": "input_text", "text": content}] if isinstance(content, str) else content:
            if p["type"] in ("input_text", "output_text"):
                strings.append(p["text"])
            elif p["type"] == "input_image":
                image(p.get("detail"))
            else:
                _opaque(p, strings, image)

    for item in payload["input"]:
        overhead(3)
        kind = item.get("type", "message")
        if kind == "message":
            parts(item["content"])
        elif kind == "function_call":
            strings += [item["name"], item["arguments"]]
        elif kind == "function_call_output":
            parts(item["output"])
        elif kind == "reasoning":
            strings += [s["text"] for s in item["summary"]]
            strings += [s["text"] for s in item.get("content") or []]
        else:
            _opaque(item, strings, image)


def _recount_anthropic(
    payload: dict[str, Any], strings: list[str], image: Any, overhead: Any
) -> None:
    def blocks(content: Any) -> None:
        for b in [{"type": "text", "text": content}] if isinstance(content, str) else content:
            kind = b["type"]
            source = b.get("source") or {}
            if kind == "text":
                strings.append(b["text"])
            elif kind == "image" and (
                (source.get("type") == "base64" and source.get("data") and source.get("media_type"))
                or (source.get("type") == "url" and source.get("url"))
                or (source.get("type") == "file" and source.get("file_id"))
            ):
                image(None)
            elif kind == "tool_use":
                overhead(3)
                strings.extend([b["name"], json.dumps(b["input"], ensure_ascii=False)])
            elif kind == "tool_result":
                overhead(3)
                if b.get("content") is not None:
                    blocks(b["content"])
            elif kind == "thinking":
                strings.append(b["thinking"])
            elif kind != "redacted_thinking":
                _opaque(b, strings, image)

    system = payload.get("system")
    if system is not None:
        overhead(3)
        blocks(system)
    for msg in payload["messages"]:
        overhead(3)
        blocks(msg["content"])


def _recount_gemini(payload: dict[str, Any], strings: list[str], image: Any, overhead: Any) -> None:
    """Gemini's rule (DESIGN §1, the budget's tokenizer standing in for Gemini's): 3 per
    content (and for ``system_instruction``), a part's text, the image charge per image
    ``inlineData`` or ``fileData``, 3 + name + JSON of ``args`` / ``response`` per function
    part; any other part the texts ``opaque_texts`` finds."""

    def parts(values: list[Any]) -> None:
        for p in values:
            if isinstance(p, str):
                strings.append(p)
                continue
            present = {k: v for k, v in p.items() if v is not None}
            if "text" in present:
                strings.append(present["text"])
            elif "fileData" in present or "file_data" in present:
                image(None)
            elif "inlineData" in present or "inline_data" in present:
                blob = present.get("inlineData") or present["inline_data"]
                mime = blob.get("mimeType") or blob.get("mime_type")
                if isinstance(mime, str) and mime.startswith("image/"):
                    image(None)
                else:
                    _opaque(p, strings, image)
            elif "functionCall" in present or "function_call" in present:
                call = present.get("functionCall") or present["function_call"]
                overhead(3)
                strings.extend(
                    [call["name"], json.dumps(call.get("args") or {}, ensure_ascii=False)]
                )
            elif "functionResponse" in present or "function_response" in present:
                resp = present.get("functionResponse") or present["function_response"]
                overhead(3)
                strings.append(resp["name"])
                strings.append(json.dumps(resp.get("response") or {}, ensure_ascii=False))
                if isinstance(resp.get("parts"), list):
                    parts(resp["parts"])
            else:
                _opaque(p, strings, image)

    system = payload.get("system_instruction")
    if system is not None:
        overhead(3)
        parts([system] if isinstance(system, str) else system["parts"])
    for content in payload["contents"]:
        overhead(3)
        parts(content["parts"])


# -- the spec, re-derived on the test side ------------------------------------------------------

# Opaque pairs, by type: (family, the field holding the key); see strategies.OPAQUE_FAMILIES.
_CALL_TYPES = {call: (fam, key) for fam, (call, _, key, _) in OPAQUE_FAMILIES.items()}
_OUTPUT_TYPES = {out: (fam, key) for fam, (_, out, _, key) in OPAQUE_FAMILIES.items()}
# Standalone items that are not model output: reasoning cannot belong to them.
_NOT_MODEL_OUTPUT = {"additional_tools", "configuration_update", "compaction_trigger"}


def side(body: Any) -> tuple[str, tuple[str, Any] | None]:
    """("message" | "call" | "output" | "hosted" | "reasoning", the pairing key of a call or an
    output: (family, id))."""
    if isinstance(body, FunctionCallItem):
        return "call", ("function", body.call_id)
    if isinstance(body, FunctionCallOutputItem):
        return "output", ("function", body.call_id)
    if isinstance(body, OpaqueItem):
        if body.type in _CALL_TYPES:
            family, field = _CALL_TYPES[body.type]
            return "call", (family, body.data.get(field))
        if body.type in _OUTPUT_TYPES:
            family, field = _OUTPUT_TYPES[body.type]
            return "output", (family, body.data.get(field))
        return "hosted", None
    if isinstance(body, ReasoningItem):
        return "reasoning", None
    return "message", None


class Grid:
    """The stable cut's grid, re-derived from DESIGN §2: positions are the stored counts of
    the items before, in the unit of the first limit set (tokens, chars, items; tokens on an
    8192-token budget's grid when none is), one step = ``cut_step`` x that limit; the clock
    point is the last grid point at or before the end of working memory."""

    def __init__(self, memory: list[StoredItem], budget: Budget) -> None:
        if budget.max_tokens is not None:
            self.unit, limit, size = "tokens", budget.max_tokens, lambda it: it.tokens
        elif budget.max_chars is not None:
            self.unit, limit, size = "chars", budget.max_chars, lambda it: it.chars
        elif budget.max_items is not None:
            self.unit, limit, size = "items", budget.max_items, lambda it: 1
        else:
            self.unit, limit, size = "tokens", 8192, lambda it: it.tokens
        self.step = max(1, int(budget.cut_step * limit))
        self.at: dict[int, int] = {}
        position = 0
        for it in memory:
            self.at[it.seq] = position
            position += size(it)
        self.end = position
        self.point = position // self.step * self.step


def messages_key(fmt: str) -> str:
    return {"canonical": "items", "openai-responses": "input", "gemini": "contents"}.get(
        fmt, "messages"
    )


def messages_of(fmt: str, payload: dict[str, Any]) -> list[Any]:
    """The payload's message list (``stable_prefix`` counts these)."""
    return payload[messages_key(fmt)]  # type: ignore[no-any-return]


def grid_of(memory: list[StoredItem], budget: Budget) -> Grid:
    return Grid(memory, budget)


_GRID_RE = re.compile(r"^stable: grid point (\d+) (tokens|chars|items), step (\d+), clock (\d+)$")


def grid_note(notes: list[str]) -> tuple[int, str, int, int] | None:
    """(grid point, unit, step, clock point) from a stable read's report."""
    for note in notes:
        m = _GRID_RE.match(note)
        if m:
            return int(m.group(1)), m.group(2), int(m.group(3)), int(m.group(4))
    return None


class Spec:
    def __init__(self, memory: list[StoredItem], budget: Budget, fmt: str) -> None:
        self.memory = memory
        self.budget = budget
        self.fmt = fmt
        self.by_seq = {it.seq: it for it in memory}
        self.kind = {it.seq: side(it.body)[0] for it in memory}
        self.call_seq: dict[int, int] = {}  # output -> call
        self.outputs: dict[int, list[int]] = {}  # call -> outputs
        last: dict[tuple[str, Any], int] = {}
        self.run: dict[int, int] = {}  # call -> first call of its run
        run_start: int | None = None
        for it in memory:
            kind, key = side(it.body)
            if kind == "call":
                run_start = it.seq if run_start is None else run_start
                self.run[it.seq] = run_start
                last[key] = it.seq  # type: ignore[index]
                self.outputs[it.seq] = []
            elif kind != "reasoning":
                run_start = None
            if kind == "output" and key in last:
                self.call_seq[it.seq] = last[key]  # type: ignore[index]
                self.outputs[last[key]].append(it.seq)  # type: ignore[index]
        self.follower: dict[int, int | None] = {}
        for k, it in enumerate(memory):
            if isinstance(it.body, ReasoningItem):
                j = k + 1
                while j < len(memory) and isinstance(memory[j].body, ReasoningItem):
                    j += 1
                ok = j < len(memory) and self.is_model_output(memory[j])
                self.follower[it.seq] = memory[j].seq if ok else None
        users = [it.seq for it in memory if _role(it) == "user"]
        self.newest_user = users[-1] if users else None
        # Tier 2's anchor: the newest user message; with a stable cut, the newest one that
        # starts before the clock point (DESIGN §2: the tiers move on the cut's clock)
        self.tier_anchor = self.newest_user
        if budget.cut == "stable":
            clock = grid_of(memory, budget)
            before = [
                it.seq for it in memory if _role(it) == "user" and clock.at[it.seq] < clock.point
            ]
            self.tier_anchor = before[-1] if before else None

    def is_model_output(self, it: StoredItem) -> bool:
        kind = self.kind[it.seq]
        if kind == "message":
            return _role(it) == "assistant"
        if kind == "hosted":
            return it.body.type not in _NOT_MODEL_OUTPUT
        return kind == "call"

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

    def openai_reasoning_id(self, seq: int) -> str | None:
        """The id OpenAI issued for a reasoning item, which the Responses API requires of a
        reasoning input item (``ResponseReasoningItemParam``) and checks: its own Responses
        record's ``id``, or the item id a canonical item was named with when it is ``rs_...``
        (our own ``itm_...`` is none)."""
        it = self.by_seq[seq]
        if it.format == "openai-responses":
            own = (it.record or {}).get("id")
            return own if isinstance(own, str) else None
        return it.id if it.format == "canonical" and it.id.startswith("rs_") else None

    def unissued(self, seq: int) -> bool:
        """OpenAI-style reasoning that openai-responses leaves out for want of an OpenAI id:
        reasoning it writes itself (not appended in it; the strategies give what they append
        in it its ``rs_`` id, so that trimmed it keeps one)."""
        it = self.by_seq[seq]
        b = it.body
        return (
            self.fmt == "openai-responses"
            and isinstance(b, ReasoningItem)
            and b.signature is None
            and not b.redacted
            and it.format not in ("gemini", "openai-responses")
            and self.openai_reasoning_id(seq) is None
        )

    def representable(self, seq: int) -> bool:
        """Whether the format can carry the item at all (DESIGN §1 rendering table)."""
        it = self.by_seq[seq]
        b = it.body
        if isinstance(b, ReasoningItem):
            anthropic_style = b.signature is not None or (
                bool(b.redacted) and b.encrypted_content is not None
            )
            return {
                "canonical": True,
                "openai-chat": False,
                # OpenAI-style; a Gemini thought (its signature as encrypted content) is
                # Gemini's own, as Anthropic's thinking is Anthropic's; and only under an id
                # OpenAI issued
                "openai-responses": b.signature is None
                and not b.redacted
                and it.format != "gemini"
                and not self.unissued(seq),
                "anthropic": anthropic_style,
                # only reasoning written in gemini (thought parts) has a counterpart there
                "gemini": it.format == "gemini",
            }[self.fmt]
        if isinstance(b, OpaqueItem):
            kind = b.data.get("type")
            # untyped, or a core type missing its call_id or role (incomplete: only a core
            # item that fails its model is opaque): no provider carries it
            if not isinstance(kind, str) or kind in (
                "function_call",
                "function_call_output",
                "message",
            ):
                return self.fmt == "canonical"
            return self.fmt == "canonical" or (
                self.fmt == "openai-responses" and it.format in ("openai-responses", "canonical")
            )
        return True

    def trimmed(self, seq: int) -> bool:
        return (
            self.budget.trim_old_reasoning
            and self.tier_anchor is not None
            and seq < self.tier_anchor
            and isinstance(self.by_seq[seq].body, ReasoningItem)
        )

    def renderable(self, seq: int) -> bool:
        kind = self.kind[seq]
        if not self.representable(seq):
            return False
        if kind == "output":
            return seq in self.call_seq and self.representable(self.call_seq[seq])
        if kind == "call":
            function = isinstance(self.by_seq[seq].body, FunctionCallItem)
            # Chat renders its deprecated `function_call` as itself: no placeholder answers it
            legacy = self.fmt == "openai-chat" and is_legacy_call(self.by_seq[seq])
            placeholder = self.budget.dangling_tool_calls == "placeholder" and not legacy
            return bool(self.outputs[seq]) or (function and placeholder)
        if kind == "reasoning":
            f = self.follower.get(seq)
            if f is None or not self.renderable(f):
                return False
            return not (self.fmt in ("anthropic", "gemini") and self.trimmed(seq))
        return True

    def selected_when_unlimited(self) -> set[int]:
        """What a projection with no limits considers: everything, except that a kept tail
        that must start at a user message (anthropic, ``start_on: user``) starts at the first
        one; the mandatory part always."""
        start = self.memory[0].seq if self.memory else 0
        if self.fmt == "anthropic" or self.budget.start_on == "user":
            users = [it.seq for it in self.memory if _role(it) == "user"]
            start = users[0] if users else max(self.by_seq, default=0) + 1
        return self.closure() | {s for s in self.by_seq if s >= start}


# A native Anthropic message stored whole never takes a neighbour's blocks, so when the
# projection puts two of the same role next to each other (a pinned message before the tail, a
# left-out item between them, a turn written in another format) the payload does not
# alternate: test_faithful_properties.py::test_anthropic_native_messages_still_alternate. Until
# that is fixed, same-role neighbours are combined here (as the Messages API itself combines
# consecutive turns) before the payload is validated; everything else is checked as it is.
ANTHROPIC_ALTERNATION_FIXED = True


def combine_turns(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each user or assistant message joined to the previous turn when that has its role
    (``role: system`` messages in between stay where they are)."""
    out: list[dict[str, Any]] = []
    turn: int | None = None  # index in ``out`` of the last user or assistant message
    for m in messages:
        if m["role"] == "system":
            out.append(m)
        elif turn is not None and out[turn]["role"] == m["role"]:
            flat = [
                block
                for c in (out[turn]["content"], m["content"])
                for block in ([{"type": "text", "text": c}] if isinstance(c, str) else c)
            ]
            out[turn] = {"role": m["role"], "content": flat}
        else:
            out.append(m)
            turn = len(out) - 1
    return out


def validate(fmt: str, payload: dict[str, Any]) -> None:
    """The payload against the SDK's request types and the pairing rules (every member of the
    SDK unions admitted)."""
    if fmt == "anthropic" and not ANTHROPIC_ALTERNATION_FIXED:
        payload = {**payload, "messages": combine_turns(payload["messages"])}
    validate_payload_faithful(fmt, payload)


def _role(it: StoredItem) -> str | None:
    return it.body.role if isinstance(it.body, MessageItem) else None


def project(session: Session, budget: Budget, fmt: str) -> ProjectedContext:
    return project_context(session.source(), budget, format=fmt)  # type: ignore[arg-type]


_LEFT_OUT_RE = re.compile(r"left out (\d+) items it has no counterpart for \((.*)\)$")
_LEFT_OUT_REASONING_RE = re.compile(r"left out (\d+) reasoning items it cannot represent")
_UNISSUED_RE = re.compile(r"left out (\d+) reasoning items without a reasoning id OpenAI issued")


def unissued_named(notes: list[str]) -> int:
    """How many reasoning items the notes say openai-responses left out for want of an id."""
    named = [int(m.group(1)) for n in notes if (m := _UNISSUED_RE.search(n))]
    assert len(named) <= 1, notes
    return named[0] if named else 0


def left_out_named(notes: list[str]) -> Counter[str]:
    """The item types (with counts) that the report's notes say the format left out."""
    out: Counter[str] = Counter()
    for note in notes:
        m = _LEFT_OUT_RE.search(note)
        if m is None:
            continue
        for entry in m.group(2).split(", "):
            kind, _, count = entry.partition(" x")
            out[kind] += int(count or 1)
        assert sum(out.values()) == int(m.group(1)), note
    return out


def check_left_out_notes(spec: Spec, result: ProjectedContext) -> None:
    """With no limits, every item the format cannot carry is named in a report note."""
    selected = spec.selected_when_unlimited()
    expected: Counter[str] = Counter(
        spec.by_seq[s].body.type
        for s in selected
        if spec.kind[s] in ("call", "output", "hosted") and not spec.representable(s)
    )
    assert left_out_named(result.report.notes) == expected, (expected, result.report.notes)
    reasoning = sum(
        1
        for s in selected
        if spec.kind[s] == "reasoning"
        and spec.follower[s] is not None
        and not spec.representable(s)
        and not spec.unissued(s)
    )
    named = [
        int(m.group(1)) for n in result.report.notes if (m := _LEFT_OUT_REASONING_RE.search(n))
    ]
    assert named == ([reasoning] if reasoning else []), (reasoning, result.report.notes)
    # reasoning openai-responses could send but for its id: named apart, with the reason
    unissued = sum(1 for s in selected if spec.follower.get(s) is not None and spec.unissued(s))
    assert unissued_named(result.report.notes) == unissued, (unissued, result.report.notes)


# -- invariants ---------------------------------------------------------------------------------


CUT_STEPS = st.sampled_from([0.1, 0.25, 0.5])


@pytest.mark.parametrize("fmt", FORMATS)
@PROPS
@given(session=sessions(faithful=True), budget=budgets())
def test_invariants(fmt: str, session: Session, budget: Budget) -> None:
    result = project(session, budget, fmt)
    payload, report = result.payload, result.report
    memory = session.items
    spec = Spec(memory, budget, fmt)
    assert result.needs_more is False
    if fmt != "canonical":
        validate(fmt, payload)

    # where the system prompt is a field of its own, the order is read in the messages
    system_key = {"anthropic": "system", "gemini": "system_instruction"}.get(fmt)
    seqs = carried(fmt, payload, memory, part=messages_key(fmt) if system_key else "all")
    kept = set(carried(fmt, payload, memory))

    # 0. only what the format can carry
    for seq in kept:
        assert spec.representable(seq), f"{spec.by_seq[seq].body.type} {seq} sent in {fmt}"

    # 1. order: a subsequence of working memory in seq order; but in Chat an answer moves up
    # to right after the message holding its call when working memory put another message
    # with calls in between (``openai_chat`` module docstring): an item only ever comes before
    # an older one as an answer, and never before its own call; in gemini likewise, as a
    # merged user content puts its functionResponse parts first (``gemini`` module docstring)
    assert len(seqs) == len(set(seqs)), seqs
    oldest_after = float("inf")  # the oldest item after this one in the payload
    for seq in reversed(seqs):
        if seq > oldest_after:
            assert fmt in ("openai-chat", "gemini") and spec.kind[seq] == "output", seqs
            assert spec.call_seq[seq] < oldest_after, seqs
        oldest_after = min(oldest_after, seq)
    if system_key is not None:
        sys_seqs = carried(fmt, payload, memory, part=system_key)
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

    # 3. tool pairing, whole groups, for every pair family
    for seq in kept:
        kind = spec.kind[seq]
        body = spec.by_seq[seq].body
        if kind == "output":
            assert spec.call_seq[seq] in kept, f"{body.type} {seq} sent without its call"
        if kind == "call":
            assert set(spec.outputs[seq]) <= kept, f"{body.type} {seq} sent without its output"
            members = {m for m in spec.run_members(seq) if spec.renderable(m)}
            assert members <= kept, "a tool group was split"
            if not spec.outputs[seq]:
                assert isinstance(body, FunctionCallItem), f"dangling {body.type} {seq} sent"
                assert budget.dangling_tool_calls == "placeholder"
                assert f"[tool result missing: {body.name}({body.call_id})]" in json.dumps(
                    payload, default=str
                )

    # 4. reasoning only with the item it precedes
    for seq in kept:
        if isinstance(spec.by_seq[seq].body, ReasoningItem):
            assert spec.follower[seq] in kept
    if fmt == "openai-responses":
        # ... and only with an id OpenAI issued (the Responses API refuses any other)
        sent = [i for i in payload["input"] if i.get("type") == "reasoning"]
        for item in sent:
            assert isinstance(item.get("id"), str) and item["id"].startswith("rs_"), item
        assert len(sent) == sum(1 for s in kept if spec.kind[s] == "reasoning")
        # what it left out for want of one is reported: every such item of the selection
        # (the mandatory part, and the tail from a kept item on; reasoning before its
        # follower shares its unit), and no more than there are
        tail = kept - closure
        oldest = min(tail, default=None)
        unissued = [s for s in spec.follower if spec.follower[s] is not None and spec.unissued(s)]
        surely = [
            s
            for s in unissued
            if s in closure or spec.follower[s] in tail or (oldest is not None and s > oldest)
        ]
        assert len(surely) <= unissued_named(report.notes) <= len(unissued), (
            surely,
            unissued,
            report.notes,
        )
        # and the payload carries none of them
        assert not kept & set(unissued)

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
    if fmt in ("anthropic", "gemini") and budget.trim_old_reasoning:
        # Tier 2 leaves a trimmed thinking block (or thought part) out (it cannot be sent without its text), and
        # its note says so. Counted over the selection: the mandatory part and the units of
        # the kept tail (reasoning shares its follower's unit); a mandatory follower before
        # the tail leaves it open whether its reasoning was selected.
        tail = kept - closure
        left_out = unsure = 0
        for s, follower in spec.follower.items():
            if spec.trimmed(s) and spec.representable(s) and follower in kept:
                if s in closure or follower in tail:
                    left_out += 1
                else:
                    unsure += 1
        if not unsure:
            expected = f"tier2: trimmed {left_out} reasoning items; {fmt} left them out"
            tier2 = [n for n in report.notes if n.startswith("tier2:")]
            assert tier2 == ([expected] if left_out else []), (expected, report.notes)
    unlimited = replace_budget(budget, max_items=None, max_chars=None, max_tokens=None)
    full = project(session, unlimited, fmt)
    everything = set(carried(fmt, full.payload, memory))
    assert kept <= everything
    # What a limit dropped: what the read without limits carries, but for what this budget's
    # tiers leave out. With a stable cut the tiers run on a clock whose step is cut_step x the
    # limit, so the read without limits (on the default grid) may trim less: no limit did that.
    for_a_limit = {s for s in everything - kept if spec.renderable(s)}
    if for_a_limit and not mandatory_note:
        assert report.limits_applied, "items dropped for budget, but no limit reported"
    # ... and what the format cannot carry is named, not silently missing
    check_left_out_notes(spec, full)

    # 8. determinism
    again = project_context(copy.deepcopy(session.source()), budget, format=fmt)  # type: ignore[arg-type]
    assert json.dumps(again.payload, default=str) == json.dumps(payload, default=str)
    assert again.report == report


@pytest.mark.parametrize("fmt", FORMATS)
@PROPS
@given(session=sessions(faithful=True), budget=budgets(), step=CUT_STEPS)
def test_invariants_with_a_stable_cut(
    fmt: str, session: Session, budget: Budget, step: float
) -> None:
    """Invariants 1-9 hold with ``cut: stable`` too; and its own part of invariant 6: the grid
    is the one DESIGN §2 defines, and the kept tail starts at or after the grid point (or at
    the latest boundary, when none is after it, which the report says)."""
    budget = replace_budget(budget, cut="stable", cut_step=step)
    test_invariants.hypothesis.inner_test(fmt, session, budget)  # type: ignore[attr-defined]
    result = project(session, budget, fmt)
    report, memory = result.report, session.items
    noted = grid_note(report.notes)
    assert noted is not None, report.notes
    point, unit, grid_step, clock = noted
    truth = grid_of(memory, budget)
    assert (unit, grid_step, clock) == (truth.unit, truth.step, truth.point)
    assert point % grid_step == 0
    spec = Spec(memory, budget, fmt)
    tail = set(carried(fmt, result.payload, memory)) - spec.closure()
    if tail and not any("mandatory" in n for n in report.notes):
        start = min(tail)
        fallback = any(n.startswith("stable: no boundary at or after") for n in report.notes)
        assert truth.at[start] >= point or fallback, (truth.at[start], point)
    assert 0 <= report.stable_prefix <= len(messages_of(fmt, result.payload))


# -- regressions (found by wide runs of the properties above) ----------------------------------


def stored(*batches: tuple[str, list[dict[str, Any]]]) -> list[StoredItem]:
    """Working memory from appends, each ``(format, items)``; ``<<seq>>`` markers as usual."""
    return store([new for fmt, items in batches for new in ingest(fmt, items)])  # type: ignore[arg-type]


@PROPS
@given(
    session=sessions(profile="canonical", faithful=True),
    budget=budgets(),
    step=st.one_of(st.none(), CUT_STEPS),
)
def test_openai_responses_sends_canonical_reasoning_only_under_an_openai_id(
    session: Session, budget: Budget, step: float | None
) -> None:
    """Sessions written wholly in the canonical format hold reasoning under the client's
    ``rs_...`` id, under ours (``itm_...``) and Anthropic's: in openai-responses only the
    first is sent, with that id (the invariants above check the ids, the notes, the counts and
    the dropped ranges), and what was sent is exactly the ``rs_`` reasoning kept with its
    item. Also with every older reasoning item trimmed and nothing cut (Tier 2 keeps the id)."""
    if step is not None:
        budget = replace_budget(budget, cut="stable", cut_step=step)
    trimming = replace_budget(
        budget, trim_old_reasoning=True, max_items=None, max_chars=None, max_tokens=None
    )
    by_seq = {it.seq: it for it in session.items}
    for each in (budget, trimming):
        test_invariants.hypothesis.inner_test("openai-responses", session, each)  # type: ignore[attr-defined]
        result = project(session, each, "openai-responses")
        sent = [i for i in result.payload["input"] if i.get("type") == "reasoning"]
        kept = set(carried("openai-responses", result.payload, session.items))
        reasoning = [s for s in sorted(kept) if by_seq[s].body.type == "reasoning"]
        assert [i["id"] for i in sent] == [by_seq[s].id for s in reasoning]
        assert all(by_seq[s].id.startswith("rs_") for s in reasoning)


def test_anthropic_system_message_between_user_turns_joins_system() -> None:
    """Regression: an Anthropic ``role: system`` message between two user messages (here the
    item between them has no Anthropic counterpart) was rendered user, system, user. The two
    user messages are one turn, which a system message cannot split: its text joins
    ``system``, after the system messages before it, and the turn is one message."""
    memory = stored(
        (
            "canonical",
            [
                {"type": "message", "role": "user", "content": "<<1>> Run the tests."},
                {
                    "type": "message",
                    "role": "system",
                    "content": [{"type": "text", "text": "<<2>> You are a coding agent."}],
                },
                {
                    "type": "additional_tools",
                    "role": "developer",
                    "tools": [
                        {
                            "type": "function",
                            "name": "query_db",
                            "description": "<<3>>",
                            "parameters": {"type": "object", "properties": {}},
                            "strict": True,
                        }
                    ],
                },
            ],
        ),
        ("anthropic", [{"role": "system", "content": "<<4>> Answer in French."}]),
        ("anthropic", [{"role": "user", "content": "<<5>> And lint."}]),
    )
    session = Session(items=memory, summary=None)
    result = project(session, Budget(), "anthropic")
    assert result.payload == {
        "system": [
            {"type": "text", "text": "<<2>> You are a coding agent."},
            {"type": "text", "text": "<<4>> Answer in French."},
        ],
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "<<1>> Run the tests."},
                    {"type": "text", "text": "<<5>> And lint."},
                ],
            }
        ],
    }
    validate_payload_faithful("anthropic", result.payload)
    for budget in (Budget(), Budget(keep_system=False, max_tokens=30)):
        for fmt in FORMATS:
            test_invariants.hypothesis.inner_test(fmt, session, budget)  # type: ignore[attr-defined]


_FRENCH = {"role": "system", "content": [{"type": "text", "text": "<<2>> Answer in French."}]}


@pytest.mark.parametrize(
    ("after", "moved"),
    [
        ([{"role": "user", "content": "<<3>> And lint."}], True),
        ([{"role": "assistant", "content": "<<3>> D'accord."}], False),
        ([], False),
    ],
    ids=["then-user", "then-assistant", "last"],
)
def test_anthropic_system_message_leaves_messages_only_inside_a_turn(
    after: list[dict[str, Any]], moved: bool
) -> None:
    """A ``role: system`` message written in the Anthropic format stays where it was, byte for
    byte, unless the user turns on both sides of it are one turn; then it joins ``system``, its
    text blocks as sent (``cache_control`` too), after the top-level system prompt. Working
    memory read back as stored (``render_listing``) keeps it in place either way."""
    french = copy.deepcopy(_FRENCH)
    french["content"][0]["cache_control"] = {"type": "ephemeral"}
    sent = [{"role": "user", "content": "<<1>> Run the tests."}, french, *after]
    news = ingest("anthropic", copy.deepcopy(sent), system="Be brief.")
    memory = store(news, list(range(0, len(news))))  # the top-level system is seq 0
    result = project(Session(items=memory, summary=None), Budget(), "anthropic")
    if moved:
        assert result.payload == {
            "system": [{"type": "text", "text": "Be brief."}, *french["content"]],
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "<<1>> Run the tests."},
                        {"type": "text", "text": "<<3>> And lint."},
                    ],
                }
            ],
        }
    else:
        assert result.payload == {"system": "Be brief.", "messages": sent}
    validate_payload_faithful("anthropic", result.payload)
    assert render_listing("anthropic", memory)["messages"] == sent


def test_a_user_message_after_a_trailing_system_message_moves_it_into_system() -> None:
    """The price of that rule, for the cache: a ``role: system`` message last in ``messages``
    (valid there) moves into ``system`` when a user message is appended right after it, so
    that read starts a new cached prefix (docs/prompt-caching.md); the messages before the
    turn it joined stay as they were."""
    news = ingest(
        "anthropic",
        [
            {"role": "user", "content": "<<1>> hi"},
            {"role": "assistant", "content": "<<2>> hello"},
            {"role": "user", "content": "<<3>> Run the tests."},
            {"role": "system", "content": "<<4>> Answer in French."},
            {"role": "user", "content": "<<5>> And lint."},
        ],
    )
    memory = store(news)
    budget = Budget(cut="stable")
    before = project(Session(items=memory[:4], summary=None), budget, "anthropic").payload
    after = project(Session(items=memory, summary=None), budget, "anthropic").payload
    assert "system" not in before
    assert before["messages"][3] == {"role": "system", "content": "<<4>> Answer in French."}
    assert after["system"] == "<<4>> Answer in French."
    assert after["messages"][:2] == before["messages"][:2]
    assert after["messages"][2] == {
        "role": "user",
        "content": [
            {"type": "text", "text": "<<3>> Run the tests."},
            {"type": "text", "text": "<<5>> And lint."},
        ],
    }


def test_anthropic_prompt_starts_with_a_user_turn_after_a_system_message() -> None:
    """Regression: when the cut kept a system message and a pinned assistant message before
    the newest user message, the payload began system, assistant (the leading user message
    was added only when the very first message was an assistant one). A prompt's first turn
    is a user turn: the continuation message comes first, before the system message."""
    memory = stored(
        (
            "anthropic",
            [
                {"role": "user", "content": "<<1>> Please refactor the module. " * 20},
                {"role": "assistant", "content": "<<2>> Done. " * 20},
                {"role": "user", "content": "<<3>> Thanks"},
                {"role": "system", "content": "<<4>> Answer in French."},
                {"role": "assistant", "content": "<<5>> Bonjour.", "pinned": True},
                {"role": "user", "content": "<<6>> Hi"},
            ],
        )
    )
    session = Session(items=memory, summary=None)
    budget = Budget(max_tokens=16)
    result = project(session, budget, "anthropic")
    assert result.payload == {
        "messages": [
            {"role": "user", "content": CONTINUATION},
            {"role": "system", "content": "<<4>> Answer in French."},
            {"role": "assistant", "content": "<<5>> Bonjour."},
            {"role": "user", "content": "<<6>> Hi"},
        ]
    }
    assert result.report.limits_applied == ["max_tokens"]
    validate_payload_faithful("anthropic", result.payload)
    test_invariants.hypothesis.inner_test("anthropic", session, budget)  # type: ignore[attr-defined]


def test_stable_tier2_drop_is_reported_by_its_tier_not_a_limit() -> None:
    """Regression: with ``cut: stable`` a read under a limit it never reaches dropped a
    thinking block that the read without limits keeps, and ``limits_applied`` was empty. No
    limit dropped it: Tier 2 runs on the stable clock, whose step is ``cut_step`` x the limit
    (20 tokens here: the clock point 20 passes the second question, so the first answer's
    thinking is old), while without limits the clock runs on the default grid and is still at
    0. In ``anthropic`` a trimmed thinking block is left out whole, and the tier's note now
    says so."""
    memory = stored(
        (
            "canonical",
            [
                {"type": "message", "role": "user", "content": "<<1>> first question"},
                {"type": "reasoning", "content": "<<2>> thinking", "signature": "sig_1"},
                {"type": "message", "role": "assistant", "content": "<<3>> first answer"},
                {"type": "message", "role": "user", "content": "<<4>> second question"},
                {"type": "message", "role": "assistant", "content": "<<5>> second answer"},
            ],
        )
    )
    session = Session(items=memory, summary=None)
    budget = Budget(max_tokens=200, cut="stable", cut_step=0.1, trim_old_reasoning=True)
    result = project(session, budget, "anthropic")
    report = result.report
    assert carried("anthropic", result.payload, memory) == [1, 3, 4, 5]
    assert report.projected_tokens < 200 and report.limits_applied == []
    assert report.dropped_ranges == [(2, 2)]
    assert "tier2: trimmed 1 reasoning items; anthropic left them out" in report.notes
    assert "stable: grid point 0 tokens, step 20, clock 20" in report.notes
    unlimited = project(session, replace_budget(budget, max_tokens=None), "anthropic")
    assert carried("anthropic", unlimited.payload, memory) == [1, 2, 3, 4, 5]
    assert "stable: grid point 0 tokens, step 819, clock 0" in unlimited.report.notes
    other = project(session, budget, "canonical")  # elsewhere trimmed reasoning stays
    assert "tier2: trimmed 1 reasoning items" in other.report.notes
    for fmt in FORMATS:
        test_invariants_with_a_stable_cut.hypothesis.inner_test(fmt, session, budget, 0.1)  # type: ignore[attr-defined]


def _chat_calls_around_a_legacy_call(*, answered: bool) -> list[StoredItem]:
    """A user message; an assistant message with a custom tool call (``call_2``); an assistant
    message with a deprecated ``function_call`` and its ``function`` answer; and, when
    ``answered``, the tool answer for ``call_2``."""
    tool = {"role": "tool", "tool_call_id": "call_2", "content": "<<5>>"}
    return stored(
        (
            "openai-chat",
            [
                {"role": "user", "content": "<<1>> go"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_2",
                            "type": "custom",
                            "custom": {"name": "read_file", "input": "<<2>>"},
                        }
                    ],
                },
                {
                    "role": "assistant",
                    "content": None,
                    "function_call": {"name": "legacy_3", "arguments": "<<3>>"},
                },
                {"role": "function", "name": "legacy_3", "content": "<<4>>"},
                *([tool] if answered else []),
            ],
        )
    )


@pytest.mark.parametrize("answered", [True, False], ids=["output", "placeholder"])
def test_chat_tool_call_is_answered_before_a_legacy_call_after_it(answered: bool) -> None:
    """Regression: a deprecated ``function_call`` right after a message with tool calls is in
    their run (one tool group), so it was rendered between the tool calls and their answer
    (a placeholder too: it goes after the group's last member), and the tool calls read as
    unanswered. Each answer now moves up to right after the message holding its call."""
    memory = _chat_calls_around_a_legacy_call(answered=answered)
    session = Session(items=memory, summary=None)
    budget = Budget(dangling_tool_calls="placeholder")
    result = project(session, budget, "openai-chat")
    answer = "<<5>>" if answered else "[tool result missing: read_file(call_2)]"
    messages = result.payload["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant", "function"]
    assert messages[2] == {"role": "tool", "tool_call_id": "call_2", "content": answer}
    assert messages[3]["function_call"]["name"] == messages[4]["name"] == "legacy_3"
    assert carried("openai-chat", result.payload, memory) == (
        [1, 2, 5, 3, 4] if answered else [1, 2, 3, 4]
    )
    validate_payload_faithful("openai-chat", result.payload)
    for fmt in FORMATS:
        for each in (budget, Budget(), Budget(max_items=3)):
            test_invariants.hypothesis.inner_test(fmt, session, each)  # type: ignore[attr-defined]


@pytest.mark.parametrize("fmt", FORMATS)
@PROPS
@given(session=sessions(faithful=True), budget=budgets(), extra=st.integers(1, 200))
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


@pytest.mark.parametrize(
    ("turns", "limit", "kept", "grid", "fallback"),
    [
        # the grid point past the first turn: the tail from the model's turn does not fit
        ([("user", "<<1>> word "), ("assistant", "<<2>> word "), ("user", "<<3>> word ")],
         24, [3], (2, "tokens", 2, 14), False),
        # a pinned model turn opens every tail after the grid point: none fits, so the latest
        # one before it that does
        ([("user", "<<1>> "), ("assistant", "<<2>> "), ("user", "<<3>>"),
          ("assistant", "<<4>> ok", True), ("user", "<<5>> go")],
         21, [3, 4, 5], (10, "tokens", 2, 18), True),
    ],
)  # fmt: skip
def test_gemini_stable_cut_counts_its_filler(
    turns: list[tuple[Any, ...]],
    limit: int,
    kept: list[int],
    grid: tuple[int, str, int, int],
    fallback: bool,
) -> None:
    """Regression: a stable cut starts at the first candidate at or after its grid point, past
    the tight cut, which was taken to fit because a later tail always costs less. In gemini a
    tail opening on the model's side costs the filler user content too, and the stable cut
    went over the budget it was given (25 tokens for 24; 23 for 21), with no note. It now
    takes the first candidate there that fits, else the latest before it that does."""
    news = [
        NewItem(body=MessageItem(role=role, content=text), pinned=bool(pinned))
        for role, text, *pinned in turns
    ]
    session = Session(items=store(news), summary=None)
    tight = project(session, Budget(max_tokens=limit), "gemini")
    assert tight.report.projected_tokens <= limit
    result = project(session, Budget(max_tokens=limit, cut="stable", cut_step=0.1), "gemini")
    assert result.report.projected_tokens <= limit, result.payload
    assert carried("gemini", result.payload, session.items) == kept
    assert grid_note(result.report.notes) == grid
    said = any(n.startswith("stable: no boundary at or after") for n in result.report.notes)
    assert said is fallback
    test_invariants_with_a_stable_cut.hypothesis.inner_test(  # type: ignore[attr-defined]
        "gemini", session, Budget(max_tokens=limit), 0.1
    )


def gemini_filler_session(*, pinned_reasoning: bool) -> Session:
    """A short user turn (cheaper than gemini's ``[earlier conversation omitted]`` filler), a
    call (its arguments spaced out: stored, they count more than gemini sends, so the cut's
    estimate starts late) and its output, the newest request; and, with
    ``pinned_reasoning``, pinned reasoning gemini cannot carry before the call."""
    news = [NewItem(body=MessageItem(role="user", content="<<1>> hi"))]
    if pinned_reasoning:
        news.append(NewItem(body=ReasoningItem(summary=["<<2>> Read it first."]), pinned=True))
    call_seq = len(news) + 1
    news += [
        NewItem(
            body=FunctionCallItem(
                call_id="call_1",
                name="read_file",
                arguments='{"path":' + " " * 40 + f'"<<{call_seq}>>"}}',
            )
        ),
        NewItem(body=FunctionCallOutputItem(call_id="call_1", output=f"<<{call_seq + 1}>> ok")),
        NewItem(body=MessageItem(role="user", content=f"<<{call_seq + 2}>> Fix the bug.")),
    ]
    return Session(items=store(news), summary=None)


@pytest.mark.parametrize("pinned_reasoning", [False, True])
@pytest.mark.parametrize("limit", ["max_chars", "max_tokens"])
def test_gemini_cut_counts_its_filler(pinned_reasoning: bool, limit: str) -> None:
    """Regression (the recency property, once excluded for gemini): a tail that opens on the
    model's side gets gemini's filler user content, which may cost more than the user turn a
    longer tail would start with, so a longer tail can fit where a shorter one does not. The
    cut search assumed the shorter one always costs less: with the full payload's own usage as
    budget it kept only the newest request (a call and its output that fit were dropped), or,
    with pinned items gemini cannot carry leading the session, sent the mandatory part (with
    the filler, over the budget) saying that part alone exceeded it."""
    session = gemini_filler_session(pinned_reasoning=pinned_reasoning)
    full = project(session, Budget(), "gemini")
    assert full.payload["contents"][0]["parts"] == [{"text": "<<1>> hi"}]
    usage = {"max_chars": full.report.projected_chars, "max_tokens": full.report.projected_tokens}
    for extra in (0, 1, 40):
        result = project(session, Budget(**{limit: usage[limit] + extra}), "gemini")
        assert result.payload == full.payload, extra
        assert not any("mandatory" in n for n in result.report.notes), result.report.notes
    # one less: the mandatory part (the newest request; the pinned reasoning's call, its
    # output and so the filler); without the filler it fits
    result = project(session, Budget(**{limit: usage[limit] - 1}), "gemini")
    seqs = [it.seq for it in session.items]
    kept = seqs[2:] if pinned_reasoning else seqs[-1:]
    assert carried("gemini", result.payload, session.items) == kept
    opens_with_filler = result.payload["contents"][0]["parts"] == [{"text": GEMINI_FILLER}]
    assert opens_with_filler is pinned_reasoning
    mandatory_over = any("mandatory" in n for n in result.report.notes)
    assert mandatory_over is pinned_reasoning
    for budget in (Budget(**{limit: usage[limit]}), Budget(**{limit: usage[limit] - 1})):
        test_recency_is_monotone_and_tight.hypothesis.inner_test("gemini", session, budget, 1)  # type: ignore[attr-defined]
        test_invariants.hypothesis.inner_test("gemini", session, budget)  # type: ignore[attr-defined]


# -- cache stability (invariant 10) -------------------------------------------------------------


def regroups(memory: list[StoredItem], appended_from: int) -> bool:
    """Whether an item appended at or after ``appended_from`` is an output for a call that
    already had one before: it regroups that call, an edit of the past that invariant 10 does
    not cover."""
    spec = Spec(memory, Budget(), "canonical")
    old = {it.seq for it in memory[:appended_from]}
    for it in memory[appended_from:]:
        call = spec.call_seq.get(it.seq)
        if call in old and any(o in old for o in spec.outputs[call]):
            return True
    return False


def dumped(values: list[Any]) -> list[str]:
    return [json.dumps(v, ensure_ascii=False, default=str) for v in values]


@pytest.mark.parametrize("fmt", FORMATS)
@PROPS
@given(session=sessions(faithful=True), budget=budgets(), step=CUT_STEPS, data=st.data())
def test_cache_stability(
    fmt: str, session: Session, budget: Budget, step: float, data: st.DataObject
) -> None:
    """Invariant 10: while only appends happen and the grid point stays, a read's payload
    begins with the previous read's first ``stable_prefix`` messages, byte for byte; and the
    previous read's system prompt (anthropic) unless a system message was appended or moved
    into it."""
    budget = replace_budget(budget, cut="stable", cut_step=step)
    memory = session.items
    k1 = data.draw(st.integers(0, len(memory)), label="read at")
    k2 = data.draw(st.integers(k1, min(len(memory), k1 + 6)), label="then at")
    if regroups(memory[:k2], k1):
        return
    first = project(Session(items=memory[:k1], summary=session.summary), budget, fmt)
    second = project(Session(items=memory[:k2], summary=session.summary), budget, fmt)
    g1, g2 = grid_note(first.report.notes), grid_note(second.report.notes)
    assert g1 is not None and g2 is not None
    if (g1[0], g1[3]) != (g2[0], g2[3]):
        return  # a step: the promise starts again
    if k1 == k2:
        assert second.payload == first.payload
    sp = first.report.stable_prefix
    before, after = messages_of(fmt, first.payload), messages_of(fmt, second.payload)
    assert dumped(after[:sp]) == dumped(before[:sp]), (sp, k1, k2)
    appended_system = any(_role(it) in ("system", "developer") for it in memory[k1:k2])
    # ... nor moved one there: a user message appended right after an Anthropic ``role:
    # system`` message puts that message inside a turn, and its text joins ``system``
    moved_system = fmt == "anthropic" and bool(
        set(carried(fmt, second.payload, memory, part="system"))
        & set(carried(fmt, first.payload, memory, part="messages"))
    )
    if fmt == "anthropic" and not appended_system and not moved_system:
        assert dumped([second.payload.get("system")]) == dumped([first.payload.get("system")])
    if fmt == "gemini" and not appended_system:
        assert dumped([second.payload.get("system_instruction")]) == dumped(
            [first.payload.get("system_instruction")]
        )


def agent_turn(i: int) -> list[NewItem]:
    """One turn of a coding agent's loop: a request, a tool call, its output, a reply."""
    output = "".join(f"    x{k} = f({i}, {k})\n" for k in range(8))
    return [
        NewItem(body=MessageItem(role="user", content=f"Step {i}: fix module {i % 7}.")),
        NewItem(
            body=FunctionCallItem(
                call_id=f"call_{i}", name="read_file", arguments=f'{{"path": "m{i % 7}.py"}}'
            )
        ),
        NewItem(body=FunctionCallOutputItem(call_id=f"call_{i}", output=output)),
        NewItem(body=MessageItem(role="assistant", content=f"Module {i % 7} fixed at step {i}.")),
    ]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("tier1", [None, 3])
def test_agent_loop_keeps_its_prefix(fmt: str, tier1: int | None) -> None:
    """An agent loop far past its budget: the grid point moves at most once per step of
    growth, between moves every read repeats the previous read's stable prefix, and most
    reads keep nearly all of the previous prompt as their prefix (a tight cut keeps none)."""
    from tests.domain.strategies import store

    news = [NewItem(body=MessageItem(role="system", content="You are a coding agent."))]
    stable = Budget(max_tokens=3000, cut="stable", max_recent_tool_results=tier1)
    previous: ProjectedContext | None = None
    moves = past = kept90 = 0
    first_end = None
    for i in range(70):
        news += agent_turn(i)
        memory = store(news)
        result = project(Session(items=memory, summary=None), stable, fmt)
        grid = Grid(memory, stable)
        note = grid_note(result.report.notes)
        assert note is not None
        if previous is not None:
            old = grid_note(previous.report.notes)
            assert old is not None
            before, after = messages_of(fmt, previous.payload), messages_of(fmt, result.payload)
            if (old[0], old[3]) == (note[0], note[3]):
                sp = previous.report.stable_prefix
                assert dumped(after[:sp]) == dumped(before[:sp])
            elif old[0] != note[0]:
                moves += 1
            if result.report.dropped_items:
                past += 1
                shared = 0
                for a, b in zip(dumped(before), dumped(after), strict=False):
                    if a != b:
                        break
                    shared += len(a)
                kept90 += shared >= 0.9 * sum(map(len, dumped(before)))
        if result.report.dropped_items and first_end is None:
            first_end = grid.end
        previous = result
    assert first_end is not None and past > 30
    # once per grid point crossed since the first drop (the clock moves there), plus that one:
    # growth of 4414 -> 8126 on a 750 grid crosses 5 points, not (8126 - 4414) // 750 = 4
    assert moves <= grid.end // grid.step - first_end // grid.step + 1, moves
    # gemini charges a functionResponse as the JSON of its response (every newline of this
    # loop's outputs escaped), ~11% over the stored count the grid runs on: the tail does not
    # fit at the clock, the cut steps ahead of it once per step and Tier 1 follows at the next
    # read, two prefix breaks per step where the other formats have one (22 of 33 reads)
    assert kept90 >= (0.6 if fmt == "gemini" else 0.7) * past, (kept90, past)


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
@given(session=sessions(max_turns=5, faithful=True), budget=budgets(), data=st.data())
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


def _same_call(a: FunctionCallItem, b: FunctionCallItem) -> bool:
    def value(arguments: str) -> Any:
        try:
            return json.loads(arguments)
        except ValueError:
            return arguments

    return a.name == b.name and value(a.arguments) == value(b.arguments)


@pytest.mark.parametrize("fmt", ["canonical", "openai-chat", "openai-responses", "anthropic"])
@PROPS
@given(session=repeated_call_sessions(), keep=st.integers(0, 6))
def test_tier1_clears_stale_outputs_first(fmt: str, session: Session, keep: int) -> None:
    """Tier 1 keeps the text of the N newest *current* outputs, then of the newest stale ones:
    an output is stale when a later output answers another call of the same tool with the
    same arguments (JSON-equal). It clears as many as before (all but N), the stale ones
    first, and the report counts them; the invariants the tier must keep still hold."""
    memory = session.items
    calls = {it.body.call_id: it.body for it in memory if isinstance(it.body, FunctionCallItem)}
    outputs = [it for it in memory if isinstance(it.body, FunctionCallOutputItem)]
    stale = {
        o.seq
        for o in outputs
        for later in outputs
        if later.seq > o.seq
        and later.body.call_id != o.body.call_id
        and _same_call(calls[later.body.call_id], calls[o.body.call_id])
    }
    ranked = sorted(outputs, key=lambda o: (o.seq in stale, -o.seq))
    keeps_text = {o.seq for o in ranked[:keep]}

    result = project(session, Budget(max_recent_tool_results=keep), fmt)
    notes = result.report.notes
    n_cleared = len(outputs) - len(keeps_text)
    n_stale = len(stale - keeps_text)
    if n_cleared:
        assert f"tier1: cleared {n_cleared} tool results, kept {len(keeps_text)}" in notes
    assert ([f"tier1: cleared {n_stale} stale"] if n_stale else []) == [
        n for n in notes if n.endswith(" stale")
    ]
    if fmt == "canonical":
        shown = {w["seq"]: w for w in result.payload["items"] if "seq" in w}
        for o in outputs:
            cleared = str(shown[o.seq]["output"]).startswith("[tool result cleared: ")
            assert cleared == (o.seq not in keeps_text), (o.seq, stale, keeps_text)
    else:
        validate(fmt, result.payload)
    # an honest report, in order, deterministic
    tokens, chars = recount(fmt, result.payload, result.report.tokenizer)
    assert (result.report.projected_tokens, result.report.projected_chars) == (tokens, chars)
    seqs = carried(fmt, result.payload, memory)
    assert seqs == sorted(seqs)
    again = project(session, Budget(max_recent_tool_results=keep), fmt)
    assert json.dumps(again.payload, default=str) == json.dumps(result.payload, default=str)


@pytest.mark.parametrize("fmt", ["openai-chat", "anthropic"])
@PROPS
@given(
    session=repeated_call_sessions(),
    keep=st.integers(0, 3),
    step=CUT_STEPS,
    data=st.data(),
)
def test_stale_first_keeps_the_stable_prefix(
    fmt: str, session: Session, keep: int, step: float, data: st.DataObject
) -> None:
    """With ``cut: stable``, Tier 1 judges staleness before its clock point only: an append
    that makes an output stale changes nothing the previous read promised (its
    ``stable_prefix``) until the grid point moves."""
    memory = session.items
    total = sum(it.tokens for it in memory)
    share = data.draw(st.sampled_from([0.25, 0.5, 1.0, 2.0]), label="budget share")
    budget = Budget(
        max_tokens=max(40, int(total * share)),
        cut="stable",
        cut_step=step,
        max_recent_tool_results=keep,
    )
    k1 = data.draw(st.integers(1, len(memory)), label="read at")
    k2 = data.draw(st.integers(k1, len(memory)), label="then at")
    if regroups(memory[:k2], k1):
        return
    first = project(Session(items=memory[:k1], summary=None), budget, fmt)
    second = project(Session(items=memory[:k2], summary=None), budget, fmt)
    g1, g2 = grid_note(first.report.notes), grid_note(second.report.notes)
    assert g1 is not None and g2 is not None
    if (g1[0], g1[3]) != (g2[0], g2[3]):
        return  # a step: the promise starts again
    sp = first.report.stable_prefix
    before, after = messages_of(fmt, first.payload), messages_of(fmt, second.payload)
    assert dumped(after[:sp]) == dumped(before[:sp]), (sp, k1, k2)


def test_stale_first_keeps_the_stable_prefix_on_every_read_pair() -> None:
    """The same promise, checked on every pair of reads of one agent's session that reads the
    same file again and again (random sessions rarely put a successor just past the clock
    point, where judging staleness on every item would break the stable prefix)."""
    same = '{"path": "a.py", "n": 1}'
    bodies: list[Any] = [MessageItem(role="user", content="<<1>> read it")]
    for call_ids, answered in (
        ([2], [2]),
        ([5, 6, 7], [5, 6, 7]),
        ([11, 12, 13], [13]),
        ([15], [15]),
        ([17], [17]),
    ):
        if call_ids[0] > 2:
            bodies.append(MessageItem(role="user", content=f"<<{len(bodies) + 1}>> again"))
        for c in call_ids:
            name = "run" if c == 6 else "read_file"
            bodies.append(FunctionCallItem(call_id=f"call_{c}", name=name, arguments=same))
        for c in answered:
            bodies.append(
                FunctionCallOutputItem(call_id=f"call_{c}", output=f"<<{len(bodies) + 1}>>")
            )
    memory = store([NewItem(body=b) for b in bodies])
    total = sum(it.tokens for it in memory)
    for keep in range(4):
        for step in (0.1, 0.25, 0.5):
            for share in (0.5, 1.0, 2.0):
                budget = Budget(
                    max_tokens=int(total * share),
                    cut="stable",
                    cut_step=step,
                    max_recent_tool_results=keep,
                )
                reads = [
                    project(Session(items=memory[:k], summary=None), budget, "openai-chat")
                    for k in range(len(memory) + 1)
                ]
                for k1 in range(1, len(memory) + 1):
                    for k2 in range(k1, len(memory) + 1):
                        if regroups(memory[:k2], k1):
                            continue
                        first, second = reads[k1], reads[k2]
                        g1 = grid_note(first.report.notes)
                        g2 = grid_note(second.report.notes)
                        assert g1 is not None and g2 is not None
                        if (g1[0], g1[3]) != (g2[0], g2[3]):
                            continue
                        sp = first.report.stable_prefix
                        before = messages_of("openai-chat", first.payload)[:sp]
                        after = messages_of("openai-chat", second.payload)[:sp]
                        assert dumped(after) == dumped(before), (keep, step, share, k1, k2)
