"""Search index: only the first 100,000 characters of an item's text (Postgres).

A tsvector holds at most 1 MB; an item whose text made a larger one failed its append (the
expression index is computed with the row). The index now covers the text's first 100,000
characters; ``items.search_text`` keeps the whole text. SQLite's FTS5 has no such limit and
is unchanged.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01
"""

from __future__ import annotations

from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

# Frozen here; app/store/search.py repeats this expression verbatim so the planner can match
# the index (0002's, with the text cut to its first 100,000 characters).
PG_TSVECTOR = (
    "to_tsvector('english'::regconfig, "
    "translate(left(coalesce(search_text, ''::text), 100000), '/._-:@\\', '       '))"
)
PG_TSVECTOR_0002 = (
    "to_tsvector('english'::regconfig, "
    "translate(coalesce(search_text, ''::text), '/._-:@\\', '       '))"
)


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute("DROP INDEX IF EXISTS ix_items_search")
    op.execute(f"CREATE INDEX ix_items_search ON items USING gin ({PG_TSVECTOR})")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute("DROP INDEX IF EXISTS ix_items_search")
    op.execute(f"CREATE INDEX ix_items_search ON items USING gin ({PG_TSVECTOR_0002})")
