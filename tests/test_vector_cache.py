"""SessionVectorCache: bounded by bytes, and ``evict`` drops exactly the entries of a session
(any model and size) or of a tenant, keeping the byte count true (a property test over random
sequences of puts and evictions)."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from app.embeddings.cache import CacheKey, SessionVectorCache, SessionVectors, Stamp

TENANTS = ["t1", "t2"]
SESSIONS = ["a", "b", "c"]
MODELS = [("m", 4), ("m", 8), ("n", 4)]


def entry(rows: int, dims: int) -> SessionVectors:
    seqs = np.arange(1, rows + 1, dtype=np.int64)
    return SessionVectors(
        stamp=Stamp(rows, int(seqs.sum()), datetime(2026, 12, 8, tzinfo=UTC)),
        seqs=seqs,
        matrix=np.ones((rows, dims), dtype=np.float32),
    )


keys = st.tuples(st.sampled_from(TENANTS), st.sampled_from(SESSIONS), st.sampled_from(MODELS)).map(
    lambda k: (k[0], k[1], k[2][0], k[2][1])
)
puts = st.tuples(st.just("put"), keys, st.integers(0, 20))
evicts = st.tuples(st.just("evict"), st.sampled_from(TENANTS), st.sampled_from([None, *SESSIONS]))


@settings(max_examples=200, deadline=None)
@given(ops=st.lists(st.one_of(puts, evicts), max_size=40), max_bytes=st.integers(0, 2000))
def test_eviction_drops_exactly_what_it_names_and_bytes_stay_true(
    ops: list[tuple[object, ...]], max_bytes: int
) -> None:
    cache = SessionVectorCache(max_bytes=max_bytes)
    for op in ops:
        if op[0] == "put":
            key, rows = op[1], op[2]
            assert isinstance(key, tuple) and isinstance(rows, int)
            cache.put(key, entry(rows, key[3]))  # type: ignore[arg-type]
        else:
            tenant, session = op[1], op[2]
            before: set[CacheKey] = set(cache._entries)
            dropped = cache.evict(tenant, session)  # type: ignore[arg-type]
            after = set(cache._entries)
            gone = before - after
            assert len(gone) == dropped
            assert all(k[0] == tenant and session in (None, k[1]) for k in gone)
            assert not any(k[0] == tenant and session in (None, k[1]) for k in after)
        total = sum(e.nbytes for e in cache._entries.values())
        assert cache._bytes == total <= max_bytes
        assert len(cache) == len(cache._entries)
