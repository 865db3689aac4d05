"""Erasure is complete: after a session is deleted, expires and is swept, or its tenant is
erased, no row of any table mentions its id or its text. The tables are read from the live
schema (not listed here), so a table added later is walked too; on SQLite that includes the
FTS5 search index's own tables.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from app.domain.errors import SessionNotFound
from app.domain.retention import RetentionDefaults
from app.main import create_app
from app.services import keys as key_service
from app.services import retention
from app.services.access import fail_write
from app.services.runtime import Actor, Runtime, utcnow
from app.settings import Settings
from app.store.retention import RetentionRepository
from app.store.sessions import Counters, SessionRepository
from app.store.vectors import VectorRepository
from tests.support.services import REDIS_URL, create_pg_database, drop_pg_database
from tests.support.spec_check import ASYNC_HOOKS

BOOTSTRAP = "erasure-bootstrap-key-" + "y" * 24


@dataclass
class World:
    client: httpx.AsyncClient
    rt: Runtime


@pytest.fixture(scope="module")
async def world(backend: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[World]:
    if backend == "sqlite":
        from app.store.migrate import upgrade

        path: Path = tmp_path_factory.mktemp("erasure") / "erasure.db"
        url, name, redis_url = f"sqlite+aiosqlite:///{path}", None, None
        upgrade(url)
    else:
        (url, name), redis_url = create_pg_database(), REDIS_URL
    settings = Settings(
        database_url=url,
        redis_url=redis_url,
        auth={"mode": "on", "bootstrap_key": BOOTSTRAP, "bootstrap_tenant": "boot-erasure"},  # type: ignore[arg-type]
        retention={"sweep_enabled": False},  # type: ignore[arg-type]
    )
    app = create_app(settings)
    try:
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
            async with httpx.AsyncClient(transport=transport, base_url="http://localhost", event_hooks=ASYNC_HOOKS) as client:
                yield World(client, app.state.runtime)
    finally:
        if name is not None:
            drop_pg_database(name)


async def all_rows_text(db: AsyncConnection) -> dict[str, list[str]]:
    """Every row of every table of the schema, as text (bytes decoded both ways)."""

    def tables(sync_conn: Any) -> list[str]:
        return sorted(sa.inspect(sync_conn).get_table_names())

    out: dict[str, list[str]] = {}
    for table in await db.run_sync(tables):
        quoted = db.dialect.identifier_preparer.quote(table)
        if db.dialect.name == "postgresql":
            rows = (await db.execute(sa.text(f"SELECT t::text FROM {quoted} AS t"))).all()
            out[table] = [str(r[0]) for r in rows]
            continue
        rows = (await db.execute(sa.text(f"SELECT * FROM {quoted}"))).all()
        texts = []
        for row in rows:
            parts = []
            for value in row:
                if isinstance(value, bytes | bytearray | memoryview):
                    raw = bytes(value)
                    parts += [raw.decode("utf-8", "ignore"), raw.decode("latin-1")]
                else:
                    parts.append(str(value))
            texts.append("\x00".join(parts))
        out[table] = texts
    return out


async def mentions(world: World, *needles: str) -> dict[str, list[str]]:
    """The tables with a row mentioning a needle (case-insensitive: the index lowercases)."""
    async with world.rt.store.read() as db:
        rows = await all_rows_text(db)
    found: dict[str, list[str]] = {}
    for table, texts in rows.items():
        for needle in needles:
            if any(needle.lower() in text.lower() for text in texts):
                found.setdefault(table, []).append(needle)
    return found


async def fill(c: httpx.AsyncClient, auth: dict[str, str], session_id: str, word: str) -> None:
    """A session that has been through everything that stores data: items in three formats
    under Idempotency-Keys, a tool call, a compaction, snapshots, a restore (its automatic
    snapshot), pop, clear, summary and metadata, search."""
    base = f"/v1/sessions/{session_id}"

    async def ok(method: str, path: str, **kwargs: Any) -> httpx.Response:
        headers = auth | kwargs.pop("headers", {})
        r = await c.request(method, path, headers=headers, **kwargs)
        assert r.status_code < 300, (path, r.text)
        return r

    await ok(
        "POST",
        "/v1/sessions",
        json={"id": session_id, "metadata": {"note": word}, "config": {"ttl_seconds": 3600}},
        headers={"Idempotency-Key": f"create-{word}"},
    )
    for n in range(3):
        await ok(
            "POST",
            f"{base}/items",
            headers={"Idempotency-Key": f"{word}-{n}"},
            json={"items": [{"type": "message", "role": "user", "content": f"{word} turn {n}"}]},
        )
    await ok(
        "POST",
        f"{base}/items",
        json={
            "format": "openai-chat",
            "items": [
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "lookup", "arguments": f'{{"q": "{word}"}}'},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "call_1", "content": f"{word} found"},
            ],
        },
    )
    await ok(
        "POST",
        f"{base}/compact",
        json={"policy": "structured", "keep_last_items": 2},
        headers={"Idempotency-Key": f"compact-{word}"},
    )
    snap = (await ok("POST", f"{base}/snapshots", json={"label": f"label {word}"})).json()
    await ok(
        "POST",
        f"{base}/items",
        json={"items": [{"type": "message", "role": "assistant", "content": f"{word} later"}]},
    )
    await ok("POST", f"{base}/restore", json={"snapshot_id": snap["id"]})
    await ok("POST", f"{base}/items/pop")
    await ok("PATCH", base, json={"summary": f"summary of {word}"})
    await ok("GET", f"{base}/search", params={"q": word, "scope": "history"})
    await ok("DELETE", f"{base}/items")
    await ok(
        "POST",
        f"{base}/items",
        json={"items": [{"type": "message", "role": "user", "content": f"{word} after clear"}]},
    )


async def index_everything(world: World) -> None:
    """What the indexer does, for every item without a vector: a (made-up) vector stored."""
    async with world.rt.store.write() as db:
        repo = VectorRepository(db)
        pending = await repo.claim_pending("erasure-test-model", limit=10_000)
        assert pending
        await repo.store(
            "erasure-test-model", [(p, [0.5, -0.25, 1.0]) for p in pending], now=utcnow()
        )


async def _tenant(world: World) -> tuple[str, dict[str, str]]:
    tenant_id = f"te-{uuid.uuid4().hex[:10]}"
    created = await key_service.insert_key(
        world.rt.store,
        tenant_id=tenant_id,
        command=key_service.KeyCreateCommand(
            name="eraser", scopes=frozenset({"read", "write", "admin"}), session_prefix=None
        ),
    )
    return tenant_id, {"Authorization": f"Bearer {created.secret}"}


@pytest.mark.parametrize("how", ["delete", "expire", "tenant"])
async def test_no_row_of_any_table_mentions_an_erased_session(world: World, how: str) -> None:
    tenant_id, auth = await _tenant(world)
    tag = uuid.uuid4().hex[:8]
    doomed, word = f"erase-me-{tag}", f"qzx{tag}doomed"
    kept, kept_word = f"keep-me-{tag}", f"qzx{tag}kept"
    if how == "tenant":  # the control lives in another tenant, which stays
        _, kept_auth = await _tenant(world)
    else:
        kept_auth = auth
    await fill(world.client, auth, doomed, word)
    await fill(world.client, kept_auth, kept, kept_word)
    await index_everything(world)

    # the walk sees both before: it would find what an erasure left behind
    before = await mentions(world, doomed, word, kept, kept_word)
    for needle in (doomed, word):
        assert {t for t, n in before.items() if needle in n} >= {
            "sessions",
            "items",
            "events",
            "snapshots",
            "idempotency_keys",
            *(("item_vectors",) if needle == doomed else ()),
        }, before

    if how == "delete":
        r = await world.client.delete(f"/v1/sessions/{doomed}", headers=auth)
        assert r.status_code == 204, r.text
    elif how == "expire":
        r = await world.client.patch(
            f"/v1/sessions/{doomed}", headers=auth, json={"config": {"ttl_seconds": 1}}
        )
        assert r.status_code == 200, r.text
        await asyncio.sleep(1.2)
        report = await retention.run_sweep(world.rt, claim=False)
        assert report.sessions_expired == 1
    else:
        r = await world.client.delete(f"/v1/admin/tenants/{tenant_id}", headers=auth)
        assert r.status_code == 200, r.text
        assert r.json()["sessions"] == 1

    after = await mentions(world, doomed, word, kept, kept_word)
    left = {t: [n for n in needles if n in (doomed, word)] for t, needles in after.items()}
    assert not any(left.values()), f"erased data left in {left}"
    # the control is intact, and the audit trail holds a digest, not the id
    assert {t for t, n in after.items() if kept in n} >= {
        "sessions",
        "items",
        "events",
        "item_vectors",
    }
    async with world.rt.store.read() as db:
        count = (await db.execute(sa.text("SELECT count(*) FROM erasures"))).scalar()
    assert count and count >= 1
    if how == "tenant":  # the tenant's own id goes too (the keys named it)
        assert not (await mentions(world, tenant_id))


async def test_an_erased_sessions_search_terms_are_gone_from_the_index(world: World) -> None:
    _, auth = await _tenant(world)
    tag = uuid.uuid4().hex[:8]
    session_id, word = f"idx-{tag}", f"qzx{tag}indexed"
    await fill(world.client, auth, session_id, word)
    r = await world.client.get("/v1/search", headers=auth, params={"q": word, "scope": "history"})
    assert r.json()["items"], r.text
    assert (
        await world.client.delete(f"/v1/sessions/{session_id}", headers=auth)
    ).status_code == 204
    r = await world.client.get("/v1/search", headers=auth, params={"q": word, "scope": "history"})
    assert r.status_code == 200 and r.json()["items"] == []
    if world.rt.store.is_sqlite:  # the FTS5 index itself, not only the rows it points to
        async with world.rt.store.read() as db:
            hits = await db.execute(
                sa.text("SELECT count(*) FROM items_fts WHERE items_fts MATCH :w"), {"w": word}
            )
            assert hits.scalar() == 0


def test_the_cli_erases_a_tenant(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`session-memory tenants erase` (the operator's way, any tenant), beside the endpoint."""
    import json

    from app import cli
    from app.locks import LocalLocks
    from app.services.runtime import Actor, Encoded
    from app.services.sessions import SessionCreateCommand, create_session
    from app.settings import get_settings
    from app.store.db import Store

    url = f"sqlite+aiosqlite:///{tmp_path / 'cli.db'}"
    monkeypatch.setenv("DATABASE_URL", url)
    get_settings.cache_clear()
    try:
        assert cli.main(["migrate"]) == 0

        async def seed() -> None:
            store = Store.from_url(url)
            rt = Runtime(settings=get_settings(), store=store, locks=LocalLocks(wait_seconds=1))
            try:
                await key_service.insert_key(
                    store,
                    tenant_id="cli-t",
                    command=key_service.KeyCreateCommand(
                        name="k", scopes=frozenset({"read"}), session_prefix=None
                    ),
                )
                for n in range(2):
                    await create_session(
                        rt,
                        Actor(tenant_id="cli-t"),
                        SessionCreateCommand(
                            id=f"s{n}", metadata={}, config={}, summary="cli data"
                        ),
                        encode=lambda s: Encoded(201, ""),
                    )
            finally:
                await store.dispose()

        asyncio.run(seed())
        capsys.readouterr()
        assert cli.main(["tenants", "erase", "cli-t"]) == cli.EXIT_ERROR  # not without --yes
        assert "--yes" in capsys.readouterr().err
        assert cli.main(["tenants", "storage", "cli-t"]) == 0
        assert json.loads(capsys.readouterr().out)["storage"]["sessions"] == 2
        assert cli.main(["tenants", "erase", "cli-t", "--yes"]) == 0
        erased = json.loads(capsys.readouterr().out)
        assert erased["sessions"] == 2 and erased["row_counts"]["api_keys"] == 1
        assert cli.main(["tenants", "erase", "cli-t", "--yes"]) == cli.EXIT_ERROR  # nothing left
        assert cli.main(["sweep"]) == 0
        assert json.loads(capsys.readouterr().out)["sessions_expired"] == 0
    finally:
        get_settings.cache_clear()


