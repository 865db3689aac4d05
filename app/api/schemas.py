"""Request and response bodies of the HTTP API (names: ``XCreate`` / ``XUpdate`` / ``XRead``)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    GetJsonSchemaHandler,
    JsonValue,
    TypeAdapter,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

from app.api.append_schemas import AppendRequest
from app.domain.compaction.auto import AutoCompactConfig
from app.domain.items import (
    ID_PATTERN,
    FunctionCallItem,
    FunctionCallOutputItem,
    MessageItem,
    ReasoningItem,
)
from app.domain.projection import Budget

FormatName = Literal["canonical", "openai-chat", "openai-responses", "anthropic"]

# The published form of ``JsonValue`` (pydantic states it as ``{}``): any JSON value. Integers
# of any size are accepted and kept exact (``app.jsonutil``). Deliberately typeless: client
# generators read a list of types, or a typeless ``additionalProperties``, as a model of their
# own and drop or mistype every model that uses it.
JSON_VALUE_SCHEMA: dict[str, Any] = {"description": "Any JSON value"}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SessionConfig(_Strict):
    """A session's config: exactly these keys, each validated as the service will use it."""

    context: Budget | None = Field(None, description="Projection defaults (a budget)")
    auto_compact: AutoCompactConfig | None = Field(
        None, description="Background compaction: policy and trigger"
    )

    def to_dict(self) -> dict[str, Any]:
        """What the client sent (defaults it left out stay out)."""
        return self.model_dump(mode="json", exclude_unset=True)


class SessionCreate(_Strict):
    id: str | None = Field(
        None,
        pattern=ID_PATTERN,
        description="Client-chosen id; generated when omitted. 409 if it exists.",
        examples=["agent-42"],
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
        description="Items in `format` (canonical items may carry `id`, `pinned`, `metadata`)",
        examples=[[{"type": "message", "role": "user", "content": "Hello"}]],
    )
    system: JsonValue = Field(
        None, description="Anthropic only: the top-level `system` (string or text blocks)"
    )

    @classmethod
    def __get_pydantic_json_schema__(
        cls, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        schema = handler(TypeAdapter(AppendRequest).core_schema)
        return {"oneOf": schema["anyOf"], "title": "ItemsAppend", "description": _APPEND_DOC}


_APPEND_DOC = (
    "A batch in one wire format, chosen by `format` (default `canonical`); atomic: all items "
    "or none. Every item or message may carry the envelope keys `id`, `pinned` and `metadata`."
)


class _Envelope(BaseModel):
    id: str
    seq: int
    tokens: int = Field(description="o200k_base tokens of the item's content")
    chars: int
    pinned: bool
    metadata: dict[str, JsonValue]
    created_at: datetime


class StoredMessage(MessageItem, _Envelope):
    model_config = ConfigDict(extra="forbid", frozen=True, title="StoredMessage")


class StoredFunctionCall(FunctionCallItem, _Envelope):
    model_config = ConfigDict(extra="forbid", frozen=True, title="StoredFunctionCall")


class StoredFunctionCallOutput(FunctionCallOutputItem, _Envelope):
    model_config = ConfigDict(extra="forbid", frozen=True, title="StoredFunctionCallOutput")


class StoredReasoning(ReasoningItem, _Envelope):
    model_config = ConfigDict(extra="forbid", frozen=True, title="StoredReasoning")


ItemRead = Annotated[
    StoredMessage | StoredFunctionCall | StoredFunctionCallOutput | StoredReasoning,
    Field(discriminator="type"),
]


class AppendRead(BaseModel):
    items: list[ItemRead]
    version: int


class ItemList(BaseModel):
    items: list[ItemRead]
    next_cursor: int | None = Field(
        description="Pass as `after_seq` for the next page; null at the end"
    )


class Health(BaseModel):
    status: Literal["ok"]


class Readiness(BaseModel):
    status: Literal["ok", "unavailable"]
    database: Literal["ok", "unavailable"]
    locks: Literal["ok", "unavailable", "in-process"]
