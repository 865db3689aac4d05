"""Every response a test receives must be what the committed OpenAPI document promises.

``check_response`` finds the operation of a response (its path template and method), the
response its status declares, and validates a JSON body against that response's schema
(OpenAPI 3.1 schemas are JSON Schema 2020-12). A body the document does not admit, a status it
does not declare, or a JSON body where it declares none raises ``SpecViolation``, from the
httpx event hook the test clients carry (``ASYNC_HOOKS``, ``SYNC_HOOKS``): the test that got
the response fails at the request that got it.

Paths outside the document (``/mcp``, ``/ui/``, ``/docs``, ``/openapi.json``) are not checked,
nor bodies that are not JSON (HTML, static assets, an empty 204).
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Any

import httpx
from jsonschema import Draft202012Validator

SPEC_PATH = Path(__file__).resolve().parents[2] / "openapi" / "openapi.json"


class SpecViolation(AssertionError):
    """A response the OpenAPI document does not describe."""


@functools.cache
def _spec() -> dict[str, Any]:
    spec: dict[str, Any] = json.loads(SPEC_PATH.read_text())
    return spec


@functools.cache
def _templates() -> list[tuple[re.Pattern[str], str, int]]:
    """(regex, template, number of parameters), literal templates first."""
    out = []
    for template in _spec()["paths"]:
        pattern = re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(template))
        out.append((re.compile(f"^{pattern}$"), template, template.count("{")))
    return sorted(out, key=lambda t: t[2])


@functools.cache
def _validator(template: str, method: str, status: str, media_type: str) -> Draft202012Validator:
    schema = _spec()["paths"][template][method]["responses"][status]["content"][media_type][
        "schema"
    ]
    # $refs point at "#/components/...": resolve them against a root that holds them.
    return Draft202012Validator({**schema, "components": _spec()["components"]})


def check_response(method: str, path: str, status: int, content_type: str, body: bytes) -> None:
    method = method.lower()
    found = [t for regex, t, _ in _templates() if regex.match(path)]
    found = [t for t in found if method in _spec()["paths"][t]]
    if not found or method == "head":
        return
    template = found[0]
    where = f"{method.upper()} {path} ({template}) -> {status}"
    responses = _spec()["paths"][template][method]["responses"]
    key = next((k for k in (str(status), f"{str(status)[0]}XX", "default") if k in responses), None)
    if key is None and status == 500:
        # An unexpected error: no operation declares one, but its body is still a problem
        # document (a test that provokes one asserts the status itself).
        _check_body(_problem_validator(), body, where)
        return
    if key is None:
        raise SpecViolation(f"{where}: status not declared (declared: {sorted(responses)})")
    declared = responses[key]
    media_type = content_type.split(";", 1)[0].strip().lower()
    is_json = media_type == "application/json" or media_type.endswith("+json")
    if not is_json or not body:
        return
    content = declared.get("content") or {}
    if media_type not in content:
        raise SpecViolation(
            f"{where}: a {media_type} body, but the document declares {sorted(content) or 'none'}"
        )
    if "schema" not in content[media_type]:
        return
    _check_body(_validator(template, method, key, media_type), body, where)


@functools.cache
def _problem_validator() -> Draft202012Validator:
    problem = {"$ref": "#/components/schemas/Problem"}
    return Draft202012Validator({**problem, "components": _spec()["components"]})


def _check_body(validator: Draft202012Validator, body: bytes, where: str) -> None:
    errors = sorted(
        validator.iter_errors(json.loads(body)), key=lambda e: str(list(e.absolute_path))
    )
    if errors:
        shown = "\n".join(
            f"  at {'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message[:300]}"
            for e in errors[:5]
        )
        raise SpecViolation(f"{where}: the body does not match the document:\n{shown}")


async def _check_async(response: httpx.Response) -> None:
    await response.aread()
    _check(response)


def _check_sync(response: httpx.Response) -> None:
    response.read()
    _check(response)


def _check(response: httpx.Response) -> None:
    check_response(
        response.request.method,
        response.request.url.path,
        response.status_code,
        response.headers.get("content-type", ""),
        response.content,
    )


ASYNC_HOOKS: dict[str, list[Any]] = {"response": [_check_async]}
SYNC_HOOKS: dict[str, list[Any]] = {"response": [_check_sync]}
