"""WindowSizes: how each session's last context read went, a per-process hint that sizes the
next read's first statement."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass


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
