"""Session ids: what an application may name a session, and the same rule as a regex.

A session id is 1 to ``SESSION_ID_MAX`` (256) characters (code points), any of them but:

- ``/``: an id is one URL path segment (clients percent-encode the rest);
- control characters (Unicode ``Cc``: C0, DEL, C1), format characters (``Cf``: zero-width and
  bidirectional controls, the BOM, tag characters), lone surrogates (``Cs``) and the line and
  paragraph separators (``Zl``, ``Zp``): invisible or line-breaking characters that make two
  different ids look the same, or break logs and headers;
- the whole id ``.`` or ``..``: a dot segment, which URL normalisation removes from a path
  before any server sees it.

Everything else is allowed, spaces (leading and trailing too) and unassigned code points
included: ``user@example.com``, ``user 17``, ``_private``, ``tenant:user``, a UUID,
``café-会话``. Ids are compared exactly, code point by code point: no trimming, no case folding,
no Unicode normalisation (``café`` in NFC and in NFD are two ids).

A key's session prefix is the start of a session id: the same characters, 1 to 256 of them,
and a lone ``.`` or ``..`` is a prefix like any other.

The refused characters are a fixed table (Unicode 15.1's ``Cc``, ``Cf``, ``Cs``, ``Zl``, ``Zp``)
rather than ``unicodedata`` at run time, so that the rule does not change with the Python
that runs the service, and ``SESSION_ID_PATTERN`` (published in the OpenAPI document) says
exactly what ``is_valid_session_id`` decides for any Unicode text. The pattern leaves lone
surrogates out: regex engines that work on Unicode scalar values (Rust's, Go's) cannot name
them, and no UTF-8 JSON body or URL can carry one (the JSON guard refuses ``"\ud800"``;
a path decodes invalid UTF-8 to U+FFFD); the function, which may see any Python string,
refuses them.
"""

from __future__ import annotations

import re
from bisect import bisect_right

SESSION_ID_MAX = 256
SESSION_PREFIX_MAX = SESSION_ID_MAX

SESSION_ID_RULE = (
    f"a session id is 1-{SESSION_ID_MAX} characters, none of them '/' or a control, format "
    "or line/paragraph-separator character (Unicode Cc, Cf, Cs, Zl, Zp), and is not '.' or '..'"
)
SESSION_PREFIX_RULE = (
    f"a session prefix is 1-{SESSION_PREFIX_MAX} characters, none of them '/' or a control, "
    "format or line/paragraph-separator character (Unicode Cc, Cf, Cs, Zl, Zp)"
)

# Inclusive code point ranges no session id may contain, sorted and disjoint.
REFUSED_RANGES: tuple[tuple[int, int], ...] = (
    (0x0000, 0x001F),  # Cc: C0 controls
    (0x002F, 0x002F),  # '/'
    (0x007F, 0x009F),  # Cc: DEL and C1 controls
    (0x00AD, 0x00AD),  # Cf: soft hyphen
    (0x0600, 0x0605),  # Cf: Arabic number signs
    (0x061C, 0x061C),  # Cf: Arabic letter mark
    (0x06DD, 0x06DD),  # Cf: Arabic end of ayah
    (0x070F, 0x070F),  # Cf: Syriac abbreviation mark
    (0x0890, 0x0891),  # Cf: Arabic pound / piastre mark above
    (0x08E2, 0x08E2),  # Cf: Arabic disputed end of ayah
    (0x180E, 0x180E),  # Cf: Mongolian vowel separator
    (0x200B, 0x200F),  # Cf: zero-width space, ZWNJ, ZWJ, LRM, RLM
    (0x2028, 0x202E),  # Zl, Zp, and Cf bidirectional embeddings and overrides
    (0x2060, 0x2064),  # Cf: word joiner, invisible operators
    (0x2066, 0x206F),  # Cf: bidirectional isolates, deprecated format characters
    (0xD800, 0xDFFF),  # Cs: surrogates
    (0xFEFF, 0xFEFF),  # Cf: byte order mark / zero-width no-break space
    (0xFFF9, 0xFFFB),  # Cf: interlinear annotation
    (0x110BD, 0x110BD),  # Cf: Kaithi number sign
    (0x110CD, 0x110CD),  # Cf: Kaithi number sign above
    (0x13430, 0x1343F),  # Cf: Egyptian hieroglyph format controls
    (0x1BCA0, 0x1BCA3),  # Cf: shorthand format controls
    (0x1D173, 0x1D17A),  # Cf: musical symbol format controls
    (0xE0001, 0xE0001),  # Cf: language tag
    (0xE0020, 0xE007F),  # Cf: tag characters
)
_STARTS = [lo for lo, _ in REFUSED_RANGES]


