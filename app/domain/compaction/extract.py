"""Mechanical facts drawn from items: goal, tools called, failures and how they were resolved,
test results, files, and what the assistant concluded: decisions and open questions.

Used by the ``structured`` policy (for everything) and by the ``llm`` policy (for the facts an
LLM should not be trusted to copy: files read and modified, tool-call counts).

What the assistant concluded is found by a documented heuristic (no model): its messages' text
is split into sentences (at line breaks and after ``.``, ``!``, ``?``, list bullets taken off),
and a sentence is

- a *decision* when it names a choice (``decided``, ``decision``, ``chose``, ``going with``,
  ``settled on``, ``opted for``, ``I'll use`` / ``we'll use`` / ``let's use``, ``instead of``,
  ``rather than``, ``making it``, ``switching to``) or states a conclusion (it starts with ``the cause``, ``the root cause``,
  ``the problem/issue/bug/error is/was``, ``it turns out``, ``conclusion``, ``this means``,
  ``this confirms``, ``the fix is/was``, ``therefore``);
- an *open question* when it ends with ``?`` or starts with ``TODO``, ``open question``,
  ``unclear``, ``not sure``, ``unknown``, ``to check``;
- a *resolution* of the newest unresolved error it shares a word with (of four letters or
  more, common ones such as ``failed`` aside) when it says so (``fixed``, ``resolved``, ``the
  fix``, ``works now``, ``pass now``, ``passes now``; a cause found is a conclusion).

A failure (see ``_failure_detail``) is also resolved when a later call described the same way
(the same command, the same tool on the same file) succeeds. Every entry names the ``seq`` it
came from: ``TEXT (seq N)``; an error's resolution follows it: ``...; resolved at seq M:
HOW``. A failure that happens again after its resolution is open again, at its newest seq.

Invariants:
- pure and deterministic: the same items give the same ``ExtractedFacts``;
- never raises on content: malformed tool arguments, odd outputs and huge texts are tolerated
  (arguments that are not a JSON object simply yield no files);
- every string it returns is single-line-ish and bounded (long texts are shortened with ``…``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from app.domain.items import (
    FunctionCallItem,
    FunctionCallOutputItem,
    MessageItem,
    StoredItem,
    parts_text,
)

# Sentences of an assistant's text, and what the heuristic (module docstring) makes of them.
_SENTENCE_SPLIT_RE = re.compile(r"(?<=[.!?])\s+|\n+")
_BULLET_RE = re.compile(r"^(?:[-*•>]+|\d+[.)])\s+")
_DECISION_RE = re.compile(
    r"\b(?:decided|decision|chose|choose|going with|go with|settled on|opted for|opt for|"
    r"(?:i|we)(?:'ll| will) use|let's use|instead of|rather than|making it|"
    r"switch(?:ing)? to)\b",
    re.IGNORECASE,
)
_CONCLUSION_RE = re.compile(
    r"^(?:so,?\s+)?(?:the (?:root )?cause\b|the (?:problem|issue|bug|error) (?:is|was)\b|"
    r"it turns out\b|turns out\b|conclusion\b|in conclusion\b|this (?:means|confirms)\b|"
    r"the fix (?:is|was)\b|therefore\b)",
    re.IGNORECASE,
)
_OPEN_RE = re.compile(
    r"^(?:todo\b|open question\b|unclear\b|not sure\b|unknown\b|to check\b)", re.IGNORECASE
)
_RESOLVED_RE = re.compile(
    r"\b(?:fixed|resolved|the fix|works? now|pass(?:es)? now|now pass(?:es)?)\b",
    re.IGNORECASE,
)
# Words too common in failures to tie a statement to one (``_shares_a_word``).
_COMMON_WORDS = frozenset(
    {"failed", "error", "exit", "code", "with", "that", "this", "from", "file", "none", "true"}
)
_WORD_RE = re.compile(r"[A-Za-z]{4,}")
MIN_SENTENCE_CHARS = 12

__all__ = ["ExtractedFacts", "classify_tool", "extract_facts", "message_text", "shorten"]

GOAL_MAX_CHARS = 2000
ENTRY_MAX_CHARS = 300
COMMAND_MAX_CHARS = 120

ToolKind = Literal["read", "write", "other"]

# Verbs recognised in a tool's name (split on _ - . and camelCase) or in a one-word
# ``command``/``action``/``operation`` argument (editor-style tools: {"command": "view"}).
_READ_VERBS = frozenset(
    {"read", "grep", "find", "open", "cat", "view", "search", "glob", "ls", "list", "show", "get"}
)
_WRITE_VERBS = frozenset(
    {
        "write", "edit", "create", "delete", "remove", "rm", "move", "mv", "rename", "patch",
        "apply", "replace", "insert", "append", "update", "save", "modify", "touch", "mkdir",
        "str_replace", "undo_edit", "copy", "cp",
    }
)  # fmt: skip
_VERB_KEYS = ("command", "action", "operation", "op", "mode")
_PATH_KEYS = (
    "path", "file", "file_path", "filepath", "filename", "target", "target_file",
    "source", "destination", "dest", "src", "dst", "old_path", "new_path", "notebook_path",
)  # fmt: skip
_PATH_LIST_KEYS = ("paths", "files", "file_paths", "filenames", "targets")
_COMMAND_KEYS = ("command", "cmd", "script", "shell")
_PATCH_KEYS = ("patch", "input", "diff")

_PATCH_FILE_RE = re.compile(
    r"^\*\*\* (?:Update|Add|Delete) File: (.+?)\s*$|^\+\+\+ (?:b/)?(.+?)\s*$|"
    r"^\*\*\* Move to: (.+?)\s*$",
    re.MULTILINE,
)
_EXIT_RE = re.compile(
    r"(?:exit(?:ed)?[ _-]?(?:with[ _])?(?:code|status)|return[ _]?code|returncode)"
    r"[\"']?\s*[:=]?\s*(-?\d+)",
    re.IGNORECASE,
)
_TRACEBACK = "Traceback (most recent call last):"
_EXCEPTION_LINE_RE = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning)\b.*")
_PYTEST_FAILED_RE = re.compile(r"^(?:FAILED|ERROR) \S.*")
_PYTEST_E_RE = re.compile(r"^E {2,}(\S.*)")
_ERROR_LINE_RE = re.compile(
    r"^(?:error|fatal|ERROR|FATAL|Error)(?:\[\w+\])?:\s*\S.*|"
    r"^npm ERR!.*|^panic:.*|.*\b\w+(?:Error|Exception): \S.*|"
    r".*(?:command not found|No such file or directory|Permission denied).*"
)
_TEST_COUNT_RE = re.compile(
    r"\b\d+ (?:passed|failed|errors?|skipped|xfailed|xpassed|deselected)\b", re.IGNORECASE
)
_UNITTEST_RAN_RE = re.compile(r"^Ran \d+ tests? in [\d.]+s$")
_DECORATION_RE = re.compile(r"^[=\-_*\s]+|[=\-_*\s]+$")


@dataclass(slots=True)
class ExtractedFacts:
    goal: str | None = None
    user_requests: list[str] = field(default_factory=list)
    tools_called: dict[str, int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)  # each ``... (seq N)[; resolved at ...]``
    test_results: list[str] = field(default_factory=list)
    read_files: list[str] = field(default_factory=list)
    modified_files: list[str] = field(default_factory=list)
    decisions: list[str] = field(default_factory=list)  # each ``... (seq N)``
    open_questions: list[str] = field(default_factory=list)  # each ``... (seq N)``


@dataclass(slots=True)
class _Failure:
    """A failure seen so far: its text, the seq it was last seen at, how it was resolved."""

    what: str
    text: str
    seq: int
    resolution: str | None = None

    def entry(self) -> str:
        out = f"{self.text} (seq {self.seq})"
        return out if self.resolution is None else f"{out}; {self.resolution}"


def _sentences(text: str) -> list[str]:
    out: list[str] = []
    for raw in _SENTENCE_SPLIT_RE.split(text):
        sentence = _BULLET_RE.sub("", raw.strip()).strip()
        if len(sentence) >= MIN_SENTENCE_CHARS:
            out.append(sentence)
    return out


def _shares_a_word(sentence: str, failure: _Failure) -> bool:
    """Whether a statement names something of a failure (a word of four letters or more,
    common ones aside): what ties "all tests pass now" to a failed test run and not to a
    file that could not be read."""
    words = {w.lower() for w in _WORD_RE.findall(sentence)} - _COMMON_WORDS
    return any(w.lower() in words for w in _WORD_RE.findall(failure.text))


def _with_seq(text: str, seq: int) -> str:
    return f"{shorten(text)} (seq {seq})"


def shorten(text: str, limit: int = ENTRY_MAX_CHARS) -> str:
    """Whitespace collapsed to single spaces, cut to ``limit`` chars with a trailing ``…``."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def message_text(body: MessageItem) -> str:
    return parts_text(body.content)


