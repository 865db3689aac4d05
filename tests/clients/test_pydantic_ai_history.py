"""A Pydantic AI agent's message history in the service (session_memory_client.pydantic_ai)
on a live server, both backends: driven through ``Agent.run`` with Pydantic AI's own
``FunctionModel`` / ``TestModel``, every kind of message round-trips exactly (equal
``ModelMessagesTypeAdapter`` dumps), and the budgeted prompt comes back as ``ModelMessage`` s."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import (
    BinaryContent,
    DocumentUrl,
    ImageUrl,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    RetryFeedbackPart,
    RetryInfo,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel
from pydantic_ai.usage import RequestUsage
from session_memory_client import AsyncSessionMemoryClient, SessionMemoryClient
from session_memory_client.pydantic_ai import ServiceMessageHistory

from tests.clients.agents_support import service_url_fixture  # noqa: F401 (a fixture)
from tests.clients.conftest import API_KEY

T0 = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(32))


@pytest.fixture
def sync_client(service_url: str) -> Iterator[SessionMemoryClient]:
    with SessionMemoryClient(service_url, api_key=API_KEY) as client:
        yield client


@pytest.fixture
async def async_client(service_url: str) -> AsyncIterator[AsyncSessionMemoryClient]:
    async with AsyncSessionMemoryClient(service_url, api_key=API_KEY) as client:
        yield client


def dumped(messages: list[ModelMessage]) -> list[dict[str, Any]]:
    return ModelMessagesTypeAdapter.dump_python(messages, mode="json")


EVERY_KIND: list[ModelMessage] = [
    ModelRequest(
        parts=[
            SystemPromptPart("You are terse.", timestamp=T0),
            UserPromptPart(
                [
                    "What is in these? Résumé 🎉",
                    ImageUrl("https://example.com/chart.png"),
                    BinaryContent(PNG, media_type="image/png"),
                    DocumentUrl("https://example.com/report.pdf"),
                ],
                timestamp=T0,
            ),
        ],
        instructions="Answer in one sentence.",
        run_id="run-1",
        metadata={"tenant": "acme"},
    ),
    ModelResponse(
        parts=[
            ThinkingPart("Two images and a report.", signature="sig-1", provider_name="anthropic"),
            TextPart("Looking."),
            ToolCallPart("lookup", {"q": "chart", "n": 2}, tool_call_id="call_1"),
            ToolCallPart("zoom", '{"level": 3}', tool_call_id="call_2"),
        ],
        usage=RequestUsage(input_tokens=40, output_tokens=12),
        model_name="model-x",
        timestamp=T0,
        provider_name="function",
        provider_details={"finish": "tool_use"},
        provider_response_id="resp_1",
        finish_reason="tool_call",
        run_id="run-1",
    ),
    ModelRequest(
        parts=[
            ToolReturnPart("lookup", {"rows": [1, 2]}, tool_call_id="call_1", timestamp=T0),
            ToolReturnPart(
                "zoom", "level must be <= 2", tool_call_id="call_2", outcome="retried", timestamp=T0
            ),
        ],
        run_id="run-1",
    ),
    ModelResponse(parts=[TextPart("A bar chart.")], model_name="model-x", timestamp=T0),
    ModelRequest(
        parts=[
            RetryFeedbackPart(
                "Please answer in French.", retry=RetryInfo(cause="model_retry"), timestamp=T0
            )
        ]
    ),
    ModelResponse(parts=[TextPart("Un graphique.")], timestamp=T0),
]


def test_every_kind_of_message_round_trips_exactly(
    sync_client: SessionMemoryClient, new_id: str
) -> None:
    history = ServiceMessageHistory(sync_client, new_id)
    assert history.load() == []
    history.save(EVERY_KIND[:2])
    history.save(EVERY_KIND[2:])
    assert dumped(history.load()) == dumped(EVERY_KIND)
    assert dumped(history.prompt()) == dumped(EVERY_KIND)  # no budget: all of it, exactly

    # the service reads the Chat form: both calls answered, nothing dangling
    context = sync_client.get_context(new_id, "openai-responses")
    kinds = [i.get("type", "message") for i in context["input"]]
    assert kinds.count("function_call") == 2 and kinds.count("function_call_output") == 2
    listed = sync_client.list_items(new_id, format="openai-chat")["items"]
    assert [m["role"] for m in listed] == [
        "system",
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
        "user",
        "assistant",
    ]
    history.clear()
    assert history.load() == []


def test_an_agent_keeps_its_conversation_across_runs(
    sync_client: SessionMemoryClient, new_id: str
) -> None:
    seen: list[list[ModelMessage]] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(list(messages))
        last = messages[-1].parts[-1]
        if isinstance(last, UserPromptPart) and "weather" in str(last.content):
            return ModelResponse(
                parts=[ToolCallPart("weather", {"city": "Oslo"}, tool_call_id="w1")]
            )
        if isinstance(last, ToolReturnPart):
            return ModelResponse(parts=[TextPart(f"It is {last.content}.")])
        return ModelResponse(parts=[TextPart(f"You said {len(messages)} things.")])

    agent = Agent(FunctionModel(model), system_prompt="Be brief.")

    @agent.tool_plain
    def weather(city: str) -> str:
        return f"snowing in {city}"

    history = ServiceMessageHistory(sync_client, new_id)
    first = agent.run_sync("What is the weather?", message_history=history.load())
    assert first.output == "It is snowing in Oslo."
    history.save(first.new_messages())
    assert dumped(history.load()) == dumped(first.all_messages())

    second = agent.run_sync("Thanks", message_history=history.load())
    # the model saw the first run exactly as it happened
    assert dumped(seen[-1][:-1]) == dumped(first.all_messages())
    history.save(second.new_messages())
    assert dumped(history.load()) == dumped(second.all_messages())

    # a budgeted prompt is a valid history for the next run too
    third = agent.run_sync("Again", message_history=history.prompt(max_items=2))
    assert third.output.startswith("You said")
    assert isinstance(seen[-1][-1], ModelRequest)


def test_the_budgeted_prompt(sync_client: SessionMemoryClient, new_id: str) -> None:
    history = ServiceMessageHistory(sync_client, new_id)
    turns: list[ModelMessage] = [ModelRequest(parts=[SystemPromptPart("Be brief.", timestamp=T0)])]
    for n in range(4):
        turns.append(ModelRequest(parts=[UserPromptPart(f"question {n}", timestamp=T0)]))
        turns.append(ModelResponse(parts=[TextPart(f"answer {n}")], timestamp=T0))
    history.save(turns)
    # the system prompt stays, then the newest turns, exactly
    assert dumped(history.prompt(max_items=3)) == dumped([turns[0], *turns[-2:]])
    limited = ServiceMessageHistory(sync_client, new_id, context={"max_items": 3})
    assert dumped(limited.prompt()) == dumped([turns[0], *turns[-2:]])
    # a request some of whose parts the budget leaves out keeps the others
    history.save(
        [
            ModelRequest(
                parts=[
                    SystemPromptPart("Extra rule.", timestamp=T0),
                    UserPromptPart("last", timestamp=T0),
                ]
            )
        ]
    )
    partial = history.prompt(max_items=1, keep_system=False)
    assert (
        dumped(partial)[-1]["parts"]
        == dumped([ModelRequest(parts=[UserPromptPart("last", timestamp=T0)])])[0]["parts"]
    )
    # after a compaction: the summary first, as a system prompt
    sync_client.compact(new_id, policy="structured", keep_last_items=2)
    prompt = history.prompt()
    first = prompt[0]
    assert isinstance(first, ModelRequest) and isinstance(first.parts[0], SystemPromptPart)
    assert "question 0" in first.parts[0].content
    # a tool result the projection clears is rebuilt from its Chat form
    history.save(
        [
            ModelRequest(parts=[UserPromptPart("look", timestamp=T0)]),
            ModelResponse(parts=[ToolCallPart("read", {}, tool_call_id="r1")], timestamp=T0),
            ModelRequest(
                parts=[ToolReturnPart("read", "x" * 400, tool_call_id="r1", timestamp=T0)]
            ),
            ModelRequest(parts=[UserPromptPart("and?", timestamp=T0)]),
        ]
    )
    cleared = history.prompt(max_recent_tool_results=0)
    returns = [p for m in cleared for p in m.parts if isinstance(p, ToolReturnPart)]
    assert len(returns) == 1 and returns[0].tool_name == "read" and returns[0].content != "x" * 400
    assert ServiceMessageHistory(sync_client, new_id + "-none").prompt() == []


async def test_async_methods_with_either_client(
    async_client: AsyncSessionMemoryClient, sync_client: SessionMemoryClient, new_id: str
) -> None:
    history = ServiceMessageHistory(async_client, new_id)
    assert await history.aload() == []
    agent = Agent(TestModel(custom_output_text="ok"))
    result = await agent.run("hi", message_history=await history.aload())
    await history.asave(result.new_messages())
    assert dumped(await history.aload()) == dumped(result.all_messages())
    assert dumped(history.load()) == dumped(result.all_messages())  # sync, inside a loop
    assert dumped(await history.aprompt()) == dumped(result.all_messages())
    other = ServiceMessageHistory(sync_client, new_id)  # async methods over the sync client
    assert dumped(await other.aload()) == dumped(result.all_messages())
    await other.aclear()
    assert await history.aload() == []
