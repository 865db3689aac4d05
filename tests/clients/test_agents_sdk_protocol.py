"""The Agents SDK's session protocol, run against ``ServiceSession`` on a live server (both
backends), with the SDK's own in-memory ``SQLiteSession`` as the oracle: given the same calls,
both return the same items, byte for byte (key order included)."""

from __future__ import annotations

import asyncio
import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from agents import Agent, RunConfig, Runner, SQLiteSession
from agents.items import ModelResponse, TResponseInputItem, TResponseOutputItem
from agents.memory import OpenAIResponsesCompactionSession, SessionSettings
from agents.run_internal.session_persistence import rewind_session_items
from agents.testing import ScriptedModel, assistant_message
from agents.usage import Usage
from openai import AsyncOpenAI
from session_memory_client import AsyncSessionMemoryClient, NotFoundError, ServiceSession

from tests.clients.agents_support import (  # noqa: F401 (*_fixture: fixtures)
    RUN,
    FakeCompaction,
    dumped,
    hosted_turn,
    pair,
    reasoning,
    say,
    screenshot,
    service_url_fixture,
    sm_fixture,
    streamed,
    web_search,
)
from tests.clients.conftest import API_KEY

SCREENSHOT = "data:image/png;base64," + "iVBORw0KGgo" * 110_000  # 1.2 MB, as computer use sends

# One item of every kind an agent's session holds, as the SDK and the providers write them:
# fields the service does not model, provider ids repeated, SDK-only keys, a call still
# waiting for its output at the end.
EVERY_KIND: list[dict[str, Any]] = [
    {"role": "user", "content": "Résumé: ünïcödé, emoji 🎉, こんにちは, O'Reilly; DROP TABLE x;--"},
    {"role": "developer", "content": "Answer in one sentence."},
    {
        "type": "message",
        "role": "user",
        "content": [
            {"type": "input_text", "text": "What is in these?"},
            {"type": "input_image", "image_url": "https://example.com/a.png", "detail": "auto"},
            {"type": "input_image", "file_id": "file-abc", "detail": "high"},
            {"type": "input_file", "filename": "notes.pdf", "file_data": "JVBERi0xLjQK"},
        ],
    },
    {
        "id": "rs_1",
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": "Look at both images."}],
        "content": [{"type": "reasoning_text", "text": "The first is a chart."}],
        "encrypted_content": "gAAAAABo-state",
        "status": "completed",
    },
    {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "phase": "commentary",
        "content": [
            {
                "type": "output_text",
                "text": "A chart and a diagram.",
                "annotations": [
                    {
                        "type": "url_citation",
                        "url": "https://example.com/a.png",
                        "title": "a",
                        "start_index": 0,
                        "end_index": 7,
                    },
                    {"type": "file_citation", "file_id": "file-abc", "filename": "b", "index": 2},
                ],
                "logprobs": [{"token": "A", "logprob": -0.01, "bytes": [65], "top_logprobs": []}],
            },
            {"type": "refusal", "refusal": "I will not read the PDF."},
        ],
    },
    {
        "id": "ws_1",
        "type": "web_search_call",
        "status": "completed",
        "action": {"type": "search", "query": "chart source", "sources": []},
    },
    {
        "id": "fs_1",
        "type": "file_search_call",
        "status": "completed",
        "queries": ["diagram"],
        "results": [{"file_id": "file-abc", "filename": "b", "score": 0.5, "text": "diagram"}],
    },
    {
        "id": "fc_1",
        "type": "function_call",
        "call_id": "call_1",
        "name": "lookup",
        "namespace": "docs",
        "arguments": '{"q": "chart"}',
        "status": "completed",
    },
    {
        "type": "function_call_output",
        "call_id": "call_1",
        "output": [
            {"type": "input_text", "text": "found a chart"},
            {
                "type": "input_image",
                "image_url": "data:image/png;base64,iVBORw0KGgo=",
                "detail": "low",
            },
        ],
    },
    {
        "id": "cu_1",
        "type": "computer_call",
        "call_id": "call_c",
        "action": {"type": "screenshot"},
        "pending_safety_checks": [],
        "status": "completed",
    },
    {
        "type": "computer_call_output",
        "call_id": "call_c",
        "output": {"type": "computer_screenshot", "image_url": SCREENSHOT},
    },
    {"id": "ctc_1", "type": "custom_tool_call", "call_id": "call_x", "name": "sh", "input": "ls"},
    {"type": "custom_tool_call_output", "call_id": "call_x", "output": "a.txt\nb.txt"},
    {
        "id": "mcp_1",
        "type": "mcp_call",
        "server_label": "docs",
        "name": "search",
        "arguments": "{}",
        "output": "nothing",
    },
    {"type": "item_reference", "id": "msg_0"},
    {"id": "cmp_1", "type": "compaction", "encrypted_content": "compacted-state"},
    # chat-completions models: the SDK's placeholder id on every item, provider_data kept
    {
        "id": "__fake_id__",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "Hello!", "annotations": []}],
        "provider_data": {"model": "claude-sonnet-4", "response_id": "chatcmpl-1"},
    },
    {
        "id": "__fake_id__",
        "type": "function_call",
        "call_id": "call_2",
        "name": "lookup",
        "arguments": "{}",
        "provider_data": {"thinking_blocks": [{"type": "thinking", "signature": "sig=="}]},
    },
]


