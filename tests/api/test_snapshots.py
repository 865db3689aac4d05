"""Snapshots (create, list, export, delete), restore (by id, by document, undo) and fork."""

from __future__ import annotations

import copy
import json
from typing import Any

import httpx
import jsonschema

from tests.api.helpers import all_items, append, assert_problem, assistant, create, user
from tests.conftest import ROOT

ENVELOPE_INFORMATIVE = ("seq", "tokens", "chars", "created_at")


async def set_summary(client: httpx.AsyncClient, sid: str, summary: str | None) -> dict[str, Any]:
    """Give the session a summary (compaction will be the usual source once it lands)."""
    r = await client.patch(f"/v1/sessions/{sid}", json={"summary": summary})
    assert r.status_code == 200, r.text
    return r.json()


async def session(client: httpx.AsyncClient, sid: str) -> dict[str, Any]:
    r = await client.get(f"/v1/sessions/{sid}")
    assert r.status_code == 200, r.text
    return r.json()


async def snapshot(client: httpx.AsyncClient, sid: str, label: str | None = None) -> dict[str, Any]:
    r = await client.post(f"/v1/sessions/{sid}/snapshots", json={"label": label})
    assert r.status_code == 201, r.text
    return r.json()


async def export(client: httpx.AsyncClient, sid: str, snap_id: str) -> dict[str, Any]:
    r = await client.get(f"/v1/sessions/{sid}/snapshots/{snap_id}")
    assert r.status_code == 200, r.text
    return r.json()


def identity(item: dict[str, Any]) -> dict[str, Any]:
    """An item without the fields that say where it sits (seq) rather than what it is."""
    return {k: v for k, v in item.items() if k != "seq"}


async def snapshots_of(client: httpx.AsyncClient, sid: str) -> list[dict[str, Any]]:
    r = await client.get(f"/v1/sessions/{sid}/snapshots")
    assert r.status_code == 200, r.text
    return r.json()["items"]


MIXED = [
    {"type": "message", "role": "system", "content": "You are terse.", "pinned": True},
    user("Read a.py", id="u1", metadata={"turn": 1}),
    {"type": "reasoning", "summary": ["need the file"], "content": "call read_file"},
    {"type": "function_call", "call_id": "c1", "name": "read_file", "arguments": '{"path": "a.py"}'},
    {"type": "function_call_output", "call_id": "c1", "output": "print(1)"},
    assistant("It prints 1.", id="a1"),
]


async def test_create_list_export_delete(client: httpx.AsyncClient, sid: str) -> None:
    await create(client, sid, metadata={"owner": "me"}, config={"context": {"max_items": 9}})
    items = (await append(client, sid, MIXED)).json()["items"]
    await set_summary(client, sid, "Earlier: the user greeted us.")
    before = await session(client, sid)

    first = await snapshot(client, sid, "first")
    assert first["label"] == "first" and first["item_count"] == 6
    assert first["version"] == before["version"] and first["id"].startswith("snp_")
    after = await session(client, sid)
    assert after["version"] == before["version"] + 1  # a logged operation is a write
    assert after["item_count"] == 6 and after["summary"] == before["summary"]

    doc = await export(client, sid, first["id"])
    assert doc["schema_version"] == 1 and doc["id"] == first["id"] and doc["label"] == "first"
    assert doc["session_id"] == sid and doc["version"] == before["version"]
    assert doc["summary"] == "Earlier: the user greeted us."
    assert doc["config"] == {"context": {"max_items": 9}} and doc["metadata"] == {"owner": "me"}
    assert doc["last_compaction"] is None
    assert doc["items"] == items  # canonical fields + envelope, exactly as the API shows them

    # newest first, paginated by cursor
    second = await snapshot(client, sid)
    third = (await client.post(f"/v1/sessions/{sid}/snapshots")).json()  # no body at all
    assert second["label"] is None and third["label"] is None
    listed = await snapshots_of(client, sid)
    assert [s["id"] for s in listed] == [third["id"], second["id"], first["id"]]
    page1 = (await client.get(f"/v1/sessions/{sid}/snapshots", params={"limit": 2})).json()
    assert [s["id"] for s in page1["items"]] == [third["id"], second["id"]]
    assert page1["next_cursor"] is not None
    page2 = (
        await client.get(
            f"/v1/sessions/{sid}/snapshots", params={"limit": 2, "cursor": page1["next_cursor"]}
        )
    ).json()
    assert [s["id"] for s in page2["items"]] == [first["id"]] and page2["next_cursor"] is None

    assert (await client.delete(f"/v1/sessions/{sid}/snapshots/{second['id']}")).status_code == 204
    assert_problem(
        await client.get(f"/v1/sessions/{sid}/snapshots/{second['id']}"), 404, "snapshot-not-found"
    )
    assert_problem(
        await client.delete(f"/v1/sessions/{sid}/snapshots/{second['id']}"), 404, "snapshot-not-found"
    )
    assert [s["id"] for s in await snapshots_of(client, sid)] == [third["id"], first["id"]]


