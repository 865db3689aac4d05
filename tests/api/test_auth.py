"""API keys, scopes and tenant isolation.

The isolation matrix enumerates every /v1 operation from the app's own OpenAPI document (so an
endpoint added tomorrow is covered without touching this file) and calls each one as: no key,
a revoked key, a key without the needed scope, another tenant's key, and a key confined to
another session prefix. Refused calls must be 401 / 403 / 404 problems and change nothing:
every row of the victim tenant, in every table, is compared before and after.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from fastapi import FastAPI

from app.main import create_app
from app.services import keys as key_service
from app.services.keys import KeyResolver, auth_required, is_loopback, startup_problem
from app.settings import AuthSettings, Settings
from app.store.db import Store
from app.store.tables import metadata as tables
from tests.api.helpers import assert_problem, user
from tests.conftest import make_settings
from tests.support.spec_check import ASYNC_HOOKS

BOOTSTRAP = "bootstrap-key-for-tests-" + "x" * 24
ALL = ("read", "write", "admin")


@dataclass
class AuthWorld:
    app: FastAPI
    client: httpx.AsyncClient
    store: Store
    backend: str


@pytest.fixture(scope="module")
async def auth_world(backend: str, request: pytest.FixtureRequest) -> AsyncIterator[AuthWorld]:
    settings = make_settings(
        backend,
        request,
        auth={"mode": "on", "bootstrap_key": BOOTSTRAP, "bootstrap_tenant": "boot"},
        limits={"max_body_bytes": 256 * 1024},
    )
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost", event_hooks=ASYNC_HOOKS) as client:
            yield AuthWorld(app, client, app.state.runtime.store, backend)


def bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


async def make_key(
    world: AuthWorld,
    tenant: str,
    scopes: tuple[str, ...],
    *,
    prefix: str | None = None,
    name: str | None = None,
) -> tuple[str, str]:
    created = await key_service.insert_key(
        world.store,
        tenant_id=tenant,
        command=key_service.KeyCreateCommand(
            name=name or f"k-{'-'.join(scopes)}", scopes=frozenset(scopes), session_prefix=prefix
        ),
    )
    return created.key.id, created.secret


async def tenant_rows(store: Store, tenant: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every row the tenant owns, in every table: the 'nothing changed' fingerprint."""
    out: dict[str, list[tuple[Any, ...]]] = {}
    async with store.read() as db:
        for table in tables.sorted_tables:
            if "tenant_id" not in table.c:
                continue
            pk = list(table.primary_key.columns)
            rows = await db.execute(
                sa.select(table).where(table.c.tenant_id == tenant).order_by(*pk)
            )
            out[table.name] = [tuple(r) for r in rows.all()]
    return out


# -- the isolation matrix ---------------------------------------------------------------------

SESSION_PARAM = "session_id"
# Write bodies that would succeed for the victim's own full key: a refusal is then the auth's.
BODIES: dict[tuple[str, str], Any] = {
    ("post", "/v1/sessions"): "CREATE",
    ("patch", "/v1/sessions/{session_id}"): {"metadata": {"changed": True}},
    ("post", "/v1/sessions/{session_id}/items"): {"items": [user("injected")]},
    ("post", "/v1/sessions/{session_id}/context"): {},
    ("post", "/v1/sessions/{session_id}/compact"): {"policy": "window", "keep_last_items": 1},
    ("post", "/v1/sessions/{session_id}/snapshots"): {"label": "x"},
    ("post", "/v1/sessions/{session_id}/restore"): "RESTORE",
    ("post", "/v1/sessions/{session_id}/fork"): "FORK",
    ("post", "/v1/admin/keys"): "KEY",
}
# POSTs that only read (projection): a read key may call them.
READ_POSTS = {"/v1/sessions/{session_id}/context"}


@dataclass
class Matrix:
    tenant_a: str
    tenant_b: str
    sid: str
    item_id: str
    marker: str
    snapshot_id: str | None
    victim_key_id: str
    keys: dict[str, str] = field(default_factory=dict)


