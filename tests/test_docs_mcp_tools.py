"""docs/mcp.md's tool table is the MCP server's tool list: a row for every tool and no other,
each with the key scope the tool asks for and every argument it takes, and the
``idempotency_key`` paragraph naming exactly the tools that take one. Its formats are those
the service renders."""

from __future__ import annotations

import asyncio
import re

from app.domain.formats import FORMAT_NAMES
from app.mcp.tools import build_server
from tests.support.services import ROOT

ROW = re.compile(r"^\|\s*`([a-z_]+)`\s*\|\s*(\w+)\s*\|(.*)\|(.*)\|\s*$")
# Said once for every tool in the prose above and below the table.
EVERY_TOOL = {"session_id", "idempotency_key"}


def _doc() -> str:
    return (ROOT / "docs" / "mcp.md").read_text(encoding="utf-8")


def _tools() -> dict[str, list[str]]:
    tools = asyncio.run(build_server().list_tools())
    return {t.name: list(t.input_schema.get("properties", {})) for t in tools}


def _rows() -> dict[str, tuple[str, str]]:
    rows: dict[str, tuple[str, str]] = {}
    for line in _doc().splitlines():
        match = ROW.match(line)
        if match:
            rows[match.group(1)] = (match.group(2), match.group(3))
    return rows


def test_every_tool_has_a_row_with_every_argument() -> None:
    tools, rows = _tools(), _rows()
    assert set(rows) == set(tools), (sorted(rows), sorted(tools))
    missing = {
        name: [a for a in args if a not in EVERY_TOOL and f"`{a}`" not in rows[name][1]]
        for name, args in tools.items()
    }
    assert not any(missing.values()), f"arguments docs/mcp.md does not name: {missing}"


def test_the_scope_column_is_the_scope_each_tool_asks_for() -> None:
    source = (ROOT / "app" / "mcp" / "tools.py").read_text(encoding="utf-8")
    # Each tool is an `@server.tool` function ending in `return await _call(ctx, "<scope>", run)`.
    scopes = dict(
        re.search(r'async def (\w+)\(.*?_call\(ctx, "(\w+)"', chunk, re.S).groups()  # type: ignore[union-attr]
        for chunk in source.split("@server.tool")[1:]
    )
    rows = _rows()
    assert scopes.keys() == rows.keys()
    assert {name: rows[name][0] for name in rows} == scopes


def test_the_idempotency_paragraph_names_the_tools_that_take_a_key() -> None:
    doc = _doc()
    start = doc.index("**`idempotency_key`**")
    paragraph = doc[doc.rindex("\n\n", 0, start) : doc.index("\n\n", start)]
    named = set(re.findall(r"`([a-z_]+)`", paragraph)) & set(_tools())
    takes = {name for name, args in _tools().items() if "idempotency_key" in args}
    assert named == takes


def test_every_format_is_named() -> None:
    doc = _doc()
    assert set(FORMAT_NAMES) == {
        "canonical",
        "openai-chat",
        "openai-responses",
        "anthropic",
        "gemini",
    }
    missing = [name for name in FORMAT_NAMES if f"`{name}`" not in doc]
    assert not missing, f"formats docs/mcp.md does not name: {missing}"
