"""The Agents SDK's session wrappers over ``ServiceSession`` on a live server (both backends),
with the same wrapper over the SDK's own ``SQLiteSession`` as the oracle; and what the SDK's
sessions take that a single append does not: any number of items, NUL in strings."""

from __future__ import annotations

import json
from typing import Any

import pytest
from agents import Agent, Runner
from agents.extensions.memory.encrypt_session import EncryptedSession
from agents.testing import ScriptedModel, assistant_message, function_call
from cryptography.fernet import Fernet
from session_memory_client import AsyncSessionMemoryClient, InvalidInputError, ServiceSession
from session_memory_client.agents_sdk import batches

from tests.clients.agents_support import (  # noqa: F401 (*_fixture: fixtures)
    RUN,
    dumped,
    get_weather,
    pair,
    service_url_fixture,
    sm_fixture,
)

KEY = Fernet.generate_key().decode()


def encrypted(session: Any, session_id: str) -> EncryptedSession:
    return EncryptedSession(session_id, session, KEY)  # type: ignore[arg-type]


async def test_encrypted_session_over_the_service_keeps_what_runner_wrote(
    sm: AsyncSessionMemoryClient, new_id: str
) -> None:
    def scripted() -> ScriptedModel:
        return ScriptedModel(
            [
                [function_call("get_weather", {"city": "Oslo"}, call_id="call_1", item_id="fc_1")],
                [assistant_message("Snow in Oslo.", item_id="msg_1")],
                [assistant_message("You asked about Oslo.", item_id="msg_2")],
            ]
        )

    ours_raw, oracle_raw = pair(sm, new_id)
    ours, oracle = encrypted(ours_raw, new_id), encrypted(oracle_raw, new_id)
    for session in (ours, oracle):
        agent = Agent(name="w", instructions="Be brief.", model=scripted(), tools=[get_weather])
        first = await Runner.run(agent, "Weather in Oslo?", session=session, run_config=RUN)
        assert first.final_output == "Snow in Oslo."
        second = await Runner.run(agent, "What did I ask?", session=session, run_config=RUN)
        assert second.final_output == "You asked about Oslo."
    got, want = await ours.get_items(), await oracle.get_items()
    assert dumped(got) == dumped(want) and len(got) == 6
    assert dumped(await ours.get_items(limit=2)) == dumped(await oracle.get_items(limit=2))

    # the service holds only envelopes: every one untyped, stored as the wrapper wrote it
    stored = (await sm.list_items(new_id, format="openai-responses"))["items"]
    assert [sorted(i) for i in stored] == [["__enc__", "kid", "payload", "v"]] * 6
    assert stored == await ours_raw.get_items()
    # ... which no prompt carries
    prompt = await sm.get_context(new_id, "openai-responses")
    assert prompt["input"] == []
    assert any("untyped x6" in note for note in prompt["report"]["notes"])

    # pop and clear, decrypted, as over the SDK's own session
    assert dumped([await ours.pop_item()]) == dumped([await oracle.pop_item()])
    assert dumped(await ours.get_items()) == dumped(await oracle.get_items())
    await ours.clear_session()
    assert await ours.get_items() == [] and await ours.pop_item() is None


async def test_add_items_takes_any_number_in_batches(
    sm: AsyncSessionMemoryClient, new_id: str
) -> None:
    items: list[Any] = [{"role": "user", "content": f"note {n}"} for n in range(2_345)]
    ours, oracle = pair(sm, new_id)
    await ours.add_items(items)
    await oracle.add_items(items)
    assert dumped(await ours.get_items()) == dumped(await oracle.get_items())
    assert await ours.get_items(limit=3) == items[-3:]
    # three appends: 1,000 + 1,000 + 345, in order
    events = (await sm.list_events(new_id))["items"]
    appended = [e["data"] for e in events if e["type"] == "appended"]
    assert [(a["first_seq"], a["last_seq"]) for a in appended] == [
        (1, 1000),
        (1001, 2000),
        (2001, 2345),
    ]


async def test_a_batch_that_fails_leaves_the_earlier_ones_stored(
    sm: AsyncSessionMemoryClient, new_id: str
) -> None:
    ok: list[Any] = [{"role": "user", "content": f"ok {n}"} for n in range(3)]
    broken = {"role": "wizard", "content": "a role no provider has"}
    session = ServiceSession(sm, new_id, batch_items=2)
    with pytest.raises(InvalidInputError):
        await session.add_items([*ok, broken, {"role": "user", "content": "never sent"}])
    # batch 1 ([ok 0, ok 1]) stored; batch 2 ([ok 2, broken]) refused whole; batch 3 not sent
    assert await session.get_items() == ok[:2]


def test_batches_cut_by_count_and_by_bytes() -> None:
    items = [{"k": "x" * 10} for _ in range(7)]
    size = len(json.dumps(items[0], separators=(",", ":"))) + 1
    assert [len(b) for b in batches(items, max_items=3, max_bytes=10**6)] == [3, 3, 1]
    assert [len(b) for b in batches(items, max_items=10, max_bytes=2 * size)] == [2, 2, 2, 1]
    # an item larger than the byte limit goes alone (the service decides)
    assert [len(b) for b in batches(items, max_items=10, max_bytes=1)] == [1] * 7
    assert [i for b in batches(items, max_items=2, max_bytes=50) for i in b] == items


async def test_strings_with_nul_round_trip(sm: AsyncSessionMemoryClient, new_id: str) -> None:
    items: list[Any] = [
        {"role": "user", "content": "before\u0000after"},
        {"type": "function_call", "call_id": "c\u00001", "name": "f", "arguments": '"\u0000"'},
        {"type": "function_call_output", "call_id": "c\u00001", "output": "\u0000"},
    ]
    ours, oracle = pair(sm, new_id)
    for session in (ours, oracle):
        await session.add_items(items)
    assert dumped(await ours.get_items()) == dumped(await oracle.get_items())
    assert await ours.pop_item() == items[-1]
    # and under encryption too (the wrapper encrypts the JSON, NUL included)
    wrapped = encrypted(ServiceSession(sm, new_id + "-enc"), new_id + "-enc")
    await wrapped.add_items(items)
    assert await wrapped.get_items() == items
