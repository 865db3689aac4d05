"""Tenant erasure tombstones: a tenant whose erasure has begun takes no write on any replica.

Before this, a tenant's keys were deleted last and other replicas kept them cached, so
sessions created meanwhile outlived the erasure. The tombstone is written first (with the
keys' deletion) and every write path checks it in the database.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "tenant_erasures",
        sa.Column("tenant_digest", sa.String(64), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("tenant_digest", name="pk_tenant_erasures"),
    )


def downgrade() -> None:
    op.drop_table("tenant_erasures")
