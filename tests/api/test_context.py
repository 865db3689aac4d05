"""GET/POST /v1/sessions/{id}/context: the served prompt is what the domain projects from the
whole working memory, in every format, within budget, valid for the provider."""

from __future__ import annotations

import json
import random
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from datetime import datetime
from typing import Any

import httpx
import pytest

from app.domain.formats import payload_usage
from app.domain.items import StoredItem, body_from_dict
from app.domain.projection import Budget, ContextSource, project_context
from tests.api.helpers import all_items, append, assert_problem, create, user
from tests.support.provider_validation import validate_payload
from tests.support.spec_check import ASYNC_HOOKS

FORMATS = ("canonical", "openai-chat", "openai-responses", "anthropic")
ENVELOPE = {"id", "seq", "tokens", "chars", "pinned", "metadata", "created_at", "format"}


def stored(wire: dict[str, Any]) -> StoredItem:
    return StoredItem(
        body=body_from_dict({k: v for k, v in wire.items() if k not in ENVELOPE}),
        id=wire["id"],
        seq=wire["seq"],
        tokens=wire["tokens"],
        chars=wire["chars"],
        pinned=wire["pinned"],
        metadata=wire["metadata"],
        created_at=datetime.fromisoformat(wire["created_at"]),
    )


async def whole_memory(client: httpx.AsyncClient, sid: str) -> ContextSource:
    """The session's whole working memory and summary, as the projection takes it."""
    memory = [stored(w) for w in await all_items(client, sid)]
    session = (await client.get(f"/v1/sessions/{sid}")).json()
    return ContextSource(
        summary=session["summary"],
        items=memory,
        total_items=len(memory),
        total_tokens=sum(m.tokens for m in memory),
        total_chars=sum(m.chars for m in memory),
    )


def payload_of(body: dict[str, Any]) -> dict[str, Any]:
    return {k: body[k] for k in ("items", "messages", "input", "system") if k in body}


def agent_transcript(turns: int, rng: random.Random) -> list[dict[str, Any]]:
    """A coding agent's memory: system prompt, user turns, parallel tool calls, reasoning,
    a developer note now and then, a pinned fact, and a call still waiting at the end."""
    items: list[dict[str, Any]] = [{"type": "message", "role": "system", "content": "You are a careful coding agent."}]
    for t in range(turns):
        items.append(user(f"Turn {t}: please fix bug #{t} " + "details " * rng.randint(1, 30), pinned=(t == 3)))
        if t % 7 == 0:
            items.append({"type": "message", "role": "developer", "content": f"note {t}: keep tests green"})
        for round_ in range(rng.randint(0, 2)):
            items.append({"type": "reasoning", "summary": [f"think {t}"], "content": "hmm " * rng.randint(1, 20)})
            calls = [f"c{t}-{round_}-{k}" for k in range(rng.randint(1, 3))]
            for cid in calls:
                items.append({"type": "function_call", "call_id": cid, "name": "read_file",
                              "arguments": json.dumps({"path": f"src/m{t}.py"})})
            for cid in rng.sample(calls, len(calls)):
                items.append({"type": "function_call_output", "call_id": cid, "output": "line\n" * rng.randint(1, 80)})
        items.append({"type": "message", "role": "assistant", "content": f"Fixed bug #{t}. " + "ok " * rng.randint(1, 10)})
    items.append(user("Now run the whole suite."))
    items.append({"type": "function_call", "call_id": "pending", "name": "bash", "arguments": '{"cmd": "pytest"}'})
    return items


async def seed(client: httpx.AsyncClient, sid: str, turns: int, *, seed: int = 7) -> list[dict[str, Any]]:
    await create(client, sid)
    items = agent_transcript(turns, random.Random(seed))
    for start in range(0, len(items), 50):
        r = await append(client, sid, items[start : start + 50])
        assert r.status_code == 201, r.text
    return items


async def test_every_format_is_valid_and_within_budget(client: httpx.AsyncClient, sid: str) -> None:
    await seed(client, sid, 40)
    for fmt in FORMATS:
        for max_tokens in (None, 5000, 800, 100):
            params: dict[str, Any] = {"format": fmt}
            if max_tokens:
                params["max_tokens"] = max_tokens
            r = await client.get(f"/v1/sessions/{sid}/context", params=params)
            assert r.status_code == 200, r.text
            body = r.json()
            assert body["format"] == fmt and r.headers["etag"] == f'"{body["version"]}"'
            payload = payload_of(body)
            if fmt != "canonical":
                validate_payload(fmt, payload)
            report = body["report"]
            tokens, chars = payload_usage(fmt, payload)
            assert (report["projected_tokens"], report["projected_chars"]) == (tokens, chars)
            assert report["source_items"] == report["projected_items"] + report["dropped_items"]
            if max_tokens and not any("mandatory" in n for n in report["notes"]):
                assert tokens <= max_tokens
            if max_tokens == 100:
                assert report["dropped_items"] > 0 and "max_tokens" in report["limits_applied"]


