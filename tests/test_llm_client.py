"""The LLM client against a real local HTTP server (tests/support/fake_llm.py) in every mode."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime

import pytest

from app.domain.compaction import (
    build_llm_messages,
    llm_compaction_result,
    parse_llm_summary,
    plan_cut,
)
from app.domain.errors import UpstreamFailed
from app.domain.items import (
    CanonicalItem,
    FunctionCallItem,
    FunctionCallOutputItem,
    MessageItem,
    StoredItem,
)
from app.llm import (
    LLMClient,
    LLMConnectionError,
    LLMMalformedResponse,
    LLMSettings,
    LLMStatusError,
    LLMTimeout,
)
from tests.support.fake_llm import SUMMARY, FakeLLMServer, reply_content

MESSAGES = [{"role": "system", "content": "Summarise."}, {"role": "user", "content": "Hello"}]


@pytest.fixture(scope="module")
def fake_llm() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as server:
        yield server


@pytest.fixture(autouse=True)
def fresh_fake(fake_llm: FakeLLMServer) -> None:
    fake_llm.reset()


def make_settings(fake: FakeLLMServer, **overrides: object) -> LLMSettings:
    options: dict[str, object] = {
        "base_url": fake.base_url,
        "model": "fake-model",
        "api_key": "sk-test",
        "timeout": 2.0,
        "retries": 2,
        "backoff": 0.01,
    }
    options.update(overrides)
    return LLMSettings(**options)  # type: ignore[arg-type]


@pytest.fixture
async def llm(fake_llm: FakeLLMServer) -> AsyncIterator[LLMClient]:
    client = LLMClient(make_settings(fake_llm))
    yield client
    await client.aclose()


async def test_clean_json(llm: LLMClient, fake_llm: FakeLLMServer) -> None:
    content = await llm.complete(MESSAGES)
    assert json.loads(content) == SUMMARY
    [request] = fake_llm.requests()
    assert request["path"] == "/v1/chat/completions"
    assert request["headers"]["authorization"] == "Bearer sk-test"
    assert request["body"] == {
        "model": "fake-model",
        "messages": MESSAGES,
        "temperature": 0.0,
        "response_format": {"type": "json_object"},
    }


@pytest.mark.parametrize("mode", ["fenced", "string_lists", "prose", "broken"])
async def test_messy_answers_come_back_verbatim_and_parse(
    llm: LLMClient, fake_llm: FakeLLMServer, mode: str
) -> None:
    fake_llm.configure(mode)
    content = await llm.complete(MESSAGES)
    assert content == reply_content(mode)
    parsed = parse_llm_summary(content)
    assert parsed.structured == (mode in ("fenced", "string_lists"))


async def test_json_mode_is_a_flag(fake_llm: FakeLLMServer) -> None:
    fake_llm.configure("reject_response_format")
    async with LLMClient(make_settings(fake_llm)) as client:
        with pytest.raises(LLMStatusError) as info:
            await client.complete(MESSAGES)
        assert info.value.status == 400 and info.value.attempts == 1  # 4xx is not retried
        assert "HTTP 400" in str(info.value) and "response_format" in str(info.value)
        assert json.loads(await client.complete(MESSAGES, json_mode=False)) == SUMMARY
    async with LLMClient(make_settings(fake_llm, json_mode=False)) as client:
        assert json.loads(await client.complete(MESSAGES)) == SUMMARY
    bodies = [r["body"] for r in fake_llm.requests()]
    assert ["response_format" in b for b in bodies] == [True, False, False]


async def test_http_500_is_retried_then_named(llm: LLMClient, fake_llm: FakeLLMServer) -> None:
    fake_llm.configure("error", status=500)
    with pytest.raises(LLMStatusError) as info:
        await llm.complete(MESSAGES)
    error = info.value
    assert isinstance(error, UpstreamFailed)
    assert error.status == 500 and error.attempts == 3 and error.cause == "http_status"
    assert "HTTP 500" in str(error) and "fake upstream error 500" in str(error)
    assert len(fake_llm.requests()) == 3


async def test_transient_errors_then_success(llm: LLMClient, fake_llm: FakeLLMServer) -> None:
    fake_llm.script({"mode": "error", "status": 503}, {"mode": "error", "status": 429})
    assert json.loads(await llm.complete(MESSAGES)) == SUMMARY
    assert len(fake_llm.requests()) == 3


async def test_client_errors_are_not_retried(llm: LLMClient, fake_llm: FakeLLMServer) -> None:
    fake_llm.configure("error", status=401)
    with pytest.raises(LLMStatusError, match="HTTP 401"):
        await llm.complete(MESSAGES)
    assert len(fake_llm.requests()) == 1


async def test_hang_past_the_timeout(fake_llm: FakeLLMServer) -> None:
    fake_llm.configure("hang", hang_seconds=10)
    async with LLMClient(make_settings(fake_llm, timeout=0.5, retries=1)) as client:
        started = time.monotonic()
        with pytest.raises(LLMTimeout) as info:
            await client.complete(MESSAGES)
        elapsed = time.monotonic() - started
    assert "timeout" in str(info.value) and "0.5 s" in str(info.value)
    assert info.value.attempts == 2 and info.value.cause == "timeout"
    assert 1.0 <= elapsed < 3.0
    assert len(fake_llm.requests()) == 2


async def test_slow_but_in_time(fake_llm: FakeLLMServer) -> None:
    fake_llm.configure("json", delay=2.0)
    async with LLMClient(make_settings(fake_llm, timeout=5.0)) as client:
        started = time.monotonic()
        assert json.loads(await client.complete(MESSAGES)) == SUMMARY
    assert time.monotonic() - started >= 2.0


async def test_connection_refused() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    settings = LLMSettings(
        base_url=f"http://127.0.0.1:{port}/v1", model="m", retries=1, backoff=0.01
    )
    async with LLMClient(settings) as client:
        with pytest.raises(LLMConnectionError) as info:
            await client.complete(MESSAGES)
    assert "connection refused" in str(info.value) and info.value.attempts == 2


async def test_malformed_response(llm: LLMClient, fake_llm: FakeLLMServer) -> None:
    fake_llm.configure("malformed")
    with pytest.raises(LLMMalformedResponse, match="no choices"):
        await llm.complete(MESSAGES)
    assert len(fake_llm.requests()) == 1


def test_api_key_stays_out_of_repr(fake_llm: FakeLLMServer) -> None:
    assert "sk-test" not in repr(make_settings(fake_llm))


def _stored(bodies: list[CanonicalItem], first_seq: int) -> list[StoredItem]:
    return [
        StoredItem(
            body=body,
            id=f"i{first_seq + n}",
            seq=first_seq + n,
            tokens=10,
            chars=10,
            pinned=False,
            metadata={},
            created_at=datetime(2025, 1, 1, tzinfo=UTC),
        )
        for n, body in enumerate(bodies)
    ]


async def test_two_llm_compactions_the_second_request_carries_the_first_summary(
    llm: LLMClient, fake_llm: FakeLLMServer
) -> None:
    memory = _stored(
        [
            MessageItem(role="user", content="Fix utils/dates.py"),
            FunctionCallItem(call_id="c1", name="read_file", arguments='{"path": "dates.py"}'),
            FunctionCallOutputItem(call_id="c1", output="..."),
            MessageItem(role="user", content="Then the docs."),
        ],
        first_seq=1,
    )
    fake_llm.configure("fenced")
    plan = plan_cut(memory)
    text = await llm.complete(build_llm_messages(plan, previous_summary=None))
    first = llm_compaction_result(
        plan, parse_llm_summary(text), previous=None, previous_summary=None, model="fake-model"
    )
    assert first.summary is not None and first.goal == SUMMARY["goal"]

    memory = [*memory[3:], *_stored(
        [MessageItem(role="assistant", content="Docs done."),
         MessageItem(role="user", content="Release.")],
        first_seq=5,
    )]  # fmt: skip
    plan = plan_cut(memory)
    fake_llm.configure("prose")
    text = await llm.complete(
        build_llm_messages(plan, previous_summary=first.summary, instructions="Be brief.")
    )
    second = llm_compaction_result(
        plan, parse_llm_summary(text), previous=first, previous_summary=first.summary
    )
    first_request, second_request = fake_llm.requests()
    assert "Previous summary: none" in first_request["body"]["messages"][1]["content"]
    prompt = second_request["body"]["messages"][1]["content"]
    assert f"Previous summary:\n\n{first.summary}" in prompt
    assert "Be brief." in prompt
    assert second.summary == reply_content("prose")
    assert second.read_files == ["dates.py"] and second.goal == first.goal
