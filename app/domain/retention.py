"""Retention: how long a session and the parts of its history are kept, and what an erasure
records about itself. Pure: the sweep (``services.retention``) asks these functions what is due.

Invariants:

- working memory (live items, the summary) is never erased by retention, only by the session
  expiring as a whole or by an explicit delete;
- a session's own ``config`` wins over the server default, key by key; ``None`` everywhere
  means "kept for ever";
- ``expires_at`` is the last write plus the effective TTL: every write renews it; expiry is
  judged by the database's clock (one clock for every replica);
- a session whose erasure has begun has ``expires_at = ERASING``, a time before any clock's
  now: no write can land on it and every read answers 404, so a session is whole or gone;
- a tenant whose erasure has begun has a tombstone (``tenant_digest``): no write of that
  tenant lands on any replica, whatever its key cache holds;
- ``snapshots_to_erase`` keeps the newest ``keep`` snapshots, and when some must go the
  automatic ``pre-restore`` ones go first (oldest first within each kind);
- an ``ErasureRecord`` holds no data of what it erased: an unsalted SHA-256 of the tenant and
  id (so an operator holding an id can prove it was erased, and nobody can read it back), who
  asked, when, and row counts per table.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from app.domain.errors import DomainError, InvalidInput, NotFound

# A year in seconds times 100: beyond any real retention, small enough for every store.
MAX_RETENTION_SECONDS = 100 * 366 * 24 * 3600
MAX_KEEP_SNAPSHOTS = 100_000
AUTOMATIC_SNAPSHOT_LABEL = "pre-restore"
# The expiry a session gets when its erasure begins: expired for every clock, and first in the
# sweep's order (it finishes what it started before it starts anything new).
ERASING = datetime(1970, 1, 1, tzinfo=UTC)


class TenantNotFound(NotFound):
    code = "tenant-not-found"
    title = "Tenant not found"


class TenantErased(DomainError):
    """A write for a tenant whose erasure has begun (its key may still be cached somewhere)."""

    code = "tenant-erased"
    title = "Tenant erased"


class RetentionConfig(BaseModel):
    """``config.retention``: how long this session's history is kept (absent: server default)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    history_seconds: int | None = Field(
        None,
        ge=1,
        le=MAX_RETENTION_SECONDS,
        description="Archived items (compacted, popped, cleared, replaced) appended longer ago "
        "than this are erased; working memory never is",
    )
    keep_snapshots: int | None = Field(
        None,
        ge=0,
        le=MAX_KEEP_SNAPSHOTS,
        description="Keep at most this many snapshots, newest first; automatic pre-restore "
        "snapshots are erased before the ones you made",
    )
    events_seconds: int | None = Field(
        None, ge=1, le=MAX_RETENTION_SECONDS, description="Events older than this are erased"
    )


def parse_retention(value: Any) -> RetentionConfig:
    """``config.retention`` validated, or ``InvalidInput`` with ``loc`` under it."""
    if value is None:
        return RetentionConfig()
    if isinstance(value, dict):
        # a whole float (6393.0) is the integer JSON Schema says it is
        value = {
            k: int(v) if isinstance(v, float) and v.is_integer() else v for k, v in value.items()
        }
    try:
        return RetentionConfig.model_validate(value)
    except ValidationError as exc:
        raise InvalidInput(
            "invalid config.retention",
            errors=[
                {"loc": ["config", "retention", *e["loc"]], "msg": e["msg"]} for e in exc.errors()
            ],
        ) from None


def check_ttl(value: Any) -> int | None:
    """``config.ttl_seconds``: a whole number of seconds, 1 up to ``MAX_RETENTION_SECONDS``."""
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # JSON Schema's integer: 583.0 is one, as in every request body
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or not (1 <= value <= MAX_RETENTION_SECONDS)
    ):
        raise InvalidInput(
            "invalid config.ttl_seconds",
            errors=[
                {
                    "loc": ["config", "ttl_seconds"],
                    "msg": f"an integer from 1 to {MAX_RETENTION_SECONDS}",
                }
            ],
        )
    return value


@dataclass(frozen=True, slots=True)
class RetentionDefaults:
    """The server's defaults (``RETENTION__*``)."""

    session_ttl_seconds: int | None = None
    history_seconds: int | None = None
    keep_snapshots: int | None = None
    events_seconds: int | None = None