def _words(name: str) -> list[str]:
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)
    return [w for w in re.split(r"[^A-Za-z0-9]+", spaced.lower()) if w]


def _verb_kind(words: Iterable[str]) -> ToolKind:
    words = list(words)
    if any(w in _WRITE_VERBS for w in words):
        return "write"
    if any(w in _READ_VERBS for w in words):
        return "read"
    return "other"


def classify_tool(name: str, arguments: object) -> ToolKind:
    """Whether a call reads files, writes them, or neither.

    A one-word ``command``/``action`` argument wins over the tool's name (an editor tool's
    ``{"command": "view"}`` reads, ``{"command": "str_replace"}`` writes); among verbs, writing
    wins over reading (what changed matters more than what was looked at).
    """
    if isinstance(arguments, dict):
        for key in _VERB_KEYS:
            value = arguments.get(key)
            if isinstance(value, str) and value and " " not in value.strip():
                verb = value.strip().lower()
                if verb in _WRITE_VERBS:
                    return "write"
                if verb in _READ_VERBS:
                    return "read"
    if name.lower() in _WRITE_VERBS:
        return "write"
    return _verb_kind(_words(name))


def _parse_arguments(arguments: str) -> object:
    try:
        return json.loads(arguments) if arguments.strip() else {}
    except ValueError:
        return None


