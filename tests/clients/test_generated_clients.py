"""Clients generated from the committed openapi/openapi.json drive a live server through one
agent loop: create a session, append a user message, append an assistant tool call and its
output (openai-chat), read the context, compact (structured), snapshot, restore.

- Python: openapi-python-client (from the dev extras), generated into a temporary directory
  and imported.
- TypeScript: openapi-typescript types + openapi-fetch (clients/typescript/examples/openapi-fetch,
  with the npm packages of clients/typescript: TypeScript 5 pinned in its package-lock.json),
  type-checked with `tsc --noEmit`, compiled and run on Node.

The session id holds a space and an `@` (as real apps' ids do): each generated client must
percent-encode it in the path, and the server must hand back the same id.
"""

from __future__ import annotations

import enum
import importlib
import inspect
import json
import os
import shutil
import subprocess
import sys
import typing
import uuid
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from session_memory_client import SessionMemoryClient

from tests.clients.conftest import API_KEY
from tests.conftest import ROOT
from tests.support.services import ServerProcess

SPEC = ROOT / "openapi" / "openapi.json"
TS_PACKAGE = ROOT / "clients" / "typescript"
TS_PROJECT = TS_PACKAGE / "examples" / "openapi-fetch"


def run(cmd: list[str], cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{' '.join(cmd)} failed:\n{done.stdout}\n{done.stderr}"
    return done


# --- Python ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    """The package openapi-python-client generates from the committed spec, imported."""
    where = tmp_path_factory.mktemp("python-client")
    config = where / "config.yml"
    config.write_text("post_hooks: []\n")
    name = f"sm_generated_{uuid.uuid4().hex[:8]}"
    generator = Path(sys.executable).parent / "openapi-python-client"
    done = run(
        [
            str(generator),
            "generate",
            "--path",
            str(SPEC),
            "--meta",
            "none",
            "--output-path",
            str(where / name),
            "--config",
            str(config),
        ],
        cwd=where,
    )
    # a schema the generator cannot read is dropped with a warning: the spec must have none
    assert "Unable to" not in done.stdout + done.stderr, done.stdout + done.stderr
    sys.path.insert(0, str(where))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(where))


def endpoint(package: ModuleType, tag: str, operation: str) -> ModuleType:
    return importlib.import_module(f"{package.__name__}.api.{tag}.{operation}")


def body_for(module: ModuleType, data: dict[str, Any]) -> Any:
    """The generated request model for ``data`` (the first member of a union that takes it)."""
    annotation = inspect.signature(module.sync_detailed).parameters["body"].annotation
    for candidate in typing.get_args(annotation) or (annotation,):
        if not hasattr(candidate, "from_dict"):
            continue
        try:
            model = candidate.from_dict(data)
        except (KeyError, TypeError, ValueError):
            continue
        if set(data) <= set(model.to_dict()):
            return model
    raise AssertionError(f"no generated model of {module.__name__} takes {data}")


def enum_for(module: ModuleType, param: str, value: str) -> Any:
    """``value`` as the enum the generated function takes for ``param``."""
    annotation = inspect.signature(module.sync_detailed).parameters[param].annotation
    for candidate in typing.get_args(annotation) or (annotation,):
        if isinstance(candidate, type) and issubclass(candidate, enum.Enum):
            return candidate(value)
    return value


def call(
    package: ModuleType, client: Any, tag: str, operation: str, status: int, **kwargs: Any
) -> dict[str, Any]:
    module = endpoint(package, tag, operation)
    if "body" in kwargs:
        kwargs["body"] = body_for(module, kwargs["body"])
    response = module.sync_detailed(client=client, **kwargs)
    assert response.status_code == status, (operation, response.status_code, response.content)
    assert response.parsed is not None, operation
    return response.parsed.to_dict()


