"""GET /v1/whoami: a key learns its own tenant, scopes and prefix (the inspector offers write
actions only when `write` is among them); with auth off the caller has every scope."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from app.main import create_app
from app.services import keys as key_service
from app.store.db import Store
from tests.api.helpers import assert_problem
from tests.conftest import make_settings
from tests.support.spec_check import ASYNC_HOOKS

BOOTSTRAP = "whoami-bootstrap-key-" + "y" * 28


@pytest.fixture(scope="module")
async def auth_on(
    backend: str, request: pytest.FixtureRequest
) -> AsyncIterator[tuple[httpx.AsyncClient, Store]]:
    settings = make_settings(
        backend, request, auth={"mode": "on", "bootstrap_key": BOOTSTRAP, "bootstrap_tenant": "wb"}
    )
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost", event_hooks=ASYNC_HOOKS) as client:
            yield client, app.state.runtime.store


async def _key(
    store: Store, tenant: str, scopes: set[str], prefix: str | None = None
) -> tuple[str, str]:
    created = await key_service.insert_key(
        store,
        tenant_id=tenant,
        command=key_service.KeyCreateCommand(
            name="inspector", scopes=frozenset(scopes), session_prefix=prefix
        ),
    )
    return created.key.id, created.secret


async def test_a_key_sees_its_own_tenant_scopes_and_prefix(
    auth_on: tuple[httpx.AsyncClient, Store],
) -> None:
    client, store = auth_on
    key_id, secret = await _key(store, "tenant-w", {"read"}, prefix="agent-")
    r = await client.get("/v1/whoami", headers={"Authorization": f"Bearer {secret}"})
    assert r.status_code == 200, r.text
    assert r.json() == {
        "auth": "on",
        "tenant_id": "tenant-w",
        "key_id": key_id,
        "key_name": "inspector",
        "scopes": ["read"],
        "session_prefix": "agent-",
    }
    key_id, secret = await _key(store, "tenant-w", {"write", "read", "admin"})
    r = await client.get("/v1/whoami", headers={"Authorization": f"Bearer {secret}"})
    body = r.json()
    assert body["scopes"] == ["admin", "read", "write"] and body["session_prefix"] is None
    assert body["key_id"] == key_id and secret not in r.text


async def test_whoami_needs_a_valid_key_with_read_scope(
    auth_on: tuple[httpx.AsyncClient, Store],
) -> None:
    client, store = auth_on
    assert_problem(await client.get("/v1/whoami"), 401, "api-key-required")
    bad = await client.get("/v1/whoami", headers={"Authorization": "Bearer smk_000000000000_nope"})
    assert_problem(bad, 401, "invalid-api-key")
    _, write_only = await _key(store, "tenant-w", {"write"})
    r = await client.get("/v1/whoami", headers={"Authorization": f"Bearer {write_only}"})
    assert_problem(r, 403, "insufficient-scope")


async def test_with_auth_off_the_caller_has_every_scope(client: httpx.AsyncClient) -> None:
    r = await client.get("/v1/whoami")
    assert r.status_code == 200, r.text
    assert r.json() == {
        "auth": "off",
        "tenant_id": "default",
        "key_id": None,
        "key_name": None,
        "scopes": ["admin", "read", "write"],
        "session_prefix": None,
    }
