"""docs/index.md names everything the API has, and the API guide shows every path.

- Every format of ``app.domain.formats`` is named in the index.
- Every operation of the committed ``openapi/openapi.json`` is listed in the index as
  ``METHOD /path``; every other entry point the index lists (MCP, the inspector, metrics, the
  API's own pages) is one the app answers, on both backends.
- Every path of the OpenAPI document appears in docs/api-guide.md: as its template (any
  parameter name in braces) or in a URL with concrete ids (a curl line).
- Every ``http`` block of the docs (a request in brief: ``METHOD /path``, then its JSON body)
  is an operation of the OpenAPI document, with a body that is JSON.
"""

from __future__ import annotations

import json
import re

import httpx

from app.domain.formats import FORMAT_NAMES
from tests.support.services import ROOT
from tests.test_readme_snippets import extract_snippets

OPERATION = re.compile(r"`(GET|POST|PUT|PATCH|DELETE) (/[^`\s]*)`")


def _spec_operations() -> set[tuple[str, str]]:
    spec = json.loads((ROOT / "openapi" / "openapi.json").read_text(encoding="utf-8"))
    return {(method.upper(), path) for path, ops in spec["paths"].items() for method in ops}


def _index() -> str:
    return (ROOT / "docs" / "index.md").read_text(encoding="utf-8")


def test_the_index_names_every_format() -> None:
    assert len(FORMAT_NAMES) == 5
    missing = [name for name in FORMAT_NAMES if f"`{name}`" not in _index()]
    assert not missing, f"formats docs/index.md does not name: {missing}"


def test_the_index_lists_every_operation() -> None:
    listed = set(OPERATION.findall(_index()))
    missing = sorted(_spec_operations() - listed)
    assert not missing, f"operations docs/index.md does not list: {missing}"


async def test_every_other_entry_point_the_index_lists_answers(client: httpx.AsyncClient) -> None:
    others = sorted(set(OPERATION.findall(_index())) - _spec_operations())
    assert {path for _, path in others} >= {"/mcp", "/ui/", "/metrics", "/docs"}, others
    for method, path in others:
        r = await client.request(method, path, json={} if method == "POST" else None)
        assert r.status_code not in (404, 405), (method, path, r.status_code)


def _mentioned(path: str, text: str) -> bool:
    parts = re.split(r"\{[^}]+\}", path)
    template = r"\{[A-Za-z_]+\}".join(map(re.escape, parts))
    concrete = r"[^/\s'\"{}?]+".join(map(re.escape, parts))
    return bool(re.search(rf"(?:{template}|{concrete})(?=[\s`'\"?)#.,]|$)", text, re.M))


def test_the_api_guide_shows_every_path() -> None:
    guide = (ROOT / "docs" / "api-guide.md").read_text(encoding="utf-8")
    assert _mentioned(
        "/v1/sessions/{session_id}/context", "curl -s 'localhost:8080/v1/sessions/g/context?x'"
    )
    assert not _mentioned("/v1/sessions/{session_id}/context", "/v1/sessions/g/contexts")
    missing = sorted({path for _, path in _spec_operations() if not _mentioned(path, guide)})
    assert not missing, f"paths docs/api-guide.md does not show: {missing}"


def _operation_of(method: str, concrete: str) -> bool:
    for spec_method, path in _spec_operations():
        parts = re.split(r"\{[^}]+\}", path)
        if spec_method == method and re.fullmatch(r"[^/?#]+".join(map(re.escape, parts)), concrete):
            return True
    return False


def test_every_http_block_is_an_operation_with_a_json_body() -> None:
    assert _operation_of("GET", "/v1/sessions/a/context") and not _operation_of(
        "PUT", "/v1/sessions/a"
    )
    blocks = [
        (page.relative_to(ROOT).as_posix(), snippet)
        for page in sorted((ROOT / "docs").glob("*.md"))
        for snippet in extract_snippets(page)
        if snippet.lang == "http"
    ]
    assert len(blocks) >= 5
    wrong: list[str] = []
    for page, snippet in blocks:
        request, *body = snippet.code.strip().splitlines()
        method, target = request.split(" ", 1)
        if not _operation_of(method, target.split("?", 1)[0]):
            wrong.append(
                f"{page}:{snippet.line}: {request} is no operation of openapi/openapi.json"
            )
        if body:
            try:
                json.loads("\n".join(body))
            except ValueError as exc:
                wrong.append(f"{page}:{snippet.line}: the body is not JSON ({exc})")
    assert not wrong, "\n".join(wrong)
