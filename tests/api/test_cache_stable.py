"""``cut: stable``, ``cut_step`` and ``cache_breakpoints`` over HTTP, on both backends: the
served prompt is what the domain projects from the whole working memory, consecutive reads of
a growing session repeat their ``stable_prefix``, and Anthropic breakpoints validate."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from app.domain.projection import Budget, ContextSource, project_context
from tests.api.helpers import all_items, append, assert_problem, create, user
from tests.api.test_context import FORMATS, payload_of, stored
from tests.support.provider_validation import validate_payload

MESSAGES = {"canonical": "items", "openai-chat": "messages", "openai-responses": "input", "anthropic": "messages"}


def turn(i: int) -> list[dict[str, Any]]:
    """An agent turn: request, tool call, a 6-line output, reply."""
    return [
        user(f"Step {i}: fix module {i % 5}."),
        {"type": "function_call", "call_id": f"call_{i}", "name": "read_file",
         "arguments": json.dumps({"path": f"m{i % 5}.py"})},
        {"type": "function_call_output", "call_id": f"call_{i}",
         "output": "".join(f"    x{k} = f({i}, {k})\n" for k in range(6))},
        {"type": "message", "role": "assistant", "content": f"Module {i % 5} fixed at step {i}."},
    ]


async def start(client: httpx.AsyncClient, sid: str, **body: Any) -> None:
    await create(client, sid, **body)
    system = {"type": "message", "role": "system", "content": "You are a coding agent."}
    assert (await append(client, sid, [system])).status_code == 201


async def append_turns(client: httpx.AsyncClient, sid: str, turns: int) -> None:
    for first in range(0, turns, 10):
        batch = [item for i in range(first, min(turns, first + 10)) for item in turn(i)]
        assert (await append(client, sid, batch)).status_code == 201


def grid(report: dict[str, Any]) -> str:
    notes = [n for n in report["notes"] if n.startswith("stable: grid point")]
    assert len(notes) == 1, report["notes"]
    return notes[0]


def dumped(values: list[Any]) -> list[str]:
    return [json.dumps(v, sort_keys=True) for v in values]


async def test_stable_reads_repeat_their_prefix(client: httpx.AsyncClient, sid: str) -> None:
    """A session growing one turn at a time, read after each: while the grid note stays, each
    read begins with the previous read's ``stable_prefix`` messages; past the budget most
    reads keep nearly all of the previous prompt, and the tight default hardly ever does."""
    context = {"max_tokens": 2000, "cut": "stable", "max_recent_tool_results": 3}
    await start(client, sid, config={"context": context})
    previous: dict[str, dict[str, Any]] = {}
    kept = {"stable": 0, "tight": 0}
    past = 0
    steps = 0
    for i in range(50):
        assert (await append(client, sid, turn(i))).status_code == 201
        for fmt in ("openai-chat", "anthropic"):
            body = (await client.get(f"/v1/sessions/{sid}/context", params={"format": fmt})).json()
            tight = body if fmt != "openai-chat" else (await client.get(
                f"/v1/sessions/{sid}/context", params={"format": fmt, "cut": "tight"})).json()
            report = body["report"]
            assert report["projected_tokens"] <= 2000
            if tight is not body:
                assert not any(n.startswith("stable:") for n in tight["report"]["notes"])
            steps += any(n.startswith("stable: step at this read") for n in report["notes"])
            before = previous.get(fmt)
            if before is not None:
                old, new = dumped(before["stable"][MESSAGES[fmt]]), dumped(body[MESSAGES[fmt]])
                if grid(before["stable"]["report"]) == grid(report):
                    sp = before["stable"]["report"]["stable_prefix"]
                    assert new[:sp] == old[:sp], (fmt, i, sp)
                if report["dropped_items"] and fmt == "openai-chat":
                    past += 1
                    for mode, cur in (("stable", body), ("tight", tight)):
                        was = dumped(before[mode][MESSAGES[fmt]])
                        now = dumped(cur[MESSAGES[fmt]])
                        shared = 0
                        for a, b in zip(was, now, strict=False):
                            if a != b:
                                break
                            shared += len(a)
                        kept[mode] += shared >= 0.9 * sum(map(len, was))
            previous[fmt] = {"stable": body, "tight": tight}
    assert past >= 20
    assert kept["stable"] >= 0.6 * past, (kept, past)
    assert kept["tight"] <= 0.2 * past < kept["stable"], kept
    assert 0 < steps < 50


async def test_served_stable_context_equals_the_full_projection(client: httpx.AsyncClient, sid: str) -> None:
    """The service loads a window; a stable cut places it from the session's totals alone,
    and the answer is byte-identical to projecting the whole working memory."""
    await start(client, sid)
    await append_turns(client, sid, 60)
    memory = [stored(w) for w in await all_items(client, sid)]
    full = ContextSource(
        summary=None,
        items=memory,
        total_items=len(memory),
        total_tokens=sum(m.tokens for m in memory),
        total_chars=sum(m.chars for m in memory),
    )
    budgets: list[dict[str, Any]] = [
        {"max_tokens": 2000, "cut": "stable"},
        {"max_tokens": 900, "cut": "stable", "cut_step": 0.1, "max_recent_tool_results": 2},
        {"max_items": 30, "cut": "stable", "cut_step": 0.5, "trim_old_reasoning": True},
        {"max_chars": 4000, "cut": "stable", "start_on": "user"},
        {"cut": "stable", "max_recent_tool_results": 1},
    ]
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
            assert any(n.startswith("stable: grid point") for n in served["report"]["notes"])


def markers(value: Any) -> int:
    if isinstance(value, dict):
        return ("cache_control" in value) + sum(markers(v) for v in value.values())
    if isinstance(value, list):
        return sum(markers(v) for v in value)
    return 0


async def test_cache_breakpoints_mark_the_stable_prefix(client: httpx.AsyncClient, sid: str) -> None:
    await start(client, sid)
    await append_turns(client, sid, 30)
    query = {"format": "anthropic", "max_tokens": 1500, "cut": "stable", "cache_breakpoints": True}
    body = (await client.get(f"/v1/sessions/{sid}/context", params=query)).json()
    validate_payload("anthropic", payload_of(body))
    sp = body["report"]["stable_prefix"]
    assert sp > 0
    assert body["system"][-1]["cache_control"] == {"type": "ephemeral"}
    assert body["system"][-1]["text"] == "You are a coding agent."
    marked = body["messages"][sp - 1]["content"]
    assert isinstance(marked, list) and marked[-1]["cache_control"] == {"type": "ephemeral"}
    assert markers(body) == 2
    assert all(markers(m) == 0 for k, m in enumerate(body["messages"]) if k != sp - 1)
    # the markers change no count: the same read without them reports the same numbers
    plain = (await client.post(f"/v1/sessions/{sid}/context",
                               json={**query, "cache_breakpoints": False})).json()
    assert {k: v for k, v in plain["report"].items()} == body["report"]
    assert markers(plain) == 0
    # other formats have no markers: a note says nothing was marked
    chat = (await client.get(f"/v1/sessions/{sid}/context",
                             params={**query, "format": "openai-chat"})).json()
    assert markers(chat) == 0
    assert any(n.startswith("cache_breakpoints:") for n in chat["report"]["notes"])


async def test_cut_defaults_to_tight_and_follows_config(client: httpx.AsyncClient, sid: str) -> None:
    await create(client, sid)
    await append_turns(client, sid, 20)
    tight = (await client.get(f"/v1/sessions/{sid}/context", params={"max_tokens": 800})).json()
    assert not any(n.startswith("stable:") for n in tight["report"]["notes"])
    assert tight["report"]["stable_prefix"] >= 0
    r = await client.patch(f"/v1/sessions/{sid}", json={"config": {"context": {"cut": "stable", "cut_step": 0.5}}})
    assert r.status_code == 200, r.text
    stable = (await client.get(f"/v1/sessions/{sid}/context", params={"max_tokens": 800})).json()
    assert "step 400" in grid(stable["report"])
    back = (await client.post(f"/v1/sessions/{sid}/context", json={"max_tokens": 800, "cut": "tight"})).json()
    assert payload_of(back) == payload_of(tight) and back["report"] == tight["report"]


@pytest.mark.parametrize(
    "params", [{"cut": "loose"}, {"cut_step": 0}, {"cut_step": 0.75}, {"cache_breakpoints": "often"}]
)
async def test_bad_cut_fields_are_422(client: httpx.AsyncClient, sid: str, params: dict[str, Any]) -> None:
    await create(client, sid)
    assert_problem(await client.get(f"/v1/sessions/{sid}/context", params=params), 422)
    assert_problem(await client.post(f"/v1/sessions/{sid}/context", json=params), 422)
    r = await client.patch(f"/v1/sessions/{sid}", json={"config": {"context": params}})
    assert_problem(r, 422)
    assert (await client.get(f"/v1/sessions/{sid}")).json()["config"] == {}