def test_python_generated_client_runs_the_agent_loop(
    generated: ModuleType, live_server: ServerProcess
) -> None:
    tag = uuid.uuid4().hex[:8]
    sid = f"gen py {tag}@example.com"
    client = generated.AuthenticatedClient(base_url=live_server.url, token=API_KEY)
    with client:
        created = call(
            generated,
            client,
            "sessions",
            "create_session",
            201,
            body={"id": sid, "metadata": {"agent": "generated-python"}},
            idempotency_key=f"{tag}-create",
        )
        assert created["id"] == sid and created["version"] == 1
        read = call(generated, client, "sessions", "get_session", 200, session_id=sid)
        assert read["id"] == sid

        call(
            generated,
            client,
            "items",
            "append_items",
            201,
            session_id=sid,
            body={
                "format": "openai-chat",
                "items": [{"role": "user", "content": "What is the weather in Paris?"}],
            },
        )
        tool_turn = call(
            generated,
            client,
            "items",
            "append_items",
            201,
            session_id=sid,
            idempotency_key=f"{tag}-turn-1",
            body={
                "format": "openai-chat",
                "items": [
                    {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": "call_1",
                                "type": "function",
                                "function": {
                                    "name": "get_weather",
                                    "arguments": '{"city": "Paris"}',
                                },
                            }
                        ],
                    },
                    {"role": "tool", "tool_call_id": "call_1", "content": "sunny, 21C"},
                ],
            },
        )
        assert [i["type"] for i in tool_turn["items"]] == ["function_call", "function_call_output"]
        call(
            generated,
            client,
            "items",
            "append_items",
            201,
            session_id=sid,
            body={
                "format": "openai-chat",
                "items": [
                    {"role": "assistant", "content": "It is sunny in Paris, 21C."},
                    {"role": "user", "content": "And tomorrow?"},
                ],
            },
        )

        context = call(
            generated,
            client,
            "context",
            "post_context",
            200,
            session_id=sid,
            body={"format": "openai-chat", "max_tokens": 4000},
        )
        roles = [m["role"] for m in context["messages"]]
        assert roles == ["user", "assistant", "tool", "assistant", "user"]
        assert context["messages"][1]["tool_calls"][0]["function"]["name"] == "get_weather"

        compacted = call(
            generated,
            client,
            "compaction",
            "compact_session",
            200,
            session_id=sid,
            body={"policy": "structured", "keep_last_items": 1},
        )
        assert compacted["compacted_items"] == 4 and "get_weather" in compacted["summary"]

        snapshot = call(
            generated,
            client,
            "snapshots",
            "create_snapshot",
            201,
            session_id=sid,
            body={"label": "after compaction"},
        )
        assert snapshot["item_count"] == 1
        call(
            generated,
            client,
            "items",
            "append_items",
            201,
            session_id=sid,
            body={"items": [{"type": "message", "role": "user", "content": "stray"}]},
        )
        restored = call(
            generated,
            client,
            "snapshots",
            "restore_session",
            200,
            session_id=sid,
            body={"snapshot_id": snapshot["id"]},
        )
        assert restored["restored_items"] == 1 and restored["session"]["item_count"] == 1

        # errors come back as the declared Problem model
        missing = endpoint(generated, "sessions", "get_session").sync_detailed(
            session_id=sid + "-missing", client=client
        )
        assert missing.status_code == 404
        assert type(missing.parsed).__name__ == "Problem"
        assert missing.parsed.type_.endswith("/session-not-found")

    after = call(
        generated,
        generated.AuthenticatedClient(base_url=live_server.url, token=API_KEY),
        "context",
        "get_context",
        200,
        session_id=sid,
        format_=enum_for(endpoint(generated, "context", "get_context"), "format_", "openai-chat"),
    )
    assert [m["role"] for m in after["messages"]] == ["system", "user"]


# --- TypeScript -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ts_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """clients/typescript/examples/openapi-fetch with its types generated from the committed
    spec, type-checked and compiled."""
    node, npm = shutil.which("node"), shutil.which("npm")
    assert node and npm, "Node.js 20 and npm are needed for the TypeScript client test"
    if not (TS_PACKAGE / "node_modules" / ".bin" / "tsc").exists():
        run([npm, "ci", "--no-audit", "--no-fund"], cwd=TS_PACKAGE, timeout=300)
    where = tmp_path_factory.mktemp("typescript-client")
    for name in ("package.json", "tsconfig.json"):
        shutil.copy(TS_PROJECT / name, where / name)
    shutil.copytree(TS_PROJECT / "src", where / "src")
    os.symlink(TS_PACKAGE / "node_modules", where / "node_modules")
    bin_dir = where / "node_modules" / ".bin"
    run(
        [
            str(bin_dir / "openapi-typescript"),
            str(SPEC),
            "--default-non-nullable",
            "false",
            "-o",
            "generated/schema.d.ts",
        ],
        cwd=where,
    )
    version = run([str(bin_dir / "tsc"), "--version"], cwd=where).stdout
    assert version.startswith("Version 5."), version
    run([str(bin_dir / "tsc"), "--noEmit", "-p", "."], cwd=where)
    run([str(bin_dir / "tsc"), "-p", "."], cwd=where)
    return where


def test_typescript_client_type_checks_and_runs_the_agent_loop(
    ts_build: Path, live_server: ServerProcess
) -> None:
    sid = f"gen ts {uuid.uuid4().hex[:8]}@example.com"
    done = run(["node", "build/src/agent_loop.js", live_server.url, API_KEY, sid], cwd=ts_build)
    seen = json.loads(done.stdout)
    assert seen["created_version"] == 1
    assert seen["created_id"] == sid and seen["read_id"] == sid
    assert seen["tool_turn_types"] == ["function_call", "function_call_output"]
    assert [m["role"] for m in seen["context_messages"]] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
    ]
    assert seen["context_messages"][1]["tool_calls"][0]["id"] == "call_1"
    assert seen["compacted_items"] == 4 and "get_weather" in seen["summary"]
    assert seen["snapshot_items"] == 1 and seen["restored_items"] == 1
    assert seen["restored_session_items"] == 1
    assert seen["missing_status"] == 404 and seen["missing_type"].endswith("/session-not-found")
    assert [m["role"] for m in seen["final_messages"]] == ["system", "user"]

    # the server agrees: the restore is the last event, the "oops" item was undone
    with SessionMemoryClient(live_server.url, api_key=API_KEY) as sm:
        events = [e["type"] for e in sm.list_events(sid)["items"]]
        assert events[-2:] == ["appended", "restored"]
        assert [i["content"] for i in sm.list_items(sid)["items"]] == ["And tomorrow?"]
