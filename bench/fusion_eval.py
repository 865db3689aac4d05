"""Hybrid fusion rules on real conversations: REALTALK's ten chats (bench/realtalk.py), offline.

    REALTALK_DIR=... .venv/bin/python bench/fusion_eval.py [--model builtin] [--floor 0.25]

Each question ranks every turn of its chat. The full-text side is BM25 with the service's stop
words (``app.domain.fulltext.STOP_WORDS``) on the 0..1 scale the service reports
(``r / (r + 1)`` of BM25 relative to the query terms' IDF sum); the semantic side is the
model's cosine similarity on the service's scale (``(c - floor) / (1 - floor)``, 0 below the
floor). Rules compared in the same run: each ranker alone, the weighted sum at several
full-text weights (``app.domain.recall.fuse``'s rule for a question), the rule before it
(hits by meaning first, full text at 0.05), and reciprocal rank fusion. Turn and question
vectors come from bench/retrieval_eval.py's cache (the same models, ``bench/candidates.py``),
embedded once when missing. Prints recall@5/10/50 over all questions and R@5 per category.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import candidates  # noqa: E402
import realtalk  # noqa: E402
import retrieval_eval as ev  # noqa: E402

from app.domain.fulltext import STOP_WORDS  # noqa: E402

KS = (5, 10, 50)


def fulltext_scores(index: ev.BM25, query: str) -> tuple[np.ndarray, np.ndarray]:
    """BM25 over the query's non-stop words, raw and on the service's 0..1 scale."""
    raw = np.zeros(len(index.docs))
    idf_sum = 0.0
    for term in {w for w in ev.tokens(query) if w not in STOP_WORDS}:
        if term not in index.postings:
            continue
        idf_sum += index.idf[term]
        for i in index.postings[term]:
            tf = index.docs[i][term]
            norm = index.k1 * (1 - index.b + index.b * index.lengths[i] / index.avg)
            raw[i] += index.idf[term] * tf * (index.k1 + 1) / (tf + norm)
    ratio = raw / idf_sum if idf_sum > 0 else raw
    return raw, ratio / (ratio + 1)


def rrf(ft: np.ndarray, sem: np.ndarray, k: int = 60) -> np.ndarray:
    def ranks(x: np.ndarray) -> np.ndarray:
        order = np.argsort(-x, kind="stable")
        out = np.empty_like(order)
        out[order] = np.arange(len(order))
        return out

    return (ft > 0) / (k + ranks(ft) + 1) + (sem > 0) / (k + ranks(sem) + 1)


def rules(weights: list[float]) -> dict[str, object]:
    out: dict[str, object] = {
        "full text alone": lambda ft, sem: ft,
        "meaning alone": lambda ft, sem: sem,
        "before: meaning first, 0.05": lambda ft, sem: np.where(
            sem > 0, 1 + 0.05 * ft + 0.95 * sem, np.where(ft > 0, 0.05 * ft, -1.0)
        ),
        "reciprocal rank fusion": rrf,
    }
    for w in weights:
        out[f"weighted sum, full text {w}"] = lambda ft, sem, w=w: w * ft + (1 - w) * sem
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", help="folder with REALTALK's Chat_*.json (else $REALTALK_DIR)")
    parser.add_argument("--model", default="builtin", choices=sorted(candidates.LOADERS))
    parser.add_argument("--floor", type=float, default=0.25)
    parser.add_argument("--weights", default="0.05,0.2,0.3,0.4,0.5,0.6")
    args = parser.parse_args()
    chats = realtalk.load(args.data)
    model: candidates.Candidate | None = None

    def embed(kind: str):  # type: ignore[no-untyped-def]
        def run(texts: list[str]) -> np.ndarray:
            nonlocal model
            model = model or candidates.LOADERS[args.model]()
            return model.passages(texts) if kind == "passages" else model.queries(texts)

        return run

    table = rules([float(w) for w in args.weights.split(",")])
    sums = {name: dict.fromkeys(KS, 0.0) for name in table}
    by_category: dict[tuple[str, str], list[float]] = {}
    asked = 0
    for chat in chats:
        texts = [turn.text for turn in chat.turns]
        index = ev.BM25(texts)
        turns = ev.cached(args.model, f"{chat.name}/turn", texts, embed("passages"), True)
        questions = [q.text for q in chat.questions]
        qvecs = ev.cached(args.model, f"{chat.name}/q", questions, embed("queries"), True)
        turns = turns / np.linalg.norm(turns, axis=1, keepdims=True)
        qvecs = qvecs / np.linalg.norm(qvecs, axis=1, keepdims=True)
        at = {turn.id: i for i, turn in enumerate(chat.turns)}
        for qi, question in enumerate(chat.questions):
            _, ft = fulltext_scores(index, question.text)
            cos = turns @ qvecs[qi]
            sem = np.where(cos >= args.floor, (cos - args.floor) / (1 - args.floor), 0.0)
            evidence = {at[e] for e in question.evidence}
            category = realtalk.CATEGORIES[question.category]
            asked += 1
            for name, rule in table.items():
                ranked = list(np.argsort(-rule(ft, sem), kind="stable")[: max(KS)])  # type: ignore[operator]
                for k in KS:
                    sums[name][k] += len(evidence.intersection(ranked[:k])) / len(evidence)
                by_category.setdefault((name, category), []).append(
                    len(evidence.intersection(ranked[:5])) / len(evidence)
                )
    categories = sorted({c for _, c in by_category})
    print(f"{args.model}, floor {args.floor}: {asked} questions, {len(chats)} chats")
    print("| rule | R@5 | R@10 | R@50 | " + " | ".join(f"R@5 {c}" for c in categories) + " |")
    print("|---|---:|---:|---:|" + "---:|" * len(categories))
    for name in table:
        cells = [f"{100 * sums[name][k] / asked:.1f}" for k in KS]
        cells += [f"{100 * np.mean(by_category[(name, c)]):.1f}" for c in categories]
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
