"""One way to page (issue 34 item 8): every list answers ``next_cursor`` and takes it back as
``cursor``; a client that follows it from the first page reaches the end, seeing each entry
once, in the order one page of everything gives. On both backends."""

from __future__ import annotations

import uuid
from typing import Any

import httpx

from tests.api.helpers import assert_problem, user


def key_of(entry: dict[str, Any], key: str) -> Any:
    return tuple(entry[k] for k in key.split(","))


async def walk(client: httpx.AsyncClient, path: str, key: str, **params: Any) -> list[Any]:
    """Every entry's ``key`` over all pages of ``limit=2``, following ``next_cursor``."""
    seen: list[Any] = []
    cursor = None
    for _ in range(100):
        query = dict(params, limit=2) | ({"cursor": cursor} if cursor is not None else {})
        r = await client.get(path, params=query)
        assert r.status_code == 200, (path, r.text)
        page = r.json()
        assert len(page["items"]) <= 2
        seen += [key_of(entry, key) for entry in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            return seen
    raise AssertionError(f"{path}: next_cursor never ended (a loop on one page?)")


async def whole(client: httpx.AsyncClient, path: str, key: str, **params: Any) -> list[Any]:
    r = await client.get(path, params=dict(params, limit=params.pop("limit", 100)))
    assert r.status_code == 200, (path, r.text)
    assert r.json()["next_cursor"] is None
    return [key_of(entry, key) for entry in r.json()["items"]]


async def test_following_next_cursor_reaches_the_end_of_every_list(
    client: httpx.AsyncClient,
) -> None:
    tag = uuid.uuid4().hex[:10]
    word = f"pagingword{tag}"
    sids = [f"pg-{tag}-{n}" for n in range(5)]
    for s in sids:
        r = await client.post("/v1/sessions", json={"id": s})
        assert r.status_code == 201, r.text
    sid = sids[0]
    base = f"/v1/sessions/{sid}"
    r = await client.post(
        f"{base}/items", json={"items": [user(f"{word} turn {n}") for n in range(7)]}
    )
    assert r.status_code == 201, r.text
    for keep in (4, 3, 2):
        r = await client.post(f"{base}/compact", json={"policy": "window", "keep_last_items": keep})
        assert r.status_code == 200, r.text
        r = await client.post(f"{base}/items", json={"items": [user(f"{word} later {keep}")]})
        assert r.status_code == 201, r.text
    for n in range(3):
        r = await client.post(f"{base}/snapshots", json={"label": f"s{n}"})
        assert r.status_code == 201, r.text
    for s in sids[1:]:  # the tenant-wide search has hits in several sessions
        r = await client.post(f"/v1/sessions/{s}/items", json={"items": [user(f"{word} x")]})
        assert r.status_code == 201, r.text

    lists: list[tuple[str, str, dict[str, Any]]] = [
        ("/v1/sessions", "id", {"prefix": f"pg-{tag}"}),
        ("/v1/sessions", "id", {"prefix": f"pg-{tag}", "order": "updated"}),
        (f"{base}/items", "seq", {}),
        (f"{base}/history", "seq", {}),
        (f"{base}/events", "seq", {}),
        (f"{base}/snapshots", "id", {}),
        (f"{base}/compactions", "id", {}),
        (f"{base}/search", "seq", {"q": word, "scope": "history"}),
        ("/v1/search", "session_id,seq", {"q": word, "scope": "history"}),
    ]
    for path, key, params in lists:
        everything = await whole(client, path, key, **params)
        assert len(everything) > 2, (path, everything)  # more than one page of 2
        assert await walk(client, path, key, **params) == everything, path
        assert len(set(map(str, everything))) == len(everything), path


async def test_after_seq_is_an_alias_of_cursor(client: httpx.AsyncClient, sid: str) -> None:
    for n in range(5):  # five appends: five items, six events
        r = await client.post(
            f"/v1/sessions/{sid}/items?create=true", json={"items": [user(f"t{n}")]}
        )
        assert r.status_code == 201, r.text
    for route in ("items", "history", "events"):
        path = f"/v1/sessions/{sid}/{route}"
        by_cursor = (await client.get(path, params={"cursor": 2, "limit": 2})).json()
        by_alias = (await client.get(path, params={"after_seq": 2, "limit": 2})).json()
        assert by_cursor == by_alias and by_cursor["items"], route
        assert all(entry["seq"] > 2 for entry in by_cursor["items"])
        both = await client.get(path, params={"cursor": 2, "after_seq": 2})
        assert (
            both.status_code == 200
            and both.json() == (await client.get(path, params={"cursor": 2})).json()
        )
        # both sent: the cursor decides (after_seq is only its alias)
        r = await client.get(path, params={"cursor": 2, "after_seq": 4, "limit": 2})
        assert r.status_code == 200 and r.json() == by_cursor, route
        assert_problem(await client.get(path, params={"cursor": "abc"}), 422)
