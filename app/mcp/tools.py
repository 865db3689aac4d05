"""The MCP tools and resources: each one is a REST operation, run by the same service call.

Arguments are validated by the REST request models (``ItemsAppend``, ``ContextRequest``,
``CompactRequest``, ...), so a value the REST API refuses is refused here too, with the same
problem. Scopes are the REST routes': ``read`` for what only reads (the context, search,
listings, resources), ``write`` for the rest, ``compact`` with ``dry_run`` included.

A write tool takes an optional ``idempotency_key``: a retry with the same key and the same
arguments gets the first answer back and writes nothing (DESIGN §6). Its records are apart
from the REST API's (another method and path in the record's scope).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer, ResourceSecurity
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, InputRequiredResult, ToolAnnotations
from pydantic import BaseModel, Field, ValidationError

from app.api.deps import IDEMPOTENCY_KEY_PATTERN
from app.api.encoding import (
    context_body,
    dumps,
    encode_append,
    encode_session,
    items_dicts,
    search_body,
    session_dict,
)
from app.api.memory_schemas import RestoreRequest, SnapshotCreate
from app.api.routes.compaction import CompactRequest
from app.api.routes.context import BUDGET_FIELDS, ContextRecall, ContextRequest, CutName
from app.api.routes.snapshots import CURSOR_PATTERN as SNAPSHOT_CURSOR_PATTERN
from app.api.schemas import FormatName, ItemsAppend, SessionCreate
from app.domain import errors as e
from app.domain.ids import SESSION_ID_MAX, SESSION_ID_RULE, SESSION_PREFIX_MAX, is_valid_session_id
from app.domain.items import MAX_SAFE_INTEGER
from app.domain.projection.budget import MAX_QUERY_CHARS
from app.domain.recall import DEFAULT_MIN_SCORE
from app.mcp.results import (
    Refused,
    caller,
    domain_problem,
    failed,
    ok,
    ok_value,
    problem,
    require,
    resource_error,
    validation_problem,
)
from app.services import compaction as compaction_service
from app.services import context as context_service
from app.services import items as items_service
from app.services import search as search_service
from app.services import sessions as sessions_service
from app.services import snapshots as snapshots_service
from app.services.runtime import Actor, IdempotencyRequest, Runtime

INSTRUCTIONS = """Session Memory keeps an agent's conversation (its items: messages, tool calls
and outputs, reasoning) and builds the next-turn prompt within a budget. Append what happened
with append_items, read the prompt back with get_context, compact old context into a summary
with compact, and freeze or roll back state with create_snapshot / restore_snapshot. Errors
come back as tool errors whose content is an RFC 9457 problem (type, title, status, detail)."""

_IDEMPOTENCY_RE = re.compile(IDEMPOTENCY_KEY_PATTERN)

SessionId = Annotated[
    str,
    Field(
        min_length=1,
        max_length=SESSION_ID_MAX,
        description="The session's id (any characters but '/' and control characters)",
    ),
]
IdempotencyKey = Annotated[
    str | None,
    Field(
        max_length=255,
        description="Optional: a retry with the same key and arguments returns the first "
        "answer and writes nothing",
    ),
]
Format = Annotated[
    FormatName,
    Field(description="Wire format: canonical, openai-chat, openai-responses, anthropic or gemini"),
]
Count = Annotated[int | None, Field(ge=1, le=MAX_SAFE_INTEGER)]
Amount = Annotated[int | None, Field(ge=0, le=MAX_SAFE_INTEGER)]

READ = ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=False)
WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)


def _session_id(value: str, name: str = "session_id") -> str:
    if not is_valid_session_id(value):
        raise e.InvalidInput(
            f"invalid session id: {SESSION_ID_RULE}",
            errors=[{"loc": ["arguments", name], "msg": SESSION_ID_RULE}],
        )
    return value


def _validated(model: type[BaseModel], data: dict[str, Any]) -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise Refused(validation_problem(exc, prefix=("arguments",))) from None


def _idempotency(
    key: str | None, tool: str, session_id: str | None, arguments: dict[str, Any]
) -> IdempotencyRequest | None:
    if key is None:
        return None
    if not _IDEMPOTENCY_RE.fullmatch(key):
        raise e.InvalidInput(
            "idempotency_key must be 1-255 visible ASCII characters",
            errors=[{"loc": ["arguments", "idempotency_key"], "msg": "invalid"}],
        )
    canonical = json.dumps(arguments, sort_keys=True, separators=(",", ":"), default=str)
    return IdempotencyRequest(
        key=key,
        method="MCP",
        path=f"/mcp/{tool}/{session_id or ''}",
        request_hash=IdempotencyRequest.hash_request(canonical.encode()),
    )


def _sent_arguments(ctx: Context) -> frozenset[str]:
    """The names of the arguments the client sent, nulls included: the tool function sees a
    null and an argument left out alike (both ``None``)."""
    params = ctx.request_context.params or {}
    arguments = params.get("arguments")
    return frozenset(arguments) if isinstance(arguments, dict) else frozenset()


async def _call(
    ctx: Context,
    scope: str,
    run: Callable[[Runtime, Actor], Awaitable[CallToolResult]],
) -> CallToolResult:
    """Run a tool body as the caller, answering a refusal as a tool error with its problem."""
    try:
        rt, actor = caller(ctx)
        require(actor, scope)
        return await run(rt, actor)
    except Refused as refused:
        return failed(refused.problem)
    except e.DomainError as exc:
        return failed(domain_problem(exc))


# The REST bodies, encoded by the same functions as the REST routes
from app.api.snapshot_encoding import encode_restore, encode_snapshot, snapshot_dict  # noqa: E402


class _Server(MCPServer):
    """Arguments are checked as the REST API checks a JSON body: an unknown one (a misspelt
    budget field would otherwise be ignored) or one the SDK refuses (wrong type, out of
    range) comes back as the same ``validation-error`` problem, not as the SDK's plain text."""

    _arguments: dict[str, frozenset[str]] | None = None

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context | None = None
    ) -> CallToolResult | InputRequiredResult:
        if self._arguments is None:
            self._arguments = {
                tool.name: frozenset(tool.input_schema.get("properties", {}))
                for tool in await self.list_tools()
            }
        known = self._arguments.get(name)
        unknown = sorted(set(arguments) - known) if known is not None else []
        if unknown:
            errors = [
                {"loc": ["arguments", arg], "msg": "unknown argument", "type": "extra_forbidden"}
                for arg in unknown
            ]
            return failed(
                problem(
                    422,
                    "validation-error",
                    "Request validation failed",
                    f"unknown argument(s) of {name}: {', '.join(unknown)}",
                    errors=errors,
                )
            )
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError):
                return failed(validation_problem(exc.__cause__, prefix=("arguments",)))
            raise