def _clean_path(value: object) -> str | None:
    if not isinstance(value, str):
        return None
    path = value.strip()
    if not path or len(path) > 1024 or "\n" in path:
        return None
    return path


def _paths_in(arguments: object) -> list[str]:
    if not isinstance(arguments, dict):
        return []
    found: list[str] = []
    for key in _PATH_KEYS:
        path = _clean_path(arguments.get(key))
        if path:
            found.append(path)
    for key in _PATH_LIST_KEYS:
        values = arguments.get(key)
        if isinstance(values, list):
            found.extend(p for p in (_clean_path(v) for v in values) if p)
    for key in _PATCH_KEYS:
        patch = arguments.get(key)
        if isinstance(patch, str) and ("*** " in patch or "+++ " in patch):
            for match in _PATCH_FILE_RE.finditer(patch):
                path = _clean_path(next(g for g in match.groups() if g))
                if path and path != "/dev/null":
                    found.append(path)
    return found


def _describe_call(call: FunctionCallItem | None, arguments: object) -> str:
    if call is None:
        return "a tool"
    if isinstance(arguments, dict):
        for key in _COMMAND_KEYS:
            value = arguments.get(key)
            if isinstance(value, list) and all(isinstance(v, str) for v in value):
                value = " ".join(value)
            if isinstance(value, str) and value.strip():
                command = value.strip()
                if " " in command or command.lower() not in _READ_VERBS | _WRITE_VERBS:
                    return f"`{shorten(command, COMMAND_MAX_CHARS)}`"
        paths = _paths_in(arguments)
        if paths:
            return f"{call.name}({shorten(paths[0], COMMAND_MAX_CHARS)})"
    return call.name


def _failure_detail(output: str, kind: ToolKind) -> str | None:
    """The most telling failure line of a tool output, or ``None`` if it looks successful."""
    lines = [line.rstrip() for line in output.splitlines()]
    if kind == "read":
        # What a reading tool returns is file text, which may well contain "Traceback" or
        # "ValueError: ...": only a short answer that itself starts with an error is a failure.
        first = next((line.strip() for line in lines if line.strip()), "")
        if len(output) < 300 and _ERROR_LINE_RE.match(first):
            return shorten(first)
        return None
    exit_codes = [int(m.group(1)) for m in _EXIT_RE.finditer(output)]
    exit_code = next((c for c in reversed(exit_codes) if c != 0), None)
    detail: str | None = None
    if _TRACEBACK in output:
        start = next(i for i, line in enumerate(lines) if _TRACEBACK in line)
        exception_lines = [line for line in lines[start:] if _EXCEPTION_LINE_RE.match(line)]
        if exception_lines:
            detail = exception_lines[-1]
    if detail is None:
        for pattern in (_PYTEST_FAILED_RE, _PYTEST_E_RE):
            match = next((m for m in map(pattern.match, lines) if m), None)
            if match:
                detail = match.group(1) if match.groups() else match.group(0)
                break
    if detail is None:
        detail = next((line for line in lines if _ERROR_LINE_RE.match(line)), None)
    if exit_code is None and detail is None:
        return None
    parts = []
    if exit_code is not None:
        parts.append(f"exit code {exit_code}")
    if detail:
        parts.append(detail.strip())
    return shorten("; ".join(parts))


