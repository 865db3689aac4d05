"""The session id rule (app.domain.ids): the function and the published regex say the same
thing, on the edge cases and on a generated sample, and the refused characters are exactly
Unicode's control, format, surrogate and line/paragraph-separator characters (plus '/')."""

from __future__ import annotations

import re
import unicodedata
from itertools import pairwise

import jsonschema_rs
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from app.domain.ids import (
    REFUSED_RANGES,
    SESSION_ID_MAX,
    SESSION_ID_PATTERN,
    SESSION_PREFIX_PATTERN,
    is_session_id_char,
    is_valid_session_id,
    is_valid_session_prefix,
)

ID_RE = re.compile(SESSION_ID_PATTERN)
RUST_ID = jsonschema_rs.validator_for({"type": "string", "pattern": SESSION_ID_PATTERN})
RUST_PREFIX = jsonschema_rs.validator_for({"type": "string", "pattern": SESSION_PREFIX_PATTERN})
PREFIX_RE = re.compile(SESSION_PREFIX_PATTERN)
REFUSED_CATEGORIES = {"Cc", "Cf", "Cs", "Zl", "Zp"}
# Code points that became Cf after the Unicode of some Pythons (3.11 has Unicode 14): the
# table holds them already, so the rule does not change with the interpreter.
LATER_CF = set(range(0x13439, 0x13440))

VALID = [
    "a",
    "user@example.com",
    "user 17",
    "_private",
    "tenant:user",
    "123e4567-e89b-12d3-a456-426614174000",
    "café-会话",
    " leading and trailing ",
    " ",
    "...",
    ".a",
    "..a",
    ".hidden",
    "a.",
    "%2F",
    "a\\b",
    "x' OR '1'='1",
    "😀",
    "\U0010ffff",
    "\u00a0nbsp",
    "x" * SESSION_ID_MAX,
    "会" * SESSION_ID_MAX,
    "." * SESSION_ID_MAX,
    ".." + "x" * (SESSION_ID_MAX - 2),
]
INVALID = [
    "",
    ".",
    "..",
    "x" * (SESSION_ID_MAX + 1),
    "会" * (SESSION_ID_MAX + 1),
    "a/b",
    "/",
    "a\n",
    "\na",
    "a\nb",
    "a\r",
    "a\t",
    "nul\x00",
    "\x7f",
    "\x85",
    "a\u2028",
    "a\u2029",
    "zero\u200bwidth",
    "zwj\u200d",
    "bidi\u202e",
    "bom\ufeff",
    "soft\u00adhyphen",
    "tag\U000e0041",
]
# Refused by the function; the pattern, for Unicode text, cannot name them (app.domain.ids).
LONE_SURROGATES = ["lone\ud800", "lone\udfff", "\udfff\ud800"]


@pytest.mark.parametrize("value", VALID)
def test_valid_ids(value: str) -> None:
    assert is_valid_session_id(value)
    assert ID_RE.fullmatch(value)
    assert is_valid_session_prefix(value) and PREFIX_RE.fullmatch(value)


@pytest.mark.parametrize("value", INVALID)
def test_invalid_ids(value: str) -> None:
    assert not is_valid_session_id(value)
    assert not ID_RE.fullmatch(value)


@pytest.mark.parametrize("value", LONE_SURROGATES)
def test_lone_surrogates_are_refused(value: str) -> None:
    assert not is_valid_session_id(value) and not is_valid_session_prefix(value)


def test_other_regex_engines_compile_the_pattern() -> None:
    # jsonschema-rs (Rust regex, as schemathesis validates with) must keep the pattern, not
    # drop it as uncompilable; a JSON Schema validator dropping it would accept anything.
    for pattern in (SESSION_ID_PATTERN, SESSION_PREFIX_PATTERN):
        validator = jsonschema_rs.validator_for({"type": "string", "pattern": pattern})
        assert validator.is_valid("user@example.com") and validator.is_valid("café 会话")
        assert not validator.is_valid("a/b") and not validator.is_valid("a\nb")
        assert not validator.is_valid("zw\u200bsp") and not validator.is_valid("x" * 257)
    validator = jsonschema_rs.validator_for({"type": "string", "pattern": SESSION_ID_PATTERN})
    assert not validator.is_valid("..") and validator.is_valid("...")


