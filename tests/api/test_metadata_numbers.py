"""Metadata and config are kept as sent on every backend, numbers and key order included.

Issue 31: Postgres stored session and item metadata as JSONB, which turned ``1.5e308`` into a
309-digit integer, ``-0.0`` into ``0`` and reordered keys; SQLite kept them. Each read that
shows metadata is checked for equal values AND the JSON text the service writes on SQLite
(``jsonutil.dumps`` of what was sent), on both backends: GET session, list, PATCH, items,
history, search hits, snapshot export, fork (its answer, GET and items), the one-statement
append and ``?create=true``. A number no JSON double holds (``1e400``) is refused, unstored.
"""

from __future__ import annotations

import json
import math
from typing import Any
from urllib.parse import quote

import httpx

from app import jsonutil
from tests.api.helpers import assert_problem

# Sent as text: the literals are exactly these (``-0.0`` and ``1e-320`` survive any parser
# that reads doubles; Postgres numeric does not keep them).
SESSION_META = (
    '{"z_first": 1.5e308, "neg_zero": -0.0, "subnormal": 1e-320,'
    ' "beyond_int64": 12345678901234567890, "tenth": 0.1,'
    ' "nested": {"b": [1.5e308, {"k": -0.0}], "a": 1e-320}, "a_last": true}'
)
ITEM_META = '{"zz": -0.0, "big": 1.5e308, "deep": {"y": [12345678901234567890, 0.1], "x": 1e-320}}'
CONFIG = '{"context": {"max_items": 7}, "ttl_seconds": null}'


def expected(text: str) -> tuple[Any, str]:
    """The value Python's JSON reads, and the text the service writes for it."""
    value = json.loads(text)
    return value, jsonutil.dumps(value)


def same(value: Any, want: Any) -> bool:
    """Equal, and equal in kind: -0.0 is not 0.0, a float is not an int, keys in order."""
    if isinstance(want, dict):
        return (
            isinstance(value, dict)
            and list(value) == list(want)
            and all(same(value[k], want[k]) for k in want)
        )
    if isinstance(want, list):
        return (
            isinstance(value, list)
            and len(value) == len(want)
            and all(same(v, w) for v, w in zip(value, want, strict=True))
        )
    if isinstance(want, float):
        return (
            isinstance(value, float)
            and value == want
            and math.copysign(1, value) == math.copysign(1, want)
        )
    return type(value) is type(want) and value == want


def check(response: httpx.Response, text: str, *found: Any) -> None:
    """``response`` holds ``text``'s value in each of ``found`` and its text in its body."""
    assert response.status_code in (200, 201), response.text
    want, want_text = expected(text)
    for value in found:
        assert same(value, want), (value, want)
    assert want_text in response.text, (want_text, response.text)


def path(sid: str) -> str:
    return "/v1/sessions/" + quote(sid, safe="")


def post(client: httpx.AsyncClient, url: str, text: str, **kw: Any) -> Any:
    return client.post(url, content=text, headers={"content-type": "application/json"}, **kw)


def parse(response: httpx.Response) -> Any:
    return json.loads(response.text)  # Python's json: exact for big integers, -0.0 kept


async def test_session_metadata_round_trips_on_every_read(
    client: httpx.AsyncClient, sid: str
) -> None:
    r = await post(
        client, "/v1/sessions", f'{{"id": "{sid}", "metadata": {SESSION_META}, "config": {CONFIG}}}'
    )
    check(r, SESSION_META, parse(r)["metadata"])
    r = await client.get(path(sid))
    check(r, SESSION_META, parse(r)["metadata"])
    r = await client.get("/v1/sessions", params={"prefix": sid})
    check(r, SESSION_META, *(s["metadata"] for s in parse(r)["items"]))
    assert parse(r)["items"][0]["config"]["context"] == {"max_items": 7}

    r = await client.post(f"{path(sid)}/snapshots", json={"label": "meta"})
    assert r.status_code == 201, r.text
    snapshot_id = r.json()["id"]
    r = await client.get(f"{path(sid)}/snapshots/{snapshot_id}")
    check(r, SESSION_META, parse(r)["metadata"])

    fork_id = sid + "-fork"
    r = await client.post(f"{path(sid)}/fork", json={"new_session_id": fork_id})
    check(r, SESSION_META, parse(r)["metadata"])
    r = await client.get(path(fork_id))
    check(r, SESSION_META, parse(r)["metadata"])
    fork2 = sid + "-fork2"
    r = await client.post(
        f"{path(sid)}/fork", json={"new_session_id": fork2, "snapshot_id": snapshot_id}
    )
    check(r, SESSION_META, parse(r)["metadata"])

    r = await client.patch(
        path(sid),
        content=f'{{"metadata": {ITEM_META}}}',
        headers={"content-type": "application/json"},
    )
    check(r, ITEM_META, parse(r)["metadata"])
    r = await client.get(path(sid))
    check(r, ITEM_META, parse(r)["metadata"])


async def test_item_metadata_round_trips_on_every_read(client: httpx.AsyncClient, sid: str) -> None:
    item = f'{{"type": "message", "role": "user", "content": "quasar tidings", "metadata": {ITEM_META}}}'
    # ?create=true (the general write path), then an append to an existing session (on
    # Postgres the one-statement append)
    r = await post(client, f"{path(sid)}/items?create=true", f'{{"items": [{item}]}}')
    assert r.status_code == 201, r.text
    r = await post(client, f"{path(sid)}/items", f'{{"items": [{item}]}}')
    assert r.status_code == 201, r.text

    r = await client.get(f"{path(sid)}/items")
    check(r, ITEM_META, *(i["metadata"] for i in parse(r)["items"]))
    assert len(parse(r)["items"]) == 2
    first_id = parse(r)["items"][0]["id"]
    r = await client.get(f"{path(sid)}/items/{first_id}")
    check(r, ITEM_META, parse(r)["metadata"])
    r = await client.get(f"{path(sid)}/history")
    check(r, ITEM_META, *(i["metadata"] for i in parse(r)["items"]))
    r = await client.get(f"{path(sid)}/search", params={"q": "quasar", "mode": "fulltext"})
    hits = parse(r)["items"]
    assert len(hits) == 2, r.text
    check(r, ITEM_META, *(h["item"]["metadata"] for h in hits))

    r = await client.post(f"{path(sid)}/snapshots", json={})
    assert r.status_code == 201, r.text
    r = await client.get(f"{path(sid)}/snapshots/{r.json()['id']}")
    check(r, ITEM_META, *(i["metadata"] for i in parse(r)["items"]))

    fork_id = sid + "-fork"
    r = await client.post(f"{path(sid)}/fork", json={"new_session_id": fork_id})
    assert r.status_code == 201, r.text
    r = await client.get(f"{path(fork_id)}/items")
    check(r, ITEM_META, *(i["metadata"] for i in parse(r)["items"]))


async def test_a_number_no_double_holds_is_refused(client: httpx.AsyncClient, sid: str) -> None:
    assert_problem(
        await post(client, "/v1/sessions", f'{{"id": "{sid}", "metadata": {{"x": 1e400}}}}'),
        422,
        "invalid-json",
    )
    assert_problem(await client.get(path(sid)), 404)
    item = '{"type": "message", "role": "user", "content": "hi", "metadata": {"x": -1e400}}'
    assert_problem(
        await post(client, f"{path(sid)}/items?create=true", f'{{"items": [{item}]}}'),
        422,
        "invalid-json",
    )
    assert_problem(await client.get(path(sid)), 404)
