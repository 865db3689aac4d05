"""Redis is only a lock: when it is down, writes answer 503 and reads keep working; when it
comes back, writes recover without restarting the server."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import httpx
import pytest

from tests.support.services import RedisProcess, ServerProcess


@pytest.fixture
def private_redis() -> Iterator[RedisProcess]:
    redis = RedisProcess()
    redis.start()
    yield redis
    redis.stop()


def test_writes_fail_cleanly_and_recover(
    pg_database: str, private_redis: RedisProcess, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    server = ServerProcess(
        env={
            "DATABASE_URL": pg_database,
            "REDIS_URL": private_redis.url,
            "AUTO_MIGRATE": "false",
            "LOCK__REDIS_TIMEOUT_SECONDS": "0.5",
        },
        log_path=tmp_path / "server.log",
    )
    server.start()
    sid = f"outage-{uuid.uuid4().hex[:8]}"
    item = {"items": [{"type": "message", "role": "user", "content": "hello"}]}
    try:
        with httpx.Client(base_url=server.url, timeout=30) as client:
            assert client.post("/v1/sessions", json={"id": sid}).status_code == 201
            assert client.post(f"/v1/sessions/{sid}/items", json=item).status_code == 201

            private_redis.stop()
            started = time.monotonic()
            r = client.post(f"/v1/sessions/{sid}/items", json=item)
            assert r.status_code == 503, r.text
            assert r.headers["content-type"].startswith("application/problem+json")
            assert r.json()["type"].endswith("/lock-backend-unavailable")
            assert int(r.headers["retry-after"]) >= 1
            assert time.monotonic() - started < 5, "an outage must fail fast, not hang"
            # reads keep working
            assert client.get(f"/v1/sessions/{sid}").json()["item_count"] == 1
            assert len(client.get(f"/v1/sessions/{sid}/items").json()["items"]) == 1
            ready = client.get("/readyz")
            assert ready.status_code == 503 and ready.json()["locks"] == "unavailable"

            private_redis.start()  # same port, no server restart
            deadline = time.monotonic() + 15
            while True:
                r = client.post(f"/v1/sessions/{sid}/items", json=item)
                if r.status_code == 201 or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            assert r.status_code == 201, r.text
            assert r.json()["items"][0]["seq"] == 2
            assert client.get("/readyz").status_code == 200
    finally:
        server.stop()
