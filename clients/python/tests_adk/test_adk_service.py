"""``ServiceSessionService`` against a live server: ADK's types and Runner, with ADK's own
``InMemorySessionService`` as the oracle where the two must agree."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from typing import Any

import pytest
from google.adk.agents import LlmAgent
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.errors.session_not_found_error import SessionNotFoundError
from google.adk.events import Event, EventActions
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.sessions import BaseSessionService, InMemorySessionService, Session
from google.adk.sessions.base_session_service import GetSessionConfig
from google.genai import types

from session_memory_client import AsyncSessionMemoryClient
from session_memory_client.adk import ServiceSessionService, escape, session_key

APP = "shop"


def said(text: str, *, role: str = "user", timestamp: float | None = None, **actions: Any) -> Event:
    fields: dict[str, Any] = {
        "invocation_id": "inv-1",
        "author": "user" if role == "user" else "assistant",
        "content": types.Content(role=role, parts=[types.Part(text=text)]),
        "actions": EventActions(**actions),
    }
    if timestamp is not None:
        fields["timestamp"] = timestamp
    return Event(**fields)


def rich_event() -> Event:
    """An event with most of what a model turn carries: bytes, a call and its response,
    thought, grounding, usage, actions of every kind."""
    return Event(
        invocation_id="inv-7",
        author="assistant",
        branch="root.child",
        content=types.Content(
            role="model",
            parts=[
                types.Part(text="Let me look.", thought=True, thought_signature=b"\x00sig\xff"),
                types.Part.from_bytes(data=b"\x89PNG\r\n\x1a\n", mime_type="image/png"),
                types.Part(
                    function_call=types.FunctionCall(
                        id="call-1", name="lookup", args={"sku": "A-1", "n": [1, 2.5, None]}
                    )
                ),
                types.Part(
                    function_response=types.FunctionResponse(
                        id="call-1", name="lookup", response={"price": 12.5, "ok": True}
                    )
                ),
                types.Part(text="Ünïcödé, emoji 🎉, こんにちは"),
            ],
        ),
        grounding_metadata=types.GroundingMetadata(
            search_entry_point=types.SearchEntryPoint(sdk_blob=b"blob-bytes")
        ),
        usage_metadata=types.GenerateContentResponseUsageMetadata(
            prompt_token_count=10, candidates_token_count=3, total_token_count=13
        ),
        turn_complete=True,
        long_running_tool_ids={"call-1"},
        error_code="E1",
        error_message="partly failed",
        interrupted=False,
        actions=EventActions(
            state_delta={"cart": {"A-1": 2}, "app:currency": "EUR", "user:tier": "gold"},
            artifact_delta={"receipt.pdf": 0},
            transfer_to_agent="billing",
            escalate=True,
            skip_summarization=True,
        ),
    )


async def test_create_get_delete_like_adks_own_service(service: ServiceSessionService) -> None:
    oracle = InMemorySessionService()
    for svc in (service, oracle):
        created = await svc.create_session(
            app_name=APP, user_id="ann", session_id=" s1 ", state={"k": "v", "app:a": 1}
        )
        assert created.id == "s1"  # padded ids are trimmed, as ADK's services do
        got = await svc.get_session(app_name=APP, user_id="ann", session_id="s1")
        assert got == created
        assert got is not None and got.state == {"k": "v", "app:a": 1}
        with pytest.raises(AlreadyExistsError):
            await svc.create_session(app_name=APP, user_id="ann", session_id="s1")
        # same session id, another user: another session
        other = await svc.create_session(app_name=APP, user_id="bob", session_id="s1")
        assert other.state == {"app:a": 1}
        await svc.delete_session(app_name=APP, user_id="ann", session_id="s1")
        assert await svc.get_session(app_name=APP, user_id="ann", session_id="s1") is None
        assert await svc.get_session(app_name=APP, user_id="bob", session_id="s1") is not None
        await svc.delete_session(app_name=APP, user_id="ann", session_id="s1")  # no error
    generated = await service.create_session(app_name=APP, user_id="ann")
    assert generated.id and generated.events == []


async def test_every_event_field_round_trips_exactly(service: ServiceSessionService) -> None:
    session = await service.create_session(app_name=APP, user_id="ann")
    event = rich_event()
    returned = await service.append_event(session, event)
    assert returned is event
    got = await service.get_session(app_name=APP, user_id="ann", session_id=session.id)
    assert got is not None and got.events == [event]
    assert got.events[0].model_dump_json() == event.model_dump_json()
    assert got == session  # state, events and last_update_time as the caller holds them
    assert got.last_update_time == event.timestamp


async def test_state_scopes_as_adks_own_service(
    client: AsyncSessionMemoryClient, namespace: str
) -> None:
    """The same calls on ours and on ADK's InMemorySessionService give the same states."""
    ours = ServiceSessionService(client, namespace=namespace)
    states: list[list[dict[str, Any]]] = []
    for svc in (ours, InMemorySessionService()):
        seen: list[dict[str, Any]] = []
        a1 = await svc.create_session(
            app_name=APP, user_id="ann", session_id="a1", state={"k": 1, "user:lang": "fr"}
        )
        await svc.create_session(app_name=APP, user_id="ann", session_id="a2")
        await svc.create_session(app_name=APP, user_id="bob", session_id="b1")
        await svc.create_session(app_name="other", user_id="ann", session_id="o1")
        delta = {"k": 2, "app:promo": "spring", "user:cart": ["A-1"], "temp:scratch": "x"}
        await svc.append_event(a1, said("hello", state_delta=delta))
        assert a1.state["temp:scratch"] == "x"  # the in-memory session sees temp state
        seen.append(a1.state)
        for app, user, sid in (
            (APP, "ann", "a1"),
            (APP, "ann", "a2"),
            (APP, "bob", "b1"),
            ("other", "ann", "o1"),
        ):
            got = await svc.get_session(app_name=app, user_id=user, session_id=sid)
            assert got is not None
            seen.append(got.state)
        seen.append(await svc.get_user_state(app_name=APP, user_id="ann"))
        seen.append({s.id: s.state for s in (await svc.list_sessions(app_name=APP)).sessions})
        states.append(seen)
    assert states[0] == states[1]
    assert states[0][1] == {"k": 2, "app:promo": "spring", "user:lang": "fr", "user:cart": ["A-1"]}
    assert states[0][3] == {"app:promo": "spring"}  # bob: app state, not ann's user state
    assert states[0][4] == {}  # another app shares nothing
    # temp state is never stored: not in the event either
    a1 = await ours.get_session(app_name=APP, user_id="ann", session_id="a1")
    assert a1 is not None and "temp:scratch" not in a1.events[0].actions.state_delta


