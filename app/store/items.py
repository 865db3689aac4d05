"""ItemRepository: every SQL statement on a session's items (working memory and archive).

Working memory is the non-archived rows; the archive keeps everything that ever left it.
Reads of working memory go through the partial index ``ix_items_live_seq`` so their cost
follows the rows returned, not the session's history.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from app import jsonutil
from app.domain.errors import DuplicateItemId
from app.domain.formats import decode
from app.domain.items import (
    NewItem,
    StoredItem,
    body_from_dict,
    item_texts,
    pair_key,
    record_of,
)
from app.store.tables import items as t

ITEM_COLUMNS = [
    t.c.seq,
    t.c.item_id,
    t.c.body,
    t.c.tokens,
    t.c.chars,
    t.c.pinned,
    t.c.metadata,
    t.c.created_at,
    t.c.format,
]


def item_of_row(row: sa.Row[Any]) -> StoredItem:
    # Positional, in ITEM_COLUMNS order: a context read decodes hundreds of rows and building
    # a mapping view per row costs more than the rest of the decoding.
    seq, item_id, text, tokens, chars, pinned, metadata, created_at, format = row[:9]
    return _stored(
        seq, item_id, jsonutil.loads(text), tokens, chars, pinned, metadata, created_at, format
    )


def _stored(
    seq: int,
    item_id: str,
    data: Any,
    tokens: int,
    chars: int,
    pinned: bool,
    metadata: Any,
    created_at: datetime,
    format: str,
) -> StoredItem:
    """A stored item from its decoded columns (``data``: the stored JSON, decoded)."""
    if format == "canonical":
        body, record = body_from_dict(data), None
    else:  # the record as sent; the canonical body is its view, derived again here
        body, record = decode(format, data), data
    # positional, in field order: keywords cost a frozen dataclass about twice as much
    return StoredItem(
        body, item_id, seq, tokens, chars, pinned, metadata, created_at, format, record
    )


# Items as one JSON text built by Postgres (``aggregate_sql``): an array of
# ``[seq, item_id, body, tokens, chars, pinned, metadata, created_at_us, format]``. A context
# read that misses the item cache decodes a hundred rows or more; psycopg builds each row and
# decodes its JSON column one call at a time, which cost more than the decoding itself. Here
# the whole answer is one string and one ``jsonutil.loads``: the stored body and metadata
# texts are copied into it verbatim (``body`` is JSON text, ``metadata`` Postgres ``json``,
# which keeps the text it was given), so each decodes exactly as on its own. ``created_at``
# travels as integer microseconds since the epoch (exact: 16 digits).
_AGGREGATE_ROW = (
    "'[' || seq || ',' || to_json(item_id)::text || ',' || body || ',' || tokens || ',' "
    "|| chars || ',' || CASE WHEN pinned THEN 'true' ELSE 'false' END || ',' "
    "|| metadata::text || ',' "
    "|| (extract(epoch FROM created_at) * 1000000)::bigint || ',' "
    "|| to_json(format)::text || ']'"
)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def aggregate_sql(where: str) -> str:
    """The Postgres statement giving the items that match ``where`` as one JSON text (NULL
    when none does); decode it with ``items_of_aggregate``."""
    return f"SELECT '[' || string_agg({_AGGREGATE_ROW}, ',') || ']' FROM items WHERE {where}"


def items_of_aggregate(text: str | None) -> list[StoredItem]:
    """The items of an ``aggregate_sql`` answer, in its order."""
    if text is None:
        return []
    epoch, micros = _EPOCH, timedelta
    return [
        _stored(
            seq,
            item_id,
            data,
            tokens,
            chars,
            pinned,
            metadata,
            epoch + micros(microseconds=us),
            fmt,
        )
        for seq, item_id, data, tokens, chars, pinned, metadata, us, fmt in jsonutil.loads(text)
    ]


def body_columns(item: NewItem | StoredItem, *, record_json: str | None = None) -> dict[str, Any]:
    """The columns an item's body fills (both append paths write them the same way): the
    record as JSON text (``record_json`` when the caller encoded it already), and what the
    queries select on, derived from the canonical body."""
    body = item.body
    return {
        "type": body.type,
        "role": getattr(body, "role", None),
        "call_id": pair_value(item),
        # JSON text holds a NUL as its escape; the text columns beside it cannot (Postgres)
        "body": jsonutil.dumps(record_of(item)) if record_json is None else record_json,
        "format": item.format,
        "search_text": _no_nul("\n".join(item_texts(body))),
    }


def _no_nul(text: str) -> str:
    """``text`` for a Postgres text column, which cannot hold a NUL: each one becomes a space
    (a word boundary to full-text search, as the NUL was to the reader)."""
    return text.replace("\x00", " ") if "\x00" in text else text


def pair_value(item: NewItem | StoredItem) -> str | None:
    """The pairing key as stored (its first 256 characters, NULs made spaces): a query
    column; pairing itself is decided on the bodies."""
    key = pair_key(item.body)
    return None if key is None else _no_nul(key[:256])


def item_row(tenant_id: str, session_id: str, item: StoredItem) -> dict[str, Any]:
    return {
        "tenant_id": tenant_id,
        "session_id": session_id,
        "seq": item.seq,
        "item_id": item.id,
        **body_columns(item),
        "tokens": item.tokens,
        "chars": item.chars,
        "pinned": item.pinned,
        "metadata": item.metadata,
        "archived": False,
        "created_at": item.created_at,
    }


class ItemRepository:
    def __init__(self, db: AsyncConnection) -> None:
        self.db = db

    def _session(self, tenant_id: str, session_id: str) -> sa.ColumnElement[bool]:
        return sa.and_(t.c.tenant_id == tenant_id, t.c.session_id == session_id)

    def _live(self, tenant_id: str, session_id: str) -> sa.ColumnElement[bool]:
        return sa.and_(self._session(tenant_id, session_id), sa.not_(t.c.archived))

    async def insert(self, tenant_id: str, session_id: str, batch: Sequence[StoredItem]) -> None:
        """One INSERT round trip for the whole batch; duplicate live ids raise DuplicateItemId."""
        if not batch:
            return
        rows = [item_row(tenant_id, session_id, item) for item in batch]
        try:
            # No savepoint: a failure aborts the whole write, which is what we want.
            await self.db.execute(sa.insert(t), rows)
        except IntegrityError as exc:
            raise DuplicateItemId("an item id in the batch is already in working memory") from exc

    async def list_live(
        self, tenant_id: str, session_id: str, *, after_seq: int | None, limit: int
    ) -> list[StoredItem]:
        stmt = sa.select(*ITEM_COLUMNS).where(self._live(tenant_id, session_id))
        if after_seq is not None:
            stmt = stmt.where(t.c.seq > after_seq)
        stmt = stmt.order_by(t.c.seq).limit(limit)
        return [item_of_row(r) for r in (await self.db.execute(stmt)).all()]

    async def last_live(self, tenant_id: str, session_id: str, *, count: int) -> list[StoredItem]:
        """The newest ``count`` items of working memory, oldest first."""
        stmt = (
            sa.select(*ITEM_COLUMNS)
            .where(self._live(tenant_id, session_id))
            .order_by(t.c.seq.desc())
            .limit(count)
        )
        rows = (await self.db.execute(stmt)).all()
        return [item_of_row(r) for r in reversed(rows)]

    async def live_from_seq(
        self, tenant_id: str, session_id: str, *, from_seq: int
    ) -> list[StoredItem]:
        stmt = (
            sa.select(*ITEM_COLUMNS)
            .where(self._live(tenant_id, session_id), t.c.seq >= from_seq)
            .order_by(t.c.seq)
        )
        return [item_of_row(r) for r in (await self.db.execute(stmt)).all()]

    async def get_live(self, tenant_id: str, session_id: str, item_id: str) -> StoredItem | None:
        stmt = sa.select(*ITEM_COLUMNS).where(
            self._live(tenant_id, session_id), t.c.item_id == item_id
        )
        row = (await self.db.execute(stmt)).first()
        return item_of_row(row) if row else None

    async def history(
        self, tenant_id: str, session_id: str, *, after_seq: int | None, limit: int
    ) -> list[tuple[StoredItem, bool, str | None]]:
        stmt = sa.select(*ITEM_COLUMNS, t.c.archived, t.c.archived_reason).where(
            self._session(tenant_id, session_id)
        )
        if after_seq is not None:
            stmt = stmt.where(t.c.seq > after_seq)
        stmt = stmt.order_by(t.c.seq).limit(limit)
        return [
            (item_of_row(r), r._mapping["archived"], r._mapping["archived_reason"])
            for r in (await self.db.execute(stmt)).all()
        ]

    async def archive(
        self,
        tenant_id: str,
        session_id: str,
        *,
        reason: str,
        first_seq: int | None = None,
        last_seq: int | None = None,
        seqs: Sequence[int] | None = None,
    ) -> int:
        """Move live items out of working memory (they stay in the archive)."""
        stmt = sa.update(t).where(self._live(tenant_id, session_id))
        if first_seq is not None:
            stmt = stmt.where(t.c.seq >= first_seq)
        if last_seq is not None:
            stmt = stmt.where(t.c.seq <= last_seq)
        if seqs is not None:
            stmt = stmt.where(t.c.seq.in_(list(seqs)))
        result = await self.db.execute(stmt.values(archived=True, archived_reason=reason))
        return int(result.rowcount or 0)
