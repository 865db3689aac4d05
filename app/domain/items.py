"""Canonical items: the one shape every ingest format is normalised to and every render reads.

The model is close to the OpenAI Responses item model (the most general in use): messages with
text or image parts, function calls, their outputs, and reasoning. A stored item adds the
envelope the service owns: ``id``, ``seq``, ``tokens``, ``chars``, ``pinned``, ``metadata``,
``created_at``.

Invariants:
- a canonical body validates with ``extra="forbid"``: unknown fields are an error, not dropped;
- ``item_texts`` lists every string a model reads from the item, in order; token and char
  counts, search and projection all derive from it, so they can never disagree.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass, field
from datetime import datetime
from typing import Annotated, Any, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, JsonValue, TypeAdapter, ValidationError

from app.domain.errors import InvalidInput

# Ids of sessions, items and snapshots: URL-safe, no path separators, no leading dot.
ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$"
_ID_RE = re.compile(ID_PATTERN)

# The largest integer every JSON client keeps exactly (JavaScript's Number.MAX_SAFE_INTEGER): the
# upper bound of open-ended integer inputs (budgets, seq cursors), stated in the OpenAPI document.
MAX_SAFE_INTEGER = 2**53 - 1

Role = Literal["system", "developer", "user", "assistant"]
ImageDetail = Literal["auto", "low", "high"]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TextPart(_Body):
    type: Literal["text"] = "text"
    text: str


class ImagePart(_Body):
    type: Literal["image"] = "image"
    url: str = Field(min_length=1, description="https URL or data: URL")
    detail: ImageDetail | None = None


ContentPart: TypeAlias = Annotated[TextPart | ImagePart, Field(discriminator="type")]


class MessageItem(_Body):
    type: Literal["message"] = "message"
    role: Role
    content: str | list[ContentPart]


class FunctionCallItem(_Body):
    type: Literal["function_call"] = "function_call"
    call_id: str = Field(min_length=1, max_length=256)
    name: str = Field(min_length=1, max_length=256)
    arguments: str = ""


class FunctionCallOutputItem(_Body):
    type: Literal["function_call_output"] = "function_call_output"
    call_id: str = Field(min_length=1, max_length=256)
    output: str
    is_error: bool | None = Field(
        default=None, description="Anthropic tool_result is_error; other formats cannot carry it"
    )


class ReasoningItem(_Body):
    """Model reasoning. Provenance decides where it can be replayed:

    - ``signature`` set: an Anthropic ``thinking`` block (``content`` is the thinking text);
    - ``redacted`` true: an Anthropic ``redacted_thinking`` block (``encrypted_content`` is its data);
    - neither: OpenAI-style reasoning (summary, content, encrypted_content).
    """

    type: Literal["reasoning"] = "reasoning"
    summary: list[str] = Field(default_factory=list)
    content: str | None = None
    encrypted_content: str | None = None
    signature: str | None = Field(default=None, description="Anthropic thinking signature")
    redacted: bool | None = Field(default=None, description="Anthropic redacted_thinking")


CanonicalItem: TypeAlias = Annotated[
    MessageItem | FunctionCallItem | FunctionCallOutputItem | ReasoningItem,
    Field(discriminator="type"),
]
canonical_adapter: TypeAdapter[CanonicalItem] = TypeAdapter(CanonicalItem)

ENVELOPE_FIELDS = ("id", "pinned", "metadata")


@dataclass(frozen=True, slots=True)
class NewItem:
    """An item about to be appended: a canonical body plus what the client may set."""

    body: CanonicalItem
    id: str | None = None
    pinned: bool = False
    metadata: dict[str, JsonValue] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class StoredItem:
    """An item in a session: the body plus the envelope the service owns."""

    body: CanonicalItem
    id: str
    seq: int
    tokens: int
    chars: int
    pinned: bool
    metadata: dict[str, JsonValue]
    created_at: datetime

    def to_wire(self) -> dict[str, Any]:
        """The stored item as clients see it: canonical fields plus the envelope."""
        out: dict[str, Any] = body_to_dict(self.body)
        out.update(
            id=self.id,
            seq=self.seq,
            tokens=self.tokens,
            chars=self.chars,
            pinned=self.pinned,
            metadata=self.metadata,
            created_at=self.created_at,
        )
        return out


def body_to_dict(body: CanonicalItem) -> dict[str, Any]:
    """Canonical body as plain JSON-able data, without ``None`` fields (stable across versions)."""
    return body.model_dump(mode="json", exclude_none=True)


def body_from_dict(data: dict[str, Any]) -> CanonicalItem:
    """Rebuild a body that was stored by ``body_to_dict`` (trusted: already validated once)."""
    return canonical_adapter.validate_python(data)


def is_valid_id(value: str) -> bool:
    return bool(_ID_RE.match(value))


def new_item_id() -> str:
    return "itm_" + secrets.token_hex(12)


def item_texts(body: CanonicalItem) -> list[str]:
    """Every string a model reads from this item, in order (images excluded)."""
    # Dispatch on the discriminator: a failing ``isinstance`` against a pydantic model class
    # goes through ``ABCMeta.__instancecheck__``, several times slower, on a hot path.
    if body.type == "message":
        if isinstance(body.content, str):
            return [body.content]
        return [p.text for p in body.content if isinstance(p, TextPart)]
    if body.type == "function_call":
        return [body.name, body.arguments]
    if body.type == "function_call_output":
        return [body.output]
    texts = list(body.summary)
    if body.content:
        texts.append(body.content)
    return texts


def item_images(body: CanonicalItem) -> list[ImagePart]:
    if isinstance(body, MessageItem) and not isinstance(body.content, str):
        return [p for p in body.content if isinstance(p, ImagePart)]
    return []


def item_chars(body: CanonicalItem) -> int:
    """``sum(len(t) for t in item_texts(body))``; single-text items skip building the list."""
    if body.type == "function_call_output":
        return len(body.output)
    if body.type == "message" and isinstance(body.content, str):
        return len(body.content)
    return sum(map(len, item_texts(body)))


def parse_canonical_items(raw: list[Any]) -> list[NewItem]:
    """Validate a batch written in the canonical format.

    All-or-nothing: every invalid item is reported (with its index) and nothing is returned.
    """
    out: list[NewItem] = []
    errors: list[dict[str, Any]] = []
    for index, entry in enumerate(raw):
        if not isinstance(entry, dict):
            errors.append({"loc": ["items", index], "msg": "an item must be a JSON object"})
            continue
        data = dict(entry)
        envelope = {k: data.pop(k) for k in ENVELOPE_FIELDS if k in data}
        try:
            body = canonical_adapter.validate_python(data)
        except ValidationError as exc:
            errors.extend(
                {"loc": ["items", index, *e["loc"]], "msg": e["msg"], "type": e["type"]}
                for e in exc.errors(include_url=False, include_context=False, include_input=False)
            )
            continue
        try:
            out.append(make_new_item(body, **envelope))
        except InvalidInput as exc:
            errors.extend(
                {**e, "loc": ["items", index, *e.get("loc", [])]} for e in (exc.errors or [])
            )
    if errors:
        raise InvalidInput(f"{len(errors)} invalid field(s) in the batch", errors=errors)
    return out


def make_new_item(
    body: CanonicalItem,
    *,
    id: Any = None,
    pinned: Any = False,
    metadata: Any = None,
) -> NewItem:
    """Check the envelope fields a client may set and build a ``NewItem``."""
    errors: list[dict[str, Any]] = []
    if id is not None and (not isinstance(id, str) or not is_valid_id(id)):
        errors.append({"loc": ["id"], "msg": f"item id must match {ID_PATTERN}"})
    if not isinstance(pinned, bool):
        errors.append({"loc": ["pinned"], "msg": "pinned must be a boolean"})
    if metadata is None:
        metadata = {}
    if not isinstance(metadata, dict):
        errors.append({"loc": ["metadata"], "msg": "metadata must be a JSON object"})
    if errors:
        raise InvalidInput("invalid item envelope", errors=errors)
    return NewItem(body=body, id=id, pinned=pinned, metadata=metadata)
