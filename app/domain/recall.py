"""Pure ranking for search by meaning: fusing a full-text ranking with a vector ranking.

Two rankers disagree in kind. Full text is precise on rare exact tokens (a file name, an error
code, a commit hash, a ticket id) and blind to paraphrase; an embedding model finds paraphrase
and blurs exact tokens (``E1042`` and ``E1024`` embed alike). Fusing them with equal weight
lets the keyword ranker's noise push the semantic ranker's finds out of the top (measured in
bench/RESULTS.md). ``fuse`` therefore weighs the full-text ranking by what the query is:

- a query holding an **exact-token shape** (``exact_tokens``: a digit, inner punctuation as in
  ``retry.py`` or ``PAY-1234``, camelCase, a long hex string, ALL-CAPS) is a lookup: full-text
  hits come first, in full-text order, then the semantic-only hits;
- any other query is a question: the ranks are fused by weighted reciprocal rank fusion,
  ``SEMANTIC_WEIGHT / (RRF_K + rank)`` plus ``FULLTEXT_WEIGHT / (RRF_K + rank)``, with the
  semantic ranking weighing more, so a word shared by chance does not outrank meaning, while
  an item both rankers agree on still rises.

A semantic-only hit (no full-text match) is kept only when its cosine similarity is at least
``min_score`` (``DEFAULT_MIN_SCORE`` unless the request says): below it the "nearest" items are
merely the least unrelated ones, and a search would answer every query with the whole session.
Full-text hits are never dropped by the threshold: they matched the query's words.

Only the standard library is used; the vector math at scale (numpy) lives in app.embeddings.
"""

from __future__ import annotations

import math
import re
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Generic, Literal, TypeVar

__all__ = [
    "DEFAULT_MIN_SCORE",
    "FULLTEXT_WEIGHT",
    "RRF_K",
    "SEMANTIC_WEIGHT",
    "FusedHit",
    "cosine",
    "exact_tokens",
    "fuse",
]

K = TypeVar("K", bound=Hashable)
Mode = Literal["fulltext", "semantic", "hybrid"]

RRF_K = 60
SEMANTIC_WEIGHT = 1.0
FULLTEXT_WEIGHT = 0.5
# Cosine similarity below which a semantic-only hit is not returned. Chosen on the recall set
# of bench/recall.py for the builtin model (all-MiniLM-L6-v2): planted facts matched their
# paraphrased question at 0.28 and above in most cases, unrelated session items at below
# 0.25 for most queries (docs/semantic-search.md gives the figures). Other models have other
# scales: a request's ``min_score`` overrides it.
DEFAULT_MIN_SCORE = 0.25

_TOKEN = re.compile(r"[\w][\w./:#@\\-]*[\w]|\w", re.UNICODE)
_HEX = re.compile(r"[0-9a-f]{7,}", re.IGNORECASE)
_CAMEL = re.compile(r"[a-z][A-Z]|[A-Z]{2,}[a-z]")


@dataclass(frozen=True, slots=True)
class FusedHit(Generic[K]):
    """One fused hit: its key, its fused ``score`` (higher is better; comparable within one
    result only) and what each ranker said (None: not in that ranking)."""

    key: K
    score: float
    fulltext: float | None
    semantic: float | None


def exact_tokens(query: str) -> tuple[str, ...]:
    """The tokens of ``query`` shaped like identifiers rather than words, in order, each once:
    one holding a digit (``E1042``, ``v2``, ``3.11``), inner punctuation (``retry.py``,
    ``PAY-1234``, ``src/app``), camelCase (``parseRange``), a hex run of 7+ characters, or
    3+ capitals (``OOM``). Plain words, even rare ones, are not exact tokens."""
    found: list[str] = []
    for token in _TOKEN.findall(query):
        shaped = (
            any(c.isdigit() for c in token)
            or any(c in "./:#@\\-_" for c in token)
            or bool(_CAMEL.search(token))
            or bool(_HEX.fullmatch(token))
            or (len(token) >= 3 and token.isupper())
        )
        if shaped and token not in found:
            found.append(token)
    return tuple(found)


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """Cosine similarity of two equal-length vectors, in [-1, 1]; 0.0 when either is zero.
    ``ValueError`` when the lengths differ (vectors of two models are never compared)."""
    if len(a) != len(b):
        raise ValueError(f"vectors of {len(a)} and {len(b)} dimensions cannot be compared")
    dot = math.fsum(x * y for x, y in zip(a, b, strict=True))
    norm = math.sqrt(math.fsum(x * x for x in a)) * math.sqrt(math.fsum(y * y for y in b))
    if norm == 0.0:
        return 0.0
    return max(-1.0, min(1.0, dot / norm))