# -- what fences writes off an erasure, and the sweep's decisions under the row lock --------
# On both backends (the system tests in tests/system/test_erasure_races.py drive the same races
# through real processes).
#
# - Once the sweep's first batch committed, a session takes no write even from a writer that
#   judged it live: a Postgres transaction that began before the expiry (its clock is the
#   transaction's start), a SQLite write holding a clock reading from before it.
# - The sweep applies a changed server TTL only to a session without a TTL of its own, decided
#   from the row it locked, not from the page it read before.
# - A write without ``If-Match`` whose session was deleted and created again meanwhile is a 404,
#   not a 412 about a version nobody asked for.
# - A delete on SQLite leaves the search index's text to the background merge; after it the
#   erased text is gone from the index's own pages.


async def _session(world: World, auth: dict[str, str], *, items: int, **config: object) -> str:
    sid = f"fence-{uuid.uuid4().hex[:8]}"
    r = await world.client.post("/v1/sessions", headers=auth, json={"id": sid, "config": config})
    assert r.status_code == 201, r.text
    batch = [{"type": "message", "role": "user", "content": f"turn {n}"} for n in range(items)]
    r = await world.client.post(f"/v1/sessions/{sid}/items", headers=auth, json={"items": batch})
    assert r.status_code == 201, r.text
    return sid