def _test_lines(output: str) -> list[str]:
    lines = [line.strip() for line in output.splitlines()]
    found: list[str] = []
    for index, line in enumerate(lines):
        if _UNITTEST_RAN_RE.match(line):
            verdict = next((x for x in lines[index + 1 :] if x), "")
            if verdict.startswith(("OK", "FAILED")):
                found.append(f"{line}: {verdict}")
            continue
        if len(_TEST_COUNT_RE.findall(line)) and (
            "passed" in line.lower() or "failed" in line.lower()
        ):
            cleaned = _DECORATION_RE.sub("", line)
            if cleaned and len(cleaned) <= 200:
                found.append(cleaned)
    # A runner prints a progress line per file and then the summary: the last line is the
    # summary (pytest, jest, cargo). Keep only it.
    return found[-1:]


def _add_unique(target: list[str], values: Iterable[str]) -> None:
    for value in values:
        if value not in target:
            target.append(value)


def _assistant_statements(
    text: str, seq: int, facts: ExtractedFacts, failures: dict[str, _Failure]
) -> None:
    """Decisions, open questions and resolutions in an assistant's text (module docstring)."""
    for sentence in _sentences(text):
        if sentence.endswith("?") or _OPEN_RE.match(sentence):
            _add_unique(facts.open_questions, [_with_seq(sentence, seq)])
            continue
        if _RESOLVED_RE.search(sentence):
            open_failure = next(
                (
                    f
                    for f in reversed(failures.values())
                    if f.resolution is None and _shares_a_word(sentence, f)
                ),
                None,
            )
            if open_failure is not None:
                open_failure.resolution = f"resolved at seq {seq}: {shorten(sentence)}"
                continue
        if _DECISION_RE.search(sentence) or _CONCLUSION_RE.match(sentence):
            _add_unique(facts.decisions, [_with_seq(sentence, seq)])


def extract_facts(items: Sequence[StoredItem]) -> ExtractedFacts:
    """Facts from ``items`` in seq order; see the module docstring for the invariants."""
    facts = ExtractedFacts()
    calls: dict[str, tuple[FunctionCallItem, object, ToolKind]] = {}
    failures: dict[str, _Failure] = {}  # by text, in the order first seen
    for item in items:
        body = item.body
        if isinstance(body, MessageItem) and body.role == "user":
            text = message_text(body).strip()
            if text:
                if facts.goal is None:
                    facts.goal = shorten(text, GOAL_MAX_CHARS)
                facts.user_requests.append(shorten(text))
        elif isinstance(body, MessageItem) and body.role == "assistant":
            _assistant_statements(message_text(body), item.seq, facts, failures)
        elif isinstance(body, FunctionCallItem):
            facts.tools_called[body.name] = facts.tools_called.get(body.name, 0) + 1
            arguments = _parse_arguments(body.arguments)
            kind = classify_tool(body.name, arguments)
            calls[body.call_id] = (body, arguments, kind)
            if kind == "read":
                _add_unique(facts.read_files, _paths_in(arguments))
            elif kind == "write":
                _add_unique(facts.modified_files, _paths_in(arguments))
        elif isinstance(body, FunctionCallOutputItem):
            call, arguments, kind = calls.get(body.call_id, (None, None, "other"))
            what = _describe_call(call, arguments)
            output = parts_text(body.output)
            failure = _failure_detail(output, kind)
            # Anthropic's tool_result carries an explicit error flag: trust it when present.
            if failure is None and getattr(body, "is_error", None):
                first = next((ln.strip() for ln in output.splitlines() if ln.strip()), "")
                failure = shorten(first or "the tool reported an error")
            tests = _test_lines(output) if kind != "read" else []
            if failure:
                text = f"{what} failed: {failure}"
                seen = failures.pop(text, None)
                if seen is None or seen.resolution is not None:
                    seen = _Failure(what=what, text=text, seq=item.seq)
                failures[text] = seen  # re-inserted: the newest failure is last
            elif what != "a tool":
                # a call described the same way succeeded: what failed before works now
                how = f"{what} succeeded" + (f" ({tests[-1]})" if tests else "")
                for seen in failures.values():
                    if seen.what == what and seen.resolution is None:
                        seen.resolution = f"resolved at seq {item.seq}: {how}"
            _add_unique(facts.test_results, [f"{what}: {t}" for t in tests])
    facts.errors = [f.entry() for f in sorted(failures.values(), key=lambda f: f.seq)]
    return facts
