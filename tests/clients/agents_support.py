"""What the OpenAI Agents SDK tests share: the service on both backends (a real server process
each) and a client of it (fixtures ``service_url`` and ``sm``: import ``service_url_fixture``
and ``sm_fixture`` into a test module to use them), the SDK's own ``SQLiteSession`` as the oracle, model output items with
the shapes real models produce, and a local HTTP server standing in for OpenAI's
``POST /v1/responses/compact``."""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from agents import RunConfig, SQLiteSession, ToolOutputImage, function_tool
from agents.items import TResponseOutputItem
from agents.testing import ModelStep, function_call
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseCreatedEvent,
    ResponseFunctionWebSearch,
    ResponseOutputItemAddedEvent,
    ResponseOutputItemDoneEvent,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseReasoningItem,
)
from openai.types.responses.response_function_web_search import ActionSearch
from openai.types.responses.response_output_text import AnnotationURLCitation
from openai.types.responses.response_reasoning_item import Summary
from session_memory_client import AsyncSessionMemoryClient, ServiceSession

from tests.clients.conftest import API_KEY
from tests.support.services import ServerProcess

RUN = RunConfig(tracing_disabled=True)
PNG = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYGD4DwABBAEAwS2OUAAAAABJRU5ErkJggg=="


@pytest.fixture(name="service_url", scope="module", params=["sqlite", "postgres"])
def service_url_fixture(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """The service on each backend: the package's Postgres + Redis server, and a server on
    its own SQLite file with the in-process lock. Both with auth on, the same key."""
    if request.param == "postgres":
        live: ServerProcess = request.getfixturevalue("live_server")
        yield live.url
        return
    root = tmp_path_factory.mktemp("agents-sqlite")
    server = ServerProcess(
        env={
            "DATABASE_URL": f"sqlite+aiosqlite:///{root / 'memory.db'}",
            "LOG_LEVEL": "warning",
            "AUTH__MODE": "on",
            "AUTH__BOOTSTRAP_KEY": API_KEY,
        },
        log_path=root / "server.log",
    )
    server.start()
    yield server.url
    server.stop()


@pytest.fixture(name="sm")
async def sm_fixture(service_url: str) -> AsyncIterator[AsyncSessionMemoryClient]:
    async with AsyncSessionMemoryClient(service_url, api_key=API_KEY) as client:
        yield client


def pair(
    client: AsyncSessionMemoryClient, session_id: str, **settings: Any
) -> tuple[ServiceSession, SQLiteSession]:
    """A ServiceSession and the SDK's in-memory SQLiteSession, built alike: the second is the
    oracle of the first."""
    return ServiceSession(client, session_id, **settings), SQLiteSession(session_id, **settings)


def dumped(items: list[Any]) -> str:
    """Items as JSON text with their key order: equal texts are byte-identical items."""
    return json.dumps(items, ensure_ascii=False)


# --- model output with the shapes real models produce ------------------------------------


@function_tool
def screenshot(page: str) -> ToolOutputImage:
    """A screenshot of a page of the app."""
    return ToolOutputImage(image_url=PNG, detail="low")


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def reasoning(item_id: str = "rs_1") -> ResponseReasoningItem:
    return ResponseReasoningItem(
        id=item_id,
        type="reasoning",
        summary=[Summary(type="summary_text", text="The user wants the weather; search first.")],
        encrypted_content="gAAAAABo-opaque-reasoning-state==",
    )


def web_search(item_id: str = "ws_1") -> ResponseFunctionWebSearch:
    return ResponseFunctionWebSearch(
        id=item_id,
        type="web_search_call",
        status="completed",
        action=ActionSearch(type="search", query="weather in Paris today"),
    )


def say(
    text: str,
    *,
    item_id: str = "msg_1",
    phase: str | None = None,
    cite: str | None = None,
) -> ResponseOutputMessage:
    annotations = (
        [
            AnnotationURLCitation(
                type="url_citation", url=cite, title="Forecast", start_index=0, end_index=len(text)
            )
        ]
        if cite
        else []
    )
    return ResponseOutputMessage(
        id=item_id,
        type="message",
        role="assistant",
        status="completed",
        phase=phase,  # type: ignore[arg-type]
        content=[
            ResponseOutputText(type="output_text", text=text, annotations=annotations, logprobs=[])
        ],
    )


def hosted_turn() -> list[list[TResponseOutputItem]]:
    """Two model calls: reasoning, a hosted web search, a ``commentary`` message and a call
    of a tool that returns an image; then a cited ``final_answer``. The same provider ids
    every time, as scripted models (and some providers) give them."""
    return [
        [
            reasoning(),
            web_search(),
            say("Searching, then taking a screenshot.", item_id="msg_1", phase="commentary"),
            function_call("screenshot", {"page": "forecast"}, call_id="call_1", item_id="fc_1"),
        ],
        [
            say(
                "Sunny, 21C.",
                item_id="msg_2",
                phase="final_answer",
                cite="https://weather.example/paris",
            )
        ],
    ]


def streamed(output: list[TResponseOutputItem]) -> ModelStep:
    """A scripted step for ``Runner.run_streamed`` as the Responses API streams it (the
    scripted model streams hosted tool calls only from events given to it)."""
    response = Response(
        id="resp-streamed",
        created_at=0,
        model="scripted-model",
        object="response",
        output=output,
        tool_choice="none",
        tools=[],
        top_p=None,
        parallel_tool_calls=False,
        status="completed",
    )
    started = response.model_copy(update={"output": [], "status": "in_progress"})
    events: list[Any] = [
        ResponseCreatedEvent(type="response.created", response=started, sequence_number=0)
    ]
    for index, item in enumerate(output):
        for kind in (ResponseOutputItemAddedEvent, ResponseOutputItemDoneEvent):
            event_type = "added" if kind is ResponseOutputItemAddedEvent else "done"
            events.append(
                kind(
                    type=f"response.output_item.{event_type}",  # type: ignore[arg-type]
                    item=item,
                    output_index=index,
                    sequence_number=len(events),
                )
            )
    events.append(
        ResponseCompletedEvent(
            type="response.completed", response=response, sequence_number=len(events)
        )
    )
    return ModelStep.stream(events, output=output)


# --- OpenAI's responses.compact, served locally -------------------------------------------


class FakeCompaction:
    """``POST /v1/responses/compact`` on a local port: answers with the request's user
    messages followed by one ``compaction`` item, as OpenAI does, and records every request
    body."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                owner.requests.append(body)
                if self.path != "/v1/responses/compact":
                    self.send_error(404)
                    return
                answer = json.dumps(owner.compacted(body)).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def compacted(self, body: dict[str, Any]) -> dict[str, Any]:
        # the same input compacts to the same output
        number = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:12]
        users = [
            {
                "id": f"msg_user_{n}",
                "type": "message",
                "role": "user",
                "status": "completed",
                "content": [{"type": "input_text", "text": _text(item)}],
            }
            for n, item in enumerate(body.get("input") or [])
            if item.get("role") == "user"
        ]
        return {
            "id": f"cmp_resp_{number}",
            "object": "response.compaction",
            "created_at": 1_700_000_000,
            "output": [
                *users,
                {
                    "id": f"cmp_{number}",
                    "type": "compaction",
                    "encrypted_content": f"compacted-state-{number}",
                },
            ],
            "usage": {
                "input_tokens": 100,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": 10,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": 110,
            },
        }

    def __enter__(self) -> FakeCompaction:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def _text(item: dict[str, Any]) -> str:
    content = item.get("content")
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content or [])