def sdk_items(*outputs: list[TResponseOutputItem]) -> list[TResponseInputItem]:
    """Model output as the SDK turns it into session items."""
    items: list[TResponseInputItem] = []
    for output in outputs:
        items += ModelResponse(output=output, usage=Usage(), response_id=None).to_input_items()
    return items


def user(text: str) -> TResponseInputItem:
    return {"role": "user", "content": text}


def assert_same(actual: list[Any], expected: list[Any]) -> None:
    """Byte-identical item lists; on a difference, names the first item that differs."""
    if dumped(actual) == dumped(expected):
        return
    for index, (a, e) in enumerate(zip(actual, expected, strict=False)):
        if dumped([a]) != dumped([e]):
            raise AssertionError(f"item {index}: {dumped([a])[:600]} != {dumped([e])[:600]}")
    raise AssertionError(f"{len(actual)} items != {len(expected)} items")


async def both(sessions: tuple[Any, ...], method: str, *args: Any) -> list[Any]:
    return [await getattr(session, method)(*args) for session in sessions]


async def run_agent(method: str, agent: Agent[Any], text: str, session: Any, **kw: Any) -> Any:
    """``Runner.run``, ``Runner.run_streamed`` or ``Runner.run_sync`` (in a thread with its
    own event loop, as a synchronous caller would)."""
    if method == "run":
        return await Runner.run(agent, text, session=session, **kw)
    if method == "run_streamed":
        result = Runner.run_streamed(agent, text, session=session, **kw)
        async for _ in result.stream_events():
            pass
        return result

    def sync() -> Any:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        try:
            return Runner.run_sync(agent, text, session=session, **kw)
        finally:
            loop.close()

    return await asyncio.to_thread(sync)


@pytest.mark.parametrize("method", ["run", "run_streamed", "run_sync"])
async def test_runner_keeps_exactly_what_the_sdk_session_keeps(
    sm: AsyncSessionMemoryClient, new_id: str, method: str
) -> None:
    # reasoning, a hosted web search, a `phase`, a tool returning an image, the same provider
    # ids in both runs; the second run must see the first
    observed = []
    sessions = pair(sm, new_id)
    for session in sessions:
        steps: list[Any] = [*hosted_turn(), *hosted_turn()]
        if method == "run_streamed":
            steps = [streamed(output) for output in steps]
        model = ScriptedModel(steps)
        agent = Agent(name="forecaster", instructions="Be brief.", model=model, tools=[screenshot])
        first = await run_agent(method, agent, "Weather in Paris?", session, run_config=RUN)
        second = await run_agent(method, agent, "And with a picture?", session, run_config=RUN)
        model.assert_complete()
        observed.append((first.final_output, second.final_output, [c.input for c in model.calls]))
    ours, theirs = observed
    assert ours[:2] == theirs[:2] == ("Sunny, 21C.", "Sunny, 21C.")
    assert_same(ours[2], theirs[2])  # every model call got the same input
    assert "Weather in Paris?" in json.dumps(ours[2][2])  # the second run saw the first
    stored, expected = await both(sessions, "get_items")
    assert_same(stored, expected)
    assert len(stored) == 14
    assert [i.get("id") for i in stored].count("fc_1") == 2
    assert {i.get("type") for i in stored} >= {"reasoning", "web_search_call", "function_call"}


