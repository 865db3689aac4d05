"""Session ids real applications use, over HTTP, on both backends: emails, spaces, a leading
underscore, ``tenant:user``, UUIDs, 256 characters, non-ASCII. Each is percent-encoded in the
path (as clients do) and comes back exactly as created. What the rule refuses (empty, 257
characters, ``/`` or ``%2F``, control and invisible format characters, ``.`` and ``..``) is a
422 problem naming the rule, and creates nothing. Key prefixes made of the new characters
still confine."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx
import pytest
import sqlalchemy as sa

from app.domain.errors import InvalidInput
from app.domain.ids import SESSION_ID_MAX
from app.main import create_app
from app.services import keys as key_service
from app.store.db import Store
from app.store.tables import sessions as sessions_table
from tests.api.helpers import assert_problem, user
from tests.conftest import make_settings
from tests.support.spec_check import ASYNC_HOOKS


def path(sid: str) -> str:
    """The session's URL, its id percent-encoded as one path segment (what clients send)."""
    return "/v1/sessions/" + quote(sid, safe="")


def unique() -> str:
    return uuid.uuid4().hex[:10]


# Each form, made unique per run by a suffix (or, for the 256-character one, a prefix).
ACCEPTED: dict[str, Any] = {
    "email": lambda u: f"user-{u}@example.com",
    "space": lambda u: f"user 17 {u}",
    "underscore": lambda u: f"_private-{u}",
    "colon": lambda u: f"tenant:user-{u}",
    "uuid": lambda u: str(uuid.uuid4()),
    "max-length": lambda u: u + "x" * (SESSION_ID_MAX - len(u)),
    "max-length-non-ascii": lambda u: u + "会" * (SESSION_ID_MAX - len(u)),
    "non-ascii": lambda u: f"café-会话-{u}",
    "emoji": lambda u: f"😀-{u}",
    "leading-and-trailing-space": lambda u: f" {u} ",
    "percent-and-plus": lambda u: f"100%+{u}",
    "query-and-fragment-chars": lambda u: f"a?b#c&d={u}",
    "backslash-and-quotes": lambda u: f"a\\b'c\"{u}",
    "dots": lambda u: f"...{u}",
}


@pytest.mark.parametrize("form", list(ACCEPTED))
async def test_accepted_id_round_trips(client: httpx.AsyncClient, form: str) -> None:
    sid = ACCEPTED[form](unique())
    r = await client.post("/v1/sessions", json={"id": sid})
    assert r.status_code == 201, r.text
    assert r.json()["id"] == sid

    r = await client.get(path(sid))
    assert r.status_code == 200, r.text
    assert r.json()["id"] == sid

    r = await client.post(path(sid) + "/items", json={"items": [user("hello")]})
    assert r.status_code == 201, r.text
    r = await client.get(path(sid) + "/items")
    assert r.status_code == 200, r.text
    assert [i["content"] for i in r.json()["items"]] == ["hello"]

    r = await client.post(path(sid) + "/context", json={})
    assert r.status_code == 200, r.text

    r = await client.get("/v1/sessions", params={"prefix": sid})
    assert r.status_code == 200, r.text
    assert [s["id"] for s in r.json()["items"]] == [sid]

    r = await client.delete(path(sid))
    assert r.status_code == 204, r.text
    assert_problem(await client.get(path(sid)), 404, "session-not-found")


async def test_append_can_create_a_session_with_such_an_id(client: httpx.AsyncClient) -> None:
    sid = f"tenant:user@example.com {unique()}"
    r = await client.post(path(sid) + "/items?create=true", json={"items": [user("hi")]})
    assert r.status_code == 201, r.text
    assert (await client.get(path(sid))).json()["id"] == sid


async def test_fork_and_snapshots_take_such_ids(client: httpx.AsyncClient) -> None:
    origin = f"origin {unique()}@example.com"
    copy = f"fork: café {unique()}"
    assert (
        await client.post(path(origin) + "/items?create=true", json={"items": [user("a")]})
    ).status_code == 201
    r = await client.post(path(origin) + "/snapshots", json={"label": "s"})
    assert r.status_code == 201, r.text
    snapshot_id = r.json()["id"]
    r = await client.get(path(origin) + "/snapshots/" + snapshot_id)
    assert r.status_code == 200, r.text
    r = await client.post(path(origin) + "/fork", json={"new_session_id": copy})
    assert r.status_code == 201, r.text
    assert r.json()["id"] == copy
    r = await client.get(path(copy) + "/items")
    assert [i["content"] for i in r.json()["items"]] == ["a"]


async def test_the_list_cursor_is_any_session_id(client: httpx.AsyncClient) -> None:
    stem = f"list {unique()} "
    ids = sorted(stem + s for s in ("a", "b@x", "c:d", "é", "会", "😀"))
    for sid in ids:
        assert (await client.post("/v1/sessions", json={"id": sid})).status_code == 201
    seen: list[str] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"prefix": stem, "limit": 2}
        if cursor is not None:
            params["cursor"] = cursor
        r = await client.get("/v1/sessions", params=params)
        assert r.status_code == 200, r.text
        seen += [s["id"] for s in r.json()["items"]]
        cursor = r.json()["next_cursor"]
        if cursor is None:
            break
    assert sorted(seen) == ids and len(seen) == len(ids)