async def test_get_session_config_filters_like_adks_own_service(
    service: ServiceSessionService,
) -> None:
    results: list[list[list[float]]] = []
    for svc in (service, InMemorySessionService()):
        session = await svc.create_session(app_name=APP, user_id="ann", session_id="s")
        for i in range(1, 8):
            await svc.append_event(session, said(f"turn {i}", timestamp=float(i)))
        got: list[list[float]] = []
        for config in (
            None,
            GetSessionConfig(num_recent_events=3),
            GetSessionConfig(num_recent_events=0),
            GetSessionConfig(after_timestamp=4.0),
            GetSessionConfig(after_timestamp=70.0),
            GetSessionConfig(num_recent_events=5, after_timestamp=5.0),
            GetSessionConfig(num_recent_events=100),
        ):
            read = await svc.get_session(app_name=APP, user_id="ann", session_id="s", config=config)
            assert read is not None and read.last_update_time == 7.0
            got.append([e.timestamp for e in read.events])
        results.append(got)
    assert results[0] == results[1]
    assert results[0][1] == [5.0, 6.0, 7.0] and results[0][3] == [4.0, 5.0, 6.0, 7.0]


async def test_list_sessions_oldest_update_first_without_events(
    service: ServiceSessionService, client: AsyncSessionMemoryClient, namespace: str
) -> None:
    first = await service.create_session(app_name=APP, user_id="ann", session_id="first")
    await service.create_session(app_name=APP, user_id="bob", session_id="second")
    await service.create_session(
        app_name=APP, user_id="ann", session_id="third", state={"app:x": 1, "user:y": 2}
    )
    await service.append_event(first, said("later"))  # now the most recently active
    everyone = (await service.list_sessions(app_name=APP)).sessions
    assert [s.id for s in everyone] == ["second", "third", "first"]
    assert all(s.events == [] for s in everyone)
    assert everyone[0].state == {"app:x": 1} and everyone[2].state == {"app:x": 1, "user:y": 2}
    ann = (await service.list_sessions(app_name=APP, user_id="ann")).sessions
    assert [s.id for s in ann] == ["third", "first"]
    assert (await service.list_sessions(app_name=APP, user_id="nobody")).sessions == []
    # the state sessions are there, under the app's prefix, but never listed as ADK sessions
    ids = [s["id"] for s in (await client.list_sessions(prefix=f"{namespace}:"))["items"]]
    assert f"{namespace}:{APP}:~app" in ids and f"{namespace}:{APP}:ann:~user" in ids