async def test_a_writer_that_judged_the_session_live_cannot_write_once_its_erasure_began(
    world: World,
) -> None:
    tenant, auth = await _tenant(world)
    sid = await _session(world, auth, items=30, ttl_seconds=1)
    stale_now = utcnow()  # read while the session was live
    early = None
    if not world.rt.store.is_sqlite:  # a transaction that began while the session was live
        early = world.rt.store.write()
        db = await early.__aenter__()
        await db.execute(sa.text("SELECT 1"))
    try:
        await asyncio.sleep(1.5)
        async with world.rt.store.write() as sweep:  # the sweep's first batch, committed
            repo = RetentionRepository(sweep)
            expired = await repo.lock_expired(now=utcnow(), limit=50)
            assert (tenant, sid) in expired
            await repo.mark_erasing(expired)
            _, complete = await repo.erase_sessions(expired, limit=10)
            assert not complete
        if early is None:
            async with world.rt.store.write() as db:
                bumped = await SessionRepository(db).bump(
                    tenant, sid, counters=Counters(), now=stale_now
                )
        else:
            bumped = await SessionRepository(db).bump(
                tenant, sid, counters=Counters(), now=stale_now
            )
        assert bumped is None  # the fence refused it: nothing lands on a half-erased session
    finally:
        if early is not None:
            await early.__aexit__(None, None, None)
    r = await world.client.get(f"/v1/sessions/{sid}", headers=auth)
    assert r.status_code == 404
    report = await retention.run_sweep(world.rt, claim=False)
    assert report.sessions_expired >= 1
    async with world.rt.store.read() as db:
        left = await db.execute(
            sa.text("SELECT count(*) FROM items WHERE tenant_id = :t AND session_id = :s"),
            {"t": tenant, "s": sid},
        )
        assert left.scalar() == 0