# --- refused ------------------------------------------------------------------------------

# (NUL is refused before validation, as in every string: tests/api/test_hostile_input.py.)
REFUSED_IN_BODY = {
    "empty": "",
    "too-long": "x" * (SESSION_ID_MAX + 1),
    "too-long-non-ascii": "会" * (SESSION_ID_MAX + 1),
    "slash": "a/b",
    "newline": "a\nb",
    "trailing-newline": "ab\n",
    "tab": "a\tb",
    "del": "a\x7fb",
    "c1-control": "a\x85b",
    "line-separator": "a\u2028b",
    "paragraph-separator": "a\u2029b",
    "zero-width-space": "a\u200bb",
    "bidi-override": "a\u202eb",
    "byte-order-mark": "\ufeffab",
    "dot": ".",
    "dot-dot": "..",
}


async def _sessions_named(client: httpx.AsyncClient, *ids: str) -> list[str]:
    """The ids among ``ids`` that a session row holds, in any tenant (read from the store)."""
    transport = client._transport
    assert isinstance(transport, httpx.ASGITransport)
    store: Store = transport.app.state.runtime.store  # type: ignore[attr-defined]
    async with store.read() as db:
        stmt = sa.select(sessions_table.c.id).where(sessions_table.c.id.in_(ids))
        return list((await db.execute(stmt)).scalars())


@pytest.mark.parametrize("form", list(REFUSED_IN_BODY))
async def test_refused_ids_in_a_body_are_422(
    client: httpx.AsyncClient, form: str, sid: str
) -> None:
    bad = REFUSED_IN_BODY[form]
    body = assert_problem(await client.post("/v1/sessions", json={"id": bad}), 422)
    assert any("session id" in e["msg"] and "256" in e["msg"] for e in body["errors"]), body
    assert (await client.post("/v1/sessions", json={"id": sid})).status_code == 201
    body = assert_problem(await client.post(path(sid) + "/fork", json={"new_session_id": bad}), 422)
    assert any("session id" in e["msg"] for e in body["errors"]), body
    assert await _sessions_named(client, bad) == []


REFUSED_IN_PATH = {
    "too-long": "x" * (SESSION_ID_MAX + 1),
    "encoded-slash": "a%2Fb",
    "encoded-slash-lowercase": "a%2fitems",
    "encoded-newline": "a%0Ab",
    "trailing-encoded-newline": "ab%0A",
    "encoded-tab": "a%09b",
    "encoded-del": "a%7Fb",
    "encoded-c1": "a%C2%85b",
    "encoded-zero-width-space": "a%E2%80%8Bb",
    "encoded-line-separator": "a%E2%80%A8b",
    "encoded-dot": "%2E",
    "encoded-dot-dot": "%2E%2E",
}


async def _send_raw(
    client: httpx.AsyncClient, method: str, url: str, **kwargs: Any
) -> httpx.Response:
    # Exactly as written: httpx would otherwise re-encode or normalise some of these.
    request = client.build_request(method, url, **kwargs)
    request.url = request.url.copy_with(raw_path=url.encode())
    return await client.send(request)


@pytest.mark.parametrize("form", list(REFUSED_IN_PATH))
async def test_refused_ids_in_a_path_are_422(client: httpx.AsyncClient, form: str) -> None:
    raw = REFUSED_IN_PATH[form]
    for method, suffix, body in [
        ("POST", "/items?create=true", {"items": [user("x")]}),
        ("GET", "", None),
        ("GET", "/items", None),
        ("PATCH", "", {"metadata": {}}),
        ("DELETE", "", None),
        ("POST", "/context", {}),
    ]:
        r = await _send_raw(client, method, f"/v1/sessions/{raw}{suffix}", json=body)
        problem = assert_problem(r, 422)
        text = problem["detail"] + " ".join(e["msg"] for e in problem["errors"])
        assert "session id" in text or "URL path" in text, problem
    decoded = {"a/b", "a/items", "a", "a\nb", "ab\n", "ab", "a\tb", "a\x7fb", "a\x85b", ".", ".."}
    assert await _sessions_named(client, *decoded, "x" * (SESSION_ID_MAX + 1)) == []


async def test_an_encoded_slash_does_not_reach_another_route(
    client: httpx.AsyncClient, sid: str
) -> None:
    # Decoded, "/v1/sessions/{sid}%2Fitems" would be the items route of `sid`.
    assert (await client.post("/v1/sessions", json={"id": sid})).status_code == 201
    r = await _send_raw(client, "POST", f"/v1/sessions/{sid}%2Fitems", json={"items": [user("x")]})
    problem = assert_problem(r, 422)
    assert "%2F" in problem["detail"]
    assert (await client.get(path(sid))).json()["item_count"] == 0


# --- key prefixes ---------------------------------------------------------------------------

BOOTSTRAP = "bootstrap-key-for-session-id-tests-" + "y" * 16