async def test_every_kind_of_item_comes_back_byte_identical(
    sm: AsyncSessionMemoryClient, new_id: str
) -> None:
    sessions = pair(sm, new_id)
    for session in sessions:
        await session.add_items(EVERY_KIND[:5])
        await session.add_items(EVERY_KIND[5:])
    ours, theirs = await both(sessions, "get_items")
    assert_same(ours, EVERY_KIND)
    assert_same(ours, theirs)
    for limit in (1, 3, len(EVERY_KIND)):
        assert_same(await sessions[0].get_items(limit), EVERY_KIND[-limit:])
    # popped one by one, newest first, each exactly as added
    popped = [await sessions[0].pop_item() for _ in EVERY_KIND]
    assert_same(popped, EVERY_KIND[::-1])
    assert await sessions[0].pop_item() is None


async def test_get_items_with_a_limit_is_the_newest_items_exactly(
    sm: AsyncSessionMemoryClient, new_id: str
) -> None:
    sessions = pair(sm, new_id)
    batches = [
        [user("Weather in Paris?")],
        sdk_items(hosted_turn()[0]),
        [{"type": "function_call_output", "call_id": "call_1", "output": "a picture"}],
        sdk_items(hosted_turn()[1]),
    ]
    for batch in batches:
        await both(sessions, "add_items", batch)
    everything = [item for batch in batches for item in batch]
    assert len(everything) == 7
    for limit in (None, 1, 2, 3, 6, 7, 8, 1000, 2_147_483_647, 0):
        ours, theirs = await both(sessions, "get_items", limit)
        assert_same(ours, theirs)
        assert_same(ours, everything if limit is None else everything[-limit:] if limit else [])
    # non-positive limits read nothing, as the SDK's Redis, MongoDB and Dapr sessions do
    assert await sessions[0].get_items(-1) == []


async def test_more_items_than_one_page_are_read_whole_and_exactly(
    sm: AsyncSessionMemoryClient, new_id: str
) -> None:
    sessions = pair(sm, new_id)
    items = [user(f"message {n}") for n in range(1003)]
    for session in sessions:
        await session.add_items(items[:700])
        await session.add_items(items[700:])
    for limit in (None, 1003, 1002, 1001, 1000, 2, 2_147_483_647):
        ours, theirs = await both(sessions, "get_items", limit)
        assert_same(ours, theirs)
    assert len(await sessions[0].get_items()) == 1003
    assert (await sessions[0].get_items(1001))[0] == user("message 2")


async def test_session_settings_are_taken_as_the_sdk_sessions_take_them(
    sm: AsyncSessionMemoryClient, new_id: str
) -> None:
    assert ServiceSession(sm, new_id).session_settings == SessionSettings()
    assert SQLiteSession(new_id).session_settings == SessionSettings()
    sessions = pair(sm, new_id, session_settings={"limit": 3})
    assert isinstance(sessions[0].session_settings, SessionSettings)
    assert sessions[0].session_settings == sessions[1].session_settings == SessionSettings(limit=3)
    for wrong in ({"limit": 3, "max_items": 2}, {"lmit": 3}, 3):
        with pytest.raises(TypeError) as ours:
            ServiceSession(sm, new_id, session_settings=wrong)  # type: ignore[arg-type]
        with pytest.raises(TypeError) as theirs:
            SQLiteSession(new_id, session_settings=wrong)  # type: ignore[arg-type]
        assert str(ours.value) == str(theirs.value)

    for session in sessions:
        await session.add_items([user(f"Message {n}") for n in range(6)])
    # no limit given: session_settings.limit; a limit given wins
    for limit in (None, 5, 1):
        ours, theirs = await both(sessions, "get_items", limit)
        assert_same(ours, theirs)
    assert [i["content"] for i in await sessions[0].get_items()] == [
        "Message 3",
        "Message 4",
        "Message 5",
    ]

    # the Runner resolves the session's settings with the run's, a dict in RunConfig too
    inputs = []
    for session in sessions:
        model = ScriptedModel([[assistant_message("Got it.", item_id="msg_1")]] * 2)
        agent = Agent(name="assistant", model=model)
        await Runner.run(agent, "New question", session=session, run_config=RUN)
        config = RunConfig(tracing_disabled=True, session_settings={"limit": 1})
        await Runner.run(agent, "Another", session=session, run_config=config)
        inputs.append([call.input for call in model.calls])
    assert_same(inputs[0], inputs[1])
    assert len(inputs[0][0]) == 4 and len(inputs[0][1]) == 2

    # assigned later, a dict is coerced too
    sessions[0].session_settings = {"limit": 2}  # type: ignore[assignment]
    assert sessions[0].session_settings == SessionSettings(limit=2)
    assert len(await sessions[0].get_items()) == 2