async def test_the_sweep_decides_a_default_ttl_from_the_row_it_locked(world: World) -> None:
    tenant, auth = await _tenant(world)
    sid = await _session(world, auth, items=1)
    r = await world.client.patch(
        f"/v1/sessions/{sid}", headers=auth, json={"config": {"ttl_seconds": 5000}}
    )
    assert r.status_code == 200, r.text
    async with world.rt.store.read() as db:
        row = await RetentionRepository(db).lock_session(tenant, sid)
    assert row is not None and row.ttl_seconds == 5000
    # the page the sweep read before the PATCH: no TTL of its own, the old default's 5000
    stale = type(row)(row.tenant_id, row.id, {}, 5000, row.updated_at, row.expires_at)
    defaults = RetentionDefaults(session_ttl_seconds=7000)
    await retention._review_one(world.rt, stale, defaults, retention.SweepReport())
    async with world.rt.store.read() as db:
        state = await SessionRepository(db).get(tenant, sid)
    assert state is not None and state.ttl_seconds == 5000  # its own TTL stands


async def test_a_write_without_if_match_on_a_recreated_session_is_not_found(
    world: World,
) -> None:
    tenant, auth = await _tenant(world)
    sid = await _session(world, auth, items=1)
    actor = Actor(tenant_id=tenant)
    # the fenced update matched nothing (the session was deleted), and by the time the write
    # explains why, a session by that id exists again
    async with world.rt.store.write() as db:
        with pytest.raises(SessionNotFound):
            await fail_write(db, actor, sid, None)


