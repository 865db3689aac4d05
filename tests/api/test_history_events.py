"""The operation log and the full item history."""

from __future__ import annotations

import httpx

from tests.api.helpers import append, assert_problem, create, user


async def test_a_scripted_scenario_yields_exactly_its_events(client: httpx.AsyncClient, sid: str) -> None:
    headers = {"X-Request-ID": f"req-{sid}"}
    r = await client.post("/v1/sessions", json={"id": sid}, headers=headers)
    assert r.status_code == 201
    await append(client, sid, [user("one"), user("two")], headers=headers)
    await append(client, sid, [user("three")], headers=headers)
    compact = await client.post(f"/v1/sessions/{sid}/compact", json={"policy": "structured"}, headers=headers)
    assert compact.status_code == 200, compact.text
    snap = await client.post(f"/v1/sessions/{sid}/snapshots", json={"label": "s"}, headers=headers)
    assert snap.status_code == 201
    await append(client, sid, [user("four")], headers=headers)
    restore = await client.post(
        f"/v1/sessions/{sid}/restore", json={"snapshot_id": snap.json()["id"]}, headers=headers
    )
    assert restore.status_code == 200
    popped = await client.post(f"/v1/sessions/{sid}/items/pop", headers=headers)
    assert popped.status_code == 200 and popped.json()["item"]["content"] == "three"
    assert (await client.delete(f"/v1/sessions/{sid}/items", headers=headers)).status_code == 200

    r = await client.get(f"/v1/sessions/{sid}/events")
    assert r.status_code == 200, r.text
    body = r.json()
    events = body["items"]
    assert body["next_cursor"] is None
    assert [e["type"] for e in events] == [
        "created", "appended", "appended", "compacted", "snapshot_created", "appended", "restored",
        "popped", "cleared",
    ]
    assert [e["seq"] for e in events] == list(range(1, 10))
    assert [e["version"] for e in events] == list(range(1, 10))  # one write, one event, one version
    assert all(e["request_id"] == f"req-{sid}" for e in events)
    assert all("actor" in e and e["created_at"] for e in events)
    session = (await client.get(f"/v1/sessions/{sid}")).json()
    assert session["version"] == events[-1]["version"]

    data = {e["type"]: e["data"] for e in events}
    assert events[1]["data"] == {"count": 2, "first_seq": 1, "last_seq": 2}
    assert data["compacted"]["compaction_id"] == compact.json()["id"] and data["compacted"]["count"] == 2
    assert data["snapshot_created"] == {"snapshot_id": snap.json()["id"], "label": "s", "items": 1}
    assert data["restored"]["snapshot_id"] == snap.json()["id"]
    assert data["restored"]["undo_snapshot_id"] == restore.json()["undo_snapshot_id"]
    assert data["restored"]["items"] == 1 and data["restored"]["archived_items"] == 2
    assert restore.json()["session"]["summary"] == compact.json()["summary"]
    assert data["popped"] == {"item_id": popped.json()["item"]["id"], "seq": 5}
    assert data["cleared"] == {"items": 0, "summary_cleared": True}


async def test_events_paginate(client: httpx.AsyncClient, sid: str) -> None:
    await create(client, sid)
    for n in range(6):
        await append(client, sid, [user(f"m{n}")])
    url = f"/v1/sessions/{sid}/events"
    seen: list[int] = []
    cursor = None
    while True:
        params = {"limit": 3} | ({"after_seq": cursor} if cursor is not None else {})
        page = (await client.get(url, params=params)).json()
        assert len(page["items"]) <= 3
        seen += [e["seq"] for e in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == list(range(1, 8))
    assert [e["seq"] for e in (await client.get(url, params={"after_seq": 5})).json()["items"]] == [6, 7]
    for bad in ({"limit": 0}, {"limit": 1001}, {"after_seq": -1}, {"after_seq": "x"}):
        assert_problem(await client.get(url, params=bad), 422)
    assert_problem(await client.get(f"/v1/sessions/{sid}-nope/events"), 404, "session-not-found")


async def test_history_has_every_item_ever_appended(client: httpx.AsyncClient, sid: str) -> None:
    await create(client, sid)
    await append(client, sid, [user(f"m{n}", id=f"i{n}") for n in range(5)])
    assert (await client.post(f"/v1/sessions/{sid}/items/pop")).status_code == 200
    await append(client, sid, [user("m5", id="i5")])
    url = f"/v1/sessions/{sid}/history"

    page1 = (await client.get(url, params={"limit": 4})).json()
    assert [h["seq"] for h in page1["items"]] == [1, 2, 3, 4] and page1["next_cursor"] == 4
    page2 = (await client.get(url, params={"limit": 4, "after_seq": 4})).json()
    assert [h["seq"] for h in page2["items"]] == [5, 6] and page2["next_cursor"] is None
    entries = page1["items"] + page2["items"]
    assert [(h["id"], h["archived"], h["archived_reason"]) for h in entries] == [
        ("i0", False, None), ("i1", False, None), ("i2", False, None), ("i3", False, None),
        ("i4", True, "popped"), ("i5", False, None),
    ]
    assert all(h["tokens"] > 0 and h["content"].startswith("m") and h["created_at"] for h in entries)
    for bad in ({"limit": 0}, {"limit": 1001}):
        assert_problem(await client.get(url, params=bad), 422)
    assert_problem(await client.get(f"/v1/sessions/{sid}-nope/history"), 404, "session-not-found")
