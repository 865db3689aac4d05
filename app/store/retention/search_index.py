"""Merging SQLite's full-text index, so that erased text leaves its pages too."""

from __future__ import annotations

import sqlalchemy as sa

from app.store.retention.base import RetentionBase


class SearchIndexMerge(RetentionBase):
    """The background merge of SQLite's FTS5 index (nothing to do on Postgres)."""

    async def merge_search_index_step(self, *, pages: int) -> bool:
        """SQLite: merge up to ``pages`` pages of the FTS5 index (its incremental
        ``merge``), which drops the entries of deleted rows from the pages they were on;
        True while there is more to merge. An erasure's delete triggers only add delete
        markers (the text stops matching at once); this, run in small transactions in the
        background, removes the text itself. Postgres drops index entries with the rows."""
        if not self.sqlite:
            return False
        before = (await self.db.execute(sa.text("SELECT total_changes()"))).scalar_one()
        await self.db.execute(
            sa.text("INSERT INTO items_fts(items_fts, rank) VALUES ('merge', :pages)"),
            {"pages": -pages},
        )
        after = (await self.db.execute(sa.text("SELECT total_changes()"))).scalar_one()
        return int(after) - int(before) >= 2  # FTS5 reports under 2 changes when done