async def test_snapshot_errors(client: httpx.AsyncClient, sid: str) -> None:
    assert_problem(await client.post(f"/v1/sessions/{sid}/snapshots", json={}), 404, "session-not-found")
    assert_problem(await client.get(f"/v1/sessions/{sid}/snapshots"), 404, "session-not-found")
    await create(client, sid)
    version = (await session(client, sid))["version"]
    assert_problem(await client.post(f"/v1/sessions/{sid}/snapshots", json={"label": "x" * 257}), 422)
    assert_problem(await client.post(f"/v1/sessions/{sid}/snapshots", json={"nope": 1}), 422)
    assert_problem(
        await client.post(f"/v1/sessions/{sid}/snapshots", json={}, headers={"If-Match": '"99"'}),
        412,
    )
    assert_problem(await client.get(f"/v1/sessions/{sid}/snapshots", params={"cursor": "x"}), 422)
    assert_problem(await client.get(f"/v1/sessions/{sid}/snapshots/snp_nope"), 404, "snapshot-not-found")
    assert (await session(client, sid))["version"] == version
    assert await snapshots_of(client, sid) == []


async def test_restore_brings_state_back_and_undo_brings_back_what_was_there(
    client: httpx.AsyncClient, sid: str
) -> None:
    await create(client, sid, config={"context": {"max_items": 5}})
    await append(client, sid, [user("first question", id="q1"), assistant("first answer", id="r1")])
    await set_summary(client, sid, "S1: the first summary")
    snap = await snapshot(client, sid, "good")
    then_items = await all_items(client, sid)
    then = await session(client, sid)

    # move on: more items, a pop, another summary and config
    await append(client, sid, [user("second question", id="q2"), assistant("oops", id="bad")])
    assert (await client.post(f"/v1/sessions/{sid}/items/pop")).status_code == 200
    await append(client, sid, [assistant("second answer", id="r2")])
    await set_summary(client, sid, "S2: the second summary")
    r = await client.patch(f"/v1/sessions/{sid}", json={"config": {"context": {"max_items": 50}}})
    assert r.status_code == 200
    now_items = await all_items(client, sid)
    now = await session(client, sid)

    r = await client.post(f"/v1/sessions/{sid}/restore", json={"snapshot_id": snap["id"]})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["snapshot_id"] == snap["id"] and body["restored_items"] == 2
    restored = body["session"]
    assert r.headers["etag"] == f'"{restored["version"]}"'
    assert restored["version"] == now["version"] + 1
    assert restored["summary"] == "S1: the first summary"
    assert restored["config"] == {"context": {"max_items": 5}}
    assert restored["item_count"] == 2
    assert restored["token_count"] == then["token_count"] and restored["char_count"] == then["char_count"]
    back = await all_items(client, sid)
    assert [identity(i) for i in back] == [identity(i) for i in then_items]
    # new seqs, never reused
    assert [i["seq"] for i in back] == [now["last_seq"] + 1, now["last_seq"] + 2]
    assert restored["last_seq"] == now["last_seq"] + 2

    # the state before the restore was saved: undo it
    undo_id = body["undo_snapshot_id"]
    undo_doc = await export(client, sid, undo_id)
    assert undo_doc["label"] == "pre-restore" and undo_doc["summary"] == "S2: the second summary"
    r = await client.post(f"/v1/sessions/{sid}/restore", json={"snapshot_id": undo_id})
    assert r.status_code == 200, r.text
    undone = r.json()["session"]
    assert undone["summary"] == "S2: the second summary"
    assert undone["config"] == {"context": {"max_items": 50}}
    assert undone["item_count"] == now["item_count"] and undone["token_count"] == now["token_count"]
    assert [identity(i) for i in await all_items(client, sid)] == [identity(i) for i in now_items]
    # and that restore was undoable too: three snapshots now (good, two pre-restore)
    labels = [s["label"] for s in await snapshots_of(client, sid)]
    assert labels == ["pre-restore", "pre-restore", "good"]

    # history keeps everything: the archived copies say why they left
    history = (await client.get(f"/v1/sessions/{sid}/history", params={"limit": 1000})).json()["items"]
    reasons = {(h["id"], h["seq"]): h["archived_reason"] for h in history}
    assert reasons[("bad", 4)] == "popped"
    assert reasons[("q1", 1)] == "restored" and reasons[("r2", 5)] == "restored"
    assert sum(1 for h in history if not h["archived"]) == now["item_count"]


