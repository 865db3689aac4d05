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

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    JsonValue,
    StrictBool,
    Tag,
    TypeAdapter,
    ValidationError,
    model_serializer,
    model_validator,
)

from app.domain.errors import InvalidInput
from app.domain.wire_errors import format_hint, merge_union_errors, probable_format, wire_loc

# Ids of sessions, items and snapshots: URL-safe, no path separators, no leading dot.
ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$"
_ID_RE = re.compile(ID_PATTERN)

# The largest integer every JSON client keeps exactly (JavaScript's Number.MAX_SAFE_INTEGER): the
# upper bound of open-ended integer inputs (budgets, seq cursors), stated in the OpenAPI document.
MAX_SAFE_INTEGER = 2**53 - 1

Role = Literal["system", "developer", "user", "assistant"]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TextPart(_Body):
    type: Literal["text"] = "text"
    text: str


class ImagePart(_Body):
    """An image by URL (``https:`` or ``data:``) or by a provider's ``file_id``."""

    type: Literal["image"] = "image"
    url: str | None = Field(default=None, min_length=1, description="https URL or data: URL")
    file_id: str | None = Field(default=None, min_length=1, description="a provider file id")
    detail: str | None = None

    @model_validator(mode="after")
    def _one_source(self) -> ImagePart:
        if self.url is None and self.file_id is None:
            raise ValueError("an image needs a url or a file_id")
        return self


