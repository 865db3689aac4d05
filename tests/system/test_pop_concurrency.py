"""Pop under concurrent appends, through real HTTP against a server on Postgres + Redis: each pop
removes exactly one item, the newest at the moment it held the session's row (every write locks
the row first, so appends and pops are ordered by it)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import httpx

from tests.support.services import ServerProcess

APPENDERS = 20
APPENDS_EACH = 5
POPS = 20
SEEDED = POPS + 5  # more than the pops, so no pop can find memory empty


async def _retry(send: Any) -> httpx.Response:
    """What a careful client does: retry a busy session (503) and network errors."""
    for _ in range(300):
        try:
            r = await send()
        except httpx.TransportError:
            await asyncio.sleep(0.05)
            continue
        if r.status_code == 503:
            await asyncio.sleep(0.05)
            continue
        return r
    raise AssertionError("gave up")


async def _all(client: httpx.AsyncClient, url: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    after = None
    while True:
        params = {"limit": 1000} | ({"after_seq": after} if after is not None else {})
        page = (await client.get(url, params=params)).json()
        out += page["items"]
        after = page["next_cursor"]
        if after is None:
            return out


async def test_pops_racing_appends_each_take_the_newest_item(pg_server: ServerProcess) -> None:
    sid = f"pop-race-{uuid.uuid4().hex[:8]}"
    limits = httpx.Limits(max_connections=APPENDERS + POPS)
    async with httpx.AsyncClient(base_url=pg_server.url, timeout=60, limits=limits) as client:
        assert (await client.post("/v1/sessions", json={"id": sid})).status_code == 201
        seed = [{"type": "message", "role": "user", "content": f"seed {n}"} for n in range(SEEDED)]
        assert (await client.post(f"/v1/sessions/{sid}/items", json={"items": seed})).status_code == 201

        async def appender(w: int) -> None:
            for i in range(APPENDS_EACH):
                body = {"items": [{"type": "message", "role": "user", "content": f"w{w}-{i}"}]}
                r = await _retry(lambda body=body: client.post(f"/v1/sessions/{sid}/items", json=body))
                assert r.status_code == 201, r.text

        async def popper() -> dict[str, Any]:
            r = await _retry(lambda: client.post(f"/v1/sessions/{sid}/items/pop"))
            assert r.status_code == 200, r.text
            return r.json()

        results = await asyncio.gather(
            *(appender(w) for w in range(APPENDERS)), *(popper() for _ in range(POPS))
        )
        pops = [r for r in results if r is not None]
        events = await _all(client, f"/v1/sessions/{sid}/events")
        history = await _all(client, f"/v1/sessions/{sid}/history")
        live = await _all(client, f"/v1/sessions/{sid}/items")
        session = (await client.get(f"/v1/sessions/{sid}")).json()

    total = SEEDED + APPENDERS * APPENDS_EACH
    assert len(pops) == POPS
    popped_seqs = [p["item"]["seq"] for p in pops]
    assert len(set(popped_seqs)) == POPS  # every pop took a different item
    assert len(history) == total and [h["seq"] for h in history] == list(range(1, total + 1))
    archived = {h["seq"] for h in history if h["archived"]}
    assert archived == set(popped_seqs)  # exactly one item per pop, and nothing else
    assert all(h["archived_reason"] == "popped" for h in history if h["archived"])
    assert session["item_count"] == total - POPS == len(live)

    # Replay the log (written with the row locked, in commit order): each pop took the newest
    # live item.
    alive: set[int] = set()
    by_version = {p["version"]: p["item"] for p in pops}
    replayed_pops = 0
    for e in events:
        if e["type"] == "appended":
            alive |= set(range(e["data"]["first_seq"], e["data"]["last_seq"] + 1))
        elif e["type"] == "popped":
            assert e["data"]["seq"] == max(alive), e
            alive.remove(e["data"]["seq"])
            assert by_version[e["version"]]["seq"] == e["data"]["seq"]
            assert by_version[e["version"]]["id"] == e["data"]["item_id"]
            replayed_pops += 1
    assert replayed_pops == POPS
    assert alive == {i["seq"] for i in live}
    # pops did interleave with appends (otherwise this test would prove little)
    kinds = [e["type"] for e in events]
    first_pop, last_pop = kinds.index("popped"), len(kinds) - 1 - kinds[::-1].index("popped")
    assert "appended" in kinds[first_pop:last_pop]