def build_server() -> MCPServer:
    """The MCP server: tools and resources over the service layer (no transport here)."""
    # The SDK's constructor calls logging.basicConfig(); the service's logging is app.logs's.
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        server = _Server(
            "session-memory",
            title="Session Memory Service",
            instructions=INSTRUCTIONS,
            version="0.1.0",
            # Session ids are ids, not file paths: the service checks them itself.
            resource_security=ResourceSecurity(exempt_params={"session_id"}),
            subscriptions=False,
        )
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
    _sessions(server)
    _items_and_context(server)
    _search_and_compaction(server)
    _snapshots(server)
    _resources(server)
    return server


def _sessions(server: MCPServer) -> None:
    @server.tool(annotations=READ)
    async def list_sessions(
        ctx: Context,
        prefix: Annotated[
            str | None,
            Field(max_length=SESSION_PREFIX_MAX, description="Only ids with this prefix"),
        ] = None,
        cursor: Annotated[
            str | None, Field(max_length=SESSION_ID_MAX, description="`next_cursor` of a page")
        ] = None,
        limit: Annotated[int, Field(ge=1, le=1000)] = 100,
    ) -> CallToolResult:
        """List the sessions the key can see, by id (cursor-paginated)."""

        async def run(rt: Runtime, actor: Actor) -> CallToolResult:
            after = _session_id(cursor, "cursor") if cursor else None
            rows, next_after = await sessions_service.list_sessions(
                rt, actor, after_id=after, limit=limit, prefix=prefix
            )
            return ok_value({"items": [session_dict(r) for r in rows], "next_cursor": next_after})

        return await _call(ctx, "read", run)

    @server.tool(annotations=WRITE)
    async def create_session(
        ctx: Context,
        session_id: Annotated[
            str | None,
            Field(
                max_length=SESSION_ID_MAX, description="The new session's id (generated if omitted)"
            ),
        ] = None,
        metadata: dict[str, Any] | None = None,
        config: Annotated[
            dict[str, Any] | None,
            Field(description="`context` (budget defaults) and `auto_compact`, as in the REST API"),
        ] = None,
        summary: str | None = None,
        idempotency_key: IdempotencyKey = None,
    ) -> CallToolResult:
        """Create a session (a tool error with status 409 if the id exists)."""

        async def run(rt: Runtime, actor: Actor) -> CallToolResult:
            fields: dict[str, Any] = {"id": session_id, "metadata": metadata or {}}
            if config is not None:
                fields["config"] = config
            if summary is not None:
                fields["summary"] = summary
            body: SessionCreate = _validated(SessionCreate, fields)
            command = sessions_service.SessionCreateCommand(
                id=body.id,
                metadata=body.metadata,
                config=body.config.to_dict(),
                summary=body.summary,
            )
            idem = _idempotency(idempotency_key, "create_session", session_id, fields)
            encoded = await sessions_service.create_session(
                rt, actor, command, encode=encode_session(201), idempotency=idem
            )
            return ok(encoded)

        return await _call(ctx, "write", run)

    @server.tool(annotations=READ)
    async def get_session(ctx: Context, session_id: SessionId) -> CallToolResult:
        """A session: version, summary, metadata, config and its item and token counts."""

        async def run(rt: Runtime, actor: Actor) -> CallToolResult:
            state = await sessions_service.get_session(rt, actor, _session_id(session_id))
            return ok_value(session_dict(state))

        return await _call(ctx, "read", run)


