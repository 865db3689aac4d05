"""Pure ranking for search by meaning: fusing a full-text ranking with a vector ranking.

Two rankers disagree in kind. Full text is precise on rare exact tokens (a file name, an error
code, a commit hash, a ticket id) and blind to paraphrase; an embedding model finds paraphrase
and blurs exact tokens (``E1042`` and ``E1024`` embed alike). ``fuse`` puts both on the one
score scale every search mode answers on, 0 to 1, and combines them:

- **full text**: the 0..1 score of ``app.domain.fulltext.fulltext_score`` (BM25 relative to the
  query's weight; an item holding the query's exact tokens and quoted phrases scores more than
  any item holding fewer);
- **semantic**: a cosine similarity ``c`` at or above the floor ``min_score`` (below it the
  "nearest" items are merely the least unrelated ones and are dropped) maps to
  ``(c - min_score) / (1 - min_score)``: 0 at the floor, 1 for the same meaning;
- **hybrid**: ``FULLTEXT_WEIGHT * fulltext + (1 - FULLTEXT_WEIGHT) * semantic`` (a ranker that
  did not find the item, or a similarity below the floor, gives 0), ranked by that sum alone.
  The weight was chosen on real conversations (REALTALK's ten chats, bench/retrieval_eval.py
  and bench/RESULTS.md, "Fusion on real conversations"): there an equal weight beat both
  rankers at R@5, R@10 and R@50, with today's model and with a better one, while the rule
  before it (meaning first, full text at 0.05) fell below plain BM25 at R@5 and R@10. The
  generated paraphrase set of bench/recall.py, whose questions share no word with their
  answer by construction, pays for it (R@5 86.5 -> 76.9). In a **lookup** (the query holds an
  exact token or a quoted phrase, and some full-text hit holds every one), the hits holding
  them come first: their fused score ``h`` is reported as ``0.5 + h / 2``, every other hit's
  as ``h / 2``.

The floor is one number per embedding model (``relevance_floor``), measured on data: the
similarity below which unrelated text lands. A request's ``min_score`` overrides it.

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
    "RELEVANCE_FLOORS",
    "FusedHit",
    "cosine",
    "exact_tokens",
    "fuse",
    "relevance_floor",
    "semantic_score",
]

K = TypeVar("K", bound=Hashable)
Mode = Literal["fulltext", "semantic", "hybrid"]

# The share of the full-text score in a hybrid score (module doc), chosen on real
# conversations (bench/RESULTS.md, "Fusion on real conversations"): 0.5 was the only weight
# above both rankers at every k there, with all-MiniLM-L6-v2 and with multilingual-e5-small.
FULLTEXT_WEIGHT = 0.5
# The cosine similarity below which a semantic hit is not returned, for a model this table
# does not name (and the default of a recall request). Other models have other scales.
DEFAULT_MIN_SCORE = 0.25
# Per embedding model (by its ``model`` name): the similarity unrelated text reaches, measured
# by bench/recall.py ("floor" lines): off-topic questions against a session (their best
# match), against the planted facts' paraphrased questions (their target's similarity).
# all-MiniLM-L6-v2: off-topic best matches 0.14-0.31 (median 0.22), paraphrase targets at
# 0.28 and above for 90% of them.
RELEVANCE_FLOORS: dict[str, float] = {
    "all-MiniLM-L6-v2-int8": 0.25,
}


def relevance_floor(model: str) -> float:
    """The default ``min_score`` of searches by meaning with ``model``'s vectors."""
    return RELEVANCE_FLOORS.get(model, DEFAULT_MIN_SCORE)


def semantic_score(similarity: float, min_score: float) -> float:
    """A cosine similarity at or above ``min_score`` on the 0..1 scale: 0 at the floor, 1 at
    identity (a floor of 1 or more: 1 for any similarity reaching it)."""
    if min_score >= 1.0:
        return 1.0
    return max(0.0, min(1.0, (similarity - min_score) / (1.0 - min_score)))


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
    fulltext_weight: float = FULLTEXT_WEIGHT,
) -> list[FusedHit[K]]:
    """One ranking from a full-text ranking (``(key, score)``, scores on the 0..1 scale of
    ``app.domain.fulltext``) and a semantic one (``(key, cosine similarity)``), each best
    first (a key repeated in one ranking counts at its first place); module doc for the rule.

    Invariants:
    - every hit is a full-text hit, or a semantic hit with similarity >= ``min_score``;
      each key at most once; scores in [0, 1], never increasing down the list; at most
      ``limit`` hits; ``fulltext`` and ``semantic`` carry what each ranker said (None: absent);
    - ``mode="fulltext"``: exactly the full-text ranking (its scores clamped to [0, 1]);
      ``mode="semantic"``: exactly the semantic hits at or above ``min_score``, in their order;
    - hybrid: every full-text hit is kept; with exact tokens or quoted phrases in the query,
      the full-text hits holding every one come first; otherwise hits are ordered by the
      weighted sum alone; with an empty full-text ranking, the order is the semantic one;
    - the same inputs give the same output (ties: the earlier full-text, then semantic, place).
    """
    from app.domain.fulltext import query_terms  # fulltext imports exact_tokens from here

    ft = [(k, max(0.0, min(1.0, s))) for k, s in _dedupe(fulltext)]
    sem = _dedupe(semantic)
    ft_score = dict(ft)
    sem_score = dict(sem)
    hits: list[FusedHit[K]]
    if mode == "fulltext":
        hits = [FusedHit(k, s, s, sem_score.get(k)) for k, s in ft]
    elif mode == "semantic":
        hits = [
            FusedHit(k, semantic_score(s, min_score), ft_score.get(k), s)
            for k, s in sem
            if s >= min_score
        ]
    else:
        order: dict[K, int] = {}
        for k, _ in ft:
            order.setdefault(k, len(order))
        for k, s in sem:
            if s >= min_score:
                order.setdefault(k, len(order))
        w = max(0.0, min(1.0, fulltext_weight))
        fused = {
            k: w * ft_score.get(k, 0.0)
            + (1.0 - w)
            * (
                semantic_score(sem_score[k], min_score)
                if k in sem_score and sem_score[k] >= min_score
                else 0.0
            )
            for k in order
        }
        phrases = len(query_terms(query).phrases)  # exact tokens and quoted phrases
        holding = {k for k, s in ft if phrases and s >= phrases / (phrases + 1)}
        if holding:  # a lookup: the items holding every exact phrase first
            fused = {k: (0.5 + h / 2 if k in holding else h / 2) for k, h in fused.items()}
        ranked = sorted(order, key=lambda k: (-fused[k], order[k]))
        hits = [FusedHit(k, fused[k], ft_score.get(k), sem_score.get(k)) for k in ranked]
    # Scores are made non-increasing even where a ranker's own scores were not.
    out: list[FusedHit[K]] = []
    for hit in hits:
        if out and hit.score > out[-1].score:
            hit = FusedHit(hit.key, out[-1].score, hit.fulltext, hit.semantic)
        out.append(hit)
    return out if limit is None else out[:limit]
