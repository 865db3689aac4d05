"""Shared pieces of the wire formats: render entries, token/char accounting, ingest errors.

Invariants:
- a ``Usage`` is computed from a rendered payload only (never from the canonical items), so
  ``projected_tokens`` is by construction the count of what is actually sent;
- every string counted toward tokens is also counted toward chars, and nothing else is;
- ingest collects every problem of a batch before failing (all-or-nothing).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from app.domain.errors import InvalidInput
from app.domain.items import (
    ENVELOPE_FIELDS,
    PROVIDER_ENVELOPE_FIELDS,
    CanonicalItem,
    ImagePart,
    NewItem,
    OtherPart,
    StoredItem,
    make_new_item,
    opaque_images,
    opaque_texts,
)
from app.domain.tokens import IMAGE_TOKENS, TokenizerName, count_text

# Overhead charged per provider message / canonical item, and per tool call or tool result
# block nested inside a message (OpenAI cookbook: 3 tokens of framing per message).
PER_MESSAGE_TOKENS = 3
PER_TOOL_BLOCK_TOKENS = 3

IMAGE_OMITTED = "[image omitted]"

_DATA_URL_RE = re.compile(r"^data:(image/(?:jpeg|png|gif|webp));base64,(.*)$", re.DOTALL)

Loc = list[str | int]


@dataclass(slots=True)
class Entry:
    """One canonical body about to be rendered.

    ``stored`` is the working-memory item it comes from (``None`` for a synthetic item, such as
    a placeholder output for a call still waiting for its result); ``unit`` identifies the
    atomic projection group it belongs to (renderers merge assistant turns only within a unit).

    Treat as immutable. Not ``frozen``: a projection makes one per rendered item, and a frozen
    dataclass's ``__init__`` (``object.__setattr__`` per field) costs about twice as much.
    """

    body: CanonicalItem
    stored: StoredItem | None = None
    unit: int | None = None


def entries_of(items: Any) -> list[Entry]:
    return [Entry(body=item.body, stored=item) for item in items]


def is_native(entry: Entry, format: str) -> bool:
    """Whether ``entry`` is an item ingested in ``format`` that the projection left as it was:
    then it is rendered from its record, exactly as it was sent."""
    stored = entry.stored
    return (
        stored is not None
        and stored.format == format
        and stored.record is not None
        and entry.body is stored.body
    )


def is_tool_part(kind: str) -> bool:
    """A part that records a provider-run tool (Anthropic's ``server_tool_use`` and the
    ``*_tool_result`` blocks, ``container_upload``): meaningless as text elsewhere."""
    return kind.endswith("_tool_use") or kind.endswith("_tool_result") or kind == "container_upload"


def other_part_text(part: OtherPart) -> str | None:
    """An other part in a format that has no counterpart for it: its texts (a document's
    text, a refusal), a marker (``[input_audio omitted]``), or ``None`` for a record of a
    provider-run tool, which is left out."""
    if is_tool_part(part.type):
        return None
    texts = opaque_texts(part.data)
    return "\n".join(texts) if texts else f"[{part.type} omitted]"


CONTENT_OMITTED = "[content omitted]"


class _SharedCounts:
    """Token counts shared by every projection of the process (bounded, oldest out first).

    An agent's context is read every turn over mostly the same texts; counting them once per
    process instead of once per read is what makes repeated reads cheap. A count is a pure
    function of (tokenizer, text), so sharing it changes no result."""

    MAX_TEXT = 32_768  # longer texts are counted each time rather than kept alive

    def __init__(self, *, max_entries: int = 50_000, max_chars: int = 16 * 1024 * 1024) -> None:
        # one table per tokenizer, so that a lookup is a plain ``dict.get`` on the text
        self._tables: dict[str, dict[str, int]] = {}
        self.max_entries = max_entries  # over all tokenizers
        self.max_chars = max_chars  # the kept texts' total length, over all tokenizers
        self._chars = 0

    def table(self, tokenizer: TokenizerName) -> Mapping[str, int]:
        """The counts known for ``tokenizer`` (read-only: a miss goes through ``count``)."""
        return self._table(tokenizer)

    def _table(self, tokenizer: TokenizerName) -> dict[str, int]:
        table = self._tables.get(tokenizer)
        if table is None:
            table = self._tables[tokenizer] = {}
        return table

    def count(self, tokenizer: TokenizerName, text: str) -> int:
        if len(text) > self.MAX_TEXT or self.max_entries <= 0:
            return count_text(text, tokenizer)
        table = self._table(tokenizer)
        hit = table.get(text)
        if hit is None:
            hit = count_text(text, tokenizer)
            while self._tables and (
                sum(map(len, self._tables.values())) >= self.max_entries
                or self._chars + len(text) > self.max_chars
            ):
                # dicts keep insertion order: drop the oldest tenth (of the largest table) in
                # one go
                largest = max(self._tables.values(), key=len)
                if not largest:
                    break
                for old in list(largest)[: max(1, len(largest) // 10)]:
                    self._chars -= len(old)
                    del largest[old]
            table[text] = hit
            self._chars += len(text)
        return hit

    def bound(self, *, max_entries: int, max_chars: int) -> None:
        self.max_entries, self.max_chars = max_entries, max_chars
        self._tables.clear()
        self._chars = 0


_SHARED = _SharedCounts()


def bound_token_counts(*, max_entries: int, max_chars: int) -> None:
    """Set the bounds of the process-wide token counts (at start-up, from the settings)."""
    _SHARED.bound(max_entries=max_entries, max_chars=max_chars)


class TokenCache:
    """Memoises token counts of strings for one tokenizer (per projection call, backed by the
    process-wide counts)."""

    def __init__(self, tokenizer: TokenizerName) -> None:
        self.tokenizer: TokenizerName = tokenizer
        self._cache: dict[str, int] = {}

    def count(self, text: str) -> int:
        hit = self._cache.get(text)
        if hit is None:
            hit = _SHARED.count(self.tokenizer, text)
            self._cache[text] = hit
        return hit

    def count_all(self, texts: list[str]) -> int:
        """``sum(self.count(t) for t in texts)``, without a method call per text the process
        already counted (the hot path: a payload's texts are mostly known)."""
        shared = _SHARED.table(self.tokenizer)
        total = 0
        for text in texts:
            hit = shared.get(text)
            total += self.count(text) if hit is None else hit
        return total


@dataclass(slots=True)
class Usage:
    """Accumulates the tokens and chars of a rendered payload under a format's rule."""

    cache: TokenCache
    tokens: int = 0
    chars: int = 0

    def text(self, value: str) -> None:
        self.tokens += self.cache.count(value)
        self.chars += len(value)

    def texts(self, values: list[str]) -> None:
        """``text`` for each of ``values``, in bulk (the hot path of counting a payload)."""
        self.tokens += self.cache.count_all(values)
        self.chars += sum(map(len, values))

    def image(self, detail: Any) -> None:
        self.tokens += IMAGE_TOKENS.get(detail or "auto", IMAGE_TOKENS["auto"])

    def opaque(self, value: Any, texts: list[str]) -> None:
        """Data kept verbatim: its texts go to ``texts`` (counted in bulk), its images are
        charged here (``items.opaque_texts``, ``items.opaque_images``)."""
        texts.extend(opaque_texts(value))
        images = opaque_images(value)
        if images:
            self.tokens += IMAGE_TOKENS["auto"] * images

    def overhead(self, tokens: int) -> None:
        self.tokens += tokens


def image_to_anthropic_source(part: ImagePart) -> dict[str, str] | None:
    """An Anthropic image ``source`` for a canonical image, or ``None`` if it has none."""
    if part.url is None:
        return {"type": "file", "file_id": part.file_id} if part.file_id else None
    match = _DATA_URL_RE.match(part.url)
    if match:
        return {"type": "base64", "media_type": match.group(1), "data": match.group(2)}
    if part.url.startswith(("https://", "http://")):
        return {"type": "url", "url": part.url}
    return None


@dataclass(slots=True)
class Problems:
    """Field-level problems of a batch; ``raise_if_any`` makes ingest all-or-nothing."""

    errors: list[dict[str, Any]] = field(default_factory=list)

    def add(self, loc: Loc, msg: str) -> None:
        self.errors.append({"loc": ["items", *loc], "msg": msg})

    def add_validation(self, loc: Loc, exc: ValidationError) -> None:
        self.errors.extend(
            {"loc": ["items", *loc, *e["loc"]], "msg": e["msg"], "type": e["type"]}
            for e in exc.errors(include_url=False, include_context=False, include_input=False)
        )

    def raise_if_any(self) -> None:
        if self.errors:
            raise InvalidInput(
                f"{len(self.errors)} invalid field(s) in the batch", errors=self.errors
            )


def split_envelope(entry: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(item without envelope keys, envelope) for a canonical item."""
    data = dict(entry)
    envelope = {k: data.pop(k) for k in ENVELOPE_FIELDS if k in data}
    return data, envelope


def split_provider_envelope(
    entry: Mapping[str, Any],
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(message as sent, without ``pinned``/``metadata``; envelope) for a provider message.
    Its ``id``, if any, is the provider's and stays in the message."""
    if "pinned" not in entry and "metadata" not in entry:
        return dict(entry), {}
    data = dict(entry)
    envelope = {k: data.pop(k) for k in PROVIDER_ENVELOPE_FIELDS if k in data}
    return data, envelope


def build_items(
    pieces: list[tuple[CanonicalItem, dict[str, Any]]],
    envelope: dict[str, Any],
    loc: Loc,
    problems: Problems,
    *,
    format: str,
) -> list[NewItem]:
    """NewItems for one provider message, given (body, record) per canonical item: the
    envelope goes on the first one."""
    out: list[NewItem] = []
    for k, (body, record) in enumerate(pieces):
        try:
            out.append(
                make_new_item(body, **envelope, format=format, record=record)
                if k == 0
                else NewItem(body=body, format=format, record=record)
            )
        except InvalidInput as exc:
            for e in exc.errors or []:
                problems.add([*loc, *e.get("loc", [])], e["msg"])
    return out


def check_keys(
    data: Mapping[str, Any],
    allowed: set[str],
    loc: Loc,
    problems: Problems,
    *,
    ignorable_if_empty: frozenset[str] = frozenset(),
    ignored: frozenset[str] = frozenset(),
) -> None:
    """Unknown keys are errors (never silently dropped); some are tolerated when empty, and
    transport-only hints (``ignored``, e.g. ``cache_control``) are always dropped."""
    for key, value in data.items():
        if key in allowed or key in ignored:
            continue
        if key in ignorable_if_empty and value in (None, [], {}, ""):
            continue
        problems.add([*loc, key], "field not supported by the canonical item model")
