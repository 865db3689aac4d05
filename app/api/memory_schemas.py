"""Request and response bodies of snapshots, restore, fork, pop, clear, events, history and
search (the session and item shapes they reuse live in ``schemas``)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    GetJsonSchemaHandler,
    JsonValue,
    StrictBool,
    Tag,
    TypeAdapter,
    model_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

from app.api.append_schemas import (
    FunctionCallCreate,
    FunctionCallOutputCreate,
    IncompleteCallCreate,
    MessageCreate,
    OpaqueItemCreate,
    ReasoningCreate,
    RolelessMessageCreate,
    UntypedItemCreate,
)
from app.api.schemas import (
    ItemRead,
    SessionConfig,
    SessionRead,
    StoredFunctionCall,
    StoredFunctionCallOutput,
    StoredMessage,
    StoredOpaque,
    StoredReasoning,
    StrictBody,
)
from app.api.session_ids import SESSION_ID_DESCRIPTION, SessionIdValue
from app.domain.formats import FORMAT_NAMES
from app.domain.items import ID_PATTERN, item_tag
from app.domain.snapshots import SnapshotDocument

__all__ = ["SnapshotDocument"]


_Strict = StrictBody


class SnapshotCreate(_Strict):
    label: str | None = Field(None, max_length=256, examples=["before refactor"])


class SnapshotRead(BaseModel):
    id: str
    label: str | None
    version: int = Field(description="The session version whose state it captured")
    item_count: int
    created_at: datetime


class SnapshotList(BaseModel):
    items: list[SnapshotRead] = Field(description="Newest first")
    next_cursor: str | None = Field(
        description="Pass as `cursor` for the next page; null at the end"
    )


class RestoreFromId(_Strict):
    """Restore one of this session's snapshots."""

    snapshot_id: str = Field(max_length=128, description="A snapshot of this session")


class _Informative(BaseModel):
    """The fields an export writes beside an item's body: where the item sat (ignored), when it
    was appended (kept), and the format it was appended in."""

    seq: JsonValue = Field(None, description="Informative, ignored")
    tokens: JsonValue = Field(None, description="Informative, ignored")
    chars: JsonValue = Field(None, description="Informative, ignored")
    created_at: datetime | None = Field(
        None,
        description="Kept (years 1900 to 8999)",
        json_schema_extra={"pattern": "^(19[0-9]{2}|[2-8][0-9]{3})-"},
    )
    format: Literal["canonical"] | None = Field(
        None, description="The item's format (absent or null: canonical)"
    )


class DocumentMessage(MessageCreate, _Informative):
    pass


class DocumentFunctionCall(FunctionCallCreate, _Informative):
    pass


class DocumentFunctionCallOutput(FunctionCallOutputCreate, _Informative):
    pass


class DocumentReasoning(ReasoningCreate, _Informative):
    pass


class DocumentIncompleteCall(IncompleteCallCreate, _Informative):
    """A call or output without a `call_id`, as an append takes it (`IncompleteCallCreate`)."""

    model_config = ConfigDict(extra="allow", title="DocumentIncompleteCall")


class DocumentRolelessMessage(RolelessMessageCreate, _Informative):
    """A message without a `role`, as an append takes it (`RolelessMessageCreate`)."""

    model_config = ConfigDict(extra="allow", title="DocumentRolelessMessage")


class DocumentOpaque(OpaqueItemCreate, _Informative):
    """An item of any other type, as an append takes it (`OpaqueItemCreate`)."""

    model_config = ConfigDict(extra="allow", title="DocumentOpaque")


class DocumentUntyped(UntypedItemCreate, _Informative):
    """Any other JSON object, as an append takes it (`UntypedItemCreate`)."""

    model_config = ConfigDict(extra="allow", title="DocumentUntyped")


# The formats an item may be kept in besides canonical (an item of one carries its record).
ProviderFormatName = Annotated[
    str, Field(json_schema_extra={"enum": [f for f in FORMAT_NAMES if f != "canonical"]})
]