async def build_matrix(world: AuthWorld) -> Matrix:
    tag = uuid.uuid4().hex[:8]
    m = Matrix(
        tenant_a=f"ta-{tag}",
        tenant_b=f"tb-{tag}",
        sid=f"t-{tag}",
        item_id="itm-victim",
        marker=f"zebra{tag}",
        snapshot_id=None,
        victim_key_id="",
    )
    for label, tenant, scopes, prefix in [
        ("full", m.tenant_a, ALL, None),
        ("read", m.tenant_a, ("read",), None),
        ("write", m.tenant_a, ("write",), None),
        ("read_write", m.tenant_a, ("read", "write"), None),
        ("revoked", m.tenant_a, ALL, None),
        ("prefix", m.tenant_a, ALL, "zz-"),
        ("other", m.tenant_b, ALL, None),
    ]:
        key_id, secret = await make_key(world, tenant, scopes, prefix=prefix, name=label)
        m.keys[label] = secret
        if label == "read":
            m.victim_key_id = key_id
        if label == "revoked":
            r = await world.client.delete(
                f"/v1/admin/keys/{key_id}", headers=bearer(m.keys["full"])
            )
            assert r.status_code == 204, r.text
    c, full = world.client, bearer(m.keys["full"])
    r = await c.post("/v1/sessions", json={"id": m.sid, "metadata": {"m": m.marker}}, headers=full)
    assert r.status_code == 201, r.text
    r = await c.post(
        f"/v1/sessions/{m.sid}/items",
        json={"items": [user(f"hello {m.marker}", id=m.item_id), user("second")]},
        headers=full,
    )
    assert r.status_code == 201, r.text
    r = await c.post(f"/v1/sessions/{m.sid}/snapshots", json={"label": "s"}, headers=full)
    if r.status_code == 201:
        m.snapshot_id = r.json()["id"]
    return m


def fill_path(template: str, m: Matrix) -> str:
    values = {
        "session_id": m.sid,
        "item_id": m.item_id,
        "snapshot_id": m.snapshot_id or "snap-missing",
        "key_id": m.victim_key_id,
    }
    return re.sub(r"\{([^}]+)\}", lambda g: values.get(g.group(1), "x1"), template)


def body_for(method: str, template: str, m: Matrix, who: str) -> Any:
    body = BODIES.get((method, template), {} if method in ("post", "put", "patch") else None)
    if body == "CREATE":
        return {"id": m.sid}
    if body == "RESTORE":
        return {"snapshot_id": m.snapshot_id or "snap-missing"}
    if body == "FORK":
        # Into the key's own prefix when it has one, so only the source decides the answer.
        new_id = ("zz-" if who == "prefix" else "") + f"fork-{uuid.uuid4().hex[:6]}"
        return {"new_session_id": new_id}
    if body == "KEY":
        # The prefix-confined admin asks for a prefix outside its own: refused (403).
        return {"name": "minted", "scopes": ["read"], "session_prefix": "t-"}
    return body


def needed_scope(method: str, template: str) -> str:
    if template.startswith("/v1/admin"):
        return "admin"
    if method in ("get", "head") or (method == "post" and template in READ_POSTS):
        return "read"
    return "write"


def wrong_scope_key(scope: str) -> str:
    return {"read": "write", "write": "read", "admin": "read_write"}[scope]


def operations(app: FastAPI) -> list[tuple[str, str]]:
    spec = app.openapi()
    ops = [
        (method, path)
        for path, methods in spec["paths"].items()
        if path.startswith("/v1/")
        for method in methods
    ]
    assert len(ops) >= 8, ops
    return ops


def query_for(app: FastAPI, method: str, template: str, m: Matrix) -> dict[str, Any]:
    """Required query parameters: strings get the victim's marker word (a search that leaked
    would find it), numbers the smallest allowed value."""
    op = app.openapi()["paths"][template][method]
    out: dict[str, Any] = {}
    for param in op.get("parameters", []):
        if param["in"] != "query" or not param.get("required"):
            continue
        schema = param.get("schema", {})
        kind = schema.get("type")
        if kind in ("integer", "number"):
            out[param["name"]] = schema.get("minimum", 1)
        elif "enum" in schema:
            out[param["name"]] = schema["enum"][0]
        else:
            out[param["name"]] = m.marker
    return out


