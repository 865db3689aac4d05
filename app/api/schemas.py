"""Request and response bodies of the HTTP API (names: ``XCreate`` / ``XUpdate`` / ``XRead``)."""

from __future__ import annotations

from datetime import datetime
from types import UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    GetJsonSchemaHandler,
    JsonValue,
    Tag,
    TypeAdapter,
    ValidatorFunctionWrapHandler,
    WithJsonSchema,
    WrapValidator,
    model_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

from app.api.append_schemas import AppendRequest
from app.api.session_ids import SESSION_ID_DESCRIPTION, SessionIdValue
from app.domain.compaction.auto import AutoCompactConfig
from app.domain.items import (
    OPAQUE_TYPE_SCHEMA,
    FunctionCallItem,
    FunctionCallOutputItem,
    MessageItem,
    ReasoningItem,
    item_tag,
)
from app.domain.projection import Budget
from app.domain.retention import MAX_RETENTION_SECONDS, RetentionConfig
from app.services.indexing import PENDING_WINDOW

FormatName = Literal["canonical", "openai-chat", "openai-responses", "anthropic", "gemini"]

# The published form of ``JsonValue`` (pydantic states it as ``{}``): any JSON value. Integers
# of any size are accepted and kept exact (``app.jsonutil``). Deliberately typeless: client
# generators read a list of types, or a typeless ``additionalProperties``, as a model of their
# own and drop or mistype every model that uses it.
JSON_VALUE_SCHEMA: dict[str, Any] = {"description": "Any JSON value"}


def _takes_int(annotation: Any) -> bool:
    if annotation is int:
        return True
    if get_origin(annotation) is Annotated:
        return _takes_int(get_args(annotation)[0])
    return get_origin(annotation) in (Union, UnionType) and any(
        _takes_int(arg) for arg in get_args(annotation)
    )


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    if get_origin(annotation) is Annotated:
        return _models_in(get_args(annotation)[0])
    if get_origin(annotation) in (Union, UnionType):
        return [m for arg in get_args(annotation) for m in _models_in(arg)]
    return []


def whole_numbers(model: type[BaseModel], data: Any) -> Any:
    """``data`` with each whole float given to an integer field of ``model`` (nested models
    too) as an int. JSON Schema counts ``5.0`` as an integer, and strict validation would
    refuse it; every other coercion stays refused. Fields of any JSON value are left as sent."""
    if not isinstance(data, dict):
        return data
    out: dict[str, Any] | None = None
    for name, field in model.model_fields.items():
        key = field.alias or name
        if key not in data:
            continue
        value = new = data[key]
        if isinstance(value, float) and value.is_integer() and _takes_int(field.annotation):
            new = int(value)
        elif isinstance(value, dict):
            for nested in _models_in(field.annotation)[:1]:
                new = whole_numbers(nested, value)
        if new is not value:
            out = dict(data) if out is None else out
            out[key] = new
    return data if out is None else out


class StrictBody(BaseModel):
    """A request body: exactly the declared fields, each of its declared JSON type (no `0`
    for false, no `"5"` for 5: clients in other languages rely on the declared types)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    @model_validator(mode="before")
    @classmethod
    def _whole_numbers(cls, data: Any) -> Any:
        return whole_numbers(cls, data)


_Strict = StrictBody


def strictly(model: type[BaseModel]) -> WrapValidator:
    """A nested model (a domain model with its own, lax config) validated strictly too."""

    def validate(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        if isinstance(value, dict):
            return model.model_validate(whole_numbers(model, value), strict=True)
        return handler(value)

    return WrapValidator(validate)


class SessionConfig(_Strict):
    """A session's config: exactly these keys, each validated as the service will use it."""

    context: Annotated[Budget, strictly(Budget)] | None = Field(
        None, description="Projection defaults (a budget)"
    )
    auto_compact: Annotated[AutoCompactConfig, strictly(AutoCompactConfig)] | None = Field(
        None, description="Background compaction: policy and trigger"
    )
    ttl_seconds: int | None = Field(
        None,
        ge=1,
        le=MAX_RETENTION_SECONDS,
        description="Expire the session this long after its last write (absent: the server's "
        "RETENTION__SESSION_TTL_SECONDS, by default never); an expired session is erased",
    )
    retention: Annotated[RetentionConfig, strictly(RetentionConfig)] | None = Field(
        None, description="How long the archive, snapshots and events are kept"
    )

    def to_dict(self) -> dict[str, Any]:
        """What the client sent (defaults it left out stay out)."""
        return self.model_dump(mode="json", exclude_unset=True)


