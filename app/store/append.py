"""AppendRepository: an append to an existing session as ONE statement on Postgres.

The general write path makes three statements (the fenced session-row update that allocates
the seq range, the items INSERT, the event INSERT) inside BEGIN ... COMMIT: five round trips.
Here the three are data-modifying CTEs of one statement: the items and the event are inserted
from the row the UPDATE returned, so when the update matches nothing (missing session, stale
``If-Match``) nothing is inserted, and a duplicate item id fails the whole statement. Three
round trips (BEGIN, this, COMMIT) instead of five. It stays inside the write transaction: run
alone (autocommit) it would be one round trip, but a statement sent by a server that then dies
while the statement waits on the session row would still commit; in a transaction it is
rolled back.

Same rows as the general path: ``seq`` = the range the update allocated, one ``appended``
event at the new ``event_seq`` with ``{"count", "first_seq", "last_seq"}``; the session row
comes back as the new ``SessionState``.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from app import jsonutil
from app.domain.errors import DuplicateItemId
from app.domain.items import NewItem
from app.domain.sessions import SessionState
from app.store.items import body_columns
from app.store.raw import RawQuery
from app.store.sessions import _COLUMNS, UTC_COLUMNS, _state
from app.store.tables import UTCDateTime

_RETURNING = ", ".join(c.name for c in _COLUMNS)

_APPEND_STATEMENT = (
    sa.text(
        f"""
WITH s AS (
    UPDATE sessions SET
        version = version + 1,
        last_seq = last_seq + CAST(:n AS BIGINT),
        event_seq = event_seq + 1,
        item_count = item_count + CAST(:n AS BIGINT),
        token_count = token_count + CAST(:tokens AS BIGINT),
        char_count = char_count + CAST(:chars AS BIGINT),
        updated_at = :now
    WHERE tenant_id = :tenant_id AND id = :session_id
      AND (CAST(:expected AS BIGINT) IS NULL OR version = CAST(:expected AS BIGINT))
    RETURNING {_RETURNING}
), new_items AS (
    INSERT INTO items (tenant_id, session_id, seq, item_id, type, role, call_id, body, tokens,
                       chars, pinned, metadata, archived, created_at, search_text)
    SELECT s.tenant_id, s.id, s.last_seq - CAST(:n AS BIGINT) + r.ord, r.item_id, r.type,
           r.role, r.call_id, r.body, r.tokens, r.chars, r.pinned, r.metadata, false, :now,
           r.search_text
    FROM s, jsonb_to_recordset(CAST(:rows AS JSONB)) AS r(
        ord BIGINT, item_id TEXT, type TEXT, role TEXT, call_id TEXT, body JSONB,
        tokens INTEGER, chars INTEGER, pinned BOOLEAN, metadata JSONB, search_text TEXT)
), new_event AS (
    INSERT INTO events (tenant_id, session_id, seq, type, version, request_id, actor, data,
                        created_at)
    SELECT s.tenant_id, s.id, s.event_seq, 'appended', s.version, :request_id, :actor,
           jsonb_build_object('count', CAST(:n AS BIGINT),
                              'first_seq', s.last_seq - CAST(:n AS BIGINT) + 1,
                              'last_seq', s.last_seq),
           :now
    FROM s
)
SELECT {_RETURNING} FROM s
"""
    )
    .bindparams(sa.bindparam("now", type_=UTCDateTime()))
    .columns(*_COLUMNS)
)
# Sent on the driver connection (see app/store/raw.py): this is every append's statement.
_APPEND = RawQuery(
    _APPEND_STATEMENT,
    utc_columns=UTC_COLUMNS,
)


class AppendRepository:
    """Postgres only (data-modifying CTEs); SQLite takes the general path."""

    def __init__(self, db: AsyncConnection) -> None:
        self.db = db

    async def append(
        self,
        tenant_id: str,
        session_id: str,
        *,
        batch: Sequence[tuple[NewItem, str, int, int]],
        now: datetime,
        expected_version: int | None,
        request_id: str | None,
        actor: str | None,
    ) -> SessionState | None:
        """Append ``batch`` ((item, id, tokens, chars), in order) and bump the session row;
        ``None`` if the session is missing or not at ``expected_version`` (nothing written).
        A live item id already taken raises ``DuplicateItemId`` (nothing written)."""
        rows: list[dict[str, Any]] = []
        tokens = chars = 0
        for ordinal, (item, item_id, item_tokens, item_chars) in enumerate(batch, start=1):
            rows.append(
                {
                    "ord": ordinal,
                    "item_id": item_id,
                    **body_columns(item.body),
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
            "n": len(rows),
            "tokens": tokens,
            "chars": chars,
            "now": now,
            "expected": expected_version,
            "rows": jsonutil.dumps(rows),
            "request_id": request_id,
            "actor": actor,
        }
        try:
            rows = await _APPEND.rows(self.db, params)
        except IntegrityError as exc:
            raise DuplicateItemId("an item id in the batch is already in working memory") from exc
        return _state(rows[0]) if rows else None