class _Verbatim(BaseModel):
    """A part or item the canonical model does not understand: kept whole, exactly as sent.

    Built from the dict as sent (``type`` included); serialised back to that same dict."""

    model_config = ConfigDict(frozen=True)

    type: str
    data: dict[str, Any]

    @model_validator(mode="before")
    @classmethod
    def _wrap(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return {"type": cls._kind(value), "data": value}
        return value

    @classmethod
    def _kind(cls, value: dict[str, Any]) -> Any:
        return value.get("type")

    @model_serializer
    def _as_sent(self) -> dict[str, Any]:
        return self.data

    @classmethod
    def __get_pydantic_json_schema__(cls, core_schema: Any, handler: Any) -> dict[str, Any]:
        description = (cls.__doc__ or "").strip().split("\n\n")[0]
        if cls.__name__ == "OpaqueItem":
            # any JSON object: a ``type`` is optional, and not one of the core types
            return {
                "type": "object",
                "title": cls.__name__,
                "description": description,
                **OPAQUE_TYPE_SCHEMA,
                "additionalProperties": True,
            }
        return {
            "type": "object",
            "title": cls.__name__,
            "description": description,
            "properties": {"type": {"type": "string", "not": {"enum": ["image", "text"]}}},
            "required": ["type"],
            "additionalProperties": True,
        }

    @classmethod
    def of(cls, data: dict[str, Any]) -> Any:
        """Wrap a trusted dict (its ``type`` already checked) without validating it again."""
        return cls.model_construct(type=cls._kind(data), data=data)


class OtherPart(_Verbatim):
    """A content part other than text and image (files, documents, audio, search results,
    citations blocks, ...): kept verbatim; rendered as sent in its own format and as
    ``[TYPE omitted]`` text where a format has no counterpart."""


def _part_tag(value: Any) -> str:
    if isinstance(value, OtherPart):
        return "other"
    kind = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    return kind if kind in ("text", "image") else "other"


ContentPart: TypeAlias = Annotated[
    Annotated[TextPart, Tag("text")]
    | Annotated[ImagePart, Tag("image")]
    | Annotated[OtherPart, Tag("other")],
    Discriminator(_part_tag),
]


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
    output: str | list[ContentPart]
    is_error: StrictBool | None = Field(
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
    redacted: StrictBool | None = Field(default=None, description="Anthropic redacted_thinking")


class OpaqueItem(_Verbatim):
    """An item of a type the canonical model does not render itself (hosted tool calls such as
    ``web_search_call``, client tool pairs such as ``computer_call`` / ``computer_call_output``,
    ``compaction``, ``item_reference``, anything newer), or any other JSON object a client
    hands a session (an SDK wrapper's encrypted envelope, with no ``type`` at all): stored
    whole, exactly as sent.

    The projection still knows its side and its pairing (``opaque_pairing``). An object
    without a usable ``type`` (missing, not a string, empty, longer than 64 characters or
    holding a NUL) is *untyped*: its ``type`` here is ``UNTYPED`` (``data`` keeps what was
    sent), and no provider format can carry it (``is_untyped``)."""

    type: str = Field(min_length=1, max_length=64)

    @classmethod
    def _kind(cls, value: dict[str, Any]) -> Any:
        kind = value.get("type")
        if not is_usable_type(kind):
            return UNTYPED
        return incomplete_kind(value) or kind


# The ``type`` an untyped opaque item is known by (queries, report notes); never sent back.
UNTYPED = "untyped"


def is_usable_type(kind: Any) -> bool:
    """Whether ``kind`` can be an item's ``type``: a string of 1-64 characters without NUL
    (anything else makes an object without a ``role`` untyped, and one with a ``role`` a
    message missing its type)."""
    return isinstance(kind, str) and 0 < len(kind) <= 64 and "\x00" not in kind


def is_untyped(body: CanonicalItem) -> bool:
    """Whether ``body`` is an opaque item sent without a usable ``type``: an object only
    the client that wrote it can read, which no provider format can carry."""
    return type(body) is OpaqueItem and body.type == UNTYPED and body.data.get("type") != UNTYPED


CORE_TYPES = frozenset({"message", "function_call", "function_call_output", "reasoning"})

# The ``type`` an incomplete item is known by (queries, report notes), by its own ``type``:
# never a provider's type (they hold no space), so it cannot be taken for one.
INCOMPLETE_KINDS = {
    "function_call": "function_call without call_id",
    "function_call_output": "function_call_output without call_id",
    "message": "message without role",
}


def incomplete_kind(data: dict[str, Any]) -> str | None:
    """The kind of an *incomplete* item, else ``None``: a ``function_call`` or
    ``function_call_output`` whose ``call_id`` is missing, ``null`` or ``""``, or a
    ``message`` without a ``role`` (missing or ``null``). Every SDK's own session store keeps
    such items (the Agents SDK's stores, for one, take any dict), so they are stored as sent,
    as opaque items; but no provider accepts them in a prompt, and a call without an id
    pairs with nothing (``is_unsendable``). Any other flaw in a core item is still an error."""
    kind = data.get("type")
    if kind == "function_call" or kind == "function_call_output":
        if data.get("call_id") in (None, ""):
            return INCOMPLETE_KINDS[kind]
    elif kind == "message" and data.get("role") is None:
        return INCOMPLETE_KINDS[kind]
    return None


# JSON Schema of what an opaque item's ``type`` may be: anything but a core type, unless the
# item is incomplete (``incomplete_kind``). Published for opaque items as stored and read.
OPAQUE_TYPE_SCHEMA: dict[str, Any] = {
    # Said as what an opaque item may NOT be (a core item the canonical model renders), so
    # that generated clients, which cannot express ``not``, see one plain object type.
    "not": {
        "anyOf": [
            {
                "required": ["type"],
                "properties": {
                    "type": {
                        "enum": sorted(
                            CORE_TYPES - {"function_call", "function_call_output", "message"}
                        )
                    }
                },
            },
            {
                "required": ["type", "call_id"],
                "properties": {
                    "type": {"enum": ["function_call", "function_call_output"]},
                    "call_id": {"not": {"enum": ["", None]}},
                },
            },
            {
                "required": ["type", "role"],
                "properties": {"type": {"enum": ["message"]}, "role": {"not": {"type": "null"}}},
            },
        ]
    }
}


def is_incomplete(body: CanonicalItem) -> bool:
    """Whether ``body`` is an incomplete item (``incomplete_kind``), kept as an opaque item."""
    return (
        type(body) is OpaqueItem
        and body.type in _INCOMPLETE_NAMES
        and body.data.get("type") != body.type
    )


_INCOMPLETE_NAMES = frozenset(INCOMPLETE_KINDS.values())


def is_unsendable(body: CanonicalItem) -> bool:
    """Whether no provider prompt can carry ``body``: an untyped item (``is_untyped``) or an
    incomplete one (``is_incomplete``). Such an item is listed back exactly as sent, in the
    format it was written in, and the projection leaves it out of every provider prompt with
    a note (the canonical projection, the service's own view, keeps it)."""
    return is_untyped(body) or is_incomplete(body)


def item_tag(value: Any) -> str:
    """The union tag of an item (a dict or a model): its core type, or ``"opaque"`` (for an
    incomplete core item too: ``incomplete_kind``)."""
    if isinstance(value, OpaqueItem):
        return "opaque"
    if isinstance(value, dict):
        kind = value.get("type")
        if isinstance(kind, str) and kind in CORE_TYPES and incomplete_kind(value) is None:
            return kind
        return "opaque"
    kind = getattr(value, "type", None)
    return kind if isinstance(kind, str) and kind in CORE_TYPES else "opaque"


CanonicalItem: TypeAlias = Annotated[
    Annotated[MessageItem, Tag("message")]
    | Annotated[FunctionCallItem, Tag("function_call")]
    | Annotated[FunctionCallOutputItem, Tag("function_call_output")]
    | Annotated[ReasoningItem, Tag("reasoning")]
    | Annotated[OpaqueItem, Tag("opaque")],
    Discriminator(item_tag),
]
canonical_adapter: TypeAdapter[CanonicalItem] = TypeAdapter(CanonicalItem)

# Call/output pairs among opaque items: type -> (family, the field holding the pairing id).
# An output answers the latest earlier call of its family with the same id (DESIGN §1).
PAIRED_CALLS: dict[str, tuple[str, str]] = {
    "computer_call": ("computer", "call_id"),
    "custom_tool_call": ("custom", "call_id"),
    "local_shell_call": ("local_shell", "call_id"),
    "shell_call": ("shell", "call_id"),
    "apply_patch_call": ("apply_patch", "call_id"),
    "mcp_approval_request": ("mcp_approval", "id"),
    "tool_search_call": ("tool_search", "call_id"),
    "program": ("program", "call_id"),
}
PAIRED_OUTPUTS: dict[str, tuple[str, str]] = {
    "computer_call_output": ("computer", "call_id"),
    "custom_tool_call_output": ("custom", "call_id"),
    "local_shell_call_output": ("local_shell", "call_id|id"),  # the type says id; SDKs send call_id
    "shell_call_output": ("shell", "call_id"),
    "apply_patch_call_output": ("apply_patch", "call_id"),
    "mcp_approval_response": ("mcp_approval", "approval_request_id"),
    "tool_search_output": ("tool_search", "call_id"),
    "program_output": ("program", "call_id"),
}


# Standalone opaque items a model produces (reasoning may precede them); every other standalone
# opaque item (compaction, item_reference, additional_tools, ...) is input to the model.
MODEL_OUTPUT_TYPES = frozenset(
    {
        "web_search_call",
        "file_search_call",
        "code_interpreter_call",
        "image_generation_call",
        "mcp_call",
        "mcp_list_tools",
    }
)


def opaque_pairing(body: OpaqueItem) -> tuple[Literal["call", "output"] | None, str | None]:
    """(``"call"`` | ``"output"`` | ``None`` for a standalone item, the pairing key)."""
    for side, table in (("call", PAIRED_CALLS), ("output", PAIRED_OUTPUTS)):
        entry = table.get(body.type)
        if entry is not None:
            for field_name in entry[1].split("|"):
                value = body.data.get(field_name)
                if isinstance(value, str) and value:
                    return side, f"{entry[0]}:{value}"  # type: ignore[return-value]
            return None, None
    return None, None


def pair_key(body: CanonicalItem) -> str | None:
    """The key an output and its call share (``None`` for items that pair with nothing)."""
    if body.type == "function_call" or body.type == "function_call_output":
        return body.call_id  # type: ignore[union-attr]
    if type(body) is OpaqueItem:
        return opaque_pairing(body)[1]
    return None


ENVELOPE_FIELDS = ("id", "pinned", "metadata")
# In the provider formats ``id`` is the provider's own item id: data, not our envelope.
PROVIDER_ENVELOPE_FIELDS = ("pinned", "metadata")


@dataclass(frozen=True, slots=True)
class NewItem:
    """An item about to be appended: a canonical body plus what the client may set.

    ``format`` and ``record`` are what the client sent: for ``canonical`` the body is the
    record (``record`` is ``None``); for a provider format, ``record`` is the stored form of the
    provider message or item (see ``app.domain.formats``), the body its normalised view."""

    body: CanonicalItem
    id: str | None = None
    pinned: bool = False
    metadata: dict[str, JsonValue] = field(default_factory=dict)
    format: str = "canonical"
    record: dict[str, Any] | None = None


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
    format: str = "canonical"
    record: dict[str, Any] | None = None

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
            format=self.format,
        )
        return out


def record_of(item: NewItem | StoredItem) -> dict[str, Any]:
    """What is stored for an item: its provider record, or its canonical body."""
    return body_to_dict(item.body) if item.record is None else item.record


def starts_message(item: StoredItem) -> bool:
    """Whether ``item`` starts a provider message (not a later item of a message that was
    stored as several items)."""
    record = item.record
    if record is None or item.format not in ("openai-chat", "anthropic", "gemini"):
        return True
    return "part" not in record or "head" in record


def body_to_dict(body: CanonicalItem) -> dict[str, Any]:
    """Canonical body as plain JSON-able data, without ``None`` fields (stable across versions).

    Opaque items and parts come back exactly as they were sent."""
    if type(body) is OpaqueItem:
        return dict(body.data)
    return body.model_dump(mode="json", exclude_none=True)


def body_from_dict(data: dict[str, Any]) -> CanonicalItem:
    """Rebuild a body that was stored by ``body_to_dict`` (trusted: already validated once)."""
    return canonical_adapter.validate_python(data)


def is_valid_id(value: str) -> bool:
    return bool(_ID_RE.fullmatch(value))


def new_item_id() -> str:
    return "itm_" + secrets.token_hex(12)


# Keys whose strings no model reads as text: kinds, ids, states, opaque or binary payloads.
_NOT_TEXT = frozenset(
    {
        "type",
        "id",
        "call_id",
        "tool_use_id",
        "approval_request_id",
        "status",
        "phase",
        "role",
        "namespace",
        "caller",
        "encrypted_content",
        "signature",
        "file_id",
        "file_data",
        "image_url",
        "url",
        "detail",
        "media_type",
        "cache_control",
        "container_id",
        "execution",
        "output_format",
        "quality",
        "size",
        "background",
        "server_label",
        "mime_type",
        # Gemini parts (REST camelCase; the SDK's snake_case)
        "mimeType",
        "fileUri",
        "file_uri",
        "thoughtSignature",
        "thought_signature",
    }
)
_BASE64_RE = re.compile(r"[A-Za-z0-9+/=_-]{256,}")


def opaque_texts(value: Any) -> list[str]:
    """The texts a model reads from data the canonical model keeps verbatim (opaque items,
    other parts): every string in it, depth first in key order, except under the keys of
    ``_NOT_TEXT`` (ids, kinds, states, encrypted or binary payloads) and except ``data:`` URLs
    and long base64 runs (screenshots, files). Token and char counts of such items count these.
    """
    out: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, str):
            if node and not node.startswith("data:") and not _BASE64_RE.fullmatch(node):
                out.append(node)
        elif isinstance(node, dict):
            for key, child in node.items():
                if key not in _NOT_TEXT:
                    walk(child)
        elif isinstance(node, list):
            for child in node:
                walk(child)

    walk(value)
    return out


