"""The committed OpenAPI document is the app's: clients are generated from it."""

from __future__ import annotations

import json

from app.main import create_app
from tests.conftest import ROOT


def test_committed_spec_matches_the_app() -> None:
    committed = json.loads((ROOT / "openapi" / "openapi.json").read_text())
    assert committed == create_app().openapi(), (
        "openapi/openapi.json is stale: run `session-memory openapi --out openapi/openapi.json`"
    )


def test_operations_are_listed_in_documentation_order_not_matching_order() -> None:
    """The hot routers are matched first (app.main.HOT_ROUTERS); the document still lists
    sessions first and each path's operations as the committed file does."""
    committed = json.loads((ROOT / "openapi" / "openapi.json").read_text())["paths"]
    served = create_app().openapi()["paths"]
    assert list(served)[0] == "/v1/sessions"
    assert [(p, list(ops)) for p, ops in served.items()] == [
        (p, list(ops)) for p, ops in committed.items()
    ]


def test_every_error_response_uses_the_problem_schema() -> None:
    spec = create_app().openapi()
    for path, methods in spec["paths"].items():
        for method, op in methods.items():
            assert op.get("operationId"), (path, method)
            for status, response in op["responses"].items():
                if status.startswith(("4", "5")) and path not in ("/readyz",):
                    content = response.get("content", {})
                    assert "application/problem+json" in content, (path, method, status)
