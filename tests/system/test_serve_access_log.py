"""``session-memory serve`` writes its access lines itself (app.logs.AccessLineWriter) when its
lines are JSON: a real server's output carries one line per request, in the documented
fields, at the server's LOG_LEVEL; with text lines they still go through logging."""

from __future__ import annotations

import httpx
import orjson

from tests.support.services import ServerProcess


def _serve(tmp_path: object, name: str, **env: str) -> list[bytes]:
    log = tmp_path / f"{name}.log"  # type: ignore[operator]
    server = ServerProcess(
        env={"DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path}/{name}.db", "REDIS_URL": "", **env},
        log_path=log,
    )
    server.start()
    try:
        with httpx.Client(base_url=server.url, timeout=30) as client:
            created = client.post(
                "/v1/sessions", json={"id": "logged"}, headers={"X-Request-ID": "r-1"}
            )
            assert created.status_code == 201
            appended = client.post(
                "/v1/sessions/logged/items",
                json={"items": [{"type": "message", "role": "user", "content": "hi"}]},
                headers={"X-Request-ID": "r-2"},
            )
            assert appended.status_code == 201
            assert client.get("/healthz").status_code == 200
    finally:
        server.stop()
    return log.read_bytes().splitlines()


def test_json_access_lines_of_a_real_server(tmp_path: object) -> None:
    lines = [orjson.loads(line) for line in _serve(tmp_path, "json", LOG_LEVEL="info")]
    access = [line for line in lines if line.get("logger") == "app.access"]
    assert [(a["method"], a["path"], a["status"]) for a in access] == [
        ("POST", "/v1/sessions", 201),
        ("POST", "/v1/sessions/logged/items", 201),
    ]  # the probe is logged at DEBUG, below the server's level
    first = access[0]
    assert list(first) == [
        "time", "level", "logger", "message", "request_id", "method", "path", "status",
        "duration_ms",
    ]  # fmt: skip
    assert first["level"] == "INFO" and first["message"] == "POST /v1/sessions 201"
    assert [a["request_id"] for a in access] == ["r-1", "r-2"]
    assert isinstance(first["duration_ms"], float) and first["duration_ms"] > 0
    assert str(first["time"]).endswith("+00:00")
    assert any(line.get("logger", "").startswith("uvicorn") for line in lines)


def test_debug_level_logs_the_probe_and_warning_logs_no_access_line(tmp_path: object) -> None:
    debug = [orjson.loads(line) for line in _serve(tmp_path, "debug", LOG_LEVEL="debug")]
    probes = [d for d in debug if d.get("logger") == "app.access" and d["path"] == "/healthz"]
    assert probes and {p["level"] for p in probes} == {"DEBUG"}  # (start-up polls it too)
    quiet = [orjson.loads(line) for line in _serve(tmp_path, "quiet", LOG_LEVEL="warning")]
    assert not [q for q in quiet if q.get("logger") == "app.access"]


def test_text_lines_still_go_through_logging(tmp_path: object) -> None:
    lines = _serve(tmp_path, "text", LOG_LEVEL="info", LOG_FORMAT="text")
    access = [line.decode() for line in lines if b" app.access " in line]
    assert len(access) == 2
    assert "POST /v1/sessions 201" in access[0] and "request_id=r-1" in access[0]