async def call(
    world: AuthWorld, method: str, template: str, m: Matrix, who: str | None
) -> httpx.Response:
    headers = bearer(m.keys[who]) if who else {}
    body = body_for(method, template, m, who or "")
    return await world.client.request(
        method.upper(),
        fill_path(template, m),
        params=query_for(world.app, method, template, m),
        json=body,
        headers=headers,
    )


def _targets_a_resource(template: str) -> bool:
    return "{" in template


async def test_isolation_matrix_over_every_endpoint(auth_world: AuthWorld) -> None:
    world = auth_world
    m = await build_matrix(world)
    checked = 0
    for method, template in operations(world.app):
        before = await tenant_rows(world.store, m.tenant_a)
        where = f"{method.upper()} {template}"

        r = await call(world, method, template, m, None)
        assert_problem(r, 401, "api-key-required")
        assert r.headers["www-authenticate"].startswith("Bearer"), where

        r = await call(world, method, template, m, "revoked")
        assert_problem(r, 401, "invalid-api-key")
        assert r.headers["www-authenticate"].startswith("Bearer"), where

        scope = needed_scope(method, template)
        r = await call(world, method, template, m, wrong_scope_key(scope))
        body = assert_problem(r, 403, "insufficient-scope")
        assert scope in body["detail"], where

        for who in ("other", "prefix"):
            if (method, template, who) == ("post", "/v1/sessions", "other"):
                continue
            r = await call(world, method, template, m, who)
            if _targets_a_resource(template):
                assert r.status_code == 404, (where, who, r.status_code, r.text)
                assert_problem(r, 404)
            elif method == "get":
                assert r.status_code == 200, (where, who, r.text)
                # (Tenant B may hold a session with the victim's id: its own, created below.)
                hidden = [m.marker, m.victim_key_id] + ([m.sid] if who == "prefix" else [])
                for secret in hidden:
                    assert secret not in r.text, (where, who, secret)
            elif (method, template) == ("post", "/v1/sessions"):
                # A key confined to "zz-" cannot create "t-..." (403 naming its own prefix,
                # which it knows); another tenant can (its own namespace, no existence leak
                # through a 409): checked after the loop, as its session of the same id would
                # answer the other tenant's later calls.
                body = assert_problem(r, 403, "outside-key-prefix")
                assert "'zz-'" in body["detail"], body
            elif (method, template) == ("post", "/v1/admin/keys"):
                # Another tenant's admin mints keys in its own tenant only; the confined admin
                # cannot grant a prefix outside its own.
                if who == "other":
                    assert r.status_code == 201, r.text
                    assert r.json()["tenant_id"] == m.tenant_b
                else:
                    assert_problem(r, 403, "forbidden")
            else:
                assert r.status_code < 500, (where, who, r.text)
        after = await tenant_rows(world.store, m.tenant_a)
        assert after == before, f"{where}: a refused call changed tenant {m.tenant_a}'s data"
        checked += 1
    before = await tenant_rows(world.store, m.tenant_a)
    r = await world.client.post("/v1/sessions", json={"id": m.sid}, headers=bearer(m.keys["other"]))
    assert r.status_code == 201, r.text
    assert await tenant_rows(world.store, m.tenant_a) == before
    # The victim's own key still sees everything: the refusals above were not a broken setup.
    r = await world.client.get(f"/v1/sessions/{m.sid}/items", headers=bearer(m.keys["full"]))
    assert r.status_code == 200 and [i["id"] for i in r.json()["items"]][0] == m.item_id
    assert checked == len(operations(world.app))


