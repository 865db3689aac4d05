"""Item vectors as pgvector values too, where the extension can be had (Postgres only).

When the server offers the ``vector`` extension (``pg_available_extensions``) and it is
installed already or the migrating role may install it (a superuser), the extension is created
and ``item_vectors`` gets an ``embedding vector`` column (no fixed size: every model has its
own). The indexer then fills it beside the bytes, and builds one HNSW index per model and size
(``embedding::vector(N)``, cosine, partial on the model) that a tenant-wide search by meaning
uses. Elsewhere (SQLite, a Postgres without the extension) this migration changes nothing and
the exact scan of the bytes stays the only path (docs/semantic-search.md).

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def _can_use_pgvector(bind: sa.Connection) -> bool:
    if bind.dialect.name != "postgresql":
        return False
    installed = bind.execute(
        sa.text("SELECT 1 FROM pg_extension WHERE extname = 'vector'")
    ).scalar()
    if installed:
        return True
    available = bind.execute(
        sa.text("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'")
    ).scalar()
    superuser = bind.execute(
        sa.text("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
    ).scalar()
    return bool(available and superuser)


def upgrade() -> None:
    bind = op.get_bind()
    if not _can_use_pgvector(bind):
        return
    op.execute("CREATE EXTENSION IF NOT EXISTS vector")
    op.execute("ALTER TABLE item_vectors ADD COLUMN IF NOT EXISTS embedding vector")


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    op.execute("ALTER TABLE item_vectors DROP COLUMN IF EXISTS embedding")
