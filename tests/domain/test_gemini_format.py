"""The ``gemini`` format (issue 35): Gemini API ``contents`` in, ``contents`` +
``system_instruction`` out, checked against the ``google-genai`` SDK's own types.

- every data field of the SDK's ``Part`` is one the format knows (a new one fails here);
- faithful: a session written in Gemini contents (camelCase or snake_case) comes back byte for
  byte from the listing and from the unbudgeted projection;
- calls pair with their responses by id, or by name and order;
- any session, of any format, under any budget projects into a payload the SDK's ``Content``
  validates and the API's turn rules accept, counted as the module documents.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from google.genai import types as gt
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.domain.errors import InvalidInput
from app.domain.formats import ingest, payload_usage, render, render_listing
from app.domain.formats.gemini import DATA_FIELDS, derived_call_id
from app.domain.items import (
    FunctionCallItem,
    FunctionCallOutputItem,
    ReasoningItem,
    TextPart,
    opaque_texts,
)
from app.domain.projection import Budget, project_context
from app.domain.tokens import IMAGE_TOKENS, count_text
from tests.domain.strategies import Session, budgets, faithful_sessions, sessions, store
from tests.support import sdk_examples as se
from tests.support.provider_validation import (
    PayloadError,
    validate_gemini,
    validate_payload_faithful,
)

SETTINGS = settings(
    max_examples=40,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# Part fields that describe a part rather than hold its data (the SDK's ``Part`` is a oneof of
# data fields plus these).
PART_METADATA = {
    "thought",
    "thought_signature",
    "video_metadata",
    "media_resolution",
    "part_metadata",
    "audio_transcription",
    "media_processing",
    "speech_metadata",
    "document_metadata",
    "spreadsheet_metadata",
    "audio_metadata",
}


def test_every_sdk_part_field_is_known() -> None:
    """A field the SDK adds to ``Part`` fails here until the format says whether it holds data
    (then it is a data field of its own) or describes the part."""
    fields = set(gt.Part.model_fields)
    assert fields == set(DATA_FIELDS) | PART_METADATA, fields ^ (set(DATA_FIELDS) | PART_METADATA)
    assert set(gt.Content.model_fields) == {"role", "parts"}
    assert {"id", "name", "args"} <= set(gt.FunctionCall.model_fields)
    assert {"id", "name", "response", "parts"} <= set(gt.FunctionResponse.model_fields)


# -- sessions written in Gemini contents --------------------------------------------------------

_NAMES = ["read_file", "run.tests", "search"]
_TEXT = st.text(alphabet="abc xyz.é世🙂", min_size=1, max_size=12)


def _spell(camel: bool, key: str) -> str:
    if camel:
        return key
    return "".join("_" + c.lower() if c.isupper() else c for c in key)


@st.composite
def gemini_sessions(draw: st.DrawFn) -> tuple[list[dict[str, Any]], Any]:
    """(contents, system instruction or None): alternating turns as a Gemini app writes them,
    every call answered in the next user turn."""
    camel = draw(st.booleans())

    def k(key: str) -> str:
        return _spell(camel, key)

    n = 0

    def text() -> str:
        nonlocal n
        n += 1
        return f"<<{n}>>" + draw(_TEXT)

    contents: list[dict[str, Any]] = []
    system = None
    if draw(st.booleans()):
        system = text() if draw(st.booleans()) else {"parts": [{"text": text()}]}
    for _ in range(draw(st.integers(1, 3))):
        parts: list[dict[str, Any]] = [{"text": text()}]
        if draw(st.booleans()):
            parts.append({k("inlineData"): {k("mimeType"): "image/png", "data": "iVBORw0KGgo="}})
        if draw(st.integers(0, 4)) == 0:
            parts.append({k("fileData"): {k("mimeType"): "application/pdf", k("fileUri"): "https://x/f"}})  # fmt: skip
        contents.append({"role": "user", "parts": parts})
        for _ in range(draw(st.integers(0, 2))):
            model: list[dict[str, Any]] = []
            if draw(st.booleans()):
                model.append({"text": text(), "thought": True, k("thoughtSignature"): "c2ln"})
            if draw(st.booleans()):
                model.append({"text": text()})
            with_ids = draw(st.booleans())
            calls = []
            for c in range(draw(st.integers(1, 3))):
                name = draw(st.sampled_from(_NAMES))
                call: dict[str, Any] = {"name": name, "args": {"q": text()}}
                if with_ids:
                    call = {"id": f"fc_{n}_{c}", **call}
                calls.append(call)
                part: dict[str, Any] = {k("functionCall"): call}
                if c == 0 and draw(st.booleans()):
                    part[k("thoughtSignature")] = "c2ln"
                model.append(part)
            contents.append({"role": "model", "parts": model})
            answers = []
            for call in calls:
                response: dict[str, Any] = {"name": call["name"]}
                if with_ids:
                    response["id"] = call["id"]
                response["response"] = draw(
                    st.sampled_from([{"output": text()}, {"error": text()}, {"rows": [text()]}])
                )
                answers.append({k("functionResponse"): response})
            if with_ids:
                answers = draw(st.permutations(answers))
            contents.append({"role": "user", "parts": list(answers)})
        final: list[dict[str, Any]] = [{"text": text()}]
        if draw(st.integers(0, 3)) == 0:
            final = [
                {k("executableCode"): {"language": "PYTHON", "code": "print(1)  " + text()}},
                {k("codeExecutionResult"): {"outcome": "OUTCOME_OK", "output": "1"}},
                *final,
            ]
        contents.append({"role": "model", "parts": final})
    return contents, system


def _memory(contents: list[dict[str, Any]], system: Any) -> list[Any]:
    return store(
        ingest("gemini", copy.deepcopy(contents), system_instruction=copy.deepcopy(system))
    )


def _expected(contents: list[dict[str, Any]], system: Any) -> dict[str, Any]:
    payload: dict[str, Any] = {} if system is None else {"system_instruction": system}
    payload["contents"] = contents
    return payload


@SETTINGS
@given(written=gemini_sessions())
def test_gemini_sessions_come_back_byte_for_byte(
    written: tuple[list[dict[str, Any]], Any],
) -> None:
    contents, system = written
    memory = _memory(contents, system)
    assert render_listing("gemini", memory) == _expected(contents, system)
    result = project_context(
        Session(items=memory, summary=None).source(), Budget(), format="gemini"
    )
    assert json.dumps(result.payload) == json.dumps(_expected(contents, system))
    validate_gemini(result.payload)
    assert result.report.dropped_items == 0
    # every call pairs with its response
    calls = {i.body.call_id for i in memory if isinstance(i.body, FunctionCallItem)}
    outputs = [i.body.call_id for i in memory if isinstance(i.body, FunctionCallOutputItem)]
    assert set(outputs) <= calls


def _recount(payload: dict[str, Any], tokenizer: str) -> tuple[int, int]:
    """The module docstring's token rule, re-derived with tiktoken."""
    strings: list[str] = []
    extra = 0

    def get(d: dict[str, Any], camel: str) -> Any:
        snake = "".join("_" + c.lower() if c.isupper() else c for c in camel)
        return d.get(camel) if d.get(camel) is not None else d.get(snake)

    def parts(values: list[Any]) -> None:
        nonlocal extra
        for p in values:
            if isinstance(p, str):
                strings.append(p)
            elif p.get("text") is not None:
                strings.append(p["text"])
            elif get(p, "inlineData") is not None:
                if str(get(get(p, "inlineData"), "mimeType")).startswith("image/"):
                    extra += IMAGE_TOKENS["auto"]
                else:
                    strings.extend(opaque_texts(p))
            elif get(p, "fileData") is not None:
                extra += IMAGE_TOKENS["auto"]
            elif get(p, "functionCall") is not None:
                call = get(p, "functionCall")
                extra += 3
                strings.extend(
                    [call["name"], json.dumps(call.get("args") or {}, ensure_ascii=False)]
                )
            elif get(p, "functionResponse") is not None:
                response = get(p, "functionResponse")
                extra += 3
                strings.extend(
                    [
                        response["name"],
                        json.dumps(response.get("response") or {}, ensure_ascii=False),
                    ]
                )
            else:
                strings.extend(opaque_texts(p))

    system = payload.get("system_instruction")
    if system is not None:
        extra += 3
        parts([system] if isinstance(system, str) else system["parts"])
    for content in payload["contents"]:
        extra += 3
        parts(content["parts"])
    tokens = sum(count_text(s, tokenizer) for s in strings)  # type: ignore[arg-type]
    return tokens + extra, sum(map(len, strings))


