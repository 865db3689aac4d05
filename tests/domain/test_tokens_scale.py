"""Token counting stays linear in a text's length (issue 16). A long run without a word
boundary ("a" * n, "_" * n) is one piece for the BPE; tiktoken before 0.13 merged such a
piece in quadratic time (80,000 characters took ~16 s; a 4 MB item would stall a worker for
hours). pyproject.toml requires tiktoken >= 0.13."""

from __future__ import annotations

import time
from importlib.metadata import version

from app.domain.tokens import count_text


def test_the_installed_tiktoken_is_one_without_the_quadratic_case() -> None:
    major, minor = (int(part) for part in version("tiktoken").split(".")[:2])
    assert (major, minor) >= (0, 13), version("tiktoken")


def test_a_long_piece_is_counted_in_linear_time() -> None:
    count_text("warm up", "o200k_base")
    for text in ("a" * 200_000, "_" * 200_000):
        started = time.perf_counter()
        tokens = count_text(text, "o200k_base")
        elapsed = time.perf_counter() - started
        assert 0 < tokens < len(text)
        # ~0.5 s here; a quadratic merge takes minutes on this input (generous for a busy CI)
        assert elapsed < 15, elapsed