async def test_a_delete_leaves_the_index_merge_to_the_background_and_the_text_goes(
    world: World,
) -> None:
    _, auth = await _tenant(world)
    word = f"qzx{uuid.uuid4().hex[:12]}zq"  # nothing the porter stemmer would cut
    sid = f"fence-{uuid.uuid4().hex[:8]}"
    r = await world.client.post("/v1/sessions", headers=auth, json={"id": sid})
    assert r.status_code == 201
    for n in range(12):  # one index segment per transaction
        content = f"{word} turn {n}" if n == 5 else f"filler turn {n}"
        r = await world.client.post(
            f"/v1/sessions/{sid}/items",
            headers=auth,
            json={"items": [{"type": "message", "role": "user", "content": content}]},
        )
        assert r.status_code == 201
    tail = word[-10:].encode()  # past any prefix the index shares with a neighbouring term

    async def in_index() -> bool:
        async with world.rt.store.read() as db:
            blocks = (await db.execute(sa.text("SELECT block FROM items_fts_data"))).all()
        return any(b and tail in bytes(b) for (b,) in blocks)

    if world.rt.store.is_sqlite:
        assert await in_index()
    statements: list[str] = []

    def seen(_conn: object, _cursor: object, statement: str, *_: object) -> None:
        statements.append(statement)

    engine = world.rt.store.engine.sync_engine
    sa.event.listen(engine, "before_cursor_execute", seen)
    try:
        r = await world.client.delete(f"/v1/sessions/{sid}", headers=auth)
    finally:
        sa.event.remove(engine, "before_cursor_execute", seen)
    assert r.status_code == 204
    assert statements and not [s for s in statements if "items_fts(items_fts" in s]
    steps = await retention.merge_search_index(world.rt)
    if world.rt.store.is_sqlite:
        assert steps >= 1 and not await in_index()
    else:
        assert steps == 0  # Postgres drops index entries with the rows


# -- an append racing delete-then-recreate of the same session id (issue 31 item 10) ---------
# The append is sent while a second connection holds the session row (Postgres: FOR UPDATE;
# SQLite: the database's write lock); that connection deletes the session and creates another
# by the same id, then commits. The append must answer for the session it addressed: on
# Postgres its fence finds the old row gone (404), lands on the new one when it may create
# (?create=true), or, with an If-Match the new session happens to satisfy, says the session was
# recreated (412 session-recreated, retryable). On SQLite writes are serialised, so the append
# runs after the commit, on the new session. Never a 412 about a version nobody asked for.


