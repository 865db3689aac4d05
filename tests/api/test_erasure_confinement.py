"""A key confined to a session prefix reads only the erasure records of its own share (issue
31): ``GET /v1/admin/erasures`` was the one listing that showed it the whole tenant's, the
other keys' names included, and answered for ids outside its prefix (an existence oracle)."""

from __future__ import annotations

from app.domain.retention import subject_digest
from tests.api.test_retention import Tenant, World, sid, world  # noqa: F401 (a fixture)


async def _confined_admin(t: Tenant, prefix: str, name: str) -> Tenant:
    r = await t.request(
        "POST",
        "/v1/admin/keys",
        json={"name": name, "scopes": ["read", "write", "admin"], "session_prefix": prefix},
    )
    assert r.status_code == 201, r.text
    return Tenant(t.client, t.id, {"Authorization": f"Bearer {r.json()['secret']}"})


async def _erase(t: Tenant, session_id: str) -> None:
    await t.create(session_id)
    r = await t.request("DELETE", f"/v1/sessions/{session_id}")
    assert r.status_code == 204, r.text


async def _records(t: Tenant, **params: str) -> list[dict[str, object]]:
    r = await t.request("GET", "/v1/admin/erasures", params=params)
    assert r.status_code == 200, r.text
    return list(r.json()["items"])


async def test_a_confined_key_reads_only_its_shares_erasures(world: World) -> None:  # noqa: F811
    ops = await world.tenant()
    prefix = "a7-" + sid()[2:8] + "-"
    agent = await _confined_admin(ops, prefix, "agent-admin")
    inner = await _confined_admin(ops, prefix + "sub-", "sub-agent")
    outside, by_ops, by_agent, by_inner = (
        "zz-" + sid(),
        prefix + "by-ops",
        prefix + "by-agent",
        prefix + "sub-by-inner",
    )
    await _erase(ops, outside)
    await _erase(ops, by_ops)
    await _erase(agent, by_agent)
    await _erase(inner, by_inner)

    def digest(session_id: str) -> str:
        return subject_digest(ops.id, session_id)

    # The tenant's unconfined admin sees every record, with who asked.
    everything = await _records(ops)
    assert {r["subject_digest"] for r in everything} == {
        digest(s) for s in (outside, by_ops, by_agent, by_inner)
    }
    assert {r["key_name"] for r in everything} == {"ops", "agent-admin", "sub-agent"}

    # Without session_id: only the erasures asked by keys within its share (which can only have
    # erased sessions of its share); never another session's record, never the ops key's name.
    listed = await _records(agent)
    assert {r["subject_digest"] for r in listed} == {digest(by_agent), digest(by_inner)}
    assert {r["key_name"] for r in listed} == {"agent-admin", "sub-agent"}
    assert [r["subject_digest"] for r in await _records(inner)] == [digest(by_inner)]

    # An id outside its prefix answers as an id that was never erased: nothing.
    assert await _records(agent, session_id=outside) == []
    assert await _records(inner, session_id=by_agent) == []

    # An id of its share: the record, but a key outside its share stays unnamed.
    (record,) = await _records(agent, session_id=by_ops)
    assert record["subject_digest"] == digest(by_ops)
    assert record["key_id"] is None and record["key_name"] is None
    (record,) = await _records(agent, session_id=by_inner)
    assert record["key_name"] == "sub-agent" and record["key_id"]
    (record,) = await _records(ops, session_id=by_ops)
    assert record["key_name"] == "ops"


async def test_the_keys_listing_shows_a_confined_key_only_its_share(world: World) -> None:  # noqa: F811
    ops = await world.tenant()
    agent = await _confined_admin(ops, "b9-" + sid()[2:8] + "-", "agent-admin")
    r = await agent.request("GET", "/v1/admin/keys")
    assert r.status_code == 200, r.text
    assert [k["name"] for k in r.json()["items"]] == ["agent-admin"]