def opaque_images(value: Any) -> int:
    """How many images data kept verbatim carries: string values under an ``image_url`` key
    (a computer-use screenshot, an image in a tool output). Each costs the fixed image charge,
    as an image part does."""
    if isinstance(value, dict):
        return sum(
            1 if key == "image_url" and isinstance(child, str) and child else opaque_images(child)
            for key, child in value.items()
        )
    if isinstance(value, list):
        return sum(opaque_images(child) for child in value)
    return 0


def item_opaque_images(body: CanonicalItem) -> int:
    """``opaque_images`` of an opaque item or of the other parts of a message or output."""
    if type(body) is OpaqueItem:
        return opaque_images(body.data)
    parts: Any = getattr(body, "content", None) if body.type == "message" else None
    if body.type == "function_call_output":
        parts = body.output  # type: ignore[union-attr]
    if not isinstance(parts, list):
        return 0
    return sum(opaque_images(p.data) for p in parts if type(p) is OtherPart)


def parts_texts(parts: list[Any]) -> list[str]:
    out: list[str] = []
    for part in parts:
        if part.type == "text":
            out.append(part.text)
        elif part.type != "image":
            out.extend(opaque_texts(part.data))
    return out


def item_texts(body: CanonicalItem) -> list[str]:
    """Every string a model reads from this item, in order (images excluded)."""
    # Dispatch on the discriminator: a failing ``isinstance`` against a pydantic model class
    # goes through ``ABCMeta.__instancecheck__``, several times slower, on a hot path.
    kind = body.type
    if kind == "message":
        content = body.content  # type: ignore[union-attr]
        return [content] if isinstance(content, str) else parts_texts(content)
    if kind == "function_call":
        return [body.name, body.arguments]  # type: ignore[union-attr]
    if kind == "function_call_output":
        output = body.output  # type: ignore[union-attr]
        return [output] if isinstance(output, str) else parts_texts(output)
    if kind == "reasoning":
        texts = list(body.summary)  # type: ignore[union-attr]
        if body.content:  # type: ignore[union-attr]
            texts.append(body.content)  # type: ignore[union-attr]
        return texts
    return opaque_texts(body.data)  # type: ignore[union-attr]


