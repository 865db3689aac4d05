"""Migration 0003 keeps the items stored before it: they read back as the canonical items
they were, and snapshot documents stay restorable."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic import command

from app.store.db import Store
from app.store.items import ItemRepository
from app.store.migrate import alembic_config, upgrade
from app.store.snapshots import SnapshotRepository
from app.store.urls import sync_url
from tests.support.services import create_pg_database, drop_pg_database


@pytest.fixture(params=["sqlite", "postgres"])
def database_at_0002(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        url = f"sqlite+aiosqlite:///{tmp_path / 'old.db'}"
        upgrade(url, "0002")
        yield url
        return
    url, name = create_pg_database()
    command.downgrade(alembic_config(url), "0002")
    yield url
    drop_pg_database(name)


async def test_rows_stored_before_0003_read_back_unchanged(database_at_0002: str) -> None:
    now = datetime.now(UTC)
    engine = sa.create_engine(sync_url(database_at_0002))
    bodies = [
        '{"type": "message", "role": "user", "content": [{"type": "text", "text": "hi"}, '
        '{"type": "image", "url": "https://x.test/a.png", "detail": "low"}]}',
        '{"type": "function_call", "call_id": "c", "name": "dig", "arguments": "{}"}',
        '{"type": "function_call_output", "call_id": "c", "output": "done"}',
    ]
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO sessions (tenant_id, id, version, metadata, config, item_count, "
                "token_count, char_count, last_seq, event_seq, epoch, created_at, updated_at) "
                "VALUES ('default', 'old', 1, '{}', '{}', 3, 0, 0, 3, 1, 0, :now, :now)"
            ),
            {"now": now},
        )
        for seq, body in enumerate(bodies, start=1):
            conn.execute(
                sa.text(
                    "INSERT INTO items (tenant_id, session_id, seq, item_id, type, body, tokens, "
                    "chars, pinned, metadata, archived, created_at) VALUES ('default', 'old', "
                    ":seq, :id, 'message', :body, 1, 1, false, '{}', false, :now)"
                ),
                {"seq": seq, "id": f"i{seq}", "body": body, "now": now},
            )
        conn.execute(
            sa.text(
                "INSERT INTO snapshots (tenant_id, session_id, id, version, item_count, document, "
                "created_at) VALUES ('default', 'old', 'snp_1', 1, 0, :doc, :now)"
            ),
            {
                "doc": '{"schema_version": 1, "kind": "session-memory.snapshot", "items": []}',
                "now": now,
            },
        )
    engine.dispose()

    upgrade(database_at_0002)
    store = Store.from_url(database_at_0002)
    try:
        async with store.read() as db:
            items = await ItemRepository(db).list_live("default", "old", after_seq=None, limit=10)
            document = await SnapshotRepository(db).document("default", "old", "snp_1")
    finally:
        await store.dispose()
    assert [i.format for i in items] == ["canonical"] * 3
    assert [i.record for i in items] == [None] * 3
    wire = [
        {k: v for k, v in i.to_wire().items() if k in ("type", "content", "call_id", "output")}
        for i in items
    ]
    assert wire == [
        {
            "type": "message",
            "content": [
                {"type": "text", "text": "hi"},
                {"type": "image", "url": "https://x.test/a.png", "detail": "low"},
            ],
        },
        {"type": "function_call", "call_id": "c"},
        {"type": "function_call_output", "call_id": "c", "output": "done"},
    ]
    assert document == {"schema_version": 1, "kind": "session-memory.snapshot", "items": []}
