"""Client JSON kept as sent: session metadata and config, item metadata become ``json`` on
Postgres.

JSONB stores numbers as ``numeric`` and objects with their keys sorted: ``1.5e308`` came back
as a 309-digit integer, ``-0.0`` as ``0``, and keys in another order than the client's (SQLite
kept all three). ``json`` stores the text it is given, so a value reads back as the service
wrote it, on both backends. No query uses a JSONB operator on these columns (``->>``, which
the default-TTL check uses on ``config``, exists for ``json`` too), and no index covers them.
Rows stored before keep the values JSONB made of them. SQLite keeps JSON as text already.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-03
"""

from __future__ import annotations

from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

_COLUMNS = (("sessions", "metadata"), ("sessions", "config"), ("items", "metadata"))


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for table, column in _COLUMNS:
        op.execute(f"ALTER TABLE {table} ALTER COLUMN {column} TYPE json USING {column}::json")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for table, column in _COLUMNS:
        op.execute(f"ALTER TABLE {table} ALTER COLUMN {column} TYPE jsonb USING {column}::jsonb")
