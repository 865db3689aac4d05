"""Snapshot documents: the one versioned JSON shape a session's state is frozen, exported and
imported in.

A document holds working memory (canonical items with their envelope: ``id``, ``pinned``,
``metadata``; ``seq``, ``tokens``, ``chars`` and ``created_at`` are informative), the summary,
the last compact result, the config and the metadata, under ``schema_version``.

Invariants:
- ``build_document`` then ``parse_document`` gives back the same items (bodies, ids, pinned,
  metadata, created_at), summary, last compact result, config and metadata;
- ``parse_document`` is all-or-nothing: every problem is reported (``loc`` starting at the
  document's root; ``DuplicateItemId`` when two items sharing an id is the only problem,
  ``InvalidInput`` otherwise) and nothing is returned; it never trusts informative fields
  (tokens and chars are recomputed by whoever stores the items).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    TypeAdapter,
    ValidationError,
    field_validator,
)

from app.domain.errors import DuplicateItemId, InvalidInput
from app.domain.formats import FORMAT_NAMES, decode
from app.domain.items import NewItem, StoredItem, make_new_item, parse_canonical_items
from app.domain.projection import Budget
from app.domain.sessions import check_config

SCHEMA_VERSION = 1
SUPPORTED_SCHEMA_VERSIONS = (1,)
DOCUMENT_KIND = "session-memory.snapshot"
# Fields of an exported item that describe where it was, not what it is: ignored on import.
INFORMATIVE_ITEM_FIELDS = ("seq", "tokens", "chars", "created_at")

_datetime = TypeAdapter(datetime)
# Timestamps a client may send (a restored item's ``created_at``): both databases and every
# client language hold these; outside them Postgres would store a BC or five-digit year that
# no later read can decode, and SQLite would overflow.
# (the published pattern allows local years 1900-8999; an offset moves a day at most)
EARLIEST = datetime(1899, 12, 31, tzinfo=UTC)
LATEST = datetime(9000, 1, 2, tzinfo=UTC)


def check_timestamp(value: Any) -> datetime:
    """A client's timestamp, as an aware UTC datetime within [EARLIEST, LATEST)
    (a naive one is taken as UTC); ``ValueError`` otherwise."""
    stamp = _datetime.validate_python(value)
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=UTC)
    if not EARLIEST <= stamp < LATEST:
        raise ValueError("outside the years 1900 to 8999")
    return stamp.astimezone(UTC)


_string = TypeAdapter(str)


def _iso_string(value: Any) -> str:
    """``value`` if it is a string; ``ValidationError`` otherwise (no coercion)."""
    return _string.validate_python(value, strict=True)


def new_snapshot_id() -> str:
    return "snp_" + secrets.token_hex(12)


class SnapshotDocument(BaseModel):
    """An exported snapshot (``schema_version`` 1). Unknown top-level fields are refused."""

    model_config = ConfigDict(extra="forbid", title="SnapshotDocument")

    schema_version: int = Field(description="Document format version; 1 is the only one so far")
    kind: str = Field(DOCUMENT_KIND, description=f"Always `{DOCUMENT_KIND}`")
    id: str | None = Field(None, description="Snapshot id (informative on import)")
    label: str | None = None
    session_id: str | None = Field(None, description="The session it was taken from")
    version: int | None = Field(None, description="The session version it captured")
    created_at: datetime | None = None
    summary: str | None = None
    last_compaction: dict[str, JsonValue] | None = Field(
        None, description="The session's last compact result"
    )
    config: dict[str, JsonValue] = Field(default_factory=dict)
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    items: list[dict[str, JsonValue]] = Field(
        description="Working memory, oldest first: any item a canonical append takes (any "
        "JSON object), or an item kept in a provider format with its `format` and `record`; "
        "each with `id`, `pinned`, `metadata` (`seq`, `tokens`, `chars`, `created_at` "
        "informative)"
    )

    @field_validator("version", mode="before")
    @classmethod
    def _a_json_integer(cls, value: Any) -> Any:
        # as declared: a number (5 or 5.0), never true or "5"
        if isinstance(value, bool | str):
            raise ValueError("must be an integer")
        return value


@dataclass(frozen=True, slots=True)
class SnapshotItem:
    item: NewItem
    created_at: datetime | None


@dataclass(frozen=True, slots=True)
class SnapshotContent:
    """What a document restores: validated, ready to be measured and stored."""

    items: list[SnapshotItem]
    summary: str | None
    last_compaction: dict[str, Any] | None
    config: dict[str, Any]
    metadata: dict[str, Any]


def build_document(
    *,
    snapshot_id: str,
    label: str | None,
    session_id: str,
    version: int,
    created_at: datetime,
    summary: str | None,
    last_compaction: dict[str, Any] | None,
    config: dict[str, Any],
    metadata: dict[str, Any],
    items: list[StoredItem],
) -> dict[str, Any]:
    """The document as plain JSON data (datetimes as ISO 8601 strings)."""
    wire_items = []
    for item in items:
        wire = item.to_wire()
        wire["created_at"] = item.created_at.isoformat()
        if item.record is not None:  # the item as the client sent it, restored exactly
            wire["record"] = item.record
        wire_items.append(wire)
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": DOCUMENT_KIND,
        "id": snapshot_id,
        "label": label,
        "session_id": session_id,
        "version": version,
        "created_at": created_at.isoformat(),
        "summary": summary,
        "last_compaction": last_compaction,
        "config": config,
        "metadata": metadata,
        "items": wire_items,
    }


def _fail(errors: list[dict[str, Any]], root: list[str | int]) -> InvalidInput:
    return InvalidInput(
        f"invalid snapshot document: {len(errors)} problem(s); nothing was changed",
        errors=[{**e, "loc": [*root, *e.get("loc", [])]} for e in errors],
    )


def _provider_item(
    fmt: Any, record: Any, wire: dict[str, Any], loc: list[str | int], errors: list[dict[str, Any]]
) -> NewItem | None:
    """An item of a document kept in a provider format: its ``record`` is the truth (its
    canonical fields are informative), the envelope comes from the document."""
    if fmt not in FORMAT_NAMES:
        errors.append({"loc": [*loc, "format"], "msg": f"must be one of {', '.join(FORMAT_NAMES)}"})
        return None
    if not isinstance(record, dict):
        errors.append(
            {"loc": [*loc, "record"], "msg": "an item in a provider format needs its record"}
        )
        return None
    try:
        body = decode(fmt, record)
        return make_new_item(
            body,
            id=wire.get("id"),
            pinned=wire.get("pinned", False),
            metadata=wire.get("metadata"),
            format=fmt,
            record=record,
        )
    except InvalidInput as exc:
        errors.extend({**e, "loc": [*loc, "record", *e.get("loc", [])]} for e in exc.errors or [])
    except (KeyError, IndexError, TypeError, AttributeError):
        errors.append({"loc": [*loc, "record"], "msg": f"not a stored {fmt} record"})
    return None


def parse_document(raw: object, *, root: list[str | int] | None = None) -> SnapshotContent:
    """Validate a snapshot document strictly and return its content.

    ``root`` prefixes every error location (e.g. ``["snapshot"]`` for a request field).
    """
    root = list(root or [])
    if not isinstance(raw, dict):
        raise _fail([{"loc": [], "msg": "a snapshot document must be a JSON object"}], root)
    version = raw.get("schema_version")
    if version not in SUPPORTED_SCHEMA_VERSIONS or isinstance(version, bool):
        raise _fail(
            [
                {
                    "loc": ["schema_version"],
                    "msg": f"unknown schema_version {version!r}; supported: "
                    + ", ".join(str(v) for v in SUPPORTED_SCHEMA_VERSIONS),
                }
            ],
            root,
        )
    try:
        doc = SnapshotDocument.model_validate(raw)
    except ValidationError as exc:
        raise _fail(
            [
                {"loc": list(e["loc"]), "msg": e["msg"], "type": e["type"]}
                for e in exc.errors(include_url=False, include_context=False, include_input=False)
            ],
            root,
        ) from exc
    errors: list[dict[str, Any]] = []
    if doc.kind != DOCUMENT_KIND:
        errors.append({"loc": ["kind"], "msg": f"expected {DOCUMENT_KIND!r}"})
    try:
        config = check_config(dict(doc.config))
    except InvalidInput as exc:
        errors.extend(exc.errors or [])
        config = {}
    if isinstance(config.get("context"), dict):
        # The projection defaults are read as a Budget on every context request: check them
        # here, as a session create or update does, so a restored config can always be used.
        try:
            # as declared: no coercion (but 5.0 is an integer in JSON)
            context = {
                k: int(v) if isinstance(v, float) and v.is_integer() else v
                for k, v in config["context"].items()
            }
            Budget.model_validate(context, strict=True)
        except ValidationError as exc:
            errors.extend(
                {"loc": ["config", "context", *e["loc"]], "msg": e["msg"], "type": e["type"]}
                for e in exc.errors(include_url=False, include_context=False, include_input=False)
            )
    bodies: list[dict[str, Any]] = []
    created: list[datetime | None] = []
    provider: dict[int, NewItem] = {}  # index -> an item kept in its provider format
    for index, entry in enumerate(doc.items):
        data = dict(entry)
        informative = {k: data.pop(k) for k in INFORMATIVE_ITEM_FIELDS if k in data}
        fmt = data.pop("format", None)
        if fmt is None:  # as published: absent or null is canonical
            fmt = "canonical"
        elif not isinstance(fmt, str) or fmt not in FORMAT_NAMES:
            errors.append(
                {
                    "loc": ["items", index, "format"],
                    "msg": f"must be one of {', '.join(FORMAT_NAMES)}",
                }
            )
            fmt = None
        if fmt is None:
            data = {"type": "message", "role": "user", "content": ""}  # a stand-in: refused anyway
        elif fmt != "canonical":
            # In a canonical item a `record` is left in the body: refused there as an unknown
            # field (a core type), kept as the item's own data (an opaque one), never dropped.
            item = _provider_item(fmt, data.pop("record", None), data, ["items", index], errors)
            if item is not None:
                provider[index] = item
            data = {"type": "message", "role": "user", "content": ""}  # a stand-in, replaced
            if "id" in entry:
                data["id"] = entry["id"]
        stamp = informative.get("created_at")
        try:
            # JSON has no time type: an export writes an ISO 8601 string, and a number (which
            # pydantic would read as seconds since 1970) is not one.
            created.append(None if stamp is None else check_timestamp(_iso_string(stamp)))
        except ValidationError:
            errors.append({"loc": ["items", index, "created_at"], "msg": "not a datetime"})
            created.append(None)
        except ValueError as exc:
            errors.append(
                {"loc": ["items", index, "created_at"], "msg": f"not a usable time: {exc}"}
            )
            created.append(None)
        bodies.append(data)
    new_items: list[NewItem] = []
    try:
        new_items = parse_canonical_items(bodies)
    except InvalidInput as exc:
        errors.extend(exc.errors or [])
    new_items = [provider.get(i, item) for i, item in enumerate(new_items)]
    seen: set[str] = set()
    for index, item in enumerate(new_items):
        if item.id is None:
            continue
        if item.id in seen:
            errors.append({"loc": ["items", index, "id"], "msg": "duplicate item id"})
        seen.add(item.id)
    if errors and all(e["msg"] == "duplicate item id" for e in errors):
        # Well formed, but two items claim one id: the conflict an append of both would get.
        raise DuplicateItemId(
            "two items of the snapshot document share an id; nothing was changed",
            errors=[{**e, "loc": [*root, *e["loc"]]} for e in errors],
        )
    if errors:
        raise _fail(errors, root)
    return SnapshotContent(
        items=[SnapshotItem(item, stamp) for item, stamp in zip(new_items, created, strict=True)],
        summary=doc.summary,
        last_compaction=dict(doc.last_compaction) if doc.last_compaction is not None else None,
        config=config,
        metadata=dict(doc.metadata),
    )