async def test_the_victims_own_keys_reach_every_endpoint(auth_world: AuthWorld) -> None:
    """Control for the matrix: with the tenant's own key no endpoint answers 401, 403 or
    "session not found", so those answers in the matrix came from the isolation."""
    world = auth_world
    m = await build_matrix(world)
    for method, template in operations(world.app):
        if method == "delete":
            continue  # would destroy what the next operations need
        r = await call(world, method, template, m, "full")
        assert r.status_code not in (401, 403), (method, template, r.text)
        assert r.status_code < 500, (method, template, r.text)
        if r.status_code == 404:
            assert not r.json()["type"].endswith("/session-not-found"), (method, template)


# -- keys through the admin API ---------------------------------------------------------------


async def test_admin_key_lifecycle(auth_world: AuthWorld) -> None:
    c = auth_world.client
    tenant = f"tl-{uuid.uuid4().hex[:8]}"
    _, admin = await make_key(auth_world, tenant, ALL, name="root")

    r = await c.post(
        "/v1/admin/keys",
        json={"name": "ingest-worker", "scopes": ["read", "write"]},
        headers=bearer(admin),
    )
    assert r.status_code == 201, r.text
    created = r.json()
    secret = created["secret"]
    assert secret.startswith(created["id"] + "_") and len(secret) > 50
    assert created["tenant_id"] == tenant and created["scopes"] == ["read", "write"]

    listed = (await c.get("/v1/admin/keys", headers=bearer(admin))).json()
    assert {k["name"] for k in listed["items"]} == {"root", "ingest-worker"}
    assert secret not in str(listed) and all("secret" not in k for k in listed["items"])

    # The new key works, and events name it as the actor.
    sid = f"t-{uuid.uuid4().hex[:8]}"
    r = await c.post(
        f"/v1/sessions/{sid}/items?create=true",
        json={"items": [user("hi")]},
        headers=bearer(secret),
    )
    assert r.status_code == 201, r.text
    async with auth_world.store.read() as db:
        from app.store.events import EventRepository

        events = await EventRepository(db).list(tenant, sid, after_seq=None, limit=10)
    assert [e.actor for e in events] == ["ingest-worker", "ingest-worker"]

    # Revoked through the API: refused at once by this process.
    r = await c.delete(f"/v1/admin/keys/{created['id']}", headers=bearer(admin))
    assert r.status_code == 204
    assert_problem(await c.get(f"/v1/sessions/{sid}", headers=bearer(secret)), 401)
    r = await c.delete(f"/v1/admin/keys/{created['id']}", headers=bearer(admin))
    assert r.status_code == 204  # idempotent
    listed = (await c.get("/v1/admin/keys", headers=bearer(admin))).json()
    assert [k["name"] for k in listed["items"]] == ["root"]
    listed = (await c.get("/v1/admin/keys?include_revoked=true", headers=bearer(admin))).json()
    revoked = [k for k in listed["items"] if k["id"] == created["id"]]
    assert revoked and revoked[0]["revoked_at"] is not None


