"""Request and response examples of the OpenAPI document, by ``operationId``, and examples of
the problem documents errors return. Kept in one place (not spread over the route modules) so
that they read as one walk-through: the session ``agent-42`` of an agent asking about the
weather. ``tests/clients/test_spec_for_generators.py`` validates every example against the
schema it illustrates, and schemathesis sends the request examples to a live server."""

from __future__ import annotations

import copy
from typing import Any

from fastapi import FastAPI

from app.api.problems import PROBLEM_BASE, PROBLEM_MEDIA_TYPE

JSON_MEDIA_TYPE = "application/json"
_T0 = "2026-11-29T12:00:00.000000+00:00"


def _session(version: int, item_count: int, **extra: Any) -> dict[str, Any]:
    return {
        "id": "agent-42",
        "version": version,
        "summary": None,
        "metadata": {"agent": "coder"},
        "config": {"context": {"max_tokens": 8000}},
        "item_count": item_count,
        "token_count": 20 if item_count else 0,
        "char_count": 66 if item_count else 0,
        "last_seq": item_count,
        "created_at": _T0,
        "updated_at": _T0,
        **extra,
    }


def _stored(seq: int, body: dict[str, Any], tokens: int, chars: int) -> dict[str, Any]:
    return {
        **body,
        "id": f"itm_00000000000000000000000{seq}",
        "seq": seq,
        "tokens": tokens,
        "chars": chars,
        "pinned": False,
        "metadata": {},
        "created_at": _T0,
        "format": "canonical",
    }


_USER = {"type": "message", "role": "user", "content": "What is the weather in Paris?"}
_CALL = {
    "type": "function_call",
    "call_id": "call_1",
    "name": "get_weather",
    "arguments": '{"city": "Paris"}',
}
_OUTPUT = {"type": "function_call_output", "call_id": "call_1", "output": "sunny, 21C"}