async def test_served_context_equals_the_full_projection(client: httpx.AsyncClient, sid: str) -> None:
    """The service loads only a window of a long session; whatever it loads, the answer is
    byte-identical to projecting the whole working memory."""
    await seed(client, sid, 120)
    full = await whole_memory(client, sid)
    rng = random.Random(11)
    budgets: list[dict[str, Any]] = [{"max_tokens": 8000}, {"max_items": 20}, {"max_chars": 3000}]
    for _ in range(18):
        budget: dict[str, Any] = {}
        for name, values in {
            "max_tokens": [50, 400, 2000, 9000],
            "max_items": [1, 5, 30, 200],
            "max_chars": [200, 5000],
            "pinned_prefix_items": [0, 2, 6],
            "keep_system": [True, False],
            "max_recent_tool_results": [0, 2],
            "trim_old_reasoning": [True, False],
            "start_on": ["any", "user"],
            "dangling_tool_calls": ["drop", "placeholder"],
            "tokenizer": ["o200k_base", "cl100k_base", "approx"],
        }.items():
            if rng.random() < 0.4:
                budget[name] = rng.choice(values)
        budgets.append(budget)
    for budget in budgets:
        for fmt in FORMATS:
            r = await client.post(f"/v1/sessions/{sid}/context", json={"format": fmt, **budget})
            assert r.status_code == 200, (budget, r.text)
            expected = project_context(full, Budget(**budget), format=fmt)
            served = r.json()
            assert served["report"] == json.loads(expected.report.model_dump_json()), (fmt, budget)
            assert json.dumps(payload_of(served), sort_keys=True) == json.dumps(
                json.loads(json.dumps(expected.payload, default=lambda d: d.isoformat())), sort_keys=True
            ), (fmt, budget)


async def test_summary_comes_first(client: httpx.AsyncClient, sid: str) -> None:
    await seed(client, sid, 3)
    await client.patch(f"/v1/sessions/{sid}", json={"summary": "## Goal\nFix every bug"})
    chat = (await client.get(f"/v1/sessions/{sid}/context", params={"format": "openai-chat"})).json()
    assert chat["messages"][0] == {"role": "system", "content": "## Goal\nFix every bug"}
    anth = (await client.get(f"/v1/sessions/{sid}/context", params={"format": "anthropic"})).json()
    system = anth["system"] if isinstance(anth["system"], str) else anth["system"][0]["text"]
    assert system.startswith("## Goal")
    assert anth["messages"][0]["role"] == "user"


async def test_config_defaults_and_overrides(client: httpx.AsyncClient, sid: str) -> None:
    await seed(client, sid, 30)
    r = await client.patch(f"/v1/sessions/{sid}", json={"config": {"context": {"max_items": 4}}})
    assert r.status_code == 200, r.text
    body = (await client.get(f"/v1/sessions/{sid}/context")).json()
    report = body["report"]
    assert report["projected_items"] <= 4 or any("mandatory" in n for n in report["notes"])
    assert "max_items" in body["report"]["limits_applied"]
    lifted = (await client.post(f"/v1/sessions/{sid}/context", json={"max_items": None})).json()
    assert lifted["report"]["dropped_items"] < body["report"]["dropped_items"]
    wider = (await client.get(f"/v1/sessions/{sid}/context", params={"max_items": 50})).json()
    assert wider["report"]["projected_items"] > body["report"]["projected_items"]


@pytest.mark.parametrize(
    "params",
    [
        {"max_tokens": 0},
        {"max_items": -1},
        {"format": "xml"},
        {"tokenizer": "gpt2"},
        {"start_on": "assistant"},
        {"max_chars": "lots"},
    ],
)
async def test_invalid_budgets_are_422(client: httpx.AsyncClient, sid: str, params: dict[str, Any]) -> None:
    await create(client, sid)
    assert_problem(await client.get(f"/v1/sessions/{sid}/context", params=params), 422)
    body = {"format": "canonical", **params} if "format" not in params else params
    assert_problem(await client.post(f"/v1/sessions/{sid}/context", json=body), 422)