async def test_keys_list_is_cursor_paginated(auth_world: AuthWorld) -> None:
    c = auth_world.client
    tenant = f"tp-{uuid.uuid4().hex[:8]}"
    _, admin = await make_key(auth_world, tenant, ALL, name="root")
    for i in range(4):
        await make_key(auth_world, tenant, ("read",), name=f"r{i}")
    seen: list[str] = []
    cursor = None
    for _ in range(10):
        params = {"limit": 2} | ({"cursor": cursor} if cursor else {})
        page = (await c.get("/v1/admin/keys", params=params, headers=bearer(admin))).json()
        seen += [k["id"] for k in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert len(seen) == 5 and seen == sorted(seen) and len(set(seen)) == 5
    assert_problem(
        await c.get("/v1/admin/keys", params={"cursor": "../x"}, headers=bearer(admin)), 422
    )


async def test_a_key_grants_no_more_than_it_holds(auth_world: AuthWorld) -> None:
    c = auth_world.client
    tenant = f"tg-{uuid.uuid4().hex[:8]}"
    _, narrow_admin = await make_key(auth_world, tenant, ("read", "admin"), name="narrow")
    r = await c.post(
        "/v1/admin/keys", json={"name": "w", "scopes": ["write"]}, headers=bearer(narrow_admin)
    )
    assert_problem(r, 403, "forbidden")

    _, confined = await make_key(auth_world, tenant, ALL, prefix="team-a:", name="confined")
    r = await c.post(
        "/v1/admin/keys", json={"name": "child", "scopes": ["read"]}, headers=bearer(confined)
    )
    assert r.status_code == 201 and r.json()["session_prefix"] == "team-a:", r.text
    r = await c.post(
        "/v1/admin/keys",
        json={"name": "narrower", "scopes": ["read"], "session_prefix": "team-a:x"},
        headers=bearer(confined),
    )
    assert r.status_code == 201 and r.json()["session_prefix"] == "team-a:x", r.text
    # The confined admin sees only keys inside its prefix.
    listed = (await c.get("/v1/admin/keys", headers=bearer(confined))).json()
    assert {k["name"] for k in listed["items"]} == {"confined", "child", "narrower"}

    before = await tenant_rows(auth_world.store, tenant)
    for bad in (
        {"name": "", "scopes": ["read"]},
        {"name": "x", "scopes": []},
        {"name": "x", "scopes": ["root"]},
        {"name": "x\u0007", "scopes": ["read"]},
        {"name": "x", "scopes": ["read"], "session_prefix": "../"},
        {"name": "x", "scopes": ["read"], "tenant_id": "someone-else"},
    ):
        r = await c.post("/v1/admin/keys", json=bad, headers=bearer(confined))
        assert_problem(r, 422)
    assert await tenant_rows(auth_world.store, tenant) == before


async def test_a_prefix_key_sees_and_creates_only_inside_its_prefix(
    auth_world: AuthWorld,
) -> None:
    c = auth_world.client
    tenant = f"tx-{uuid.uuid4().hex[:8]}"
    _, full = await make_key(auth_world, tenant, ALL)
    _, agent = await make_key(auth_world, tenant, ("read", "write"), prefix="agent-1:")
    for sid in ("agent-1:a", "agent-1:b", "agent-2:a", "AGENT-1:a", "agent_1:a"):
        assert (
            await c.post("/v1/sessions", json={"id": sid}, headers=bearer(full))
        ).status_code == 201
    listed = (await c.get("/v1/sessions", headers=bearer(agent))).json()
    assert [s["id"] for s in listed["items"]] == ["agent-1:a", "agent-1:b"]
    listed = (await c.get("/v1/sessions?prefix=agent-2", headers=bearer(agent))).json()
    assert listed["items"] == []
    assert_problem(await c.get("/v1/sessions/agent-2:a", headers=bearer(agent)), 404)
    r = await c.post(
        "/v1/sessions/agent-1:c/items?create=true",
        json={"items": [user("x")]},
        headers=bearer(agent),
    )
    assert r.status_code == 201
    # creating outside the prefix is a 403 naming it (the key knows its prefix: no leak),
    # whether the session exists or not; reading outside it stays a 404
    for target in ("agent-2:c", "agent-2:a"):
        r = await c.post(
            f"/v1/sessions/{target}/items?create=true",
            json={"items": [user("x")]},
            headers=bearer(agent),
        )
        body = assert_problem(r, 403, "outside-key-prefix")
        assert "'agent-1:'" in body["detail"] and body["errors"][0]["loc"] == [
            "path",
            "session_id",
        ]
    r = await c.post("/v1/sessions", json={"id": "agent-2:c"}, headers=bearer(agent))
    body = assert_problem(r, 403, "outside-key-prefix")
    assert "'agent-1:'" in body["detail"] and body["errors"][0]["loc"] == ["body", "id"]
    r = await c.post(
        "/v1/sessions/agent-1:a/fork", json={"new_session_id": "agent-2:f"}, headers=bearer(agent)
    )
    body = assert_problem(r, 403, "outside-key-prefix")
    assert body["errors"][0]["loc"] == ["body", "new_session_id"]
    r = await c.post(
        "/v1/sessions/agent-2:a/items", json={"items": [user("x")]}, headers=bearer(agent)
    )
    assert_problem(r, 404)  # an append without create is a write to a session it cannot see
    assert_problem(await c.get("/v1/sessions/agent-2:c", headers=bearer(full)), 404)
    assert_problem(await c.get("/v1/sessions/agent-2:f", headers=bearer(full)), 404)
    r = await c.get("/v1/sessions/agent-2:a/items", headers=bearer(full))
    assert r.json()["items"] == []
    # without an id, the service names the session inside the key's prefix, as fork does
    r = await c.post("/v1/sessions", json={}, headers=bearer(agent))
    assert r.status_code == 201, r.text
    made = r.json()["id"]
    assert made.startswith("agent-1:")
    assert (await c.get(f"/v1/sessions/{made}", headers=bearer(agent))).status_code == 200


async def test_bootstrap_key(auth_world: AuthWorld) -> None:
    c = auth_world.client
    sid = f"t-{uuid.uuid4().hex[:8]}"
    r = await c.post("/v1/sessions", json={"id": sid}, headers=bearer(BOOTSTRAP))
    assert r.status_code == 201
    # It lives in its tenant and is never stored, so it can be neither listed nor revoked.
    rows = await tenant_rows(auth_world.store, "boot")
    assert any(row[1] == sid for row in rows["sessions"])
    listed = (await c.get("/v1/admin/keys", headers=bearer(BOOTSTRAP))).json()
    assert all(k["name"] != "bootstrap" for k in listed["items"])
    assert_problem(await c.delete("/v1/admin/keys/bootstrap", headers=bearer(BOOTSTRAP)), 404)
    async with auth_world.store.read() as db:
        hashes = (await db.execute(sa.text("SELECT key_hash FROM api_keys"))).scalars().all()
    from app.domain.keys import hash_secret

    assert hash_secret(BOOTSTRAP) not in hashes


@pytest.mark.parametrize(
    "header",
    [
        "",
        "Bearer",
        "Bearer ",
        "Basic dXNlcjpwYXNz",
        "Token abc",
        "Bearer a b",
        "Bearer " + "k" * 300,
        "Bearer smk_000000000000_nope",
    ],
)
async def test_malformed_or_unknown_authorization_is_401(
    auth_world: AuthWorld, header: str
) -> None:
    r = await auth_world.client.get("/v1/sessions", headers={"Authorization": header})
    assert_problem(r, 401)
    assert r.headers["www-authenticate"].startswith("Bearer")


async def test_operations_endpoints_need_no_key(auth_world: AuthWorld) -> None:
    assert (await auth_world.client.get("/healthz")).status_code == 200
    assert (await auth_world.client.get("/readyz")).status_code == 200


async def test_the_spec_declares_bearer_auth_and_its_answers(auth_world: AuthWorld) -> None:
    spec = auth_world.app.openapi()
    assert spec["components"]["securitySchemes"]["bearerAuth"]["scheme"] == "bearer"
    for path, methods in spec["paths"].items():
        for op in methods.values():
            if path.startswith("/v1/"):
                assert op["security"] == [{"bearerAuth": []}], path
                assert {"401", "403"} <= set(op["responses"]), path
            else:
                assert "security" not in op, path


# -- the lookup cache -------------------------------------------------------------------------


async def test_revocation_elsewhere_is_seen_within_the_cache_ttl(auth_world: AuthWorld) -> None:
    now = [1000.0]
    resolver = KeyResolver(auth_world.store, AuthSettings(cache_seconds=5), clock=lambda: now[0])
    key_id, secret = await make_key(auth_world, f"tc-{uuid.uuid4().hex[:6]}", ("read",))
    assert (await resolver.resolve(secret)) is not None
    # Revoked by another process (the CLI path: no resolver of ours is told).
    await key_service.revoke_key(auth_world.store, None, key_id)
    now[0] += 4.9
    assert (await resolver.resolve(secret)) is not None, "cached for the TTL"
    now[0] += 0.2
    assert (await resolver.resolve(secret)) is None
    # Unknown secrets are never cached: a key created meanwhile works at once.
    new_id, new_secret = await make_key(auth_world, f"tc-{uuid.uuid4().hex[:6]}", ("read",))
    assert (await resolver.resolve(new_secret)).id == new_id  # type: ignore[union-attr]


# -- when auth is on --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("::", False),
        ("10.0.0.5", False),
        ("example.com", False),
        ("", False),
    ],
)
def test_is_loopback(host: str, expected: bool) -> None:
    assert is_loopback(host) is expected