def parts_text(content: str | list[Any]) -> str:
    """A message content or tool output as one text (images as ``[image]``)."""
    if isinstance(content, str):
        return content
    texts: list[str] = []
    for part in content:
        if type(part) is TextPart:
            texts.append(part.text)
        elif type(part) is ImagePart:
            texts.append("[image]")
        else:
            texts.extend(opaque_texts(part.data))
    return "\n".join(texts)


def item_images(body: CanonicalItem) -> list[ImagePart]:
    parts: Any = None
    if body.type == "message":
        parts = body.content  # type: ignore[union-attr]
    elif body.type == "function_call_output":
        parts = body.output  # type: ignore[union-attr]
    if parts is None or isinstance(parts, str):
        return []
    return [p for p in parts if type(p) is ImagePart]


def item_chars(body: CanonicalItem) -> int:
    """``sum(len(t) for t in item_texts(body))``; single-text items skip building the list."""
    if body.type == "function_call_output" and isinstance(body.output, str):  # type: ignore[union-attr]
        return len(body.output)  # type: ignore[union-attr]
    if body.type == "message" and isinstance(body.content, str):  # type: ignore[union-attr]
        return len(body.content)  # type: ignore[union-attr]
    return sum(map(len, item_texts(body)))


def parse_canonical_items(raw: list[Any]) -> list[NewItem]:
    """Validate a batch written in the canonical format.

    All-or-nothing: every invalid item is reported (with its index) and nothing is returned.
    Which rules an item is held to is decided by its ``type``: a core type's (``message``,
    ``function_call``, ...) strictly; any other string, an opaque item's; no usable ``type``
    (missing, not a string, ...): an untyped opaque item, any object at all, unless it has a
    ``role``, the mark of a message in every format, which makes it a message missing its
    ``type`` (an error, rather than a misspelt message stored where no prompt shows it).
    """
    out: list[NewItem] = []
    errors: list[dict[str, Any]] = []
    for index, entry in enumerate(raw):
        if not isinstance(entry, dict):
            errors.append({"loc": ["items", index], "msg": "an item must be a JSON object"})
            continue
        data = dict(entry)
        # An opaque item is kept whole: its ``id`` is the provider's (a web_search_call needs
        # it, an mcp_approval_response names it), not our item id.
        kind = data.get("type")  # any JSON: a non-string type is an opaque item's (or an error)
        keys = (
            ENVELOPE_FIELDS
            if isinstance(kind, str) and kind in CORE_TYPES
            else PROVIDER_ENVELOPE_FIELDS
        )
        envelope = {k: data.pop(k) for k in keys if k in data}
        if not is_usable_type(kind) and "role" in data:
            # Every provider's message has a ``role``: an object with one is a message that
            # lacks its ``type``, not an opaque item; told which format it looks like.
            fmt = probable_format(entry)
            if fmt is not None:
                errors.append(
                    {
                        "loc": ["items", index],
                        "msg": format_hint(fmt),
                        "type": "probably_another_format",
                    }
                )
                continue
            errors.append(
                {
                    "loc": ["items", index, "type"],
                    "msg": 'a message needs "type": "message" in the canonical format (a '
                    'provider\'s message is appended with its "format")',
                    "type": "missing",
                }
            )
            continue
        try:
            body = canonical_adapter.validate_python(data)
        except ValidationError as exc:
            errors.extend(_item_errors(index, entry, exc))
            continue
        part_errors = _other_part_type_errors(body)
        if part_errors:
            errors.extend({**e, "loc": ["items", index, *e["loc"]]} for e in part_errors)
            continue
        try:
            out.append(make_new_item(body, **envelope))
        except InvalidInput as exc:
            errors.extend(
                {**e, "loc": ["items", index, *e.get("loc", [])]} for e in (exc.errors or [])
            )
    if errors:
        hints = [e["msg"] for e in errors if e.get("type") == "probably_another_format"]
        detail = f"{len(errors)} invalid field(s) in the batch"
        raise InvalidInput(detail + (f": {hints[0]}" if hints else ""), errors=errors)
    return out