def _check(session: Session, budget: Budget) -> None:
    result = project_context(session.source(), budget, format="gemini")
    payload = result.payload
    try:
        validate_gemini(payload)
    except PayloadError as exc:
        raise AssertionError(f"{exc}\n{json.dumps(payload, indent=1)[:4000]}") from exc
    report = result.report
    assert (report.projected_tokens, report.projected_chars) == _recount(payload, budget.tokenizer)
    assert payload_usage("gemini", payload, tokenizer=budget.tokenizer) == (
        report.projected_tokens,
        report.projected_chars,
    )
    if not any("mandatory" in note for note in report.notes):
        limits = {
            "max_tokens": report.projected_tokens,
            "max_chars": report.projected_chars,
            "max_items": report.projected_items,
        }
        for name, actual in limits.items():
            limit = getattr(budget, name)
            assert limit is None or actual <= limit, (name, actual, limit)
    # determinism
    again = project_context(session.source(), budget, format="gemini")
    assert json.dumps(again.payload) == json.dumps(payload)


@SETTINGS
@given(written=gemini_sessions(), budget=budgets())
def test_gemini_sessions_under_any_budget_stay_valid(
    written: tuple[list[dict[str, Any]], Any], budget: Budget
) -> None:
    contents, system = written
    _check(Session(items=_memory(contents, system), summary=None), budget)