@pytest.mark.parametrize(
    ("host", "mode", "bootstrap", "required", "refused"),
    [
        ("127.0.0.1", "auto", None, False, False),  # the embedded default
        ("127.0.0.1", "auto", BOOTSTRAP, True, False),
        ("0.0.0.0", "auto", None, True, False),
        ("127.0.0.1", "on", None, True, False),
        ("127.0.0.1", "off", BOOTSTRAP, False, False),
        ("0.0.0.0", "off", None, False, True),
        ("10.1.2.3", "off", BOOTSTRAP, False, True),
    ],
)
def test_when_auth_is_required(
    host: str, mode: str, bootstrap: str | None, required: bool, refused: bool
) -> None:
    settings = Settings(host=host, auth={"mode": mode, "bootstrap_key": bootstrap})  # type: ignore[arg-type]
    assert auth_required(settings) is required
    assert (startup_problem(settings) is not None) is refused
    if refused:
        with pytest.raises(RuntimeError, match="loopback"):
            create_app(settings)


def test_a_short_bootstrap_key_is_refused() -> None:
    with pytest.raises(ValueError, match="32"):
        Settings(auth={"bootstrap_key": "short"})  # type: ignore[arg-type]


# -- the command line: serve's refusals, keys create / list / revoke --------------------------


