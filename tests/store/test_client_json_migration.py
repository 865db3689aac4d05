"""Migration 0008 keeps the metadata and config stored before it, and from then on Postgres
keeps what a client sends as sent (``json``, not JSONB)."""

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
from app.store.sessions import SessionRepository
from app.store.urls import sync_url
from tests.support.services import create_pg_database, drop_pg_database


@pytest.fixture(params=["sqlite", "postgres"])
def database_at_0007(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database at revision 0007 (Postgres: migrated to head, then downgraded through 0008)."""
    if request.param == "sqlite":
        url = f"sqlite+aiosqlite:///{tmp_path / 'old.db'}"
        upgrade(url, "0007")
        yield url
        return
    url, name = create_pg_database()
    command.downgrade(alembic_config(url), "0007")
    yield url
    drop_pg_database(name)


async def test_rows_stored_before_0008_read_back_and_new_ones_keep_their_numbers(
    database_at_0007: str,
) -> None:
    now = datetime.now(UTC)
    engine = sa.create_engine(sync_url(database_at_0007))
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO sessions (tenant_id, id, version, metadata, config, item_count, "
                "token_count, char_count, last_seq, event_seq, epoch, created_at, updated_at) "
                "VALUES ('default', 'old', 1, :meta, :config, 1, 0, 0, 1, 1, 0, :now, :now)"
            ),
            {
                "meta": '{"who": "old", "n": [1, 2.5, 12345678901234567890]}',
                "config": '{"context": {"max_items": 7}}',
                "now": now,
            },
        )
        conn.execute(
            sa.text(
                "INSERT INTO items (tenant_id, session_id, seq, item_id, type, body, tokens, "
                "chars, pinned, metadata, archived, created_at) VALUES ('default', 'old', 1, "
                "'i1', 'message', :body, 1, 1, false, :meta, false, :now)"
            ),
            {
                "body": '{"type": "message", "role": "user", "content": "hi"}',
                "meta": '{"source": "import", "score": 0.75}',
                "now": now,
            },
        )
    engine.dispose()

    upgrade(database_at_0007)
    if database_at_0007.startswith("postgresql"):
        engine = sa.create_engine(sync_url(database_at_0007))
        with engine.connect() as conn:
            types = dict(
                conn.execute(
                    sa.text(
                        "SELECT table_name || '.' || column_name, data_type "
                        "FROM information_schema.columns WHERE column_name IN "
                        "('metadata', 'config') AND table_name IN ('sessions', 'items')"
                    )
                ).all()
            )
        engine.dispose()
        assert types == {
            "sessions.metadata": "json",
            "sessions.config": "json",
            "items.metadata": "json",
        }

    store = Store.from_url(database_at_0007)
    try:
        async with store.read() as db:
            session = await SessionRepository(db).get("default", "old")
            items = await ItemRepository(db).list_live("default", "old", after_seq=None, limit=10)
        assert session is not None
        assert session.metadata == {"who": "old", "n": [1, 2.5, 12345678901234567890]}
        assert session.config == {"context": {"max_items": 7}}
        assert [i.metadata for i in items] == [{"source": "import", "score": 0.75}]

        sent = {"z": 1.5e308, "neg": -0.0, "a": 1e-320}
        async with store.write() as db:
            await SessionRepository(db).insert(
                tenant_id="default",
                session_id="new",
                metadata=sent,
                config={},
                summary=None,
                now=now,
            )
        async with store.read() as db:
            new = await SessionRepository(db).get("default", "new")
        assert new is not None
        assert list(new.metadata) == ["z", "neg", "a"]
        assert [repr(v) for v in new.metadata.values()] == ["1.5e+308", "-0.0", "1e-320"]
    finally:
        await store.dispose()
