"""The OpenAPI document is made for client generators: readable unique operationIds, declared
tags, examples that are valid against the schemas they illustrate, and errors as problems."""

from __future__ import annotations

import collections.abc as cabc
import re
import types
import typing
from typing import Any

import anthropic.types as at
import jsonschema_rs
import openai.types.chat as oc
import pytest
import schemathesis
import typing_extensions as te
from hypothesis import HealthCheck, Phase, given, settings
from jsonschema import Draft202012Validator
from openai.types.responses.response_input_item_param import ResponseInputItemParam
from pydantic import ValidationError
from schemathesis import GenerationMode

from app.api.schemas import ItemsAppend
from app.domain.errors import InvalidInput
from app.domain.formats import ingest
from app.main import create_app


@pytest.fixture(scope="module")
def spec() -> dict[str, Any]:
    return create_app().openapi()


def operations(spec: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [(path, method, op) for path, ms in spec["paths"].items() for method, op in ms.items()]


def errors_of(spec: dict[str, Any], schema: dict[str, Any], value: Any) -> list[str]:
    validator = Draft202012Validator({**schema, "components": spec["components"]})
    return [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(value)]


def test_operation_ids_are_unique_camel_case_and_tagged(spec: dict[str, Any]) -> None:
    ids = [op["operationId"] for _, _, op in operations(spec)]
    assert len(ids) == len(set(ids))
    declared = {t["name"] for t in spec["tags"]}
    for path, method, op in operations(spec):
        assert re.fullmatch(r"[a-z]+(?:[A-Z][a-z]+)*", op["operationId"]), (path, method)
        assert op.get("summary"), (path, method)
        assert op.get("tags") and set(op["tags"]) <= declared, (path, method)
    assert all(t.get("description") for t in spec["tags"])


def test_every_request_body_has_valid_examples(spec: dict[str, Any]) -> None:
    for path, method, op in operations(spec):
        media = op.get("requestBody", {}).get("content", {}).get("application/json")
        if media is None:
            continue
        examples = media.get("examples")
        assert examples, f"{method} {path}: no request example"
        for name, example in examples.items():
            problems = errors_of(spec, media["schema"], example["value"])
            assert not problems, (op["operationId"], name, problems)


def test_response_examples_are_valid(spec: dict[str, Any]) -> None:
    checked = 0
    for _, _, op in operations(spec):
        for status, response in op["responses"].items():
            for media in response.get("content", {}).values():
                if "example" in media:
                    problems = errors_of(spec, media["schema"], media["example"])
                    assert not problems, (op["operationId"], status, problems)
                    checked += 1
                elif status.startswith(("4", "5")) and "Problem" in str(media.get("schema")):
                    raise AssertionError(f"{op['operationId']} {status}: no problem example")
    assert checked > 100


def test_main_operations_show_their_success_body(spec: dict[str, Any]) -> None:
    for path, method, op in operations(spec):
        if op["operationId"] in (
            "createSession",
            "appendItems",
            "postContext",
            "compactSession",
            "createSnapshot",
            "restoreSession",
        ):
            success = next(r for s, r in op["responses"].items() if s.startswith("2"))
            assert "example" in success["content"]["application/json"], (path, method)


# --- the append schema and the ingest agree ---------------------------------------------------
#
# The published append schema (app/api/append_schemas.py) is what generated clients validate
# against; the server validates with the formats' ingest. Every provider item or message the
# official SDKs can build is accepted by the ingest and valid in the schema, every SDK type has
# a member of its own in the schema, and bodies generated from the schema (valid and invalid)
# get the verdict from the ingest that the schema gives them.


def _append_schema(spec: dict[str, Any]) -> dict[str, Any]:
    op = spec["paths"]["/v1/sessions/{session_id}/items"]["post"]
    return op["requestBody"]["content"]["application/json"]["schema"]


def _ingest_verdict(body: Any) -> str | None:
    """``None`` if the server's parser and ingest take ``body``, else why not."""
    try:
        parsed = ItemsAppend.model_validate(body)
        ingest(
            parsed.format,
            parsed.items,
            system=parsed.system,
            system_instruction=parsed.system_instruction,
        )
    except (ValidationError, InvalidInput) as exc:
        return str(exc)[:500]
    return None


_SCALARS: dict[Any, list[Any]] = {str: ["text"], int: [1], float: [1.5], bool: [True]}
_MAX_EXAMPLES = 60


def sdk_examples(tp: Any, depth: int = 0) -> list[Any]:
    """JSON examples of an SDK request type (a ``TypedDict`` tree): one with every key set, and
    variants that each take another member of one nested union or literal, so that every
    member and every value shows up. Types with no JSON form (files, response models) give
    none; recursion stops at depth 6."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Annotated:
        return sdk_examples(args[0], depth)
    if tp is type(None):
        return [None]
    if tp in _SCALARS:
        return list(_SCALARS[tp])
    if tp is object:
        return [{}]
    if origin is typing.Literal:
        return list(args)
    if origin in (typing.Union, types.UnionType):
        out = [e for member in args for e in sdk_examples(member, depth)]
        return out[:_MAX_EXAMPLES]
    if origin in (list, cabc.Iterable, cabc.Sequence):
        return [[e] for e in sdk_examples(args[0], depth + 1)][:_MAX_EXAMPLES]
    if origin in (dict, cabc.Mapping):
        return [{}]
    if not te.is_typeddict(tp) or depth > 6:
        return []
    required = tp.__required_keys__
    choices: dict[str, list[Any]] = {}
    for key, hint in te.get_type_hints(tp).items():
        values = sdk_examples(hint, depth + 1)
        if values:
            choices[key] = values
        elif key in required:
            return []  # no JSON form
    base = {key: values[0] for key, values in choices.items()}
    out = [base]
    if depth <= 3:
        out += [{**base, key: v} for key, values in choices.items() for v in values[1:]]
    return out[:_MAX_EXAMPLES]


def _union_members(union: Any) -> list[Any]:
    return [m for m in typing.get_args(union) if te.is_typeddict(m)]


def sdk_bodies() -> list[tuple[str, dict[str, Any]]]:
    """(SDK type name, append body holding one example of it), for every member of the
    Responses input item union, the Chat Completions message union, the Anthropic message
    union and content block union (each block in a user and in an assistant message), and the
    Anthropic system."""
    bodies: list[tuple[str, dict[str, Any]]] = []
    for member in _union_members(ResponseInputItemParam):
        for example in sdk_examples(member):
            bodies.append((member.__name__, {"format": "openai-responses", "items": [example]}))
    for member in _union_members(oc.ChatCompletionMessageParam):
        for example in sdk_examples(member):
            bodies.append((member.__name__, {"format": "openai-chat", "items": [example]}))
    for member in _union_members(at.MessageParam):
        for example in sdk_examples(member):
            bodies.append((member.__name__, {"format": "anthropic", "items": [example]}))
    for member in _union_members(at.ContentBlockParam):
        for example in sdk_examples(member):
            for role in ("user", "assistant"):
                message = {"role": role, "content": [example]}
                bodies.append((member.__name__, {"format": "anthropic", "items": [message]}))
    for example in sdk_examples(list[at.TextBlockParam]):
        user = {"role": "user", "content": "Hi"}
        bodies.append(("system", {"format": "anthropic", "system": example, "items": [user]}))
    return bodies


def test_the_append_schema_and_the_ingest_agree_on_every_sdk_item(spec: dict[str, Any]) -> None:
    """Every example is valid in the schema exactly when the ingest accepts it (whether the
    ingest accepts each SDK type is tests/api and tests/domain's to say)."""
    bodies = sdk_bodies()
    names = {name for name, _ in bodies}
    responses = {m.__name__ for m in _union_members(ResponseInputItemParam)}
    blocks = {m.__name__ for m in _union_members(at.ContentBlockParam)}
    assert responses | blocks <= names, (responses | blocks) - names
    # jsonschema_rs (schemathesis' validator): a thousand times faster on these unions
    validator = jsonschema_rs.Draft202012Validator(
        {**_append_schema(spec), "components": spec["components"]}
    )
    accepted = 0
    disagree: list[tuple[str, dict[str, Any], str | None]] = []
    for name, body in bodies:
        refused = _ingest_verdict(body)
        accepted += refused is None
        if (refused is None) != validator.is_valid(body):
            disagree.append((name, body, refused))
    assert not disagree, f"{len(disagree)} disagreement(s), e.g. {disagree[:3]}"
    assert accepted > 500, accepted


def _members(spec: dict[str, Any], schema: dict[str, Any]) -> list[dict[str, Any]]:
    """The object members of a union (``anyOf`` / ``oneOf``) of component references."""
    refs = schema.get("anyOf") or schema.get("oneOf") or [schema]
    return [spec["components"]["schemas"][r["$ref"].rsplit("/", 1)[1]] for r in refs if "$ref" in r]


def _named(member: dict[str, Any], key: str) -> set[str]:
    """The values a member names for ``key`` (``const`` or ``enum``, possibly nullable)."""
    prop = member.get("properties", {}).get(key, {})
    out: set[str] = set()
    for option in prop.get("anyOf", [prop]):
        out |= {option["const"]} if "const" in option else set(option.get("enum", []))
    return out


def _literal_values(tp: Any, key: str) -> set[str]:
    hint = te.get_type_hints(tp)[key]
    while typing.get_origin(hint) is not typing.Literal:
        hint = typing.get_args(hint)[0]
    return set(typing.get_args(hint))


def test_every_sdk_type_has_a_member_of_its_own(spec: dict[str, Any]) -> None:
    """New SDK types fail here until the schema documents them (the catch-all members already
    take them, so clients are never blocked)."""
    components = spec["components"]["schemas"]

    def items_of(append: str) -> list[dict[str, Any]]:
        return _members(spec, components[append]["properties"]["items"]["items"])

    responses = set().union(*(_named(m, "type") for m in items_of("OpenAIResponsesAppend")))
    sdk = set().union(*(_literal_values(m, "type") for m in _union_members(ResponseInputItemParam)))
    assert sdk <= responses, sdk - responses

    chat = items_of("OpenAIChatAppend")
    roles = set().union(*(_named(m, "role") for m in chat))
    sdk_roles = set().union(
        *(_literal_values(m, "role") for m in _union_members(oc.ChatCompletionMessageParam))
    )
    assert sdk_roles <= roles, sdk_roles - roles
    user = next(m for m in chat if _named(m, "role") == {"user"})
    parts = _members(spec, user["properties"]["content"]["anyOf"][1]["items"])
    part_types = set().union(*(_named(p, "type") for p in parts))
    sdk_parts = {"refusal"} | set().union(
        *(_literal_values(m, "type") for m in _union_members(oc.ChatCompletionContentPartParam))
    )
    assert sdk_parts <= part_types, sdk_parts - part_types

    anthropic = items_of("AnthropicAppend")
    assert set().union(*(_named(m, "role") for m in anthropic)) == {"user", "assistant", "system"}
    block_types: set[str] = set()
    for message in anthropic:
        content = message["properties"]["content"]["anyOf"]
        for option in content:
            if option.get("type") == "array":
                block_types |= set().union(
                    *(_named(b, "type") for b in _members(spec, option["items"]))
                )
    sdk_blocks = set().union(
        *(_literal_values(m, "type") for m in _union_members(at.ContentBlockParam))
    )
    assert sdk_blocks <= block_types, sdk_blocks - block_types


AGREEMENT_EXAMPLES = 80


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_append_bodies_generated_from_the_schema_get_its_verdict(
    spec: dict[str, Any], mode: GenerationMode
) -> None:
    """Schemathesis' generator (valid bodies, and bodies it makes invalid and checks are
    invalid) against the server's parser and ingest, in process: many more bodies than the
    live fuzz test can send, all on the append body."""
    append = spec["paths"]["/v1/sessions/{session_id}/items"]["post"]
    document = {
        "openapi": spec["openapi"],
        "info": spec["info"],
        "components": spec["components"],
        "paths": {
            "/append": {
                "post": {
                    "requestBody": append["requestBody"],
                    "responses": {"201": {"description": "Appended"}},
                }
            }
        },
    }
    config = schemathesis.Config.from_dict({"generation": {"allow-x00": False}})
    operation = schemathesis.openapi.from_dict(document, config=config)["/append"]["POST"]
    wrong: dict[str, Any] = {}
    seen = 0

    @settings(
        max_examples=AGREEMENT_EXAMPLES,
        deadline=None,
        database=None,
        derandomize=True,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=operation.as_strategy(generation_mode=mode))
    def check(case: schemathesis.Case) -> None:
        nonlocal seen
        seen += 1
        refused = _ingest_verdict(case.body)
        if (refused is None) != (mode == GenerationMode.POSITIVE):
            wrong.setdefault(str(refused)[:200], case.body)

    check()
    assert not wrong, (
        f"{mode.value}: {len(wrong)} kind(s) of disagreement: {list(wrong.items())[:3]}"
    )
    assert seen >= AGREEMENT_EXAMPLES // 2, seen


@pytest.mark.parametrize("part_type", ["", "x" * 65], ids=["empty", "longer than 64"])
def test_a_canonical_part_type_outside_1_to_64_characters_is_refused_as_the_schema_says(
    spec: dict[str, Any], part_type: str
) -> None:
    """Found by the negative generator above (which one it draws depends on the hash seed):
    ``OtherPartCreate.type`` is 1-64 characters in the spec, and the ingest took any string."""
    schema = spec["components"]["schemas"]["OtherPartCreate"]["properties"]["type"]
    assert (schema["minLength"], schema["maxLength"]) == (1, 64)
    for item in (
        {"type": "function_call_output", "call_id": "0", "output": [{"type": part_type}]},
        {"type": "message", "role": "user", "content": [{"type": part_type, "file_id": "f"}]},
    ):
        assert _ingest_verdict({"items": [item]}) is not None, item
    assert _ingest_verdict({"items": [{"type": "message", "role": "user",
                                       "content": [{"type": "x" * 64}]}]}) is None  # fmt: skip
