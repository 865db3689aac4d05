"""The floor: the cheapest service doing the same I/O as ours, for bench/harness.py.

A bare FastAPI app with three routes and nothing else (no middleware, no validation, no
locks, no logging), each one statement on the same Postgres through a small per-worker pool of
psycopg async connections in autocommit mode (one round trip per request):

- ``POST /insert/{session_id}``: one INSERT of the raw request body into ``floor_items``;
- ``GET /select/{tenant_id}/{session_id}?limit=N``: one indexed SELECT of the newest N live
  rows of the service's own ``items`` table (the rows a context read returns), aggregated into
  a JSON array by Postgres;
- ``GET /select-one/{tenant_id}/{session_id}?seq=N``: one primary-key SELECT of one row;
- ``POST /append/{tenant_id}/{session_id}`` (when ``FLOOR_APPEND_SQL`` is set): the service's
  own append statement (DESIGN §6: the fenced session-row update, the item with its search
  text, the ``appended`` event, one statement in autocommit) for the first item of a request
  body shaped like the service's, with the item's JSON as sent, its text as the search text
  and a length-based token count. What the design's statement costs with nothing of the
  service around it: no validation, no tokenizer, no auth, no logging.

    FLOOR_PG=postgresql://postgres@127.0.0.1:5432/db \\
    uvicorn bench.floor_app:create_app --factory --workers 2
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime

import psycopg
from fastapi import FastAPI, Request
from fastapi.responses import Response

POOL_SIZE = 10

CREATE_TABLE = """
CREATE TABLE IF NOT EXISTS floor_items (
    id bigserial PRIMARY KEY,
    session_id text NOT NULL,
    body jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS ix_floor_items_session ON floor_items (session_id, id);
"""
INSERT = "INSERT INTO floor_items (session_id, body) VALUES (%s, %s) RETURNING id"
SELECT_NEWEST = (
    "SELECT coalesce(json_agg(body ORDER BY seq), '[]')::text FROM ("
    "SELECT seq, body FROM items WHERE tenant_id = %s AND session_id = %s AND NOT archived "
    "ORDER BY seq DESC LIMIT %s) newest"
)
SELECT_ONE = "SELECT body::text FROM items WHERE tenant_id = %s AND session_id = %s AND seq = %s"


class Pool:
    """A fixed set of autocommit connections handed out through a queue."""

    def __init__(self, conninfo: str, size: int) -> None:
        self.conninfo = conninfo
        self.size = size
        self.free: asyncio.Queue[psycopg.AsyncConnection] = asyncio.Queue()

    async def open(self) -> None:
        for _ in range(self.size):
            conn = await psycopg.AsyncConnection.connect(self.conninfo, autocommit=True)
            self.free.put_nowait(conn)

    async def close(self) -> None:
        while not self.free.empty():
            await self.free.get_nowait().close()

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[psycopg.AsyncConnection]:
        conn = await self.free.get()
        try:
            yield conn
        finally:
            self.free.put_nowait(conn)


def create_app() -> FastAPI:
    pool = Pool(os.environ["FLOOR_PG"], POOL_SIZE)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        await pool.open()
        yield
        await pool.close()

    app = FastAPI(lifespan=lifespan, openapi_url=None, docs_url=None, redoc_url=None)

    @app.post("/insert/{session_id}")
    async def insert(session_id: str, request: Request) -> Response:
        body = await request.body()
        async with pool.connection() as conn:
            cur = await conn.execute(INSERT, (session_id, body.decode()))
            row = await cur.fetchone()
        assert row is not None
        return Response(b'{"id":%d}' % row[0], status_code=201, media_type="application/json")

    @app.get("/select/{tenant_id}/{session_id}")
    async def select(tenant_id: str, session_id: str, limit: int = 100) -> Response:
        async with pool.connection() as conn:
            cur = await conn.execute(SELECT_NEWEST, (tenant_id, session_id, limit))
            row = await cur.fetchone()
        assert row is not None
        return Response(row[0], media_type="application/json")

    @app.get("/select-one/{tenant_id}/{session_id}")
    async def select_one(tenant_id: str, session_id: str, seq: int = 1) -> Response:
        async with pool.connection() as conn:
            cur = await conn.execute(SELECT_ONE, (tenant_id, session_id, seq))
            row = await cur.fetchone()
        return Response(row[0] if row else "null", media_type="application/json")

    append_sql = os.environ.get("FLOOR_APPEND_SQL")
    if append_sql:

        @app.post("/append/{tenant_id}/{session_id}")
        async def append(tenant_id: str, session_id: str, request: Request) -> Response:
            item = json.loads(await request.body())["items"][0]
            text = item["content"]
            row = {
                "ord": 1,
                "item_id": uuid.uuid4().hex,
                "type": item["type"],
                "role": item["role"],
                "call_id": None,
                "body": json.dumps(item),
                "format": "canonical",
                "tokens": len(text) // 4,
                "chars": len(text),
                "pinned": False,
                "metadata": {},
                "search_text": text,
            }
            params = {
                "tenant_id": tenant_id,
                "session_id": session_id,
                # the service's tenant tombstone key (app.domain.retention.tenant_digest)
                "tenant_digest": hashlib.sha256(
                    f"{len(tenant_id)}:{tenant_id}:{tenant_id}".encode()
                ).hexdigest(),
                "n": 1,
                "tokens": row["tokens"],
                "chars": row["chars"],
                "now": datetime.now(UTC),
                "expected": None,
                "rows": json.dumps([row]),
                "request_id": row["item_id"],
                "actor": "floor",
            }
            async with pool.connection() as conn:
                cur = await conn.execute(append_sql, params)
                found = await cur.fetchone()
            assert found is not None
            return Response(
                b'{"version":%d}' % found[2], status_code=201, media_type="application/json"
            )

    return app
