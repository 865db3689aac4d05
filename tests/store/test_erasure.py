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

from app.main import create_app
from app.services import keys as key_service
from app.services import retention
from app.services.runtime import Runtime
from app.settings import Settings
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

    # the walk sees both before: it would find what an erasure left behind
    before = await mentions(world, doomed, word, kept, kept_word)
    for needle in (doomed, word):
        assert {t for t, n in before.items() if needle in n} >= {
            "sessions",
            "items",
            "events",
            "snapshots",
            "idempotency_keys",
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
    assert {t for t, n in after.items() if kept in n} >= {"sessions", "items", "events"}
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