def _items_and_context(server: MCPServer) -> None:
    @server.tool(annotations=WRITE)
    async def append_items(
        ctx: Context,
        session_id: SessionId,
        items: Annotated[
            list[dict[str, Any]],
            Field(description="The batch, written in `format` (atomic: all items or none)"),
        ],
        format: Format = "canonical",
        system: Annotated[
            Any, Field(description="`anthropic` only: the request's system prompt")
        ] = None,
        system_instruction: Annotated[
            Any, Field(description="`gemini` only: the request's `systemInstruction`")
        ] = None,
        create: Annotated[
            bool, Field(description="Create the session if it does not exist")
        ] = False,
        idempotency_key: IdempotencyKey = None,
    ) -> CallToolResult:
        """Append a batch of items (messages, tool calls and outputs, reasoning) to a session."""

        async def run(rt: Runtime, actor: Actor) -> CallToolResult:
            sid = _session_id(session_id)
            fields: dict[str, Any] = {"format": format, "items": items}
            if system is not None:
                fields["system"] = system
            if system_instruction is not None:
                fields["system_instruction"] = system_instruction
            body: ItemsAppend = _validated(ItemsAppend, fields)
            idem = _idempotency(idempotency_key, "append_items", sid, {**fields, "create": create})
            batch = items_service.ingest_batch(
                body.format,
                body.items,
                system=body.system,
                system_instruction=body.system_instruction,
            )
            encoded = await items_service.append_items(
                rt,
                actor,
                sid,
                batch=batch,
                create=create,
                idempotency=idem,
                encode=encode_append,
            )
            return ok(encoded)

        return await _call(ctx, "write", run)

    @server.tool(annotations=READ)
    async def get_context(
        ctx: Context,
        session_id: SessionId,
        format: Format = "canonical",
        max_items: Annotated[Count, Field(description="Canonical items in the prompt")] = None,
        max_chars: Count = None,
        max_tokens: Annotated[Count, Field(description="Tokens of the rendered payload")] = None,
        tokenizer: Literal["o200k_base", "cl100k_base", "approx"] | None = None,
        pinned_prefix_items: Annotated[
            Amount, Field(description="The first N items are always kept")
        ] = None,
        keep_system: bool | None = None,
        max_recent_tool_results: Annotated[
            Amount, Field(description="Older tool outputs become placeholders")
        ] = None,
        trim_old_reasoning: bool | None = None,
        start_on: Literal["any", "user"] | None = None,
        dangling_tool_calls: Literal["drop", "placeholder"] | None = None,
        cut: Annotated[
            CutName | None,
            Field(
                description="`stable`: the kept tail's start moves in steps, so consecutive "
                "prompts share their prefix (provider prompt caches keep paying off)"
            ),
        ] = None,
        cut_step: Annotated[
            float | None, Field(gt=0, le=0.5, description="With `cut: stable`: one step")
        ] = None,
        cache_breakpoints: Annotated[
            bool | None, Field(description="`anthropic` only: `cache_control` markers")
        ] = None,
        recall: Annotated[
            ContextRecall | None,
            Field(
                description="Bring back evicted or archived items matching `query` (default: "
                "the newest user message) as text, within `max_tokens` of the budget"
            ),
        ] = None,
    ) -> CallToolResult:
        """The next-turn prompt in a provider format within a budget, with a report of what
        was kept and dropped. Budget fields left out default to the session's config; one
        sent as null lifts that default (`recall: null` turns a configured recall off)."""
        given = {
            "max_items": max_items,
            "max_chars": max_chars,
            "max_tokens": max_tokens,
            "tokenizer": tokenizer,
            "pinned_prefix_items": pinned_prefix_items,
            "keep_system": keep_system,
            "max_recent_tool_results": max_recent_tool_results,
            "trim_old_reasoning": trim_old_reasoning,
            "start_on": start_on,
            "dangling_tool_calls": dangling_tool_calls,
            "cut": cut,
            "cut_step": cut_step,
            "cache_breakpoints": cache_breakpoints,
            "recall": None if recall is None else recall.model_dump(exclude_unset=True),
        }

        async def run(rt: Runtime, actor: Actor) -> CallToolResult:
            sid = _session_id(session_id)
            # A null sent lifts the session's default, as in a REST body; one left out keeps it
            sent = _sent_arguments(ctx)
            fields = {
                name: value for name, value in given.items() if value is not None or name in sent
            }
            body: ContextRequest = _validated(ContextRequest, {"format": format, **fields})
            overrides: dict[str, object] = {
                name: getattr(body, name) for name in BUDGET_FIELDS if name in body.model_fields_set
            }
            if "recall" in body.model_fields_set:
                overrides["recall"] = (
                    None if body.recall is None else body.recall.model_dump(exclude_unset=True)
                )
            result = await context_service.read_context(
                rt, actor, sid, format=body.format, overrides=overrides
            )
            return ok_value(context_body(result))

        return await _call(ctx, "read", run)