@dataclass
class KeyWorld:
    client: httpx.AsyncClient
    store: Store


@pytest.fixture(scope="module")
async def key_world(backend: str, request: pytest.FixtureRequest) -> AsyncIterator[KeyWorld]:
    settings = make_settings(
        backend,
        request,
        auth={"mode": "on", "bootstrap_key": BOOTSTRAP, "bootstrap_tenant": "boot"},
    )
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost", event_hooks=ASYNC_HOOKS) as client:
            yield KeyWorld(client, app.state.runtime.store)


async def make_key(
    world: KeyWorld, tenant: str, scopes: tuple[str, ...], prefix: str | None = None
) -> str:
    created = await key_service.insert_key(
        world.store,
        tenant_id=tenant,
        command=key_service.KeyCreateCommand(
            name="k", scopes=frozenset(scopes), session_prefix=prefix
        ),
    )
    return created.secret


def bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


@pytest.mark.parametrize("prefix", ["a:", "user@example.com:", "team a ", "café:", "_", "%", "."])
async def test_a_prefix_of_new_characters_confines(key_world: KeyWorld, prefix: str) -> None:
    c = key_world.client
    tenant = f"ids-{unique()}"
    full = await make_key(key_world, tenant, ("read", "write", "admin"))
    confined = await make_key(key_world, tenant, ("read", "write"), prefix=prefix)
    inside = [prefix + "1", prefix + " x@y", prefix + "会"]
    # Outside: the prefix with its last character changed, the prefix further in, a case
    # variant, and an id that a LIKE wildcard ('%', '_') would match if it were not escaped.
    outside = [prefix[:-1] + "#1", "zz" + prefix, "x1"]
    if prefix.swapcase() != prefix:
        outside.append(prefix.swapcase() + "1")
    for sid in inside + outside:
        r = await c.post("/v1/sessions", json={"id": sid}, headers=bearer(full))
        assert r.status_code == 201, r.text
    listed = (await c.get("/v1/sessions", headers=bearer(confined))).json()
    assert sorted(s["id"] for s in listed["items"]) == sorted(inside)
    for sid in inside:
        assert (await c.get(path(sid), headers=bearer(confined))).status_code == 200
        r = await c.post(
            path(sid) + "/items", json={"items": [user("x")]}, headers=bearer(confined)
        )
        assert r.status_code == 201, r.text
    for sid in outside:
        assert_problem(await c.get(path(sid), headers=bearer(confined)), 404, "session-not-found")
        r = await c.post(
            path(sid) + "/items", json={"items": [user("x")]}, headers=bearer(confined)
        )
        assert_problem(r, 404)
    r = await c.post(
        path("zz" + prefix + "new") + "/items?create=true",
        json={"items": [user("x")]},
        headers=bearer(confined),
    )
    # a create outside the prefix is told the prefix (the key knows it: nothing leaks)
    assert repr(prefix) in assert_problem(r, 403, "outside-key-prefix")["detail"]
    assert_problem(await c.get(path("zz" + prefix + "new"), headers=bearer(full)), 404)
    # Generated ids land inside the prefix.
    r = await c.post("/v1/sessions", json={}, headers=bearer(confined))
    assert r.status_code == 201, r.text
    assert r.json()["id"].startswith(prefix)


async def test_keys_take_prefixes_of_session_id_characters(key_world: KeyWorld) -> None:
    c = key_world.client
    for bad in ("a/", "a\n", "x" * (SESSION_ID_MAX + 1), "a\u200b"):
        with pytest.raises(InvalidInput, match="session prefix"):
            await make_key(key_world, "boot", ("read",), prefix=bad)
    tenant = f"idk-{unique()}"
    admin = await make_key(key_world, tenant, ("read", "write", "admin"))
    long_prefix = "p" * SESSION_ID_MAX
    for prefix in ("tenant:user@", "team a ", "café-", long_prefix):
        r = await c.post(
            "/v1/admin/keys",
            json={"name": "child", "scopes": ["read"], "session_prefix": prefix},
            headers=bearer(admin),
        )
        assert r.status_code == 201, r.text
        assert r.json()["session_prefix"] == prefix
    for bad in ("a/", "a\n", "x" * (SESSION_ID_MAX + 1), "", "a\u200b"):
        r = await c.post(
            "/v1/admin/keys",
            json={"name": "child", "scopes": ["read"], "session_prefix": bad},
            headers=bearer(admin),
        )
        body = assert_problem(r, 422)
        assert any("prefix" in e["msg"] for e in body["errors"]), body
    # A confined admin grants only inside its own prefix, whatever the characters.
    confined = await make_key(key_world, tenant, ("read", "admin"), prefix="team a:")
    r = await c.post(
        "/v1/admin/keys",
        json={"name": "narrow", "scopes": ["read"], "session_prefix": "team a:b c"},
        headers=bearer(confined),
    )
    assert r.status_code == 201, r.text
    r = await c.post(
        "/v1/admin/keys",
        json={"name": "wide", "scopes": ["read"], "session_prefix": "team a"},
        headers=bearer(confined),
    )
    assert_problem(r, 403, "forbidden")
