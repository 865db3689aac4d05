"""app.embeddings.vectors.nearest agrees with the pure app.domain.recall.cosine, and the
packed scan the searches run (nearest_packed) gives exactly what nearest gives."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.domain.recall import cosine
from app.embeddings.vectors import matrix_of, nearest, nearest_packed
from app.store.vectors import pack_vector

component = st.floats(-10, 10, allow_nan=False).filter(lambda x: abs(x) > 1e-3)
vectors = st.lists(component, min_size=3, max_size=3)


@settings(max_examples=100, deadline=None)
@given(vectors, st.lists(vectors, min_size=1, max_size=20), st.integers(1, 25))
def test_nearest_is_cosine_order(
    query: list[float], candidates: list[list[float]], limit: int
) -> None:
    keyed = list(enumerate(candidates, start=1))
    got = nearest(query, keyed, limit=limit)
    assert len(got) == min(limit, len(keyed))
    for key, sim in got:
        assert sim == pytest.approx(cosine(query, candidates[key - 1]), abs=1e-4)
    sims = [s for _, s in got]
    assert sims == sorted(sims, reverse=True)


def test_dimensions_must_agree() -> None:
    with pytest.raises(ValueError, match="dimensions"):
        nearest([1.0, 0.0], [(1, [1.0, 0.0, 0.0])], limit=1)
    assert nearest([1.0], [], limit=3) == []


@settings(max_examples=150, deadline=None)
@given(
    vectors,
    st.lists(st.one_of(vectors, st.just([1.0, 1.0, 1.0])), min_size=0, max_size=30),
    st.integers(1, 35),
)
def test_nearest_packed_is_nearest(
    query: list[float], candidates: list[list[float]], limit: int
) -> None:
    """Same keys, same order (ties included: repeated vectors tie, the later key first)."""
    keyed = list(enumerate(candidates, start=1))
    expected = nearest(query, keyed, limit=limit)
    got = nearest_packed(
        query,
        [k for k, _ in keyed],
        [pack_vector(c) for c in candidates],
        dims=3,
        limit=limit,
    )
    assert [k for k, _ in got] == [k for k, _ in expected]
    assert [s for _, s in got] == pytest.approx([s for _, s in expected], abs=1e-6)


def test_packed_vectors_are_checked() -> None:
    with pytest.raises(ValueError, match="float32"):
        matrix_of([pack_vector([1.0, 2.0])], 3)
    with pytest.raises(ValueError, match="dimensions"):
        nearest_packed([1.0, 0.0], [1], [pack_vector([1.0, 0.0, 0.0])], dims=3, limit=1)
    assert matrix_of([], 4).shape == (0, 4)
    assert nearest_packed([1.0], [], [], dims=1, limit=3) == []
