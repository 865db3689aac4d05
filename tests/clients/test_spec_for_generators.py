"""The OpenAPI document is made for client generators: readable unique operationIds, declared
tags, examples that are valid against the schemas they illustrate, and errors as problems."""

from __future__ import annotations

import re
from typing import Any

import pytest
from jsonschema import Draft202012Validator

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
