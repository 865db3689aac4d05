"""Structured and window compaction: extraction from a coding-agent transcript, rendering,
and what is carried from one compaction to the next."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime

import pytest

from app.domain.compaction import (
    CompactResult,
    CutPlan,
    SummarySections,
    classify_tool,
    extract_facts,
    plan_cut,
    render_summary,
    structured_compaction,
    window_compaction,
)
from app.domain.items import (
    CanonicalItem,
    FunctionCallItem,
    FunctionCallOutputItem,
    MessageItem,
    ReasoningItem,
    StoredItem,
)
from app.domain.tokens import item_tokens

T0 = datetime(2025, 1, 1, tzinfo=UTC)


def stored(bodies: Sequence[CanonicalItem], *, first_seq: int = 1) -> list[StoredItem]:
    return [
        StoredItem(
            body=body,
            id=f"i{first_seq + index}",
            seq=first_seq + index,
            tokens=item_tokens(body, "approx"),
            chars=0,
            pinned=False,
            metadata={},
            created_at=T0,
        )
        for index, body in enumerate(bodies)
    ]


def user(text: str) -> MessageItem:
    return MessageItem(role="user", content=text)


def assistant(text: str) -> MessageItem:
    return MessageItem(role="assistant", content=text)


_calls = 0


def tool(name: str, arguments: dict[str, object], output: str) -> list[CanonicalItem]:
    global _calls
    _calls += 1
    call_id = f"call_{_calls}"
    return [
        FunctionCallItem(call_id=call_id, name=name, arguments=json.dumps(arguments)),
        FunctionCallOutputItem(call_id=call_id, output=output),
    ]


DATES_PY = """def parse_range(text):
    start, end = text.split("..")
    if int(end) < int(start):
        raise ValueError("bad range: end before start")
    return range(int(start), int(end))
"""
PYTEST_FAIL = """============================= test session starts ==============================
collected 16 items

tests/test_dates.py ..F.F...........                                       [100%]

=================================== FAILURES ===================================
_________________________________ test_range ___________________________________
    def test_range():
>       assert list(parse_range("1..3")) == [1, 2, 3]
E       assert [1, 2] == [1, 2, 3]
=========================== short test summary info ============================
FAILED tests/test_dates.py::test_range - assert [1, 2] == [1, 2, 3]
FAILED tests/test_dates.py::test_range_single - assert [] == [5]
========================= 2 failed, 14 passed in 0.31s =========================
Exit code: 1"""
TRACEBACK = """Traceback (most recent call last):
  File "<string>", line 1, in <module>