async def test_ids_are_escaped_so_that_no_two_sessions_collide(
    service: ServiceSessionService, client: AsyncSessionMemoryClient, namespace: str
) -> None:
    parts = [
        ("a:b", "c", "d"),
        ("a", "b:c", "d"),
        ("a", "b", "c:d"),
        ("a/b", "~app", "%3A"),
        ("a", "~user", "x"),
        ("a", "u", "~user"),
        ("ünï", "u\u200bz", "tab\there"),
    ]
    for app, user, sid in parts:
        await service.create_session(
            app_name=app, user_id=user, session_id=sid, state={"me": [app, user, sid]}
        )
    for app, user, sid in parts:
        got = await service.get_session(app_name=app, user_id=user, session_id=sid)
        assert got is not None and got.state["me"] == [app, user, sid]
        assert (got.app_name, got.user_id, got.id) == (app, user, sid)
        await client.get_session(session_key(app, user, sid, namespace=namespace))
    assert session_key("a:b", "c", "d") == "adk:a%3Ab:c:d"
    assert escape("~%/:") == "%7E%25%2F%3A" and escape("ünï") == "ünï"
    listed = (await service.list_sessions(app_name="a")).sessions
    assert sorted((s.user_id, s.id) for s in listed) == [
        ("b", "c:d"),
        ("b:c", "d"),
        ("u", "~user"),
        ("~user", "x"),
    ]


async def test_appending_to_a_missing_session_raises(service: ServiceSessionService) -> None:
    session = await service.create_session(app_name=APP, user_id="ann")
    await service.delete_session(app_name=APP, user_id="ann", session_id=session.id)
    with pytest.raises(SessionNotFoundError):
        await service.append_event(session, said("anyone?"))
    # a partial (streaming) event is never stored
    live = await service.create_session(app_name=APP, user_id="ann")
    partial = said("typ")
    partial.partial = True
    assert await service.append_event(live, partial) is partial
    got = await service.get_session(app_name=APP, user_id="ann", session_id=live.id)
    assert got is not None and got.events == [] and live.events == []


