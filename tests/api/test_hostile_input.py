"""Hostile input: every case is a clear 4xx problem (never a 500) and stores nothing, on SQLite
and on Postgres alike (Postgres rejects NUL and lone surrogates that SQLite would keep; the
service refuses both, except NUL in items, stored as JSON text: tests/api/test_any_object.py)."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import quote, unquote

import httpx
import pytest
import sqlalchemy as sa

from app.store.db import Store
from app.store.tables import metadata as tables
from tests.api.helpers import append, assert_problem, create, user

TENANT = "default"

# The `settings` fixture: 512 KiB bodies, 64 KiB items, 1 KiB metadata, 50 items per append.


def store_of(client: httpx.AsyncClient) -> Store:
    transport = client._transport
    assert isinstance(transport, httpx.ASGITransport)
    return transport.app.state.runtime.store  # type: ignore[attr-defined,no-any-return]


async def fingerprint(client: httpx.AsyncClient) -> dict[str, Any]:
    """Every row of the default tenant, in every table."""
    out: dict[str, Any] = {}
    async with store_of(client).read() as db:
        for table in tables.sorted_tables:
            if "tenant_id" not in table.c:
                continue
            stmt = sa.select(table).where(table.c.tenant_id == TENANT)
            out[table.name] = sorted(map(repr, (await db.execute(stmt)).all()))
    return out


@pytest.fixture
async def seeded(client: httpx.AsyncClient, sid: str) -> AsyncIterator[str]:
    await create(client, sid, metadata={"a": 1})
    r = await append(client, sid, [user("hello")])
    assert r.status_code == 201
    yield sid


def raw_post(client: httpx.AsyncClient, url: str, body: bytes, **headers: str) -> Any:
    return client.post(url, content=body, headers={"content-type": "application/json", **headers})


async def test_oversized_body_is_413(client: httpx.AsyncClient, seeded: str) -> None:
    before = await fingerprint(client)
    big = json.dumps({"items": [user("x" * (600 * 1024))]}).encode()
    assert_problem(await raw_post(client, f"/v1/sessions/{seeded}/items", big), 413)

    async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: counted as it streams
        yield b'{"items": [{"type": "message", "role": "user", "content": "'
        for _ in range(80):
            yield b"y" * 8192
        yield b'"}]}'

    r = await client.post(
        f"/v1/sessions/{seeded}/items",
        content=chunks(),
        headers={"content-type": "application/json"},
    )
    assert_problem(r, 413, "body-too-large")
    assert await fingerprint(client) == before


async def test_oversized_item_metadata_and_batch(client: httpx.AsyncClient, seeded: str) -> None:
    before = await fingerprint(client)
    cases = [
        [user("x" * (70 * 1024))],  # one item over 64 KiB
        [user("ok"), user("y", metadata={"blob": "z" * 2000})],  # metadata over 1 KiB
        [user(f"m{i}") for i in range(51)],  # more than 50 items
    ]
    for items in cases:
        body = assert_problem(await append(client, seeded, items), 413)
        assert "nothing was stored" in body["detail"] or "at most" in body["detail"]
    r = await client.patch(f"/v1/sessions/{seeded}", json={"metadata": {"blob": "z" * 2000}})
    assert_problem(r, 413)
    r = await client.post("/v1/sessions", json={"metadata": {"blob": "z" * 2000}})
    assert_problem(r, 413)
    assert await fingerprint(client) == before


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize("depth", [65, 1_000, 10_000, 100_000])
async def test_deep_json_nesting_is_422(client: httpx.AsyncClient, seeded: str, depth: int) -> None:
    before = await fingerprint(client)
    bodies = [
        (
            f"/v1/sessions/{seeded}/items",
            '{"items": [{"type": "message", "role": "user", '
            f'"content": "x", "metadata": {{"deep": {nested(depth)}}}}}]}}',
        ),
        ("/v1/sessions", f'{{"metadata": {{"deep": {nested(depth)}}}}}'),
        (f"/v1/sessions/{seeded}/items", nested(depth)),
    ]
    for url, text in bodies:
        body = assert_problem(await raw_post(client, url, text.encode()), 422)
        assert body["type"].endswith(("/json-too-deep", "/invalid-json")), body
    assert await fingerprint(client) == before


async def test_nesting_within_the_limit_is_fine(client: httpx.AsyncClient, seeded: str) -> None:
    deep: Any = "leaf"
    for _ in range(40):
        deep = {"k": deep}
    r = await append(client, seeded, [user("x", metadata={"d": 1})])
    assert r.status_code == 201
    r = await client.patch(f"/v1/sessions/{seeded}", json={"metadata": {"deep": deep}})
    assert r.status_code == 200, r.text


@pytest.mark.parametrize(
    "raw_id",
    [
        "%2E%2E",  # (a literal ".." is resolved by every HTTP client before sending)
        "..%2Fetc%2Fpasswd",
        "a%2Fb",
        "a%2fb",
        "%00",
        "a%00b",
        "%2e",
        "x" * 257,
        "a%0Ab",
        "a%0D%0AX-Injected:%201",
        "a%E2%80%8Bb",  # zero-width space
        "a%E2%80%AEb",  # right-to-left override
    ],
)
async def test_ids_with_path_tricks(client: httpx.AsyncClient, seeded: str, raw_id: str) -> None:
    before = await fingerprint(client)
    for method, url, body in [
        ("GET", f"/v1/sessions/{raw_id}", None),
        ("POST", f"/v1/sessions/{raw_id}/items?create=true", {"items": [user("x")]}),
        ("PATCH", f"/v1/sessions/{raw_id}", {"metadata": {}}),
        ("DELETE", f"/v1/sessions/{raw_id}", None),
        ("GET", f"/v1/sessions/{seeded}/items/{raw_id}", None),
    ]:
        # httpx would normalise "..": send the path exactly as written.
        request = client.build_request(method, url, json=body)
        request.url = request.url.copy_with(raw_path=url.encode())
        r = await client.send(request)
        assert 400 <= r.status_code < 500, (method, url, r.status_code, r.text)
        assert r.headers["content-type"].startswith("application/problem+json"), (url, r.text)
    for bad in [unquote(raw_id), "../x", "a/b", "x\u0000", ""]:
        r = await client.post("/v1/sessions", json={"id": bad})
        assert_problem(r, 422)
    # Item ids keep their narrower rule (ASCII letters, digits, ``._:-``).
    for bad in [raw_id, unquote(raw_id), "../x", "a/b", "x\u0000", "é", ""]:
        r = await append(client, seeded, [user("x", id=bad)])
        assert_problem(r, 422)
    assert await fingerprint(client) == before


@pytest.mark.parametrize(
    "raw_id", ["a%5Cb", "a%20b", "x" * 200, "%C3%BC", "~root", "-leading", "a%40b", "%25"]
)
async def test_former_path_tricks_are_plain_session_ids(
    client: httpx.AsyncClient, raw_id: str
) -> None:
    """Session ids are 1-256 characters but '/' and control/format characters: these are
    ids like any other, decoded once, and come back as they were meant."""
    tag = uuid.uuid4().hex[:6]
    sid = unquote(raw_id) + tag
    url = f"/v1/sessions/{raw_id}{tag}/items?create=true"
    request = client.build_request("POST", url, json={"items": [user("x")]})
    request.url = request.url.copy_with(raw_path=url.encode())
    r = await client.send(request)
    assert r.status_code == 201, r.text
    r = await client.get("/v1/sessions/" + quote(sid, safe=""))
    assert r.status_code == 200 and r.json()["id"] == sid, r.text
    assert (await client.delete("/v1/sessions/" + quote(sid, safe=""))).status_code == 204


SQL = [
    "x' OR '1'='1",
    "'; DROP TABLE sessions; --",
    '" OR ""="',
    "%",
    "_",
    "\\",
    "1; SELECT pg_sleep(5)",
]


async def test_sql_fragments_are_data(client: httpx.AsyncClient, seeded: str) -> None:
    before = await fingerprint(client)
    for frag in SQL:
        assert_problem(await client.get("/v1/sessions/" + quote(frag, safe="")), 404)
        r = await client.get(f"/v1/sessions/{seeded}/items/" + quote(frag, safe=""))
        assert_problem(r, 404)
        # Item ids keep their narrow rule: a fragment is not one.
        assert_problem(await append(client, seeded, [user("x", id=frag)]), 422)
    assert await fingerprint(client) == before
    # As content they are stored and returned verbatim.
    r = await append(client, seeded, [user(frag, metadata={"q": frag}) for frag in SQL])
    assert r.status_code == 201, r.text
    r = await client.get(f"/v1/sessions/{seeded}/items", params={"last": len(SQL)})
    assert [i["content"] for i in r.json()["items"]] == SQL
    # As session ids (any characters but '/' and control ones) they are ids like any other.
    tag = uuid.uuid4().hex[:6]
    made = [frag + tag for frag in SQL]
    for sid in made:
        r = await client.post("/v1/sessions", json={"id": sid})
        assert r.status_code == 201, r.text
        r = await client.get("/v1/sessions/" + quote(sid, safe=""))
        assert r.status_code == 200 and r.json()["id"] == sid, r.text
    assert (await client.get(f"/v1/sessions/{seeded}")).status_code == 200
    # A prefix filter made of LIKE wildcards matches literally, not everything.
    for wildcard in ("%", "_", "t%", "\\"):
        r = await client.get("/v1/sessions", params={"prefix": wildcard, "limit": 1000})
        assert r.status_code == 200, r.text
        listed = [s["id"] for s in r.json()["items"]]
        assert all(i.startswith(wildcard) for i in listed), wildcard
        assert sorted(i for i in made if i.startswith(wildcard)) == sorted(set(listed) & set(made))


@pytest.mark.parametrize(
    "text",
    [
        r'"\ud800"',  # lone high surrogate
        r'"\udfff"',  # lone low surrogate
        r'"a\ud800b"',
        r'"\ude00\ud83d"',  # a pair in the wrong order
    ],
)
async def test_lone_surrogates_are_422(
    client: httpx.AsyncClient, seeded: str, text: str
) -> None:
    before = await fingerprint(client)
    for url, body in [
        (
            f"/v1/sessions/{seeded}/items",
            '{"items": [{"type": "message", "role": "user", "content": TEXT}]}'.replace(
                "TEXT", text
            ),
        ),
        (
            f"/v1/sessions/{seeded}/items",
            '{"items": [{"type": "message", "role": "user", "content": "x", '
            '"metadata": {TEXT: 1}}]}'.replace("TEXT", text),
        ),
        ("/v1/sessions", '{"metadata": {"k": TEXT}}'.replace("TEXT", text)),
        (f"/v1/sessions/{seeded}", '{"summary": TEXT}'.replace("TEXT", text)),
    ]:
        method = "PATCH" if url.endswith(seeded) else "POST"
        r = await client.request(
            method, url, content=body.encode(), headers={"content-type": "application/json"}
        )
        problem = assert_problem(r, 422, "invalid-json")
        assert problem["errors"][0]["loc"][0] == "body"
    assert await fingerprint(client) == before


async def test_nul_in_the_url_is_422(client: httpx.AsyncClient, seeded: str) -> None:
    before = await fingerprint(client)
    for url in (
        f"/v1/sessions/{seeded}%00",
        "/v1/sessions?prefix=%00",
        "/v1/sessions/a%00b",
        f"/v1/sessions/{seeded}/items?after_seq=%00",
    ):
        request = client.build_request("GET", url)
        request.url = request.url.copy_with(raw_path=url.encode())
        assert_problem(await client.send(request), 422)
    assert await fingerprint(client) == before


async def test_odd_but_valid_unicode_round_trips(client: httpx.AsyncClient, seeded: str) -> None:
    texts = ["😀", "\u200b\u202e\ufeff", "e\u0301", "\uffff", "\U0010ffff", "ß" * 10]
    r = await append(client, seeded, [user(t, metadata={"t": t}) for t in texts])
    assert r.status_code == 201, r.text
    r = await client.get(f"/v1/sessions/{seeded}/items", params={"last": len(texts)})
    got = r.json()["items"]
    assert [i["content"] for i in got] == texts
    assert [i["metadata"]["t"] for i in got] == texts
    # A surrogate pair written as JSON escapes is one character, accepted.
    body = b'{"items": [{"type": "message", "role": "user", "content": "\\ud83d\\ude00"}]}'
    r = await raw_post(client, f"/v1/sessions/{seeded}/items", body)
    assert r.status_code == 201, r.text
    assert r.json()["items"][0]["content"] == "\U0001f600"


@pytest.mark.parametrize(
    "body",
    [
        b'{"items": [{"type": "message", "role": "user", "content": "\xff\xfe"}]}',
        b'{"items": [{"type": "message", "role": "user", "content": "\xed\xa0\x80"}]}',  # CESU
        b'{"items": [{"type": "message", "role": "user", "content": "\xc0\xaf"}]}',  # overlong
        b"\xef\xbb\xbf{}",  # a BOM
        b'{"items": [',
        b'{"items": [{"type": "message", "role": "user", "content": NaN}]}',
        b'{"metadata": {"n": 1e999}}',
        b"\x00",
    ],
)
async def test_invalid_utf8_and_unstorable_json_are_422(
    client: httpx.AsyncClient, seeded: str, body: bytes
) -> None:
    before = await fingerprint(client)
    for url in (f"/v1/sessions/{seeded}/items", "/v1/sessions"):
        assert_problem(await raw_post(client, url, body), 422)
    assert await fingerprint(client) == before


async def test_integers_of_any_size_are_kept_exactly(client: httpx.AsyncClient, seeded: str) -> None:
    values = [2**63 - 1, -(2**63), 2**64 - 1, 10**18, 2**64, -(2**63) - 1, 10**40, -(10**30)]
    r = await client.patch(f"/v1/sessions/{seeded}", json={"metadata": {"n": values, "deep": [{"x": 10**25}]}})
    assert r.status_code == 200, r.text
    assert r.json()["metadata"]["n"] == values
    r = await client.get(f"/v1/sessions/{seeded}")
    assert r.json()["metadata"] == {"n": values, "deep": [{"x": 10**25}]}
    item = {"type": "message", "role": "user", "content": "big", "metadata": {"id": 2**70}}
    r = await client.post(f"/v1/sessions/{seeded}/items", json={"items": [item]})
    assert r.status_code == 201, r.text
    assert r.json()["items"][0]["metadata"] == {"id": 2**70}
    got = (await client.get(f"/v1/sessions/{seeded}/items", params={"last": 1})).json()["items"][0]
    assert got["metadata"] == {"id": 2**70}
    tool = {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_big", "name": "f", "input": {"n": 10**30}}]}
    r = await client.post(f"/v1/sessions/{seeded}/items", json={"format": "anthropic", "items": [{"role": "user", "content": "go"}, tool]})
    assert r.status_code == 201, r.text
    ctx = (await client.get(f"/v1/sessions/{seeded}/context", params={"format": "anthropic", "dangling_tool_calls": "placeholder"})).json()
    uses = [b for m in ctx["messages"] if isinstance(m["content"], list) for b in m["content"] if b["type"] == "tool_use"]
    assert uses and uses[-1]["input"] == {"n": 10**30}


async def test_wrong_content_type_is_a_4xx(client: httpx.AsyncClient, seeded: str) -> None:
    before = await fingerprint(client)
    for content_type in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data"):
        r = await client.post(
            f"/v1/sessions/{seeded}/items",
            content=json.dumps({"items": [user("x")]}).encode(),
            headers={"content-type": content_type},
        )
        assert 400 <= r.status_code < 500, (content_type, r.status_code, r.text)
        assert r.headers["content-type"].startswith("application/problem+json")
    assert await fingerprint(client) == before


@pytest.mark.parametrize(
    "headers",
    [
        {"If-Match": "not-a-version"},
        {"If-Match": '"99999999999999999999999"'},
        {"Idempotency-Key": "x" * 300},
        {"Idempotency-Key": "caf\u00e9"},
    ],
)
async def test_hostile_headers(
    client: httpx.AsyncClient, seeded: str, headers: dict[str, str]
) -> None:
    before = await fingerprint(client)
    encoded = {k: v.encode("latin-1") for k, v in headers.items()}
    r = await client.post(
        f"/v1/sessions/{seeded}/items", json={"items": [user("x")]}, headers=encoded
    )
    assert 400 <= r.status_code < 500, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    assert await fingerprint(client) == before


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b'{"a": "x\\u0000"}', "invalid-json"),  # NUL in a string
        (b'{"k\\u0000": 1}', "invalid-json"),  # NUL in a key
        (b'{"a": "\\\\u0000"}', None),  # a backslash, then "u0000": no NUL
        (b"[" * 5 + b"]" * 5, None),  # as deep as allowed
        (b"[" * 6 + b"]" * 6, "json-too-deep"),
        (b'{"a": "[[[[[[[[", "b": [[[1]]]}', None),  # brackets in a string do not nest
    ],
)
def test_the_body_check_walks_only_bodies_that_could_fail_it(body: bytes, code: str | None) -> None:
    """The walk for NULs and depth is skipped when the bytes prove it would find nothing; a
    body that could fail it is always walked."""
    from app.api.body_guard import _Refused, check_json_body

    if code is None:
        check_json_body(body, max_depth=5)
    else:
        with pytest.raises(_Refused) as refused:
            check_json_body(body, max_depth=5)
        assert refused.value.code == code


async def test_an_item_whose_type_is_not_a_string_is_stored_or_422(client: httpx.AsyncClient, sid: str) -> None:
    """Any JSON can sit where ``type`` goes (a fuzzer sent an object): never a 500. Without a
    ``role`` the object is an untyped opaque item, stored as sent; with one it is a message
    missing its type, a 422 (tests/api/test_any_object.py)."""
    for kind in ({"a": 1}, [1], 3, None):
        item = {"type": kind, "x": 1}
        r = await client.post(f"/v1/sessions/{sid}/items?create=true", json={"items": [item]})
        assert r.status_code == 201, (kind, r.text)
        assert {k: v for k, v in r.json()["items"][0].items() if k in item} == item
        r = await client.post(
            f"/v1/sessions/{sid}/items", json={"items": [{**item, "role": "user"}]}
        )
        assert r.status_code == 422, (kind, r.text)
