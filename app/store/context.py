"""ContextRepository: the reads a projection makes, each bounded by the budget, not the session.

A projection loads the newest items in batches until the window the budget needs is covered,
then the few older items that are mandatory whatever the budget (pinned, system/developer, the
pinned prefix, the newest user message), then the bounds of the unloaded runs between them.
All of it goes through the partial indexes on live items.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from app.domain.items import StoredItem
from app.store.item_cache import ItemCache
from app.store.items import _ITEM_COLUMNS, _item
from app.store.tables import items as t


class ContextRepository:
    def __init__(
        self,
        db: AsyncConnection,
        tenant_id: str,
        session_id: str,
        *,
        cache: ItemCache | None = None,
    ) -> None:
        self.db = db
        self.tenant_id = tenant_id
        self.session_id = session_id
        self.cache = cache

    def _live(self) -> sa.ColumnElement[bool]:
        return sa.and_(
            t.c.tenant_id == self.tenant_id,
            t.c.session_id == self.session_id,
            sa.not_(t.c.archived),
        )

    async def newest(self, *, before_seq: int | None, limit: int) -> list[StoredItem]:
        """Up to ``limit`` live items older than ``before_seq``, newest first.

        With a cache: first the keys (seq, id, created_at) of the window, then the full rows
        of only those not decoded before, in the same snapshot."""
        where = [self._live()]
        if before_seq is not None:
            where.append(t.c.seq < before_seq)
        if self.cache is None:
            stmt = sa.select(*_ITEM_COLUMNS).where(*where).order_by(t.c.seq.desc()).limit(limit)
            return [_item(r) for r in (await self.db.execute(stmt)).all()]
        keys_stmt = (
            sa.select(t.c.seq, t.c.item_id, t.c.created_at)
            .where(*where)
            .order_by(t.c.seq.desc())
            .limit(limit)
        )
        keys = [
            (self.tenant_id, self.session_id, seq, item_id, created_at)
            for seq, item_id, created_at in (await self.db.execute(keys_stmt)).all()
        ]
        found: dict[int, StoredItem] = {}
        missing: list[int] = []
        for key in keys:
            item = self.cache.get(key)
            if item is None:
                missing.append(key[2])
            else:
                found[key[2]] = item
        for start in range(0, len(missing), 1000):
            chunk = missing[start : start + 1000]
            stmt = sa.select(*_ITEM_COLUMNS).where(self._live(), t.c.seq.in_(chunk))
            for row in (await self.db.execute(stmt)).all():
                item = _item(row)
                found[item.seq] = item
                self.cache.put(
                    (self.tenant_id, self.session_id, item.seq, item.id, item.created_at), item
                )
        return [found[key[2]] for key in keys if key[2] in found]

    async def mandatory_before(
        self,
        before_seq: int,
        *,
        include_system: bool,
        prefix_items: int,
    ) -> list[StoredItem]:
        """Older than ``before_seq``: pinned items, system/developer messages (if asked), the
        first ``prefix_items`` items of working memory and the newest user message. One query."""
        conditions: list[sa.ColumnElement[bool]] = [t.c.pinned]
        if include_system:
            conditions.append(t.c.role.in_(("system", "developer")))
        newest_user = (
            sa.select(sa.func.max(t.c.seq))
            .where(self._live(), t.c.role == "user", t.c.type == "message")
            .scalar_subquery()
        )
        conditions.append(t.c.seq == newest_user)
        if prefix_items > 0:
            prefix = (
                sa.select(t.c.seq)
                .where(self._live())
                .order_by(t.c.seq)
                .limit(prefix_items)
                .scalar_subquery()
            )
            conditions.append(t.c.seq.in_(prefix))
        stmt = (
            sa.select(*_ITEM_COLUMNS)
            .where(self._live(), t.c.seq < before_seq, sa.or_(*conditions))
            .order_by(t.c.seq)
        )
        return [_item(r) for r in (await self.db.execute(stmt)).all()]

    async def run_bounds(self, gaps: Sequence[tuple[int | None, int]]) -> list[tuple[int, int]]:
        """For each open interval ``(after, before)``, the first and last live seq inside it
        (intervals with no live item are left out). One statement per 200 intervals."""
        out: list[tuple[int, int]] = []
        for start in range(0, len(gaps), 200):
            chunk = gaps[start : start + 200]
            selects: list[Any] = []
            for index, (after, before) in enumerate(chunk):
                cond = [self._live(), t.c.seq < before]
                if after is not None:
                    cond.append(t.c.seq > after)
                selects.append(
                    sa.select(
                        sa.literal(index).label("i"),
                        sa.select(sa.func.min(t.c.seq)).where(*cond).scalar_subquery(),
                        sa.select(sa.func.max(t.c.seq)).where(*cond).scalar_subquery(),
                    )
                )
            rows = sorted((await self.db.execute(sa.union_all(*selects))).all())
            out.extend((int(lo), int(hi)) for _, lo, hi in rows if lo is not None)
        return out