async def test_restore_by_document_into_another_session(client: httpx.AsyncClient, sid: str) -> None:
    await create(client, sid, metadata={"a": 1}, config={"context": {"max_tokens": 100}})
    await append(client, sid, MIXED)
    await set_summary(client, sid, "what happened before")
    doc = await export(client, sid, (await snapshot(client, sid))["id"])

    other = sid + "-copy"
    await create(client, other)
    await append(client, other, [user("to be replaced", id="u1")])  # same id as in the doc: fine
    r = await client.post(f"/v1/sessions/{other}/restore", json={"snapshot": doc})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["snapshot_id"] is None and body["restored_items"] == len(MIXED)
    assert body["session"]["summary"] == "what happened before"
    assert body["session"]["config"] == {"context": {"max_tokens": 100}}
    assert body["session"]["metadata"] == {"a": 1}  # the snapshot froze it: restored too (undoable)
    ours, theirs = await all_items(client, sid), await all_items(client, other)
    assert [identity(i) for i in theirs] == [identity(i) for i in ours]
    assert [i["seq"] for i in theirs] == [2 + n for n in range(len(MIXED))]


async def test_bad_documents_are_refused_and_change_nothing(client: httpx.AsyncClient, sid: str) -> None:
    await create(client, sid)
    await append(client, sid, [user("keep me", id="k")])
    await set_summary(client, sid, "keep this summary")
    good = await export(client, sid, (await snapshot(client, sid))["id"])
    state = await session(client, sid)
    items = await all_items(client, sid)

    def doc(**changes: Any) -> dict[str, Any]:
        out = copy.deepcopy(good)
        out.update(changes)
        return out

    no_items = doc()
    del no_items["items"]
    no_version = doc()
    del no_version["schema_version"]
    bad_documents = [
        doc(schema_version=2),
        doc(schema_version="1"),
        no_version,
        no_items,
        doc(surprise=True),
        doc(kind="something-else"),
        doc(items=[{"type": "message", "role": "wizard", "content": "x"}]),
        doc(items=[{"type": "function_call", "call_id": 5, "name": "f"}]),
        doc(items=["not an object"]),
        doc(items=[user("a", id="bad/id")]),
        doc(items=[user("a", created_at="yesterday")]),
        doc(items=[user("a", pinned="yes")]),
        doc(config={"nonsense": {}}),
        doc(config={"context": {"max_items": "many"}}),
        doc(summary=5),
        doc(metadata=[1]),
    ]
    for bad in bad_documents:
        r = await client.post(f"/v1/sessions/{sid}/restore", json={"snapshot": bad})
        problem = assert_problem(r, 422)
        assert problem["errors"], problem
        assert all(e["loc"][:1] == ["snapshot"] for e in problem["errors"]), problem
    # An item's envelope is checked as strictly as an append's: `format` names a format, a
    # `record` belongs to a provider format only, `created_at` is an ISO 8601 string.
    bad_items = [
        ({"format": {}, "type": "0"}, "format"),
        ({**user("a"), "format": 0}, "format"),
        ({**user("a"), "format": ""}, "format"),
        ({**user("a"), "format": False}, "format"),
        ({**user("a"), "format": "klingon"}, "format"),
        ({**user("a"), "record": {"role": "user", "content": "b"}}, "record"),
        ({**user("a"), "created_at": 5}, "created_at"),
    ]
    for item, field in bad_items:
        r = await client.post(f"/v1/sessions/{sid}/restore", json={"snapshot": doc(items=[item])})
        problem = assert_problem(r, 422, "invalid-input")
        locs = [e["loc"] for e in problem["errors"]]
        assert any(loc[:3] == ["snapshot", "items", 0] and loc[-1] == field for loc in locs), (
            item,
            locs,
        )
    # Two items sharing an id: well formed, but the conflict an append of both would get (409).
    r = await client.post(
        f"/v1/sessions/{sid}/restore",
        json={"snapshot": doc(items=[user("a", id="x"), user("b", id="x")])},
    )
    assert assert_problem(r, 409, "duplicate-item-id")["errors"][0]["loc"] == ["snapshot", "items", 1, "id"]
    for body in ({}, {"snapshot_id": "snp_x", "snapshot": good}, {"snapshot_id": "snp_x", "snapshot": None}, {"snapshot": "text"},
                 {"snapshot_id": "snp_x", "extra": 1}):
        assert_problem(await client.post(f"/v1/sessions/{sid}/restore", json=body), 422)
    assert_problem(
        await client.post(f"/v1/sessions/{sid}/restore", json={"snapshot_id": "snp_missing"}),
        404,
        "snapshot-not-found",
    )
    assert_problem(
        await client.post(
            f"/v1/sessions/{sid}/restore", json={"snapshot": good}, headers={"If-Match": '"1"'}
        ),
        412,
    )
    assert_problem(
        await client.post(f"/v1/sessions/{sid}-nope/restore", json={"snapshot": good}),
        404,
        "session-not-found",
    )
    assert await session(client, sid) == state
    assert await all_items(client, sid) == items
    assert len(await snapshots_of(client, sid)) == 1  # no pre-restore snapshot was left behind