async def test_bad_context_config_is_refused(client: httpx.AsyncClient, sid: str) -> None:
    await create(client, sid)
    for context in ({"max_tokens": 0}, {"max_tokns": 5}, {"start_on": "never"}):
        r = await client.patch(f"/v1/sessions/{sid}", json={"config": {"context": context}})
        assert_problem(r, 422)
    assert (await client.get(f"/v1/sessions/{sid}")).json()["config"] == {}
    assert_problem(await client.post(f"/v1/sessions/{sid}/context", json={"unknown": 1}), 422)
    assert_problem(await client.get("/v1/sessions/missing-session/context"), 404)


async def test_empty_session(client: httpx.AsyncClient, sid: str) -> None:
    await create(client, sid)
    for fmt in FORMATS:
        body = (await client.get(f"/v1/sessions/{sid}/context", params={"format": fmt, "max_tokens": 100})).json()
        assert body["report"]["projected_items"] == 0 and body["report"]["source_items"] == 0


NATIVE = {
    "openai-chat": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is in a.py?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "read", "arguments": '{"path": "a.py"}'}},
            {"id": "call_2", "type": "function", "function": {"name": "read", "arguments": '{"path": "b.py"}'}},
        ]},
        {"role": "tool", "tool_call_id": "call_1", "content": "print(1)"},
        {"role": "tool", "tool_call_id": "call_2", "content": "print(2)"},
        {"role": "assistant", "content": "It prints 1."},
    ],
    "openai-responses": [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Hi"}]},
        {"type": "function_call", "call_id": "fc_1", "name": "lookup", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "fc_1", "output": "42"},
        {"type": "message", "role": "assistant", "content": "The answer is 42."},
    ],
    "anthropic": [
        {"role": "user", "content": "Look at a.py"},
        {"role": "assistant", "content": [
            {"type": "text", "text": "Reading it."},
            {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {"path": "a.py"}},
        ]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "print(1)"}]},
        {"role": "assistant", "content": "It prints 1."},
    ],
}


@pytest.mark.parametrize("fmt", list(NATIVE))
async def test_round_trip_through_the_api(client: httpx.AsyncClient, sid: str, fmt: str) -> None:
    """Ingest in format F, project in F with no budget: the same messages come back."""
    await create(client, sid)
    body: dict[str, Any] = {"format": fmt, "items": NATIVE[fmt]}
    if fmt == "anthropic":
        body["system"] = "Be brief."
    r = await client.post(f"/v1/sessions/{sid}/items", json=body)
    assert r.status_code == 201, r.text
    served = (await client.get(f"/v1/sessions/{sid}/context", params={"format": fmt})).json()
    validate_payload(fmt, payload_of(served))
    if fmt == "openai-chat":
        assert served["messages"][0] == NATIVE[fmt][0]
        assert served["messages"][2]["tool_calls"] == NATIVE[fmt][2]["tool_calls"]
        assert served["messages"][3:] == NATIVE[fmt][3:]
    elif fmt == "anthropic":
        assert served["system"] == "Be brief."
        assert served["messages"][1]["content"] == NATIVE[fmt][1]["content"]
        assert served["messages"][2] == NATIVE[fmt][2]
    else:
        assert [i["type"] for i in served["input"]] == [i["type"] for i in NATIVE[fmt]]
        assert served["input"][1]["call_id"] == "fc_1" and served["input"][2]["output"] == "42"


