"""Recall@k of full-text, semantic and hybrid search on the dev sets, before and after.

    .venv/bin/python bench/recall.py [--models builtin,wordllama] [--items 1200]
    .venv/bin/python bench/recall.py --backends sqlite,postgres  # through the service

The dev sets (bench/recall_set.py, generated in code; nothing of the held-out benchmark):

- ``paraphrase``: a 1,200-item coding-agent session with 52 planted facts, each asked back by
  a question sharing no content word with it (what only meaning can find);
- ``exact``: 12 exact tokens (file names, error codes, hashes, ticket ids) planted beside
  near-misses, each looked up by a query holding it;
- ``dialogue``: a 1,500-turn chat between ten friends with 70 personal facts, each asked
  back the way people ask about a conversation (naming the person, often the place).

Per set it prints recall@5, @10 and @50 (the share of questions whose target is in the top k)
of, in one run:

- ``bm25``: a plain any-word BM25 in pure Python (``PlainBM25``: lower-cased words, no
  stemming, no stop words), the baseline;
- ``before``: the rules of main at 2b07f80, kept here to compare with: full text required
  every word (FTS5's implicit AND) and hybrid was weighted reciprocal rank fusion
  (``rrf_fuse``), semantic hits at cosine 0.25 or more;
- ``after``: the service's rules: full text any term (``app.domain.fulltext``: our stop
  words, FTS5's bm25(), exact phrases first), semantic hits at or above the model's
  ``relevance_floor`` with a footing (some query term occurs in the set), hybrid
  ``app.domain.recall.fuse`` at each ``FULLTEXT_WEIGHT`` of ``--weights``.

Then the calibration of the relevance floor ("floor" lines): the best similarity of 300
random tokens and of 20 off-topic questions to the coding session, and the similarity of
each paraphrase question to its target. The model's embedding time per text is printed too.

With ``--backends``, the sets go through the running service instead, per backend
(bench/recall_service.py): appended over the API, indexed by the service's own indexer,
searched with ``GET /v1/sessions/{id}/search`` in each mode (``limit=50``).

Candidates: ``builtin`` (the shipped model, app.embeddings.builtin) and ``wordllama`` (only if
the ``wordllama`` package is importable; its weights ship in its wheel, loaded with
``cache_dir`` pointed at the package so nothing is downloaded).
"""

from __future__ import annotations

import argparse
import asyncio
import math
import random
import re
import sqlite3
import string
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from recall_set import RecallSet, build, build_dialogue  # noqa: E402

from app.domain.fulltext import (  # noqa: E402
    fulltext_score,
    idf,
    needs_no_footing,
    query_terms,
)
from app.domain.recall import exact_tokens, fuse, relevance_floor  # noqa: E402

Embed = Callable[[list[str]], np.ndarray]
NONSENSE = [
    "What is the airspeed velocity of an unladen swallow?",
    "Recipe for a vegan chocolate cake with hazelnuts",
    "Who won the 1998 football world cup final?",
    "How tall is Mount Everest?",
    "Best beaches in Portugal for surfing",
    "What did Anna cook for dinner last night?",
    "How do I knit a scarf?",
    "Translate good morning into Japanese",
    "When was the printing press invented?",
    "Which planet has the most moons?",
    "Is it going to rain in Paris tomorrow?",
    "Suggest a name for a golden retriever puppy",
    "How many calories are in a banana?",
    "Who painted the Mona Lisa?",
    "What is the capital of Australia?",
    "Lyrics of a famous Beatles song",
    "How do I get red wine out of a carpet?",
    "Train times from Berlin to Prague",
    "Why is the sky blue?",
    "Good exercises for lower back pain",
]
KS = (5, 10, 50)
Ranking = list[tuple[int, float]]


