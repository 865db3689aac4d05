"""Retention and erasure over HTTP, on both backends (docs/retention.md).

Each module run gets a database of its own: the sweeps here walk every session, and server
defaults applied to the shared test database would change other modules' sessions.
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.domain.retention import subject_digest
from app.main import create_app
from app.services import keys as key_service
from app.services import retention
from app.services.runtime import Runtime
from app.settings import Settings
from tests.api.helpers import assert_problem, user
from tests.support.services import REDIS_URL, create_pg_database, drop_pg_database
from tests.support.spec_check import ASYNC_HOOKS

BOOTSTRAP = "retention-bootstrap-key-" + "x" * 24


@dataclass
class World:
    client: httpx.AsyncClient
    rt: Runtime

    async def tenant(
        self, *, scopes: frozenset[str] = frozenset({"read", "write", "admin"})
    ) -> Tenant:
        tenant_id = f"tr-{uuid.uuid4().hex[:10]}"
        created = await key_service.insert_key(
            self.rt.store,
            tenant_id=tenant_id,
            command=key_service.KeyCreateCommand(name="ops", scopes=scopes, session_prefix=None),
        )
        return Tenant(self.client, tenant_id, {"Authorization": f"Bearer {created.secret}"})

    def with_retention(self, **retention_settings: Any) -> Runtime:
        """The same store and locks under other RETENTION__* settings (a sweep with defaults)."""
        settings = self.rt.settings.model_copy(
            update={"retention": self.rt.settings.retention.model_copy(update=retention_settings)}
        )
        return dataclasses.replace(self.rt, settings=settings)


@dataclass
class Tenant:
    client: httpx.AsyncClient
    id: str
    auth: dict[str, str]

    async def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        headers = self.auth | kwargs.pop("headers", {})
        return await self.client.request(method, path, headers=headers, **kwargs)

    async def create(self, sid: str, **body: Any) -> dict[str, Any]:
        r = await self.request("POST", "/v1/sessions", json={"id": sid, **body})
        assert r.status_code == 201, r.text
        return dict(r.json())

    async def append(self, sid: str, *texts: str, **kwargs: Any) -> httpx.Response:
        items = [user(t) for t in texts]
        return await self.request(
            "POST", f"/v1/sessions/{sid}/items", json={"items": items}, **kwargs
        )


@pytest.fixture(scope="module")
async def world(backend: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[World]:
    if backend == "sqlite":
        from app.store.migrate import upgrade

        path: Path = tmp_path_factory.mktemp("retention") / "retention.db"
        url, name = f"sqlite+aiosqlite:///{path}", None
        upgrade(url)
        redis_url = None
    else:
        url, name = create_pg_database()
        redis_url = REDIS_URL
    settings = Settings(
        database_url=url,
        redis_url=redis_url,
        auth={"mode": "on", "bootstrap_key": BOOTSTRAP, "bootstrap_tenant": "boot-retention"},  # type: ignore[arg-type]
        retention={"sweep_enabled": False, "sweep_batch_rows": 3},  # type: ignore[arg-type]
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


def sid() -> str:
    return f"r-{uuid.uuid4().hex[:12]}"


def _ts(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


# -- config ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "config",
    [
        {"ttl_seconds": 0},
        {"ttl_seconds": "60"},
        {"ttl_seconds": True},
        {"ttl_seconds": 1.5},
        {"retention": {"history_seconds": 0}},
        {"retention": {"keep_snapshots": -1}},
        {"retention": {"events_days": 3}},
        {"retention": "forever"},
    ],
)
async def test_bad_retention_config_is_422_and_creates_nothing(
    world: World, config: dict[str, Any]
) -> None:
    t = await world.tenant()
    session_id = sid()
    r = await t.request("POST", "/v1/sessions", json={"id": session_id, "config": config})
    assert_problem(r, 422)
    assert_problem(await t.request("GET", f"/v1/sessions/{session_id}"), 404, "session-not-found")


async def test_expires_at_follows_every_write(world: World) -> None:
    t = await world.tenant()
    session_id = sid()
    created = await t.create(session_id, config={"ttl_seconds": 3600})
    assert created["config"] == {"ttl_seconds": 3600}
    first = _ts(created["expires_at"])
    assert first - _ts(created["updated_at"]) == timedelta(seconds=3600)
    await asyncio.sleep(0.01)
    assert (await t.append(session_id, "hello")).status_code == 201
    got = (await t.request("GET", f"/v1/sessions/{session_id}")).json()
    assert _ts(got["expires_at"]) > first  # renewed by the append
    assert _ts(got["expires_at"]) - _ts(got["updated_at"]) == timedelta(seconds=3600)
    # a config change takes effect at once; removing the TTL removes the expiry
    r = await t.request("PATCH", f"/v1/sessions/{session_id}", json={"config": {"ttl_seconds": 60}})
    assert r.status_code == 200, r.text
    assert _ts(r.json()["expires_at"]) - _ts(r.json()["updated_at"]) == timedelta(seconds=60)
    r = await t.request("PATCH", f"/v1/sessions/{session_id}", json={"config": {}})
    assert r.json()["expires_at"] is None
    assert (await t.request("GET", f"/v1/sessions/{session_id}")).json()["expires_at"] is None
    # without a TTL anywhere nothing expires
    plain = await t.create(sid())
    assert plain["expires_at"] is None


async def test_an_expired_session_is_404_at_once_for_everything(world: World) -> None:
    t = await world.tenant()
    session_id = sid()
    await t.create(session_id, config={"ttl_seconds": 1})
    assert (await t.append(session_id, "remember the quokka")).status_code == 201
    r = await t.request("POST", f"/v1/sessions/{session_id}/snapshots", json={})
    assert r.status_code == 201, r.text
    await asyncio.sleep(1.2)  # no sweep runs in this world
    base = f"/v1/sessions/{session_id}"
    for method, path, body in [
        ("GET", base, None),
        ("PATCH", base, {"metadata": {"a": 1}}),
        ("GET", f"{base}/items", None),
        ("POST", f"{base}/items", {"items": [user("too late")]}),
        ("POST", f"{base}/items/pop", None),
        ("DELETE", f"{base}/items", None),
        ("GET", f"{base}/context", None),
        ("POST", f"{base}/compact", {"policy": "window", "keep_last_items": 1}),
        ("GET", f"{base}/snapshots", None),
        ("POST", f"{base}/snapshots", {}),
        ("POST", f"{base}/fork", {"new_session_id": sid()}),
        ("GET", f"{base}/events", None),
        ("GET", f"{base}/history", None),
        ("GET", f"{base}/search", {"q": "quokka"}),
        ("DELETE", base, None),
    ]:
        if method == "GET" and body:
            r = await t.request(method, path, params=body)
        else:
            r = await t.request(method, path, json=body)
        assert_problem(r, 404, "session-not-found")
    r = await t.request("GET", "/v1/search", params={"q": "quokka", "scope": "history"})
    assert r.status_code == 200, r.text
    assert r.json()["items"] == []  # the tenant-wide search no longer finds it either
    listed = (await t.request("GET", "/v1/sessions")).json()["items"]
    assert session_id not in [s["id"] for s in listed]
    # the id is free again: a create replaces the expired session (erased, not resurrected)
    again = await t.create(session_id)
    assert again["version"] == 1 and again["item_count"] == 0
    history = (await t.request("GET", f"{base}/history")).json()["items"]
    assert history == []
    assert (await t.request("GET", f"{base}/snapshots")).json()["items"] == []
    records = (
        await t.request("GET", "/v1/admin/erasures", params={"session_id": session_id})
    ).json()["items"]
    assert [r["reason"] for r in records] == ["expired"]
    assert records[0]["subject_digest"] == subject_digest(t.id, session_id)


async def test_append_with_create_replaces_an_expired_session(world: World) -> None:
    t = await world.tenant()
    session_id = sid()
    await t.create(session_id, config={"ttl_seconds": 1})
    assert (await t.append(session_id, "old")).status_code == 201
    await asyncio.sleep(1.2)
    r = await t.request(
        "POST",
        f"/v1/sessions/{session_id}/items",
        params={"create": "true"},
        json={"items": [user("new")]},
    )
    assert r.status_code == 201, r.text
    assert r.json()["items"][0]["seq"] == 1
    got = (await t.request("GET", f"/v1/sessions/{session_id}")).json()
    assert got["item_count"] == 1 and got["expires_at"] is None  # a fresh session, no config


async def test_the_sweep_erases_expired_sessions_and_leaves_the_others(world: World) -> None:
    t = await world.tenant()
    doomed = [sid() for _ in range(4)]
    for session_id in doomed:
        await t.create(session_id, config={"ttl_seconds": 1})
        assert (await t.append(session_id, "a", "b", "c")).status_code == 201  # 3 items
    kept = sid()
    await t.create(kept, config={"ttl_seconds": 3600})
    await asyncio.sleep(1.2)
    report = await retention.run_sweep(world.rt, claim=False)
    assert report.sessions_expired >= 4
    # batches of 3 rows: every session took several transactions, and all of it went
    assert report.erased.rows.get("items", 0) >= 12, report
    assert report.erased.rows["sessions"] >= 4
    usage = (await t.request("GET", f"/v1/admin/tenants/{t.id}/storage")).json()["storage"]
    assert usage["sessions"] == 1
    assert (await t.request("GET", f"/v1/sessions/{kept}")).status_code == 200
    records = (await t.request("GET", "/v1/admin/erasures")).json()["items"]
    digests = {r["subject_digest"] for r in records if r["reason"] == "expired"}
    assert digests >= {subject_digest(t.id, s) for s in doomed}
    one = next(r for r in records if r["subject_digest"] == subject_digest(t.id, doomed[0]))
    assert one["row_counts"]["items"] == 3 and one["row_counts"]["sessions"] == 1
    assert one["key_id"] is None  # the sweep, not a key


async def test_server_default_ttl_applies_to_sessions_without_their_own(world: World) -> None:
    t = await world.tenant()
    mine, default = sid(), sid()
    await t.create(mine, config={"ttl_seconds": 3600})
    await t.create(default)
    rt = world.with_retention(session_ttl_seconds=1)
    await retention.run_sweep(rt, claim=False)  # the default is applied to existing sessions
    got = (await t.request("GET", f"/v1/sessions/{default}")).json()
    assert _ts(got["expires_at"]) - _ts(got["updated_at"]) == timedelta(seconds=1)
    await asyncio.sleep(1.2)
    report = await retention.run_sweep(rt, claim=False)
    assert report.sessions_expired >= 1
    assert_problem(await t.request("GET", f"/v1/sessions/{default}"), 404)
    assert (await t.request("GET", f"/v1/sessions/{mine}")).status_code == 200
    # and taken away again when the default is
    await retention.run_sweep(world.with_retention(session_ttl_seconds=None), claim=False)
    assert (await t.request("GET", f"/v1/sessions/{mine}")).json()["expires_at"] is not None


# -- archive, snapshots, events ------------------------------------------------------------------


async def _events(t: Tenant, session_id: str) -> list[dict[str, Any]]:
    r = await t.request("GET", f"/v1/sessions/{session_id}/events", params={"limit": 1000})
    assert r.status_code == 200, r.text
    return list(r.json()["items"])


async def test_archive_retention_never_touches_working_memory(world: World) -> None:
    t = await world.tenant()
    session_id = sid()
    await t.create(session_id, config={"retention": {"history_seconds": 1}})
    assert (await t.append(session_id, "one", "two", "three", "four")).status_code == 201
    assert (await t.request("POST", f"/v1/sessions/{session_id}/items/pop")).status_code == 200
    r = await t.request(
        "POST",
        f"/v1/sessions/{session_id}/compact",
        json={"policy": "window", "keep_last_items": 1},
    )
    assert r.status_code == 200, r.text
    before = (await t.request("GET", f"/v1/sessions/{session_id}")).json()
    assert before["storage"]["archive"]["rows"] == 3
    await asyncio.sleep(1.2)
    assert (await t.append(session_id, "five")).status_code == 201  # new, live: stays
    logged = await retention.prune_session(world.rt, t.id, session_id)
    # three archived rows, batches of 3: one transaction, then nothing left
    assert sum(d["archive"]["count"] for d in logged) == 3
    assert logged[0]["archive"]["first_seq"] == 1 and logged[0]["archive"]["last_seq"] == 4
    after = (await t.request("GET", f"/v1/sessions/{session_id}")).json()
    assert after["storage"]["archive"] == {"rows": 0, "bytes": 0}
    assert after["version"] == before["version"] + 1  # the append only: pruning is no write
    items = (await t.request("GET", f"/v1/sessions/{session_id}/items")).json()["items"]
    assert [i["content"] for i in items] == ["three", "five"]
    history = (await t.request("GET", f"/v1/sessions/{session_id}/history")).json()["items"]
    assert [i["seq"] for i in history] == [3, 5]
    pruned = [e for e in await _events(t, session_id) if e["type"] == "history_pruned"]
    assert len(pruned) == 1 and pruned[0]["data"]["archive"]["count"] == 3
    assert await retention.prune_session(world.rt, t.id, session_id) == []  # nothing due


async def test_keep_snapshots_drops_automatic_ones_first(world: World) -> None:
    t = await world.tenant()
    session_id = sid()
    await t.create(session_id, config={"retention": {"keep_snapshots": 2}})
    await t.append(session_id, "x")
    ids = []
    for label in ("mine-1", "mine-2"):
        r = await t.request("POST", f"/v1/sessions/{session_id}/snapshots", json={"label": label})
        assert r.status_code == 201, r.text
        ids.append(r.json()["id"])
    r = await t.request("POST", f"/v1/sessions/{session_id}/restore", json={"snapshot_id": ids[0]})
    assert r.status_code == 200, r.text
    undo = r.json()["undo_snapshot_id"]
    listed = (await t.request("GET", f"/v1/sessions/{session_id}/snapshots")).json()["items"]
    assert {s["id"] for s in listed} == {*ids, undo}
    logged = await retention.prune_session(world.rt, t.id, session_id)
    assert logged[0]["snapshots"] == {"count": 1, "ids": [undo]}  # the newest, but automatic
    listed = (await t.request("GET", f"/v1/sessions/{session_id}/snapshots")).json()["items"]
    assert {s["id"] for s in listed} == set(ids)
    # a smaller keep then drops the oldest of the caller's own
    await t.request(
        "PATCH", f"/v1/sessions/{session_id}", json={"config": {"retention": {"keep_snapshots": 1}}}
    )
    await retention.prune_session(world.rt, t.id, session_id)
    listed = (await t.request("GET", f"/v1/sessions/{session_id}/snapshots")).json()["items"]
    assert [s["id"] for s in listed] == [ids[1]]


async def test_events_retention_and_server_defaults(world: World) -> None:
    t = await world.tenant()
    session_id = sid()
    await t.create(session_id)
    for n in range(4):
        await t.append(session_id, f"turn {n}")
    assert len(await _events(t, session_id)) == 5  # created + 4 appended
    await asyncio.sleep(1.1)
    await t.append(session_id, "recent")
    # no config of its own: the server default applies (through a sweep)
    report = await retention.run_sweep(world.with_retention(events_seconds=1), claim=False)
    assert report.sessions_pruned >= 1 and report.erased.rows["events"] >= 5
    events = await _events(t, session_id)
    # batches of 3 rows: seqs 1-3, then 4-5, each batch logged; the newest append stays
    assert [e["type"] for e in events] == ["appended", "history_pruned", "history_pruned"]
    pruned = [e["data"]["events"] for e in events if e["type"] == "history_pruned"]
    assert sum(p["count"] for p in pruned) == 5
    assert min(p["first_seq"] for p in pruned) == 1 and max(p["last_seq"] for p in pruned) == 5
    items = (await t.request("GET", f"/v1/sessions/{session_id}/items")).json()["items"]
    assert len(items) == 5  # working memory untouched


# -- storage -----------------------------------------------------------------------------------


async def test_storage_counts_rows_and_bytes(world: World) -> None:
    t = await world.tenant()
    session_id = sid()
    await t.create(session_id)
    empty = (await t.request("GET", f"/v1/sessions/{session_id}")).json()["storage"]
    assert empty["working_memory"] == {"rows": 0, "bytes": 0}
    assert empty["events"]["rows"] == 1
    await t.append(session_id, "a" * 1000, "b" * 1000)
    await t.request("POST", f"/v1/sessions/{session_id}/items/pop")
    await t.request("POST", f"/v1/sessions/{session_id}/snapshots", json={"label": "s"})
    got = (await t.request("GET", f"/v1/sessions/{session_id}")).json()["storage"]
    assert got["working_memory"]["rows"] == 1 and got["archive"]["rows"] == 1
    # body and search text both hold the 1000 characters
    assert 2000 <= got["working_memory"]["bytes"] < 2400
    assert got["snapshots"]["rows"] == 1 and got["snapshots"]["bytes"] > 1000
    assert got["events"]["rows"] == 4
    assert got["total"]["rows"] == sum(
        got[k]["rows"] for k in ("working_memory", "archive", "snapshots", "events")
    )
    listed = (await t.request("GET", "/v1/sessions")).json()["items"]
    assert all("storage" not in s for s in listed)
    tenant = (await t.request("GET", f"/v1/admin/tenants/{t.id}/storage")).json()
    assert tenant["storage"]["sessions"] == 1
    assert tenant["storage"]["working_memory"] == got["working_memory"]
    # another tenant's totals are not this key's to see
    other = await world.tenant()
    assert_problem(
        await t.request("GET", f"/v1/admin/tenants/{other.id}/storage"), 404, "tenant-not-found"
    )


# -- erasure -----------------------------------------------------------------------------------


async def test_delete_leaves_an_audit_record_without_the_data(world: World) -> None:
    t = await world.tenant()
    session_id = sid()
    await t.create(session_id)
    await t.append(session_id, "secret plan", headers={"Idempotency-Key": "k1"})
    assert (await t.request("DELETE", f"/v1/sessions/{session_id}")).status_code == 204
    records = (
        await t.request("GET", "/v1/admin/erasures", params={"session_id": session_id})
    ).json()["items"]
    assert len(records) == 1
    record = records[0]
    assert record["reason"] == "deleted" and record["kind"] == "session"
    assert record["key_name"] == "ops" and record["key_id"].startswith("smk_")
    assert record["row_counts"] == {"events": 2, "idempotency_keys": 1, "items": 1, "sessions": 1}
    assert session_id not in str(record) and "secret plan" not in str(record)
    # the same key replays nothing: a fresh append under the same Idempotency-Key
    await t.create(session_id)
    r = await t.append(session_id, "secret plan", headers={"Idempotency-Key": "k1"})
    assert r.status_code == 201 and r.json()["version"] == 2


async def test_erase_tenant(world: World) -> None:
    t = await world.tenant()
    other = await world.tenant()
    await other.create("keep-me")
    for n in range(3):
        session_id = f"s{n}"
        await t.create(session_id, config={"ttl_seconds": 3600})
        await t.append(session_id, "tenant data", headers={"Idempotency-Key": f"i{n}"})
    r = await t.request("POST", "/v1/admin/keys", json={"name": "second", "scopes": ["read"]})
    second = {"Authorization": f"Bearer {r.json()['secret']}"}
    # an id that is not the caller's tenant: 404, nothing happens
    assert_problem(
        await t.request("DELETE", f"/v1/admin/tenants/{other.id}"), 404, "tenant-not-found"
    )
    assert_problem(await t.request("DELETE", "/v1/admin/tenants/bad id!"), 422)
    # a key without admin scope may not
    assert_problem(await t.client.delete(f"/v1/admin/tenants/{t.id}", headers=second), 403)
    r = await t.request("DELETE", f"/v1/admin/tenants/{t.id}")
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["sessions"] == 3
    assert body["row_counts"]["api_keys"] == 2 and body["row_counts"]["items"] == 3
    assert body["row_counts"]["idempotency_keys"] == 3
    # its keys are gone (this process forgets them at once)
    assert (await t.request("GET", "/v1/sessions")).status_code == 401
    assert (await t.client.get("/v1/sessions", headers=second)).status_code == 401
    assert (await other.request("GET", "/v1/sessions/keep-me")).status_code == 200
    boot = {"Authorization": f"Bearer {BOOTSTRAP}"}
    assert_problem(await t.client.get(f"/v1/admin/tenants/{t.id}/storage", headers=boot), 404)


async def test_a_whole_float_ttl_is_the_integer_it_equals(world: World) -> None:
    """JSON Schema's integer admits 583.0 (a snapshot document restored from another language
    may carry one): accepted, kept as 583, and it expires the session like 583 would."""
    from app.domain.sessions import check_config

    assert check_config({"ttl_seconds": 583.0}) == {"ttl_seconds": 583}
    assert check_config({"retention": {"history_seconds": 6393.0}}) == {
        "retention": {"history_seconds": 6393}
    }
    t = await world.tenant()
    created = await t.create(sid(), config={"ttl_seconds": 3600.0})
    assert created["config"] == {"ttl_seconds": 3600}
    assert _ts(created["expires_at"]) - _ts(created["updated_at"]) == timedelta(seconds=3600)