def _search_and_compaction(server: MCPServer) -> None:
    @server.tool(annotations=READ)
    async def search(
        ctx: Context,
        q: Annotated[
            str, Field(min_length=1, max_length=MAX_QUERY_CHARS, description="Words to find (all)")
        ],
        session_id: Annotated[
            str | None,
            Field(max_length=SESSION_ID_MAX, description="One session; omitted: every session"),
        ] = None,
        scope: Annotated[
            Literal["memory", "history"],
            Field(description="`memory`: working memory; `history`: archived items too"),
        ] = "memory",
        limit: Annotated[int, Field(ge=1, le=100)] = 20,
        cursor: Annotated[
            str | None,
            Field(
                pattern=search_service.CURSOR_PATTERN,
                max_length=search_service.CURSOR_MAX_CHARS,
                description="`next_cursor` of the previous page",
            ),
        ] = None,
        mode: Annotated[
            Literal["fulltext", "semantic", "hybrid"],
            Field(
                description="`hybrid`: both rankings fused, exact tokens (file names, error "
                "codes, ids) first; `fulltext`: the query's words; `semantic`: by meaning"
            ),
        ] = "hybrid",
        min_score: Annotated[
            float,
            Field(
                ge=-1.0,
                le=1.0,
                description="lowest similarity of a hit found only by meaning",
            ),
        ] = DEFAULT_MIN_SCORE,
    ) -> CallToolResult:
        """Search, best first, in one session or across the tenant's sessions: by meaning and
        words fused (the default), words only, or meaning only; each hit has both scores."""

        async def run(rt: Runtime, actor: Actor) -> CallToolResult:
            if session_id is None:
                page = await search_service.search_all_modes(
                    rt, actor, q=q, scope=scope, limit=limit, cursor=cursor, mode=mode,
                    min_score=min_score,
                )  # fmt: skip
            else:
                page = await search_service.search_session_modes(
                    rt, actor, _session_id(session_id), q=q, scope=scope, limit=limit,
                    cursor=cursor, mode=mode, min_score=min_score,
                )  # fmt: skip
            return ok_value(
                search_body(
                    [s.hit for s in page.hits],
                    page.next_cursor,
                    scores=[(s.fulltext, s.semantic) for s in page.hits],
                    mode=page.mode,
                )
            )

        return await _call(ctx, "read", run)

    @server.tool(annotations=WRITE)
    async def compact(
        ctx: Context,
        session_id: SessionId,
        policy: Annotated[
            Literal["window", "structured", "llm"],
            Field(
                description="`window`: drop old items; `structured`: mechanical sectioned "
                "summary; `llm`: the configured model writes the summary"
            ),
        ] = "structured",
        keep_last_items: Annotated[int | None, Field(ge=0, le=1_000_000)] = None,
        keep_last_tokens: Annotated[int | None, Field(ge=0, le=100_000_000)] = None,
        pinned_prefix_items: Annotated[int, Field(ge=0, le=1_000_000)] = 0,
        instructions: Annotated[str | None, Field(max_length=4000)] = None,
        model: Annotated[str | None, Field(min_length=1, max_length=200)] = None,
        dry_run: Annotated[bool, Field(description="Compute the result, change nothing")] = False,
        idempotency_key: IdempotencyKey = None,
    ) -> CallToolResult:
        """Compact working memory into a summary; the compacted items stay in history."""

        async def run(rt: Runtime, actor: Actor) -> CallToolResult:
            sid = _session_id(session_id)
            fields = {
                "policy": policy,
                "keep_last_items": keep_last_items,
                "keep_last_tokens": keep_last_tokens,
                "pinned_prefix_items": pinned_prefix_items,
                "instructions": instructions,
                "model": model,
                "dry_run": dry_run,
            }
            body: CompactRequest = _validated(CompactRequest, fields)
            idem = _idempotency(idempotency_key, "compact", sid, fields)
            request = compaction_service.CompactRequest(**body.model_dump())
            encoded = await compaction_service.compact_session(
                rt, actor, sid, request=request, idempotency=idem
            )
            return ok(encoded)

        return await _call(ctx, "write", run)