async def test_restore_is_idempotent_with_a_key(client: httpx.AsyncClient, sid: str) -> None:
    await create(client, sid)
    await append(client, sid, [user("one")])
    snap = await snapshot(client, sid)
    await append(client, sid, [user("two")])
    headers = {"Idempotency-Key": f"restore-{sid}"}
    url = f"/v1/sessions/{sid}/restore"
    first = await client.post(url, json={"snapshot_id": snap["id"]}, headers=headers)
    second = await client.post(url, json={"snapshot_id": snap["id"]}, headers=headers)
    assert first.status_code == second.status_code == 200
    assert first.json() == second.json() and second.headers.get("idempotent-replayed") == "true"
    assert len(await snapshots_of(client, sid)) == 2  # one pre-restore snapshot, not two
    assert_problem(await client.post(url, json={"snapshot_id": "other"}, headers=headers), 422)


async def test_restore_and_clear_bump_the_epoch(client: httpx.AsyncClient, sid: str, settings: Any) -> None:
    """An in-flight compaction compares epochs before it commits: restore and clear move it."""
    from app.store.db import Store
    from app.store.sessions import SessionRepository

    await create(client, sid)
    await append(client, sid, [user("one")])
    snap = await snapshot(client, sid)
    store = Store.from_url(settings.database_url)
    try:

        async def epoch() -> int:
            async with store.read() as db:
                state = await SessionRepository(db).get("default", sid)
            assert state is not None
            return state.epoch

        assert await epoch() == 0
        await append(client, sid, [user("two")])
        assert await epoch() == 0
        assert (await client.post(f"/v1/sessions/{sid}/restore", json={"snapshot_id": snap["id"]})).status_code == 200
        assert await epoch() == 1
        assert (await client.delete(f"/v1/sessions/{sid}/items")).status_code == 200
        assert await epoch() == 2
    finally:
        await store.dispose()


