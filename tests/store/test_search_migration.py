"""Migration 0002 indexes the items that were stored before it: they are found by search."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic import command

from app.store.db import Store
from app.store.migrate import alembic_config, upgrade
from app.store.search import SearchRepository
from app.store.urls import sync_url
from tests.support.services import create_pg_database, drop_pg_database


@pytest.fixture(params=["sqlite", "postgres"])
def database_at_0001(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database at revision 0001 (Postgres: migrated to head, then downgraded through 0002)."""
    if request.param == "sqlite":
        url = f"sqlite+aiosqlite:///{tmp_path / 'old.db'}"
        upgrade(url, "0001")
        yield url
        return
    url, name = create_pg_database()
    command.downgrade(alembic_config(url), "0001")
    yield url
    drop_pg_database(name)


async def test_items_stored_before_0002_are_searchable(database_at_0001: str) -> None:
    now = datetime.now(UTC)
    engine = sa.create_engine(sync_url(database_at_0001))
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO sessions (tenant_id, id, version, metadata, config, item_count, "
                "token_count, char_count, last_seq, event_seq, epoch, created_at, updated_at) "
                "VALUES ('default', 'old', 1, '{}', '{}', 2, 0, 0, 2, 1, 0, :now, :now)"
            ),
            {"now": now},
        )
        for seq, body in (
            (1, '{"type": "message", "role": "user", "content": "the wombat burrows"}'),
            (2, '{"type": "function_call", "call_id": "c", "name": "dig", "arguments": "src/tunnel.py"}'),
        ):
            conn.execute(
                sa.text(
                    "INSERT INTO items (tenant_id, session_id, seq, item_id, type, body, tokens, "
                    "chars, pinned, metadata, archived, created_at) VALUES ('default', 'old', "
                    ":seq, :id, 'message', :body, 1, 1, false, '{}', false, :now)"
                ),
                {"seq": seq, "id": f"i{seq}", "body": body, "now": now},
            )
    engine.dispose()

    upgrade(database_at_0001)
    store = Store.from_url(database_at_0001)
    try:
        async with store.read() as db:
            repo = SearchRepository(db)
            hits = await repo.search("default", "wombat", include_archived=True, limit=5)
            assert [h.item.id for h in hits] == ["i1"]
            hits = await repo.search("default", "tunnel.py", include_archived=True, limit=5)
            assert [h.item.id for h in hits] == ["i2"]
            assert await repo.search("other-tenant", "wombat", include_archived=True, limit=5) == []
    finally:
        await store.dispose()