async def test_openai_responses_sends_reasoning_only_under_an_id_openai_issued(
    client: httpx.AsyncClient, sid: str
) -> None:
    """Canonical reasoning appended without an ``rs_`` id (so stored under our ``itm_`` id) is
    left out of an openai-responses prompt, which a note says why: the Responses API requires a
    reasoning item's ``id`` and refuses one it did not issue. Named ``rs_...``, it is sent with
    that id (trimmed by Tier 2 too)."""
    await create(client, sid)
    ours = {"type": "reasoning", "summary": ["weighing it"], "encrypted_content": "gAAAA-ours"}
    r = await append(
        client,
        sid,
        [user("Why?"), ours, {"type": "message", "role": "assistant", "content": "Because."}],
    )
    assert r.status_code == 201, r.text
    our_id = r.json()["items"][1]["id"]
    assert our_id.startswith("itm_")

    why = "left out 1 reasoning items without a reasoning id OpenAI issued"
    served = (
        await client.get(f"/v1/sessions/{sid}/context", params={"format": "openai-responses"})
    ).json()
    payload = payload_of(served)
    validate_payload("openai-responses", payload)
    assert [(i["type"], i["role"]) for i in payload["input"]] == [
        ("message", "user"),
        ("message", "assistant"),
    ]
    assert our_id not in json.dumps(payload) and "weighing it" not in json.dumps(payload)
    report = served["report"]
    assert (report["projected_items"], report["dropped_items"], report["dropped_ranges"]) == (
        2,
        1,
        [[2, 2]],
    )
    assert (report["projected_tokens"], report["projected_chars"]) == payload_usage(
        "openai-responses", payload
    )
    assert any(why in n and "rs_" in n for n in report["notes"]), report["notes"]
    # read back in the format, the same rule and the same note
    listed = (
        await client.get(f"/v1/sessions/{sid}/items", params={"format": "openai-responses"})
    ).json()
    assert [i["type"] for i in listed["items"]] == ["message", "message"]
    assert any(why in n for n in listed["notes"]), listed["notes"]

    issued = {"type": "reasoning", "id": "rs_68c1d2e3f4", "summary": ["second thoughts"]}
    r = await append(
        client,
        sid,
        [issued, {"type": "message", "role": "assistant", "content": "Also."}, user("Thanks.")],
    )
    assert r.status_code == 201, r.text
    served = (
        await client.get(f"/v1/sessions/{sid}/context", params={"format": "openai-responses"})
    ).json()
    payload = payload_of(served)
    validate_payload("openai-responses", payload)
    sent = [i for i in payload["input"] if i["type"] == "reasoning"]
    assert sent == [
        {
            "type": "reasoning",
            "id": "rs_68c1d2e3f4",
            "summary": [{"type": "summary_text", "text": "second thoughts"}],
        }
    ]
    assert payload["input"].index(sent[0]) == 2  # in its place, before its answer
    assert served["report"]["dropped_ranges"] == [[2, 2]]
    assert any(why in n for n in served["report"]["notes"]), served["report"]["notes"]

    r = await client.post(
        f"/v1/sessions/{sid}/context",
        json={"format": "openai-responses", "trim_old_reasoning": True},
    )
    assert r.status_code == 200, r.text
    trimmed = [i for i in r.json()["input"] if i["type"] == "reasoning"]
    assert trimmed == [{"type": "reasoning", "id": "rs_68c1d2e3f4", "summary": []}]
    assert "tier2: trimmed 1 reasoning items" in r.json()["report"]["notes"]


async def test_bad_native_input_stores_nothing(client: httpx.AsyncClient, sid: str) -> None:
    await create(client, sid)
    bad = [{"role": "user", "content": "ok"}, {"role": "tool", "content": "no call id"}]
    assert_problem(await client.post(f"/v1/sessions/{sid}/items", json={"format": "openai-chat", "items": bad}), 422)
    assert_problem(
        await client.post(f"/v1/sessions/{sid}/items", json={"format": "openai-chat", "items": [{"role": "user", "content": "x"}], "system": "s"}),
        422,
    )
    assert (await client.get(f"/v1/sessions/{sid}")).json()["item_count"] == 0


async def test_a_recreated_session_never_shows_cached_items(client: httpx.AsyncClient, sid: str) -> None:
    """Reads keep decoded items in memory; a session deleted and created again under the same
    id, with the same item ids at the same seqs, must still show its new contents."""
    for text in ("the old secret", "the new content"):
        await create(client, sid)
        r = await append(client, sid, [user(text, id="m1"), user(text + " again", id="m2")])
        assert r.status_code == 201
        body = (await client.get(f"/v1/sessions/{sid}/context", params={"max_tokens": 1000})).json()
        assert [i["content"] for i in body["items"]] == [text, text + " again"]
        assert (await client.delete(f"/v1/sessions/{sid}")).status_code == 204


