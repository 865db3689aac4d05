"""app.domain.fulltext: a query's terms and exact phrases, and the 0..1 full-text score."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.domain.fulltext import STOP_WORDS, fulltext_score, idf, needs_no_footing, query_terms


@pytest.mark.parametrize(
    ("query", "terms", "phrases"),
    [
        ("When did Anna move to Lisbon?", ("anna", "move", "lisbon"), ()),
        ("what is it", (), ()),
        (
            "error E1042 in retry.py",
            ("error", "e1042", "retry", "py"),
            (("e1042",), ("retry", "py")),
        ),
        ('the "cold storage" bucket', ("cold", "storage", "bucket"), (("cold", "storage"),)),
        ('"to be or not"', (), (("to", "be", "or", "not"),)),
        ("read_file read_file", ("read", "file"), (("read", "file"),)),
        ('" - * AND', (), (("and",),)),  # all capitals: an exact token, but only a stop word
        ("上海 office", ("上海", "office"), ()),
    ],
)
def test_query_terms(
    query: str, terms: tuple[str, ...], phrases: tuple[tuple[str, ...], ...]
) -> None:
    got = query_terms(query)
    assert got.terms == terms and got.phrases == phrases


def test_stop_words_are_lower_case_words() -> None:
    assert all(w == w.lower() and w.isalpha() for w in STOP_WORDS)
    assert {"the", "did", "when", "to", "s", "t", "don"} <= STOP_WORDS
    assert not {"lisbon", "error", "move"} & STOP_WORDS


def test_footing() -> None:
    assert needs_no_footing("我们什么时候搬家") and needs_no_footing("いつ引っ越した")
    assert not needs_no_footing("zqxv7kplm") and not needs_no_footing("When did Anna move?")
    assert not needs_no_footing("zqxv7 kplm9")
    assert needs_no_footing("when does the credential for the pre-production DB change")


def test_idf_is_fts5s() -> None:
    assert idf(100, 1) == pytest.approx(math.log(99.5 / 1.5))
    assert idf(10, 9) == 1e-6  # more than half: a little, never negative


@given(
    st.floats(0, 50, allow_nan=False),
    st.floats(0, 50, allow_nan=False),
    st.floats(0.1, 20, allow_nan=False),
    st.integers(0, 3),
    st.data(),
)
def test_the_score_is_on_0_1_and_phrases_rank_first(
    a: float, b: float, idf_sum: float, phrases: int, data: st.DataObject
) -> None:
    held_a = data.draw(st.integers(0, phrases))
    held_b = data.draw(st.integers(0, phrases))
    sa_ = fulltext_score(a, idf_sum, phrases_held=held_a, phrases=phrases)
    sb = fulltext_score(b, idf_sum, phrases_held=held_b, phrases=phrases)
    assert 0.0 <= sa_ < 1.0 or (sa_ <= 1.0 and held_a == phrases)
    if held_a > held_b:
        assert sa_ >= sb  # holding more exact phrases ranks first, whatever the BM25
    if held_a == held_b and a > b:
        assert sa_ > sb or sa_ == pytest.approx(sb)  # BM25 order within a tier


def test_an_average_item_holding_every_term_once_scores_a_half() -> None:
    assert fulltext_score(3.0, 3.0, phrases_held=0, phrases=0) == 0.5
    assert fulltext_score(3.0, 3.0, phrases_held=1, phrases=1) == 0.75
    assert fulltext_score(0.0, 3.0, phrases_held=1, phrases=1) == 0.5
