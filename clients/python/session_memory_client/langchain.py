"""A LangChain chat message history whose messages live in the Session Memory Service:
``ServiceChatMessageHistory(client, "user-42")`` wherever LangChain takes a
``BaseChatMessageHistory`` (``RunnableWithMessageHistory``, your own loop).

Each LangChain message is one Chat Completions message, appended in ``openai-chat`` format:
system → ``system``, human → ``user``, AI → ``assistant`` (its ``tool_calls`` as Chat tool
calls), tool → ``tool`` (its ``tool_call_id``), function → ``function``; a chat message
with another role goes as ``user``. Beside the Chat fields, the message carries the whole
LangChain message under the key ``langchain`` (``messages_to_dict``: content blocks, ``id``,
``name``, ``additional_kwargs``, ``response_metadata``, ``tool_calls``,
``invalid_tool_calls``, ``usage_metadata``, ``artifact``, ``status``): the service keeps
unknown fields of a message verbatim and lists it back exactly as sent, so ``messages``
gives back every message equal to the one added. The Chat fields are what the service
reads: it counts, pairs, searches and budgets them like any other session's.

- ``messages`` / ``aget_messages()``: every message, oldest first ([] for a session that
  does not exist yet).
- ``add_messages(messages)`` / ``aadd_messages``: one atomic append (creating the session on
  first use; a retry of the request lands once).
- ``clear()`` / ``aclear()``: removes every message (the service's history keeps them).
- ``get_prompt(**budget)`` / ``aget_prompt``: the budgeted next-turn prompt (``POST
  .../context`` in ``openai-chat``) as LangChain messages: the session's ``config.context``
  budget, overridden by ``context=`` and then by ``budget``. Messages the projection left
  as they were come back exactly; a compaction's summary is a leading ``SystemMessage``,
  and a message the projection changed (a cleared tool result) is rebuilt from its Chat
  form.

``client`` is a ``SessionMemoryClient`` or an ``AsyncSessionMemoryClient``; both kinds of
method work with either (the other kind runs in a worker thread).

Needs ``langchain-core`` (``pip install "session-memory-client[langchain]"``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    FunctionMessage,
    SystemMessage,
    ToolMessage,
    convert_to_messages,
    messages_from_dict,
    messages_to_dict,
)

from session_memory_client import _bridge
from session_memory_client.client import AsyncSessionMemoryClient, SessionMemoryClient

FORMAT = "openai-chat"
FIELD = "langchain"  # the key holding the LangChain message in each stored Chat message


class ServiceChatMessageHistory(BaseChatMessageHistory):
    """A ``BaseChatMessageHistory`` (LangChain) whose messages live in the Session Memory
    Service (see the module doc for the mapping). ``context``: budget overrides for
    ``get_prompt()``."""

    def __init__(
        self,
        client: SessionMemoryClient | AsyncSessionMemoryClient,
        session_id: str,
        *,
        context: Mapping[str, Any] | None = None,
    ) -> None:
        self.client = client
        self.session_id = session_id
        self.context = _bridge.budget_overrides(context)

    # -- reads ----------------------------------------------------------------------------

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        return [from_chat(m) for m in _bridge.items(self.client, self.session_id, format=FORMAT)]

    async def aget_messages(self) -> list[BaseMessage]:
        listed = await _bridge.aitems(self.client, self.session_id, format=FORMAT)
        return [from_chat(m) for m in listed]

    def get_prompt(self, **budget: Any) -> list[BaseMessage]:
        """The budgeted next-turn prompt as LangChain messages ([] for a missing session)."""
        budget = {**self.context, **budget}
        listed = _bridge.prompt(self.client, self.session_id, format=FORMAT, budget=budget)
        return [from_chat(m) for m in listed]

    async def aget_prompt(self, **budget: Any) -> list[BaseMessage]:
        budget = {**self.context, **budget}
        listed = await _bridge.aprompt(self.client, self.session_id, format=FORMAT, budget=budget)
        return [from_chat(m) for m in listed]

    # -- writes ---------------------------------------------------------------------------

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        batch = [to_chat(m) for m in messages]
        _bridge.append(self.client, self.session_id, batch, format=FORMAT)

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        batch = [to_chat(m) for m in messages]
        await _bridge.aappend(self.client, self.session_id, batch, format=FORMAT)

    def clear(self) -> None:
        _bridge.clear(self.client, self.session_id)

    async def aclear(self) -> None:
        await _bridge.aclear(self.client, self.session_id)


# -- the mapping ----------------------------------------------------------------------------


def to_chat(message: BaseMessage) -> dict[str, Any]:
    """The Chat Completions message stored for ``message``: its Chat form, plus the whole
    LangChain message under ``FIELD``."""
    if not isinstance(message, BaseMessage):
        raise TypeError(f"a message must be a LangChain BaseMessage, not {type(message).__name__}")
    out: dict[str, Any]
    if isinstance(message, SystemMessage):
        out = {"role": "system", "content": _text(message.content)}
    elif isinstance(message, AIMessage):
        out = {"role": "assistant", "content": _text(message.content)}
        calls = [
            {
                "id": call.get("id") or f"call_{k}",
                "type": "function",
                "function": {"name": call["name"], "arguments": json.dumps(call["args"])},
            }
            for k, call in enumerate(message.tool_calls)
        ]
        if calls:
            out["tool_calls"] = calls
    elif isinstance(message, ToolMessage):
        out = {
            "role": "tool",
            "tool_call_id": message.tool_call_id,
            "content": _text(message.content),
        }
    elif isinstance(message, FunctionMessage):
        out = {"role": "function", "name": message.name, "content": _text(message.content)}
    else:  # human, and chat messages of other roles: what the model reads is the user's turn
        out = {"role": "user", "content": _text_or_parts(message.content)}
    out[FIELD] = messages_to_dict([message])[0]
    return out


def from_chat(stored: Mapping[str, Any]) -> BaseMessage:
    """The LangChain message of a stored Chat message: exactly the one added when it carries
    ``FIELD``, else (a summary, a message the projection changed, one written by another
    client) built from its Chat form."""
    saved = stored.get(FIELD)
    if isinstance(saved, Mapping):
        return messages_from_dict([dict(saved)])[0]
    chat = {k: v for k, v in stored.items() if k != FIELD}
    if chat.get("role") == "function":
        return FunctionMessage(content=chat.get("content") or "", name=chat.get("name", ""))
    if chat.get("role") == "developer":  # LangChain has no developer message of its own
        return SystemMessage(content=chat.get("content") or "")
    return convert_to_messages([chat])[0]


def _text(content: Any) -> str:
    """Chat text content of LangChain content (str, or blocks: their texts joined)."""
    if isinstance(content, str):
        return content
    texts: list[str] = []
    for block in content:
        if isinstance(block, str):
            texts.append(block)
        elif isinstance(block, Mapping) and isinstance(block.get("text"), str):
            texts.append(block["text"])
    return "\n".join(texts)


def _text_or_parts(content: Any) -> Any:
    """Chat content of a user message: a string as it is; blocks as Chat parts (text, and
    images given by URL), the text of any other block."""
    if isinstance(content, str):
        return content
    parts: list[dict[str, Any]] = []
    for block in content:
        if isinstance(block, str):
            parts.append({"type": "text", "text": block})
        elif not isinstance(block, Mapping):
            continue
        elif block.get("type") == "image_url" and isinstance(block.get("image_url"), Mapping):
            parts.append({"type": "image_url", "image_url": dict(block["image_url"])})
        elif block.get("type") == "image" and isinstance(block.get("url"), str):
            parts.append({"type": "image_url", "image_url": {"url": block["url"]}})
        elif isinstance(block.get("text"), str):
            parts.append({"type": "text", "text": block["text"]})
    return parts or ""


__all__ = ["ServiceChatMessageHistory", "from_chat", "to_chat"]