def test_item_cache_is_bounded_and_skips_large_items() -> None:
    from app.store.item_cache import ItemCache

    cache = ItemCache(max_items=3, max_item_chars=10)
    made = [stored({"type": "message", "role": "user", "content": "x" * n, "id": f"i{n}", "seq": n,
                    "tokens": 1, "chars": n, "pinned": False, "metadata": {},
                    "created_at": "2026-11-29T12:00:00+00:00"}) for n in range(1, 6)]
    keys = [("t", "s", m.seq, m.id, m.created_at) for m in made]
    for key, item in zip(keys, made, strict=True):
        cache.put(key, item)
    assert len(cache) == 3 and cache.get(keys[0]) is None and cache.get(keys[4]) is made[4]
    cache.get(keys[2])  # touched: survives the next insertion
    big = stored({"type": "message", "role": "user", "content": "y" * 50, "id": "big", "seq": 9,
                  "tokens": 1, "chars": 50, "pinned": False, "metadata": {},
                  "created_at": "2026-11-29T12:00:00+00:00"})
    cache.put(("t", "s", 9, "big", big.created_at), big)
    assert cache.get(("t", "s", 9, "big", big.created_at)) is None
    cache.put(("t", "s", 6, "i6", made[0].created_at), made[0])
    assert cache.get(keys[2]) is made[2] and cache.get(keys[3]) is None


def test_item_cache_get_many_finds_by_seq_and_touches_what_it_finds() -> None:
    from app.store.item_cache import ItemCache

    cache = ItemCache(max_items=3)
    made = [stored({"type": "message", "role": "user", "content": "x", "id": f"i{n}", "seq": n,
                    "tokens": 1, "chars": 1, "pinned": False, "metadata": {},
                    "created_at": "2026-11-29T12:00:00+00:00"}) for n in range(1, 4)]
    base = ("t", "s", made[0].created_at)
    for item in made:
        cache.put((*base, item.seq), item)
    found, missing = cache.get_many(base, [3, 7, 1, 8])
    assert found == {3: made[2], 1: made[0]} and missing == [7, 8]
    assert cache.get_many(("t", "other", made[0].created_at), [1]) == ({}, [1])
    cache.put((*base, 4), made[0])  # evicts the least recently used: seq 2 (1 and 3 were read)
    assert cache.get_many(base, [1, 2, 3])[1] == [2]


async def test_every_write_is_seen_by_the_next_read(client: httpx.AsyncClient, sid: str) -> None:
    """A prompt is kept per (session, version, format, budget): after any kind of write, the
    next read with the same budget must serve what the whole working memory projects to now,
    never what the same read returned before the write."""

    async def check(label: str) -> dict[str, Any]:
        memory = [stored(w) for w in await all_items(client, sid)]
        session = (await client.get(f"/v1/sessions/{sid}")).json()
        context = session["config"].get("context") or {}
        full = ContextSource(
            summary=session["summary"],
            items=memory,
            total_items=len(memory),
            total_tokens=sum(m.tokens for m in memory),
            total_chars=sum(m.chars for m in memory),
        )
        served = {}
        for _ in range(2):  # the second read is the one a cache would answer
            r = await client.get(f"/v1/sessions/{sid}/context", params={"format": "openai-chat"})
            assert r.status_code == 200, r.text
            assert r.headers["etag"] == f'"{session["version"]}"', label
            served = r.json()
            expected = project_context(full, Budget(**context), format="openai-chat")
            assert served["version"] == session["version"], label
            assert served["messages"] == json.loads(json.dumps(expected.payload["messages"])), label
            assert served["report"] == json.loads(expected.report.model_dump_json()), label
        return served

    items = await seed(client, sid, 12)
    await client.patch(f"/v1/sessions/{sid}", json={"config": {"context": {"max_tokens": 600}}})
    seen = [await check("seeded")]
    assert (await append(client, sid, [user("one more thing")])).status_code == 201
    seen.append(await check("append"))
    assert (await client.post(f"/v1/sessions/{sid}/items/pop")).status_code == 200
    seen.append(await check("pop"))
    r = await client.patch(f"/v1/sessions/{sid}", json={"config": {"context": {"max_items": 3}}})
    assert r.status_code == 200, r.text
    seen.append(await check("config"))
    r = await client.post(f"/v1/sessions/{sid}/snapshots", json={})
    assert r.status_code == 201, r.text
    snapshot_id = r.json()["id"]
    seen.append(await check("snapshot"))
    r = await client.post(f"/v1/sessions/{sid}/compact", json={"policy": "structured"})
    assert r.status_code == 200, r.text
    seen.append(await check("compact"))
    assert (await client.delete(f"/v1/sessions/{sid}/items")).status_code == 200
    seen.append(await check("clear"))
    assert seen[-1]["messages"] != seen[-2]["messages"]
    r = await client.post(f"/v1/sessions/{sid}/restore", json={"snapshot_id": snapshot_id})
    assert r.status_code == 200, r.text
    seen.append(await check("restore"))
    assert seen[-1]["messages"] == seen[3]["messages"] and len(items) > 3
    versions = [s["version"] for s in seen]
    assert versions == sorted(set(versions))


