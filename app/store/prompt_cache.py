"""PromptCache: whole projected prompts kept between context reads of the same process."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable


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
