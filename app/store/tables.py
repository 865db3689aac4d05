"""Table definitions (SQLAlchemy Core), shared by the repositories and the migrations.

Every primary key and unique constraint leads with the tenant and the session id, every hot
query touches one session, and no sequence is used on the write path (``seq`` comes from the
session row), so the tables can be distributed by session (Citus) without a schema change.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import Dialect

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}
metadata = sa.MetaData(naming_convention=NAMING_CONVENTION)

JSONType = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
# What a client sent (metadata, config): Postgres ``json`` keeps the text it is given, where
# JSONB rewrites numbers (1.5e308 as a 309-digit integer, -0.0 as 0) and reorders keys
# (migration 0008). No query may compare these columns: ``json`` has no equality.
ClientJSON = sa.JSON().with_variant(postgresql.JSON(), "postgresql")


class UTCDateTime(sa.TypeDecorator[datetime]):
    """Timezone-aware UTC datetimes on every backend (SQLite keeps no zone)."""

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is not None and value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        if value is not None and dialect.name == "sqlite":
            value = value.astimezone(UTC).replace(tzinfo=None)
        return value

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        return as_utc(value)


def as_utc(value: datetime | None) -> datetime | None:
    """A stored timestamp as an aware UTC datetime (SQLite keeps no zone: it is UTC)."""
    if value is None:
        return None
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


TENANT = sa.String(64)
SID = sa.String(256)

sessions = sa.Table(
    "sessions",
    metadata,
    sa.Column("tenant_id", TENANT, primary_key=True),
    sa.Column("id", SID, primary_key=True),
    sa.Column("version", sa.BigInteger, nullable=False),
    sa.Column("summary", sa.Text, nullable=True),
    sa.Column("metadata", ClientJSON, nullable=False),
    sa.Column("config", ClientJSON, nullable=False),
    sa.Column("item_count", sa.Integer, nullable=False, server_default="0"),
    sa.Column("token_count", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("char_count", sa.BigInteger, nullable=False, server_default="0"),
    # Highest seq ever handed out: seqs are never reused, even after pop or clear.
    sa.Column("last_seq", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("event_seq", sa.BigInteger, nullable=False, server_default="0"),
    # Bumped whenever working memory is replaced wholesale (restore, clear): a compaction that
    # started before refuses to commit.
    sa.Column("epoch", sa.Integer, nullable=False, server_default="0"),
    sa.Column("last_compaction", JSONType, nullable=True),
    sa.Column("created_at", UTCDateTime, nullable=False),
    sa.Column("updated_at", UTCDateTime, nullable=False),
    # Retention (migration 0005): the TTL in force at the last write (config.ttl_seconds or the
    # server default) and ``updated_at`` + that TTL; every write renews it, the sweep erases
    # the session once it has passed (an expired session answers 404 before that).
    sa.Column("ttl_seconds", sa.BigInteger, nullable=True),
    sa.Column("expires_at", UTCDateTime, nullable=True),
)
_EXPIRING = sa.text("expires_at IS NOT NULL")
sa.Index(
    "ix_sessions_expires_at",
    sessions.c.expires_at,
    postgresql_where=_EXPIRING,
    sqlite_where=_EXPIRING,
)

items = sa.Table(
    "items",
    metadata,
    sa.Column("tenant_id", TENANT, primary_key=True),
    sa.Column("session_id", SID, primary_key=True),
    sa.Column("seq", sa.BigInteger, primary_key=True, autoincrement=False),
    sa.Column("item_id", sa.String(128), nullable=False),
    sa.Column("type", sa.String(64), nullable=False),
    sa.Column("role", sa.String(16), nullable=True),
    sa.Column("call_id", sa.String(256), nullable=True),
    # The record as the client sent it, as JSON text (JSONB would reorder its keys): a
    # canonical body, or a provider item or message in ``format`` (app.domain.formats).
    sa.Column("body", sa.Text, nullable=False),
    sa.Column("format", sa.String(24), nullable=False, server_default="canonical"),
    sa.Column("tokens", sa.Integer, nullable=False),
    sa.Column("chars", sa.Integer, nullable=False),
    sa.Column("pinned", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column("metadata", ClientJSON, nullable=False),
    sa.Column("archived", sa.Boolean, nullable=False, server_default=sa.false()),
    # why it left working memory: compacted | cleared | restored | popped
    sa.Column("archived_reason", sa.String(16), nullable=True),
    sa.Column("created_at", UTCDateTime, nullable=False),
    # The item's texts (domain.items.item_texts), written with the row: full-text search reads
    # it (Postgres: GIN expression index; SQLite: FTS5 table kept by triggers; migration 0002).
    sa.Column("search_text", sa.Text, nullable=True),
)
_LIVE = sa.text("NOT archived")
sa.Index(
    "uq_items_live_item_id",
    items.c.tenant_id,
    items.c.session_id,
    items.c.item_id,
    unique=True,
    postgresql_where=_LIVE,
    sqlite_where=_LIVE,
)
sa.Index(
    "ix_items_live_seq",
    items.c.tenant_id,
    items.c.session_id,
    items.c.seq,
    postgresql_where=_LIVE,
    sqlite_where=_LIVE,
)
# The items a projection must always consider, whatever the budget: found without a scan.
_MANDATORY = sa.text("NOT archived AND (pinned OR role IN ('system', 'developer'))")
sa.Index(
    "ix_items_live_mandatory",
    items.c.tenant_id,
    items.c.session_id,
    items.c.seq,
    postgresql_where=_MANDATORY,
    sqlite_where=_MANDATORY,
)

# Derived data (docs/semantic-search.md): one vector per item and embedding model, written by
# the indexer off the write path, never by an append. ``vector`` is ``dims`` float32 values,
# little-endian. Erased with the item (the foreign key cascades, and the erasure deletes them
# first with the other session tables); never part of a snapshot or an export.
item_vectors = sa.Table(
    "item_vectors",
    metadata,
    sa.Column("tenant_id", TENANT, primary_key=True),
    sa.Column("session_id", SID, primary_key=True),
    sa.Column("seq", sa.BigInteger, primary_key=True, autoincrement=False),
    sa.Column("model", sa.String(128), primary_key=True),
    sa.Column("dims", sa.Integer, nullable=False),
    sa.Column("vector", sa.LargeBinary, nullable=False),
    sa.Column("created_at", UTCDateTime, nullable=False),
    sa.ForeignKeyConstraint(
        ["tenant_id", "session_id", "seq"],
        ["items.tenant_id", "items.session_id", "items.seq"],
        ondelete="CASCADE",
    ),
)

# The session resource's counts (migration 0012): the session's vectors of one model and size,
# and those from a seq on, counted in this index alone.
sa.Index(
    "ix_item_vectors_tenant_id_session_id_model_dims_seq",
    item_vectors.c.tenant_id,
    item_vectors.c.session_id,
    item_vectors.c.model,
    item_vectors.c.dims,
    item_vectors.c.seq,
)

# The Postgres indexer's claims (migration 0012): an item some indexer is embedding for a
# model, until ``claimed_until``. The claim commits before the model runs, so no lock on an
# item is held meanwhile; this row is what keeps another replica's indexer from embedding the
# same item at the same time. Holds no content; goes with its item (the foreign key cascades).
vector_leases = sa.Table(
    "vector_leases",
    metadata,
    sa.Column("tenant_id", TENANT, primary_key=True),
    sa.Column("session_id", SID, primary_key=True),
    sa.Column("seq", sa.BigInteger, primary_key=True, autoincrement=False),
    sa.Column("model", sa.String(128), primary_key=True),
    sa.Column("claimed_until", UTCDateTime, nullable=False),
    sa.ForeignKeyConstraint(
        ["tenant_id", "session_id", "seq"],
        ["items.tenant_id", "items.session_id", "items.seq"],
        ondelete="CASCADE",
    ),
)

events = sa.Table(
    "events",
    metadata,
    sa.Column("tenant_id", TENANT, primary_key=True),
    sa.Column("session_id", SID, primary_key=True),
    sa.Column("seq", sa.BigInteger, primary_key=True, autoincrement=False),
    sa.Column("type", sa.String(64), nullable=False),
    sa.Column("version", sa.BigInteger, nullable=False),
    sa.Column("request_id", sa.String(128), nullable=True),
    sa.Column("actor", sa.String(128), nullable=True),
    sa.Column("data", JSONType, nullable=False),
    sa.Column("created_at", UTCDateTime, nullable=False),
)

idempotency_keys = sa.Table(
    "idempotency_keys",
    metadata,
    sa.Column("tenant_id", TENANT, primary_key=True),
    # the API key's public id ("" with auth off): another key never gets this key's answers
    sa.Column("key_id", sa.String(64), primary_key=True),
    sa.Column("method", sa.String(8), primary_key=True),
    sa.Column("path", sa.String(4096), primary_key=True),
    sa.Column("key", sa.String(256), primary_key=True),
    # the session the write acted on: its records are deleted with it (migration 0004)
    sa.Column("session_id", SID, nullable=True),
    # "response": ``response`` is the body; "append": what a one-statement append knew only
    # inside the database (ids, first seq, version, time), the body being rebuilt on replay
    sa.Column("kind", sa.String(16), nullable=False, server_default="response"),
    sa.Column("request_hash", sa.String(64), nullable=False),
    sa.Column("status_code", sa.Integer, nullable=False),
    sa.Column("response", sa.Text, nullable=False),
    sa.Column("created_at", UTCDateTime, nullable=False),
    sa.Column("expires_at", UTCDateTime, nullable=False, index=True),
)
sa.Index(
    "ix_idempotency_keys_tenant_id_session_id",
    idempotency_keys.c.tenant_id,
    idempotency_keys.c.session_id,
)

snapshots = sa.Table(
    "snapshots",
    metadata,
    sa.Column("tenant_id", TENANT, primary_key=True),
    sa.Column("session_id", SID, primary_key=True),
    sa.Column("id", sa.String(128), primary_key=True),
    sa.Column("label", sa.String(256), nullable=True),
    sa.Column("version", sa.BigInteger, nullable=False),
    sa.Column("item_count", sa.Integer, nullable=False),
    sa.Column("document", sa.Text, nullable=False),  # JSON text, keys in their order
    sa.Column("created_at", UTCDateTime, nullable=False),
)

compactions = sa.Table(
    "compactions",
    metadata,
    sa.Column("tenant_id", TENANT, primary_key=True),
    sa.Column("session_id", SID, primary_key=True),
    sa.Column("id", sa.String(128), primary_key=True),
    sa.Column("policy", sa.String(32), nullable=False),
    sa.Column("result", JSONType, nullable=False),
    sa.Column("created_at", UTCDateTime, nullable=False),
)

api_keys = sa.Table(
    "api_keys",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("tenant_id", TENANT, nullable=False, index=True),
    sa.Column("name", sa.String(128), nullable=False),
    sa.Column("key_hash", sa.String(64), nullable=False, unique=True),
    sa.Column("scopes", JSONType, nullable=False),
    sa.Column("session_prefix", sa.String(256), nullable=True),
    sa.Column("created_at", UTCDateTime, nullable=False),
    sa.Column("revoked_at", UTCDateTime, nullable=True),
)

# One row per erasure (a session deleted or expired, a tenant erased; migration 0005). It holds
# none of the erased data: the id only as a digest (app.domain.retention.subject_digest).
erasures = sa.Table(
    "erasures",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("kind", sa.String(16), nullable=False),  # session | tenant
    sa.Column("reason", sa.String(16), nullable=False),  # deleted | expired | tenant_erased
    # the tenant a session erasure happened in (its admin may list them); NULL for a tenant
    sa.Column("tenant_id", TENANT, nullable=True),
    sa.Column("subject_digest", sa.String(64), nullable=False),
    sa.Column("key_id", sa.String(64), nullable=True),  # the API key that asked (NULL: sweep)
    sa.Column("key_name", sa.String(128), nullable=True),
    sa.Column("row_counts", JSONType, nullable=False),  # {table: rows}
    sa.Column("created_at", UTCDateTime, nullable=False),
)
sa.Index("ix_erasures_tenant_id_created_at", erasures.c.tenant_id, erasures.c.created_at)
sa.Index("ix_erasures_subject_digest", erasures.c.subject_digest)

# A tenant whose erasure has begun (migration 0007): every write of that tenant checks it, so
# a key still cached on another replica writes nothing. It holds the id only as a digest
# (app.domain.retention.tenant_digest); the sweep removes it once no replica can still hold a
# cached key of the tenant (``finished_at`` + the auth cache's lifetime).
tenant_erasures = sa.Table(
    "tenant_erasures",
    metadata,
    sa.Column("tenant_digest", sa.String(64), primary_key=True),
    sa.Column("started_at", UTCDateTime, nullable=False),
    sa.Column("finished_at", UTCDateTime, nullable=True),
)
