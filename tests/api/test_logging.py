"""JSON logs: one object per line, each request's lines carrying its request id."""

from __future__ import annotations

import io
import logging
import os
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


def test_the_servers_own_access_line_is_the_formatters_line() -> None:
    """``AccessLineWriter`` (``serve`` with JSON lines) writes what ``JsonFormatter`` makes of
    the same ``app.access`` record: the same fields, in the same order, only the time apart."""
    from app.logs import AccessLineWriter

    fields = {"method": "POST", "path": "/v1/sessions/s/items", "status": 201, "duration_ms": 1.5}
    record = logging.getLogger("app.access").makeRecord(
        "app.access", logging.INFO, __file__, 1, "%s %s %d", ("POST", fields["path"], 201), None,
        extra=fields,
    )  # fmt: skip
    read_end, write_end = os.pipe()
    writer = AccessLineWriter("info", fd=write_end)
    token = REQUEST_ID.set("req-7")
    try:
        expected = orjson.loads(JsonFormatter().format(record))
        assert writer.write(logging.INFO, f"POST {fields['path']} 201", fields)
    finally:
        REQUEST_ID.reset(token)
        os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        [line] = pipe.read().splitlines()
    written = orjson.loads(line)
    assert list(written) == list(expected)
    assert {k: v for k, v in written.items() if k != "time"} == {
        k: v for k, v in expected.items() if k != "time"
    }
    assert str(written["time"]).endswith("+00:00")
    assert writer.enabled(logging.INFO) and not writer.enabled(logging.DEBUG)
    assert AccessLineWriter("debug").enabled(logging.DEBUG)
    assert not AccessLineWriter("warning").enabled(logging.INFO)


def test_a_line_the_writer_cannot_write_is_reported_not_raised() -> None:
    from app.logs import AccessLineWriter

    read_end, write_end = os.pipe()
    os.close(read_end)
    os.close(write_end)  # a closed descriptor: EBADF
    assert AccessLineWriter("info", fd=write_end).write(logging.INFO, "GET / 200", {}) is False


@pytest.mark.parametrize(
    ("via_cli", "log_format", "writes_itself"),
    [("true", "json", True), ("true", "text", False), ("false", "json", False)],
)
def test_only_the_server_serve_configured_writes_its_own_access_lines(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: object,
    via_cli: str,
    log_format: str,
    writes_itself: bool,
) -> None:
    """The app uvicorn builds for ``session-memory serve`` (whose logging configuration is
    ``log_config``) with JSON lines; any other app logs through ``app.access``."""
    from app.api.observability import EdgeMiddleware
    from app.logs import AccessLineWriter
    from app.main import create_app
    from app.settings import get_settings

    monkeypatch.setenv("DATABASE_URL", f"sqlite+aiosqlite:///{tmp_path}/log.db")
    monkeypatch.setenv("REDIS_URL", "")
    monkeypatch.setenv("AUTH__MODE", "off")
    monkeypatch.setenv("SERVE__VIA_CLI", via_cli)
    monkeypatch.setenv("LOG_FORMAT", log_format)
    get_settings.cache_clear()
    try:
        app = create_app()  # as uvicorn calls the factory
    finally:
        get_settings.cache_clear()
    [edge] = [m for m in app.user_middleware if m.cls is EdgeMiddleware]
    assert isinstance(edge.kwargs["access_writer"], AccessLineWriter) is writes_itself