def test_prompt_cache_is_bounded_and_skips_large_prompts() -> None:
    from app.store.prompt_cache import PromptCache

    cache = PromptCache(max_entries=2, max_entry_chars=100)
    cache.put("a", 1, chars=10)
    cache.put("b", 2, chars=10)
    assert cache.get("a") == 1  # touched: "b" is now the oldest
    cache.put("c", 3, chars=10)
    assert cache.get("b") is None and cache.get("a") == 1 and cache.get("c") == 3
    cache.put("big", 4, chars=101)
    assert cache.get("big") is None and len(cache) == 2
    assert PromptCache(max_entries=0).max_entries == 0


async def test_reads_racing_appends_are_each_one_consistent_state(client: httpx.AsyncClient, sid: str) -> None:
    """Reads racing appends: every served prompt must be the state of exactly its version.
    (The race window is narrow; the next test drives the outdated-row paths deterministically.)"""
    import asyncio

    await create(client, sid)
    assert (await append(client, sid, [user("m0")])).status_code == 201
    base = (await client.get(f"/v1/sessions/{sid}")).json()["version"]

    async def writer() -> None:
        for k in range(1, 31):
            assert (await append(client, sid, [user(f"m{k}")])).status_code == 201

    async def reader(budget: dict[str, Any]) -> list[dict[str, Any]]:
        seen = []
        for _ in range(30):
            r = await client.post(f"/v1/sessions/{sid}/context", json={"format": "openai-chat", **budget})
            assert r.status_code == 200, r.text
            seen.append(r.json())
        return seen

    _, *served = await asyncio.gather(writer(), reader({"max_items": 3}), reader({"max_tokens": 40}), reader({}))
    for body in (b for group in served for b in group):
        k = body["version"] - base
        assert body["messages"][-1]["content"] == f"m{k}"
        assert body["report"]["source_items"] == k + 1


async def test_appended_items_read_back_as_stored(client: httpx.AsyncClient, sid: str) -> None:
    """An append leaves its items in the process's item cache for the next context read;
    what that read serves must be exactly what the database gives (GET /items loads them)."""
    await create(client, sid)
    items = [
        {"type": "message", "role": "system", "content": "sys", "id": "s1"},
        {"type": "message", "role": "user", "content": [
            {"type": "text", "text": "look"},
            {"type": "image", "url": "https://example.com/a.png", "detail": "low"},
        ]},
        {"type": "reasoning", "summary": ["plan"], "content": "think", "encrypted_content": "abc"},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": '{"b": 1, "a": [2.50, 1e3]}'},
        {"type": "function_call_output", "call_id": "c1", "output": "é\\u00e9 \U0001F600", "pinned": True},
        {"type": "message", "role": "assistant", "content": "done", "metadata": {"z": 1, "a": {"y": 2, "b": 3}}},
    ]
    r = await append(client, sid, items)
    assert r.status_code == 201, r.text
    served = (await client.get(f"/v1/sessions/{sid}/context", params={"max_tokens": 10**6})).json()["items"]
    # byte for byte (key order too: the prompt must not depend on which process answers)
    assert json.dumps(served) == json.dumps(await all_items(client, sid))


def test_caches_are_bounded_by_total_size() -> None:
    from app.store.item_cache import ItemCache
    from app.store.prompt_cache import PromptCache

    prompts = PromptCache(max_entries=100, max_entry_chars=50, max_total_chars=100)
    for n in range(5):
        prompts.put(n, n, chars=40)
    assert len(prompts) == 2 and prompts.chars == 80 and prompts.get(4) == 4 and prompts.get(2) is None
    prompts.put(4, "again", chars=10)  # replacing an entry does not count it twice
    assert prompts.chars == 50 and prompts.get(4) == "again"

    items = ItemCache(max_items=100, max_item_chars=50, max_total_chars=100)
    made = [stored({"type": "message", "role": "user", "content": "x" * 40, "id": f"i{n}", "seq": n,
                    "tokens": 1, "chars": 40, "pinned": False, "metadata": {},
                    "created_at": "2026-11-29T12:00:00+00:00"}) for n in range(5)]
    for item in made:
        items.put(("t", "s", item.created_at, item.seq), item)
    assert len(items) == 2 and items.chars == 80
    assert items.get(("t", "s", made[4].created_at, 4)) is made[4]
    items.put(("t", "s", made[4].created_at, 4), made[4])
    assert items.chars == 80


