"""Every MCP tool and resource answers what the REST API answers for the same operation, on
Postgres + Redis (auth on) and SQLite (auth off)."""

from __future__ import annotations

import json
from typing import Any

from tests.mcp.conftest import Served, body, mcp_session, refusal


def user(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": text}


def assistant(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "assistant", "content": text}


def conversation(turns: int) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = [{"type": "message", "role": "system", "content": "Be brief."}]
    for n in range(turns):
        items.append(user(f"turn {n}: please read file_{n}.py and summarise it " + "word " * 30))
        items.append(
            {
                "type": "function_call",
                "call_id": f"call_{n}",
                "name": "read_file",
                "arguments": json.dumps({"path": f"file_{n}.py"}),
            }
        )
        items.append(
            {"type": "function_call_output", "call_id": f"call_{n}", "output": "x = 1\n" * 40}
        )
        items.append(assistant(f"file_{n}.py sets x to one " + "indeed " * 20))
    return items


async def test_the_tools_and_resources_an_agent_host_sees(served: Served) -> None:
    async with mcp_session(served.url, served.token) as mcp:
        tools = {tool.name: tool for tool in (await mcp.list_tools()).tools}
        templates = (await mcp.list_resource_templates()).resource_templates
    assert {
        "list_sessions", "create_session", "get_session", "append_items", "get_context",
        "search", "compact", "list_snapshots", "create_snapshot", "restore_snapshot",
    } == set(tools)  # fmt: skip
    for name, tool in tools.items():
        properties = tool.input_schema["properties"]
        assert all(arg == arg.lower() and "-" not in arg for arg in properties), name
        if name not in ("list_sessions", "create_session", "search"):
            assert "session_id" in tool.input_schema["required"], name
    assert tools["get_context"].annotations.read_only_hint is True  # type: ignore[union-attr]
    assert tools["append_items"].annotations.read_only_hint is False  # type: ignore[union-attr]
    assert {t.uri_template for t in templates} == {
        "session://{session_id}/summary",
        "session://{session_id}/items{?last}",
    }


async def test_append_then_get_context_equals_the_rest_context(served: Served, sid: str) -> None:
    async with mcp_session(served.url, served.token) as mcp:
        appended = body(
            await mcp.call_tool(
                "append_items", {"session_id": sid, "items": conversation(6), "create": True}
            )
        )
        assert appended["version"] >= 1 and len(appended["items"]) == 25
        budgets: list[dict[str, Any]] = [
            {},
            {"format": "openai-chat", "max_tokens": 300},
            {"format": "anthropic", "max_items": 9, "max_recent_tool_results": 1},
            {"format": "openai-responses", "max_chars": 900, "start_on": "user"},
            {"format": "canonical", "max_tokens": 250, "trim_old_reasoning": True,
             "tokenizer": "approx", "keep_system": False},
            {"format": "anthropic", "max_tokens": 400, "cut": "stable", "cut_step": 0.25,
             "cache_breakpoints": True},
        ]  # fmt: skip
        contexts = [
            body(await mcp.call_tool("get_context", {"session_id": sid, **budget}))
            for budget in budgets
        ]
    with served.rest() as rest:
        stored = rest.get(f"/v1/sessions/{sid}/items", params={"limit": 1000}).json()["items"]
        assert stored == appended["items"]
        for budget, context in zip(budgets, contexts, strict=True):
            r = rest.get(f"/v1/sessions/{sid}/context", params=budget)
            assert r.status_code == 200, r.text
            assert context == r.json(), budget
    # The budgets did bind: something was dropped, and the report says which limit applied.
    assert contexts[1]["report"]["dropped_items"] > 0
    assert contexts[1]["report"]["limits_applied"] == ["max_tokens"]
    assert contexts[1]["report"]["projected_tokens"] <= 300
    assert "messages" in contexts[1] and "system" in contexts[2] and "input" in contexts[3]
    assert "cache_control" in json.dumps(contexts[5]) and "cache_control" not in json.dumps(
        contexts[2]
    )


async def test_append_in_a_provider_format_and_resources(served: Served, sid: str) -> None:
    messages = [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "What is 2 + 2?"},
        {"role": "assistant", "content": "4"},
    ]
    async with mcp_session(served.url, served.token) as mcp:
        body(await mcp.call_tool("create_session", {"session_id": sid, "metadata": {"k": 1}}))
        body(
            await mcp.call_tool(
                "append_items", {"session_id": sid, "format": "openai-chat", "items": messages}
            )
        )
        context = body(
            await mcp.call_tool("get_context", {"session_id": sid, "format": "openai-chat"})
        )
        recent = await mcp.read_resource(f"session://{sid}/items?last=2")
        default = await mcp.read_resource(f"session://{sid}/items")
        summary = await mcp.read_resource(f"session://{sid}/summary")
        session = body(await mcp.call_tool("get_session", {"session_id": sid}))
        listed = body(await mcp.call_tool("list_sessions", {"prefix": sid}))
    assert context["messages"] == messages  # faithful: the same messages back
    with served.rest() as rest:
        assert (
            json.loads(recent.contents[0].text)
            == rest.get(  # type: ignore[union-attr]
                f"/v1/sessions/{sid}/items", params={"last": 2}
            ).json()
        )
        assert (
            json.loads(default.contents[0].text)["items"]
            == rest.get(  # type: ignore[union-attr]
                f"/v1/sessions/{sid}/items"
            ).json()["items"]
        )
        rest_session = rest.get(f"/v1/sessions/{sid}").json()
        rest_session.pop("storage", None)  # REST adds the session's storage use
        rest_session.pop("search_index", None)  # and its semantic index state
        assert session == rest_session and session["metadata"] == {"k": 1}
        assert listed == rest.get("/v1/sessions", params={"prefix": sid}).json()
        assert [s["id"] for s in listed["items"]] == [sid]
    assert len(json.loads(recent.contents[0].text)["items"]) == 2  # type: ignore[union-attr]
    assert summary.contents[0].text == ""  # type: ignore[union-attr]
    assert summary.contents[0].mime_type == "text/markdown"