class SessionCreate(_Strict):
    id: SessionIdValue | None = Field(
        None,
        description="Client-chosen id; generated when omitted. 409 if it exists. "
        + SESSION_ID_DESCRIPTION,
        examples=["agent-42", "user@example.com"],
    )
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    config: SessionConfig = Field(
        default_factory=SessionConfig,
        description="`context`: projection defaults (a budget); `auto_compact`: policy and trigger.",
    )
    summary: str | None = None


class SessionUpdate(_Strict):
    """Only the fields present are changed; `null` clears metadata, config or summary."""

    metadata: dict[str, JsonValue] | None = None
    config: SessionConfig | None = None
    summary: str | None = None


class StorageUsage(BaseModel):
    rows: int
    bytes: int = Field(description="Bytes of the stored texts and JSON (not of indexes)")


class SessionStorage(BaseModel):
    working_memory: StorageUsage = Field(description="Live items")
    archive: StorageUsage = Field(description="Archived items: compacted, popped, cleared, ...")
    snapshots: StorageUsage
    events: StorageUsage
    total: StorageUsage


class SearchIndexState(BaseModel):
    model: str = Field(description="The embedding model whose vectors semantic search reads")
    indexed: int = Field(description="Items with a vector of that model (and size)")
    pending: int = Field(
        description="Items not embedded yet (the background indexer is behind; full text "
        f"still finds them), counted among the session's newest {PENDING_WINDOW:,} items with a "
        "text: the indexer embeds the oldest first, so a backlog shows there first"
    )
    pending_exact: bool = Field(
        True,
        description=f"true: those {PENDING_WINDOW:,} are all the session has, so `pending` "
        "counts every item not embedded yet; false: older items were not looked at",
    )


class SessionRead(BaseModel):
    id: str
    version: int = Field(description="Increases with every write; also the ETag")
    summary: str | None
    metadata: dict[str, JsonValue]
    config: dict[str, JsonValue]
    item_count: int = Field(description="Items in working memory")
    token_count: int = Field(description="o200k_base tokens of working memory's item contents")
    char_count: int
    last_seq: int = Field(description="Highest seq ever used in this session")
    created_at: datetime
    updated_at: datetime
    expires_at: datetime | None = Field(
        None, description="When the session expires unless written to again (null: never)"
    )
    storage: SessionStorage | None = Field(
        None, description="What the session stores (in `GET /v1/sessions/{id}` only)"
    )
    search_index: SearchIndexState | None = Field(
        None,
        description="The semantic index of the session's items (in `GET /v1/sessions/{id}` "
        "only; null when semantic search is off: `EMBEDDINGS__PROVIDER=none`)",
    )


class SessionList(BaseModel):
    items: list[SessionRead]
    next_cursor: str | None = Field(
        description="Pass as `cursor` for the next page; null at the end"
    )


class ItemsAppend(_Strict):
    """What the route parses; the items are validated by the format's ingest. Its published
    schema is ``append_schemas.AppendRequest``: a ``oneOf`` chosen by ``format``."""

    format: FormatName = Field("canonical", description="The wire format the items are written in")
    items: list[dict[str, Any]] = Field(
        min_length=1,
        description="Items in `format`: every item may carry the envelope keys `pinned` and "
        "`metadata`; in `canonical`, `id` names the item (in a provider format `id` is the "
        "provider's own, kept as data)",
        examples=[[{"type": "message", "role": "user", "content": "Hello"}]],
    )
    system: JsonValue = Field(
        None, description="Anthropic only: the top-level `system` (string or text blocks)"
    )
    system_instruction: JsonValue = Field(
        None, description="Gemini only: the `systemInstruction` (a Content or a string)"
    )

    @classmethod
    def __get_pydantic_json_schema__(
        cls, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        schema = handler(TypeAdapter(AppendRequest).core_schema)
        return {"oneOf": schema["anyOf"], "title": "ItemsAppend", "description": _APPEND_DOC}


_APPEND_DOC = (
    "A batch in one wire format, chosen by `format` (default `canonical`); atomic: all items "
    "or none. Every item or message may carry the envelope keys `pinned` and `metadata`; in "
    "`canonical`, also `id` (the item's id; in a provider format `id` is the provider's data)."
)


class _Envelope(BaseModel):
    id: str
    seq: int
    tokens: int = Field(description="o200k_base tokens of the item's content")
    chars: int
    pinned: bool
    metadata: dict[str, JsonValue]
    created_at: datetime
    format: FormatName = Field(
        description="The format the item was appended in; `GET .../items?format=` with it "
        "gives the item back exactly as it was sent"
    )


def _type_required(schema: dict[str, Any]) -> None:
    """A stored item of a core type always has its ``type`` on the wire (an item without one
    is an untyped ``StoredOpaque``)."""
    schema["required"] = ["type", *schema.get("required", [])]


class StoredMessage(MessageItem, _Envelope):
    model_config = ConfigDict(
        extra="forbid", frozen=True, title="StoredMessage", json_schema_extra=_type_required
    )


class StoredFunctionCall(FunctionCallItem, _Envelope):
    model_config = ConfigDict(
        extra="forbid", frozen=True, title="StoredFunctionCall", json_schema_extra=_type_required
    )


class StoredFunctionCallOutput(FunctionCallOutputItem, _Envelope):
    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        title="StoredFunctionCallOutput",
        json_schema_extra=_type_required,
    )


