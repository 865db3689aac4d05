"""The OpenAI Agents SDK session (session_memory_client.ServiceSession) against a live server
on both backends: the SDK's own Runner, driven by the SDK's scripted model, keeps its history
in the service, and the service's own views of it (history, the budgeted prompt) agree."""

from __future__ import annotations

import inspect

import pytest
from agents import Agent, Runner
from agents.items import ModelResponse, TResponseInputItem
from agents.memory import Session, SessionABC
from agents.testing import ScriptedModel, assistant_message, function_call
from agents.usage import Usage
from session_memory_client import AsyncSessionMemoryClient, ServiceSession

from tests.clients.agents_support import (  # noqa: F401 (*_fixture: fixtures)
    RUN,
    get_weather,
    service_url_fixture,
    sm_fixture,
)


def said(text: str, item_id: str) -> TResponseInputItem:
    """An assistant message as the SDK stores it."""
    output = [assistant_message(text, item_id=item_id)]
    return ModelResponse(output=output, usage=Usage(), response_id=None).to_input_items()[0]


async def test_it_implements_the_sdk_session_protocol() -> None:
    async with AsyncSessionMemoryClient("http://127.0.0.1:9") as unused:
        assert isinstance(ServiceSession(unused, "s"), Session)
    assert not issubclass(ServiceSession, SessionABC)  # the SDK asks third parties for the protocol
    for name in ("get_items", "add_items", "pop_item", "clear_session"):
        ours, theirs = getattr(ServiceSession, name), getattr(SessionABC, name)
        assert inspect.iscoroutinefunction(ours), name
        expected = [(p.name, p.default) for p in inspect.signature(theirs).parameters.values()]
        actual = [(p.name, p.default) for p in inspect.signature(ours).parameters.values()]
        assert actual == expected, name


async def test_the_second_run_sees_the_first_runs_items_exactly(
    sm: AsyncSessionMemoryClient, new_id: str
) -> None:
    model = ScriptedModel(
        [
            [function_call("get_weather", {"city": "Paris"}, call_id="call_1", item_id="fc_1")],
            [assistant_message("It is sunny in Paris.", item_id="msg_1")],
            [assistant_message("You asked about Paris.", item_id="msg_1")],  # the same id again
        ]
    )
    agent = Agent(name="forecaster", instructions="Be brief.", model=model, tools=[get_weather])
    session = ServiceSession(sm, new_id)

    first = await Runner.run(
        agent, "What is the weather in Paris?", session=session, run_config=RUN
    )
    assert first.final_output == "It is sunny in Paris."
    first_run: list[TResponseInputItem] = [
        {"content": "What is the weather in Paris?", "role": "user"},
        {
            "arguments": '{"city":"Paris"}',
            "call_id": "call_1",
            "name": "get_weather",
            "type": "function_call",
            "id": "fc_1",
        },
        {"call_id": "call_1", "output": "sunny in Paris", "type": "function_call_output"},
        said("It is sunny in Paris.", "msg_1"),
    ]
    assert await session.get_items() == first_run

    second = await Runner.run(agent, "What did I ask?", session=session, run_config=RUN)
    assert second.final_output == "You asked about Paris."
    assert model.calls[-1].input == [*first_run, {"content": "What did I ask?", "role": "user"}]
    everything = [
        *first_run,
        {"content": "What did I ask?", "role": "user"},
        said("You asked about Paris.", "msg_1"),
    ]
    assert await session.get_items() == everything
    assert await session.get_items(limit=2) == everything[-2:]
    assert await session.get_items(limit=0) == []

    # the service holds them in order, written in openai-responses format
    stored = (await sm.list_items(new_id))["items"]
    assert [i["type"] for i in stored] == [
        "message",
        "function_call",
        "function_call_output",
        "message",
        "message",
        "message",
    ]
    assert {i["format"] for i in stored} == {"openai-responses"}
    assert len({i["id"] for i in stored}) == 6  # the service's own ids, never the provider's


async def test_pop_item_and_clear_session_behave_as_the_sdk_documents(
    sm: AsyncSessionMemoryClient, new_id: str
) -> None:
    session = ServiceSession(sm, new_id)
    # a session that does not exist yet is empty
    assert await session.get_items() == []
    assert await session.pop_item() is None

    await session.add_items([{"role": "user", "content": "first"}, said("second", "msg_2")])
    await session.add_items([{"role": "user", "content": "third"}])

    # pop_item: removes and returns the most recent item, exactly as added
    assert await session.pop_item() == {"role": "user", "content": "third"}
    assert await session.get_items() == [
        {"role": "user", "content": "first"},
        said("second", "msg_2"),
    ]
    assert await session.pop_item() == said("second", "msg_2")
    assert await session.pop_item() == {"role": "user", "content": "first"}
    # ... and None when the session is empty
    assert await session.pop_item() is None

    # clear_session: every item is gone for the SDK; the service's history keeps them all
    await session.add_items([{"role": "user", "content": "again"}])
    await session.clear_session()
    assert await session.get_items() == []
    assert await session.pop_item() is None
    reasons = [h["archived_reason"] for h in (await sm.list_history(new_id))["items"]]
    assert reasons == ["popped", "popped", "popped", "cleared"]
    # clearing an empty (or missing) session is not an error
    await session.clear_session()
    await ServiceSession(sm, new_id + "-none").clear_session()