def _cli(args: list[str], env: dict[str, str], timeout: float = 60) -> Any:
    import os
    import subprocess
    import sys

    from tests.conftest import ROOT

    return subprocess.run(
        [sys.executable, "-m", "app.cli", *args],
        env={**os.environ, "LOG_LEVEL": "warning", **env},
        cwd=str(ROOT),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_serve_refuses_auth_off_or_no_keys_off_loopback(tmp_path: Any) -> None:
    db = {"DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'cli.db'}"}
    r = _cli(["serve", "--host", "0.0.0.0", "--port", "1"], db | {"AUTH__MODE": "off"})
    assert r.returncode == 2 and "loopback" in r.stderr, r.stderr
    r = _cli(["serve", "--host", "0.0.0.0", "--port", "1"], db)
    assert r.returncode == 2 and "keys create" in r.stderr, r.stderr


def test_keys_cli_create_list_revoke(tmp_path: Any) -> None:
    import json

    env = {"DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'keys.db'}"}
    r = _cli(
        [
            "keys",
            "create",
            "--tenant",
            "acme",
            "--name",
            "ops",
            "--scopes",
            "read,write",
            "--prefix",
            "agent-7:",
        ],
        env,
    )
    assert r.returncode == 0, r.stderr
    created = json.loads(r.stdout)
    assert created["tenant_id"] == "acme" and created["scopes"] == ["read", "write"]
    assert created["session_prefix"] == "agent-7:" and created["secret"].startswith(created["id"])
    r = _cli(["keys", "list", "--tenant", "acme"], env)
    listed = [json.loads(line) for line in r.stdout.splitlines()]
    assert [k["id"] for k in listed] == [created["id"]] and "secret" not in listed[0]
    assert _cli(["keys", "revoke", created["id"]], env).returncode == 0
    assert _cli(["keys", "list"], env).stdout.strip() == ""
    assert json.loads(_cli(["keys", "list", "--all"], env).stdout)["revoked_at"] is not None
    r = _cli(["keys", "revoke", "smk_000000000000"], env)
    assert r.returncode == 2 and "not found" in r.stderr
    r = _cli(["keys", "create", "--tenant", "acme", "--name", "x", "--scopes", "root"], env)
    assert r.returncode == 2 and "scopes" in r.stderr