class StoredReasoning(ReasoningItem, _Envelope):
    model_config = ConfigDict(
        extra="forbid", frozen=True, title="StoredReasoning", json_schema_extra=_type_required
    )


class StoredOpaque(BaseModel):
    """An item of any other type (hosted tool calls, computer use, MCP, shell, apply-patch,
    compaction, ...) or any other JSON object (untyped: without a usable `type`): the item as
    it was sent, plus the envelope fields."""

    model_config = ConfigDict(
        extra="allow", title="StoredOpaque", json_schema_extra=OPAQUE_TYPE_SCHEMA
    )

    type: Annotated[Any, WithJsonSchema({})] = Field(
        None,
        description="Any type but the four the canonical model renders itself (one of them "
        "only in an incomplete item: a `function_call` or `function_call_output` without a "
        "`call_id`, a `message` without a `role`); absent, or any JSON value, in an untyped "
        "item (kept as sent)",
    )
    id: str
    seq: int
    tokens: int
    chars: int
    pinned: bool
    metadata: dict[str, JsonValue]
    created_at: datetime
    format: FormatName


ItemRead = Annotated[
    Annotated[StoredMessage, Tag("message")]
    | Annotated[StoredFunctionCall, Tag("function_call")]
    | Annotated[StoredFunctionCallOutput, Tag("function_call_output")]
    | Annotated[StoredReasoning, Tag("reasoning")]
    | Annotated[StoredOpaque, Tag("opaque")],
    Discriminator(item_tag),
]


class ContextSummaryMessage(BaseModel):
    """The session's summary, first in a canonical context: a system message without the
    envelope fields (it is not a stored item)."""

    model_config = ConfigDict(extra="forbid", title="ContextSummaryMessage")

    type: Literal["message"]
    role: Literal["system"]
    content: str


class ContextPlaceholderOutput(BaseModel):
    """The synthetic output of a call whose result is missing (`dangling_tool_calls:
    placeholder`), without the envelope fields (it is not a stored item)."""

    model_config = ConfigDict(extra="forbid", title="ContextPlaceholderOutput")

    type: Literal["function_call_output"]
    call_id: str
    output: str


def _context_item_tag(value: Any) -> str:
    if isinstance(value, dict) and "seq" not in value:
        return "summary" if value.get("type") == "message" else "placeholder"
    return item_tag(value)


# A canonical context's entries: stored items (changed bodies keep their envelope), the
# summary first, placeholder outputs where a call's result is missing.
ContextItemRead = Annotated[
    Annotated[StoredMessage, Tag("message")]
    | Annotated[StoredFunctionCall, Tag("function_call")]
    | Annotated[StoredFunctionCallOutput, Tag("function_call_output")]
    | Annotated[StoredReasoning, Tag("reasoning")]
    | Annotated[StoredOpaque, Tag("opaque")]
    | Annotated[ContextSummaryMessage, Tag("summary")]
    | Annotated[ContextPlaceholderOutput, Tag("placeholder")],
    Discriminator(_context_item_tag),
]


class AppendRead(BaseModel):
    items: list[ItemRead]
    version: int


class ItemList(BaseModel):
    items: list[ItemRead]
    next_cursor: int | None = Field(
        description="Pass as `cursor` (or its alias `after_seq`) for the next page; null at the end"
    )


class RenderedItemList(BaseModel):
    """``GET .../items?format=F`` with a provider format: working memory in F's own shapes."""

    format: FormatName
    items: list[dict[str, JsonValue]] = Field(
        description="Provider items or messages: exactly as appended when appended in this "
        "format, else rendered in its idiom (`input` items for openai-responses, `messages` "
        "for openai-chat and anthropic, `contents` for gemini)"
    )
    system: JsonValue = Field(
        None, description="anthropic only: the page's system prompt, when it holds one"
    )
    system_instruction: JsonValue = Field(
        None, description="gemini only: the page's system instruction, when it holds one"
    )
    next_cursor: int | None = Field(
        description="Pass as `cursor` (or its alias `after_seq`) for the next page; null at the end"
    )
    notes: list[str] = Field(description="What this format cannot carry and was left out")


class Health(BaseModel):
    status: Literal["ok"]


class Readiness(BaseModel):
    status: Literal["ok", "unavailable"]
    database: Literal["ok", "unavailable"]
    locks: Literal["ok", "unavailable", "in-process"]