async def test_items_of_providers_without_ids_are_kept_as_the_sdk_wrote_them(
    sm: AsyncSessionMemoryClient, new_id: str
) -> None:
    # chat-completions models give every item the SDK's placeholder id "__fake_id__", and
    # the SDK keeps what it needs to replay them in provider_data
    items: list[TResponseInputItem] = [
        {"role": "user", "content": "hi"},
        {
            "id": "__fake_id__",
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "Hello!", "annotations": []}],
        },
        {
            "id": "__fake_id__",
            "type": "function_call",
            "call_id": "c9",
            "name": "lookup",
            "arguments": "{}",
            "provider_data": {"model": "x", "thinking_blocks": [{"signature": "s=="}]},
        },
        {"type": "function_call_output", "call_id": "c9", "output": "found"},
    ]
    session = ServiceSession(sm, new_id)
    await session.add_items(items)
    await session.add_items(items)  # the same ids again
    assert await session.get_items() == items + items


async def test_a_call_still_waiting_for_its_output_is_returned(
    sm: AsyncSessionMemoryClient, new_id: str
) -> None:
    # the history is what was added, not a prompt that leaves out a call without its output
    items: list[TResponseInputItem] = [
        {"role": "user", "content": "Weather in Oslo?"},
        {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": "{}"},
    ]
    session = ServiceSession(sm, new_id)
    await session.add_items(items)
    assert await session.get_items() == items
    assert await session.get_items(limit=1) == items[1:]


@pytest.mark.parametrize(
    "session_id", ["user@example.com", "tenant:user 17", "_private", "ünïcode ?#%&+", "x" * 200]
)
async def test_session_ids_real_apps_use_work(
    sm: AsyncSessionMemoryClient, new_id: str, session_id: str
) -> None:
    session_id = f"{session_id}-{new_id}"
    session = ServiceSession(sm, session_id)
    await session.add_items([{"role": "user", "content": "hi"}])
    assert await session.get_items() == [{"role": "user", "content": "hi"}]
    assert (await sm.get_session(session_id))["id"] == session_id
    assert await session.pop_item() == {"role": "user", "content": "hi"}


async def test_the_budgeted_prompt_is_asked_for_explicitly(
    sm: AsyncSessionMemoryClient, new_id: str
) -> None:
    model = ScriptedModel(
        [
            [function_call("get_weather", {"city": "Oslo"}, call_id="c1", item_id="fc_1")],
            [assistant_message("Sunny in Oslo.", item_id="msg_a")],
            [assistant_message("Still sunny.", item_id="msg_b")],
        ]
    )
    agent = Agent(name="forecaster", model=model, tools=[get_weather])
    exact = ServiceSession(sm, new_id)
    await Runner.run(agent, "Weather in Oslo?", session=exact, run_config=RUN)
    await exact.add_items([{"role": "user", "content": "Thanks."}])
    result = await sm.compact(new_id, policy="structured", keep_last_items=1)
    assert result["compacted_items"] == 4

    # get_items() is still exactly what is in working memory; get_prompt() has the summary
    assert await exact.get_items() == [{"role": "user", "content": "Thanks."}]
    prompt = await exact.get_prompt()
    assert prompt[0]["role"] == "system" and "get_weather" in prompt[0]["content"]
    assert prompt[1:] == [{"role": "user", "content": "Thanks."}]
    # recall: the archived turns that match come back as text, before the newest user message
    recalled = await exact.get_prompt(recall={"max_tokens": 300, "query": "Oslo weather"})
    assert recalled[0] == prompt[0] and recalled[-1] == prompt[-1]
    [block] = recalled[1:-1]
    assert block["role"] == "system"
    assert block["content"].startswith("Earlier in this conversation (recalled, oldest first):")
    assert "user: Weather in Oslo?" in block["content"]

    # history="prompt": the Runner sends the budgeted prompt; reads with a limit stay exact
    budgeted = ServiceSession(sm, new_id, history="prompt", context={"max_tokens": 4000})
    await Runner.run(agent, "And tomorrow?", session=budgeted, run_config=RUN)
    seen = model.calls[-1].input
    assert seen[0]["role"] == "system" and "get_weather" in seen[0]["content"]
    assert seen[1:] == [
        {"role": "user", "content": "Thanks."},
        {"role": "user", "content": "And tomorrow?"},
    ]
    assert await budgeted.get_items(limit=1) == [said("Still sunny.", "msg_b")]
    assert (await budgeted.get_items())[0]["role"] == "system"


async def test_wrong_options_are_refused_when_the_session_is_made(
    sm: AsyncSessionMemoryClient,
) -> None:
    with pytest.raises(TypeError, match="max_tokns"):
        ServiceSession(sm, "s", context={"max_tokns": 10})
    with pytest.raises(ValueError, match="history"):
        ServiceSession(sm, "s", history="budget")  # type: ignore[arg-type]
