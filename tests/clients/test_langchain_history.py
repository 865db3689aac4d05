"""LangChain's chat message history over the service (session_memory_client.langchain) on a
live server, both backends: every kind of LangChain message comes back exactly, through the
sync and async methods with either client, the service reads and budgets their Chat form,
and LangChain's own ``RunnableWithMessageHistory`` keeps a conversation in it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from langchain_core.chat_history import BaseChatMessageHistory, InMemoryChatMessageHistory
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    messages_to_dict,
)
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables.history import RunnableWithMessageHistory
from session_memory_client import AsyncSessionMemoryClient, SessionMemoryClient
from session_memory_client.langchain import ServiceChatMessageHistory

from tests.clients.agents_support import service_url_fixture  # noqa: F401 (a fixture)
from tests.clients.conftest import API_KEY

PNG = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYGD4DwABBAEAwS2OUAAAAABJRU5ErkJggg=="

EVERY_KIND: list[BaseMessage] = [
    SystemMessage("You are terse.", id="sys-1", additional_kwargs={"cache": {"ttl": "5m"}}),
    HumanMessage("What is in this picture? Résumé 🎉", id="h-1", name="ana"),
    HumanMessage(
        [
            {"type": "text", "text": "And this one?"},
            {"type": "image_url", "image_url": {"url": PNG, "detail": "low"}},
        ],
        id="h-2",
    ),
    AIMessage(
        "Looking it up.",
        id="run-1",
        tool_calls=[
            {"name": "search", "args": {"q": "chart", "n": 3}, "id": "call_1", "type": "tool_call"},
            {"name": "zoom", "args": {}, "id": "call_2", "type": "tool_call"},
        ],
        invalid_tool_calls=[
            {
                "name": "bad",
                "args": "{oops",
                "id": "call_3",
                "error": "bad json",
                "type": "invalid_tool_call",
            }
        ],
        usage_metadata={"input_tokens": 12, "output_tokens": 7, "total_tokens": 19},
        response_metadata={"model_name": "gpt-x", "finish_reason": "tool_calls"},
        additional_kwargs={"refusal": None},
    ),
    ToolMessage(
        "3 zebrafish charts found", tool_call_id="call_1", id="t-1", artifact={"rows": [1, 2, 3]}
    ),
    ToolMessage("zoom failed", tool_call_id="call_2", status="error", name="zoom"),
    AIMessage(
        [
            {"type": "text", "text": "It is a bar chart."},
            {"type": "reasoning", "reasoning": "The bars are vertical."},
        ],
        id="run-2",
    ),
    FunctionMessage("42", name="legacy_fn"),
    ChatMessage("Looks right to me.", role="critic", id="c-1"),
    HumanMessage("Thanks!", additional_kwargs={"k": [1, {"deep": None}]}),
]


@pytest.fixture
def sync_client(service_url: str) -> Iterator[SessionMemoryClient]:
    with SessionMemoryClient(service_url, api_key=API_KEY) as client:
        yield client


@pytest.fixture
async def async_client(service_url: str) -> AsyncIterator[AsyncSessionMemoryClient]:
    async with AsyncSessionMemoryClient(service_url, api_key=API_KEY) as client:
        yield client


def dicts(messages: list[BaseMessage]) -> list[dict[str, Any]]:
    return messages_to_dict(messages)


def test_it_is_a_langchain_chat_message_history(sync_client: SessionMemoryClient) -> None:
    assert isinstance(ServiceChatMessageHistory(sync_client, "s"), BaseChatMessageHistory)
    with pytest.raises(TypeError, match="budget"):
        ServiceChatMessageHistory(sync_client, "s", context={"max_tokes": 10})


def test_every_kind_of_message_comes_back_exactly(
    sync_client: SessionMemoryClient, new_id: str
) -> None:
    history = ServiceChatMessageHistory(sync_client, new_id)
    assert history.messages == []  # a session that does not exist yet
    history.add_messages(EVERY_KIND[:4])
    for message in EVERY_KIND[4:]:
        history.add_message(message)
    assert history.messages == EVERY_KIND
    assert dicts(history.messages) == dicts(EVERY_KIND)
    # the oracle: LangChain's own in-memory history given the same calls
    oracle = InMemoryChatMessageHistory()
    oracle.add_messages(EVERY_KIND)
    assert dicts(history.messages) == dicts(oracle.messages)

    # the service reads the Chat form: the calls pair with their outputs, the texts are searchable
    context = sync_client.get_context(new_id, "openai-responses")
    kinds = [i.get("type", "message") for i in context["input"]]
    assert kinds.count("function_call") == 2 and kinds.count("function_call_output") == 2
    hits = sync_client.search("zebrafish", session_id=new_id)["items"]
    assert [h["item"]["type"] for h in hits] == ["function_call_output"]

    history.clear()
    assert history.messages == []
    assert len(sync_client.list_history(new_id)["items"]) == len(EVERY_KIND) + 2  # calls split


def test_the_langchain_copy_costs_no_tokens(sync_client: SessionMemoryClient, new_id: str) -> None:
    """What the service counts is the Chat form; the LangChain copy beside it is not read."""
    history = ServiceChatMessageHistory(sync_client, new_id)
    history.add_messages([EVERY_KIND[1], EVERY_KIND[4]])
    bare = [{"role": "user", "content": "What is in this picture? Résumé 🎉"}]
    sync_client.append_items(new_id, bare, format="openai-chat")
    tokens = [i["tokens"] for i in sync_client.list_items(new_id)["items"]]
    assert tokens[0] == tokens[-1]


async def test_async_methods_with_the_async_client(
    async_client: AsyncSessionMemoryClient, new_id: str
) -> None:
    history = ServiceChatMessageHistory(async_client, new_id)
    assert await history.aget_messages() == []
    await history.aadd_messages(EVERY_KIND)
    assert dicts(await history.aget_messages()) == dicts(EVERY_KIND)
    # the sync methods work with it too (from inside a running loop)
    assert dicts(history.messages) == dicts(EVERY_KIND)
    history.add_messages([HumanMessage("one more", id="h-9")])
    assert (await history.aget_messages())[-1] == HumanMessage("one more", id="h-9")
    await history.aclear()
    assert await history.aget_messages() == []


async def test_async_methods_with_the_sync_client(
    sync_client: SessionMemoryClient, new_id: str
) -> None:
    history = ServiceChatMessageHistory(sync_client, new_id)
    await history.aadd_messages(EVERY_KIND[:5])
    assert dicts(await history.aget_messages()) == dicts(EVERY_KIND[:5])
    assert dicts(await history.aget_prompt()) == dicts(EVERY_KIND[:5])
    await history.aclear()
    assert history.messages == []


def test_the_budgeted_prompt_as_langchain_messages(
    sync_client: SessionMemoryClient, new_id: str
) -> None:
    history = ServiceChatMessageHistory(sync_client, new_id)
    turns: list[BaseMessage] = []
    for n in range(4):
        turns += [HumanMessage(f"question {n}", id=f"q{n}"), AIMessage(f"answer {n}", id=f"a{n}")]
    history.add_messages([EVERY_KIND[0], *turns])
    assert history.get_prompt() == [EVERY_KIND[0], *turns]  # no budget: everything, exactly
    # a budget of items keeps the system message and the newest turns, each exactly
    assert history.get_prompt(max_items=3) == [EVERY_KIND[0], *turns[-2:]]
    assert ServiceChatMessageHistory(
        sync_client, new_id, context={"max_items": 3}
    ).get_prompt() == [
        EVERY_KIND[0],
        *turns[-2:],
    ]
    # after a compaction: the summary first, as a system message, then what was kept
    sync_client.compact(new_id, policy="structured", keep_last_items=2)
    prompt = history.get_prompt()
    assert isinstance(prompt[0], SystemMessage) and "question 0" in str(prompt[0].content)
    assert prompt[-2:] == turns[-2:]
    # a call whose result the projection clears is rebuilt from its Chat form
    tool_turn: list[BaseMessage] = [
        HumanMessage("look"),
        AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "c9", "type": "tool_call"}]),
        ToolMessage("x" * 400, tool_call_id="c9", id="t9"),
        HumanMessage("and?"),
    ]
    history.add_messages(tool_turn)
    cleared = history.get_prompt(max_recent_tool_results=0)
    outputs = [m for m in cleared if isinstance(m, ToolMessage)]
    assert len(outputs) == 1 and outputs[0].tool_call_id == "c9"
    assert outputs[0].content != "x" * 400
    assert ServiceChatMessageHistory(sync_client, new_id + "-none").get_prompt() == []


def test_runnable_with_message_history_keeps_the_conversation(
    sync_client: SessionMemoryClient, new_id: str
) -> None:
    model = GenericFakeChatModel(messages=iter([AIMessage("Hi Ana."), AIMessage("You are Ana.")]))
    prompt = ChatPromptTemplate.from_messages(
        [("system", "Be brief."), MessagesPlaceholder("history"), ("human", "{question}")]
    )
    chain = RunnableWithMessageHistory(
        prompt | model,
        lambda session_id: ServiceChatMessageHistory(sync_client, session_id),
        input_messages_key="question",
        history_messages_key="history",
    )
    config: Any = {"configurable": {"session_id": new_id}}
    assert chain.invoke({"question": "I am Ana."}, config=config).content == "Hi Ana."
    assert chain.invoke({"question": "Who am I?"}, config=config).content == "You are Ana."
    stored = ServiceChatMessageHistory(sync_client, new_id).messages
    assert [(m.type, m.content) for m in stored] == [
        ("human", "I am Ana."),
        ("ai", "Hi Ana."),
        ("human", "Who am I?"),
        ("ai", "You are Ana."),
    ]
    listed = sync_client.list_items(new_id, format="openai-chat")["items"]
    assert [m["role"] for m in listed] == ["user", "assistant", "user", "assistant"]


def test_a_message_stored_as_several_items_comes_back_whole_across_pages(
    sync_client: SessionMemoryClient, new_id: str
) -> None:
    """An AI message with tool calls is several items in the service; a page of 1,000 items
    may end inside it."""
    history = ServiceChatMessageHistory(sync_client, new_id)
    first: list[BaseMessage] = [HumanMessage(f"m{n}") for n in range(999)]
    calls = AIMessage(
        "two calls",
        tool_calls=[
            {"name": "f", "args": {}, "id": "a", "type": "tool_call"},
            {"name": "g", "args": {}, "id": "b", "type": "tool_call"},
        ],
    )
    history.add_messages(first)
    history.add_messages(
        [calls, ToolMessage("ra", tool_call_id="a"), ToolMessage("rb", tool_call_id="b")]
    )
    assert sync_client.get_session(new_id)["item_count"] == 1004  # the AI message is 3 items
    assert dicts(history.messages) == dicts(
        [*first, calls, ToolMessage("ra", tool_call_id="a"), ToolMessage("rb", tool_call_id="b")]
    )
