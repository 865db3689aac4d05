"""Idempotency records scoped to the API key and owned by their session.

A record is found by (tenant, API key id, method, path, key): another key of the tenant never
gets its stored response. ``session_id`` names the session the write acted on, so deleting the
session deletes its records (a re-created session never replays an old answer). ``kind`` says
how the response is kept: ``response`` (the body itself) or ``append`` (what the one-statement
append knew only inside the database: item ids, first seq, version, time; the body is rebuilt
from the retried request, which the request hash proves identical).

The table is rebuilt (its primary key changes). Records written before this revision had no key
scope: they are kept under the empty key id, which is what callers with auth off use, and
expire as usual.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.rename_table("idempotency_keys", "idempotency_keys_old")
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER INDEX IF EXISTS pk_idempotency_keys RENAME TO pk_idempotency_keys_old")
        op.execute(
            "ALTER INDEX IF EXISTS ix_idempotency_keys_expires_at "
            "RENAME TO ix_idempotency_keys_old_expires_at"
        )
    else:
        op.execute("DROP INDEX IF EXISTS ix_idempotency_keys_expires_at")
    op.create_table(
        "idempotency_keys",
        sa.Column("tenant_id", sa.String(64), nullable=False),
        sa.Column("key_id", sa.String(64), nullable=False),
        sa.Column("method", sa.String(8), nullable=False),
        sa.Column("path", sa.String(4096), nullable=False),
        sa.Column("key", sa.String(256), nullable=False),
        sa.Column("session_id", sa.String(256), nullable=True),
        sa.Column("kind", sa.String(16), nullable=False, server_default="response"),
        sa.Column("request_hash", sa.String(64), nullable=False),
        sa.Column("status_code", sa.Integer, nullable=False),
        sa.Column("response", sa.Text, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint(
            "tenant_id", "key_id", "method", "path", "key", name="pk_idempotency_keys"
        ),
    )
    op.create_index("ix_idempotency_keys_expires_at", "idempotency_keys", ["expires_at"])
    op.create_index(
        "ix_idempotency_keys_tenant_id_session_id", "idempotency_keys", ["tenant_id", "session_id"]
    )
    op.execute(
        "INSERT INTO idempotency_keys (tenant_id, key_id, method, path, key, session_id, kind, "
        "request_hash, status_code, response, created_at, expires_at) "
        "SELECT tenant_id, '', method, path, key, NULL, 'response', request_hash, status_code, "
        "response, created_at, expires_at FROM idempotency_keys_old"
    )
    op.drop_table("idempotency_keys_old")


def downgrade() -> None:
    op.drop_index("ix_idempotency_keys_tenant_id_session_id", "idempotency_keys")
    op.drop_table("idempotency_keys")
    op.create_table(
        "idempotency_keys",
        sa.Column("tenant_id", sa.String(64), nullable=False),
        sa.Column("method", sa.String(8), nullable=False),
        sa.Column("path", sa.String(4096), nullable=False),
        sa.Column("key", sa.String(256), nullable=False),
        sa.Column("request_hash", sa.String(64), nullable=False),
        sa.Column("status_code", sa.Integer, nullable=False),
        sa.Column("response", sa.Text, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "method", "path", "key", name="pk_idempotency_keys"),
    )
    op.create_index("ix_idempotency_keys_expires_at", "idempotency_keys", ["expires_at"])