async def test_pop_and_clear_match_the_sdk_session_step_by_step(
    sm: AsyncSessionMemoryClient, new_id: str
) -> None:
    sessions = pair(sm, new_id)
    turn = sdk_items(*hosted_turn())
    steps: list[tuple[str, tuple[Any, ...]]] = [
        ("pop_item", ()),
        ("add_items", ([user("first"), user("second")],)),
        ("add_items", (turn,)),
        ("pop_item", ()),
        ("get_items", ()),
        ("pop_item", ()),
        ("pop_item", ()),
        ("add_items", ([user("third")],)),
        ("get_items", (2,)),
        *[("pop_item", ())] * (len(turn) + 2),
        ("pop_item", ()),
        ("get_items", ()),
        ("add_items", ([user("again"), *turn],)),
        ("clear_session", ()),
        ("get_items", ()),
        ("pop_item", ()),
        ("clear_session", ()),
        ("add_items", ([user("after the clear")],)),
        ("get_items", ()),
    ]
    for number, (method, args) in enumerate(steps):
        ours, theirs = await both(sessions, method, *args)
        assert dumped([ours]) == dumped([theirs]), f"step {number}: {method}"
    assert await sessions[0].get_items() == [user("after the clear")]


async def test_a_session_that_does_not_exist_reads_as_empty_and_is_not_created(
    sm: AsyncSessionMemoryClient, new_id: str
) -> None:
    session = ServiceSession(sm, new_id)
    assert await session.get_items() == []
    assert await session.get_items(3) == []
    assert await session.get_items(5000) == []
    assert await session.get_prompt() == []
    assert await session.pop_item() is None
    await session.clear_session()
    with pytest.raises(NotFoundError):
        await sm.get_session(new_id)
    await session.add_items([])  # nothing to add: nothing created either
    with pytest.raises(NotFoundError):
        await sm.get_session(new_id)


async def test_a_cancelled_write_has_settled_when_the_cancellation_arrives(
    sm: AsyncSessionMemoryClient, new_id: str
) -> None:
    session = ServiceSession(sm, new_id)
    for write, expected in (
        (session.add_items([user("kept")]), [user("kept")]),
        (session.pop_item(), []),
        (session.add_items([user("again")]), [user("again")]),
        (session.clear_session(), []),
    ):
        task = asyncio.ensure_future(write)
        await asyncio.sleep(0)  # the request is on its way
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert await session.get_items() == expected


async def test_the_sdk_rewind_removes_exactly_the_retried_items(
    sm: AsyncSessionMemoryClient, new_id: str
) -> None:
    # the Runner rewinds what it persisted before a retried model call
    sessions = pair(sm, new_id)
    history = [user("Weather in Paris?"), *sdk_items(*hosted_turn())]
    retried = [user("And tomorrow?"), *sdk_items([reasoning("rs_9"), web_search("ws_9")])]
    for session in sessions:
        await session.add_items(history)
        await session.add_items(retried)
        await rewind_session_items(session, retried)
    ours, theirs = await both(sessions, "get_items")
    assert_same(ours, history)
    assert_same(ours, theirs)
    # a tail that is not what the retry persisted is left alone
    for session in sessions:
        await rewind_session_items(session, [user("never added")])
        await rewind_session_items(session, history[:2])
    ours, theirs = await both(sessions, "get_items")
    assert_same(ours, history)
    assert_same(ours, theirs)


