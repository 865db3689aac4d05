"""Full-text search: one session's memory or history, and across the tenant, ranked."""

from __future__ import annotations

import uuid

import httpx

from tests.api.helpers import append, assert_problem, assistant, create, user


def word() -> str:
    """A word no other test's items contain (the database is shared between tests)."""
    return "zq" + uuid.uuid4().hex[:10].replace("0", "x")


async def search(client: httpx.AsyncClient, sid: str, q: str, **params: object) -> dict:
    r = await client.get(f"/v1/sessions/{sid}/search", params={"q": q, **params})
    assert r.status_code == 200, r.text
    return r.json()


async def test_search_finds_and_ranks(client: httpx.AsyncClient, sid: str) -> None:
    w = word()
    await create(client, sid)
    await append(
        client,
        sid,
        [
            user(f"please deploy {w} to the cluster today", id="once"),
            assistant(f"{w} {w} {w} is deployed", id="thrice"),
            user("nothing relevant here", id="none"),
            {
                "type": "function_call",
                "call_id": "c1",
                "name": "read_file",
                "arguments": f'{{"path": "{w}.py"}}',
            },
            {"type": "function_call_output", "call_id": "c1", "output": f"contents mention {w}"},
        ],
    )
    body = await search(client, sid, w)
    hits = body["items"]
    assert body["next_cursor"] is None
    assert {h["item"]["id"] for h in hits} >= {"once", "thrice"}
    assert "none" not in {h["item"]["id"] for h in hits}
    assert len(hits) == 4  # the two messages, the call's arguments, the tool output
    assert hits[0]["item"]["id"] == "thrice"
    scores = [h["score"] for h in hits]
    assert scores == sorted(scores, reverse=True) and scores[0] > scores[-1]
    for h in hits:
        assert h["session_id"] == sid and h["seq"] == h["item"]["seq"]
        assert h["archived"] is False and h["archived_reason"] is None
        assert w in h["snippet"].lower()
    # several words: any matches, the item holding more of them first
    both = (await search(client, sid, f"deploy {w} cluster"))["items"]
    assert both[0]["item"]["id"] == "once" and len(both) == 4
    assert [
        h["item"]["id"] for h in (await search(client, sid, f"{w} nonexistentwordxyz"))["items"]
    ] == [h["item"]["id"] for h in hits]
    assert all(0 < h["score"] < 1 for h in hits)
    # the tool's name is searchable too
    assert any(
        h["item"]["type"] == "function_call"
        for h in (await search(client, sid, "read_file"))["items"]
    )


async def test_history_scope_finds_archived_items_memory_does_not(
    client: httpx.AsyncClient, sid: str
) -> None:
    popped, cleared, kept = word(), word(), word()
    await create(client, sid)
    await append(client, sid, [user(f"about {cleared}", id="c")])
    await client.delete(f"/v1/sessions/{sid}/items")
    await append(client, sid, [user(f"about {kept}", id="k"), assistant(f"about {popped}", id="p")])
    assert (await client.post(f"/v1/sessions/{sid}/items/pop")).json()["item"]["id"] == "p"

    assert (await search(client, sid, popped))["items"] == []
    assert (await search(client, sid, cleared, scope="memory"))["items"] == []
    [hit] = (await search(client, sid, popped, scope="history"))["items"]
    assert (
        hit["item"]["id"] == "p" and hit["archived"] is True and hit["archived_reason"] == "popped"
    )
    [hit] = (await search(client, sid, cleared, scope="history"))["items"]
    assert hit["archived_reason"] == "cleared"
    [hit] = (await search(client, sid, kept, scope="history"))["items"]
    assert hit["archived"] is False
    assert [h["item"]["id"] for h in (await search(client, sid, kept))["items"]] == ["k"]


async def test_search_across_sessions(client: httpx.AsyncClient, sid: str) -> None:
    w = word()
    others = [f"{sid}-a", f"{sid}-b"]
    for n, other in enumerate(others):
        await create(client, other)
        await append(client, other, [user(f"{w} in session {n}")] + [user(f"{w} again")] * n)
    r = await client.get("/v1/search", params={"q": w})
    assert r.status_code == 200, r.text
    hits = r.json()["items"]
    assert sorted({h["session_id"] for h in hits}) == others and len(hits) == 3
    assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)

    # offset pagination
    page1 = (await client.get("/v1/search", params={"q": w, "limit": 2})).json()
    assert len(page1["items"]) == 2 and page1["next_cursor"] is not None
    page2 = (
        await client.get("/v1/search", params={"q": w, "limit": 2, "cursor": page1["next_cursor"]})
    ).json()
    assert len(page2["items"]) == 1 and page2["next_cursor"] is None
    seen = {(h["session_id"], h["seq"]) for h in page1["items"] + page2["items"]}
    assert seen == {(h["session_id"], h["seq"]) for h in hits}

    # archived items only with scope=history
    assert (await client.post(f"/v1/sessions/{others[0]}/items/pop")).status_code == 200
    assert len((await client.get("/v1/search", params={"q": w})).json()["items"]) == 2
    assert (
        len((await client.get("/v1/search", params={"q": w, "scope": "history"})).json()["items"])
        == 3
    )


async def test_search_rejects_bad_queries(client: httpx.AsyncClient, sid: str) -> None:
    await create(client, sid)
    url = f"/v1/sessions/{sid}/search"
    for params in (
        {"q": ""},
        {},
        {"q": "x", "scope": "everything"},
        {"q": "x", "limit": 0},
        {"q": "x", "limit": 101},
        {"q": "x", "cursor": "abc"},
        {"q": "x" * 1001},
    ):
        assert_problem(await client.get(url, params=params), 422)
        assert_problem(await client.get("/v1/search", params=params), 422)
    # A query with no word in it is valid (the spec says only minLength 1) and finds nothing.
    await append(client, sid, [user("some words")])
    for q in ("   ", "\t\n", " - "):
        for r in (
            await client.get(url, params={"q": q}),
            await client.get("/v1/search", params={"q": q}),
        ):
            assert r.status_code == 200 and r.json() == {
                "items": [],
                "next_cursor": None,
                "mode": "fulltext",
            }, (q, r.text)
    assert_problem(
        await client.get(f"/v1/sessions/{sid}-nope/search", params={"q": "x"}),
        404,
        "session-not-found",
    )


async def test_query_syntax_is_not_injected(client: httpx.AsyncClient, sid: str) -> None:
    """Operators and quotes in a query are words, never an error."""
    w = word()
    await create(client, sid)
    await append(client, sid, [user(f'{w} said "hello" (AND) NOT or* -x')])
    for q in (f'"{w}', f"{w} AND", f"{w} OR", "NOT", "*", f"({w}", f"{w}:*", "-", f"{w} NEAR/2"):
        r = await client.get(f"/v1/sessions/{sid}/search", params={"q": q})
        assert r.status_code == 200, (q, r.text)
    assert len((await search(client, sid, f'"{w}'))["items"]) == 1
