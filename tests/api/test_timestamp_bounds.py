"""Timestamps a client sends are bounded (issue 16): a restored item's `created_at` of year 1
or 9999 once stored a BC / five-digit-year timestamp on Postgres (every later read of the row a
500) and overflowed on SQLite. Now a 422 naming the field, and the session is untouched."""

from __future__ import annotations

import httpx
import pytest

from tests.api.helpers import all_items, append, assert_problem, create, user


@pytest.mark.parametrize(
    "stamp", ["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00", "1899-12-30T00:00:00Z"]
)
async def test_an_unstorable_created_at_is_a_422(
    client: httpx.AsyncClient, sid: str, stamp: str
) -> None:
    await create(client, sid)
    await append(client, sid, [user("kept")])
    doc = {"schema_version": 1, "items": [user("old", created_at=stamp)]}
    problem = assert_problem(
        await client.post(f"/v1/sessions/{sid}/restore", json={"snapshot": doc}), 422
    )
    assert problem["errors"][0]["loc"] == ["snapshot", "items", 0, "created_at"], problem
    assert [i["content"] for i in await all_items(client, sid)] == ["kept"]
    for path in ("", "/history", "/context", "/snapshots"):
        r = await client.get(f"/v1/sessions/{sid}{path}")
        assert r.status_code == 200, (path, r.text)


async def test_the_edges_of_the_range_are_kept(client: httpx.AsyncClient, sid: str) -> None:
    await create(client, sid)
    doc = {"schema_version": 1, "items": [user("a", created_at="1900-01-01T00:00:00+00:00"),
                                          user("b", created_at="8999-12-31T23:59:59+00:00")]}
    r = await client.post(f"/v1/sessions/{sid}/restore", json={"snapshot": doc})
    assert r.status_code == 200, r.text
    stamps = [i["created_at"][:4] for i in await all_items(client, sid)]
    assert stamps == ["1900", "8999"]
