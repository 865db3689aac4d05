"""JSON logs: one object per line, each request's lines carrying its request id."""

from __future__ import annotations

import io
import logging
import sys
from collections.abc import Iterator

import httpx
import orjson
import pytest

from app.logs import REQUEST_ID, JsonFormatter, TextFormatter


@pytest.fixture
def access_lines() -> Iterator[io.StringIO]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("app.access")
    old_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    yield stream
    logger.removeHandler(handler)
    logger.setLevel(old_level)


def lines(stream: io.StringIO) -> list[dict[str, object]]:
    return [orjson.loads(line) for line in stream.getvalue().splitlines()]


async def test_access_line_per_request(
    client: httpx.AsyncClient, sid: str, access_lines: io.StringIO
) -> None:
    r = await client.post("/v1/sessions", json={"id": sid}, headers={"X-Request-ID": "abc.123"})
    assert r.status_code == 201 and r.headers["x-request-id"] == "abc.123"
    bad = await client.get(f"/v1/sessions/{sid}", headers={"X-Request-ID": "no spaces allowed"})
    generated = bad.headers["x-request-id"]
    assert generated != "no spaces allowed" and len(generated) == 32
    await client.get("/healthz")

    created, read, health = lines(access_lines)
    assert created["logger"] == "app.access" and created["level"] == "INFO"
    assert created["request_id"] == "abc.123"
    assert (created["method"], created["path"], created["status"]) == ("POST", "/v1/sessions", 201)
    assert isinstance(created["duration_ms"], float) and created["duration_ms"] > 0
    assert str(created["time"]).endswith("+00:00")
    assert read["request_id"] == generated and read["status"] == 200
    assert health["level"] == "DEBUG"  # probes do not drown the log


def test_formatters_take_the_request_id_from_the_context() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        record = logging.getLogger("app.test").makeRecord(
            "app.test", logging.ERROR, __file__, 1, "failed %s", ("x",), sys.exc_info()
        )
    outside = orjson.loads(JsonFormatter().format(record))
    token = REQUEST_ID.set("req-9")
    try:
        inside = orjson.loads(JsonFormatter().format(record))
        text = TextFormatter().format(record)
    finally:
        REQUEST_ID.reset(token)
    assert "request_id" not in outside and inside["request_id"] == "req-9"
    assert inside["message"] == "failed x" and inside["level"] == "ERROR"
    assert "ValueError: boom" in inside["exc_info"]
    assert text.splitlines()[0].endswith("failed x request_id=req-9")
    assert "ValueError: boom" in text