async def test_fork_from_current_state_is_isolated(client: httpx.AsyncClient, sid: str) -> None:
    await create(client, sid, metadata={"who": "origin"}, config={"context": {"max_items": 7}})
    await append(client, sid, MIXED)
    await set_summary(client, sid, "origin summary")
    origin_items = await all_items(client, sid)
    origin = await session(client, sid)

    fork_id = sid + "-fork"
    r = await client.post(f"/v1/sessions/{sid}/fork", json={"new_session_id": fork_id})
    assert r.status_code == 201, r.text
    fork = r.json()
    assert fork["id"] == fork_id and fork["version"] == 1
    assert fork["summary"] == "origin summary" and fork["config"] == {"context": {"max_items": 7}}
    assert fork["metadata"] == {"who": "origin"}
    assert fork["item_count"] == origin["item_count"] and fork["token_count"] == origin["token_count"]
    assert fork["last_seq"] == len(MIXED)
    assert await all_items(client, fork_id) == origin_items  # same ids, seqs 1..n, envelope

    # writes on either side stay there
    await append(client, fork_id, [user("only in the fork", id="f1")])
    await append(client, sid, [user("only in the origin", id="o1")])
    assert (await client.post(f"/v1/sessions/{fork_id}/items/pop")).json()["item"]["id"] == "f1"
    await set_summary(client, fork_id, "fork summary")
    assert (await client.post(f"/v1/sessions/{sid}/items/pop")).json()["item"]["id"] == "o1"
    await append(client, sid, [user("origin again", id="o2")])
    assert (await client.delete(f"/v1/sessions/{fork_id}/items")).status_code == 200
    assert [i["id"] for i in await all_items(client, sid)] == [i["id"] for i in origin_items] + ["o2"]
    assert (await session(client, sid))["summary"] == "origin summary"
    assert await all_items(client, fork_id) == []
    origin_ids = {h["id"] for h in (await client.get(f"/v1/sessions/{sid}/history")).json()["items"]}
    fork_ids = {h["id"] for h in (await client.get(f"/v1/sessions/{fork_id}/history")).json()["items"]}
    assert "f1" not in origin_ids and "o1" not in fork_ids and "o2" not in fork_ids

    # both logs say what happened
    origin_events = (await client.get(f"/v1/sessions/{sid}/events")).json()["items"]
    forked = [e for e in origin_events if e["type"] == "forked"]
    assert len(forked) == 1 and forked[0]["data"]["new_session_id"] == fork_id
    fork_events = (await client.get(f"/v1/sessions/{fork_id}/events")).json()["items"]
    assert fork_events[0]["type"] == "created" and fork_events[0]["seq"] == 1
    assert fork_events[0]["data"]["forked_from"] == sid


