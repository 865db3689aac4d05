"""Per-process caches for context reads: decoded items (ItemCache) and whole projected
prompts (PromptCache).

ItemCache: decoded items kept in memory between context reads of the same process.

An agent reads its context every turn, and each read covers mostly the items the previous one
decoded. A stored item never changes: it is identified by (tenant, session, the session's
created_at, seq). A seq is never reused within a session (``last_seq`` only grows; archived
items keep theirs) and the timestamp tells a session apart from an earlier one with the same id
that was deleted, so a cached item is never stale; archiving only changes which seqs a query
returns. Bounded LRU; large items are not kept. Per process, no locking needed (one event
loop).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Iterable
from dataclasses import dataclass
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


class PromptCache:
    """Projected prompts kept between context reads of the same process.

    A projection is a pure function of the session's state and the request (DESIGN §2,
    determinism), and every write bumps the session's ``version`` in its own transaction.
    So (tenant, session, created_at, version, format, budget) names one answer for good: a
    read at the same version with the same budget gets the same bytes without reloading or
    re-projecting, and a write makes the old entries unreachable (they age out of the LRU).
    Bounded by entries, by the size of each prompt and by their total size (projected chars);
    per process, no locking needed.
    """

    def __init__(
        self,
        *,
        max_entries: int,
        max_entry_chars: int = 1_048_576,
        max_total_chars: int = 16 * 1024 * 1024,
    ) -> None:
        self.max_entries = max_entries
        self.max_entry_chars = max_entry_chars
        self.max_total_chars = max_total_chars
        self._entries: OrderedDict[Hashable, tuple[object, int]] = OrderedDict()
        self._chars = 0

    def get(self, key: Hashable) -> object | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        self._entries.move_to_end(key)
        return entry[0]

    def put(self, key: Hashable, value: object, *, chars: int) -> None:
        if self.max_entries <= 0 or chars > self.max_entry_chars:
            return
        previous = self._entries.get(key)
        if previous is not None:
            self._chars -= previous[1]
        self._entries[key] = (value, chars)
        self._entries.move_to_end(key)
        self._chars += chars
        while len(self._entries) > self.max_entries or self._chars > self.max_total_chars:
            _, (_, evicted) = self._entries.popitem(last=False)
            self._chars -= evicted

    @property
    def chars(self) -> int:
        return self._chars

    def __len__(self) -> int:
        return len(self._entries)


@dataclass(frozen=True, slots=True)
class WindowSize:
    """What a session's last context read with one budget took: the session's item count
    then, the keys its window needed, what its first batch held mandatory (system messages,
    the pinned prefix), and whether the prompt cache answered it."""

    item_count: int
    keys: int
    include_system: bool
    prefix_items: int
    cached: bool = False


class WindowSizes:
    """How each session's last context read went, per budget (per process).

    The first statement of a context read reads as many of the newest keys as the session's
    average item size suggests the budget needs. An agent's newest items are often much smaller
    than its older ones (short messages appended turn after turn), so that estimate falls short
    and a second statement follows, read after read. Remembering what the last read of the
    same session and budget needed (plus the items appended since) sizes the first statement
    right; on Postgres it also lets the read ask for the session row and that first batch in
    one statement. Only a hint: a window of more keys projects to the same prompt (the
    projection is that of the whole memory once it settles), and a first batch asked for with
    other mandatory items than the budget turns out to want is not used. Bounded LRU."""

    def __init__(self, *, max_entries: int) -> None:
        self.max_entries = max_entries
        self._entries: OrderedDict[Hashable, WindowSize] = OrderedDict()

    def get(self, key: Hashable) -> WindowSize | None:
        entry = self._entries.get(key)
        if entry is not None:
            self._entries.move_to_end(key)
        return entry

    def put(self, key: Hashable, size: WindowSize) -> None:
        if self.max_entries <= 0:
            return
        self._entries[key] = size
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)
