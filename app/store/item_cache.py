"""ItemCache: decoded items kept in memory between context reads of the same process.

An agent reads its context every turn, and each read covers mostly the items the previous one
decoded. A stored item never changes: it is identified by (tenant, session, seq, item id,
created_at), and the timestamp tells a session apart from an earlier one with the same id
that was deleted, so a cached item is never stale; archiving only changes which seqs a query
returns. Bounded LRU; large items are not kept. Per process, no locking needed (one event
loop).
"""

from __future__ import annotations

from collections import OrderedDict
from datetime import datetime

from app.domain.items import StoredItem

ItemKey = tuple[str, str, int, str, datetime]


class ItemCache:
    def __init__(self, *, max_items: int, max_item_chars: int = 16_384) -> None:
        self.max_items = max_items
        self.max_item_chars = max_item_chars
        self._items: OrderedDict[ItemKey, StoredItem] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def get(self, key: ItemKey) -> StoredItem | None:
        item = self._items.get(key)
        if item is None:
            self.misses += 1
            return None
        self._items.move_to_end(key)
        self.hits += 1
        return item

    def put(self, key: ItemKey, item: StoredItem) -> None:
        if self.max_items <= 0 or item.chars > self.max_item_chars:
            return
        self._items[key] = item
        self._items.move_to_end(key)
        while len(self._items) > self.max_items:
            self._items.popitem(last=False)

    def __len__(self) -> int:
        return len(self._items)
