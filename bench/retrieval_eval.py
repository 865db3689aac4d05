"""Offline retrieval evaluation: which embedder finds the turns a question needs in a long chat.

    PYTHONPATH=.:/tmp/evaltarget REALTALK_DIR=/path/to/REALTALK/data \
        .venv/bin/python bench/retrieval_eval.py [--models builtin,e5-small,...] [--variants auto]

Data: REALTALK (bench/realtalk.py: ten real two-person chats over 21 days, ~8,900 turns,
questions with turn-level evidence; not committed, its repository has no licence). Scored as
the memory-retrieval literature on such chats scores it: every turn of a chat is a candidate,
every question ranks all of its chat's turns, and recall@k is the share of the question's
evidence turns in the top k, averaged over questions (overall and per category). The REALTALK
paper publishes only answer accuracy, no retrieval figures, so the published baseline this
script can print beside ours is none; the floor measured in the same run is plain BM25.

In the same run:
- ``bm25``: plain any-word BM25 in pure Python (below): every query word counts, rare words
  weigh more, no stop-word list, no stemming; CJK text as character bigrams.
- each candidate embedder of bench/candidates.py: cosine over every turn (an exact scan),
  one CPU thread; CPU milliseconds per chat turn embedded (a fixed sample of 1,000 real turns,
  batches of 32, uncached); RSS of a fresh process holding the model after embedding 256 turns
  (``--probe-rss``, run as a subprocess per model); the installed size of its packages.
- what to index, for the models named by ``--variants`` (default: the best by R@10): the turn
  alone, with who spoke, with when, with the previous turn, and all three; deltas vs. alone.
- the Chinese set (bench/zh_recall_set.py): R@1/R@5 of each ranker.

Turn vectors are cached under ``$RETRIEVAL_EVAL_CACHE`` (default /tmp/retrieval_eval_cache),
keyed by model, text variant and the texts, so a rerun only re-times; ``--no-cache`` re-embeds.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import re
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import candidates  # noqa: E402  (sets the one-thread environment before numpy loads)
import numpy as np  # noqa: E402
import realtalk  # noqa: E402
import zh_recall_set  # noqa: E402

KS = (5, 10, 50)
_WORD = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]+|[^\W_]+", re.UNICODE)
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")


def tokens(text: str) -> list[str]:
    out: list[str] = []
    for run in _WORD.findall(text.lower()):
        if _CJK.match(run):
            out.extend(run[i : i + 2] for i in range(max(len(run) - 1, 1)))
        else:
            out.append(run)
    return out


class BM25:
    """Okapi BM25 (k1=1.2, b=0.75), any query word matching: the plain baseline."""

    def __init__(self, docs: Sequence[str], *, k1: float = 1.2, b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        self.docs = [Counter(tokens(d)) for d in docs]
        self.lengths = [sum(c.values()) for c in self.docs]
        self.avg = (sum(self.lengths) / len(self.lengths)) or 1.0
        df: Counter[str] = Counter()
        for counts in self.docs:
            df.update(counts.keys())
        n = len(self.docs)
        self.idf = {t: math.log(1 + (n - f + 0.5) / (f + 0.5)) for t, f in df.items()}
        self.postings: dict[str, list[int]] = {}
        for i, counts in enumerate(self.docs):
            for t in counts:
                self.postings.setdefault(t, []).append(i)

    def scores(self, query: str) -> np.ndarray:
        out = np.zeros(len(self.docs), dtype=np.float64)
        for t in set(tokens(query)):
            idf = self.idf.get(t)
            if idf is None:
                continue
            for i in self.postings[t]:
                tf = self.docs[i][t]
                norm = self.k1 * (1 - self.b + self.b * self.lengths[i] / self.avg)
                out[i] += idf * tf * (self.k1 + 1) / (tf + norm)
        return out


def top(scores: np.ndarray, k: int) -> list[int]:
    # Ties (BM25's zeros) keep turn order: a stable sort of the negated scores.
    return list(np.argsort(-scores, kind="stable")[:k])


def recall(ranked: list[int], evidence: set[int], k: int) -> float:
    return len(evidence.intersection(ranked[:k])) / len(evidence)


# -- what a turn's indexed text carries ---------------------------------------------------


def variant_texts(chat: realtalk.Chat, variant: str) -> list[str]:
    out = []
    for i, turn in enumerate(chat.turns):
        who = turn.speaker[:1].upper() + turn.speaker[1:]
        when = f"{turn.when:%d %B %Y}"
        prev = chat.turns[i - 1] if i and chat.turns[i - 1].session == turn.session else None
        before = (
            f"{prev.speaker[:1].upper() + prev.speaker[1:]}: {prev.text[:200]}\n" if prev else ""
        )
        out.append(
            {
                "turn": turn.text,
                "+speaker": f"{who}: {turn.text}",
                "+date": f"[{when}] {turn.text}",
                "+previous": f"{prev.text[:200]}\n{turn.text}" if prev else turn.text,
                "+all": f"[{when}] {before}{who}: {turn.text}",
            }[variant]
        )
    return out


VARIANTS = ("turn", "+speaker", "+date", "+previous", "+all")


# -- embedding, cached ----------------------------------------------------------------------


def cached(
    name: str, variant: str, texts: list[str], embed: candidates.Embed, use: bool
) -> np.ndarray:
    folder = Path(os.environ.get("RETRIEVAL_EVAL_CACHE", "/tmp/retrieval_eval_cache"))
    key = hashlib.sha256("\x00".join([name, variant, *texts]).encode()).hexdigest()[:24]
    path = folder / f"{name}-{key}.npy"
    if use and path.exists():
        return np.load(path)
    vectors = embed(texts)
    folder.mkdir(parents=True, exist_ok=True)
    np.save(path, vectors)
    return vectors


# -- scoring --------------------------------------------------------------------------------


Ranker = Callable[[realtalk.Chat, list[str]], list[list[int]]]  # (chat, its turn texts) -> rankings


def evaluate(
    chats: list[realtalk.Chat], texts: dict[str, list[str]], rank: Ranker
) -> dict[str, float]:
    sums: Counter[str] = Counter()
    counts: Counter[str] = Counter()
    for chat in chats:
        index = {turn.id: i for i, turn in enumerate(chat.turns)}
        rankings = rank(chat, texts[chat.name])
        for question, ranked in zip(chat.questions, rankings, strict=True):
            evidence = {index[e] for e in question.evidence}
            for group in ("all", realtalk.CATEGORIES[question.category]):
                counts[group] += 1
                for k in KS:
                    sums[f"{group}@{k}"] += recall(ranked, evidence, k)
    return {key: 100 * value / counts[key.split("@")[0]] for key, value in sums.items()}


def bm25_ranker(chat: realtalk.Chat, texts: list[str]) -> list[list[int]]:
    index = BM25(texts)
    return [top(index.scores(q.text), max(KS)) for q in chat.questions]


def dense_ranker(model: candidates.Candidate, variant: str, use_cache: bool) -> Ranker:
    def rank(chat: realtalk.Chat, texts: list[str]) -> list[list[int]]:
        turns = cached(model.name, f"{chat.name}/{variant}", texts, model.passages, use_cache)
        queries = cached(
            model.name, f"{chat.name}/q", [q.text for q in chat.questions], model.queries, use_cache
        )
        return [top(turns @ q, max(KS)) for q in queries]

    return rank


def row(name: str, r: dict[str, float], extra: str = "") -> str:
    return f"| {name} | " + " | ".join(f"{r[f'all@{k}']:.1f}" for k in KS) + f" |{extra}"


def category_row(name: str, r: dict[str, float]) -> str:
    cells = [
        f"{r.get(f'{c}@5', 0):.1f} / {r.get(f'{c}@10', 0):.1f}"
        for c in realtalk.CATEGORIES.values()
    ]
    return f"| {name} | " + " | ".join(cells) + " |"


# -- cost: CPU per turn, memory -------------------------------------------------------------


def cpu_ms_per_turn(model: candidates.Candidate, sample: list[str]) -> float:
    model.passages(sample[:32])  # warm-up: first-call allocations are not per-turn cost
    start = time.process_time()
    model.passages(sample)
    return 1000 * (time.process_time() - start) / len(sample)


def _status_mb(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def probe_rss(name: str, sample_file: str) -> None:
    """Run in a fresh process: RSS before the model, after loading it and embedding 256 turns."""
    import onnxruntime  # noqa: F401  (the service imports these whatever the model)
    import tokenizers  # noqa: F401

    before = _status_mb("VmRSS")
    model = candidates.load(name)
    assert model is not None
    sample = json.loads(Path(sample_file).read_text())[:256]
    model.passages(sample)
    print(json.dumps({"before": before, "rss": _status_mb("VmRSS"), "peak": _status_mb("VmHWM")}))


def measure_rss(name: str, sample: list[str]) -> dict[str, float]:
    path = (
        Path(os.environ.get("RETRIEVAL_EVAL_CACHE", "/tmp/retrieval_eval_cache"))
        / "rss-sample.json"
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(sample))
    out = subprocess.run(
        [sys.executable, __file__, "--probe-rss", name, "--sample", str(path)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


# -- the Chinese set ------------------------------------------------------------------------


def chinese(models: list[candidates.Candidate]) -> list[str]:
    zh = zh_recall_set.build()
    lines = ["| ranker | R@1 | R@5 |", "|---|---:|---:|"]

    def score(rankings: list[list[int]]) -> str:
        r1 = sum(slot in r[:1] for (_, slot), r in zip(zh.questions, rankings, strict=True))
        r5 = sum(slot in r[:5] for (_, slot), r in zip(zh.questions, rankings, strict=True))
        n = len(zh.questions)
        return f"{100 * r1 / n:.0f} | {100 * r5 / n:.0f}"

    index = BM25(zh.turns)
    lines.append(
        f"| bm25 (character bigrams) | {score([top(index.scores(q), 5) for q, _ in zh.questions])} |"
    )
    for model in models:
        turns = model.passages(zh.turns)
        queries = model.queries([q for q, _ in zh.questions])
        lines.append(f"| {model.name} | {score([top(turns @ q, 5) for q in queries])} |")
    return lines


# -- main -----------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", help="folder with REALTALK's Chat_*.json (else $REALTALK_DIR)")
    parser.add_argument("--models", default=",".join(candidates.LOADERS))
    parser.add_argument(
        "--variants",
        default="auto",
        help="models to measure text variants for; auto = best by R@10; none",
    )
    parser.add_argument("--chats", help="only these chats, by the dataset's number (e.g. 1,2,3,4)")
    parser.add_argument("--texts", default=",".join(VARIANTS), help="text variants to measure")
    parser.add_argument("--no-cache", action="store_true")
    parser.add_argument("--no-rss", action="store_true")
    parser.add_argument("--probe-rss", help=argparse.SUPPRESS)
    parser.add_argument("--sample", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.probe_rss:
        probe_rss(args.probe_rss, args.sample)
        return

    chats = realtalk.load(args.data)
    if args.chats:
        wanted_chats = {f"Chat_{n}_" for n in args.chats.split(",")}
        chats = [c for c in chats if any(c.name.startswith(w) for w in wanted_chats)]
    n_turns = sum(len(c.turns) for c in chats)
    n_questions = sum(len(c.questions) for c in chats)
    per_category = Counter(realtalk.CATEGORIES[q.category] for c in chats for q in c.questions)
    print(
        f"REALTALK: {len(chats)} chats ({', '.join(c.name for c in chats)}), {n_turns} turns, {n_questions} questions scored "
        f"({', '.join(f'{k} {v}' for k, v in per_category.items())}); "
        f"{sum(c.dropped for c in chats)} left out (no evidence, or evidence not a turn)\n"
    )
    plain = {c.name: variant_texts(c, "turn") for c in chats}
    all_turns = [t for c in chats for t in plain[c.name]]
    sample = [all_turns[i] for i in np.random.default_rng(0).permutation(len(all_turns))[:1000]]

    results: dict[str, dict[str, float]] = {"bm25": evaluate(chats, plain, bm25_ranker)}
    costs: dict[str, str] = {"bm25": " | | | | |"}
    loaded: list[candidates.Candidate] = []
    for name in args.models.split(","):
        model = candidates.load(name)
        if model is None:
            continue
        loaded.append(model)
        results[name] = evaluate(chats, plain, dense_ranker(model, "turn", not args.no_cache))
        cpu = cpu_ms_per_turn(model, sample)
        rss = {"rss": float("nan"), "before": float("nan"), "peak": float("nan")}
        if not args.no_rss:
            rss = measure_rss(name, sample)
        size = candidates.installed_bytes(model.packages) / 1e6
        costs[name] = (
            f" {cpu:.2f} | {1000 / cpu:.0f} | {rss['rss']:.0f} ({rss['rss'] - rss['before']:+.0f}) "
            f"| {size:.0f} | {model.license} |"
        )
        print(f"  {name}: R@10 {results[name]['all@10']:.1f}, {cpu:.2f} ms/turn", flush=True)

    print("\n## Turn-level recall@k on REALTALK (question as the query, all of its chat's turns)\n")
    print(
        "| ranker | R@5 | R@10 | R@50 | CPU ms/turn | turns/s, 1 core | RSS MB (model's share) | installed MB | license |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for name, r in results.items():
        print(row(name, r, costs[name]))
    print(
        "| REALTALK paper: retrieval baseline | n/a | n/a | n/a | (the paper reports answer accuracy only) |"
    )

    for model in loaded:
        print(f"- {model.name}: {', '.join(model.packages)}; published by {model.provenance}")
    print("\n### Per category, R@5 / R@10\n")
    print(
        "| ranker | "
        + " | ".join(f"{c} ({per_category[c]})" for c in realtalk.CATEGORIES.values())
        + " |"
    )
    print("|---|" + "---:|" * len(realtalk.CATEGORIES))
    for name, r in results.items():
        print(category_row(name, r))

    wanted = [m for m in loaded if m.name in args.variants.split(",")]
    if args.variants == "auto" and loaded:
        wanted = [max(loaded, key=lambda m: results[m.name]["all@10"])]
    for model in wanted:
        print(f"\n## What to index, {model.name}: recall@k by the text embedded for each turn\n")
        print("| text embedded | R@5 | R@10 | R@50 | delta R@10 vs. turn alone |")
        print("|---|---:|---:|---:|---:|")
        base = results[model.name]
        for variant in [v for v in VARIANTS if v == "turn" or v in args.texts.split(",")]:
            texts = {c.name: variant_texts(c, variant) for c in chats}
            r = (
                base
                if variant == "turn"
                else evaluate(chats, texts, dense_ranker(model, variant, not args.no_cache))
            )
            print(row(variant, r, f" {r['all@10'] - base['all@10']:+.1f} |"))
        for variant in ("+speaker", "+all"):
            texts = {c.name: variant_texts(c, variant) for c in chats}
            r = evaluate(chats, texts, bm25_ranker)
            print(
                row(
                    f"bm25 over {variant}",
                    r,
                    f" {r['all@10'] - results['bm25']['all@10']:+.1f} (vs. bm25) |",
                )
            )

    print(
        "\n## Chinese set (bench/zh_recall_set.py): a fact planted early, asked later in other words\n"
    )
    print("\n".join(chinese(loaded)))


if __name__ == "__main__":
    main()