@contextmanager
def counting_statements() -> Iterator[list[int]]:
    """How many hot-path statements (``RawQuery.rows``) run inside the block: ``[count]``."""
    from app.store import raw

    count = [0]
    original = raw.RawQuery.rows

    async def counted(self: raw.RawQuery, db: Any, params: Any) -> Any:
        count[0] += 1
        return await original(self, db, params)

    raw.RawQuery.rows = counted  # type: ignore[method-assign]
    try:
        yield count
    finally:
        raw.RawQuery.rows = original  # type: ignore[method-assign]


@asynccontextmanager
async def serving(settings: Any) -> AsyncIterator[tuple[Any, httpx.AsyncClient]]:
    """The app's runtime (for calling the service directly) and a client of the same app."""
    from app.main import create_app

    app = create_app(settings)
    async with app.router.lifespan_context(app):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://localhost", event_hooks=ASYNC_HOOKS) as c:
            yield app.state.runtime, c


async def test_a_read_that_started_before_a_write_serves_the_new_state(settings: Any) -> None:
    """Both ways a context read can find the session row it started from outdated (the
    usual case's single statement, and the snapshot path) must notice and serve the state
    that is there now, never a mix of the two."""
    from app.services import context as service
    from app.services.access import load_session
    from app.services.runtime import Actor

    async with serving(settings) as (rt, c):
        sid = "stale-read"
        await create(c, sid)
        assert (await append(c, sid, [user("first")])).status_code == 201
        async with rt.store.read() as db:
            stale = await load_session(db, Actor(), sid)
        assert (await append(c, sid, [user("second")])).status_code == 201
        budget = Budget(max_tokens=1000)
        async with rt.store.read() as db:
            at_once, outdated = await service._at_once(rt, db, Actor(), stale, budget, "openai-chat")
        assert at_once is None and outdated
        state, _, projected = await service._in_snapshot(
            rt, Actor(), sid, stale, {"max_tokens": 1000}, "openai-chat"
        )
        assert state.version == stale.version + 1
        assert [m["content"] for m in projected.payload["messages"]] == ["first", "second"]
        served = await service.read_context(rt, Actor(), sid, format="openai-chat", overrides={"max_tokens": 1000})
        assert served.version == state.version and served.projected.payload == projected.payload


async def test_a_tail_smaller_than_the_average_settles_without_a_snapshot(settings: Any) -> None:
    """The first statement sizes its window from the session's average item; when the newest
    items are much smaller (long documents early, short turns since), the usual case reads
    more batches on the same connection instead of starting over in a snapshot, and serves
    exactly what the snapshot path does."""
    from app.services import context as service
    from app.services.access import load_session
    from app.services.runtime import Actor

    async with serving(settings) as (rt, c):
        sid = "small-tail"
        await create(c, sid)
        documents = [user(f"document {n}: " + "lorem ipsum dolor sit amet " * 300) for n in range(12)]
        assert (await append(c, sid, documents)).status_code == 201
        turns = [user(f"ok {n}") for n in range(400)]
        for start in range(0, len(turns), 20):
            assert (await append(c, sid, turns[start : start + 20])).status_code == 201
        async with rt.store.read() as db:
            state = await load_session(db, Actor(), sid)
        budget = Budget(max_tokens=1000)
        hint = service.window_hint(budget)
        assert hint is not None and hint.min_tokens is not None
        first = service._batch_size(state, hint, [])
        assert first * 8 < hint.min_tokens  # the first batch alone cannot cover the tail
        async with rt.store.read() as db:
            at_once, outdated = await service._at_once(rt, db, Actor(), state, budget, "openai-chat")
        assert at_once is not None and not outdated
        _, _, snapshot = await service._in_snapshot(
            rt, Actor(), sid, state, {"max_tokens": 1000}, "openai-chat"
        )
        assert at_once.payload == snapshot.payload and at_once.report == snapshot.report
        assert 100 < at_once.report.projected_items < 400
        assert at_once.report.projected_tokens <= 1000


