"""What a full-text query asks for: its terms, its exact tokens and phrases, and the score scale.

Full text matches **any** term of the query and ranks by BM25 (``K1``, ``B``): a rare term
weighs more than a common one, an item holding more of the query's terms ranks higher, and a
term repeated in a short item counts more than in a long one. The same rules hold on both
backends (app/store/search.py): SQLite's FTS5 ``bm25()`` computes exactly this sum, and the
Postgres query computes it from the GIN index (a document frequency per term) and each
candidate's tsvector (the term frequencies).

- **Terms** (``query_terms``): the query's words (runs of letters and digits: ``_``, ``.``,
  ``-``, ``/`` and other punctuation separate words, as both tokenizers do), lower-cased,
  without the words of ``STOP_WORDS`` (one list, applied to the query on both backends;
  it holds every word Postgres's ``english`` configuration drops, so neither backend drops a
  term the other keeps). Items are indexed whole: only the query is filtered.
- **Exact phrases** (``QueryTerms.phrases``): the query's exact tokens
  (``app.domain.recall.exact_tokens``: ``E1042``, ``retry.py``, ``PAY-3318``, a hash) and its
  double-quoted phrases, each as the sequence of its words, matched adjacent and in order.
  An item holding more of them ranks above one holding fewer, whatever its BM25: a lookup
  finds the item with the token first.

The score (``fulltext_score``) is on the scale every search mode shares, 0 to 1:

- ``match``: with ``r`` the item's BM25 divided by the sum of the query terms' IDFs,
  ``r / (r + 1)``. An item of average length holding every query term once has ``r`` of
  about 1 and scores about 0.5; one holding only terms worth half the query's weight, about
  0.33; repeating the terms, or being shorter, raises it towards (never to) 1. Rare words
  weigh more, so matching only the common words of a question scores low.
- with exact phrases in the query (``n`` of them, ``m`` held by the item):
  ``(m + match) / (n + 1)``, so every item holding all of them scores at least
  ``n / (n + 1)`` (0.5 for one token) and above every item holding fewer.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from app.domain.recall import exact_tokens

__all__ = [
    "B",
    "FOOTING_TERMS",
    "K1",
    "STOP_WORDS",
    "QueryTerms",
    "fulltext_score",
    "idf",
    "needs_no_footing",
    "query_terms",
    "words",
]

# BM25's term-frequency saturation and length normalisation: FTS5's bm25() fixes these two
# values, so the Postgres query uses them too.
K1 = 1.2
B = 0.75
# Words too common to say what a query is about. A superset of the words the ``english``
# text-search configuration of Postgres drops (so the backends drop the same ones), plus
# question and filler words that carry no topic.
STOP_WORDS = frozenset(
    """
    a about above after again against all also am an and any are aren as at be because been
    before being below between both but by can cannot could couldn d did didn do does doesn
    doing don down during each either else ever every few for from further get gets got had
    hadn has hasn have haven having he her here hers herself him himself his how however i if
    in into is isn it its itself just ll let m ma me might more most much must mustn my myself
    neither no nor not now o of off on once only or other ought our ours ourselves out over own
    re s same shall shan she should shouldn so some such t than that the their theirs them
    themselves then there these they this those through to too under until up upon us ve very
    was wasn we were weren what whatever when whenever where whether which while who whom
    whose why will with won would wouldn y yet you your yours yourself yourselves
    """.split()
)
# A query of at most this many terms, none of them in the searched items, has no footing there.
FOOTING_TERMS = 2
# A word, as both tokenizers see one: letters and digits; everything else separates words.
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_QUOTED = re.compile(r'"([^"]*)"')
# Scripts written without spaces between words (Han, kana, Hangul, Thai, Lao, Khmer,
# Myanmar): both tokenizers read a run of them as one token, so full text cannot tell
# whether such a query's words occur in an item.
_UNSPACED = re.compile(
    "[\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u3040-\u30ff\u3400-\u4dbf"
    "\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]"
)


def words(text: str) -> list[str]:
    """The words of ``text``, lower-cased, in order (stop words included)."""
    return [w.lower() for w in _WORD.findall(text)]


@dataclass(frozen=True, slots=True)
class QueryTerms:
    """``terms``: the query's distinct words minus stop words, in order; ``phrases``: its
    exact tokens and quoted phrases, each as its words (every word of a phrase is also a term
    unless it is a stop word)."""

    terms: tuple[str, ...]
    phrases: tuple[tuple[str, ...], ...]

    @property
    def empty(self) -> bool:
        return not self.terms and not self.phrases


def query_terms(query: str) -> QueryTerms:
    """The terms and exact phrases of ``query`` (module doc). A query of stop words and
    punctuation only has neither: it matches nothing."""
    terms: list[str] = []
    for word in words(query):
        if word not in STOP_WORDS and word not in terms:
            terms.append(word)
    phrases: list[tuple[str, ...]] = []
    for text in [*exact_tokens(query), *_QUOTED.findall(query)]:
        phrase = tuple(words(text))
        if phrase and phrase not in phrases:
            phrases.append(phrase)
    return QueryTerms(tuple(terms), tuple(phrases))


def needs_no_footing(query: str) -> bool:
    """Whether a search by meaning may answer ``query`` although full text found none of its
    terms in the searched items: when the query holds a word of a script written without
    spaces (``_UNSPACED``), where full text's silence proves nothing, or more than
    ``FOOTING_TERMS`` terms (a question says more than its words: 6 of the 52 paraphrased
    questions of bench/recall.py share no term with their whole session). A shorter query
    that no item shares a term with (a random token, a name, a code) is about nothing there
    (the relevance floor of app/services/search.py): its nearest vectors are merely the least
    unrelated, at the similarity of a true paraphrase for random tokens."""
    return bool(_UNSPACED.search(query)) or len(query_terms(query).terms) > FOOTING_TERMS


def idf(documents: int, matching: int) -> float:
    """A term's inverse document frequency as FTS5's bm25() computes it:
    ``ln((N - n + 0.5) / (n + 0.5))``, at least 1e-6 (a term in more than half the items
    still counts a little)."""
    return max(math.log((documents - matching + 0.5) / (matching + 0.5)), 1e-6)


def fulltext_score(bm25: float, idf_sum: float, *, phrases_held: int, phrases: int) -> float:
    """The 0..1 full-text score of an item (module doc): ``r / (r + 1)`` of its BM25 as a
    multiple ``r`` of ``idf_sum``, ranked first by how many of the query's ``phrases`` it
    holds. Strictly increasing in ``bm25`` and in ``phrases_held``, below 1."""
    ratio = max(0.0, bm25 / idf_sum) if idf_sum > 0 else 0.0
    return (phrases_held + ratio / (ratio + 1.0)) / (phrases + 1)
