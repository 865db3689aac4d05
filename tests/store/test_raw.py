"""Hot reads run on the psycopg connection itself on Postgres (app/store/raw.py): they must
return exactly what the same statements return through SQLAlchemy."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from app.domain.sessions import SessionState
from app.main import create_app
from app.settings import Settings
from app.store import context as ctx
from app.store.db import Store
from app.store.items import item_of_row
from app.store.sessions import _GET, SESSION_COLUMNS
from tests.support.services import REDIS_URL
from tests.support.spec_check import ASYNC_HOOKS


def test_session_columns_are_in_session_state_order() -> None:
    assert [c.name for c in SESSION_COLUMNS] == [f.name for f in dataclasses.fields(SessionState)]


@pytest.fixture
async def filled(pg_database: str) -> AsyncIterator[Store]:
    app = create_app(Settings(database_url=pg_database, redis_url=REDIS_URL))  # type: ignore[call-arg]
    async with app.router.lifespan_context(app):
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app),
            base_url="http://localhost",
            event_hooks=ASYNC_HOOKS,
        ) as c:
            assert (
                await c.post("/v1/sessions", json={"id": "raw-1", "metadata": {"b": 1, "a": [2]}})
            ).status_code == 201
            items: list[dict[str, Any]] = [{"type": "message", "role": "system", "content": "sys"}]
            for i in range(30):
                items += [
                    {
                        "type": "message",
                        "role": "user",
                        "content": f"q{i}",
                        "pinned": i == 3,
                        "metadata": {"z": i, "a": {"n": None}},
                    },
                    {"type": "function_call", "call_id": f"c{i}", "name": "f", "arguments": "{}"},
                    {"type": "function_call_output", "call_id": f"c{i}", "output": "x" * i},
                ]
            r = await c.post("/v1/sessions/raw-1/items", json={"items": items})
            assert r.status_code == 201, r.text
    store = Store.from_url(pg_database)
    yield store
    await store.dispose()


async def test_raw_rows_equal_sqlalchemy_rows(filled: Store) -> None:
    scope = {"tenant_id": "default", "session_id": "raw-1"}
    cases: list[tuple[Any, dict[str, Any]]] = [
        (_GET, scope),
        (ctx._VERSION, scope),
        (ctx._BODIES, {**scope, "seqs": [1, 2, 5, 90, 91]}),
        (ctx._ANY_BODIES, {**scope, "seqs": [3, 4, 1000]}),
    ]
    for system in (False, True):
        for prefix in (False, True):
            for bounded in (False, True):
                batch = ctx.RawQuery(
                    ctx._batch_statement(
                        include_system=system, with_prefix=prefix, rows=32, bounded=bounded
                    )
                )
                cases.append((batch, {**scope, "prefix_items": 2, "before_seq": 70}))
    async with filled.read() as db:
        for query, params in cases:
            raw = [tuple(r) for r in await query.rows(db, params)]
            sa_params = {k: v for k, v in params.items() if f"%({k})s" in query.sql(db)}
            via_sa = [tuple(r) for r in (await db.execute(query.statement, sa_params)).all()]
            assert raw and raw == via_sa, query.sql(db)[:80]
            for row in raw:  # timestamps in UTC, as UTCDateTime gives them
                assert all(
                    v.utcoffset().total_seconds() == 0 for v in row if hasattr(v, "utcoffset")
                )


def drop_connections(pg_database: str) -> int:
    """Terminate every other connection to the test database (what a Postgres restart or a
    failover does to a pool); how many there were."""
    import psycopg

    dbname = pg_database.rsplit("/", 1)[1]
    with psycopg.connect(pg_database.replace("+psycopg", ""), autocommit=True) as admin:
        killed = admin.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = %s AND pid <> pg_backend_pid()",
            (dbname,),
        ).fetchone()
    return int(killed[0]) if killed else 0


async def test_a_dropped_connection_is_a_503_then_reads_recover(pg_database: str) -> None:
    """The raw path must fail like the SQLAlchemy path: a connection Postgres dropped gives
    a retryable 503 problem (not a 500), and the next read runs on a fresh connection."""
    app = create_app(Settings(database_url=pg_database, redis_url=REDIS_URL))  # type: ignore[call-arg]
    async with app.router.lifespan_context(app):
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app),
            base_url="http://localhost",
            event_hooks=ASYNC_HOOKS,
        ) as c:
            assert (await c.post("/v1/sessions", json={"id": "raw-drop"})).status_code == 201
            assert (await c.get("/v1/sessions/raw-drop/context")).status_code == 200
            assert drop_connections(pg_database) >= 1
            statuses = []
            for _ in range(3):
                r = await c.get("/v1/sessions/raw-drop/context", params={"max_items": 5})
                statuses.append(r.status_code)
                if r.status_code == 503:
                    assert r.headers["content-type"].startswith("application/problem+json")
                    assert r.json()["type"].endswith("/database-unavailable")
                    assert "retry-after" in r.headers
            assert statuses[0] == 503 and statuses[-1] == 200, statuses


async def test_a_dropped_connection_fails_one_append_with_a_503_then_appends_recover(
    pg_database: str,
) -> None:
    """The append's one statement runs on a pooled driver connection (Store.statements):
    a connection Postgres dropped must give the same retryable 503, store nothing, and leave
    the pool able to serve the next append."""
    app = create_app(Settings(database_url=pg_database, redis_url=REDIS_URL))  # type: ignore[call-arg]
    body = {"items": [{"type": "message", "role": "user", "content": "hi"}]}
    async with app.router.lifespan_context(app):
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app),
            base_url="http://localhost",
            event_hooks=ASYNC_HOOKS,
        ) as c:
            assert (await c.post("/v1/sessions", json={"id": "raw-drop-append"})).status_code == 201
            assert (
                await c.post("/v1/sessions/raw-drop-append/items", json=body)
            ).status_code == 201
            assert drop_connections(pg_database) >= 1
            statuses = []
            for _ in range(3):
                r = await c.post("/v1/sessions/raw-drop-append/items", json=body)
                statuses.append(r.status_code)
                if r.status_code == 503:
                    assert r.json()["type"].endswith("/database-unavailable")
                    assert "retry-after" in r.headers
            assert statuses[0] == 503 and statuses[-1] == 201, statuses
            session = (await c.get("/v1/sessions/raw-drop-append")).json()
            assert session["item_count"] == 1 + statuses.count(201)


async def test_aggregated_bodies_decode_as_the_rows_do(pg_database: str) -> None:
    """A context read that misses the item cache reads bodies as one JSON text built by
    Postgres (``items.aggregate_sql``): every item must decode exactly as its own row does,
    whatever it holds (integers beyond 64 bits, 1.5e308, -0, NUL, non-ASCII, provider records,
    untyped objects), with the same timestamp to the microsecond."""
    big = 123456789012345678901234567890
    app = create_app(Settings(database_url=pg_database, redis_url=REDIS_URL))  # type: ignore[call-arg]
    batches: list[tuple[str | None, list[dict[str, Any]]]] = [
        (
            None,
            [
                {
                    "type": "message",
                    "role": "user",
                    "content": "naïve ☃ \u0000 nul",
                    "pinned": True,
                    "metadata": {
                        "big": big,
                        "huge": 1.5e308,
                        "neg_zero": -0.0,
                        "nested": [None, True],
                    },
                },
                {"type": "function_call", "call_id": "c1", "name": "f", "arguments": '{"n": 1}'},
                {
                    "type": "function_call_output",
                    "call_id": "c1",
                    "output": [{"type": "text", "text": "ok"}],
                },
                {"type": "web_search_call", "id": "ws_1", "status": "completed", "n": big},
                {"anything": "goes", "deep": {"x": [1, 2.5, "\u0000"]}},
                {"type": "reasoning", "summary": ["s"], "content": "thinking"},
            ],
        ),
        (
            "openai-responses",
            [
                {"role": "user", "content": [{"type": "input_text", "text": "hi 😀"}]},
                {
                    "type": "function_call",
                    "call_id": "c2",
                    "name": "g",
                    "arguments": "{}",
                    "id": "fc_1",
                },
                {"type": "function_call_output", "call_id": "c2", "output": "done"},
            ],
        ),
        (
            "anthropic",
            [
                {
                    "role": "user",
                    "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
                },
                {"role": "assistant", "content": "plain"},
            ],
        ),
        ("openai-chat", [{"role": "user", "content": "chat"}]),
        ("gemini", [{"role": "user", "parts": [{"text": "gem"}]}]),
    ]
    async with app.router.lifespan_context(app):
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://localhost"
        ) as c:
            for fmt, items in batches:
                body: dict[str, Any] = {"items": items}
                if fmt is not None:
                    body["format"] = fmt
                r = await c.post("/v1/sessions/agg-1/items?create=true", json=body)
                assert r.status_code == 201, r.text
    store = Store.from_url(pg_database)
    try:
        async with store.read() as db:
            seq_rows = await db.execute(
                ctx.sa.text(
                    "SELECT seq, created_at FROM items WHERE session_id = 'agg-1' ORDER BY seq"
                )
            )
            found = seq_rows.all()
            seqs = [row[0] for row in found]
            assert len(seqs) >= 13
            scope = {"tenant_id": "default", "session_id": "agg-1", "seqs": seqs}
            rows = await ctx._ANY_BODIES.rows(db, scope)
            by_row = {item.seq: item for item in map(item_of_row, rows)}
            for live_only in (False, True):
                created = (
                    await db.execute(
                        ctx.sa.text("SELECT created_at FROM sessions WHERE id = 'agg-1'")
                    )
                ).scalar_one()
                repo = ctx.ContextRepository(db, "default", "agg-1", session_created_at=created)
                aggregated = await repo.items([*reversed(seqs), 10_000], live_only=live_only)
                assert [i.seq for i in aggregated] == list(reversed(seqs))
                for item in aggregated:
                    assert item == by_row[item.seq]
                    assert item.created_at == by_row[item.seq].created_at
                    assert item.created_at.utcoffset().total_seconds() == 0
            # the values that JSON parsers most often change came back as stored
            first = by_row[seqs[0]]
            assert first.metadata["big"] == big and isinstance(first.metadata["big"], int)
            assert first.pinned is True and "\u0000" in first.body.content  # type: ignore[union-attr]
            assert (
                await ctx.ContextRepository(
                    db, "default", "agg-1", session_created_at=created
                ).items([10_000])
                == []
            )
    finally:
        await store.dispose()


async def test_the_session_row_with_a_first_batch_equals_the_two_statements(
    pg_database: str,
) -> None:
    """A read that knows its first batch asks for the session row and that batch in one
    statement (the row as one JSON array): the state and the batch are exactly what
    ``SessionRepository.get`` and ``ContextRepository.batch`` give."""
    from app.store.sessions import SessionRepository

    big = 123456789012345678901234567890
    app = create_app(Settings(database_url=pg_database, redis_url=REDIS_URL))  # type: ignore[call-arg]
    async with app.router.lifespan_context(app):
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://localhost"
        ) as c:
            r = await c.post("/v1/sessions", json={
                "id": "with-batch", "metadata": {"big": big, "f": 1.5e308, "z": -0.0, "s": 'a"b\\\\c ☃'},
                "config": {"ttl_seconds": 3600, "context": {"keep_system": True, "max_tokens": 500}},
            })  # fmt: skip
            assert r.status_code == 201, r.text
            items: list[dict[str, Any]] = [{"type": "message", "role": "system", "content": "sys"}]
            items += [user_item(f"q{i}", pinned=i % 7 == 0) for i in range(40)]
            assert (
                await c.post("/v1/sessions/with-batch/items", json={"items": items})
            ).status_code == 201
            r = await c.post(
                "/v1/sessions/with-batch/compact", json={"policy": "window", "keep_last_items": 30}
            )
            assert r.status_code in (200, 201), r.text
            assert (await c.post("/v1/sessions", json={"id": "empty-batch"})).status_code == 201
    store = Store.from_url(pg_database)
    try:
        async with store.statements() as db:
            for sid in ("with-batch", "empty-batch", "missing"):
                expected = await SessionRepository(db).get("default", sid)
                for system in (False, True):
                    for prefix in (0, 3):
                        for limit in (5, 40, 100):
                            first = ctx.FirstBatch(system, prefix, limit)
                            state, batch = await ctx.session_with_batch(db, "default", sid, first)
                            assert state == expected
                            if expected is None:
                                continue
                            assert state.last_compaction == expected.last_compaction
                            assert state.metadata == expected.metadata
                            if sid == "with-batch":
                                assert state.metadata["big"] == big and state.expires_at is not None
                            repo = ctx.ContextRepository(
                                db, "default", sid, session_created_at=expected.created_at
                            )
                            alone = await repo.batch(
                                limit=limit, include_system=system, prefix_items=prefix
                            )
                            assert batch == alone
                            assert batch.session_version == expected.version
    finally:
        await store.dispose()


def user_item(text: str, *, pinned: bool) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": text, "pinned": pinned}