def _dedupe(ranking: Sequence[tuple[K, float]]) -> list[tuple[K, float]]:
    seen: set[K] = set()
    out: list[tuple[K, float]] = []
    for key, score in ranking:
        if key not in seen:
            seen.add(key)
            out.append((key, score))
    return out


def fuse(
    fulltext: Sequence[tuple[K, float]],
    semantic: Sequence[tuple[K, float]],
    *,
    query: str,
    mode: Mode = "hybrid",
    min_score: float = DEFAULT_MIN_SCORE,
    limit: int | None = None,
) -> list[FusedHit[K]]:
    """One ranking from a full-text ranking and a semantic one, each best first as
    ``(key, score)`` (the semantic score is a cosine similarity; a key repeated in one ranking
    counts at its first place).

    Invariants:
    - every hit is a full-text hit, or a semantic hit with similarity >= ``min_score``;
      each key at most once; scores never increase down the list; at most ``limit`` hits;
    - ``mode="fulltext"``: exactly the full-text ranking; ``mode="semantic"``: exactly the
      semantic hits at or above ``min_score``, in their order;
    - hybrid: every full-text hit is kept; with an exact token in the query, the full-text
      hits come first in their own order; with an empty full-text ranking, the result is the
      semantic one (as ``mode="semantic"`` gives it);
    - the same inputs give the same output (ties: the earlier full-text, then semantic, place).
    """
    ft = _dedupe(fulltext)
    sem = _dedupe(semantic)
    ft_score = dict(ft)
    sem_score = dict(sem)
    hits: list[FusedHit[K]]
    if mode == "fulltext":
        hits = [FusedHit(k, s, s, sem_score.get(k)) for k, s in ft]
    elif mode == "semantic":
        hits = [FusedHit(k, s, ft_score.get(k), s) for k, s in sem if s >= min_score]
    else:
        kept_sem = [(k, s) for k, s in sem if s >= min_score or k in ft_score]
        if exact_tokens(query) and ft:
            # A lookup: the full-text order first (scores above any semantic-only one).
            n = len(ft)
            hits = [
                FusedHit(k, 1.0 + (n - i) / n, s, sem_score.get(k)) for i, (k, s) in enumerate(ft)
            ]
            rest = [(k, s) for k, s in kept_sem if k not in ft_score]
            hits += [FusedHit(k, max(0.0, min(1.0, s)) * 0.999, None, s) for k, s in rest]
        else:
            # A question: weighted RRF over the items semantic search finds plausible (at or
            # above min_score), full text raising those it also matched; full-text hits that
            # are not plausible follow, in full-text order. A keyword ranker's chance matches
            # (a shared common word) so never push a semantic find out of the top.
            plausible = {k for k, s in kept_sem if s >= min_score}
            fused: dict[K, float] = {}
            order: dict[K, int] = {}
            for rank, (k, _) in enumerate(kept_sem, start=1):
                if k in plausible:
                    fused[k] = SEMANTIC_WEIGHT / (RRF_K + rank)
                    order[k] = len(order)
            for rank, (k, _) in enumerate(ft, start=1):
                if k in plausible:
                    fused[k] += FULLTEXT_WEIGHT / (RRF_K + rank)
            ranked = sorted(fused, key=lambda k: (-fused[k], order[k]))
            hits = [FusedHit(k, fused[k], ft_score.get(k), sem_score.get(k)) for k in ranked]
            floor = min(fused.values(), default=1.0)
            tail = [(k, s) for k, s in ft if k not in plausible]
            n = len(tail)
            hits += [
                FusedHit(k, floor * (n - i) / (n + 1), s, sem_score.get(k))
                for i, (k, s) in enumerate(tail)
            ]
    # Scores are made non-increasing even where a ranker's own scores were not.
    out: list[FusedHit[K]] = []
    for hit in hits:
        if out and hit.score > out[-1].score:
            hit = FusedHit(hit.key, out[-1].score, hit.fulltext, hit.semantic)
        out.append(hit)
    return out if limit is None else out[:limit]