def is_session_id_char(char: str) -> bool:
    """Whether one character may appear in a session id (or a session prefix)."""
    code = ord(char)
    index = bisect_right(_STARTS, code) - 1
    return index < 0 or code > REFUSED_RANGES[index][1]


def _refused_chars() -> re.Pattern[str]:
    # The same table as one character class, lone surrogates included: every request checks
    # an id, and one regex search is ~30x cheaper than a bisect per character.
    parts = [re.escape(chr(lo)) + ("" if lo == hi else "-" + re.escape(chr(hi)))
             for lo, hi in REFUSED_RANGES]  # fmt: skip
    return re.compile("[" + "".join(parts) + "]")


_REFUSED_CHAR = _refused_chars()


def is_valid_session_prefix(value: str) -> bool:
    """1-256 session-id characters: the start of some valid session id."""
    return (
        isinstance(value, str)
        and 1 <= len(value) <= SESSION_PREFIX_MAX
        and _REFUSED_CHAR.search(value) is None
    )


def is_valid_session_id(value: str) -> bool:
    """The session id rule (module docstring); ``SESSION_ID_PATTERN`` says the same."""
    return is_valid_session_prefix(value) and value not in (".", "..")


def _escape(code: int) -> str:
    # ``\uXXXX`` reads the same in ECMA-262 (JSON Schema), Python and Rust regexes; no escape
    # for a code point above U+FFFF does, so those stand in the class as themselves.
    return f"\\u{code:04X}" if code <= 0xFFFF else chr(code)


_SURROGATES = (0xD800, 0xDFFF)


def _refused_class(*extra: int) -> str:
    ranges = sorted([*(r for r in REFUSED_RANGES if r != _SURROGATES), *((c, c) for c in extra)])
    parts = [_escape(lo) if lo == hi else f"{_escape(lo)}-{_escape(hi)}" for lo, hi in ranges]
    return "[^" + "".join(parts) + "]"


_CHAR = _refused_class()
_CHAR_NOT_DOT = _refused_class(ord("."))

# Starts with a character other than '.'; or '.' then such a character; or '..' then at
# least one more: every string of allowed characters except '.' and '..' (no lookahead, which
# many regex engines lack).
SESSION_ID_PATTERN = (
    f"^(?:{_CHAR_NOT_DOT}{_CHAR}{{0,{SESSION_ID_MAX - 1}}}"
    f"|\\.{_CHAR_NOT_DOT}{_CHAR}{{0,{SESSION_ID_MAX - 2}}}"
    f"|\\.\\.{_CHAR}{{1,{SESSION_ID_MAX - 2}}})$"
)
SESSION_PREFIX_PATTERN = f"^{_CHAR}{{1,{SESSION_PREFIX_MAX}}}$"

# Compiled for tests and tools that want the regex form; the functions above do not use it.
SESSION_ID_RE = re.compile(SESSION_ID_PATTERN)
SESSION_PREFIX_RE = re.compile(SESSION_PREFIX_PATTERN)

__all__ = [
    "REFUSED_RANGES",
    "SESSION_ID_MAX",
    "SESSION_ID_PATTERN",
    "SESSION_ID_RE",
    "SESSION_ID_RULE",
    "SESSION_PREFIX_MAX",
    "SESSION_PREFIX_PATTERN",
    "SESSION_PREFIX_RE",
    "SESSION_PREFIX_RULE",
    "is_session_id_char",
    "is_valid_session_id",
    "is_valid_session_prefix",
]
