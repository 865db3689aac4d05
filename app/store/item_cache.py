"""ItemCache: decoded items kept in memory between context reads of the same process.

An agent reads its context every turn, and each read covers mostly the items the previous one
decoded. A stored item never changes: it is identified by (tenant, session, the session's
created_at, seq). A seq is never reused within a session (``last_seq`` only grows; archived
items keep theirs) and the timestamp tells a session apart from an earlier one with the same id
that was deleted, so a cached item is never stale; archiving only changes which seqs a query
returns. Bounded LRU; large items are not kept. Per process, no locking needed (one event
loop).

The prompt cache (``store.prompt_cache``) and the window-size hints (``store.window_sizes``)
live in modules of their own.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from datetime import datetime

from app.domain.items import StoredItem

# (tenant, session, the session's created_at, seq)
ItemKey = tuple[str, str, datetime, int]


class ItemCache:
    """Bounded by item count and by the items' total chars (a proxy for their memory):
    a worker's memory stays bounded whatever the sessions hold."""

    def __init__(
        self,
        *,
        max_items: int,
        max_item_chars: int = 16_384,
        max_total_chars: int = 32 * 1024 * 1024,
    ) -> None:
        self.max_items = max_items
        self.max_item_chars = max_item_chars
        self.max_total_chars = max_total_chars
        self._items: OrderedDict[ItemKey, StoredItem] = OrderedDict()
        self._chars = 0

    def get(self, key: ItemKey) -> StoredItem | None:
        item = self._items.get(key)
        if item is None:
            return None
        self._items.move_to_end(key)
        return item

    def get_many(
        self, base: tuple[str, str, datetime], seqs: Iterable[int]
    ) -> tuple[dict[int, StoredItem], list[int]]:
        """``get`` for the seqs of one session (``base``: tenant, session, created_at): the
        items found by seq, and the seqs missing, in order (a context read asks for hundreds
        at once)."""
        tenant, session, created = base
        items, touch = self._items, self._items.move_to_end
        found: dict[int, StoredItem] = {}
        missing: list[int] = []
        for seq in seqs:
            key = (tenant, session, created, seq)
            item = items.get(key)
            if item is None:
                missing.append(seq)
            else:
                touch(key)
                found[seq] = item
        return found, missing

    def put(self, key: ItemKey, item: StoredItem) -> None:
        if self.max_items <= 0 or item.chars > self.max_item_chars:
            return
        previous = self._items.get(key)
        if previous is not None:
            self._chars -= previous.chars
        self._items[key] = item
        self._items.move_to_end(key)
        self._chars += item.chars
        while len(self._items) > self.max_items or self._chars > self.max_total_chars:
            _, evicted = self._items.popitem(last=False)
            self._chars -= evicted.chars

    @property
    def chars(self) -> int:
        return self._chars

    def __len__(self) -> int:
        return len(self._items)
