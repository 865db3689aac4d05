"""Vector math at scale (numpy): the exact scans semantic search runs.

Kept out of ``app.domain`` (stdlib + pydantic only); ``app.domain.recall.cosine`` is the pure
reference these results agree with (tests/test_embeddings_vectors.py).

``nearest_packed`` is the path searches take: the stored float32 bytes are joined and viewed
as one ``(n, dims)`` matrix (``matrix_of``), never unpacked into Python floats, so a scan of
10,000 vectors costs a few milliseconds (bench/RESULTS.md, "Session 15"). Stored vectors are
unit length (every embedder normalises), so the similarity is one matrix-vector product.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import TypeVar

import numpy as np
import numpy.typing as npt

K = TypeVar("K", bound=Hashable)


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


def matrix_of(blobs: Sequence[bytes], dims: int) -> npt.NDArray[np.float32]:
    """The ``(len(blobs), dims)`` float32 matrix of packed little-endian vectors
    (``app.store.vectors.pack_vector``); ``ValueError`` when a blob is not ``dims`` floats."""
    if any(len(b) != 4 * dims for b in blobs):
        raise ValueError(f"a stored vector is not {dims} float32 values")
    if not blobs:
        return np.zeros((0, dims), dtype=np.float32)
    return np.frombuffer(b"".join(blobs), dtype="<f4").reshape(len(blobs), dims)


def nearest_packed(
    query: Sequence[float],
    keys: Sequence[K],
    blobs: Sequence[bytes],
    *,
    dims: int,
    limit: int,
) -> list[tuple[K, float]]:
    """``nearest`` over packed vectors: the ``limit`` keys most similar to ``query`` by cosine
    similarity, best first (ties: the later candidate first), as ``(key, similarity)``. The
    similarity is computed exactly as ``nearest`` does (norms included), so an unnormalised
    stored vector ranks the same."""
    if not keys or limit <= 0:
        return []
    return nearest_matrix(query, keys, matrix_of(blobs, dims), limit=limit)


def nearest_matrix(
    query: Sequence[float],
    keys: Sequence[K],
    matrix: npt.NDArray[np.float32],
    *,
    limit: int,
    mask: npt.NDArray[np.bool_] | None = None,
    unit: bool = False,
) -> list[tuple[K, float]]:
    """``nearest_packed`` over an already stacked ``(len(keys), dims)`` matrix; with ``mask``,
    only the rows where it is True are candidates; ``unit``: the rows are unit length already
    (their norms are not computed again). ``keys`` may be a numpy array."""
    if len(keys) == 0 or limit <= 0:
        return []
    q = np.asarray(query, dtype=np.float32)
    dims = matrix.shape[1]
    if q.shape[0] != dims:
        raise ValueError(f"vectors of {dims} and {q.shape[0]} dimensions")
    q_norm = max(float(np.linalg.norm(q)), 1e-12)
    # einsum, not ``matrix @ q``: a matrix-vector product goes to BLAS, whose worker threads
    # (one per core) made it 20-30x slower on a busy machine (bench/RESULTS.md, Session 15);
    # einsum's own loop is single-threaded and as fast as BLAS on an idle one.
    dots = np.einsum("ij,j->i", matrix, q)
    if unit:
        sims = np.clip(dots / q_norm, -1.0, 1.0)
    else:
        norms = np.sqrt(np.einsum("ij,ij->i", matrix, matrix)) * q_norm
        sims = np.clip(dots / np.maximum(norms, 1e-12), -1.0, 1.0)
    if mask is not None:
        sims = np.where(mask, sims, -np.inf)
        n = int(mask.sum())
    else:
        n = len(keys)
    if limit < n:
        # The top ``limit`` by a partial sort, then ordered (ties: later position first).
        top = np.argpartition(-sims, limit - 1)[:limit]
        # argpartition may cut a tie at the boundary: widen to every candidate that ties it.
        cut = sims[top].min()
        top = np.flatnonzero(sims >= cut)
    else:
        top = np.flatnonzero(sims > -np.inf)
    order = top[np.lexsort((-top, -sims[top]))][:limit]
    return [(keys[int(i)], float(sims[i])) for i in order]
