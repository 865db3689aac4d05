"""JSON bodies mean what the spec declares (issue 16): no `0` for `false`, no `false` for `0`,
no `"5"` for `5`, no `2.5` for an integer; each is a 422 naming the field, and nothing
changes. Clients in other languages rely on the declared types. (`5.0` is an integer in JSON
Schema, so it is accepted as one.)"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.api.helpers import append, assert_problem, create, user

CONTEXT = {"context": {"max_items": 5}}
AUTO = {"policy": "window", "trigger": {"items": 10}}

# (method, path under the session, body, the field the 422 names)
CASES: list[tuple[str, str, dict[str, Any], list[str | int]]] = [
    ("POST", "/compact", {"policy": "window", "keep_last_items": 1, "dry_run": 0}, ["dry_run"]),
    ("POST", "/compact", {"policy": "window", "keep_last_items": "1"}, ["keep_last_items"]),
    ("POST", "/compact", {"policy": "window", "pinned_prefix_items": True}, ["pinned_prefix_items"]),
    ("POST", "/context", {"pinned_prefix_items": False}, ["pinned_prefix_items"]),
    ("POST", "/context", {"keep_system": 1}, ["keep_system"]),
    ("POST", "/context", {"max_items": 2.5}, ["max_items"]),
    ("POST", "/context", {"trim_old_reasoning": "true"}, ["trim_old_reasoning"]),
    ("PATCH", "", {"config": {"context": {"max_items": "5"}}}, ["config", "context", "max_items"]),
    ("PATCH", "", {"config": {"context": {"pinned_prefix_items": False}}},
     ["config", "context", "pinned_prefix_items"]),
    ("PATCH", "", {"config": {"auto_compact": {**AUTO, "enabled": 1}}},
     ["config", "auto_compact", "enabled"]),
    ("PATCH", "", {"config": {"auto_compact": {**AUTO, "keep_last_tokens": True}}},
     ["config", "auto_compact", "keep_last_tokens"]),
    ("PATCH", "", {"config": {"auto_compact": {"policy": "window", "trigger": {"items": True}}}},
     ["config", "auto_compact", "trigger", "items"]),
    ("POST", "/snapshots", {"label": 5}, ["label"]),
    ("POST", "/restore", {"snapshot": {"schema_version": 1, "items": [], "version": "7"}},
     ["snapshot", "version"]),
    ("POST", "/restore",
     {"snapshot": {"schema_version": 1, "items": [], "config": {"context": {"keep_system": 1}}}},
     ["snapshot", "config", "context", "keep_system"]),
    ("POST", "/restore",
     {"snapshot": {"schema_version": 1, "items": [user("a", content=None)]}},
     ["snapshot", "items", 0]),
]


@pytest.mark.parametrize(("method", "path", "body", "field"), CASES)
async def test_a_coerced_value_is_a_422_that_changes_nothing(
    client: httpx.AsyncClient, sid: str, method: str, path: str, body: dict[str, Any],
    field: list[str | int],
) -> None:
    await create(client, sid, config=CONTEXT)
    await append(client, sid, [user(f"turn {n}") for n in range(4)])
    before = (await client.get(f"/v1/sessions/{sid}")).json()
    r = await client.request(method, f"/v1/sessions/{sid}{path}", json=body)
    problem = assert_problem(r, 422)
    locs = [[p for p in e["loc"] if p != "body"] for e in problem["errors"]]
    assert any(loc[: len(field)] == field for loc in locs), (field, problem["errors"])
    after = (await client.get(f"/v1/sessions/{sid}")).json()
    assert after["version"] == before["version"] and after["config"] == CONTEXT


async def test_the_declared_types_are_still_accepted(client: httpx.AsyncClient, sid: str) -> None:
    await create(client, sid, config={"context": {"max_items": 5, "keep_system": True},
                                      "auto_compact": {**AUTO, "enabled": False}})
    await append(client, sid, [user(f"turn {n}") for n in range(4)])
    r = await client.post(f"/v1/sessions/{sid}/context", json={"pinned_prefix_items": 1, "keep_system": False})
    assert r.status_code == 200, r.text
    r = await client.post(f"/v1/sessions/{sid}/context", json={"max_items": 2.0})
    assert r.status_code == 200 and len(r.json()["items"]) == 2, r.text
    r = await client.patch(f"/v1/sessions/{sid}", json={"config": {"context": {"max_items": 3.0},
                                                                  "auto_compact": {**AUTO, "trigger": {"items": 10.0}}}})
    assert r.status_code == 200 and r.json()["config"]["context"] == {"max_items": 3}, r.text
    r = await client.post(f"/v1/sessions/{sid}/compact",
                          json={"policy": "window", "keep_last_items": 2, "dry_run": True})
    assert r.status_code == 200, r.text
    snap = await client.post(f"/v1/sessions/{sid}/snapshots", json={"label": "x"})
    assert snap.status_code == 201, snap.text
    doc = (await client.get(f"/v1/sessions/{sid}/snapshots/{snap.json()['id']}")).json()
    r = await client.post(f"/v1/sessions/{sid}/restore", json={"snapshot": doc})
    assert r.status_code == 200, r.text  # created_at strings, as an export writes them
    r = await client.post("/v1/sessions", json={"id": f"{sid}-2", "config": {"context": {"tokenizer": "approx"}}})
    assert r.status_code == 201, r.text