ModuleNotFoundError: No module named 'dateutil'
exit status 1"""
PATCH = """*** Begin Patch
*** Update File: utils/helpers.py
@@
-def clamp(x):
+def clamp(x, lo=0):
*** Add File: tests/test_helpers.py
+def test_clamp(): ...
*** End Patch"""


def coding_session() -> list[CanonicalItem]:
    return [
        MessageItem(role="system", content="You are a careful coding agent."),
        user("Fix the failing tests in utils/dates.py: parse_range drops the last element."),
        ReasoningItem(summary=["Look at the parser first."]),
        *tool("read_file", {"path": "utils/dates.py"}, DATES_PY),
        *tool("grep", {"pattern": "parse_range", "path": "src"}, "src/api.py:3: parse_range"),
        *tool("bash", {"command": "pytest -q tests/test_dates.py"}, PYTEST_FAIL),
        assistant("The range end is exclusive; making it inclusive."),
        *tool(
            "str_replace_based_edit_tool",
            {
                "command": "str_replace",
                "path": "utils/dates.py",
                "old_str": "e)",
                "new_str": "e+1)",
            },
            "The file utils/dates.py has been edited.",
        ),
        *tool(
            "str_replace_based_edit_tool", {"command": "view", "path": "utils/helpers.py"}, "..."
        ),
        *tool("apply_patch", {"input": PATCH}, "Done!"),
        *tool("edit_file", {"file_path": "README.md", "content": "..."}, "ok"),
        *tool("move_file", {"source": "old_notes.md", "destination": "docs/notes.md"}, "moved"),
        *tool("bash", {"command": "python -c 'import dateutil'"}, TRACEBACK),
        *tool("bash", {"command": "pytest -q"}, "................\n16 passed in 0.40s"),
        *tool("read_file", {"path": "missing.py"}, "Error: file not found: missing.py"),
        assistant("All 16 tests pass now."),
        user("Great. Now update the changelog."),
        assistant("On it."),
    ]


def test_extracts_facts_from_a_coding_agent_transcript() -> None:
    items = stored(coding_session())
    plan = plan_cut(items)
    assert plan.tail_start_seq == items[-2].seq  # the newest user turn stays
    facts = extract_facts(plan.compacted)
    assert facts.goal == (
        "Fix the failing tests in utils/dates.py: parse_range drops the last element."
    )
    assert facts.tools_called == {
        "read_file": 2,
        "grep": 1,
        "bash": 3,
        "str_replace_based_edit_tool": 2,
        "apply_patch": 1,
        "edit_file": 1,
        "move_file": 1,
    }
    assert facts.read_files == ["utils/dates.py", "src", "utils/helpers.py", "missing.py"]
    assert facts.modified_files == [
        "utils/dates.py",
        "utils/helpers.py",
        "tests/test_helpers.py",
        "README.md",
        "old_notes.md",
        "docs/notes.md",
    ]
    assert facts.errors == [
        "`pytest -q tests/test_dates.py` failed: exit code 1; "
        "FAILED tests/test_dates.py::test_range - assert [1, 2] == [1, 2, 3] (seq 9); "
        "resolved at seq 27: All 16 tests pass now.",
        "`python -c 'import dateutil'` failed: exit code 1; "
        "ModuleNotFoundError: No module named 'dateutil' (seq 22)",
        "read_file(missing.py) failed: Error: file not found: missing.py (seq 26)",
    ]
    assert facts.decisions == ["The range end is exclusive; making it inclusive. (seq 10)"]
    assert facts.test_results == [
        "`pytest -q tests/test_dates.py`: 2 failed, 14 passed in 0.31s",
        "`pytest -q`: 16 passed in 0.40s",
    ]


def test_file_contents_that_mention_errors_are_not_failures() -> None:
    items = stored(
        [
            user("look"),
            *tool("read_file", {"path": "a.py"}, DATES_PY + "\n" + TRACEBACK * 3 + "x" * 400),
            *tool("cat", {"file": "log.txt"}, "error: this is only text in a log file\n" * 20),
        ]
    )
    facts = extract_facts(items)
    assert facts.errors == []
    assert facts.read_files == ["a.py", "log.txt"]


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        ("ok", None),
        ("exit code 0\nall good", None),
        ('{"exit_code": 2, "stdout": ""}', "exit code 2"),
        ("Process exited with code 137", "exit code 137"),
        ("fatal: not a git repository", "fatal: not a git repository"),
        ("error[E0308]: mismatched types", "error[E0308]: mismatched types"),
        ("bash: foo: command not found", "bash: foo: command not found"),
        ("npm ERR! missing script: test", "npm ERR! missing script: test"),
    ],
)
def test_failed_command_detection(output: str, expected: str | None) -> None:
    facts = extract_facts(stored(tool("bash", {"command": "run it"}, output)))
    assert facts.errors == ([] if expected is None else [f"`run it` failed: {expected} (seq 2)"])


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        ("===== 3 failed, 10 passed, 1 skipped in 1.20s =====", "3 failed, 10 passed, 1 skipped in 1.20s"),
        ("Tests:       1 failed, 5 passed, 6 total", "Tests:       1 failed, 5 passed, 6 total"),
        ("test result: ok. 5 passed; 0 failed; 0 ignored", "test result: ok. 5 passed; 0 failed; 0 ignored"),
        ("...\n----------\nRan 12 tests in 0.05s\n\nFAILED (failures=2)", "Ran 12 tests in 0.05s: FAILED (failures=2)"),
        ("nothing to see", None),
    ],
)  # fmt: skip
def test_test_result_detection(output: str, expected: str | None) -> None:
    facts = extract_facts(stored(tool("run_tests", {}, output)))
    assert facts.test_results == ([] if expected is None else [f"run_tests: {expected}"])


@pytest.mark.parametrize(
    ("name", "arguments", "kind"),
    [
        ("read_file", {}, "read"),
        ("Grep", {}, "read"),
        ("searchCodebase", {}, "read"),
        ("write_file", {}, "write"),
        ("create-file", {}, "write"),
        ("apply_patch", {}, "write"),
        ("delete", {}, "write"),
        ("str_replace_based_edit_tool", {"command": "view"}, "read"),
        ("str_replace_based_edit_tool", {"command": "create"}, "write"),
        ("bash", {"command": "ls -la"}, "other"),
        ("run_tests", {}, "other"),
        ("fs", "not a dict", "other"),
    ],
)
def test_classify_tool(name: str, arguments: object, kind: str) -> None:
    assert classify_tool(name, arguments) == kind


def test_explicit_error_flag_counts_as_a_failure() -> None:
    bodies: list[CanonicalItem] = [
        FunctionCallItem(call_id="c1", name="read_file", arguments='{"path": "x.py"}'),
        FunctionCallOutputItem.model_validate(
            {"call_id": "c1", "output": "\nPermission check failed for x.py", "is_error": True}
        ),
    ]
    facts = extract_facts(stored(bodies))
    assert facts.errors == ["read_file(x.py) failed: Permission check failed for x.py (seq 2)"]


def test_malformed_arguments_are_tolerated() -> None:
    bodies: list[CanonicalItem] = [
        FunctionCallItem(call_id="c1", name="read_file", arguments="{not json"),
        FunctionCallItem(call_id="c2", name="read_file", arguments='["a.py"]'),
        FunctionCallItem(call_id="c3", name="write_file", arguments='{"path": 3, "paths": ["b"]}'),
        FunctionCallOutputItem(call_id="nope", output="Traceback (most recent call last):\nX"),
    ]
    facts = extract_facts(stored(bodies))
    assert facts.tools_called == {"read_file": 2, "write_file": 1}
    assert facts.read_files == [] and facts.modified_files == ["b"]


def test_render_summary_sections_in_order_empty_omitted() -> None:
    sections = SummarySections(
        goal="Ship it",
        pending=["write docs"],
        errors=["boom\nsecond line"],
        read_files=["a.py"],
        tools_called={"bash": 2, "read_file": 1},
        earlier_summary="Old notes.",
    )
    assert render_summary(sections) == (
        "## Goal\n\nShip it\n\n"
        "## Pending\n\n- write docs\n\n"
        "## Tools called\n\n- bash (2 calls)\n- read_file (1 call)\n\n"
        "## Errors\n\n- boom\n  second line\n\n"
        "## Files read\n\n- a.py\n\n"
        "## Earlier summary\n\nOld notes."
    )
    assert render_summary(SummarySections()) == ""


def test_structured_compaction_result() -> None:
    items = stored(coding_session())
    plan = plan_cut(items)
    result = structured_compaction(
        plan, previous=None, previous_summary=None, now=T0, result_id="cmp_1"
    )
    assert result.id == "cmp_1" and result.policy == "structured" and result.created_at == T0
    assert result.summary == render_summary(result)
    assert result.summary is not None
    for heading in ("## Goal", "## Decisions", "## Tools called", "## Errors", "## Test results",
                    "## Files read", "## Files modified"):  # fmt: skip
        assert heading in result.summary
    for absent in ("## Completed", "## Pending", "## Open questions"):
        assert absent not in result.summary
    assert result.compacted_items == len(plan.compacted) == len(items) - 3  # system + last turn
    report = result.report
    assert (report.items_before, report.items_after) == (len(items), 3)
    assert report.first_seq == 2 and report.last_seq == len(items) - 2
    assert report.kept_from_seq == len(items) - 1
    assert report.tokens_before == sum(i.tokens for i in items)
    assert report.tokens_after == sum(i.tokens for i in plan.kept)
    assert report.summary_tokens > 0
    wire = result.model_dump(mode="json")
    for name in ("id", "policy", "summary", "goal", "completed", "pending", "decisions", "errors",
                 "test_results", "open_questions", "read_files", "modified_files",
                 "compacted_items", "report", "created_at"):  # fmt: skip
        assert name in wire
    assert CompactResult.model_validate(wire) == result


def _commit(items: list[StoredItem], plan: CutPlan) -> list[StoredItem]:
    """What the service does with the plan: the compacted items leave working memory."""
    gone = set(plan.compacted_seqs)
    return [item for item in items if item.seq not in gone]


def test_two_structured_compactions_accumulate() -> None:
    first_items = stored(coding_session())
    first_plan = plan_cut(first_items)
    first = structured_compaction(first_plan, previous=None, previous_summary=None)
    memory = _commit(first_items, first_plan)
    memory += stored(
        [
            *tool("read_file", {"path": "CHANGELOG.md"}, "# Changelog"),
            *tool("write_file", {"path": "CHANGELOG.md", "content": "..."}, "written"),
            *tool("bash", {"command": "pytest -q"}, "1 failed, 16 passed in 0.5s\nexit code 1"),
            *tool("read_file", {"path": "utils/dates.py"}, DATES_PY),
            assistant("Changelog updated."),
            user("Thanks, now release it."),
        ],
        first_seq=first_items[-1].seq + 1,
    )
    second = structured_compaction(plan_cut(memory), previous=first, previous_summary=first.summary)
    assert second.goal == first.goal  # the goal is kept from the previous compaction
    assert second.read_files == [*first.read_files, "CHANGELOG.md"]  # de-duplicated
    assert second.modified_files == [*first.modified_files, "CHANGELOG.md"]
    assert second.tools_called["bash"] == 4 and second.tools_called["write_file"] == 1
    assert second.test_results == [*first.test_results, "`pytest -q`: 1 failed, 16 passed in 0.5s"]
    assert second.errors[: len(first.errors)] == first.errors
    assert second.earlier_summary is None  # the previous summary was merged section by section
    assert second.summary == render_summary(second)
    assert second.summary is not None and "- CHANGELOG.md" in second.summary
    assert "Fix the failing tests in utils/dates.py" in second.summary


def test_hand_written_summary_is_carried_verbatim() -> None:
    items = stored(coding_session())
    result = structured_compaction(
        plan_cut(items), previous=None, previous_summary="The user prefers tabs."
    )
    assert result.earlier_summary == "The user prefers tabs."
    assert result.summary is not None
    assert result.summary.endswith("## Earlier summary\n\nThe user prefers tabs.")
    # An edited summary wins over the last result's sections.
    again = structured_compaction(
        plan_cut(stored([user("a"), assistant("b"), user("c")])),
        previous=result,
        previous_summary="Edited by hand.",
    )
    assert again.earlier_summary == "Edited by hand."
    assert again.read_files == [] and again.goal == "a"


def test_window_compaction_keeps_summary_and_sections() -> None:
    items = stored(coding_session())
    first = structured_compaction(plan_cut(items), previous=None, previous_summary=None)
    memory = stored([user("next"), assistant("ok"), user("more")], first_seq=100)
    result = window_compaction(plan_cut(memory), previous=first, previous_summary=first.summary)
    assert result.policy == "window"
    assert result.summary == first.summary
    assert result.read_files == first.read_files and result.goal == first.goal
    assert result.compacted_items == 2
    assert "not summarised" in " ".join(result.report.notes)
    fresh = window_compaction(plan_cut(memory), previous=None, previous_summary=None)
    assert fresh.summary is None and fresh.goal is None


@pytest.mark.parametrize("policy", [structured_compaction, window_compaction])
def test_empty_plan_is_a_noop_result(policy: object) -> None:
    plan = plan_cut(stored([user("only one turn"), assistant("reply")]))
    assert plan.is_empty
    result = policy(plan, previous=None, previous_summary="kept")  # type: ignore[operator]
    assert result.compacted_items == 0
    assert result.summary == "kept"
    assert result.report.notes[0] == plan.reason
    assert result.report.first_seq is None and result.report.compacted_ranges == []


def test_long_accumulations_are_capped() -> None:
    bodies: list[CanonicalItem] = [user("go")]
    for n in range(30):
        bodies += tool("bash", {"command": f"step {n}"}, f"error: failure {n}")
    bodies += [user("next")]
    result = structured_compaction(plan_cut(stored(bodies)), previous=None, previous_summary=None)
    assert len(result.errors) == 20
    assert result.errors[-1] == "`step 29` failed: error: failure 29 (seq 61)"
    assert any("newest 20 errors; 10 older dropped" in n for n in result.report.notes)


def test_a_scripted_session_keeps_what_was_concluded() -> None:
    """Each kind of conclusion survives a structured compaction, with the seq it came from:
    a decision, a conclusion, an open question, an error resolved by a statement, an error
    resolved by the same command succeeding later, and an error still open."""
    bodies: list[CanonicalItem] = [
        user("The nightly export times out; make it finish under ten minutes."),  # 1
        *tool("bash", {"command": "python export.py"}, "Traceback (most recent call last):\n"
              "  File \"export.py\", line 3\nTimeoutError: query took 600s"),  # 2, 3
        assistant("The root cause is the query on orders: it has no index on created_at. "
                  "I decided to add the index instead of caching the result. "
                  "Should the export also skip archived orders?"),  # 4
        *tool("bash", {"command": "alembic upgrade head"},
              "error: relation orders_created_at_idx already exists"),  # 5, 6
        assistant("Fixed the relation clash by dropping the stale index first."),  # 7
        *tool("bash", {"command": "pytest -q"}, "FAILED tests/test_export.py::test_window\n"
              "1 failed, 9 passed in 2.00s"),  # 8, 9
        *tool("bash", {"command": "pytest -q"}, "10 passed in 1.90s"),  # 10, 11
        *tool("bash", {"command": "du -sh /backups"}, "du: cannot access: Permission denied"),
        assistant("TODO: ask ops for read access to /backups."),  # 14
        user("Thanks, carry on."),  # 15
        assistant("On it."),  # 16
    ]  # fmt: skip
    items = stored(bodies)
    plan = plan_cut(items)
    assert [i.seq for i in plan.compacted] == list(range(1, 15))
    result = structured_compaction(plan, previous=None, previous_summary=None, now=T0)
    assert result.decisions == [
        "The root cause is the query on orders: it has no index on created_at. (seq 4)",
        "I decided to add the index instead of caching the result. (seq 4)",
    ]
    assert result.open_questions == [
        "Should the export also skip archived orders? (seq 4)",
        "TODO: ask ops for read access to /backups. (seq 14)",
    ]
    assert result.errors == [
        "`python export.py` failed: TimeoutError: query took 600s (seq 3)",
        "`alembic upgrade head` failed: error: relation orders_created_at_idx already exists "
        "(seq 6); resolved at seq 7: Fixed the relation clash by dropping the stale index first.",
        "`pytest -q` failed: FAILED tests/test_export.py::test_window (seq 9); resolved at "
        "seq 11: `pytest -q` succeeded (10 passed in 1.90s)",
        "`du -sh /backups` failed: du: cannot access: Permission denied (seq 13)",
    ]
    assert result.summary is not None
    for entry in (*result.decisions, *result.open_questions, *result.errors):
        assert entry in result.summary
    assert "## Open questions" in result.summary and "## Decisions" in result.summary

    # carried into the next compaction, alongside what it adds
    later = stored(
        [
            user("Now the weekly export."),
            assistant("Going with the same index approach for the weekly job."),
            user("ok"),
        ],
        first_seq=17,
    )
    plan2 = plan_cut([*items[14:], *later])
    again = structured_compaction(plan2, previous=result, previous_summary=result.summary, now=T0)
    assert again.decisions[:2] == result.decisions
    assert again.decisions[-1] == (
        "Going with the same index approach for the weekly job. (seq 18)"
    )
    assert again.open_questions == result.open_questions
    assert again.errors == result.errors
