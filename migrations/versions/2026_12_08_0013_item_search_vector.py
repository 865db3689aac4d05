"""Search: each item's tsvector is stored with the row (Postgres), the GIN index built on it.

Full text ranks by BM25 (app/store/search.py), which reads the term frequencies of every
candidate from its tsvector. Computed from the text on each search, that cost about 40 µs a
candidate (a search of a 10,000-item session ranked hundreds); stored, it is read. The
column is generated from the same expression migration 0006 indexed, so every existing row
gets its vector in this migration (the table is rewritten once) and every later write
computes it once, as the expression index did. SQLite's FTS5 table is unchanged.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-08
"""

from __future__ import annotations

from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

# Frozen here (0006's expression): the indexed text is the first 100,000 characters.
PG_TSVECTOR = (
    "to_tsvector('english'::regconfig, "
    "translate(left(coalesce(search_text, ''::text), 100000), '/._-:@\\', '       '))"
)


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(
        f"ALTER TABLE items ADD COLUMN search_tsv tsvector GENERATED ALWAYS AS ({PG_TSVECTOR}) STORED"
    )
    op.execute("DROP INDEX IF EXISTS ix_items_search")
    op.execute("CREATE INDEX ix_items_search ON items USING gin (search_tsv)")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute("DROP INDEX IF EXISTS ix_items_search")
    op.execute("ALTER TABLE items DROP COLUMN search_tsv")
    op.execute(f"CREATE INDEX ix_items_search ON items USING gin ({PG_TSVECTOR})")