def _item_errors(index: int, entry: dict[str, Any], exc: ValidationError) -> list[dict[str, Any]]:
    """What is wrong with one canonical item, in wire terms (``app.domain.wire_errors``): a
    provider's chat message sent without ``format`` is told which format it looks like."""
    fmt = probable_format(entry)
    if fmt is not None:
        return [
            {"loc": ["items", index], "msg": format_hint(fmt), "type": "probably_another_format"}
        ]
    if "type" not in entry:
        return [
            {
                "loc": ["items", index, "type"],
                "msg": 'required: a canonical item names its "type" (message, function_call, '
                "function_call_output, reasoning, or any other, kept as sent); or set "
                '"format" to the format the items are written in',
                "type": "missing",
            }
        ]
    found = [
        {
            "loc": ["items", index, *wire_loc(entry, e["loc"], missing=e["type"] == "missing")],
            "msg": e["msg"],
            "type": e["type"],
        }
        for e in exc.errors(include_url=False, include_context=False, include_input=False)
    ]
    return merge_union_errors(found)


def _other_part_type_errors(body: CanonicalItem) -> list[dict[str, Any]]:
    """A canonical content part of another type names it in 1-64 characters, as the published
    ``OtherPartCreate`` says (a provider format's parts are its provider's, kept as sent)."""
    if isinstance(body, MessageItem):
        field, parts = "content", body.content
    elif isinstance(body, FunctionCallOutputItem):
        field, parts = "output", body.output
    else:
        return []
    if isinstance(parts, str):
        return []
    return [
        {
            "loc": [field, k, "type"],
            "msg": "a part's type is 1-64 characters",
            "type": "value_error",
        }
        for k, part in enumerate(parts)
        if isinstance(part, OtherPart) and not 1 <= len(part.type) <= 64
    ]


def make_new_item(
    body: CanonicalItem,
    *,
    id: Any = None,
    pinned: Any = False,
    metadata: Any = None,
    format: str = "canonical",
    record: dict[str, Any] | None = None,
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
    return NewItem(body=body, id=id, pinned=pinned, metadata=metadata, format=format, record=record)
