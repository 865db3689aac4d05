"""Item vectors: the embedding of an item's search text, per model (semantic search).

Derived data written by the indexer, never by an append (an append stays one statement).
Bytes (``dims`` float32, little-endian) on both backends, scanned exactly; a pgvector column
and index may come later where the extension exists. The foreign key cascades, so whichever
path deletes an item (erasure, the archive's retention) deletes its vectors too.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "item_vectors",
        sa.Column("tenant_id", sa.String(64), nullable=False),
        sa.Column("session_id", sa.String(256), nullable=False),
        sa.Column("seq", sa.BigInteger, nullable=False, autoincrement=False),
        sa.Column("model", sa.String(128), nullable=False),
        sa.Column("dims", sa.Integer, nullable=False),
        sa.Column("vector", sa.LargeBinary, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "session_id", "seq", "model", name="pk_item_vectors"),
        sa.ForeignKeyConstraint(
            ["tenant_id", "session_id", "seq"],
            ["items.tenant_id", "items.session_id", "items.seq"],
            name="fk_item_vectors_tenant_id_items",
            ondelete="CASCADE",
        ),
    )


def downgrade() -> None:
    op.drop_table("item_vectors")