class DocumentProviderItem(_Informative):
    """An item appended in a provider format, as an export writes it: its `record` (the item
    as it was appended, in the service's stored form: what an export wrote, not something to
    write by hand) is restored exactly; the canonical fields beside it are informative."""

    model_config = ConfigDict(extra="allow", title="DocumentProviderItem")

    format: ProviderFormatName = Field(description="The format the item was appended in")  # type: ignore[assignment]
    record: dict[str, JsonValue] = Field(description="The item as it was appended")
    id: str | None = Field(None, pattern=ID_PATTERN, description="The service's item id")
    pinned: StrictBool = Field(False, description="Always kept by projections and compactions")
    metadata: dict[str, JsonValue] | None = Field(None, description="Small JSON object (16 KiB)")


# What a snapshot item may be, said once: any item a canonical append stores (its members,
# each with the fields an export adds), or an item kept in a provider format with its record.
# ``parse_document`` reads items by the same rules (the canonical ingest, or the record).
DocumentItem = (
    DocumentMessage
    | DocumentFunctionCall
    | DocumentFunctionCallOutput
    | DocumentReasoning
    | DocumentIncompleteCall
    | DocumentRolelessMessage
    | DocumentOpaque
    | DocumentUntyped
    | DocumentProviderItem
)


class SnapshotDocumentIn(_Strict):
    """A `SnapshotDocument` as a restore accepts it (what `GET .../snapshots/{id}` exports)."""

    model_config = ConfigDict(extra="forbid", title="SnapshotDocumentIn")

    schema_version: Literal[1] = Field(description="Document format version")
    kind: Literal["session-memory.snapshot"] = "session-memory.snapshot"
    id: str | None = Field(None, description="Informative")
    label: str | None = None
    session_id: str | None = Field(None, description="Informative")
    version: Annotated[int, Field(ge=-(2**63), le=2**64 - 1)] | None = Field(
        None, description="Informative"
    )
    created_at: datetime | None = Field(None, strict=False)  # an ISO 8601 string in JSON
    summary: str | None = None
    last_compaction: dict[str, JsonValue] | None = None
    config: SessionConfig = Field(default_factory=SessionConfig)
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    items: list[DocumentItem] = Field(
        description="Working memory, oldest first: any item a canonical append takes, or an "
        "item exported from a provider format with its `format` and `record` (the item as it "
        "was appended), which restore takes back exactly"
    )


class RestoreFromDocument(_Strict):
    """Restore a whole exported document (e.g. from another server)."""

    snapshot: SnapshotDocumentIn