async def test_fork_from_a_snapshot_and_errors(client: httpx.AsyncClient, sid: str) -> None:
    await create(client, sid, metadata={"m": 1})
    await append(client, sid, [user("old", id="old")])
    await set_summary(client, sid, "old summary")
    snap = await snapshot(client, sid)
    await append(client, sid, [user("new", id="new")])
    await set_summary(client, sid, "new summary")

    r = await client.post(
        f"/v1/sessions/{sid}/fork", json={"snapshot_id": snap["id"], "metadata": {"branch": "b"}}
    )
    assert r.status_code == 201, r.text
    fork = r.json()
    assert fork["id"] != sid and fork["summary"] == "old summary"
    assert fork["metadata"] == {"branch": "b"}
    assert [i["id"] for i in await all_items(client, fork["id"])] == ["old"]
    events = (await client.get(f"/v1/sessions/{fork['id']}/events")).json()["items"]
    assert events[0]["data"] == {"forked_from": sid, "snapshot_id": snap["id"], "items": 1}

    origin = await session(client, sid)
    url = f"/v1/sessions/{sid}/fork"
    assert_problem(await client.post(url, json={"new_session_id": fork["id"]}), 409, "session-exists")
    # the origin's own id is taken like any other existing session's
    assert_problem(await client.post(url, json={"new_session_id": sid}), 409, "session-exists")
    assert_problem(await client.post(url, json={"new_session_id": "bad/id"}), 422)
    assert_problem(await client.post(url, json={"snapshot_id": "snp_missing"}), 404, "snapshot-not-found")
    assert_problem(await client.post(url, json={"unknown": 1}), 422)
    assert_problem(await client.post(f"/v1/sessions/{sid}-nope/fork", json={}), 404, "session-not-found")
    assert await session(client, sid) == origin

    # idempotent: a retried fork does not make a second session
    headers = {"Idempotency-Key": f"fork-{sid}"}
    a = await client.post(url, json={}, headers=headers)
    b = await client.post(url, json={}, headers=headers)
    assert a.status_code == b.status_code == 201 and a.json() == b.json()
    forks = [e for e in (await client.get(f"/v1/sessions/{sid}/events")).json()["items"] if e["type"] == "forked"]
    assert len(forks) == 2


async def test_restore_after_a_compaction_brings_back_summary_and_compact_result(
    client: httpx.AsyncClient, sid: str
) -> None:
    await create(client, sid)
    await append(client, sid, [user("Fix the parser in p.py", id="goal"), assistant("on it")])
    await append(client, sid, [user("now the tests", id="latest")])
    r = await client.post(f"/v1/sessions/{sid}/compact", json={"policy": "structured"})
    assert r.status_code == 200, r.text
    result = r.json()
    compacted = await session(client, sid)
    compacted_items = await all_items(client, sid)
    assert compacted["summary"] == result["summary"] and len(compacted_items) == 1
    snap = await snapshot(client, sid, "after compaction")
    assert (await export(client, sid, snap["id"]))["last_compaction"] == result

    # start over: clear drops the summary and the last compact result
    assert (await client.delete(f"/v1/sessions/{sid}/items")).status_code == 200
    await append(client, sid, [user("something else entirely", id="other")])
    cleared_doc = await export(client, sid, (await snapshot(client, sid))["id"])
    assert cleared_doc["summary"] is None and cleared_doc["last_compaction"] is None

    r = await client.post(f"/v1/sessions/{sid}/restore", json={"snapshot_id": snap["id"]})
    assert r.status_code == 200, r.text
    assert r.json()["session"]["summary"] == result["summary"]
    assert [identity(i) for i in await all_items(client, sid)] == [identity(i) for i in compacted_items]
    restored_doc = await export(client, sid, (await snapshot(client, sid))["id"])
    assert restored_doc["last_compaction"] == result and restored_doc["summary"] == result["summary"]

    # undo: back to the cleared state
    r = await client.post(
        f"/v1/sessions/{sid}/restore", json={"snapshot_id": r.json()["undo_snapshot_id"]}
    )
    assert r.status_code == 200, r.text
    assert r.json()["session"]["summary"] is None
    assert [i["id"] for i in await all_items(client, sid)] == ["other"]
    undone_doc = await export(client, sid, (await snapshot(client, sid))["id"])
    assert undone_doc["last_compaction"] is None

    # the compacted items stay searchable in history, not in memory
    r = await client.get(f"/v1/sessions/{sid}/search", params={"q": "parser", "scope": "history"})
    hits = r.json()["items"]
    assert any(h["item"]["id"] == "goal" and h["archived_reason"] == "compacted" for h in hits)
    r = await client.get(f"/v1/sessions/{sid}/search", params={"q": "parser"})
    assert r.json()["items"] == []