def test_a_dot_segment_is_a_prefix_but_not_an_id() -> None:
    for value in (".", ".."):
        assert is_valid_session_prefix(value) and PREFIX_RE.fullmatch(value)
        assert not is_valid_session_id(value)
    assert not is_valid_session_prefix("") and not PREFIX_RE.fullmatch("")
    assert not is_valid_session_prefix("a/") and not PREFIX_RE.fullmatch("a/")
    assert not is_valid_session_prefix("x" * 257) and not PREFIX_RE.fullmatch("x" * 257)


def test_a_trailing_newline_fails_full_matching() -> None:
    # Why the rule is applied with fullmatch: ``$`` alone matches before a final newline.
    assert ID_RE.match("a\n") is not None
    assert ID_RE.fullmatch("a\n") is None and not is_valid_session_id("a\n")


def test_the_table_is_unicodes_refused_categories() -> None:
    refused = {c for c in range(0x110000) if not is_session_id_char(chr(c))}
    expected = {c for c in range(0x110000) if unicodedata.category(chr(c)) in REFUSED_CATEGORIES}
    assert refused == expected | {ord("/")} | LATER_CF
    assert all(unicodedata.category(chr(c)) == "Cn" for c in LATER_CF - expected)
    assert list(REFUSED_RANGES) == sorted(REFUSED_RANGES)
    assert all(lo <= hi < nxt for (lo, hi), (nxt, _) in pairwise(REFUSED_RANGES))


def test_every_refused_character_is_refused_by_the_pattern_too() -> None:
    for lo, hi in REFUSED_RANGES:
        for code in {lo, hi, (lo + hi) // 2}:
            value = f"a{chr(code)}b"
            assert not is_valid_session_id(value), hex(code)
            if not 0xD800 <= code <= 0xDFFF:
                assert not ID_RE.fullmatch(value) and not PREFIX_RE.fullmatch(value), hex(code)
        for code in (lo - 1, hi + 1):
            if 0 <= code < 0x110000 and is_session_id_char(chr(code)):
                value = f"a{chr(code)}b"
                assert is_valid_session_id(value) and ID_RE.fullmatch(value), hex(code)


# Mostly characters near the edges of the rule: dots, slashes, refused characters, spaces.
_edge_chars = st.sampled_from(
    [".", "/", " ", "\n", "\x00", "\u200b", "\u2028", "\ufeff", "\U000e0020", "é"]
)
_any_chars = st.characters(codec="utf-8")  # what a JSON body or a URL can carry
_ids = st.one_of(
    st.text(_any_chars, max_size=SESSION_ID_MAX + 2),
    st.text(st.one_of(_edge_chars, st.sampled_from("ab.")), max_size=4),
    st.text(
        st.one_of(_edge_chars, _any_chars), min_size=SESSION_ID_MAX - 2, max_size=SESSION_ID_MAX + 2
    ),
)


@settings(max_examples=1500, deadline=None)
@given(_ids)
@example("..")
@example("a\n")
def test_function_and_pattern_agree(value: str) -> None:
    assert is_valid_session_id(value) == bool(ID_RE.fullmatch(value))
    assert is_valid_session_prefix(value) == bool(PREFIX_RE.fullmatch(value))
    # and so does a JSON Schema validator with Rust's regex engine (ECMA-like ``$``)
    assert is_valid_session_id(value) == RUST_ID.is_valid(value)
    assert is_valid_session_prefix(value) == RUST_PREFIX.is_valid(value)


@settings(max_examples=300, deadline=None)
@given(st.from_regex(ID_RE, fullmatch=True))
def test_what_the_pattern_generates_is_valid(value: str) -> None:
    assert is_valid_session_id(value)