async def test_racing_appends_lose_no_delta(
    client: AsyncSessionMemoryClient, namespace: str
) -> None:
    """Two processes' services append to one session, and to the shared app and user state,
    at once: every delta lands, and each service's next read sees all of them."""
    one = ServiceSessionService(client, namespace=namespace)
    two = ServiceSessionService(client, namespace=namespace)
    await one.create_session(app_name=APP, user_id="ann", session_id="s")
    holders = [
        await svc.get_session(app_name=APP, user_id="ann", session_id="s") for svc in (one, two)
    ]

    async def writer(svc: ServiceSessionService, session: Session | None, n: int) -> None:
        assert session is not None
        for i in range(6):
            delta = {f"k{n}_{i}": i, f"app:a{n}_{i}": i, f"user:u{n}_{i}": i, "last": n}
            await svc.append_event(session, said(f"{n}/{i}", state_delta=delta))

    await asyncio.gather(writer(one, holders[0], 0), writer(two, holders[1], 1))
    want = {f"{p}{n}_{i}": i for p in ("k", "app:a", "user:u") for n in (0, 1) for i in range(6)}
    for svc in (one, two, ServiceSessionService(client, namespace=namespace)):
        got = await svc.get_session(app_name=APP, user_id="ann", session_id="s")
        assert got is not None and len(got.events) == 12
        assert {k: v for k, v in got.state.items() if k != "last"} == want
        # the newest event's delta wins
        assert got.state["last"] == got.events[-1].actions.state_delta["last"]
    listed = (await one.list_sessions(app_name=APP, user_id="ann")).sessions
    assert {k: v for k, v in listed[0].state.items() if k != "last"} == want


class ScriptedModel(BaseLlm):
    """A model that answers from a script: a tool call, then text, turn after turn."""

    model: str = "scripted"
    script: list[types.Content] = []
    requests: list[LlmRequest] = []

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        self.requests.append(llm_request)
        yield LlmResponse(content=self.script.pop(0))


def price(sku: str) -> dict[str, Any]:
    """The price of an item."""
    return {"sku": sku, "eur": 12.5}


async def test_a_runner_keeps_its_conversation_and_state_in_the_service(
    client: AsyncSessionMemoryClient, namespace: str
) -> None:
    def model_says(text: str) -> types.Content:
        return types.Content(role="model", parts=[types.Part(text=text)])

    model = ScriptedModel(
        script=[
            types.Content(
                role="model",
                parts=[
                    types.Part(
                        function_call=types.FunctionCall(id="c1", name="price", args={"sku": "A-1"})
                    )
                ],
            ),
            model_says("A-1 costs 12.50 EUR."),
            model_says("You asked about A-1."),
        ],
        requests=[],
    )
    agent = LlmAgent(name="clerk", model=model, tools=[price], output_key="last_answer")
    service = ServiceSessionService(client, namespace=namespace)
    runner = Runner(agent=agent, app_name=APP, session_service=service)
    await service.create_session(app_name=APP, user_id="ann", session_id="chat")

    async def ask(text: str) -> list[Event]:
        message = types.Content(role="user", parts=[types.Part(text=text)])
        return [
            event
            async for event in runner.run_async(
                user_id="ann", session_id="chat", new_message=message
            )
        ]

    await ask("How much is A-1?")
    await ask("What did I ask?")
    # the model's second-turn request carried the first turn, read back from the service
    history = [c.parts[0] for c in model.requests[-1].contents]
    assert history[0].text == "How much is A-1?"
    assert history[1].function_call is not None and history[1].function_call.name == "price"
    assert history[2].function_response is not None
    assert history[2].function_response.response == {"sku": "A-1", "eur": 12.5}
    assert history[3].text == "A-1 costs 12.50 EUR." and history[4].text == "What did I ask?"
    # a fresh service (another replica) reads the same conversation and state
    stored = await ServiceSessionService(client, namespace=namespace).get_session(
        app_name=APP, user_id="ann", session_id="chat"
    )
    assert stored is not None
    assert [e.author for e in stored.events] == ["user", "clerk", "clerk", "clerk", "user", "clerk"]
    assert stored.state["last_answer"] == "You asked about A-1."
    # and the service itself can search it
    hits = await client.search(
        "costs", session_id=session_key(APP, "ann", "chat", namespace=namespace)
    )
    assert hits["items"] and "12.50" in str(hits["items"][0])


def test_it_is_a_base_session_service() -> None:
    assert issubclass(ServiceSessionService, BaseSessionService)
    with pytest.raises(ValueError):
        ServiceSessionService(AsyncSessionMemoryClient(), namespace="a:b")
