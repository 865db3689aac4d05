"""app.domain.recall: exact-token shapes, cosine, and the fusion's invariants (property tests)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.domain.fulltext import query_terms
from app.domain.recall import (
    DEFAULT_MIN_SCORE,
    FULLTEXT_WEIGHT,
    RELEVANCE_FLOORS,
    cosine,
    exact_tokens,
    fuse,
    relevance_floor,
    semantic_score,
)


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


unit = st.floats(-1.0, 1.0, allow_nan=False)
share = st.floats(0.0, 1.0, allow_nan=False)
keys = st.integers(0, 40)
ft_rankings = st.lists(st.tuples(keys, share), max_size=15).map(
    lambda r: sorted(r, key=lambda kv: -kv[1])
)
sem_rankings = st.lists(st.tuples(keys, unit), max_size=25).map(
    lambda r: sorted(r, key=lambda kv: -kv[1])
)
queries = st.sampled_from(
    [
        "when does the password rotate",
        "E1042",
        "who owns billing",
        "retry.py timeout",
        "x",
        '"cold storage" backups',
    ]
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
        assert 0.0 <= h.score <= 1.0  # one scale
    if mode == "fulltext":
        assert keys_out == list(ft_first)[:limit]
        assert [h.score for h in hits] == [ft_first[k] for k in keys_out]
    if mode == "semantic":
        assert keys_out == [k for k, s in sem_first.items() if s >= min_score][:limit]
        assert all(h.score == semantic_score(sem_first[h.key], min_score) for h in hits)
    if mode == "hybrid":
        full = fuse(ft, sem, query=query, mode="hybrid", min_score=min_score)
        assert [h.key for h in full][:limit] == keys_out  # limit only cuts
        assert set(ft_first) <= {h.key for h in full}  # no full-text hit is lost
        phrases = len(query_terms(query).phrases)
        holding = [k for k, s in ft_first.items() if phrases and s >= phrases / (phrases + 1)]
        assert {h.key for h in full[: len(holding)]} == set(holding)  # a lookup: holders first
        if not holding:  # a question: ranked by the weighted sum of the two scores alone
            for h in full:
                ft_part = max(0.0, min(1.0, ft_first.get(h.key, 0.0)))
                s = sem_first.get(h.key)
                sem_part = semantic_score(s, min_score) if s is not None and s >= min_score else 0.0
                fused = FULLTEXT_WEIGHT * ft_part + (1 - FULLTEXT_WEIGHT) * sem_part
                assert h.score <= fused + 1e-12  # (made non-increasing down the list)
        if not ft_first:
            assert [h.key for h in full] == [k for k, s in sem_first.items() if s >= min_score]
    # Deterministic.
    assert fuse(ft, sem, query=query, mode=mode, min_score=min_score, limit=limit) == hits  # type: ignore[arg-type]


@settings(max_examples=200, deadline=None)
@given(ft_rankings, sem_rankings, st.sampled_from(["who owns billing", "when does it rotate"]))
def test_a_hit_better_on_both_rankers_never_ranks_below(
    ft: list[tuple[int, float]], sem: list[tuple[int, float]], query: str
) -> None:
    """On a question (no exact token), an item both rankers score at least as high as another
    ranks at least as high: the fusion is monotone in each ranker's score."""
    hits = fuse(ft, sem, query=query, min_score=DEFAULT_MIN_SCORE)
    ft_first, sem_first = first_places(ft), first_places(sem)

    def parts(k: int) -> tuple[float, float]:
        s = sem_first.get(k)
        return ft_first.get(k, 0.0), semantic_score(s, DEFAULT_MIN_SCORE) if s is not None else 0.0

    place = {h.key: i for i, h in enumerate(hits)}
    for a in place:
        for b in place:
            fa, sa_ = parts(a)
            fb, sb = parts(b)
            if fa >= fb and sa_ >= sb and (fa, sa_) != (fb, sb):
                assert place[a] < place[b]


def test_the_score_scale() -> None:
    # semantic: 0 at the floor, 1 at identity
    assert semantic_score(0.25, 0.25) == 0.0 and semantic_score(1.0, 0.25) == 1.0
    assert semantic_score(0.625, 0.25) == pytest.approx(0.5)
    # hybrid: the weighted sum; each ranker's absence counts 0
    [both, sem_only, ft_only] = fuse(
        [(1, 0.6), (3, 0.5)], [(1, 0.625), (2, 1.0)], query="who owns billing", fulltext_weight=0.5
    )
    assert both.key == 1 and both.score == pytest.approx(0.5 * 0.6 + 0.5 * 0.5)
    assert sem_only.key == 2 and sem_only.score == pytest.approx(0.5)
    assert ft_only.key == 3 and ft_only.score == pytest.approx(0.25)
    assert relevance_floor("all-MiniLM-L6-v2-int8") == RELEVANCE_FLOORS["all-MiniLM-L6-v2-int8"]
    assert relevance_floor("some-other-model") == DEFAULT_MIN_SCORE


def test_an_exact_token_lookup_puts_the_items_holding_it_first() -> None:
    # Full-text scores of a one-token lookup: 0.5 and above for the items holding the token.
    ft = [(7, 0.8), (9, 0.3)]
    sem = [(1, 0.9), (2, 0.8), (9, 0.7), (7, 0.3)]
    lookup = fuse(ft, sem, query="E1042")
    assert [h.key for h in lookup][0] == 7 and lookup[0].score >= 0.5
    assert all(h.score < 0.5 for h in lookup[1:])
    # As a question, the same rankings fuse by the weighted sum: with a small full-text weight
    # meaning decides; with the default (equal) weight, full text lifts what both rankers found.
    assert [h.key for h in fuse(ft, sem, query="what broke", fulltext_weight=0.05)] == [1, 2, 9, 7]
    assert [h.key for h in fuse(ft, sem, query="what broke")] == [9, 7, 1, 2]
    # a strong full-text-only hit ranks among the hits by meaning, by its score
    assert [h.key for h in fuse([(5, 0.9)], sem, query="what broke")] == [5, 1, 2, 9, 7]
    below = fuse([], [(1, 0.9), (2, 0.1)], query="what broke", mode="semantic")
    assert [h.key for h in below] == [1]