async def _waiting_on_a_lock(world: World, holder: AsyncConnection) -> None:
    """Until some backend of this database waits on a lock (the append behind ``holder``)."""
    if world.rt.store.is_sqlite:
        await asyncio.sleep(0.3)  # the append waits in SQLite's busy handler; nothing to ask
        return
    for _ in range(200):
        async with world.rt.store.read() as db:
            waiting = await db.execute(
                sa.text(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                    " AND wait_event_type = 'Lock'"
                )
            )
            if waiting.scalar():
                return
        await asyncio.sleep(0.02)
    raise AssertionError("the append never waited on the held row")


@pytest.mark.parametrize(
    ("query", "if_match", "pg_status", "pg_type"),
    [
        ("", None, 404, "session-not-found"),
        ("?create=true", None, 201, None),
        ("", 1, 412, "session-recreated"),
    ],
)
async def test_an_append_racing_delete_and_recreate_answers_for_the_session_it_addressed(
    world: World, query: str, if_match: int | None, pg_status: int, pg_type: str | None
) -> None:
    tenant, auth = await _tenant(world)
    sid = f"race-{uuid.uuid4().hex[:8]}"
    r = await world.client.post("/v1/sessions", headers=auth, json={"id": sid})
    assert r.status_code == 201 and r.json()["version"] == 1
    headers = dict(auth)
    if if_match is not None:
        headers["If-Match"] = f'"{if_match}"'
    body = {"items": [{"type": "message", "role": "user", "content": "late turn"}]}
    async with world.rt.store.write() as holder:
        if not world.rt.store.is_sqlite:
            await SessionRepository(holder).lock(tenant, sid)
        append = asyncio.create_task(
            world.client.post(f"/v1/sessions/{sid}/items{query}", headers=headers, json=body)
        )
        await _waiting_on_a_lock(world, holder)
        assert not append.done()
        sessions = SessionRepository(holder)
        assert await sessions.delete_everything(tenant, sid) is not None
        await sessions.insert(
            tenant_id=tenant, session_id=sid, metadata={"incarnation": 2}, config={},
            summary=None, now=utcnow(),
        )  # fmt: skip
    r = await append
    new = await world.client.get(f"/v1/sessions/{sid}", headers=auth)
    assert new.status_code == 200 and new.json()["metadata"] == {"incarnation": 2}
    if world.rt.store.is_sqlite or pg_status == 201:
        assert r.status_code == 201, r.text  # it ran on the session that exists now
        assert new.json()["item_count"] == 1 and new.json()["version"] == r.json()["version"]
        return
    assert r.status_code == pg_status, r.text
    assert r.json()["type"].endswith("/" + pg_type)
    assert "expected None" not in r.text
    assert new.json()["item_count"] == 0 and new.json()["version"] == 1  # nothing landed


async def test_fail_write_tells_a_recreated_session_from_a_stale_version(world: World) -> None:
    """The explanation step on its own, on both backends: the fence missed, and a session by
    that id exists now at the version the client expected (recreated) or at another (stale)."""
    from app.domain.errors import SessionRecreated, VersionMismatch

    tenant, auth = await _tenant(world)
    sid = f"race-{uuid.uuid4().hex[:8]}"
    r = await world.client.post("/v1/sessions", headers=auth, json={"id": sid})
    assert r.status_code == 201 and r.json()["version"] == 1
    actor = Actor(tenant_id=tenant)
    async with world.rt.store.write() as db:
        with pytest.raises(SessionRecreated):
            await fail_write(db, actor, sid, 1)
        with pytest.raises(VersionMismatch) as stale:
            await fail_write(db, actor, sid, 7)
    assert not isinstance(stale.value, SessionRecreated)
    assert "expected 7" in stale.value.detail