async def test_compact_snapshot_restore_and_search(served: Served, sid: str) -> None:
    word = f"zebra{sid[-6:]}"
    async with mcp_session(served.url, served.token) as mcp:
        items = conversation(5)
        items[1] = user(f"turn 0: the {word} question")
        body(
            await mcp.call_tool("append_items", {"session_id": sid, "items": items, "create": True})
        )
        snapshot = body(
            await mcp.call_tool("create_snapshot", {"session_id": sid, "label": "before"})
        )
        dry = body(
            await mcp.call_tool(
                "compact", {"session_id": sid, "keep_last_items": 4, "dry_run": True}
            )
        )
        with served.rest() as rest:
            rest_dry = rest.post(
                f"/v1/sessions/{sid}/compact", json={"keep_last_items": 4, "dry_run": True}
            ).json()
            assert rest.get(f"/v1/sessions/{sid}").json()["item_count"] == 21  # dry: unchanged
        compacted = body(await mcp.call_tool("compact", {"session_id": sid, "keep_last_items": 4}))
        summary = await mcp.read_resource(f"session://{sid}/summary")
        in_session = body(
            await mcp.call_tool("search", {"q": word, "session_id": sid, "scope": "history"})
        )
        in_tenant = body(await mcp.call_tool("search", {"q": word, "scope": "history"}))
        in_memory = body(await mcp.call_tool("search", {"q": word, "session_id": sid}))
        # `mode` as on REST: this server has no embedder, so hybrid answers as full text and
        # semantic is refused with the REST problem.
        as_fulltext = body(
            await mcp.call_tool(
                "search", {"q": word, "session_id": sid, "scope": "history", "mode": "fulltext"}
            )
        )
        semantic_off = refusal(
            await mcp.call_tool("search", {"q": word, "session_id": sid, "mode": "semantic"})
        )
        with served.rest() as rest:
            rest_search = rest.get(
                f"/v1/sessions/{sid}/search", params={"q": word, "scope": "history"}
            ).json()
        snapshots = body(await mcp.call_tool("list_snapshots", {"session_id": sid}))
        restored = body(
            await mcp.call_tool(
                "restore_snapshot", {"session_id": sid, "snapshot_id": snapshot["id"]}
            )
        )
    for result in (dry, rest_dry):  # ids and times differ between two runs; the rest does not
        result.pop("id"), result.pop("created_at")
    assert dry == rest_dry and dry["compacted_items"] > 0
    assert compacted["compacted_items"] == dry["compacted_items"]
    assert summary.contents[0].text == compacted["summary"] and "## Goal" in compacted["summary"]  # type: ignore[union-attr]
    assert rest_search == in_session == as_fulltext and in_session["mode"] == "fulltext"
    assert in_session["items"][0]["scores"]["semantic"] is None
    assert semantic_off["status"] == 403 and semantic_off["type"].endswith("semantic-search-off")
    assert [hit["session_id"] for hit in in_session["items"]] == [sid]
    assert in_session["items"][0]["archived"] is True and in_memory["items"] == []
    assert [hit["item"] for hit in in_tenant["items"]] == [
        hit["item"] for hit in in_session["items"]
    ]
    assert [s["id"] for s in snapshots["items"]] == [snapshot["id"]]
    assert restored["snapshot_id"] == snapshot["id"] and restored["restored_items"] == 21
    with served.rest() as rest:
        rest_session = rest.get(f"/v1/sessions/{sid}").json()
        rest_session.pop("storage", None)
        rest_session.pop("search_index", None)
        assert rest_session == restored["session"]
        assert rest.get(f"/v1/sessions/{sid}/snapshots").json()["items"][1] == {
            k: snapshot[k] for k in snapshot
        }
        undo = rest.get(f"/v1/sessions/{sid}/snapshots/{restored['undo_snapshot_id']}")
        assert undo.status_code == 200 and len(undo.json()["items"]) == 5  # compacted state