@dataclass(frozen=True, slots=True)
class RetentionPolicy:
    """What applies to one session: its config over the server defaults."""

    history_seconds: int | None = None
    keep_snapshots: int | None = None
    events_seconds: int | None = None

    @property
    def prunes(self) -> bool:
        return (
            self.history_seconds is not None
            or self.keep_snapshots is not None
            or self.events_seconds is not None
        )

    def history_cutoff(self, now: datetime) -> datetime | None:
        return (
            None if self.history_seconds is None else now - timedelta(seconds=self.history_seconds)
        )

    def events_cutoff(self, now: datetime) -> datetime | None:
        return None if self.events_seconds is None else now - timedelta(seconds=self.events_seconds)


def effective_ttl(config: Mapping[str, Any] | None, defaults: RetentionDefaults) -> int | None:
    """The session's TTL in seconds: ``config.ttl_seconds``, else the server default."""
    own = (config or {}).get("ttl_seconds")
    if isinstance(own, int) and not isinstance(own, bool):
        return own
    return defaults.session_ttl_seconds


def policy_for(config: Mapping[str, Any] | None, defaults: RetentionDefaults) -> RetentionPolicy:
    """``config.retention`` key by key over the server defaults (an invalid stored value, which
    validation prevents, falls back to the default rather than stopping the sweep)."""
    raw = (config or {}).get("retention")
    own: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}

    def pick(name: str) -> int | None:
        value = own.get(name)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        default: int | None = getattr(defaults, name)
        return default

    return RetentionPolicy(
        history_seconds=pick("history_seconds"),
        keep_snapshots=pick("keep_snapshots"),
        events_seconds=pick("events_seconds"),
    )


def expiry(updated_at: datetime, ttl_seconds: int | None) -> datetime | None:
    return None if ttl_seconds is None else updated_at + timedelta(seconds=ttl_seconds)


def is_expired(expires_at: datetime | None, now: datetime) -> bool:
    return expires_at is not None and expires_at <= now


@dataclass(frozen=True, slots=True)
class SnapshotInfo:
    id: str
    label: str | None
    created_at: datetime

    @property
    def automatic(self) -> bool:
        return self.label == AUTOMATIC_SNAPSHOT_LABEL


def snapshots_to_erase(snapshots: Sequence[SnapshotInfo], keep: int | None) -> list[str]:
    """Ids of the snapshots to erase so that at most ``keep`` remain: automatic ones first,
    then the caller's own, oldest first within each kind."""
    if keep is None or len(snapshots) <= keep:
        return []
    excess = len(snapshots) - keep
    order = sorted(snapshots, key=lambda s: (not s.automatic, s.created_at, s.id))
    return [s.id for s in order[:excess]]


@functools.lru_cache(maxsize=4096)
def tenant_digest(tenant_id: str) -> str:
    """What a tenant's erasure tombstone and audit record keep of its id (every write of a
    tenant asks for it: cached)."""
    return subject_digest(tenant_id, tenant_id)


def subject_digest(tenant_id: str, subject_id: str) -> str:
    """What an audit record keeps of an erased id: SHA-256 of the length-prefixed tenant and id
    (tenant ``a`` + id ``b:c`` never collides with tenant ``a:b`` + id ``c``)."""
    raw = f"{len(tenant_id)}:{tenant_id}:{subject_id}".encode()
    return hashlib.sha256(raw).hexdigest()


@dataclass
class ErasedCounts:
    """Rows and bytes erased, by table (or kind); added up across batches."""

    rows: dict[str, int] = field(default_factory=dict)
    bytes: dict[str, int] = field(default_factory=dict)

    def add(self, kind: str, rows: int, size: int = 0) -> None:
        kind = str(kind)  # a plain str (a table's name is a subclass JSON encoders refuse)
        if rows:
            self.rows[kind] = self.rows.get(kind, 0) + rows
            self.bytes[kind] = self.bytes.get(kind, 0) + size

    def merge(self, other: ErasedCounts) -> None:
        for kind, rows in other.rows.items():
            self.add(kind, rows, other.bytes.get(kind, 0))

    @property
    def total_rows(self) -> int:
        return sum(self.rows.values())


@dataclass(frozen=True, slots=True)
class SeqRange:
    """How many rows of one kind a prune erased and the seqs they spanned."""

    count: int
    first_seq: int
    last_seq: int

    def as_dict(self) -> dict[str, int]:
        return {"count": self.count, "first_seq": self.first_seq, "last_seq": self.last_seq}


def seq_range(seqs: Sequence[int]) -> SeqRange | None:
    return SeqRange(len(seqs), min(seqs), max(seqs)) if seqs else None
