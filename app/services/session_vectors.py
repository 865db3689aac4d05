"""A session's stored vectors through the process's cache (app.embeddings.cache), for session
search and for recall alike: one place decides when the cached matrix is still the session's.

The *stamp* (``app.store.vectors.vector_stamp``, or recall's combined first statement through
``stamp_columns``) names the session's incarnation (its ``created_at``) and the count and seq
sum of its vectors of one model and size. The cached matrix is reused while the stamp is
unchanged, topped up with the newer vectors when only newer items of the same incarnation were
embedded, and read again otherwise: after an erasure or retention (the count or sum moved),
and whenever the session was deleted and made again under the same id, by a create, an append
with ``create``, an import or a fork into the freed id (another incarnation, whatever its
count and seqs).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from sqlalchemy.ext.asyncio import AsyncConnection

from app.embeddings.cache import SessionVectors, Stamp
from app.embeddings.vectors import matrix_of
from app.services.runtime import Runtime
from app.store.vectors import session_packed, session_packed_after, vector_stamp


def unit_rows(matrix: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    norms = np.sqrt(np.einsum("ij,ij->i", matrix, matrix))[:, None]  # no BLAS threads
    return (matrix / np.maximum(norms, 1e-12)).astype(np.float32, copy=False)


async def session_vectors(
    rt: Runtime,
    db: AsyncConnection,
    tenant_id: str,
    session_id: str,
    model: str,
    dims: int,
    *,
    stamp: Stamp | None = None,
) -> SessionVectors:
    """Every vector of ``model`` at ``dims`` in the session (archived items' too), stacked,
    unit rows: from the process's cache while the session's incarnation and set of vectors are
    unchanged (``stamp``, read here when not given), topped up when only newer items of the
    same incarnation were embedded since."""
    cache = rt.vector_cache
    key = (tenant_id, session_id, model, dims)
    if stamp is None:
        stamp = await vector_stamp(db, tenant_id, session_id, model, dims)
    cached = cache.get(key) if cache is not None else None
    if cached is not None and cached.stamp == stamp:
        return cached
    entry: SessionVectors | None = None
    if (
        cached is not None
        and cached.stamp.incarnation == stamp.incarnation
        and stamp.count > cached.stamp.count
    ):
        last = int(cached.seqs[-1]) if len(cached.seqs) else 0
        new = await session_packed_after(
            db, tenant_id, session_id, model, dims=dims, after_seq=last
        )
        seqs = np.concatenate([cached.seqs, np.fromiter((q for _, q in new.keys), dtype=np.int64)])
        if (len(seqs), int(seqs.sum())) == (stamp.count, stamp.seq_sum):
            matrix = np.vstack([cached.matrix, unit_rows(matrix_of(new.blobs, dims))])
            entry = SessionVectors(stamp=stamp, seqs=seqs, matrix=matrix)
    if entry is None:
        packed = await session_packed(
            db, tenant_id, session_id, model, dims=dims, include_archived=True
        )
        seqs = np.fromiter((q for _, q in packed.keys), dtype=np.int64, count=len(packed.keys))
        entry = SessionVectors(
            stamp=Stamp(len(seqs), int(seqs.sum()), stamp.incarnation),
            seqs=seqs,
            matrix=unit_rows(matrix_of(packed.blobs, dims)),
        )
    if cache is not None:
        cache.put(key, entry)
    return entry
