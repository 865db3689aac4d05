"""The tenant guard of a create made in one statement (Postgres only).

A write that creates a session is not ordered by a session row, so it is ordered against its
tenant's erasure by an advisory lock: the create holds it shared, the erasure takes it alone
to write its tombstone (``store.retention``). The transactional create takes the lock, then
looks for the tombstone in a later statement. The one-statement create on append
(``store.append``) cannot: its snapshot is taken when it starts, before it waits for the lock,
so a tombstone committed during that wait would stay out of its sight. This function takes the
lock and then looks; being VOLATILE, its query runs on a fresh snapshot, taken after the lock
was granted, which sees every tombstone committed before.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-04
"""

from __future__ import annotations

from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(
        """
        CREATE FUNCTION tenant_creates_allowed(lock_key BIGINT, digest TEXT) RETURNS BOOLEAN
        LANGUAGE plpgsql VOLATILE AS $$
        BEGIN
            PERFORM pg_advisory_xact_lock_shared(lock_key);
            RETURN NOT EXISTS (SELECT 1 FROM tenant_erasures WHERE tenant_digest = digest);
        END
        $$
        """
    )


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute("DROP FUNCTION tenant_creates_allowed(BIGINT, TEXT)")
