"""Search that ranks (issue 42): any word of the query matches, BM25-style (rare words first,
stop words need not match, exact tokens and phrases first), the same top hits on SQLite and
Postgres, scores on one 0..1 scale, and a query nothing matches returns nothing in every mode,
session and tenant-wide.

The app has an embedder (the ``openai`` one against the local stand-in, a bag-of-words vector
per text) on a database of this module's own: FTS5 counts a word's rarity over its whole
table, so the corpus below is all that table holds, as it is all the Postgres session holds.
The expected top hits are the same list for both backends: each backend passing is the two
agreeing on them.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import httpx
import pytest

from app.services.runtime import Runtime
from tests.api.helpers import append, assistant, create, user
from tests.support.embedder_app import (  # noqa: F401 (*_fixture: fixtures)
    embedding_batch_size_fixture,
    fake_llm_fixture,
    indexed_fixture,
    own_database_fixture,
)

# (id, text): one session's items. Words repeat across items on purpose: "deploy" is common,
# "kubernetes" rare; E1042 sits beside its near-miss E1024.
CORPUS: list[tuple[str, str]] = [
    ("anna-lisbon", "Anna moved to Lisbon in March, near the Alfama district."),
    ("anna-coffee", "Anna likes her coffee strong."),
    ("lisbon-sun", "Lisbon is sunny most of the year."),
    ("build-break", "When did the build break? It was after the deploy on Friday."),
    ("deploy-1", "The deploy finished without errors."),
    ("deploy-2", "We deploy every morning after the tests pass."),
    ("deploy-3", "Rolling back the deploy took ten minutes."),
    ("deploy-4", "The deploy pipeline caches wheels."),
    ("kube", "The cluster runs on kubernetes now."),
    ("e1042", "The parser raised E1042 on the empty file."),
    ("e1024", "E1024 was fixed in the parser yesterday; it happened again after the deploy."),
    ("cold-storage", "Backups go to cold storage in Frankfurt."),
    ("storage-cold", "The storage room is cold in winter."),
    ("retry", "Opened src/jobs/retry.py to read the backoff logic."),
    ("retry-words", "We retry the job; the py files are fine."),
]

# (query, the expected ranking's first ids, in order): the same on both backends.
TOP_HITS: list[tuple[str, list[str]]] = [
    # any word; stop words ("when", "did", "to") need not match; more terms first
    ("When did Anna move to Lisbon?", ["anna-lisbon"]),
    # a rare word outranks a common one
    ("deploy kubernetes", ["kube"]),
    # an exact token comes first, over items sharing more (common) words
    ("why did E1042 happen again after the deploy", ["e1042"]),
    ("E1042", ["e1042"]),
    # a file name is a phrase: adjacent, in order
    ("where is retry.py", ["retry"]),
    # a quoted phrase first
    ('"cold storage" backups', ["cold-storage"]),
    ('the "storage room"', ["storage-cold"]),
]


async def wait_indexed(client: httpx.AsyncClient, sid: str, count: int) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        r = await client.get(f"/v1/sessions/{sid}")
        state = r.json().get("search_index") or {}
        if state.get("indexed") == count and state.get("pending") == 0:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"not indexed in time: {state}")


@pytest.fixture(name="embedding_batch_size")
def batch_size() -> int:
    return 16


@pytest.fixture(name="corpus")
async def session_with_corpus(indexed: tuple[httpx.AsyncClient, Runtime]) -> str:
    """A session holding the corpus, embedded by the test's model (each test's app has a
    model of its own). Every copy of the corpus has the same word frequencies, so FTS5's
    table-wide rarity keeps its proportions as copies accumulate."""
    client, _ = indexed
    sid = f"rank-{uuid.uuid4().hex[:8]}"
    await create(client, sid)
    await append(client, sid, [user(text, id=item_id) for item_id, text in CORPUS])
    await wait_indexed(client, sid, len(CORPUS))
    return sid


def ids(body: dict[str, Any]) -> list[str]:
    return [h["item"]["id"] for h in body["items"]]


@pytest.mark.parametrize(("query", "top"), TOP_HITS)
async def test_the_same_top_hits_on_both_backends(
    indexed: tuple[httpx.AsyncClient, Runtime], corpus: str, query: str, top: list[str]
) -> None:
    client, _ = indexed
    sid = corpus
    for mode in ("fulltext", "hybrid"):
        r = await client.get(f"/v1/sessions/{sid}/search", params={"q": query, "mode": mode})
        assert r.status_code == 200, r.text
        body = r.json()
        assert ids(body)[: len(top)] == top, (mode, ids(body))
        scores = [h["score"] for h in body["items"]]
        assert scores == sorted(scores, reverse=True)
        assert all(0.0 <= s <= 1.0 for s in scores)  # one scale
        for h in body["items"]:
            ft = h["scores"]["fulltext"]
            assert ft is None or 0.0 < ft < 1.0


async def test_any_word_matches_and_a_near_miss_token_does_not(
    indexed: tuple[httpx.AsyncClient, Runtime], corpus: str
) -> None:
    client, _ = indexed
    sid = corpus
    url = f"/v1/sessions/{sid}/search"
    found = ids(
        (await client.get(url, params={"q": "Anna Lisbon zzzunknown", "mode": "fulltext"})).json()
    )
    assert set(found) == {"anna-lisbon", "anna-coffee", "lisbon-sun"}
    assert found[0] == "anna-lisbon"
    assert ids((await client.get(url, params={"q": "E1042", "mode": "fulltext"})).json()) == [
        "e1042"
    ]
    # a query of stop words only has nothing to match
    for mode in ("fulltext", "semantic", "hybrid"):
        body = (await client.get(url, params={"q": "when did it", "mode": mode})).json()
        assert body["items"] == [], mode


async def test_a_query_nothing_matches_returns_nothing_in_every_mode(
    indexed: tuple[httpx.AsyncClient, Runtime], corpus: dict[str, Any]
) -> None:
    """A fresh random token, and a word only an archived item holds: nothing, in every mode,
    session and tenant-wide, with the default threshold and with the most permissive one."""
    client, _ = indexed
    sid = corpus
    other = f"{sid}-x"
    await create(client, other)
    await append(client, other, [assistant("Alfama has steep streets"), user("noted")])
    await client.delete(f"/v1/sessions/{other}/items")  # "Alfama" is now in its history only
    await append(client, other, [user("what about the trams there?")])
    await wait_indexed(client, other, 3)
    token = "zqxv7" + uuid.uuid4().hex[:6]
    for q, scopes in ((token, ("memory", "history")), ("steep", ("memory",))):
        for url in (f"/v1/sessions/{other}/search", "/v1/search"):
            for mode in ("fulltext", "semantic", "hybrid"):
                for scope in scopes:
                    for extra in ({}, {"min_score": -1}):
                        params = {"q": q, "mode": mode, "scope": scope, **extra}
                        r = await client.get(url, params=params)
                        assert r.status_code == 200, r.text
                        assert r.json()["items"] == [], (url, params, r.json()["items"][:2])
    # the archived item is still found where it is: in the history
    r = await client.get(f"/v1/sessions/{other}/search", params={"q": "steep", "scope": "history"})
    assert [h["item"]["content"] for h in r.json()["items"]][:1] == ["Alfama has steep streets"]
    # and a question with a footing still gets its semantic neighbours
    r = await client.get(
        f"/v1/sessions/{sid}/search",
        params={"q": "Anna coffee", "mode": "semantic", "min_score": 0.1},
    )
    assert "anna-coffee" in ids(r.json())