@SETTINGS
@given(session=faithful_sessions(), budget=budgets())
def test_any_faithful_session_projects_into_valid_gemini(session: Session, budget: Budget) -> None:
    """Sessions written in every other format (and mixes of them), wild ones included."""
    _check(session, budget)


@SETTINGS
@given(session=sessions(), budget=budgets())
def test_any_canonical_session_projects_into_valid_gemini(session: Session, budget: Budget) -> None:
    _check(session, budget)


# -- table tests --------------------------------------------------------------------------------


def test_calls_without_ids_pair_by_name_and_order() -> None:
    contents = [
        {"role": "user", "parts": [{"text": "weather?"}]},
        {
            "role": "model",
            "parts": [
                {"functionCall": {"name": "weather", "args": {"city": "Paris"}}},
                {"functionCall": {"name": "weather", "args": {"city": "Rome"}}},
                {"functionCall": {"name": "time", "args": {}}},
            ],
        },
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"name": "time", "response": {"output": "noon"}}},
                {"functionResponse": {"name": "weather", "response": {"output": "sunny"}}},
                {"functionResponse": {"name": "weather", "response": {"output": "rain"}}},
            ],
        },
    ]
    memory = _memory(contents, None)
    pairs = [(i.body.type, i.body.call_id) for i in memory[1:]]  # type: ignore[union-attr]
    assert pairs == [
        ("function_call", "gm_weather"),
        ("function_call", "gm_weather_n1"),
        ("function_call", "gm_time"),
        ("function_call_output", "gm_time"),
        ("function_call_output", "gm_weather"),
        ("function_call_output", "gm_weather_n1"),
    ]
    outputs = {i.body.call_id: i.body.output for i in memory[4:]}
    assert outputs == {"gm_time": "noon", "gm_weather": "sunny", "gm_weather_n1": "rain"}
    # in another format the pairs keep together; back in gemini they are as sent, without ids
    chat = render("openai-chat", summary=None, items=memory)["messages"]
    assert [m.get("tool_call_id") for m in chat[2:]] == ["gm_time", "gm_weather", "gm_weather_n1"]
    assert render_listing("gemini", memory)["contents"] == contents


def test_derived_ids_are_valid_tool_ids_everywhere() -> None:
    assert derived_call_id("a.b:c", 0) == "gm_a_2eb_3ac"
    assert derived_call_id("a_b", 2) == "gm_a_5fb_n2"
    assert (
        derived_call_id("x" * 300, 0).startswith("gm_") and len(derived_call_id("x" * 300, 0)) < 64
    )


def test_snake_case_is_stored_as_sent() -> None:
    """A dumped SDK model (snake_case, null fields) is kept exactly, nulls included."""
    part = gt.Part(function_call=gt.FunctionCall(name="ls", args={"path": "."})).model_dump(
        mode="json"
    )
    content = {"role": "model", "parts": [part]}
    user = {"role": "user", "parts": [gt.Part(text="hi").model_dump(mode="json")]}
    memory = _memory([user, content], None)
    assert isinstance(memory[1].body, FunctionCallItem)
    assert memory[1].body.arguments == '{"path": "."}'
    assert render_listing("gemini", memory)["contents"] == [user, content]