async def test_continued_batches_bring_the_mandatory_items_older_than_the_window(
    settings: Any,
) -> None:
    """A read that needs several batches reads, with each one, the mandatory items older
    than the window it extends (pinned items, system messages, the pinned prefix): one
    statement per batch, and the prompt is the whole working memory's."""
    from app.services import context as service
    from app.services.access import load_session
    from app.services.runtime import Actor

    async with serving(settings) as (rt, c):
        sid = "small-tail-mandatory"
        await create(c, sid)
        head = [
            {"type": "message", "role": "system", "content": "You are terse."},
            user("first question"),
            user("pinned fact: the deploy key rotates on Mondays", pinned=True),
        ]
        documents = [user(f"document {n}: " + "lorem ipsum dolor sit amet " * 300) for n in range(12)]
        assert (await append(c, sid, head + documents)).status_code == 201
        turns = [user(f"ok {n}", pinned=n in (30, 260)) for n in range(400)]
        for start in range(0, len(turns), 20):
            assert (await append(c, sid, turns[start : start + 20])).status_code == 201
        async with rt.store.read() as db:
            state = await load_session(db, Actor(), sid)
        overrides = {"max_tokens": 1000, "pinned_prefix_items": 2, "keep_system": True}
        budget = Budget(**overrides)
        with counting_statements() as statements:
            async with rt.store.read() as db:
                at_once, outdated = await service._at_once(rt, db, Actor(), state, budget, "openai-chat")
        assert at_once is not None and not outdated
        expected = project_context(await whole_memory(c, sid), budget, format="openai-chat")
        assert at_once.payload == expected.payload and at_once.report == expected.report
        texts = json.dumps(at_once.payload)
        for mandatory in ("You are terse.", "first question", "pinned fact", "ok 30", "ok 260"):
            assert mandatory in texts, mandatory
        # the first batch and one more, each keys, mandatory rows and version in one
        # statement (the bodies were cached by the appends; it took four before)
        assert statements[0] == 2, statements


@pytest.mark.parametrize("remember", [True, False])
async def test_the_next_read_of_a_session_sizes_its_window_from_the_last(
    backend: str, request: pytest.FixtureRequest, remember: bool
) -> None:
    """An agent's loop: short turns appended after long documents, the context read after each.
    The first read needs two batches after the session row (the session's average item is far
    larger than its newest ones); every later read of the same session and budget asks for what
    the last one needed plus what was appended since (``CONTEXT_WINDOW_SIZES``): on SQLite the
    row and one batch, on Postgres the row and that batch in one statement. Off, each read
    takes three statements. Remembered or not, every prompt is the whole working memory's, also
    after items leave working memory; a read the prompt cache answers stays one statement."""
    from tests.conftest import make_settings

    settings = make_settings(backend, request, context_window_sizes=100 if remember else 0)
    async with serving(settings) as (rt, c):
        sid = f"loop-window-{remember}"
        await create(c, sid)
        documents = [user(f"document {n}: " + "lorem ipsum dolor sit amet " * 300) for n in range(12)]
        assert (await append(c, sid, documents)).status_code == 201
        for start in range(0, 400, 50):
            turns = [user(f"ok {n}") for n in range(start, start + 50)]
            assert (await append(c, sid, turns)).status_code == 201
        budget = {"max_tokens": 1000, "format": "openai-chat"}
        per_read: list[int] = []
        with counting_statements() as statements:
            for turn in range(7):
                if turn == 4:  # items leave working memory: the remembered size is only a hint
                    r = await c.post(f"/v1/sessions/{sid}/compact", json={"policy": "window", "keep_last_items": 150})
                    assert r.status_code in (200, 201), r.text
                if turn != 6:  # the last read repeats the one before
                    assert (await append(c, sid, [user(f"turn {turn}")])).status_code == 201
                statements[0] = 0
                r = await c.get(f"/v1/sessions/{sid}/context", params=budget)
                assert r.status_code == 200, r.text
                per_read.append(statements[0])
                expected = project_context(
                    await whole_memory(c, sid), Budget(max_tokens=1000), format="openai-chat"
                )
                assert r.json()["messages"] == expected.payload["messages"]
                assert r.json()["report"]["projected_items"] == expected.report.projected_items
        later = 1 if backend == "postgres" else 2
        # (off: after the compaction the average item is small too, and one batch does)
        assert per_read[:4] == ([3] + [later] * 3 if remember else [3, 3, 3, 3]), per_read
        if remember:
            # (the compaction's archive reads the bodies the window's new head needs once)
            assert per_read[5] == later, per_read
        assert per_read[6] == 1, per_read
