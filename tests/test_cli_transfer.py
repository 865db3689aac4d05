"""`session-memory export` / `import`: a session moves between databases through the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from app.main import create_app
from app.settings import Settings
from tests.conftest import ROOT
from tests.support.spec_check import ASYNC_HOOKS


def cli(*args: str, database_url: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DATABASE_URL": database_url}
    env.pop("REDIS_URL", None)
    return subprocess.run(
        [sys.executable, "-m", "app.cli", *args],
        cwd=ROOT, env=env, input=stdin, capture_output=True, text=True, timeout=120,
    )


async def items_of(database_url: str, session_id: str) -> tuple[dict, list[dict]]:
    app = create_app(Settings(database_url=database_url))
    async with app.router.lifespan_context(app):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://localhost", event_hooks=ASYNC_HOOKS) as client:
            session = (await client.get(f"/v1/sessions/{session_id}")).json()
            items = (await client.get(f"/v1/sessions/{session_id}/items", params={"limit": 1000})).json()["items"]
            return session, items


async def test_export_then_import_into_postgres(tmp_path: Path, pg_database: str, sid: str) -> None:
    source = f"sqlite+aiosqlite:///{tmp_path / 'source.db'}"
    assert cli("migrate", database_url=source).returncode == 0
    app = create_app(Settings(database_url=source))
    async with app.router.lifespan_context(app):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://localhost", event_hooks=ASYNC_HOOKS) as client:
            await client.post("/v1/sessions", json={"id": sid, "summary": "## Goal\nship it"})
            r = await client.post(f"/v1/sessions/{sid}/items", json={"items": [
                {"type": "message", "role": "user", "content": "Read a.py", "id": "u1", "metadata": {"n": 10**30}},
                {"type": "function_call", "call_id": "c1", "name": "read", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "c1", "output": "print(1)"},
            ]})
            assert r.status_code == 201, r.text

    out = tmp_path / "doc.json"
    done = cli("export", sid, "--out", str(out), database_url=source)
    assert done.returncode == 0, done.stderr
    document = json.loads(out.read_text())
    assert document["schema_version"] == 1 and len(document["items"]) == 3

    done = cli("import", f"{sid}-copy", "-", database_url=pg_database, stdin=out.read_text())
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["restored_items"] == 3

    (a, items_a), (b, items_b) = await items_of(source, sid), await items_of(pg_database, f"{sid}-copy")
    strip = lambda items: [{k: v for k, v in i.items() if k not in ("seq", "created_at")} for i in items]  # noqa: E731
    assert strip(items_b) == strip(items_a)
    assert items_b[0]["metadata"] == {"n": 10**30}
    assert b["summary"] == a["summary"] == "## Goal\nship it"


@pytest.mark.parametrize("args", [["import", "missing", "-", "--no-create"], ["export", "missing"]])
def test_refusals_are_clear(tmp_path: Path, args: list[str]) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'db.db'}"
    done = cli(*args, database_url=url, stdin='{"schema_version": 1, "items": []}')
    assert done.returncode == 2  # one line, like every CLI error (tests/test_cli_errors.py)
    assert "error: session 'missing' not found" in done.stderr
