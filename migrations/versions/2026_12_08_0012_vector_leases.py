"""Vector leases (the Postgres indexer's claims on items, held without a transaction open),
and an index that counts a session's vectors of one model and size.

The indexer used to claim items with ``FOR UPDATE SKIP LOCKED`` and keep that transaction open
while the model ran, so a write updating a claimed item (a pop, a compaction archiving it)
waited for the model. It now claims, commits and embeds with no transaction open; a row here
(one per item and model, until ``claimed_until``) keeps other replicas' indexers off the item
meanwhile. The foreign key cascades, so an erased item takes its lease with it. SQLite (one
process per file) claims with a plain read and leaves the table empty.

``ix_item_vectors_tenant_id_session_id_model_dims_seq`` lets ``GET /v1/sessions/{id}`` count
the session's vectors of the current model and size, all of them and those from a seq on, from
the index alone (the primary key has the seq before the model and no size: its counts read
every vector row).

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-08
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "vector_leases",
        sa.Column("tenant_id", sa.String(64), nullable=False),
        sa.Column("session_id", sa.String(256), nullable=False),
        sa.Column("seq", sa.BigInteger, nullable=False, autoincrement=False),
        sa.Column("model", sa.String(128), nullable=False),
        sa.Column("claimed_until", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "session_id", "seq", "model", name="pk_vector_leases"),
        sa.ForeignKeyConstraint(
            ["tenant_id", "session_id", "seq"],
            ["items.tenant_id", "items.session_id", "items.seq"],
            name="fk_vector_leases_tenant_id_items",
            ondelete="CASCADE",
        ),
    )
    op.create_index(
        "ix_item_vectors_tenant_id_session_id_model_dims_seq",
        "item_vectors",
        ["tenant_id", "session_id", "model", "dims", "seq"],
    )


def downgrade() -> None:
    op.drop_index("ix_item_vectors_tenant_id_session_id_model_dims_seq", table_name="item_vectors")
    op.drop_table("vector_leases")
