"""SessionVectorCache: one session's stored vectors, stacked, kept between searches.

Reading a session's vectors costs what their bytes do (10,000 vectors of 384 float32 are 15 MB:
60-300 ms on the bench machine, far over a search's budget), while the set changes only when
the indexer adds vectors or items are erased. So a process keeps the stacked matrix of each
recently searched session (every vector of one model, archived items' too) with the *stamp* it
was read at: the count of the session's vectors of that model and the sum of their seqs. A
search reads the stamp (one aggregate over the primary key) and reuses the matrix while it is
unchanged. A vector is never rewritten and a seq never reused, so vectors only come (indexer)
or go (erasure, retention): either changes the count, and an exchange of vectors at equal count
changes the seq sum. When only newer items were embedded (the common case: an agent appends,
then searches), just the vectors above the last cached seq are read and added, and the result
is checked against the stamp (a mismatch reads everything again). bench/RESULTS.md "Session
15" has the figures that justify the cache.

Bounded LRU by total bytes; per process, one event loop, no locking.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

# (tenant, session, model, dims)
CacheKey = tuple[str, str, str, int]
# (count, sum of seqs)
Stamp = tuple[int, int]


@dataclass(frozen=True, slots=True)
class SessionVectors:
    """``matrix[i]`` is the vector of ``seqs[i]``, scaled to unit length; seqs ascending."""

    stamp: Stamp
    seqs: npt.NDArray[np.int64]
    matrix: npt.NDArray[np.float32]

    @property
    def nbytes(self) -> int:
        return int(self.matrix.nbytes + self.seqs.nbytes)


class SessionVectorCache:
    def __init__(self, *, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._entries: OrderedDict[CacheKey, SessionVectors] = OrderedDict()
        self._bytes = 0

    def get(self, key: CacheKey) -> SessionVectors | None:
        """The entry last put for ``key`` (its ``stamp`` says whether it is still current)."""
        entry = self._entries.get(key)
        if entry is not None:
            self._entries.move_to_end(key)
        return entry

    def put(self, key: CacheKey, entry: SessionVectors) -> None:
        old = self._entries.pop(key, None)
        if old is not None:
            self._bytes -= old.nbytes
        if entry.nbytes > self.max_bytes:
            return
        self._entries[key] = entry
        self._bytes += entry.nbytes
        while self._bytes > self.max_bytes:
            _, evicted = self._entries.popitem(last=False)
            self._bytes -= evicted.nbytes

    def __len__(self) -> int:
        return len(self._entries)