def _snapshots(server: MCPServer) -> None:
    @server.tool(annotations=READ)
    async def list_snapshots(
        ctx: Context,
        session_id: SessionId,
        cursor: Annotated[
            str | None,
            Field(pattern=SNAPSHOT_CURSOR_PATTERN, description="`next_cursor` of a page"),
        ] = None,
        limit: Annotated[int, Field(ge=1, le=1000)] = 100,
    ) -> CallToolResult:
        """A session's snapshots, newest first."""

        async def run(rt: Runtime, actor: Actor) -> CallToolResult:
            rows, next_version = await snapshots_service.list_snapshots(
                rt,
                actor,
                _session_id(session_id),
                before_version=int(cursor) if cursor else None,
                limit=limit,
            )
            return ok_value(
                {
                    "items": [snapshot_dict(r) for r in rows],
                    "next_cursor": str(next_version) if next_version is not None else None,
                }
            )

        return await _call(ctx, "read", run)

    @server.tool(annotations=WRITE)
    async def create_snapshot(
        ctx: Context,
        session_id: SessionId,
        label: Annotated[str | None, Field(max_length=256)] = None,
        idempotency_key: IdempotencyKey = None,
    ) -> CallToolResult:
        """Freeze working memory, summary, last compact result, config and metadata."""

        async def run(rt: Runtime, actor: Actor) -> CallToolResult:
            sid = _session_id(session_id)
            body: SnapshotCreate = _validated(SnapshotCreate, {"label": label})
            idem = _idempotency(idempotency_key, "create_snapshot", sid, {"label": label})
            encoded = await snapshots_service.create_snapshot(
                rt, actor, sid, label=body.label, idempotency=idem, encode=encode_snapshot
            )
            return ok(encoded)

        return await _call(ctx, "write", run)

    @server.tool(
        annotations=ToolAnnotations(
            read_only_hint=False, destructive_hint=True, open_world_hint=False
        )
    )
    async def restore_snapshot(
        ctx: Context,
        session_id: SessionId,
        snapshot_id: Annotated[
            str | None, Field(max_length=128, description="A snapshot of this session")
        ] = None,
        snapshot: Annotated[
            dict[str, Any] | None, Field(description="Or a whole exported snapshot document")
        ] = None,
        idempotency_key: IdempotencyKey = None,
    ) -> CallToolResult:
        """Replace working memory, summary and config with a snapshot's (exactly one of
        snapshot_id and snapshot). The state before is saved as `undo_snapshot_id`."""

        async def run(rt: Runtime, actor: Actor) -> CallToolResult:
            sid = _session_id(session_id)
            fields = {
                name: value
                for name, value in (("snapshot_id", snapshot_id), ("snapshot", snapshot))
                if value is not None
            }
            body: RestoreRequest = _validated(RestoreRequest, fields)
            idem = _idempotency(idempotency_key, "restore_snapshot", sid, fields)
            encoded = await snapshots_service.restore_session(
                rt,
                actor,
                sid,
                snapshot_id=body.snapshot_id,
                document=body.snapshot,
                idempotency=idem,
                encode=encode_restore,
            )
            return ok(encoded)

        return await _call(ctx, "write", run)