def test_other_formats_render_into_gemini_idiom() -> None:
    news = ingest(
        "openai-chat",
        [
            {"role": "system", "content": "Be terse."},
            {"role": "user", "content": [
                {"type": "text", "text": "look"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
            ]},
            {"role": "assistant", "content": "ok", "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "ls", "arguments": "{\"p\": 1}"}},
            ]},
            {"role": "tool", "tool_call_id": "call_1", "content": "a.py"},
        ],
    )  # fmt: skip
    payload = render("gemini", summary="Earlier: x.", items=store(news))
    assert payload == {
        "system_instruction": {"parts": [{"text": "Earlier: x."}, {"text": "Be terse."}]},
        "contents": [
            {
                "role": "user",
                "parts": [
                    {"text": "look"},
                    {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}},
                ],
            },
            {
                "role": "model",
                "parts": [
                    {"text": "ok"},
                    {"functionCall": {"id": "call_1", "name": "ls", "args": {"p": 1}}},
                ],
            },
            {
                "role": "user",
                "parts": [
                    {
                        "functionResponse": {
                            "id": "call_1",
                            "name": "ls",
                            "response": {"output": "a.py"},
                        }
                    }
                ],
            },
        ],
    }
    validate_gemini(payload)


def test_the_sdk_corpus_round_trips_and_reads_validly_everywhere() -> None:
    """tests/support/sdk_examples.py's Gemini transcript (every ``Part`` field, both
    spellings, every role) comes back byte for byte, and reads validly in every other format,
    as the other formats' corpora read validly in gemini."""
    contents, system = se.GEMINI_CONTENTS, se.GEMINI_SYSTEM_INSTRUCTION
    memory = _memory(contents, system)
    assert json.dumps(render_listing("gemini", memory)) == json.dumps(_expected(contents, system))
    source = Session(items=memory, summary=None).source()
    result = project_context(source, Budget(), format="gemini")
    assert json.dumps(result.payload) == json.dumps(_expected(contents, system))
    assert result.report.notes == []
    for fmt in ("openai-chat", "openai-responses", "anthropic"):
        validate_payload_faithful(fmt, project_context(source, Budget(), format=fmt).payload)  # type: ignore[arg-type]
    others: list[tuple[str, list[Any], dict[str, Any]]] = [
        ("openai-responses", se.RESPONSES_ITEMS, {}),
        ("openai-chat", se.CHAT_MESSAGES, {}),
        ("anthropic", se.anthropic_messages(), {"system": se.ANTHROPIC_SYSTEM}),
    ]
    for fmt, items, extra in others:
        written = store(ingest(fmt, copy.deepcopy(items), **copy.deepcopy(extra)))  # type: ignore[arg-type]
        source = Session(items=written, summary=None).source()
        validate_gemini(project_context(source, Budget(), format="gemini").payload)


def test_an_empty_text_part_stays_in_the_record_only() -> None:
    """Regression (wild sessions with gemini turns): an empty text part (the SDK writes
    ``Part(text="")``) became an empty text block in anthropic, which the Messages API refuses.
    It carries nothing: the record keeps it, the canonical view leaves it out, and a content of
    nothing else is an empty message (left out elsewhere, as Chat's audio-only reply is)."""
    contents = [
        {"role": "user", "parts": [{"text": "<<1>> look"}, {"text": ""}]},
        {"role": "model", "parts": [{"text": ""}]},
        {"role": "user", "parts": [{"text": "<<3>> and?"}]},
    ]
    memory = _memory(contents, {"parts": [{"text": "Be terse."}, {"text": ""}]})
    assert [m.body.content for m in memory[1:]] == [  # type: ignore[union-attr]
        [TextPart(text="<<1>> look")],
        "",
        [TextPart(text="<<3>> and?")],
    ]
    assert memory[0].body.content == [TextPart(text="Be terse.")]  # type: ignore[union-attr]
    system = {"parts": [{"text": "Be terse."}, {"text": ""}]}
    assert render_listing("gemini", memory) == _expected(contents, system)
    source = Session(items=memory, summary=None).source()
    assert project_context(source, Budget(), format="gemini").payload == _expected(contents, system)
    anthropic = project_context(source, Budget(), format="anthropic")
    validate_payload_faithful("anthropic", anthropic.payload)
    assert "<<1>>" in json.dumps(anthropic.payload) and "<<3>>" in json.dumps(anthropic.payload)
    assert any("left out 1 items" in n for n in anthropic.report.notes), anthropic.report.notes


