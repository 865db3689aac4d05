"""Recall of full-text, semantic and hybrid search on a generated coding-agent session.

    .venv/bin/python bench/recall.py [--models builtin,wordllama] [--items 1200]
    .venv/bin/python bench/recall.py --backends sqlite,postgres  # through the service

The set (bench/recall_set.py, generated in code): a 1,200-item session with 52 planted facts,
each asked back by a question sharing no content word with it, and 12 exact tokens (file
names, error codes, hashes, ticket ids) planted beside near-misses. Per model it prints, for
the paraphrase questions and the exact-token queries apart, recall@5 and top-1 of:

- fulltext: the service's own SQLite full-text search (an FTS5 table declared as migration
  0002 declares ``items_fts``, the store's ``fts5_query``: every word required; ``-bm25``);
- semantic: cosine similarity of the query's vector to every item's (an exact scan);
- hybrid: ``app.domain.recall.fuse`` of the two, at the default ``min_score``;
- the same two once more with a noisier keyword ranker (any query word matches, as a naive
  OR search does): what fusion does when full text answers every question with noise;

and the embedding time per text (the whole session, in batches, one thread unless
``--threads``), plus how many semantic-only hits clear ``min_score`` for a query that is not in
the session at all (what a search answers to nonsense).

With ``--backends``, the same set goes through the running service instead, per backend
(bench/recall_service.py): appended over the API, indexed by the service's own indexer,
searched with ``GET /v1/sessions/{id}/search`` in each mode.

Candidates: ``builtin`` (the shipped model, app.embeddings.builtin) and ``wordllama`` (only if
the ``wordllama`` package is importable; its weights ship in its wheel, loaded with
``cache_dir`` pointed at the package so nothing is downloaded).
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from recall_set import RecallSet, build  # noqa: E402

from app.domain.recall import DEFAULT_MIN_SCORE, fuse  # noqa: E402
from app.store.search import fts5_query  # noqa: E402

Embed = Callable[[list[str]], np.ndarray]
NONSENSE = [
    "What is the airspeed velocity of an unladen swallow?",
    "Recipe for a vegan chocolate cake with hazelnuts",
    "Who won the 1998 football world cup final?",
]


def fulltext_index(items: list[str]) -> sqlite3.Connection:
    db = sqlite3.connect(":memory:")
    db.execute(
        "CREATE VIRTUAL TABLE items_fts USING fts5(search_text, tokenize='porter unicode61')"
    )
    db.executemany(
        "INSERT INTO items_fts(rowid, search_text) VALUES (?, ?)",
        [(i + 1, t) for i, t in enumerate(items)],
    )
    return db


def fulltext(
    db: sqlite3.Connection, query: str, limit: int = 50, *, any_word: bool = False
) -> list[tuple[int, float]]:
    match = fts5_query(query)
    if match is not None and any_word:  # a noisier keyword ranker: any word matches
        match = match.replace('" "', '" OR "')
    if match is None:
        return []
    rows = db.execute(
        "SELECT rowid, -bm25(items_fts) AS s FROM items_fts WHERE items_fts MATCH ? "
        "ORDER BY s DESC, rowid DESC LIMIT ?",
        (match, limit),
    ).fetchall()
    return [(int(r), float(s)) for r, s in rows]


def semantic(matrix: np.ndarray, qv: np.ndarray, limit: int = 50) -> list[tuple[int, float]]:
    sims = matrix @ qv
    top = np.argsort(-sims, kind="stable")[:limit]
    return [(int(i) + 1, float(sims[i])) for i in top]


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
    rs: RecallSet, db: sqlite3.Connection, name: str, embed: Embed, *, min_score: float
) -> dict[str, object]:
    embed(["warm up"])
    started = time.perf_counter()
    matrix = embed(rs.items)
    per_text_ms = (time.perf_counter() - started) / len(rs.items) * 1000
    results: dict[str, object] = {
        "model": name,
        "per_text_ms": per_text_ms,
        "dims": matrix.shape[1],
    }
    for label, queries in (("paraphrase", rs.facts), ("exact", rs.exact)):
        qvs = embed([q for q, _ in queries])
        for mode in ("fulltext", "semantic", "hybrid", "fulltext-any", "hybrid-any"):
            at5 = top1 = 0
            for (query, target), qv in zip(queries, qvs, strict=True):
                ft = fulltext(db, query, any_word=mode.endswith("-any"))
                sem = semantic(matrix, qv)
                if mode.startswith("fulltext"):
                    ranked = [k for k, _ in ft]
                elif mode == "semantic":
                    ranked = [
                        h.key
                        for h in fuse([], sem, query=query, mode="semantic", min_score=min_score)
                    ]
                else:
                    ranked = [h.key for h in fuse(ft, sem, query=query, min_score=min_score)]
                at5 += target in ranked[:5]
                top1 += bool(ranked) and ranked[0] == target
            results[f"{label}/{mode}"] = (at5 / len(queries), top1 / len(queries))
    noise = [
        len(fuse([], semantic(matrix, qv), query=q, mode="semantic", min_score=min_score))
        for q, qv in zip(NONSENSE, embed(NONSENSE), strict=True)
    ]
    results["nonsense_hits"] = noise
    target_sims = [
        float(matrix[t - 1] @ qv)
        for (_, t), qv in zip(rs.facts, embed([q for q, _ in rs.facts]), strict=True)
    ]
    results["fact_sim_min_median"] = (min(target_sims), float(np.median(target_sims)))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="builtin,wordllama")
    parser.add_argument("--items", type=int, default=1200)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--min-score", type=float, default=DEFAULT_MIN_SCORE)
    parser.add_argument("--backends", default="", help="sqlite,postgres: through the service")
    args = parser.parse_args()
    rs = build(items=args.items)
    if args.backends:
        from recall_service import run_backends

        run_backends(rs, args.backends.split(","), threads=args.threads)
        return
    db = fulltext_index(rs.items)
    print(
        f"{len(rs.items)} items, {len(rs.facts)} paraphrase questions, "
        f"{len(rs.exact)} exact-token queries; min_score {args.min_score}; "
        f"threads {args.threads}"
    )
    loaders = {"builtin": builtin_embed, "wordllama": wordllama_embed}
    print(
        "| model | dims | ms/text | queries | fulltext r@5 / top-1 | semantic r@5 / top-1 "
        "| hybrid r@5 / top-1 | fulltext, any word | hybrid with it |"
    )
    print("|---|---:|---:|---|---|---|---|---|---|")
    for name in args.models.split(","):
        try:
            model, embed = loaders[name](args.threads)
        except ImportError as exc:
            print(f"| {name} | | | not installed ({exc}) | | | | | |")
            continue
        r = evaluate(rs, db, model, embed, min_score=args.min_score)
        for label in ("paraphrase", "exact"):
            cells = " | ".join(
                "{:.2f} / {:.2f}".format(*r[f"{label}/{mode}"])  # type: ignore[str-format]
                for mode in ("fulltext", "semantic", "hybrid", "fulltext-any", "hybrid-any")
            )
            print(f"| {model} | {r['dims']} | {r['per_text_ms']:.2f} | {label} | {cells} |")
        lo, med = r["fact_sim_min_median"]  # type: ignore[misc]
        print(
            f"|  |  |  | planted fact's similarity min {lo:.2f} median {med:.2f}; "
            f"hits above min_score for 3 off-topic queries: {r['nonsense_hits']} | | | | | |"
        )


if __name__ == "__main__":
    main()
