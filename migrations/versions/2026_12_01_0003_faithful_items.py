"""Faithful items: every item keeps the record the client sent, exactly.

- ``items.format``: the wire format an item was ingested in (existing rows: ``canonical``,
  which is what they hold);
- ``items.body`` and ``snapshots.document`` become text on Postgres: JSONB reorders keys and
  normalises numbers, and a provider item must come back byte for byte. (On SQLite both were
  JSON text already.) The bodies of existing rows are canonical items, whose wire form the
  service builds in its own key order, so the conversion changes nothing a client sees;
- ``items.type`` holds up to 64 characters (Anthropic and Responses type names are long);
- session ids (every ``session_id`` column, ``sessions.id``, key prefixes) hold up to 256
  characters, and idempotency paths (which hold a percent-encoded session id) up to 4,096.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

_SESSION_COLUMNS = [
    ("sessions", "id"),
    ("items", "session_id"),
    ("events", "session_id"),
    ("snapshots", "session_id"),
    ("compactions", "session_id"),
    ("api_keys", "session_prefix"),
]


def upgrade() -> None:
    op.add_column(
        "items",
        sa.Column("format", sa.String(24), nullable=False, server_default="canonical"),
    )
    if op.get_bind().dialect.name != "postgresql":
        return  # SQLite keeps JSON as text and does not enforce VARCHAR lengths
    op.execute("ALTER TABLE items ALTER COLUMN body TYPE text USING body::text")
    op.execute("ALTER TABLE snapshots ALTER COLUMN document TYPE text USING document::text")
    op.execute("ALTER TABLE items ALTER COLUMN type TYPE varchar(64)")
    for table, column in _SESSION_COLUMNS:
        op.execute(f"ALTER TABLE {table} ALTER COLUMN {column} TYPE varchar(256)")
    op.execute("ALTER TABLE idempotency_keys ALTER COLUMN path TYPE varchar(4096)")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER TABLE items ALTER COLUMN body TYPE jsonb USING body::jsonb")
        op.execute("ALTER TABLE snapshots ALTER COLUMN document TYPE jsonb USING document::jsonb")
    op.drop_column("items", "format")
