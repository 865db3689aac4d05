"""app.domain.recall: exact-token shapes, cosine, and the fusion's invariants (property tests)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.domain.recall import DEFAULT_MIN_SCORE, cosine, exact_tokens, fuse


@pytest.mark.parametrize(
    ("query", "tokens"),
    [
        ("where did invoice_render.py fail", ("invoice_render.py",)),
        ("error E1042 again", ("E1042",)),
        ("revert 9c1e4f7a2b", ("9c1e4f7a2b",)),
        ("PAY-3318", ("PAY-3318",)),
        ("parseRangeInclusive is wrong", ("parseRangeInclusive",)),
        ("the pod was OOM killed", ("OOM",)),
        ("src/app/main.py and src/app/main.py", ("src/app/main.py",)),
        ("when does the staging password rotate", ()),
        ("Who owns payments?", ()),
        ("deadbeef", ("deadbeef",)),
        ("decade", ()),
    ],
)
def test_exact_tokens(query: str, tokens: tuple[str, ...]) -> None:
    assert exact_tokens(query) == tokens


def test_cosine() -> None:
    assert cosine([1.0, 0.0], [1.0, 0.0]) == pytest.approx(1.0)
    assert cosine([1.0, 0.0], [0.0, 2.0]) == pytest.approx(0.0)
    assert cosine([1.0, 1.0], [-1.0, -1.0]) == pytest.approx(-1.0)
    assert cosine([0.0, 0.0], [1.0, 0.0]) == 0.0
    with pytest.raises(ValueError, match="cannot be compared"):
        cosine([1.0], [1.0, 0.0])


floats = st.floats(-1e6, 1e6, allow_nan=False)
unit = st.floats(-1.0, 1.0, allow_nan=False)
keys = st.integers(0, 40)
ft_rankings = st.lists(st.tuples(keys, floats), max_size=15).map(
    lambda r: sorted(r, key=lambda kv: -kv[1])
)
sem_rankings = st.lists(st.tuples(keys, unit), max_size=25).map(
    lambda r: sorted(r, key=lambda kv: -kv[1])
)
queries = st.sampled_from(
    ["when does the password rotate", "E1042", "who owns billing", "retry.py timeout", "x"]
)
modes = st.sampled_from(["fulltext", "semantic", "hybrid"])


def first_places(ranking: list[tuple[int, float]]) -> dict[int, float]:
    out: dict[int, float] = {}
    for k, s in ranking:
        out.setdefault(k, s)
    return out


@settings(max_examples=300, deadline=None)
@given(ft_rankings, sem_rankings, queries, modes, st.floats(-1.0, 1.0), st.integers(1, 30))
def test_fusion_invariants(
    ft: list[tuple[int, float]],
    sem: list[tuple[int, float]],
    query: str,
    mode: str,
    min_score: float,
    limit: int,
) -> None:
    hits = fuse(ft, sem, query=query, mode=mode, min_score=min_score, limit=limit)  # type: ignore[arg-type]
    ft_first, sem_first = first_places(ft), first_places(sem)
    keys_out = [h.key for h in hits]
    assert len(keys_out) == len(set(keys_out)) <= limit
    assert all(a.score >= b.score for a, b in zip(hits, hits[1:], strict=False))
    for h in hits:
        # Only a full-text hit, or a semantic one at or above the threshold, is returned.
        assert h.key in ft_first or sem_first[h.key] >= min_score
        assert h.fulltext == ft_first.get(h.key) and h.semantic == sem_first.get(h.key)
        assert math.isfinite(h.score)
    if mode == "fulltext":
        assert keys_out == list(ft_first)[:limit]
    if mode == "semantic":
        assert keys_out == [k for k, s in sem_first.items() if s >= min_score][:limit]
    if mode == "hybrid":
        full = fuse(ft, sem, query=query, mode="hybrid", min_score=min_score)
        assert [h.key for h in full][:limit] == keys_out  # limit only cuts
        assert set(ft_first) <= {h.key for h in full}  # no full-text hit is lost
        if exact_tokens(query) and ft_first:
            assert [h.key for h in full][: len(ft_first)] == list(ft_first)
        if not ft_first:
            assert [h.key for h in full] == [k for k, s in sem_first.items() if s >= min_score]
    # Deterministic.
    assert fuse(ft, sem, query=query, mode=mode, min_score=min_score, limit=limit) == hits  # type: ignore[arg-type]


@settings(max_examples=200, deadline=None)
@given(sem_rankings, queries)
def test_full_text_noise_never_lifts_an_implausible_item_over_a_plausible_one(
    sem: list[tuple[int, float]], query: str
) -> None:
    """On a question (no exact token), a full-text hit the semantic ranker finds below the
    threshold ranks after every semantic hit above it, whatever its full-text rank."""
    if exact_tokens(query):
        return
    sem_first = first_places(sem)
    noise = [(k, 100.0 - i) for i, k in enumerate(range(41, 60))]  # full-text-only hits
    hits = fuse(noise, sem, query=query, min_score=DEFAULT_MIN_SCORE)
    plausible = [
        h.key for h in hits if h.key in sem_first and sem_first[h.key] >= DEFAULT_MIN_SCORE
    ]
    assert [h.key for h in hits][: len(plausible)] == plausible


def test_an_exact_token_lookup_puts_the_full_text_hit_first() -> None:
    ft = [(7, 3.2), (9, 0.4)]
    sem = [(1, 0.9), (2, 0.8), (9, 0.7), (7, 0.3)]
    assert [h.key for h in fuse(ft, sem, query="E1042")] == [7, 9, 1, 2]
    # As a question, full text lifts what both rankers found (7 and 9, both plausible) over
    # what only semantic search found.
    assert [h.key for h in fuse(ft, sem, query="what broke")] == [9, 7, 1, 2]
    # An item full text found but semantic search finds implausible follows every plausible one.
    assert [h.key for h in fuse(ft, sem, query="what broke", min_score=0.5)] == [9, 1, 2, 7]
    below = fuse([], [(1, 0.9), (2, 0.1)], query="what broke", mode="semantic")
    assert [h.key for h in below] == [1]
