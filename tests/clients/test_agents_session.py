"""The OpenAI Agents SDK session (session_memory_client.ServiceSession) against a live server:
the SDK's own Runner, driven by a scripted model, keeps its history in the service."""

from __future__ import annotations

import copy
import inspect
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from agents import Agent, RunConfig, Runner, function_tool
from agents.items import ModelResponse, TResponseInputItem, TResponseOutputItem
from agents.memory import Session, SessionABC
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)
from session_memory_client import AsyncSessionMemoryClient, ServiceSession

from tests.clients.conftest import API_KEY
from tests.support.services import ServerProcess

RUN = RunConfig(tracing_disabled=True)


class ScriptedModel(Model):
    """The SDK's model interface, answering from a script and recording every input it got."""

    def __init__(self, outputs: list[TResponseOutputItem]) -> None:
        self.outputs = list(outputs)
        self.inputs: list[list[dict[str, Any]]] = []

    async def get_response(self, system_instructions, input, *args: Any, **kwargs: Any):  # type: ignore[no-untyped-def,override]
        items = [{"role": "user", "content": input}] if isinstance(input, str) else input
        self.inputs.append(copy.deepcopy([dict(i) for i in items]))
        return ModelResponse(output=[self.outputs.pop(0)], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:  # type: ignore[override]
        raise NotImplementedError


def say(item_id: str, text: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(
        id=item_id,
        type="message",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
    )


def call(call_id: str, city: str) -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(
        id=f"fc_{call_id}",
        type="function_call",
        call_id=call_id,
        name="get_weather",
        arguments=json.dumps({"city": city}),
        status="completed",
    )


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def essence(item: dict[str, Any]) -> tuple[Any, ...]:
    """What the model reads from an input item, whatever shape the SDK or the service gave it."""
    kind = item.get("type", "message")
    if kind == "message":
        content = item["content"]
        if not isinstance(content, str):
            content = "".join(part["text"] for part in content)
        return ("message", item["role"], content)
    if kind == "function_call":
        return ("function_call", item["call_id"], item["name"], json.loads(item["arguments"]))
    if kind == "function_call_output":
        return ("function_call_output", item["call_id"], item["output"])
    return (kind,)


@pytest.fixture
async def client(live_server: ServerProcess) -> AsyncIterator[AsyncSessionMemoryClient]:
    async with AsyncSessionMemoryClient(live_server.url, api_key=API_KEY) as sm:
        yield sm


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


async def test_the_second_run_sees_the_first_runs_items_in_order(
    client: AsyncSessionMemoryClient, new_id: str
) -> None:
    model = ScriptedModel(
        [
            call("call_1", "Paris"),
            say("msg_1", "It is sunny in Paris."),
            say("msg_2", "You asked about the weather in Paris."),
        ]
    )
    agent = Agent(name="forecaster", instructions="Be brief.", model=model, tools=[get_weather])
    session = ServiceSession(client, new_id)
    assert isinstance(session, Session)

    first = await Runner.run(
        agent, "What is the weather in Paris?", session=session, run_config=RUN
    )
    assert first.final_output == "It is sunny in Paris."
    first_run_items = [
        ("message", "user", "What is the weather in Paris?"),
        ("function_call", "call_1", "get_weather", {"city": "Paris"}),
        ("function_call_output", "call_1", "sunny in Paris"),
        ("message", "assistant", "It is sunny in Paris."),
    ]
    # the service holds them, in order, as canonical items
    stored = (await client.list_items(new_id))["items"]
    assert [i["type"] for i in stored] == [
        "message",
        "function_call",
        "function_call_output",
        "message",
    ]

    second = await Runner.run(agent, "What did I ask?", session=session, run_config=RUN)
    assert second.final_output == "You asked about the weather in Paris."
    seen = [essence(i) for i in model.inputs[-1]]
    assert seen == [*first_run_items, ("message", "user", "What did I ask?")]

    history = [essence(i) for i in await session.get_items()]
    assert history == [
        *first_run_items,
        ("message", "user", "What did I ask?"),
        ("message", "assistant", "You asked about the weather in Paris."),
    ]
    assert [essence(i) for i in await session.get_items(limit=2)] == history[-2:]
    assert await session.get_items(limit=0) == []


async def test_pop_item_and_clear_session_behave_as_the_sdk_documents(
    client: AsyncSessionMemoryClient, new_id: str
) -> None:
    session = ServiceSession(client, new_id)
    # a session that does not exist yet is empty
    assert await session.get_items() == []
    assert await session.pop_item() is None

    items: list[TResponseInputItem] = [
        {"role": "user", "content": "first"},
        {"role": "user", "content": "second"},
    ]
    await session.add_items(items)
    await session.add_items([{"role": "user", "content": "third"}])

    # pop_item: removes and returns the most recent item
    popped = await session.pop_item()
    assert popped is not None and essence(popped) == ("message", "user", "third")
    assert [essence(i)[2] for i in await session.get_items()] == ["first", "second"]
    assert essence(await session.pop_item()) == ("message", "user", "second")  # type: ignore[arg-type]
    assert essence(await session.pop_item()) == ("message", "user", "first")  # type: ignore[arg-type]
    # ... and None when the session is empty
    assert await session.pop_item() is None

    # clear_session: every item is gone for the SDK, the service's history keeps them
    await session.add_items([{"role": "user", "content": "again"}])
    await session.clear_session()
    assert await session.get_items() == []
    assert await session.pop_item() is None
    reasons = [h["archived_reason"] for h in (await client.list_history(new_id))["items"]]
    assert reasons == ["popped", "popped", "popped", "cleared"]
    # clearing an empty (or missing) session is not an error
    await session.clear_session()
    await ServiceSession(client, new_id + "-none").clear_session()


async def test_items_from_providers_without_ids_are_stored(
    client: AsyncSessionMemoryClient, new_id: str
) -> None:
    # chat-completions models give every item the SDK's placeholder id "__fake_id__"
    session = ServiceSession(client, new_id)
    await session.add_items(
        [
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
                "provider_data": {"model": "x"},
            },
            {"type": "function_call_output", "call_id": "c9", "output": "found"},
        ]
    )
    assert [essence(i) for i in await session.get_items()] == [
        ("message", "user", "hi"),
        ("message", "assistant", "Hello!"),
        ("function_call", "c9", "lookup", {}),
        ("function_call_output", "c9", "found"),
    ]


async def test_a_compacted_session_gives_the_agent_its_summary(
    client: AsyncSessionMemoryClient, new_id: str
) -> None:
    model = ScriptedModel(
        [call("c1", "Oslo"), say("msg_a", "Sunny in Oslo."), say("msg_b", "Still sunny.")]
    )
    agent = Agent(name="forecaster", model=model, tools=[get_weather])
    session = ServiceSession(client, new_id)
    await Runner.run(agent, "Weather in Oslo?", session=session, run_config=RUN)
    await session.add_items([{"role": "user", "content": "Thanks."}])
    result = await client.compact(new_id, policy="structured", keep_last_items=1)
    assert result["compacted_items"] == 4

    await Runner.run(agent, "And tomorrow?", session=session, run_config=RUN)
    seen = model.inputs[-1]
    assert seen[0]["role"] == "system" and "get_weather" in seen[0]["content"]
    assert [essence(i) for i in seen[1:]] == [
        ("message", "user", "Thanks."),
        ("message", "user", "And tomorrow?"),
    ]