def _restore_request_validator() -> jsonschema.Draft202012Validator:
    """The published schema of a restore request body (JSON Schema 2020-12)."""
    spec = json.loads((ROOT / "openapi" / "openapi.json").read_text())
    operation = spec["paths"]["/v1/sessions/{session_id}/restore"]["post"]
    schema = operation["requestBody"]["content"]["application/json"]["schema"]
    return jsonschema.Draft202012Validator({**schema, "components": spec["components"]})


async def test_a_snapshot_item_is_what_an_append_stores_as_the_spec_says(
    client: httpx.AsyncClient, sid: str
) -> None:
    """A session holds any JSON object an append accepts (untyped ones included) and items kept
    in a provider format; its export validates against the published restore request and
    restores exactly. Item by item, the spec admits what restore accepts and nothing else."""
    await create(client, sid)
    untyped = [{"__enc__": 1, "payload": "gAAAAA"}, {"type": 7, "note": "a number"}, {}]
    opaque = {"type": "web_search_call", "id": "ws_1", "status": "completed"}
    assert (await append(client, sid, [user("hi"), *untyped, opaque])).status_code == 201
    chat = [
        {"role": "user", "content": "read a.py"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "read", "arguments": "{}"},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "print(1)"},
    ]
    r = await client.post(
        f"/v1/sessions/{sid}/items", json={"format": "openai-chat", "items": chat}
    )
    assert r.status_code == 201, r.text
    doc = await export(client, sid, (await snapshot(client, sid))["id"])
    assert {i["format"] for i in doc["items"]} == {"canonical", "openai-chat"}

    spec = _restore_request_validator()
    assert list(spec.iter_errors({"snapshot": doc})) == []
    other = sid + "-copy"
    await create(client, other)
    r = await client.post(f"/v1/sessions/{other}/restore", json={"snapshot": doc})
    assert r.status_code == 200, r.text
    ours, theirs = await all_items(client, sid), await all_items(client, other)
    # (an opaque item's `id` is its own data in a document, so it is stored under a new one)
    assert [{k: v for k, v in i.items() if k not in ("seq", "id")} for i in theirs] == [
        {k: v for k, v in i.items() if k not in ("seq", "id")} for i in ours
    ]

    provider = next(i for i in doc["items"] if i["format"] == "openai-chat")
    admitted = [
        {"format": None},
        {"format": "canonical", "payload": [1, 2]},
        {"type": "t" * 65},
        {"type": "web_search_call", "format": None},
        user("plain"),
        provider,
        {"type": "message"},  # no role: what the SDKs' own stores keep (stored as sent)
        {"type": "function_call", "call_id": ""},  # no call_id: likewise
    ]
    refused = [
        {"type": "message", "role": "robot"},
        {"role": "user"},
        {"format": "gemini"},
        {"format": "klingon"},
        {"format": {}, "type": "0"},
        {**user("a"), "record": {"role": "user", "content": "b"}},
        {**provider, "record": None},
    ]
    for item, ok in [(i, True) for i in admitted] + [(i, False) for i in refused]:
        body = {"snapshot": {**doc, "items": [item]}}
        assert spec.is_valid(body) is ok, item
        r = await client.post(f"/v1/sessions/{other}/restore", json=body)
        assert r.status_code == (200 if ok else 422), (item, r.text)