def _resources(server: MCPServer) -> None:
    async def as_reader(ctx: Context, run: Callable[[Runtime, Actor], Awaitable[str]]) -> str:
        try:
            rt, actor = caller(ctx)
            require(actor, "read")
            return await run(rt, actor)
        except Refused as refused:
            raise resource_error(refused.problem) from None
        except e.DomainError as exc:
            raise resource_error(domain_problem(exc)) from None

    @server.resource(
        "session://{session_id}/summary",
        name="session-summary",
        description="The session's summary (Markdown sections), empty before any compaction",
        mime_type="text/markdown",
    )
    async def session_summary(session_id: str, ctx: Context) -> str:
        async def run(rt: Runtime, actor: Actor) -> str:
            state = await sessions_service.get_session(rt, actor, _session_id(session_id))
            return state.summary or ""

        return await as_reader(ctx, run)

    @server.resource(
        "session://{session_id}/items{?last}",
        name="session-items",
        description="The newest items of working memory, oldest first (`last`, default 20, "
        "at most 1000), as GET /v1/sessions/{id}/items?last=N returns them",
        mime_type="application/json",
    )
    async def session_items(session_id: str, ctx: Context, last: str = "20") -> str:
        async def run(rt: Runtime, actor: Actor) -> str:
            sid = _session_id(session_id)
            if not last.isdecimal() or not 1 <= int(last) <= 1000:
                raise Refused(
                    problem(
                        422,
                        "validation-error",
                        "Request validation failed",
                        "last must be an integer from 1 to 1000",
                        errors=[{"loc": ["uri", "last"], "msg": "not 1-1000"}],
                    )
                )
            page, _, _ = await items_service.list_items(
                rt, actor, sid, after_seq=None, limit=int(last), last=int(last)
            )
            return dumps({"items": items_dicts(page), "next_cursor": None})

        return await as_reader(ctx, run)
