"""An OpenAI Agents SDK session backed by the service: ``Runner.run(agent, input,
session=ServiceSession(client, "user-42"))`` keeps the conversation here.

It implements the SDK's ``Session`` protocol (``agents.memory.session.Session``) structurally,
as the SDK asks third-party sessions to (``SessionABC`` is for the SDK's own):

- ``add_items(items)``: one atomic append in ``openai-responses`` format (the SDK's items are
  Responses input items), creating the session on first use, with an ``Idempotency-Key`` that
  the client reuses when it retries, so a retried batch lands once;
- ``get_items()``: the next-turn prompt from ``POST /context`` in ``openai-responses`` format,
  so the session's budget (``config.context``) and its compaction summary (a leading
  ``system`` message) apply; ``get_items(limit=N)``: the newest N items of working memory,
  oldest first, exactly as stored (no summary, no budget);
- ``pop_item()``: removes the newest item (it stays in the service's history) and returns it,
  ``None`` when working memory is empty;
- ``clear_session()``: empties working memory and the summary (history keeps everything).

Items come back in the service's ``openai-responses`` rendering, which is what the model
needs, not a byte copy of what the SDK wrote: assistant text is a string, ``status`` and
output annotations are dropped, ``function_call`` ids are not replayed. Item types the service
does not store (hosted tool calls such as ``web_search_call``, ``item_reference``) are refused
by the service with an ``InvalidInputError`` rather than silently lost.

Requires nothing from the SDK at import time (install ``session-memory-client[agents]`` to use
it with ``Runner``).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from session_memory_client.client import AsyncSessionMemoryClient
from session_memory_client.errors import ConflictError, NotFoundError
from session_memory_client.types import Item

if TYPE_CHECKING:
    from agents.items import TResponseInputItem
    from agents.memory import SessionSettings

FORMAT = "openai-responses"
# Ids the service accepts as item ids; anything else (the SDK's "__fake_id__" for providers
# that assign none, ids with slashes) is dropped and the service generates one.
_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")
# Keys the SDK or some providers add to items that are not part of a Responses input item.
_FOREIGN_KEYS = ("provider_data", "created_by")


class ServiceSession:
    """A ``Session`` (OpenAI Agents SDK) whose items live in the Session Memory Service.

    ``context`` holds budget overrides for ``get_items()`` (``max_tokens``, ``max_items``, ...;
    see ``AsyncSessionMemoryClient.get_context``); without them the session's own
    ``config.context`` decides.
    """

    session_settings: SessionSettings | None = None

    def __init__(
        self,
        client: AsyncSessionMemoryClient,
        session_id: str,
        *,
        context: Mapping[str, Any] | None = None,
        session_settings: SessionSettings | None = None,
    ) -> None:
        self.client = client
        self.session_id = session_id
        self.context = dict(context or {})
        self.session_settings = session_settings

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The conversation history: all of it (as the model should see it) when ``limit`` is
        None, else the newest ``limit`` items, oldest first."""
        if limit is not None:
            if limit <= 0:
                return []
            try:
                if limit <= 1000:
                    stored = (await self.client.list_items(self.session_id, last=limit))["items"]
                else:
                    stored = [i async for i in self.client.iter_items(self.session_id)][-limit:]
            except NotFoundError:
                return []
            return [to_responses_item(item) for item in stored]  # type: ignore[misc]
        try:
            context = await self.client.get_context(self.session_id, FORMAT, **self.context)
        except NotFoundError:
            return []
        return list(context.get("input") or [])  # type: ignore[arg-type]

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Append the items atomically (creating the session on first use)."""
        if not items:
            return
        batch = [to_service_item(item) for item in items]
        await self.client.append_items(
            self.session_id,
            batch,
            format=FORMAT,
            create=True,
            idempotency_key=f"agents-{uuid.uuid4()}",
        )

    async def pop_item(self) -> TResponseInputItem | None:
        """Remove and return the newest item; ``None`` if there is none."""
        try:
            popped = await self.client.pop_item(self.session_id)
        except (NotFoundError, ConflictError) as exc:
            if isinstance(exc, ConflictError) and exc.code != "empty-working-memory":
                raise
            return None
        return to_responses_item(popped["item"])  # type: ignore[return-value]

    async def clear_session(self) -> None:
        """Forget the conversation (the service's history keeps it)."""
        try:
            await self.client.clear_items(self.session_id)
        except NotFoundError:
            return


def to_service_item(item: Any) -> dict[str, Any]:
    """A Responses input item as the service's ``openai-responses`` ingest accepts it."""
    if hasattr(item, "model_dump"):
        item = item.model_dump(exclude_unset=True, mode="json")
    if not isinstance(item, Mapping):
        raise TypeError(f"a session item must be a mapping, not {type(item).__name__}")
    out = {k: v for k, v in item.items() if k not in _FOREIGN_KEYS and v is not None}
    item_id = out.get("id")
    if item_id is not None and not (isinstance(item_id, str) and _ID_RE.match(item_id)):
        del out["id"]
    return out


def to_responses_item(item: Item) -> dict[str, Any]:
    """A stored (canonical) item as an ``openai-responses`` input item, rendered by the same
    rules as the service's ``openai-responses`` projection."""
    kind = item.get("type")
    if kind == "message":
        content = item["content"]
        if not isinstance(content, str):
            if item["role"] == "assistant":
                content = "\n".join(
                    p["text"] if p.get("type") == "text" else "[image omitted]" for p in content
                )
            else:
                content = [
                    {"type": "input_text", "text": p["text"]}
                    if p.get("type") == "text"
                    else {
                        "type": "input_image",
                        "image_url": p["url"],
                        "detail": p.get("detail") or "auto",
                    }
                    for p in content
                ]
        return {"type": "message", "role": item["role"], "content": content}
    if kind == "function_call":
        return {
            "type": "function_call",
            "call_id": item["call_id"],
            "name": item["name"],
            "arguments": item.get("arguments", ""),
        }
    if kind == "function_call_output":
        return {
            "type": "function_call_output",
            "call_id": item["call_id"],
            "output": item["output"],
        }
    if kind == "reasoning":
        out: dict[str, Any] = {
            "type": "reasoning",
            "id": item["id"],
            "summary": [{"type": "summary_text", "text": s} for s in item.get("summary", [])],
        }
        if item.get("content") is not None:
            out["content"] = [{"type": "reasoning_text", "text": item["content"]}]
        if item.get("encrypted_content") is not None:
            out["encrypted_content"] = item["encrypted_content"]
        return out
    raise ValueError(f"unknown item type {kind!r}")