_CHAT_TURN = [
    {"role": "user", "content": "What is the weather in Paris?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "sunny, 21C"},
]

_REPORT = {
    "source_items": 3,
    "projected_items": 3,
    "dropped_items": 0,
    "source_tokens": 20,
    "projected_tokens": 29,
    "source_chars": 66,
    "projected_chars": 66,
    "limits_applied": [],
    "dropped_ranges": [],
    "notes": [],
    "tokenizer": "o200k_base",
    "stable_prefix": 0,
}

_CONTEXT = {
    "format": "openai-chat",
    "version": 2,
    "messages": [
        {"role": "user", "content": "What is the weather in Paris?"},
        {
            "role": "assistant",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny, 21C"},
    ],
    "report": _REPORT,
}

_SUMMARY = "## Goal\n\nWhat is the weather in Paris?\n\n## Tools called\n\n- get_weather (1 call)"

_SNAPSHOT = {
    "id": "snp_000000000000000000000001",
    "label": "before refactor",
    "version": 3,
    "item_count": 1,
    "created_at": _T0,
}


def _named(**examples: tuple[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        name: {"summary": summary, "value": value} for name, (summary, value) in examples.items()
    }


# operationId -> named request body examples
REQUESTS: dict[str, dict[str, dict[str, Any]]] = {
    "createSession": _named(
        with_id=(
            "A client-chosen id, metadata and a default context budget",
            {
                "id": "agent-42",
                "metadata": {"agent": "coder"},
                "config": {"context": {"max_tokens": 8000}},
            },
        ),
        generated_id=("Let the service choose the id", {}),
    ),
    "updateSession": _named(
        metadata=("Replace the metadata", {"metadata": {"agent": "coder", "stage": 2}}),
        clear_summary=("Clear the summary", {"summary": None}),
    ),
    "appendItems": _named(
        canonical=(
            "A user message, a tool call and its output (canonical)",
            {"format": "canonical", "items": [_USER, _CALL, _OUTPUT]},
        ),
        openai_chat=(
            "The same turn as Chat Completions messages",
            {"format": "openai-chat", "items": _CHAT_TURN},
        ),
        openai_responses=(
            "The same turn as Responses input items",
            {"format": "openai-responses", "items": [_USER, _CALL, _OUTPUT]},
        ),
        openai_responses_provider_items=(
            "Responses items kept exactly: a hosted web search, an output message with its "
            "provider id, phase and citations",
            {
                "format": "openai-responses",
                "items": [
                    {"role": "user", "content": "What is the weather in Paris today?"},
                    {
                        "type": "web_search_call",
                        "id": "ws_1",
                        "status": "completed",
                        "action": {"type": "search", "query": "Paris weather today"},
                    },
                    {
                        "type": "message",
                        "id": "msg_1",
                        "role": "assistant",
                        "status": "completed",
                        "phase": "final_answer",
                        "content": [
                            {
                                "type": "output_text",
                                "text": "Sunny, 21C.",
                                "annotations": [
                                    {
                                        "type": "url_citation",
                                        "url": "https://weather.example/paris",
                                        "title": "Paris weather",
                                        "start_index": 0,
                                        "end_index": 11,
                                    }
                                ],
                            }
                        ],
                    },
                ],
            },
        ),
        anthropic=(
            "The same turn as Anthropic messages, with the system prompt",
            {
                "format": "anthropic",
                "system": "You are terse.",
                "items": [
                    {"role": "user", "content": "What is the weather in Paris?"},
                    {
                        "role": "assistant",
                        "content": [
                            {
                                "type": "tool_use",
                                "id": "toolu_1",
                                "name": "get_weather",
                                "input": {"city": "Paris"},
                            }
                        ],
                    },
                    {
                        "role": "user",
                        "content": [
                            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"}
                        ],
                    },
                ],
            },
        ),
        anthropic_server_tools=(
            "Anthropic blocks kept exactly: cache_control, a server tool's use and result, "
            "citations",
            {
                "format": "anthropic",
                "items": [
                    {
                        "role": "user",
                        "content": [
                            {
                                "type": "text",
                                "text": "What is the weather in Paris?",
                                "cache_control": {"type": "ephemeral"},
                            }
                        ],
                    },
                    {
                        "role": "assistant",
                        "content": [
                            {
                                "type": "server_tool_use",
                                "id": "srvtoolu_1",
                                "name": "web_search",
                                "input": {"query": "Paris weather"},
                            },
                            {
                                "type": "web_search_tool_result",
                                "tool_use_id": "srvtoolu_1",
                                "content": [
                                    {
                                        "type": "web_search_result",
                                        "url": "https://weather.example/paris",
                                        "title": "Paris weather",
                                        "encrypted_content": "EqQBCioIARgBIiQ",
                                    }
                                ],
                            },
                            {
                                "type": "text",
                                "text": "Sunny, 21C.",
                                "citations": [
                                    {
                                        "type": "web_search_result_location",
                                        "url": "https://weather.example/paris",
                                        "title": "Paris weather",
                                        "encrypted_index": "Eo8BCioIAhgB",
                                        "cited_text": "Sunny, 21C",
                                    }
                                ],
                            },
                        ],
                    },
                ],
            },
        ),
    ),
    "postContext": _named(
        budget=(
            "Chat Completions messages within 8,000 tokens; only the 5 newest tool outputs kept",
            {"format": "openai-chat", "max_tokens": 8000, "max_recent_tool_results": 5},
        ),
        lift_default=(
            "Lift the session's default token limit",
            {"format": "openai-responses", "max_tokens": None},
        ),
    ),
    "compactSession": _named(
        structured=(
            "Summarise everything but the newest 20 items, without an LLM",
            {"policy": "structured", "keep_last_items": 20},
        ),
        dry_run=(
            "What an LLM summary would compact, without changing anything",
            {"policy": "llm", "keep_last_tokens": 4000, "dry_run": True},
        ),
    ),
    "createSnapshot": _named(labelled=("A labelled snapshot", {"label": "before refactor"})),
    "restoreSession": _named(
        by_id=("Restore one of the session's snapshots", {"snapshot_id": _SNAPSHOT["id"]}),
    ),
    "forkSession": _named(
        branch=(
            "Branch the current state into a new session",
            {"new_session_id": "agent-42-branch", "metadata": {"agent": "coder", "branch": 1}},
        ),
    ),
    "createApiKey": _named(
        reader=("A read-only key", {"name": "dashboard", "scopes": ["read"]}),
        agent=(
            "An agent's key, confined to its own sessions",
            {"name": "agent-7", "scopes": ["read", "write"], "session_prefix": "agent-7:"},
        ),
    ),
}

# operationId -> (status, example of the success body)
RESPONSES: dict[str, tuple[str, Any]] = {
    "createSession": ("201", _session(1, 0)),
    "getSession": ("200", _session(2, 3)),
    "updateSession": ("200", _session(2, 0, metadata={"agent": "coder", "stage": 2})),
    "appendItems": (
        "201",
        {
            "items": [
                _stored(1, _USER, 7, 29),
                _stored(2, _CALL, 7, 27),
                _stored(3, _OUTPUT, 6, 10),
            ],
            "version": 2,
        },
    ),
    "listItems": (
        "200",
        {"items": [_stored(1, _USER, 7, 29), _stored(2, _CALL, 7, 27)], "next_cursor": 2},
    ),
    "popItem": ("200", {"item": _stored(3, _OUTPUT, 6, 10), "version": 3}),
    "getContext": ("200", _CONTEXT),
    "postContext": ("200", _CONTEXT),
    "compactSession": (
        "200",
        {
            "id": "cmp_000000000000000000000001",
            "policy": "structured",
            "summary": _SUMMARY,
            "compacted_items": 4,
            "report": {
                "items_before": 5,
                "items_after": 1,
                "tokens_before": 30,
                "tokens_after": 3,
                "compacted_tokens": 27,
                "summary_tokens": 21,
                "first_seq": 1,
                "last_seq": 4,
                "kept_from_seq": 5,
                "compacted_ranges": [[1, 4]],
                "notes": [],
            },
            "model": None,
            "created_at": _T0,
            "goal": "What is the weather in Paris?",
            "completed": [],
            "pending": [],
            "decisions": [],
            "errors": [],
            "test_results": [],
            "open_questions": [],
            "read_files": [],
            "modified_files": [],
            "tools_called": {"get_weather": 1},
            "earlier_summary": None,
        },
    ),
    "createSnapshot": ("201", _SNAPSHOT),
    "restoreSession": (
        "200",
        {
            "undo_snapshot_id": "snp_000000000000000000000002",
            "snapshot_id": _SNAPSHOT["id"],
            "restored_items": 1,
            "session": _session(5, 1, summary=_SUMMARY),
        },
    ),
    "forkSession": (
        "201",
        _session(1, 3, id="agent-42-branch", metadata={"agent": "coder", "branch": 1}),
    ),
}


def _problem(status: int, code: str, title: str, detail: str, **extra: Any) -> dict[str, Any]:
    return {
        "type": PROBLEM_BASE + code,
        "title": title,
        "status": status,
        "detail": detail,
        "instance": "/v1/sessions/agent-42/items",
        **extra,
    }


# status -> example problem document (one typical error kind per status)
PROBLEMS: dict[str, dict[str, Any]] = {
    "400": _problem(400, "bad-request", "Bad request", "If-Match must be a version ETag"),
    "401": _problem(
        401, "unauthorized", "Unauthorized", "send the API key as `Authorization: Bearer <key>`"
    ),
    "403": _problem(403, "forbidden", "Forbidden", "the key lacks the 'write' scope"),
    "404": _problem(404, "session-not-found", "Session not found", "session 'agent-42' not found"),
    "409": _problem(409, "session-exists", "Session already exists", "session 'agent-42' exists"),
    "412": _problem(
        412, "version-mismatch", "Version mismatch", "If-Match is 7, the session is at 9"
    ),
    "413": _problem(
        413, "limit-exceeded", "Limit exceeded", "1001 items in one append; the limit is 1000"
    ),
    "415": _problem(
        415,
        "unsupported-media-type",
        "Unsupported media type",
        "a JSON body is required: send it with Content-Type: application/json",
    ),
    "410": _problem(410, "tenant-erased", "Tenant erased", "this key's tenant has been erased"),
    "421": _problem(
        421,
        "misdirected-request",
        "Misdirected request",
        "this server runs without authentication and answers only to a loopback host name "
        "(localhost, 127.0.0.1, [::1]) or one in ALLOWED_HOSTS; the request named "
        "'attacker.example'",
    ),
    "422": _problem(
        422,
        "validation-error",
        "Request validation failed",
        "1 invalid field(s)",
        errors=[
            {"loc": ["items", 1, "role"], "msg": "role 'wizard' is not supported", "type": "invalid_input"}
        ],
    ),
    "502": _problem(502, "upstream-failed", "Upstream model failed", "the model timed out"),
    "503": _problem(503, "lock-timeout", "Session busy", "another writer holds the session; retry"),
}


TAGS: list[dict[str, str]] = [
    {"name": "sessions", "description": "Create, read, update, list and delete sessions"},
    {"name": "items", "description": "Working memory: append (any format), read, pop, clear"},
    {"name": "context", "description": "The next-turn prompt in a provider format, in budget"},
    {"name": "compaction", "description": "Summarise old items; compacted items stay in history"},
    {"name": "snapshots", "description": "Snapshots, export, restore and fork"},
    {"name": "history", "description": "The operation log and every item ever appended"},
    {"name": "search", "description": "Full-text search in one session or the whole tenant"},
    {"name": "admin", "description": "API keys of the caller's tenant (admin scope)"},
    {"name": "operations", "description": "Liveness and readiness probes"},
]

# GET /v1/whoami (app.api.routes.whoami): what the caller's key may do.
TAGS.append({"name": "auth", "description": "Who the caller is: tenant, key and scopes"})
RESPONSES["whoami"] = (
    "200",
    {
        "auth": "on",
        "tenant_id": "acme",
        "key_id": "smk_0123456789ab",
        "key_name": "coder-agent",
        "scopes": ["read", "write"],
        "session_prefix": None,
    },
)

# (operationId, status) -> the problem an operation gives for that status when it is not the
# status's typical kind above.
OPERATION_PROBLEMS: dict[tuple[str, str], dict[str, Any]] = {
    ("updateSession", "409"): {
        **_problem(
            409,
            "transaction-conflict",
            "Conflict with a concurrent transaction",
            "the database aborted the update to resolve a conflict with a concurrent "
            "transaction; nothing was written: send it again",
        ),
        "instance": "/v1/sessions/agent-42",
    },
}


def add_examples(schema: dict[str, Any]) -> None:
    """Puts the examples and the tag descriptions into an OpenAPI document in place (never
    replacing one already there)."""
    used = {
        t
        for methods in schema.get("paths", {}).values()
        for op in methods.values()
        for t in op.get("tags", [])
    }
    schema.setdefault("tags", [t for t in TAGS if t["name"] in used])
    for methods in schema.get("paths", {}).values():
        for operation in methods.values():
            op_id = operation.get("operationId")
            body = operation.get("requestBody", {}).get("content", {}).get(JSON_MEDIA_TYPE)
            if body is not None and op_id in REQUESTS:
                body.setdefault("examples", copy.deepcopy(REQUESTS[op_id]))
            responses = operation.get("responses", {})
            if op_id in RESPONSES:
                status, example = RESPONSES[op_id]
                media = responses.get(status, {}).get("content", {}).get(JSON_MEDIA_TYPE)
                if media is not None:
                    media.setdefault("example", copy.deepcopy(example))
            for status, response in responses.items():
                # problem media objects are shared between responses: replace, never mutate
                content = response.get("content", {})
                media = content.get(PROBLEM_MEDIA_TYPE)
                if media is not None and status in PROBLEMS and "example" not in media:
                    example = copy.deepcopy(
                        OPERATION_PROBLEMS.get((op_id, status), PROBLEMS[status])
                    )
                    response["content"] = {
                        **content,
                        PROBLEM_MEDIA_TYPE: {**media, "example": example},
                    }


def declare_examples(app: FastAPI) -> None:
    """Wraps ``app.openapi`` so that the document it returns carries the examples."""
    original = app.openapi
    done: list[dict[str, Any]] = []

    def openapi() -> dict[str, Any]:
        if done:
            return done[0]
        schema = original()
        add_examples(schema)
        app.openapi_schema = schema
        done.append(schema)
        return schema

    app.openapi = openapi  # type: ignore[method-assign]


# Retention and erasure (app.api.routes.admin, docs/retention.md).
_USAGE = {"rows": 4, "bytes": 1830}
RESPONSES["eraseTenant"] = (
    "200",
    {
        "tenant_id": "acme",
        "sessions": 2,
        "row_counts": {"api_keys": 1, "events": 9, "items": 7, "sessions": 2},
        "erasure_id": "era_0123456789abcdef01234567",
    },
)
RESPONSES["getTenantStorage"] = (
    "200",
    {
        "tenant_id": "acme",
        "storage": {
            "working_memory": _USAGE,
            "archive": {"rows": 12, "bytes": 5120},
            "snapshots": {"rows": 1, "bytes": 2048},
            "events": {"rows": 19, "bytes": 1400},
            "total": {"rows": 36, "bytes": 10398},
            "sessions": 2,
        },
    },
)
