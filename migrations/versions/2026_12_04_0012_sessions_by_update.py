"""Sessions listed newest first: an index on (tenant_id, updated_at, id), read backwards by
``GET /v1/sessions?order=updated`` (keyset paging), so a page costs the same whatever the
tenant holds, instead of a sort of every session of the tenant.

Revision ID: 0012
Revises: 0009
Create Date: 2026-12-04
"""

from __future__ import annotations

from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(
        "ix_sessions_tenant_id_updated_at", "sessions", ["tenant_id", "updated_at", "id"]
    )


def downgrade() -> None:
    op.drop_index("ix_sessions_tenant_id_updated_at", table_name="sessions")
