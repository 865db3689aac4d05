"""Retention and erasure: session expiry and the erasure audit table.

``sessions.ttl_seconds`` is the TTL in force at the session's last write, ``expires_at`` that
write's time plus it (NULL: never expires); a partial index lets the sweep find expired
sessions without a scan. ``erasures`` records every erasure (who, when, rows per table, a
digest of the id) and none of the erased data.

Existing sessions get no TTL here; the sweep applies a server default
(``RETENTION__SESSION_TTL_SECONDS``) to the sessions without their own.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

_JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    with op.batch_alter_table("sessions") as batch:
        batch.add_column(sa.Column("ttl_seconds", sa.BigInteger, nullable=True))
        batch.add_column(sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True))
    op.create_index(
        "ix_sessions_expires_at",
        "sessions",
        ["expires_at"],
        postgresql_where=sa.text("expires_at IS NOT NULL"),
        sqlite_where=sa.text("expires_at IS NOT NULL"),
    )
    op.create_table(
        "erasures",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("reason", sa.String(16), nullable=False),
        sa.Column("tenant_id", sa.String(64), nullable=True),
        sa.Column("subject_digest", sa.String(64), nullable=False),
        sa.Column("key_id", sa.String(64), nullable=True),
        sa.Column("key_name", sa.String(128), nullable=True),
        sa.Column("row_counts", _JSON, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_erasures"),
    )
    op.create_index("ix_erasures_tenant_id_created_at", "erasures", ["tenant_id", "created_at"])
    op.create_index("ix_erasures_subject_digest", "erasures", ["subject_digest"])


def downgrade() -> None:
    op.drop_index("ix_erasures_subject_digest", "erasures")
    op.drop_index("ix_erasures_tenant_id_created_at", "erasures")
    op.drop_table("erasures")
    op.drop_index("ix_sessions_expires_at", "sessions")
    with op.batch_alter_table("sessions") as batch:
        batch.drop_column("expires_at")
        batch.drop_column("ttl_seconds")
