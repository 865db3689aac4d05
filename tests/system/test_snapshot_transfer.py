"""Export a snapshot from one server and import it into another, on another database (SQLite
and Postgres), through the API only: the sessions end up with the same working memory and
summary, in both directions."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.support.services import ServerProcess

ITEMS: list[dict[str, Any]] = [
    {"type": "message", "role": "system", "content": "You are a careful coder.", "pinned": True},
    {"type": "message", "role": "user", "content": "Fix the failing test in tests/test_a.py",
     "id": "u1", "metadata": {"turn": 1}},
    {"type": "reasoning", "summary": ["look at the test first"], "content": "read it"},
    {"type": "function_call", "call_id": "c1", "name": "read_file",
     "arguments": '{"path": "tests/test_a.py"}'},
    {"type": "function_call_output", "call_id": "c1", "output": "def test_a(): assert 1 == 2"},
    {"type": "message", "role": "assistant",
     "content": [{"type": "text", "text": "The assertion is wrong."},
                 {"type": "image", "url": "https://example.com/diff.png", "detail": "low"}]},
    {"type": "message", "role": "user", "content": "Résumé: ünïcödé and emoji 🎉 survive"},
]


@pytest.fixture(scope="module")
def sqlite_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A second server on its own SQLite file with the in-process lock (the embedded mode)."""
    root = tmp_path_factory.mktemp("sqlite-server")
    server = ServerProcess(
        env={"DATABASE_URL": f"sqlite+aiosqlite:///{root / 'memory.db'}", "LOG_LEVEL": "warning"},
        log_path=root / "server.log",
    )
    server.start()
    yield server
    server.stop()


def _same(item: dict[str, Any]) -> dict[str, Any]:
    """What must survive a transfer: everything but the seq the target session assigns."""
    return {k: v for k, v in item.items() if k != "seq"}


def _items(client: httpx.Client, sid: str) -> list[dict[str, Any]]:
    r = client.get(f"/v1/sessions/{sid}/items", params={"limit": 1000})
    assert r.status_code == 200, r.text
    return r.json()["items"]


def assert_same_state(source: httpx.Client, source_sid: str, target: httpx.Client, target_sid: str) -> None:
    """Identical working memory, summary and context projections on both servers."""
    assert [_same(i) for i in _items(target, target_sid)] == [_same(i) for i in _items(source, source_sid)]
    a = source.get(f"/v1/sessions/{source_sid}").json()
    b = target.get(f"/v1/sessions/{target_sid}").json()
    for key in ("summary", "config", "item_count", "token_count", "char_count"):
        assert a[key] == b[key], key
    for fmt in ("canonical", "openai-chat", "openai-responses", "anthropic"):
        for params in ({}, {"max_tokens": 120}, {"max_items": 5, "max_recent_tool_results": 0}):
            query = {"format": fmt, **params}
            pa = source.get(f"/v1/sessions/{source_sid}/context", params=query).json()
            pb = target.get(f"/v1/sessions/{target_sid}/context", params=query).json()
            for body in (pa, pb):
                body.pop("version")
                if fmt == "canonical":  # seqs and timestamps are the database's own
                    for item in body["items"]:
                        item.pop("seq", None), item.pop("created_at", None)
                    body["report"].pop("dropped_ranges")
            assert pa == pb, (fmt, params)


def _transfer(source: httpx.Client, target: httpx.Client) -> tuple[str, str]:
    sid = f"xfer-{uuid.uuid4().hex[:8]}"
    assert source.post("/v1/sessions", json={"id": sid, "config": {"context": {"max_items": 40}}}).status_code == 201
    r = source.post(f"/v1/sessions/{sid}/items", json={"items": ITEMS})
    assert r.status_code == 201, r.text
    assert source.patch(f"/v1/sessions/{sid}", json={"summary": "## Goal\nFix the test"}).status_code == 200
    snap = source.post(f"/v1/sessions/{sid}/snapshots", json={"label": "export"}).json()
    document = source.get(f"/v1/sessions/{sid}/snapshots/{snap['id']}").json()

    target_sid = f"{sid}-imported"
    assert target.post("/v1/sessions", json={"id": target_sid}).status_code == 201
    r = target.post(f"/v1/sessions/{target_sid}/restore", json={"snapshot": document})
    assert r.status_code == 200, r.text
    assert r.json()["restored_items"] == len(ITEMS)
    return sid, target_sid


def test_export_from_sqlite_import_into_postgres_and_back(
    sqlite_server: ServerProcess, pg_server: ServerProcess
) -> None:
    with httpx.Client(base_url=sqlite_server.url, timeout=30) as lite, \
            httpx.Client(base_url=pg_server.url, timeout=30) as pg:
        sid, imported = _transfer(lite, pg)
        assert_same_state(lite, sid, pg, imported)
        back_sid, back = _transfer(pg, lite)
        assert_same_state(pg, back_sid, lite, back)

        # the imported session is a full citizen: its own snapshot exports the same document body
        snap = pg.post(f"/v1/sessions/{imported}/snapshots", json={}).json()
        again = pg.get(f"/v1/sessions/{imported}/snapshots/{snap['id']}").json()
        original = lite.get(f"/v1/sessions/{sid}/snapshots").json()["items"][0]
        first = lite.get(f"/v1/sessions/{sid}/snapshots/{original['id']}").json()
        assert [_same(i) for i in again["items"]] == [_same(i) for i in first["items"]]
        assert again["summary"] == first["summary"] and again["config"] == first["config"]
