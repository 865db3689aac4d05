"""LLM compaction, the pure part: the request it builds, forgiving parsing of every messy answer
kind, and the result built from a parsed answer."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.domain.compaction import (
    SYSTEM_PROMPT,
    build_llm_messages,
    llm_compaction_result,
    parse_llm_summary,
    plan_cut,
    render_summary,
    render_transcript,
    structured_compaction,
)
from app.domain.items import (
    CanonicalItem,
    FunctionCallItem,
    FunctionCallOutputItem,
    ImagePart,
    MessageItem,
    ReasoningItem,
    StoredItem,
    TextPart,
)
from tests.support.fake_llm import SUMMARY, reply_content

T0 = datetime(2025, 1, 1, tzinfo=UTC)


def stored(bodies: list[CanonicalItem], *, first_seq: int = 1) -> list[StoredItem]:
    return [
        StoredItem(
            body=body,
            id=f"i{first_seq + n}",
            seq=first_seq + n,
            tokens=10,
            chars=10,
            pinned=False,
            metadata={},
            created_at=T0,
        )
        for n, body in enumerate(bodies)
    ]


def session() -> list[StoredItem]:
    return stored(
        [
            MessageItem(role="user", content="Fix the date parser."),
            ReasoningItem(summary=["Read it first."], encrypted_content="SECRET-BLOB"),
            FunctionCallItem(call_id="c1", name="read_file", arguments='{"path": "dates.py"}'),
            FunctionCallOutputItem(call_id="c1", output="def parse_range(): ..."),
            FunctionCallItem(call_id="c2", name="write_file", arguments='{"path": "dates.py"}'),
            FunctionCallOutputItem(call_id="c2", output="ok"),
            MessageItem(
                role="assistant",
                content=[TextPart(text="Fixed."), ImagePart(url="https://x/y.png")],
            ),
            MessageItem(role="user", content="Now the docs."),
        ]
    )


# --- the request ----------------------------------------------------------------------------


def test_messages_carry_previous_summary_transcript_and_instructions() -> None:
    plan = plan_cut(session())
    messages = build_llm_messages(
        plan, previous_summary="## Goal\n\nEarlier goal", instructions="Keep it short."
    )
    assert [m["role"] for m in messages] == ["system", "user"]
    assert messages[0]["content"] == SYSTEM_PROMPT
    for key in ("goal", "completed", "pending", "decisions", "errors", "test_results",
                "open_questions"):  # fmt: skip
        assert f'"{key}"' in SYSTEM_PROMPT
    prompt = messages[1]["content"]
    assert "Previous summary:\n\n## Goal\n\nEarlier goal" in prompt
    assert "Transcript to compact (seq 1 to 7, 7 items)" in prompt
    assert "[seq 1] user: Fix the date parser." in prompt
    assert '[seq 3] assistant called read_file (call c1) with {"path": "dates.py"}' in prompt
    assert "[seq 4] result of read_file (call c1):\ndef parse_range(): ..." in prompt
    assert "[seq 2] reasoning: Read it first." in prompt
    assert "[seq 7] assistant: Fixed.\n[image]" in prompt
    assert "SECRET-BLOB" not in prompt  # encrypted reasoning is never sent
    assert "Now the docs." not in prompt  # the kept turn is not summarised
    assert prompt.index("Transcript") < prompt.index("Additional instructions from the user")
    assert prompt.rstrip().endswith("Answer with the JSON object only.")
    # Deterministic.
    assert (
        build_llm_messages(
            plan, previous_summary="## Goal\n\nEarlier goal", instructions="Keep it short."
        )
        == messages
    )


def test_first_compaction_says_there_is_no_previous_summary() -> None:
    messages = build_llm_messages(plan_cut(session()), previous_summary=None)
    assert "Previous summary: none" in messages[1]["content"]
    assert "Additional instructions" not in messages[1]["content"]


def test_transcript_is_bounded() -> None:
    bodies: list[CanonicalItem] = [MessageItem(role="user", content="start")]
    for n in range(200):
        bodies += [
            FunctionCallItem(call_id=f"c{n}", name="bash", arguments="{}"),
            FunctionCallOutputItem(call_id=f"c{n}", output=f"line {n}\n" + "x" * 10_000),
        ]
    text = render_transcript(stored(bodies), max_chars=20_000)
    assert len(text) <= 20_100
    assert text.startswith("[seq 1] user: start")
    assert "items omitted to fit the request" in text
    assert "chars omitted" in text  # long outputs keep head and tail
    assert "(call c199)" in text  # the newest items are kept


# --- parsing --------------------------------------------------------------------------------


def test_clean_json() -> None:
    parsed = parse_llm_summary(reply_content("json"))
    assert parsed.structured and parsed.notes == []
    assert parsed.goal == SUMMARY["goal"]
    assert parsed.completed == SUMMARY["completed"]
    assert parsed.open_questions == SUMMARY["open_questions"]


def test_code_fence_and_prose_around() -> None:
    parsed = parse_llm_summary(reply_content("fenced"))
    assert parsed.structured
    assert parsed.pending == SUMMARY["pending"]
    assert "text around the model's JSON object was ignored" in parsed.notes


def test_strings_nulls_and_odd_values_where_lists_were_asked() -> None:
    parsed = parse_llm_summary(reply_content("string_lists"))
    assert parsed.structured
    assert parsed.completed == ["Read utils/dates.py"]
    assert parsed.pending == []
    assert parsed.decisions == ["Keep the signature"]
    assert parsed.test_results == ["3"]
    assert parsed.open_questions == ['{"q": "inclusive end?"}']
    assert "'completed' was not a list; it was read as one" in parsed.notes


def test_prose_only_is_the_summary_as_is() -> None:
    text = reply_content("prose")
    parsed = parse_llm_summary(f"  {text}\n")
    assert not parsed.structured
    assert parsed.text == text
    assert any("as-is" in note for note in parsed.notes)


def test_broken_json_is_the_summary_as_is() -> None:
    text = reply_content("broken")
    parsed = parse_llm_summary(text)
    assert not parsed.structured and parsed.text == text.strip()


@pytest.mark.parametrize(
    ("text", "field", "expected"),
    [
        ('{"goal": "g", "completed": ["a", "b",],}', "completed", ["a", "b"]),  # trailing commas
        ('{"result": {"goal": "g", "pending": ["p"]}}', "pending", ["p"]),  # wrapped
        ('{"Goal": "g", "Next Steps": ["n"]}', "pending", ["n"]),  # other key names
        ('{"goal": ["a", "b"]}', "goal", "a; b"),
        ('{"goal": "", "errors": [1, true, null, "", "x", "x"]}', "errors", ["1", "true", "x"]),
        ('{"goal": "g", "test_results": {"passed": 3, "failed": 1}}', "test_results",
         ["passed: 3", "failed: 1"]),
        ('I think {braces} are fun. {"goal": "g"} and {"other": 1}', "goal", "g"),
        ('{"goal": "nested {\\"json\\"} in a string"}', "goal", 'nested {"json"} in a string'),
    ],
)  # fmt: skip
def test_messy_json_shapes(text: str, field: str, expected: object) -> None:
    parsed = parse_llm_summary(text)
    assert parsed.structured
    assert getattr(parsed, field) == expected


@pytest.mark.parametrize("text", ["", "   ", "[1, 2]", '"just a string"', '{"unrelated": 1}'])
def test_no_summary_object(text: str) -> None:
    parsed = parse_llm_summary(text)
    assert not parsed.structured
    assert parsed.text == text.strip()
    assert parsed.notes


def test_single_summary_string_object() -> None:
    parsed = parse_llm_summary('{"summary": "All done, tests pass."}')
    assert not parsed.structured and parsed.text == "All done, tests pass."


@settings(max_examples=300, deadline=None)
@given(st.text() | st.recursive(st.none() | st.booleans() | st.integers() | st.text(),
                                lambda c: st.lists(c) | st.dictionaries(st.text(), c))
       .map(json.dumps))  # fmt: skip
def test_parsing_never_raises(text: str) -> None:
    parsed = parse_llm_summary(text)
    if parsed.structured:
        for field in ("completed", "pending", "decisions", "errors", "test_results",
                      "open_questions"):  # fmt: skip
            values = getattr(parsed, field)
            assert all(isinstance(v, str) and v for v in values)
    else:  # the text as-is, or the one "summary" string the model answered with
        assert parsed.text == text.strip() or "'summary'" in parsed.notes[0]


# --- the result -----------------------------------------------------------------------------


def test_llm_result_from_json_answer() -> None:
    plan = plan_cut(session())
    parsed = parse_llm_summary(reply_content("fenced"))
    result = llm_compaction_result(
        plan, parsed, previous=None, previous_summary=None, model="fake-model", now=T0
    )
    assert result.policy == "llm" and result.model == "fake-model"
    assert result.goal == SUMMARY["goal"]
    assert result.decisions == SUMMARY["decisions"]
    assert result.read_files == ["dates.py"] and result.modified_files == ["dates.py"]
    assert result.tools_called == {"read_file": 1, "write_file": 1}
    assert result.summary == render_summary(result)
    assert result.summary is not None
    assert result.summary.startswith(f"## Goal\n\n{SUMMARY['goal']}\n\n## Completed\n\n- ")
    assert "## Open questions\n\n- Should ranges be inclusive at the end?" in result.summary
    assert "text around the model's JSON object was ignored" in result.report.notes
    assert result.compacted_items == 7


def test_llm_prose_answer_becomes_the_summary_and_is_carried_later() -> None:
    plan = plan_cut(session())
    prose = reply_content("prose")
    result = llm_compaction_result(
        plan, parse_llm_summary(prose), previous=None, previous_summary=None
    )
    assert result.summary == prose
    assert result.goal == "Fix the date parser."  # mechanically, since the model gave none
    assert result.read_files == ["dates.py"]
    assert any("as-is" in n for n in result.report.notes)
    # A later structured compaction keeps the prose verbatim rather than losing it.
    later = structured_compaction(
        plan_cut(stored([MessageItem(role="user", content="x"),
                         MessageItem(role="user", content="y")], first_seq=50)),
        previous=result,
        previous_summary=result.summary,
    )  # fmt: skip
    assert later.earlier_summary == prose
    assert later.read_files == ["dates.py"] and later.goal == "Fix the date parser."


def test_llm_empty_answer_falls_back_to_structured() -> None:
    plan = plan_cut(session())
    result = llm_compaction_result(
        plan, parse_llm_summary(""), previous=None, previous_summary=None, model="m"
    )
    assert result.policy == "llm" and result.model == "m"
    assert result.summary == render_summary(result)
    assert result.goal == "Fix the date parser."
    assert "the model returned an empty answer" in result.report.notes
    assert "the structured policy wrote the summary instead" in result.report.notes


def test_second_llm_compaction_accumulates_files_and_replaces_lists() -> None:
    first_plan = plan_cut(session())
    first = llm_compaction_result(
        first_plan,
        parse_llm_summary(reply_content("json")),
        previous=None,
        previous_summary=None,
    )
    memory = stored(
        [
            MessageItem(role="user", content="Now the docs."),
            FunctionCallItem(call_id="d1", name="edit_file", arguments='{"path": "README.md"}'),
            FunctionCallOutputItem(call_id="d1", output="ok"),
            MessageItem(role="user", content="Thanks."),
        ],
        first_seq=8,
    )
    plan = plan_cut(memory)
    messages = build_llm_messages(plan, previous_summary=first.summary)
    assert first.summary is not None and first.summary in messages[1]["content"]
    answer = json.dumps({"goal": None, "completed": ["Docs updated"], "pending": []})
    second = llm_compaction_result(
        plan, parse_llm_summary(answer), previous=first, previous_summary=first.summary
    )
    assert second.goal == first.goal  # the model gave none: the previous goal stays
    assert second.completed == ["Docs updated"]  # the model's lists replace the previous ones
    assert second.modified_files == ["dates.py", "README.md"]
    assert second.read_files == ["dates.py"]
    assert second.tools_called == {"read_file": 1, "write_file": 1, "edit_file": 1}


def test_llm_result_on_empty_plan_is_a_noop() -> None:
    plan = plan_cut(stored([MessageItem(role="user", content="hi")]))
    result = llm_compaction_result(
        plan, parse_llm_summary("{}"), previous=None, previous_summary="s"
    )
    assert result.compacted_items == 0 and result.summary == "s"
    assert result.report.notes == [plan.reason]
