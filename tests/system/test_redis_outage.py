"""Redis only single-flights LLM compactions (DESIGN §6): while it is down, every write and read
keeps working, fast, and ``/readyz`` keeps the replica in rotation (200, ``"locks":
"unavailable"``); an LLM compaction runs without the cross-replica guard (logged); when Redis
comes back, ``/readyz`` says so without restarting the server."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.fake_llm import FakeLLMServer
from tests.support.services import RedisProcess, ServerProcess


@pytest.fixture
def private_redis() -> Iterator[RedisProcess]:
    redis = RedisProcess()
    redis.start()
    yield redis
    redis.stop()


def message(text: str) -> dict[str, object]:
    return {"type": "message", "role": "user", "content": text}


@pytest.fixture
def fake_llm() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as server:
        yield server


def test_writes_and_reads_work_while_redis_is_down(
    pg_database: str, private_redis: RedisProcess, fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    server = ServerProcess(
        env={
            "DATABASE_URL": pg_database,
            "REDIS_URL": private_redis.url,
            "AUTO_MIGRATE": "false",
            "LOCK__REDIS_TIMEOUT_SECONDS": "0.5",
            "LLM__BASE_URL": fake_llm.base_url,
            "LLM__MODEL": "fake-model",
            "LLM__RETRIES": "0",
        },
        log_path=tmp_path / "server.log",
    )
    server.start()
    run = uuid.uuid4().hex[:8]
    sid, other, gone = f"outage-{run}", f"outage-{run}-b", f"outage-{run}-gone"
    llm = f"outage-{run}-llm"
    try:
        with httpx.Client(base_url=server.url, timeout=30) as client:
            assert client.post("/v1/sessions", json={"id": sid}).status_code == 201
            r = client.post(f"/v1/sessions/{sid}/items", json={"items": [message("before")]})
            assert r.status_code == 201, r.text
            ready = client.get("/readyz")
            assert ready.status_code == 200 and ready.json()["locks"] == "ok"

            private_redis.stop()
            ready = client.get("/readyz")
            assert ready.status_code == 200, ready.text  # the replica stays in rotation
            assert ready.json() == {"status": "ok", "database": "ok", "locks": "unavailable"}

            started = time.monotonic()
            # appends: to an existing session (with and without a key, and its replay),
            # creating the session, and as the first write of a new session
            key = {"Idempotency-Key": f"{sid}-during"}
            body = {"items": [message("during 1"), message("during 2")]}
            first = client.post(f"/v1/sessions/{sid}/items", json=body, headers=key)
            assert first.status_code == 201, first.text
            assert [i["seq"] for i in first.json()["items"]] == [2, 3]
            again = client.post(f"/v1/sessions/{sid}/items", json=body, headers=key)
            assert again.status_code == 201 and again.headers["idempotent-replayed"] == "true"
            assert again.json() == first.json()
            r = client.post(f"/v1/sessions/{sid}/items", json={"items": [message("during 3")]})
            assert r.status_code == 201 and r.json()["items"][0]["seq"] == 4, r.text
            r = client.post(
                f"/v1/sessions/{other}/items?create=true", json={"items": [message("new")]}
            )
            assert r.status_code == 201, r.text
            # every other kind of write
            assert client.post("/v1/sessions", json={"id": gone}).status_code == 201
            r = client.patch(f"/v1/sessions/{sid}", json={"metadata": {"during": "outage"}})
            assert r.status_code == 200, r.text
            r = client.post(f"/v1/sessions/{sid}/items/pop")
            assert r.status_code == 200 and r.json()["item"]["content"] == "during 3", r.text
            snap = client.post(f"/v1/sessions/{sid}/snapshots", json={})
            assert snap.status_code == 201, snap.text
            r = client.post(f"/v1/sessions/{sid}/items", json={"items": [message("after snap")]})
            assert r.status_code == 201, r.text
            last_seq = r.json()["items"][0]["seq"]
            r = client.post(
                f"/v1/sessions/{sid}/compact", json={"policy": "structured", "keep_last_items": 1}
            )
            assert r.status_code == 200 and r.json()["compacted_items"] > 0, r.text
            r = client.post(f"/v1/sessions/{sid}/restore", json={"snapshot_id": snap.json()["id"]})
            assert r.status_code == 200, r.text
            r = client.post(f"/v1/sessions/{sid}/fork", json={"new_session_id": f"{sid}-fork"})
            assert r.status_code == 201, r.text
            r = client.delete(f"/v1/sessions/{other}/items")
            assert r.status_code == 200, r.text
            assert client.delete(f"/v1/sessions/{gone}").status_code == 204
            # and none of them hung on the missing lock backend
            assert time.monotonic() - started < 5, "a write waited for the lock backend"

            # an LLM compaction degrades as documented: it runs without the single-flight
            turns = [
                {"type": "message", "role": role, "content": f"{role} {n}"}
                for n in range(3)
                for role in ("user", "assistant")
            ]
            r = client.post(f"/v1/sessions/{llm}/items?create=true", json={"items": turns})
            assert r.status_code == 201, r.text
            r = client.post(
                f"/v1/sessions/{llm}/compact", json={"policy": "llm", "keep_last_items": 2}
            )
            assert r.status_code == 200, r.text
            assert r.json()["policy"] == "llm" and r.json()["compacted_items"] == 4
            assert len(fake_llm.requests()) == 1
            assert client.get(f"/v1/sessions/{llm}").json()["item_count"] == 2

            # reads keep working, and see every write
            session = client.get(f"/v1/sessions/{sid}").json()
            assert session["metadata"] == {"during": "outage"}
            items = client.get(f"/v1/sessions/{sid}/items").json()["items"]
            assert [i["content"] for i in items] == ["before", "during 1", "during 2"]
            forked = client.get(f"/v1/sessions/{sid}-fork/items").json()["items"]
            assert [i["content"] for i in forked] == ["before", "during 1", "during 2"]
            assert client.get(f"/v1/sessions/{other}").json()["item_count"] == 0
            assert client.get(f"/v1/sessions/{gone}").status_code == 404
            context = client.get(f"/v1/sessions/{sid}/context")
            assert context.status_code == 200, context.text

            private_redis.start()  # same port, no server restart
            deadline = time.monotonic() + 15
            while client.get("/readyz").json()["locks"] != "ok":
                assert time.monotonic() < deadline, "the lock backend never came back"
                time.sleep(0.2)
            assert client.get("/readyz").status_code == 200
            r = client.post(f"/v1/sessions/{sid}/items", json={"items": [message("back")]})
            assert r.status_code == 201, r.text
            assert r.json()["items"][0]["seq"] > last_seq  # seqs are never reused
    finally:
        server.stop()
    log = (tmp_path / "server.log").read_text()
    assert "without single-flight" in log  # the degraded compaction is logged
    assert "Traceback" not in log
