"""Forgiving parsing of an LLM's summary answer.

Models are asked for one JSON object with the keys ``goal``, ``completed``, ``pending``,
``decisions``, ``errors``, ``test_results`` and ``open_questions``. What comes back varies:
code fences, prose around the JSON, a string where a list was asked, ``null``, numbers or
objects inside lists, trailing commas, or no JSON at all.

Invariants of ``parse_llm_summary``:
- it never raises, whatever the text;
- ``structured`` is true exactly when a JSON object with at least one known key was found; then
  every list field is a list of non-empty strings and ``goal`` is a non-empty string or ``None``;
- otherwise the stripped answer is kept whole in ``text`` and a note says why, so a model that
  answers in prose degrades compaction, never breaks it.
"""

from __future__ import annotations

import json
import re
from typing import cast

from pydantic import BaseModel, ConfigDict, Field, JsonValue

__all__ = ["LLM_KEYS", "ParsedSummary", "parse_llm_summary"]

LLM_LIST_KEYS = ("completed", "pending", "decisions", "errors", "test_results", "open_questions")
LLM_KEYS = ("goal", *LLM_LIST_KEYS)

# Names models reach for instead of the ones asked; mapped, never required.
_ALIASES: dict[str, str] = {
    "objective": "goal",
    "task": "goal",
    "goals": "goal",
    "done": "completed",
    "completed_tasks": "completed",
    "progress": "completed",
    "next_steps": "pending",
    "todo": "pending",
    "todos": "pending",
    "remaining": "pending",
    "key_decisions": "decisions",
    "failures": "errors",
    "issues": "errors",
    "tests": "test_results",
    "test_status": "test_results",
    "questions": "open_questions",
    "unresolved": "open_questions",
}
_TRAILING_COMMA_RE = re.compile(r",(\s*[}\]])")


class ParsedSummary(BaseModel):
    """An LLM answer, as sections when it held JSON, else as text."""

    model_config = ConfigDict(extra="forbid")

    structured: bool
    goal: str | None = None
    completed: list[str] = Field(default_factory=list)
    pending: list[str] = Field(default_factory=list)
    decisions: list[str] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list)
    test_results: list[str] = Field(default_factory=list)
    open_questions: list[str] = Field(default_factory=list)
    text: str = Field(description="the model's answer, stripped")
    notes: list[str] = Field(default_factory=list)


def _scalar_text(value: JsonValue) -> str:
    if isinstance(value, str):
        return value.strip()
    if value is None:
        return ""
    if isinstance(value, bool | int | float):
        return json.dumps(value)
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _as_list(value: JsonValue) -> list[str]:
    if value is None:
        return []
    if isinstance(value, list):
        entries = [_scalar_text(v) for v in value]
    elif isinstance(value, dict):
        entries = [f"{k}: {_scalar_text(v)}" for k, v in value.items()]
    else:
        entries = [_scalar_text(value)]
    out: list[str] = []
    for entry in entries:
        if entry and entry not in out:
            out.append(entry)
    return out


def _as_goal(value: JsonValue) -> str | None:
    if isinstance(value, list):
        text = "; ".join(t for t in (_scalar_text(v) for v in value) if t)
    else:
        text = _scalar_text(value)
    return text or None


def _decode_objects(text: str) -> list[dict[str, JsonValue]]:
    """Top-level JSON objects in ``text``, left to right (inner objects are skipped)."""
    decoder = json.JSONDecoder()
    found: list[dict[str, JsonValue]] = []
    index = text.find("{")
    while index != -1:
        try:
            value, end = decoder.raw_decode(text, index)
        except ValueError:
            index = text.find("{", index + 1)
            continue
        if isinstance(value, dict):
            found.append(cast(dict[str, JsonValue], value))
        index = text.find("{", end)
    return found


def _normalise_keys(obj: dict[str, JsonValue]) -> dict[str, JsonValue]:
    out: dict[str, JsonValue] = {}
    for raw_key, value in obj.items():
        key = raw_key.strip().lower().replace(" ", "_").replace("-", "_")
        key = _ALIASES.get(key, key)
        if key in LLM_KEYS and key not in out:
            out[key] = value
        elif key == "summary":
            out.setdefault("summary", value)
    return out


def _pick_object(text: str) -> dict[str, JsonValue] | None:
    for candidate in (text, _TRAILING_COMMA_RE.sub(r"\1", text)):
        for obj in _decode_objects(candidate):
            keys = _normalise_keys(obj)
            if any(k in LLM_KEYS for k in keys) or isinstance(keys.get("summary"), str):
                return keys
            # A wrapper such as {"result": {...}} or {"summary": {...}}: look one level down.
            for inner in obj.values():
                if isinstance(inner, dict):
                    inner_keys = _normalise_keys(inner)
                    if any(k in LLM_KEYS for k in inner_keys):
                        return inner_keys
    return None


def parse_llm_summary(text: str) -> ParsedSummary:
    """Read an LLM's summary answer; see the module docstring for the invariants."""
    stripped = (text or "").strip()
    if not stripped:
        return ParsedSummary(
            structured=False, text="", notes=["the model returned an empty answer"]
        )
    obj = _pick_object(stripped)
    if obj is None:
        return ParsedSummary(
            structured=False,
            text=stripped,
            notes=["the model's answer held no JSON summary object; its text is the summary as-is"],
        )
    if not any(k in LLM_KEYS for k in obj):
        summary = cast(str, obj["summary"]).strip()
        return ParsedSummary(
            structured=False,
            text=summary or stripped,
            notes=["the model answered with a single 'summary' string; it is the summary as-is"],
        )
    notes: list[str] = []
    if not stripped.startswith("{") or not stripped.endswith("}"):
        notes.append("text around the model's JSON object was ignored")
    for key in LLM_LIST_KEYS:
        value = obj.get(key)
        if value is not None and not isinstance(value, list):
            notes.append(f"'{key}' was not a list; it was read as one")
    missing = [k for k in LLM_KEYS if k not in obj]
    if missing:
        notes.append("the model's JSON lacked " + ", ".join(missing))
    return ParsedSummary(
        structured=True,
        goal=_as_goal(obj.get("goal")),
        **{key: _as_list(obj.get(key)) for key in LLM_LIST_KEYS},
        text=stripped,
        notes=notes,
    )
