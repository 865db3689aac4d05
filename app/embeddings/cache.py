"""SessionVectorCache: one session's stored vectors, stacked, kept between searches.

Reading a session's vectors costs what their bytes do (10,000 vectors of 384 float32 are 15 MB:
60-300 ms on the bench machine, far over a search's budget), while the set changes only when
the indexer adds vectors or items are erased. So a process keeps the stacked matrix of each
recently searched session (every vector of one model and size, archived items' too) under the
key ``(tenant, session, model, dims)``, with the *stamp* it was read at: the session's
incarnation (``sessions.created_at``: a session deleted and created again under the same id is
another one), the count of its vectors of that model and size, and the sum of their seqs. A
search reads the stamp (one statement: the session row and an aggregate over the primary key)
and reuses the matrix while it is unchanged. Within one incarnation a seq is never reused and
a stored vector never rewritten, so vectors only come (indexer) or go (erasure, retention):
either changes the count, and an exchange of vectors at equal count changes the seq sum;
across incarnations the seqs start again at 1, and only the incarnation tells the sets apart.
When only newer items of the same incarnation were embedded (the common case: an agent
appends, then searches), just the vectors above the last cached seq are read and added, and
the result is checked against the stamp (a mismatch reads everything again). bench/RESULTS.md
"Session 15" has the figures that justify the cache.

A session's delete, a tenant's erasure and the retention sweep drop the entries they make
stale (``evict``, called through ``app.services.session_vectors.forget_vectors``), so erased
vectors leave this process's memory at once; another process's cache never serves them either
(its stamp no longer matches), and drops them when the key is next read or by LRU.

Bounded LRU by total bytes; per process, one event loop, no locking.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

# (tenant, session, model, dims)
CacheKey = tuple[str, str, str, int]


class Stamp(NamedTuple):
    """What a cached matrix was read at; equal stamps mean the same set of vectors."""

    count: int  # the session's vectors of the model and size
    seq_sum: int  # the sum of their seqs
    incarnation: datetime | None  # the session's ``created_at`` (None: no such session)


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
        self._drop(key)
        if entry.nbytes > self.max_bytes:
            return
        self._entries[key] = entry
        self._bytes += entry.nbytes
        while self._bytes > self.max_bytes:
            _, evicted = self._entries.popitem(last=False)
            self._bytes -= evicted.nbytes

    def evict(self, tenant_id: str, session_id: str | None = None) -> int:
        """Drop every entry of the session (any model and size), or of the whole tenant when
        ``session_id`` is None; returns how many. A walk of the entries: erasures are rare."""
        doomed = [
            key
            for key in self._entries
            if key[0] == tenant_id and (session_id is None or key[1] == session_id)
        ]
        for key in doomed:
            self._drop(key)
        return len(doomed)

    def _drop(self, key: CacheKey) -> None:
        old = self._entries.pop(key, None)
        if old is not None:
            self._bytes -= old.nbytes

    def __len__(self) -> int:
        return len(self._entries)
