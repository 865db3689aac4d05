"""Full-text search over items: ``items.search_text`` (the item's texts, written with the row),
a GIN expression index on Postgres, an FTS5 table kept by triggers on SQLite.

SQLite: ``items_fts`` is an external-content FTS5 table keyed by ``items.rowid``. SQLite may
renumber the rowids of a table without an INTEGER PRIMARY KEY on ``VACUUM`` or when a batch
migration copies ``items``; after either, run ``INSERT INTO items_fts(items_fts)
VALUES('rebuild')`` (a later migration that rebuilds ``items`` must do so).

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29
"""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

# Frozen here (a migration must not change when the application does); app/store/search.py
# repeats this expression verbatim so the planner can match the index. Path and identifier
# punctuation becomes spaces (the query gets the same treatment), so ``app.py`` finds
# ``src/app.py`` and ``read_file`` finds ``read_file``, as with SQLite's unicode61 tokenizer.
PG_TSVECTOR = (
    "to_tsvector('english'::regconfig, "
    "translate(coalesce(search_text, ''::text), '/._-:@\\', '       '))"
)


def _texts(body: Any) -> list[str]:
    """The texts of a stored canonical body (as domain.items.item_texts at revision 0002)."""
    if isinstance(body, str):
        body = json.loads(body)
    if not isinstance(body, dict):
        return []
    kind = body.get("type")
    if kind == "message":
        content = body.get("content")
        if isinstance(content, str):
            return [content]
        return [p.get("text", "") for p in content or [] if p.get("type") == "text"]
    if kind == "function_call":
        return [body.get("name", ""), body.get("arguments", "")]
    if kind == "function_call_output":
        return [body.get("output", "")]
    texts = list(body.get("summary") or [])
    if body.get("content"):
        texts.append(body["content"])
    return texts


def _backfill() -> None:
    conn = op.get_bind()
    items = sa.table(
        "items",
        sa.column("tenant_id"),
        sa.column("session_id"),
        sa.column("seq"),
        sa.column("body"),
        sa.column("search_text"),
    )
    rows = conn.execute(
        sa.select(items.c.tenant_id, items.c.session_id, items.c.seq, items.c.body).where(
            items.c.search_text.is_(None)
        )
    ).all()
    update = (
        sa.update(items)
        .where(
            items.c.tenant_id == sa.bindparam("t"),
            items.c.session_id == sa.bindparam("s"),
            items.c.seq == sa.bindparam("q"),
        )
        .values(search_text=sa.bindparam("text"))
    )
    batch = [
        {"t": r.tenant_id, "s": r.session_id, "q": r.seq, "text": "\n".join(_texts(r.body))}
        for r in rows
    ]
    for start in range(0, len(batch), 1000):
        conn.execute(update, batch[start : start + 1000])


def upgrade() -> None:
    op.add_column("items", sa.Column("search_text", sa.Text(), nullable=True))
    _backfill()
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"CREATE INDEX ix_items_search ON items USING gin ({PG_TSVECTOR})")
        return
    op.execute(
        "CREATE VIRTUAL TABLE items_fts USING fts5("
        "search_text, content='items', content_rowid='rowid', tokenize='porter unicode61')"
    )
    op.execute(
        "CREATE TRIGGER items_fts_insert AFTER INSERT ON items BEGIN "
        "INSERT INTO items_fts(rowid, search_text) VALUES (new.rowid, new.search_text); END"
    )
    op.execute(
        "CREATE TRIGGER items_fts_delete AFTER DELETE ON items BEGIN "
        "INSERT INTO items_fts(items_fts, rowid, search_text) "
        "VALUES ('delete', old.rowid, old.search_text); END"
    )
    op.execute(
        "CREATE TRIGGER items_fts_update AFTER UPDATE OF search_text ON items BEGIN "
        "INSERT INTO items_fts(items_fts, rowid, search_text) "
        "VALUES ('delete', old.rowid, old.search_text); "
        "INSERT INTO items_fts(rowid, search_text) VALUES (new.rowid, new.search_text); END"
    )
    op.execute("INSERT INTO items_fts(items_fts) VALUES ('rebuild')")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP INDEX IF EXISTS ix_items_search")
    else:
        for trigger in ("items_fts_insert", "items_fts_delete", "items_fts_update"):
            op.execute(f"DROP TRIGGER IF EXISTS {trigger}")
        op.execute("DROP TABLE IF EXISTS items_fts")
    with op.batch_alter_table("items", schema=None) as batch_op:
        batch_op.drop_column("search_text")
