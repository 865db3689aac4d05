"""Vector math at scale (numpy): the exact scan a session-scoped semantic search runs.

Kept out of ``app.domain`` (stdlib + pydantic only); ``app.domain.recall.cosine`` is the pure
reference these results agree with (tests/test_embeddings_vectors.py)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def nearest(
    query: Sequence[float], candidates: Sequence[tuple[int, Sequence[float]]], *, limit: int
) -> list[tuple[int, float]]:
    """The ``limit`` candidates most similar to ``query`` by cosine similarity, best first
    (ties: the higher key first, i.e. the newest seq), as ``(key, similarity)``."""
    if not candidates or limit <= 0:
        return []
    keys = np.array([k for k, _ in candidates], dtype=np.int64)
    matrix = np.asarray([v for _, v in candidates], dtype=np.float32)
    q = np.asarray(query, dtype=np.float32)
    if matrix.shape[1] != q.shape[0]:
        raise ValueError(f"vectors of {matrix.shape[1]} and {q.shape[0]} dimensions")
    norms = np.linalg.norm(matrix, axis=1) * max(float(np.linalg.norm(q)), 1e-12)
    sims = (matrix @ q) / np.maximum(norms, 1e-12)
    order = np.lexsort((-keys, -sims))[:limit]
    return [(int(keys[i]), float(np.clip(sims[i], -1.0, 1.0))) for i in order]
