"""app.embeddings.vectors.nearest agrees with the pure app.domain.recall.cosine."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.domain.recall import cosine
from app.embeddings.vectors import nearest

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