async def test_an_idempotency_key_makes_a_retried_append_write_once(
    served: Served, sid: str
) -> None:
    args = {
        "session_id": sid,
        "items": [user("only once")],
        "create": True,
        "idempotency_key": "k-1",
    }
    async with mcp_session(served.url, served.token) as mcp:
        first = body(await mcp.call_tool("append_items", args))
        again = body(await mcp.call_tool("append_items", args))
        other = refusal(
            await mcp.call_tool("append_items", {**args, "items": [user("something else")]})
        )
        later = body(await mcp.call_tool("append_items", {**args, "idempotency_key": "k-2"}))
    assert again == first
    assert other["status"] == 422 and other["type"].endswith("/idempotency-key-reused")
    assert later["items"][0]["seq"] == 2
    with served.rest() as rest:
        assert rest.get(f"/v1/sessions/{sid}").json()["item_count"] == 2


async def test_refusals_are_tool_errors_carrying_the_rest_problem(served: Served, sid: str) -> None:
    async with mcp_session(served.url, served.token) as mcp:
        missing = refusal(await mcp.call_tool("get_context", {"session_id": sid}))
        bad_budget = refusal(
            await mcp.call_tool("get_context", {"session_id": sid, "max_tokens": 0})
        )
        wrong_type = refusal(
            await mcp.call_tool("get_context", {"session_id": sid, "max_items": "many"})
        )
        bad_item = refusal(
            await mcp.call_tool(
                "append_items",
                {
                    "session_id": sid,
                    "create": True,
                    "items": [{"type": "message", "role": "pirate"}],
                },
            )
        )
        bad_id = refusal(await mcp.call_tool("get_session", {"session_id": ".."}))
        typo = refusal(await mcp.call_tool("get_context", {"session_id": sid, "max_tokenz": 5}))
        both = refusal(
            await mcp.call_tool(
                "restore_snapshot", {"session_id": sid, "snapshot_id": "s", "snapshot": {}}
            )
        )
        bad_key = refusal(
            await mcp.call_tool(
                "create_snapshot", {"session_id": sid, "idempotency_key": "with space"}
            )
        )
        try:
            await mcp.read_resource(f"session://{sid}/summary")
        except Exception as exc:  # noqa: BLE001 - the SDK's MCPError
            resource_problem = getattr(exc, "data", None)
        else:
            resource_problem = None
    with served.rest() as rest:
        rest_missing = rest.get(f"/v1/sessions/{sid}/context").json()
        assert rest.get(f"/v1/sessions/{sid}").status_code == 404  # nothing was created
    rest_missing.pop("instance", None)
    assert missing == rest_missing and missing["status"] == 404
    assert bad_budget["status"] == 422 and bad_budget["errors"][0]["loc"] == [
        "arguments",
        "max_tokens",
    ]
    assert wrong_type["status"] == 422 and wrong_type["errors"][0]["loc"] == [
        "arguments",
        "max_items",
    ]
    assert bad_item["status"] == 422 and bad_item["errors"]
    assert bad_id["status"] == 422 and "session id" in bad_id["detail"]
    assert both["status"] == 422 and bad_key["status"] == 422
    assert typo["status"] == 422 and typo["errors"][0]["loc"] == ["arguments", "max_tokenz"]
    assert resource_problem is not None and resource_problem["status"] == 404