async def test_openai_responses_compaction_session_compacts_a_service_session(
    sm: AsyncSessionMemoryClient, new_id: str
) -> None:
    def turn(n: int) -> list[TResponseOutputItem]:
        return [reasoning(f"rs_{n}"), say(f"Sunny, day {n}.", item_id=f"msg_{n}")]

    with FakeCompaction() as fake:
        openai = AsyncOpenAI(base_url=fake.base_url, api_key="sk-test", max_retries=0)
        observed = []
        for underlying in pair(sm, new_id):
            session = OpenAIResponsesCompactionSession(
                new_id,
                underlying,
                client=openai,
                model="gpt-4.1",
                compaction_mode="input",
                should_trigger_compaction=lambda c: len(c["compaction_candidate_items"]) >= 2,
            )
            model = ScriptedModel([turn(1), turn(2)])
            agent = Agent(name="forecaster", model=model)
            start = len(fake.requests)
            await Runner.run(agent, "Weather in Paris?", session=session, run_config=RUN)
            after_first = await underlying.get_items()
            await Runner.run(agent, "And tomorrow?", session=session, run_config=RUN)
            after_second = await underlying.get_items()
            await session.add_items([user("One more thing.")])
            await session.run_compaction({"force": True})
            after_manual = await session.get_items()
            observed.append(
                (
                    after_first,
                    after_second,
                    after_manual,
                    [c.input for c in model.calls],
                    fake.requests[start:],
                )
            )
    ours, theirs = observed
    for mine, oracle in zip(ours, theirs, strict=True):
        assert_same(mine, oracle)
    after_first, _, after_manual, _, requests = ours
    assert len(requests) == 3  # after each run (automatic), then the forced one
    assert [i.get("type") for i in after_first] == ["message", "compaction"]
    assert after_first[1]["encrypted_content"].startswith("compacted-state-")
    assert after_manual[-1]["type"] == "compaction"
    # what the compaction endpoint got is the session's items, exactly
    assert requests[0]["input"][0] == user("Weather in Paris?")


def test_one_session_serves_several_event_loops_and_threads(service_url: str, new_id: str) -> None:
    # a synchronous program, on a thread of its own: several asyncio.run calls and a
    # Runner.run_sync (which keeps its loop open) on one client, then threads of its own
    def program() -> None:
        client = AsyncSessionMemoryClient(service_url, api_key=API_KEY)  # outside any loop
        sessions = pair(client, new_id)
        models, kept = [], []
        for session in sessions:
            model = ScriptedModel(
                [[say(f"Answer {n}.", item_id="msg_1", phase="final_answer")] for n in range(5)]
            )
            agent = Agent(name="assistant", model=model)
            for text in ("one", "two", "three"):  # a new event loop every time
                asyncio.run(Runner.run(agent, text, session=session, run_config=RUN))
            for text in ("four", "five"):  # one loop, kept open by run_sync
                Runner.run_sync(agent, text, session=session, run_config=RUN)
            kept.append(asyncio.get_event_loop_policy().get_event_loop())
            models.append(model)
        assert_same([c.input for c in models[0].calls], [c.input for c in models[1].calls])
        assert len(models[0].calls[-1].input) == 9  # the fifth run saw the first four
        ours = asyncio.run(sessions[0].get_items())
        assert_same(ours, asyncio.run(sessions[1].get_items()))

        def add(n: int) -> None:  # threads, each running its own loop, at the same time
            asyncio.run(sessions[0].add_items([user(f"from thread {n}")]))

        with ThreadPoolExecutor(max_workers=5) as threads:
            list(threads.map(add, range(10)))
        items = asyncio.run(sessions[0].get_items())
        assert_same(items[:10], ours)
        assert {i["content"] for i in items[10:]} == {f"from thread {n}" for n in range(10)}

        kept[0].run_until_complete(client.aclose())  # on the loop run_sync kept open
        for loop in kept:
            loop.close()
        with pytest.raises(RuntimeError, match="closed"):
            asyncio.run(sessions[0].get_items())

    with ThreadPoolExecutor(max_workers=1) as thread:
        thread.submit(program).result()
