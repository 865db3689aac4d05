"""AppendRepository: an append to an existing session as ONE statement on Postgres.

The general write path makes several statements (the session-row lock, the fenced update that
allocates the seq range, the items INSERT, the event INSERT) inside BEGIN ... COMMIT. Here they
are data-modifying CTEs of one statement, sent in autocommit: one round trip. The items, the
event and the idempotency record are inserted from the row the UPDATE returned, so when the
update matches nothing (missing session, stale ``If-Match``) nothing is inserted, and a
duplicate item id or an idempotency record already stored fails the whole statement.

Autocommit means a statement whose server died while it waited on the session row still
commits. That is why the idempotency record is part of it (DESIGN §6): the client's retry,
with the same ``Idempotency-Key``, meets the record's primary key and replays the answer; the
batch is never stored twice.

The session row's times (``updated_at``, ``expires_at``) come from the database's clock
(``CURRENT_TIMESTAMP``), and so does the judgement of expiry, never the replica's clock: a
statement that waited on the row while the sweep began erasing the session re-checks the row
the sweep left (``expires_at = ERASING``) and matches nothing, and no replica whose clock lags
can renew a session the database already considers expired. A tenant whose erasure began has a
tombstone the statement checks, so a key still cached elsewhere writes nothing.

``?create=true`` (``create``): when the update finds no session, an upsert of the session row
(``_UPSERT``) creates it with the items and the ``created`` + ``appended`` events, in autocommit
too: the first append of a session is two statements and no transaction.

Same rows as the general path: ``seq`` = the range the update allocated, one ``appended``
event at the new ``event_seq`` with ``{"count", "first_seq", "last_seq"}``; the session row
comes back as the new ``SessionState``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from app import jsonutil
from app.domain.errors import DuplicateItemId
from app.domain.items import NewItem
from app.domain.retention import tenant_digest
from app.domain.sessions import SessionState
from app.store.idempotency import IdempotencyScope, IdempotencyTaken, is_idempotency_conflict
from app.store.items import body_columns
from app.store.raw import DriverConnection, RawQuery
from app.store.retention import tenant_lock_name
from app.store.sessions import SESSION_COLUMNS, UTC_COLUMNS, state_of_row
from app.store.tables import UTCDateTime

_RETURNING = ", ".join(c.name for c in SESSION_COLUMNS)

_UPDATE = """
    UPDATE sessions SET
        version = version + 1,
        last_seq = last_seq + CAST(:n AS BIGINT),
        event_seq = event_seq + 1,
        item_count = item_count + CAST(:n AS BIGINT),
        token_count = token_count + CAST(:tokens AS BIGINT),
        char_count = char_count + CAST(:chars AS BIGINT),
        updated_at = CURRENT_TIMESTAMP,
        expires_at = CURRENT_TIMESTAMP + ttl_seconds * INTERVAL '1 second'
    WHERE tenant_id = :tenant_id AND id = :session_id
      AND (CAST(:expected AS BIGINT) IS NULL OR version = CAST(:expected AS BIGINT))
      AND (expires_at IS NULL OR expires_at > CURRENT_TIMESTAMP)
      AND NOT EXISTS (SELECT 1 FROM tenant_erasures WHERE tenant_digest = :tenant_digest)
    RETURNING {returning}"""
# ``?create=true``: the session row is created (version 1, its ``created`` and ``appended``
# events) or bumped as the update above bumps it, by one upsert. The tenant's guard function
# (migration 0010) takes the tenant's advisory lock shared and looks for its tombstone on a
# snapshot taken after the lock was granted, as the transactional create does in two
# statements. An existing row that expired (or whose erasure began) is left alone and nothing
# comes back: the general path erases it and creates the session again. ``xmax = 0`` is true
# of the row version an INSERT wrote, false of the one ON CONFLICT DO UPDATE wrote.
_UPSERT = """
    INSERT INTO sessions AS cur (tenant_id, id, version, summary, metadata, config, item_count,
                                 token_count, char_count, last_seq, event_seq, epoch,
                                 last_compaction, created_at, updated_at, ttl_seconds,
                                 expires_at)
    SELECT :tenant_id, :session_id, 1, NULL, CAST('{{}}' AS JSON), CAST('{{}}' AS JSON),
           CAST(:n AS BIGINT), CAST(:tokens AS BIGINT), CAST(:chars AS BIGINT),
           CAST(:n AS BIGINT), 2, 0, NULL, :now, CURRENT_TIMESTAMP,
           CAST(:default_ttl AS BIGINT),
           CURRENT_TIMESTAMP + CAST(:default_ttl AS BIGINT) * INTERVAL '1 second'
    WHERE tenant_creates_allowed(hashtextextended(:lock_name, 0), :tenant_digest)
    ON CONFLICT (tenant_id, id) DO UPDATE SET
        version = cur.version + 1,
        last_seq = cur.last_seq + CAST(:n AS BIGINT),
        event_seq = cur.event_seq + 1,
        item_count = cur.item_count + CAST(:n AS BIGINT),
        token_count = cur.token_count + CAST(:tokens AS BIGINT),
        char_count = cur.char_count + CAST(:chars AS BIGINT),
        updated_at = CURRENT_TIMESTAMP,
        expires_at = CURRENT_TIMESTAMP + cur.ttl_seconds * INTERVAL '1 second'
    WHERE cur.expires_at IS NULL OR cur.expires_at > CURRENT_TIMESTAMP
    RETURNING {returning}, cur.xmax = 0 AS created"""
_CREATED_EVENT = """
    SELECT s.tenant_id, s.id, s.event_seq - 1, 'created', s.version, :request_id, :actor,
           CAST('{}' AS JSONB), :now
    FROM s WHERE s.created
    UNION ALL"""
_STATEMENT = """
WITH s AS ({session}
), new_items AS (
    INSERT INTO items (tenant_id, session_id, seq, item_id, type, role, call_id, body, format,
                       tokens, chars, pinned, metadata, archived, created_at, search_text)
    SELECT s.tenant_id, s.id, s.last_seq - CAST(:n AS BIGINT) + r.ord, r.item_id, r.type,
           r.role, r.call_id, r.body, r.format, r.tokens, r.chars, r.pinned, r.metadata, false,
           :now, r.search_text
    FROM s, json_to_recordset(CAST(:rows AS JSON)) AS r(
        ord BIGINT, item_id TEXT, type TEXT, role TEXT, call_id TEXT, body TEXT, format TEXT,
        tokens INTEGER, chars INTEGER, pinned BOOLEAN, metadata JSON, search_text TEXT)
), new_event AS (
    INSERT INTO events (tenant_id, session_id, seq, type, version, request_id, actor, data,
                        created_at){created_event}
    SELECT s.tenant_id, s.id, s.event_seq, 'appended', s.version, :request_id, :actor,
           jsonb_build_object('count', CAST(:n AS BIGINT),
                              'first_seq', s.last_seq - CAST(:n AS BIGINT) + 1,
                              'last_seq', s.last_seq),
           :now
    FROM s
){idempotency}
SELECT {returning} FROM s
"""
# With an Idempotency-Key, the record of the answer is one more CTE of the same statement
# (without one, the statement has none: nothing to plan, nine parameters fewer to send).
_IDEMPOTENCY = """, new_idempotency AS (
    INSERT INTO idempotency_keys (tenant_id, key_id, method, path, key, session_id, kind,
                                  request_hash, status_code, response, created_at, expires_at)
    SELECT s.tenant_id, CAST(:idem_key_id AS TEXT), CAST(:idem_method AS TEXT),
           CAST(:idem_path AS TEXT), CAST(:idem_key AS TEXT), s.id, 'append',
           CAST(:idem_hash AS TEXT), 201,
           json_build_object('ids', CAST(:idem_ids AS JSON),
                             'first_seq', s.last_seq - CAST(:n AS BIGINT) + 1,
                             'version', s.version,
                             'created_at', CAST(:idem_now AS TEXT))::text,
           :now, CAST(:idem_expires AS TIMESTAMPTZ)
    FROM s
)"""


def _append_statement(*, idempotent: bool, create: bool = False) -> RawQuery:
    returning = _RETURNING + (", created" if create else "")
    text = _STATEMENT.format(
        session=(_UPSERT if create else _UPDATE).format(returning=_RETURNING),
        created_event=_CREATED_EVENT if create else "",
        returning=returning,
        idempotency=_IDEMPOTENCY if idempotent else "",
    )
    columns = [*SESSION_COLUMNS, *([sa.column("created", sa.Boolean)] if create else [])]
    statement = (
        sa.text(text)
        .bindparams(
            sa.bindparam("now", type_=UTCDateTime()),
            *([sa.bindparam("idem_expires", type_=UTCDateTime())] if idempotent else []),
        )
        .columns(*columns)
    )
    return RawQuery(statement, utc_columns=UTC_COLUMNS)


# Sent on the driver connection (see app/store/raw.py): this is every append's statement.
_APPEND = _append_statement(idempotent=False)
_APPEND_IDEMPOTENT = _append_statement(idempotent=True)
_CREATE_APPEND = _append_statement(idempotent=False, create=True)
_CREATE_APPEND_IDEMPOTENT = _append_statement(idempotent=True, create=True)


def postgres_text() -> str:
    """The Postgres text of the append statement without an idempotency record (psycopg
    ``%(name)s`` parameters), for measuring the statement alone: bench/harness.py gives it
    to its floor, which runs it with nothing of the service around it."""
    from sqlalchemy.dialects.postgresql.psycopg import dialect

    return str(_APPEND.postgres.compile(dialect=dialect()))


@dataclass(frozen=True, slots=True)
class AppendIdempotency:
    """The idempotency record the append statement writes with the items (kind ``append``:
    what only the database knows, item ids, first seq, version and time, for the replay)."""

    scope: IdempotencyScope
    request_hash: str
    expires_at: datetime


@dataclass(frozen=True, slots=True)
class AppendRecipe:
    """A stored ``append`` record, read back: enough to rebuild the first answer from the
    retried request (whose hash proved it identical)."""

    ids: list[str]
    first_seq: int
    version: int
    created_at: datetime

    @classmethod
    def parse(cls, text: str) -> AppendRecipe:
        data = jsonutil.loads(text)
        created = datetime.fromisoformat(data["created_at"])
        return cls(list(data["ids"]), int(data["first_seq"]), int(data["version"]), created)


class AppendRepository:
    """Postgres only (data-modifying CTEs); SQLite takes the general path."""

    def __init__(self, db: AsyncConnection | DriverConnection) -> None:
        self.db = db

    async def append(
        self,
        tenant_id: str,
        session_id: str,
        *,
        batch: Sequence[tuple[NewItem, str, int, int, str]],
        now: datetime,
        expected_version: int | None,
        request_id: str | None,
        actor: str | None,
        idempotency: AppendIdempotency | None = None,
        create: bool = False,
        default_ttl: int | None = None,
    ) -> SessionState | None:
        """Append ``batch`` ((item, id, tokens, chars, the record as JSON), in order) and bump the session row,
        in one statement; ``None`` if the session is missing or not at ``expected_version``
        (nothing written). A live item id already taken raises ``DuplicateItemId``, a record
        already stored under ``idempotency``'s scope ``IdempotencyTaken`` (nothing written).

        ``create`` (``?create=true``, no ``expected_version``): a missing session is created
        by one more statement (an upsert: it creates the row or, if a concurrent first append
        created it meanwhile, bumps it), at version 1 with its ``created`` event before
        ``appended``, with ``default_ttl`` (the server's) as its TTL. ``None`` then means
        the tenant's erasure has begun, or the id is held by a session that expired or is
        being erased (nothing written: the general path says which)."""
        assert not (create and expected_version is not None)
        rows: list[dict[str, Any]] = []
        tokens = chars = 0
        for ordinal, (item, item_id, item_tokens, item_chars, record) in enumerate(batch, 1):
            rows.append(
                {
                    "ord": ordinal,
                    "item_id": item_id,
                    **body_columns(item, record_json=record),
                    "tokens": item_tokens,
                    "chars": item_chars,
                    "pinned": item.pinned,
                    "metadata": item.metadata,
                }
            )
            tokens += item_tokens
            chars += item_chars
        params = {
            "tenant_id": tenant_id,
            "session_id": session_id,
            "tenant_digest": tenant_digest(tenant_id),
            "n": len(rows),
            "tokens": tokens,
            "chars": chars,
            "now": now,
            "expected": expected_version,
            "rows": jsonutil.dumps(rows),
            "request_id": request_id,
            "actor": actor,
        }
        if idempotency is not None:
            params.update(_idempotency_params(idempotency, [row["item_id"] for row in rows], now))
        idempotent = idempotency is not None
        found = await self._run(_APPEND_IDEMPOTENT if idempotent else _APPEND, params)
        if not found and create:
            # Missing (its first append), or held by an expired session, or the tenant is
            # being erased. The plain update came first because the session almost always
            # exists, and the update takes no tenant lock: at 64 clients the upsert's shared
            # advisory lock of one tenant cost a tenth of the throughput (bench/RESULTS.md,
            # session 15).
            params["default_ttl"] = default_ttl
            params["lock_name"] = tenant_lock_name(params["tenant_digest"])
            found = await self._run(
                _CREATE_APPEND_IDEMPOTENT if idempotent else _CREATE_APPEND, params
            )
        if not found:
            return None
        return state_of_row(found[0][: len(SESSION_COLUMNS)])

    async def _run(self, query: RawQuery, params: dict[str, Any]) -> Sequence[Any]:
        try:
            return await query.rows(self.db, params)
        except IntegrityError as exc:
            if is_idempotency_conflict(exc):
                raise IdempotencyTaken from exc
            raise DuplicateItemId("an item id in the batch is already in working memory") from exc


def _idempotency_params(
    idempotency: AppendIdempotency, ids: list[str], now: datetime
) -> dict[str, Any]:
    scope = idempotency.scope
    return {
        "idem_key_id": scope.key_id,
        "idem_method": scope.method,
        "idem_path": scope.path,
        "idem_key": scope.key,
        "idem_hash": idempotency.request_hash,
        "idem_ids": jsonutil.dumps(ids),
        "idem_now": now.isoformat(),
        "idem_expires": idempotency.expires_at,
    }
