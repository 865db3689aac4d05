"""Lossless JSON for the whole service: orjson's speed, Python's exactness where orjson has none.

Clients may store any JSON value (metadata, tool inputs), integers of any size included. orjson
refuses to encode integers beyond 64 bits and silently decodes them as floats; Python's ``json``
keeps them exact. ``dumps`` falls back to ``json`` only when orjson refuses; ``loads`` switches
to ``json`` only for text holding a run of 19+ digits (the only place an integer can outgrow 64
bits), so ordinary payloads pay nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import date, datetime
from typing import Any

import orjson

# A run of 19 ASCII digits, found by mapping every digit to "0" and searching for nineteen
# of them (bytes.translate and ``in`` run in C): six times cheaper than a regex search, which
# cost more than orjson's parse itself on a context read's cold items (bench/RESULTS.md,
# session 15). JSON numbers are ASCII digits only, so no other digit matters here.
_DIGITS_TO_ZERO = bytes.maketrans(b"123456789", b"000000000")
_LONG_RUN = b"0" * 19


def _python_default(fallback: Callable[[Any], Any] | None) -> Callable[[Any], Any]:
    def default(value: Any) -> Any:
        if isinstance(value, datetime | date):
            return value.isoformat()  # the same RFC 3339 text orjson writes
        if fallback is not None:
            return fallback(value)
        raise TypeError(f"{type(value).__name__} is not JSON serialisable")

    return default


def dumps_bytes(value: Any, *, default: Callable[[Any], Any] | None = None) -> bytes:
    try:
        return orjson.dumps(value, default=default)
    except TypeError as exc:
        if "64-bit" not in str(exc):
            raise
        return json.dumps(
            value, default=_python_default(default), ensure_ascii=False, separators=(",", ":")
        ).encode()


def dumps(value: Any, *, default: Callable[[Any], Any] | None = None) -> str:
    return dumps_bytes(value, default=default).decode()


def loads(data: str | bytes) -> Any:
    raw = data if isinstance(data, bytes) else data.encode("utf-8", "surrogatepass")
    if _LONG_RUN in raw.translate(_DIGITS_TO_ZERO):
        return json.loads(data)
    return orjson.loads(data)