async def test_the_openai_agents_sdk_mcp_support_reaches_the_tools(
    served: Served, sid: str
) -> None:
    """The Agents SDK's own MCP client (what `Agent(mcp_servers=[...])` uses), no model needed."""
    from agents.mcp import MCPServerStreamableHttp

    headers = {"Authorization": f"Bearer {served.token}"} if served.token else {}
    params = {"url": served.url + "/mcp", "headers": headers}
    async with MCPServerStreamableHttp(params=params, name="memory") as server:  # type: ignore[arg-type]
        names = {tool.name for tool in await server.list_tools()}
        appended = await server.call_tool(
            "append_items", {"session_id": sid, "items": [user("from an agent")], "create": True}
        )
        context = await server.call_tool(
            "get_context", {"session_id": sid, "format": "openai-responses"}
        )
    assert {"get_context", "append_items", "compact"} <= names
    assert not appended.is_error
    with served.rest() as rest:
        expected = rest.get(f"/v1/sessions/{sid}/context", params={"format": "openai-responses"})
    assert context.structured_content == expected.json()


async def test_get_context_recalls_archived_turns_as_rest_does(served: Served, sid: str) -> None:
    word = f"zebra{sid[-6:]}"
    items = conversation(4)
    items[1] = user(f"turn 0: the {word} question")
    recall = {"max_tokens": 300, "query": word, "max_items": 2}
    async with mcp_session(served.url, served.token) as mcp:
        body(
            await mcp.call_tool("append_items", {"session_id": sid, "items": items, "create": True})
        )
        body(await mcp.call_tool("compact", {"session_id": sid, "keep_last_items": 4}))
        got = body(await mcp.call_tool("get_context", {"session_id": sid, "recall": recall}))
        bad = refusal(
            await mcp.call_tool("get_context", {"session_id": sid, "recall": {"max_items": 0}})
        )
    with served.rest() as rest:
        want = rest.post(f"/v1/sessions/{sid}/context", json={"recall": recall}).json()
    assert got["report"]["recall_query"] == word == want["report"]["recall_query"]
    assert got["report"]["recalled"][0]["seq"] == 2 == want["report"]["recalled"][0]["seq"]
    block = got["items"][-5]  # right before the newest user message (the kept turn's first)
    assert block["role"] == "system" and f"user: turn 0: the {word} question" in block["content"]
    assert got["items"][-4:] == want["items"][-4:] and got["items"][-4]["role"] == "user"
    assert bad["status"] == 422


async def test_null_lifts_a_configured_default_as_it_does_over_rest(
    served: Served, sid: str
) -> None:
    """`recall: null` turns the session's configured recall off, and a budget field sent as
    null lifts its default: what a null means in a REST body, not the same as leaving it out."""
    word = f"zebra{sid[-6:]}"
    items = conversation(4)
    items[1] = user(f"turn 0: the {word} question")
    config = {"context": {"max_items": 6, "recall": {"max_tokens": 300, "query": word}}}
    async with mcp_session(served.url, served.token) as mcp:
        body(await mcp.call_tool("create_session", {"session_id": sid, "config": config}))
        body(await mcp.call_tool("append_items", {"session_id": sid, "items": items}))
        body(await mcp.call_tool("compact", {"session_id": sid, "keep_last_items": 8}))
        defaults = body(await mcp.call_tool("get_context", {"session_id": sid}))
        lifted = body(
            await mcp.call_tool(
                "get_context", {"session_id": sid, "recall": None, "max_items": None}
            )
        )
    with served.rest() as rest:
        want = rest.post(
            f"/v1/sessions/{sid}/context", json={"recall": None, "max_items": None}
        ).json()
    assert defaults["report"]["recalled"], "the configured recall applies when left out"
    assert defaults["report"]["projected_items"] <= 6
    assert want["report"]["recalled"] == [] and want["report"]["projected_items"] > 6
    assert lifted == want
