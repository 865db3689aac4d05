"""Recall (DESIGN §10) through the API, on both backends: evicted and archived items brought
back as text before the newest user message, within the budget. The embedder is the
``openai`` one against the local stand-in server (a bag-of-words vector per text: texts
sharing words are near), so rankings are deterministic."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import httpx
import pytest

from app.services.runtime import Runtime
from tests.conftest import make_settings
from tests.support.embedder_app import (  # noqa: F401 (*_fixture: fixtures)
    app_client,
    fake_llm_fixture,
    indexed_fixture,
    own_database_fixture,
)
from tests.support.fake_llm import FakeLLMServer

FACT = "the staging database password rotates every tuesday at noon"
QUESTION = "when does the staging database password rotate?"
FILLER = "we refactored module number {n} and the linter stayed quiet about widgets"


@pytest.fixture
def embedding_batch_size() -> int:
    """Texts per embeddings request in ``indexed`` (tests/support/embedder_app.py: 4)."""
    return 16


def msg(role: str, text: str) -> dict[str, Any]:
    return {"type": "message", "role": role, "content": text}


async def append(client: httpx.AsyncClient, sid: str, items: list[dict[str, Any]]) -> None:
    r = await client.post(
        f"/v1/sessions/{sid}/items", params={"create": "true"}, json={"items": items}
    )
    assert r.status_code < 300, r.text


async def wait_indexed(client: httpx.AsyncClient, sid: str) -> None:
    deadline = time.monotonic() + 20
    state: Any = None
    while time.monotonic() < deadline:
        r = await client.get(f"/v1/sessions/{sid}")
        state = r.json()["search_index"]
        if state is not None and state["pending"] == 0:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"not indexed in time: {state}")


def conversation(fact: str = FACT, *, fillers: int = 30) -> list[dict[str, Any]]:
    items = [msg("user", "hello, let us start"), msg("assistant", f"noted: {fact}")]
    for n in range(fillers):
        items.append(msg("user", FILLER.format(n=n)))
        items.append(msg("assistant", f"done with module {n}"))
    items.append(msg("user", QUESTION))
    return items


async def context(client: httpx.AsyncClient, sid: str, **body: Any) -> dict[str, Any]:
    r = await client.post(f"/v1/sessions/{sid}/context", json=body)
    assert r.status_code == 200, r.text
    out: dict[str, Any] = r.json()
    return out


MESSAGES = {
    "canonical": "items",
    "openai-chat": "messages",
    "openai-responses": "input",
    "anthropic": "messages",
    "gemini": "contents",
}


def text_of(message: dict[str, Any]) -> str:
    if "parts" in message:  # gemini
        return "\n".join(p.get("text", "") for p in message["parts"] if isinstance(p, dict))
    content = message.get("content")
    if isinstance(content, str):
        return content
    return "\n".join(b.get("text", "") for b in content or [] if isinstance(b, dict))


async def test_recall_off_is_byte_identical(indexed: tuple[httpx.AsyncClient, Runtime]) -> None:
    client, _ = indexed
    sid = f"rc-{uuid.uuid4().hex[:8]}"
    await append(client, sid, conversation())
    await wait_indexed(client, sid)
    for fmt in MESSAGES:
        plain = await client.post(
            f"/v1/sessions/{sid}/context", json={"format": fmt, "max_tokens": 300}
        )
        for recall in ({"max_tokens": 0}, None, {"max_tokens": 0, "query": "password"}):
            r = await client.post(
                f"/v1/sessions/{sid}/context",
                json={"format": fmt, "max_tokens": 300, "recall": recall},
            )
            assert r.status_code == 200, r.text
            assert r.content == plain.content
        g = await client.get(
            f"/v1/sessions/{sid}/context",
            params={"format": fmt, "max_tokens": 300, "recall_tokens": 0},
        )
        assert g.content == plain.content


@pytest.mark.parametrize("fmt", list(MESSAGES))
async def test_a_dropped_fact_is_recalled_before_the_newest_user_message(
    indexed: tuple[httpx.AsyncClient, Runtime], fmt: str
) -> None:
    client, _ = indexed
    sid = f"rc-{uuid.uuid4().hex[:8]}"
    await append(client, sid, conversation())
    await wait_indexed(client, sid)
    off = await context(client, sid, format=fmt, max_tokens=400)
    assert FACT not in str(off[MESSAGES[fmt]])
    body = await context(client, sid, format=fmt, max_tokens=400, recall={"max_tokens": 120})
    report = body["report"]
    assert report["projected_tokens"] <= 400
    assert report["recall_query"] == QUESTION
    assert report["recalled"] and report["recalled"][0]["seq"] == 2
    assert report["recalled"][0]["session_id"] == sid
    assert sum(e["tokens"] for e in report["recalled"]) <= 120
    messages = body[MESSAGES[fmt]]
    last_user = max(
        k for k, m in enumerate(messages) if m.get("role") == "user" and QUESTION in text_of(m)
    )
    if fmt == "anthropic":  # merged into the newest user turn, before the user's own text
        blocks = messages[last_user]["content"]
        assert blocks[0]["text"].startswith("Earlier in this conversation")
        assert FACT in blocks[0]["text"] and blocks[-1]["text"] == QUESTION
    elif fmt == "gemini":  # a text part of the newest user content, before the user's text
        parts = messages[last_user]["parts"]
        assert parts[0]["text"].startswith("Earlier in this conversation")
        assert FACT in parts[0]["text"] and parts[-1]["text"] == QUESTION
    else:
        block = messages[last_user - 1]
        assert block["role"] == "system"
        assert block["content"].startswith("Earlier in this conversation (recalled")
        assert "[seq 2, " in block["content"] and f"assistant: noted: {FACT}" in block["content"]
    # the rest of the prompt is the projection of the budget less the share
    rest = await context(client, sid, format=fmt, max_tokens=280)
    assert rest["report"]["projected_items"] == report["projected_items"]
    assert rest["report"]["dropped_ranges"] == report["dropped_ranges"]
    # deterministic
    again = await client.post(
        f"/v1/sessions/{sid}/context",
        json={"format": fmt, "max_tokens": 400, "recall": {"max_tokens": 120}},
    )
    assert again.json() == body


async def test_archived_items_and_call_pairs_are_recalled(
    indexed: tuple[httpx.AsyncClient, Runtime],
) -> None:
    client, _ = indexed
    sid = f"rc-{uuid.uuid4().hex[:8]}"
    items = [
        msg("user", "check the deploy config"),
        {
            "type": "function_call",
            "call_id": "c1",
            "name": "read_file",
            "arguments": '{"path": "deploy.yaml"}',
        },
        {
            "type": "function_call_output",
            "call_id": "c1",
            "output": "staging database password rotates on tuesday",
        },
        msg("assistant", "read it"),
    ]
    items += conversation(fillers=6)[2:]
    await append(client, sid, items)
    r = await client.post(
        f"/v1/sessions/{sid}/compact", json={"policy": "window", "keep_last_items": 3}
    )
    assert r.status_code == 200, r.text
    await wait_indexed(client, sid)
    body = await context(client, sid, recall={"max_tokens": 300, "max_items": 3})
    block = next(m for m in body["items"] if m["role"] == "system" and "recalled" in m["content"])
    line = next(x for x in block["content"].splitlines() if "read_file" in x)
    assert line.startswith("[seq 2-3, ")
    assert 'tool call read_file({"path": "deploy.yaml"}) returned: staging database' in line
    seqs = [e["seq"] for e in body["report"]["recalled"]]
    assert 2 in seqs and 3 not in seqs  # one entry for the pair
    # nothing recalled is in the prompt already
    kept = {m["seq"] for m in body["items"] if "seq" in m}
    assert not kept & set(seqs)


async def test_prefix_scope_recalls_from_the_users_other_sessions(
    indexed: tuple[httpx.AsyncClient, Runtime],
) -> None:
    client, _ = indexed
    user = uuid.uuid4().hex[:6]
    old, other_user, now = f"u{user}:old", f"v{user}:x", f"u{user}:new"
    await append(client, old, [msg("user", f"remember: {FACT}")])
    await append(client, other_user, [msg("user", "the staging database password is hunter2")])
    await append(client, now, [msg("user", QUESTION)])
    for s in (old, other_user, now):
        await wait_indexed(client, s)
    body = await context(client, now, recall={"max_tokens": 200})
    assert body["report"]["recalled"] == []  # session scope: nothing else in this one
    body = await context(client, now, recall={"max_tokens": 200, "scope": "prefix"})
    recalled = body["report"]["recalled"]
    assert [(e["session_id"], e["seq"]) for e in recalled] == [(old, 1)]
    block = body["items"][0]
    assert block["content"].startswith("Earlier in this conversation and from this user's")
    assert f"[session {old}, seq 1, " in block["content"] and "hunter2" not in block["content"]


async def test_pending_note_and_full_text_while_the_index_is_behind(
    indexed: tuple[httpx.AsyncClient, Runtime], fake_llm: FakeLLMServer
) -> None:
    client, _ = indexed
    fake_llm.configure("error", status=503)
    sid = f"rc-{uuid.uuid4().hex[:8]}"
    await append(client, sid, conversation(fillers=10))
    body = await context(
        client, sid, max_tokens=200, recall={"max_tokens": 100, "query": "password rotates"}
    )
    notes = body["report"]["notes"]
    assert any(n.startswith("recall-pending: ") for n in notes), notes
    assert [e["seq"] for e in body["report"]["recalled"]] == [2]  # found by full text
    fake_llm.reset()


async def test_recall_off_note_without_an_embedder(
    backend: str, request: pytest.FixtureRequest
) -> None:
    settings = make_settings(
        backend, request, auth={"mode": "off"}, embeddings={"provider": "none"}
    )
    async for client, _ in app_client(settings):
        sid = f"rc-{uuid.uuid4().hex[:8]}"
        await append(client, sid, conversation(fillers=10))
        body = await context(
            client, sid, max_tokens=200, recall={"max_tokens": 100, "query": "password rotates"}
        )
        assert any(n.startswith("recall-off: ") for n in body["report"]["notes"])
        assert [e["seq"] for e in body["report"]["recalled"]] == [2]


async def test_session_config_gives_recall_defaults_and_get_parameters(
    indexed: tuple[httpx.AsyncClient, Runtime],
) -> None:
    client, _ = indexed
    sid = f"rc-{uuid.uuid4().hex[:8]}"
    await append(client, sid, conversation())
    await wait_indexed(client, sid)
    r = await client.patch(
        f"/v1/sessions/{sid}",
        json={"config": {"context": {"max_tokens": 400, "recall": {"max_tokens": 150}}}},
    )
    assert r.status_code == 200, r.text
    body = await context(client, sid)
    assert [e["seq"] for e in body["report"]["recalled"]][:1] == [2]
    # field by field: the request's max_items on top of the config's share
    body = await context(client, sid, recall={"max_items": 1})
    assert len(body["report"]["recalled"]) == 1
    # null turns the default off
    body = await context(client, sid, recall=None)
    assert body["report"]["recalled"] == [] and body["report"]["recall_query"] is None
    # GET takes the same as query parameters
    r = await client.get(
        f"/v1/sessions/{sid}/context",
        params={
            "recall_tokens": 150,
            "recall_query": "module 3 linter",
            "recall_items": 2,
            "recall_min_score": 0.1,
            "recall_scope": "session",
        },
    )
    assert r.status_code == 200, r.text
    report = r.json()["report"]
    assert report["recall_query"] == "module 3 linter" and 1 <= len(report["recalled"]) <= 2


@pytest.mark.parametrize(
    ("body", "loc"),
    [
        ({"max_tokens": 100, "recall": {"max_tokens": 100}}, ["recall", "max_tokens"]),
        ({"max_chars": 400, "recall": {"max_tokens": 100}}, ["recall", "max_tokens"]),
        ({"recall": {"max_tokens": 10, "max_items": 0}}, None),
        ({"recall": {"max_tokens": 10, "max_items": 51}}, None),
        ({"recall": {"max_tokens": -1}}, None),
        ({"recall": {"max_tokens": 10, "scope": "tenant"}}, None),
        ({"recall": {"max_tokens": 10, "query": ""}}, None),
        ({"recall": {"max_tokens": 10, "min_score": 2}}, None),
        ({"recall": {"max_tokens": 10, "colour": "red"}}, None),
    ],
)
async def test_bad_recall_is_a_422_that_changes_nothing(
    indexed: tuple[httpx.AsyncClient, Runtime], body: dict[str, Any], loc: list[str] | None
) -> None:
    client, _ = indexed
    sid = f"rc-{uuid.uuid4().hex[:8]}"
    await append(client, sid, conversation(fillers=2))
    before = (await client.get(f"/v1/sessions/{sid}")).json()["version"]
    r = await client.post(f"/v1/sessions/{sid}/context", json=body)
    assert r.status_code == 422, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    if loc is not None:
        assert any(e["loc"][-2:] == loc for e in r.json()["errors"]), r.json()
    assert (await client.get(f"/v1/sessions/{sid}")).json()["version"] == before
    for params in ({"recall_items": 0}, {"recall_tokens": -1}, {"recall_scope": "x"}):
        g = await client.get(f"/v1/sessions/{sid}/context", params=params)
        assert g.status_code == 422, g.text