def test_a_derived_call_id_repeated_turn_after_turn_is_one_call_s_elsewhere() -> None:
    """Regression (wild sessions with gemini turns): calls without ids get a key derived from
    their name, so a turn that calls ``read_file`` again repeats it; in gemini that is how the
    API pairs them, but read in openai-responses two ``function_call``s had one ``call_id``.
    There, each call after the first with its id is sent with its own (and its output too)."""
    turn = [
        {"role": "model", "parts": [{"functionCall": {"name": "read_file", "args": {"p": "a"}}}]},
        {
            "role": "user",
            "parts": [{"functionResponse": {"name": "read_file", "response": {"output": "A"}}}],
        },
    ]
    contents = [{"role": "user", "parts": [{"text": "read a twice"}]}, *turn, *copy.deepcopy(turn)]
    memory = _memory(contents, None)
    assert {m.body.call_id for m in memory if isinstance(m.body, FunctionCallItem)} == {
        "gm_read_5ffile"
    }
    source = Session(items=memory, summary=None).source()
    native = project_context(source, Budget(), format="gemini").payload
    assert native == _expected(contents, None)
    for fmt, key in (("openai-responses", "input"), ("openai-chat", "messages")):
        payload = project_context(source, Budget(), format=fmt).payload  # type: ignore[arg-type]
        validate_payload_faithful(fmt, payload)
        text = json.dumps(payload)
        assert text.count('"gm_read_5ffile"') == 2 and text.count('"gm_read_5ffile_s4"') == 2, key
    # the first call with its id out of the payload: the second is sent under the id itself
    tail = project_context(
        Session(items=memory[3:], summary=None).source(), Budget(), format="openai-responses"
    ).payload
    assert [i.get("call_id") for i in tail["input"]] == ["gm_read_5ffile", "gm_read_5ffile"]


def test_a_thought_stays_gemini_s_own() -> None:
    memory = _memory(
        [
            {"role": "user", "parts": [{"text": "q"}]},
            {"role": "model", "parts": [{"text": "hmm", "thought": True}, {"text": "a"}]},
        ],
        None,
    )
    assert isinstance(memory[1].body, ReasoningItem)
    for fmt in ("openai-chat", "openai-responses", "anthropic"):
        assert "hmm" not in json.dumps(render(fmt, summary=None, items=memory)), fmt  # type: ignore[arg-type]


def test_a_model_first_payload_starts_with_a_user_turn() -> None:
    memory = _memory([{"role": "model", "parts": [{"text": "hello"}]}], None)
    payload = render("gemini", summary=None, items=memory)
    assert payload["contents"][0] == {
        "role": "user",
        "parts": [{"text": "[earlier conversation omitted]"}],
    }
    validate_gemini(payload)
    assert render_listing("gemini", memory)["contents"] == [
        {"role": "model", "parts": [{"text": "hello"}]}
    ]


@pytest.mark.parametrize(
    ("contents", "loc"),
    [
        ([{"role": "assistant", "parts": [{"text": "x"}]}], ["items", 0, "role"]),
        ([{"role": "user", "parts": []}], ["items", 0, "parts"]),
        ([{"role": "user", "parts": [{"text": 5}]}], ["items", 0, "parts", 0, "text"]),
        ([{"role": "user", "parts": [{"text": "a", "inlineData": {}}]}], ["items", 0, "parts", 0]),
        (
            [{"role": "user", "parts": [{"functionCall": {"name": "f"}}]}],
            ["items", 0, "parts", 0, "functionCall"],
        ),
        (
            [{"role": "model", "parts": [{"functionCall": {"args": {}}}]}],
            ["items", 0, "parts", 0, "functionCall", "name"],
        ),
        (
            [{"role": "model", "parts": [{"function_call": {"name": "f", "args": [1]}}]}],
            ["items", 0, "parts", 0, "functionCall", "args"],
        ),
        (
            [{"parts": [{"functionResponse": {"name": "f", "response": "no"}}]}],
            ["items", 0, "parts", 0, "functionResponse", "response"],
        ),
    ],
)
def test_invalid_contents_are_refused_with_their_location(
    contents: list[dict[str, Any]], loc: list[Any]
) -> None:
    with pytest.raises(InvalidInput) as info:
        ingest("gemini", contents)
    assert [e["loc"] for e in info.value.errors or []] == [loc]


def test_system_instruction_only_with_gemini() -> None:
    with pytest.raises(InvalidInput):
        ingest("anthropic", [], system_instruction="x")  # type: ignore[call-arg]
    with pytest.raises(InvalidInput):
        ingest("gemini", [{"parts": [{"text": "x"}]}], system="x")
    with pytest.raises(InvalidInput) as info:
        ingest("gemini", [], system_instruction=5)
    assert info.value.errors[0]["loc"] == ["system_instruction"]  # type: ignore[index]
