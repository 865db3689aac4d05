"""A Pydantic AI agent's message history in the Session Memory Service:

    history = ServiceMessageHistory(client, "user-42")
    result = await agent.run("Hi", message_history=await history.aload())
    await history.asave(result.new_messages())

Each ``ModelMessage`` is stored as Chat Completions messages, appended in ``openai-chat``
format, so that the service reads, pairs, searches and budgets them like any other
session's: a ``ModelResponse`` is one ``assistant`` message (its text parts joined as the
content, its tool calls as Chat tool calls); each part of a ``ModelRequest`` is one message:
a system prompt → ``system``, a user prompt → ``user`` (text, and images by URL or as
``data:`` URLs), a tool return (a retried one too) → ``tool`` (its ``tool_call_id``), retry
feedback → ``user``; a part with no Chat counterpart (thinking, files,
built-in tools, ...) travels only in the copy below.

Beside the Chat fields, every stored message carries under the key ``pydantic_ai`` the parts
it stands for, dumped by ``ModelMessagesTypeAdapter`` (JSON mode), and the first one of each
``ModelMessage`` the message's own fields; ``group`` ties the messages of one
``ModelMessage`` together. The service keeps that key verbatim, so:

- ``load()`` / ``aload()``: every message exactly as saved (equal
  ``ModelMessagesTypeAdapter`` dumps), oldest first; [] for a session not created yet.
- ``save(messages)`` / ``asave``: one atomic append (creating the session on first use).
- ``prompt(**budget)`` / ``aprompt``: the budgeted next-turn prompt (``POST .../context`` in
  ``openai-chat``) as ``ModelMessage`` s: the session's ``config.context`` budget,
  overridden by ``context=`` and then by ``budget``. What the projection kept as it was
  comes back exactly (a ``ModelRequest`` some of whose parts were left out keeps the
  others); a compaction's summary becomes a leading ``ModelRequest`` with a
  ``SystemPromptPart``, and a message the projection changed (a cleared tool result) is
  rebuilt from its Chat form.
- ``clear()`` / ``aclear()``: removes every message (the service's history keeps them).

``client``: a ``SessionMemoryClient`` or an ``AsyncSessionMemoryClient`` (either kind of
method works with either). Needs ``pydantic-ai-slim`` (``pip install
"session-memory-client[pydantic-ai]"``).
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic_ai.messages import (
    BinaryContent,
    ImageUrl,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    RetryFeedbackPart,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from session_memory_client import _bridge
from session_memory_client.client import AsyncSessionMemoryClient, SessionMemoryClient

FORMAT = "openai-chat"
FIELD = "pydantic_ai"


class ServiceMessageHistory:
    """A Pydantic AI message history kept in the Session Memory Service (see the module
    doc). ``context``: budget overrides for ``prompt()``."""

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

    def load(self) -> list[ModelMessage]:
        return from_chat(_bridge.items(self.client, self.session_id, format=FORMAT))

    async def aload(self) -> list[ModelMessage]:
        return from_chat(await _bridge.aitems(self.client, self.session_id, format=FORMAT))

    def save(self, messages: Sequence[ModelMessage]) -> None:
        _bridge.append(self.client, self.session_id, to_chat(messages), format=FORMAT)

    async def asave(self, messages: Sequence[ModelMessage]) -> None:
        await _bridge.aappend(self.client, self.session_id, to_chat(messages), format=FORMAT)

    def prompt(self, **budget: Any) -> list[ModelMessage]:
        budget = {**self.context, **budget}
        return from_chat(_bridge.prompt(self.client, self.session_id, format=FORMAT, budget=budget))

    async def aprompt(self, **budget: Any) -> list[ModelMessage]:
        budget = {**self.context, **budget}
        return from_chat(
            await _bridge.aprompt(self.client, self.session_id, format=FORMAT, budget=budget)
        )

    def clear(self) -> None:
        _bridge.clear(self.client, self.session_id)

    async def aclear(self) -> None:
        await _bridge.aclear(self.client, self.session_id)


# -- ModelMessage -> Chat messages ----------------------------------------------------------


def to_chat(messages: Sequence[ModelMessage]) -> list[dict[str, Any]]:
    """The Chat messages stored for ``messages`` (see the module doc)."""
    dumped = ModelMessagesTypeAdapter.dump_python(list(messages), mode="json")
    out: list[dict[str, Any]] = []
    for message, data in zip(messages, dumped, strict=True):
        group = uuid.uuid4().hex[:16]
        head = {k: v for k, v in data.items() if k != "parts"}
        if isinstance(message, ModelResponse):
            chat = _response_chat(message)
            chat[FIELD] = {"group": group, "message": head, "parts": data["parts"]}
            out.append(chat)
            continue
        for k, (part, part_data) in enumerate(zip(message.parts, data["parts"], strict=True)):
            chat = _request_part_chat(part)
            extra: dict[str, Any] = {"group": group}
            if k == 0:
                extra["message"] = head
            extra["parts"] = [part_data]
            chat[FIELD] = extra
            out.append(chat)
        if not message.parts:  # nothing a model reads, but a message all the same
            out.append(
                {
                    "role": "user",
                    "content": "",
                    FIELD: {"group": group, "message": head, "parts": []},
                }
            )
    return out


def _response_chat(message: ModelResponse) -> dict[str, Any]:
    texts = [p.content for p in message.parts if isinstance(p, TextPart)]
    chat: dict[str, Any] = {"role": "assistant", "content": "\n\n".join(texts)}
    calls = [
        {
            "id": p.tool_call_id,
            "type": "function",
            "function": {"name": p.tool_name, "arguments": p.args_as_json_str()},
        }
        for p in message.parts
        if isinstance(p, ToolCallPart)
    ]
    if calls:
        chat["tool_calls"] = calls
    return chat


def _request_part_chat(part: Any) -> dict[str, Any]:
    if isinstance(part, SystemPromptPart):
        return {"role": "system", "content": part.content}
    if isinstance(part, UserPromptPart):
        return {"role": "user", "content": _user_content(part.content)}
    if isinstance(part, ToolReturnPart):
        return {
            "role": "tool",
            "tool_call_id": part.tool_call_id,
            "content": part.model_response_str(),
        }
    if isinstance(part, RetryFeedbackPart):
        return {"role": "user", "content": part.model_response()}
    if isinstance(part, RetryPromptPart):  # deprecated; Pydantic AI reads it back as the above
        if part.tool_name is not None:
            return {
                "role": "tool",
                "tool_call_id": part.tool_call_id,
                "content": part.model_response(),
            }
        return {"role": "user", "content": part.model_response()}
    # a part Chat has no counterpart for: an empty user turn carrying it
    text = getattr(part, "content", "")
    return {"role": "user", "content": text if isinstance(text, str) else ""}


def _user_content(content: Any) -> Any:
    if isinstance(content, str):
        return content
    parts: list[dict[str, Any]] = []
    for item in content:
        if isinstance(item, str):
            parts.append({"type": "text", "text": item})
        elif isinstance(item, ImageUrl):
            parts.append({"type": "image_url", "image_url": {"url": item.url}})
        elif isinstance(item, BinaryContent) and item.is_image:
            data = base64.b64encode(item.data).decode()
            url = f"data:{item.media_type};base64,{data}"
            parts.append({"type": "image_url", "image_url": {"url": url}})
        else:
            parts.append({"type": "text", "text": f"[{getattr(item, 'kind', 'file')} omitted]"})
    return parts or ""


# -- Chat messages -> ModelMessage ----------------------------------------------------------


def from_chat(stored: Sequence[Mapping[str, Any]]) -> list[ModelMessage]:
    """The ``ModelMessage`` s of stored Chat messages, in order: each group of messages that
    carries its copy is that message (with the parts present), any other message is rebuilt
    from its Chat form."""
    dumped: list[dict[str, Any]] = []
    groups: list[str | None] = []
    names: dict[str, str] = {}  # tool call id -> tool name, for tool messages without a copy
    for chat in stored:
        for call in chat.get("tool_calls") or ():
            function = call.get("function") or {}
            if isinstance(call.get("id"), str) and isinstance(function.get("name"), str):
                names[call["id"]] = function["name"]
        saved = chat.get(FIELD)
        if isinstance(saved, Mapping) and isinstance(saved.get("parts"), list):
            group = saved.get("group")
            if "message" not in saved and groups and groups[-1] == group:
                dumped[-1]["parts"].extend(saved["parts"])
                continue
            head = dict(saved.get("message") or {"kind": _kind_of(saved["parts"])})
            dumped.append({**head, "parts": list(saved["parts"])})
            groups.append(group)
            continue
        dumped.append(_rebuilt(chat, names))
        groups.append(None)
    return ModelMessagesTypeAdapter.validate_python(dumped)


def _kind_of(parts: list[Any]) -> str:
    response_kinds = {"text", "tool-call", "thinking", "builtin-tool-call", "file"}
    if parts and all(
        isinstance(p, Mapping) and p.get("part_kind") in response_kinds for p in parts
    ):
        return "response"
    return "request"


def _rebuilt(chat: Mapping[str, Any], names: Mapping[str, str]) -> dict[str, Any]:
    """A ``ModelMessage`` (dumped) from a Chat message alone."""
    role = chat.get("role")
    content = chat.get("content")
    text = content if isinstance(content, str) else _texts(content)
    message: ModelMessage
    if role in ("system", "developer"):
        message = ModelRequest(parts=[SystemPromptPart(text)])
    elif role == "assistant":
        parts: list[Any] = [TextPart(text)] if text else []
        for call in chat.get("tool_calls") or ():
            function = call.get("function") or {}
            parts.append(
                ToolCallPart(
                    tool_name=function.get("name", ""),
                    args=function.get("arguments") or "{}",
                    tool_call_id=call.get("id") or "",
                )
            )
        message = ModelResponse(parts=parts)
    elif role == "tool":
        call_id = str(chat.get("tool_call_id") or "")
        message = ModelRequest(
            parts=[
                ToolReturnPart(tool_name=names.get(call_id, ""), content=text, tool_call_id=call_id)
            ]
        )
    else:
        message = ModelRequest(
            parts=[UserPromptPart(text if isinstance(content, str) else _user_parts(content))]
        )
    return ModelMessagesTypeAdapter.dump_python([message], mode="json")[0]


def _texts(content: Any) -> str:
    if not isinstance(content, list):
        return ""
    return "\n".join(
        p["text"] for p in content if isinstance(p, Mapping) and isinstance(p.get("text"), str)
    )


def _user_parts(content: Any) -> list[Any]:
    out: list[Any] = []
    for part in content if isinstance(content, list) else ():
        if not isinstance(part, Mapping):
            continue
        if isinstance(part.get("text"), str):
            out.append(part["text"])
        elif part.get("type") == "image_url":
            url = (part.get("image_url") or {}).get("url")
            if isinstance(url, str) and url.startswith("data:"):
                out.append(BinaryContent.from_data_uri(url))
            elif isinstance(url, str):
                out.append(ImageUrl(url))
    return out


__all__ = ["ServiceMessageHistory", "from_chat", "to_chat"]