class RestoreRequest(_Strict):
    """What the route parses (the document is validated by ``parse_document``); published as
    a ``oneOf``: ``RestoreFromId`` or ``RestoreFromDocument``, never both."""

    snapshot_id: str | None = Field(None, max_length=128)
    snapshot: dict[str, Any] | None = None

    @model_validator(mode="before")
    @classmethod
    def _one_key(cls, data: Any) -> Any:
        if isinstance(data, dict) and "snapshot_id" in data and "snapshot" in data:
            raise ValueError("name exactly one of snapshot_id and snapshot")
        return data

    @classmethod
    def __get_pydantic_json_schema__(
        cls, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        schema = handler(TypeAdapter(RestoreFromId | RestoreFromDocument).core_schema)
        return {
            "oneOf": schema["anyOf"],
            "title": "RestoreRequest",
            "description": "Exactly one of `snapshot_id` and `snapshot`.",
        }


class RestoreRead(BaseModel):
    undo_snapshot_id: str = Field(
        description="The automatic snapshot of the state before the restore: restore it to undo"
    )
    snapshot_id: str | None = Field(description="The snapshot restored (null for a document)")
    restored_items: int
    session: SessionRead


class ForkCreate(_Strict):
    new_session_id: SessionIdValue | None = Field(
        None,
        description="Generated when omitted; 409 if it exists. " + SESSION_ID_DESCRIPTION,
    )
    snapshot_id: str | None = Field(
        None, max_length=128, description="Fork this snapshot instead of the current state"
    )
    metadata: dict[str, JsonValue] | None = Field(
        None, description="The new session's metadata; the origin's (or snapshot's) when omitted"
    )


class PopRead(BaseModel):
    item: ItemRead = Field(description="The item removed from working memory (kept in history)")
    version: int
    rendered: dict[str, JsonValue] | None = Field(
        None,
        description="With `?format=`: the popped item in that format (null if it cannot carry it)",
    )


class ClearRead(BaseModel):
    cleared_items: int
    session: SessionRead


class EventRead(BaseModel):
    seq: int
    type: str = Field(
        examples=["appended"],
        description="created, updated, config_updated, appended, popped, cleared, compacted, "
        "compaction_failed, snapshot_created, snapshot_deleted, restored, forked, "
        "history_pruned (retention erased archived items, events or snapshots; `data` says "
        "how many and which seqs)",
    )
    version: int = Field(description="The session version this operation produced")
    request_id: str | None
    actor: str | None = Field(description="Name of the API key that acted")
    data: dict[str, JsonValue]
    created_at: datetime


class EventList(BaseModel):
    items: list[EventRead]
    next_cursor: int | None = Field(
        description="Pass as `cursor` (or its alias `after_seq`) for the next page; null at the end"
    )


class _Archive(BaseModel):
    archived: bool = Field(description="True once the item left working memory")
    archived_reason: str | None = Field(
        description="compacted, cleared, restored or popped", examples=["popped"]
    )


class HistoryMessage(StoredMessage, _Archive):
    model_config = ConfigDict(title="HistoryMessage")


class HistoryFunctionCall(StoredFunctionCall, _Archive):
    model_config = ConfigDict(title="HistoryFunctionCall")


class HistoryFunctionCallOutput(StoredFunctionCallOutput, _Archive):
    model_config = ConfigDict(title="HistoryFunctionCallOutput")


class HistoryReasoning(StoredReasoning, _Archive):
    model_config = ConfigDict(title="HistoryReasoning")


class HistoryOpaque(StoredOpaque, _Archive):
    model_config = ConfigDict(extra="allow", title="HistoryOpaque")


# Every item the service stores, as ``ItemRead`` admits it: the four core types and any other
# (an opaque item: a hosted tool call, computer use, ...).
HistoryItemRead = Annotated[
    Annotated[HistoryMessage, Tag("message")]
    | Annotated[HistoryFunctionCall, Tag("function_call")]
    | Annotated[HistoryFunctionCallOutput, Tag("function_call_output")]
    | Annotated[HistoryReasoning, Tag("reasoning")]
    | Annotated[HistoryOpaque, Tag("opaque")],
    Discriminator(item_tag),
]


class HistoryList(BaseModel):
    items: list[HistoryItemRead]
    next_cursor: int | None = Field(
        description="Pass as `cursor` (or its alias `after_seq`) for the next page; null at the end"
    )


class SearchScores(BaseModel):
    fulltext: float | None = Field(
        description="The full-text score, 0 to 1: BM25 relative to the query's weight (about "
        "0.5: an average-length item holding every query word once), items holding the "
        "query's exact tokens and quoted phrases above the rest (null: not a full-text match)"
    )
    semantic: float | None = Field(
        description="Cosine similarity of the item's vector to the query's (null: not ranked "
        "by meaning: fulltext mode, or the item has no vector yet)"
    )


class SearchHitRead(BaseModel):
    session_id: str
    seq: int
    item: ItemRead
    score: float = Field(
        description="Relevance, 0 to 1, on one scale in every mode (docs/semantic-search.md): "
        "`fulltext`: `scores.fulltext`; `semantic`: the similarity above the floor, "
        "`(similarity - min_score) / (1 - min_score)`; `hybrid`: a weighted sum of the two "
        "(in a lookup by exact token, hits holding it score 0.5 or more, the rest below 0.5)"
    )
    snippet: str | None = Field(description="Matching text, matches in [brackets]")
    archived: bool
    archived_reason: str | None
    scores: SearchScores = Field(description="What each ranker said of this hit")


class SearchResults(BaseModel):
    items: list[SearchHitRead] = Field(description="Best first")
    next_cursor: str | None = Field(
        description="Pass as `cursor` for the next page; null at the end"
    )
    mode: Literal["fulltext", "semantic", "hybrid"] = Field(
        description="The mode answered: `hybrid` answers as `fulltext` when semantic search is "
        "off on the server"
    )