class PlainBM25:
    """The baseline: any-word BM25 (k1 1.2, b 0.75, Lucene's IDF) over lower-cased words, no
    stemming and no stop words, in pure Python."""

    def __init__(self, items: Sequence[str], k1: float = 1.2, b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        self.docs = [Counter(re.findall(r"\w+", t.lower())) for t in items]
        self.lengths = [sum(d.values()) for d in self.docs]
        self.avgdl = sum(self.lengths) / len(self.docs)
        self.postings: dict[str, list[int]] = {}
        for i, doc in enumerate(self.docs):
            for word in doc:
                self.postings.setdefault(word, []).append(i)

    def rank(self, query: str, limit: int = 50) -> Ranking:
        n = len(self.docs)
        scores: dict[int, float] = {}
        for word in set(re.findall(r"\w+", query.lower())):
            posting = self.postings.get(word, [])
            if not posting:
                continue
            w_idf = math.log(1 + (n - len(posting) + 0.5) / (len(posting) + 0.5))
            for i in posting:
                tf = self.docs[i][word]
                norm = self.k1 * (1 - self.b + self.b * self.lengths[i] / self.avgdl)
                scores[i] = scores.get(i, 0.0) + w_idf * tf * (self.k1 + 1) / (tf + norm)
        top = sorted(scores, key=lambda i: (-scores[i], i))[:limit]
        return [(i + 1, scores[i]) for i in top]


def fulltext_index(items: list[str]) -> sqlite3.Connection:
    """An FTS5 table as migration 0002 declares ``items_fts`` (porter, unicode61)."""
    db = sqlite3.connect(":memory:")
    db.execute(
        "CREATE VIRTUAL TABLE items_fts USING fts5(search_text, tokenize='porter unicode61')"
    )
    db.executemany(
        "INSERT INTO items_fts(rowid, search_text) VALUES (?, ?)",
        [(i + 1, t) for i, t in enumerate(items)],
    )
    return db


def fulltext_before(db: sqlite3.Connection, query: str, limit: int = 50) -> Ranking:
    """main at 2b07f80: every word of the query required, ranked by -bm25()."""
    words = re.findall(r"\w+", query)
    if not words:
        return []
    rows = db.execute(
        "SELECT rowid, -bm25(items_fts) AS s FROM items_fts WHERE items_fts MATCH ? "
        "ORDER BY s DESC, rowid DESC LIMIT ?",
        (" ".join(f'"{w}"' for w in words), limit),
    ).fetchall()
    return [(int(r), float(s)) for r, s in rows]


def fulltext_after(db: sqlite3.Connection, query: str, limit: int = 50) -> Ranking:
    """The service's full text on SQLite (app/store/search.py): any term, scored by
    ``fulltext_score`` from bm25() and the terms' FTS5 IDFs, exact phrases held first."""
    terms = query_terms(query)
    if not terms.terms:
        return []

    def count(match: str) -> int:
        return int(
            db.execute(
                "SELECT count(*) FROM items_fts WHERE items_fts MATCH ?", (match,)
            ).fetchone()[0]
        )

    n = int(db.execute("SELECT count(*) FROM items_fts").fetchone()[0])
    idf_sum = sum(idf(n, count(f'"{w}"')) for w in terms.terms)
    holding = [
        {
            r
            for (r,) in db.execute(
                "SELECT rowid FROM items_fts WHERE items_fts MATCH ?", ('"' + " ".join(p) + '"',)
            )
        }
        for p in terms.phrases
    ]
    rows = db.execute(
        "SELECT rowid, -bm25(items_fts) FROM items_fts WHERE items_fts MATCH ?",
        (" OR ".join(f'"{w}"' for w in terms.terms),),
    ).fetchall()
    scored = [
        (
            int(r),
            fulltext_score(
                float(s), idf_sum, phrases_held=sum(r in h for h in holding), phrases=len(holding)
            ),
        )
        for r, s in rows
    ]
    scored.sort(key=lambda kv: (-kv[1], -kv[0]))
    return scored[:limit]


def semantic(matrix: np.ndarray, qv: np.ndarray, limit: int = 50) -> Ranking:
    sims = matrix @ qv
    top = np.argsort(-sims, kind="stable")[:limit]
    return [(int(i) + 1, float(sims[i])) for i in top]


def rrf_fuse(ft: Ranking, sem: Ranking, query: str, min_score: float = 0.25) -> list[int]:
    """main at 2b07f80's hybrid rule (app.domain.recall.fuse then): an exact-token query puts
    the full-text hits first; any other fuses by weighted reciprocal rank (semantic 1.0,
    full text 0.5, k 60) over the semantic hits at or above ``min_score``, then the other
    full-text hits."""
    if exact_tokens(query) and ft:
        keys = [k for k, _ in ft]
        return keys + [k for k, s in sem if s >= min_score and k not in set(keys)]
    plausible = [k for k, s in sem if s >= min_score]
    fused = {k: 1.0 / (60 + r) for r, k in enumerate(plausible, start=1)}
    for r, (k, _) in enumerate(ft, start=1):
        if k in fused:
            fused[k] += 0.5 / (60 + r)
    ranked = sorted(fused, key=lambda k: -fused[k])
    return ranked + [k for k, _ in ft if k not in fused]


def recall_at(ranked: list[int], target: int) -> tuple[int, ...]:
    return tuple(int(target in ranked[:k]) for k in KS)


def builtin_embed(threads: int) -> tuple[str, Embed]:
    from app.embeddings.builtin import BuiltinEmbedder
    from app.settings import EmbeddingsSettings

    embedder = BuiltinEmbedder(EmbeddingsSettings(threads=threads))

    def embed(texts: list[str]) -> np.ndarray:
        return np.asarray(asyncio.run(embedder.embed(texts)), dtype=np.float32)

    return embedder.model, embed


def wordllama_embed(threads: int) -> tuple[str, Embed]:
    import wordllama
    from wordllama import WordLlama

    model = WordLlama.load(
        config="l2_supercat",
        dim=256,
        disable_download=True,
        cache_dir=Path(wordllama.__file__).parent,
    )

    def embed(texts: list[str]) -> np.ndarray:
        return np.asarray(model.embed(texts, norm=True), dtype=np.float32)

    return "wordllama-l2_supercat-256", embed


def evaluate(
    sets: dict[str, RecallSet], name: str, embed: Embed, *, weights: list[float]
) -> dict[str, dict[str, tuple[float, ...]]]:
    """{set: {ranker: (R@5, R@10, R@50)}} for every ranker of the module doc."""
    floor = relevance_floor(name)
    out: dict[str, dict[str, tuple[float, ...]]] = {}
    for set_name, rs in sets.items():
        db = fulltext_index(rs.items)
        plain = PlainBM25(rs.items)
        matrix = embed(rs.items)
        queries = rs.exact if set_name == "exact" else rs.facts
        qvs = embed([q for q, _ in queries])
        sums: dict[str, list[int]] = {}
        for (query, target), qv in zip(queries, qvs, strict=True):
            sem = semantic(matrix, qv)
            ft_old = fulltext_before(db, query)
            ft_new = fulltext_after(db, query)
            footed = sem if ft_new or needs_no_footing(query) else []
            rankings = {
                "bm25": [k for k, _ in plain.rank(query)],
                "before fulltext": [k for k, _ in ft_old],
                "before semantic": [k for k, s in sem if s >= 0.25],
                "before hybrid": rrf_fuse(ft_old, sem, query),
                "after fulltext": [k for k, _ in ft_new],
                "after semantic": [
                    h.key for h in fuse([], footed, query=query, mode="semantic", min_score=floor)
                ],
            }
            for w in weights:
                fused = fuse(ft_new, footed, query=query, min_score=floor, fulltext_weight=w)
                rankings[f"after hybrid w={w:g}"] = [h.key for h in fused]
            for ranker, ranked in rankings.items():
                hits = recall_at(ranked, target)
                acc = sums.setdefault(ranker, [0] * len(KS))
                for i, h in enumerate(hits):
                    acc[i] += h
        out[set_name] = {r: tuple(100 * v / len(queries) for v in acc) for r, acc in sums.items()}
    return out


def floor_lines(rs: RecallSet, embed: Embed) -> list[str]:
    """What the relevance floor is calibrated on (module doc)."""
    rng = random.Random(3)
    alphabet = string.ascii_lowercase + string.digits
    tokens = ["".join(rng.choice(alphabet) for _ in range(rng.randint(6, 12))) for _ in range(300)]
    matrix = embed(rs.items)
    best_random = (embed(tokens) @ matrix.T).max(axis=1)
    best_offtopic = (embed(NONSENSE) @ matrix.T).max(axis=1)
    qvs = embed([q for q, _ in rs.facts])
    targets = np.array(
        [float(matrix[t - 1] @ qv) for (_, t), qv in zip(rs.facts, qvs, strict=True)]
    )

    def pcts(values: np.ndarray) -> str:
        return " / ".join(f"{np.percentile(values, p):.2f}" for p in (10, 50, 90, 100))

    return [
        f"floor: random tokens' best similarity p10/p50/p90/max {pcts(best_random)}",
        f"floor: off-topic questions' best similarity p10/p50/p90/max {pcts(best_offtopic)}",
        f"floor: paraphrase questions' similarity to their target p10/p50/p90/max {pcts(targets)}",
    ]


def memoized(raw: Embed) -> Embed:
    """``raw``, each list of texts embedded once (the coding session serves two sets)."""
    memo: dict[tuple[str, ...], np.ndarray] = {}

    def embed(texts: list[str]) -> np.ndarray:
        key = tuple(texts)
        if key not in memo:
            memo[key] = raw(texts)
        return memo[key]

    return embed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="builtin")
    parser.add_argument("--items", type=int, default=1200)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--weights", default="0.05,0.1,0.2,0.3,0.5")
    parser.add_argument("--backends", default="", help="sqlite,postgres: through the service")
    args = parser.parse_args()
    rs = build(items=args.items)
    sets = {"paraphrase": rs, "exact": rs, "dialogue": build_dialogue()}
    if args.backends:
        from recall_service import run_backends

        run_backends(sets, args.backends.split(","), threads=args.threads)
        return
    weights = [float(w) for w in args.weights.split(",")]
    print(
        f"coding session {len(rs.items)} items ({len(rs.facts)} paraphrase questions, "
        f"{len(rs.exact)} exact-token queries); dialogue {len(sets['dialogue'].items)} turns "
        f"({len(sets['dialogue'].facts)} questions); threads {args.threads}"
    )
    loaders = {"builtin": builtin_embed, "wordllama": wordllama_embed}
    for name in args.models.split(","):
        try:
            model, raw_embed = loaders[name](args.threads)
        except ImportError as exc:
            print(f"{name}: not installed ({exc})")
            continue
        embed = memoized(raw_embed)
        raw_embed(["warm up"])
        started = time.perf_counter()
        raw_embed(rs.items[:300])
        per_text_ms = (time.perf_counter() - started) / 300 * 1000
        print(f"\n{model}: {per_text_ms:.2f} ms per text; floor {relevance_floor(model)}")
        results = evaluate(sets, model, embed, weights=weights)
        print("| set | ranker | R@5 | R@10 | R@50 |")
        print("|---|---|---:|---:|---:|")
        for set_name, rankers in results.items():
            for ranker, values in rankers.items():
                cells = " | ".join(f"{v:.1f}" for v in values)
                print(f"| {set_name} | {ranker} | {cells} |")
        for line in floor_lines(rs, embed):
            print(line)


if __name__ == "__main__":
    main()
