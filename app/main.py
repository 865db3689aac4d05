"""The application factory: routers, lifespan (engines and Redis built here, never at import),
problem handlers, middleware."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI

from app.api.auth import AuthMiddleware, declare_security
from app.api.body_guard import JsonGuardMiddleware
from app.api.host_guard import HostAllowList, LoopbackHostGuard
from app.api.hot_route import serve_hot_routes_first
from app.api.observability import EdgeMiddleware, instrument
from app.api.openapi_examples import declare_examples
from app.api.problems import PROBLEM_MEDIA_TYPE, Problem, install_problem_handlers
from app.api.routes import (
    admin,
    compaction,
    context,
    health,
    history,
    items,
    memory,
    metrics,
    search,
    sessions,
    snapshots,
    ui,
    whoami,
)
from app.api.schemas import JSON_VALUE_SCHEMA
from app.domain.formats._common import bound_token_counts
from app.domain.tokens import DEFAULT_TOKENIZER, get_encoding
from app.gc_tuning import tune_for_serving
from app.locks import build_locks
from app.logs import AccessLineWriter
from app.mcp import McpEndpoint
from app.services.auto_compaction import start_compaction, stop_compaction
from app.services.housekeeping import start_housekeeping, stop_housekeeping
from app.services.indexing import start_indexer, stop_indexer
from app.services.keys import KeyResolver, auth_required, startup_problem
from app.services.runtime import Runtime
from app.settings import Settings, get_settings
from app.store.db import Store

# The API's routers, in the order the OpenAPI document lists their paths.
ROUTERS = (
    sessions.router,
    memory.router,
    items.router,
    context.router,
    snapshots.router,
    history.router,
    compaction.router,
    search.router,
    health.router,
    metrics.router,
    admin.router,
    admin.tenants_router,
)
# Included first: FastAPI tries the routers in the order they were included, and each one it
# passes costs every request a few dozen calls; an agent appends and reads its context every
# turn. (POST /items/pop and DELETE /items still reach the memory router: a route of another
# method matches only partially, and the first full match wins.)
HOT_ROUTERS = (items.router, context.router)

API_DESCRIPTION = """Conversation state for LLM agents: append what happened, read back a
budgeted, provider-ready next-turn prompt. Errors are RFC 9457 `application/problem+json`.
A query parameter an operation does not declare is refused, as an unknown field of a JSON body
is: 422 `unknown-query-parameter`, which lists the parameters the operation takes and names the
closest one to a misspelt name."""


def create_app(settings: Settings | None = None) -> FastAPI:
    """``create_app()`` is the factory ASGI servers call (settings from the environment: auth
    ``auto`` is on unless ``session-memory serve`` started the server); ``create_app(settings)``
    (tests, embedding) honours the given settings as they are."""
    built_by_asgi_server = settings is None
    settings = settings or get_settings()
    refused = startup_problem(settings)
    if refused:
        raise RuntimeError(refused)
    mcp_endpoint = McpEndpoint(max_body_bytes=settings.limits.max_body_bytes)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # Build the default tokenizer now (about 0.3 s), not inside the first append.
        get_encoding(DEFAULT_TOKENIZER)
        bound_token_counts(
            max_entries=settings.token_cache_entries, max_chars=settings.token_cache_chars
        )
        store = Store.from_url(
            settings.database_url,
            pool_size=settings.db_pool_size,
            max_overflow=settings.db_max_overflow,
            item_cache_items=settings.context_cache_items,
            prompt_cache_entries=settings.context_cache_prompts,
            item_cache_chars=settings.context_cache_item_chars,
            prompt_cache_chars=settings.context_cache_prompt_chars,
            window_sizes=settings.context_window_sizes,
            lock_wait_seconds=settings.lock.wait_seconds,
        )
        locks = build_locks(
            settings.redis_url,
            wait_seconds=settings.lock.wait_seconds,
            ttl_seconds=settings.lock.ttl_seconds,
            socket_timeout=settings.lock.redis_timeout_seconds,
        )
        app.state.runtime = Runtime(settings=settings, store=store, locks=locks)
        start_compaction(app.state.runtime)
        housekeeping = start_housekeeping(app.state.runtime)
        indexer = start_indexer(app.state.runtime)
        app.state.key_resolver = KeyResolver(store, settings.auth)
        instrument(app, app.state.runtime)
        if built_by_asgi_server:
            tune_for_serving()
        try:
            async with mcp_endpoint.running():  # the MCP transport's own lifespan
                yield
        finally:
            await stop_housekeeping(housekeeping)
            await stop_indexer(indexer)
            await stop_compaction(app.state.runtime)
            await locks.close()
            await store.dispose()

    app = FastAPI(
        title="Session Memory Service",
        version="0.1.0",
        description=API_DESCRIPTION,
        lifespan=lifespan,
        # /docs and /redoc are served by app.api.routes.ui from packaged assets (no CDN).
        docs_url=None,
        redoc_url=None,
    )
    install_problem_handlers(app)
    app.state.auth_required = auth_required(settings, built_by_asgi_server=built_by_asgi_server)
    app.state.default_tenant = settings.auth.default_tenant
    serve_hot_routes_first(app, ROUTERS)
    for router in (*HOT_ROUTERS, *(r for r in ROUTERS if r not in HOT_ROUTERS)):
        app.include_router(router)
    mcp_endpoint.mount(app)  # /mcp: app.mcp, not in the OpenAPI document
    app.include_router(whoami.router)
    app.include_router(ui.router)
    app.add_middleware(JsonGuardMiddleware, max_depth=settings.limits.max_json_depth)
    if not app.state.auth_required:
        # DNS rebinding: without keys, only a loopback (or listed) Host, on every route; inside
        # AuthMiddleware, whose refusal of a request received off loopback says more.
        app.add_middleware(LoopbackHostGuard, allowed=HostAllowList(settings.allowed_hosts))
    app.add_middleware(
        AuthMiddleware,
        enabled=app.state.auth_required,
        default_tenant=settings.auth.default_tenant,
    )
    # ``session-memory serve`` configured logging itself (app.logs.log_config): with JSON
    # lines, its access lines are written without a logging record (AccessLineWriter).
    own_log = built_by_asgi_server and settings.serve.via_cli and settings.log_format == "json"
    app.add_middleware(
        EdgeMiddleware,
        max_bytes=settings.limits.max_body_bytes,
        access_writer=AccessLineWriter(settings.log_level) if own_log else None,
    )
    _declare_problem_schema(app)
    _list_paths_in_order(app)
    declare_security(app)
    declare_examples(app)
    return app


def _list_paths_in_order(app: FastAPI) -> None:
    """The document lists operations in ``ROUTERS`` order, whatever order they are matched
    in: paths by their first operation, each path's operations in turn (others, such as
    /v1/whoami, after them)."""
    original = app.openapi
    operations = [
        (route.path, method.lower())
        for router in ROUTERS
        for route in router.routes
        for method in sorted(getattr(route, "methods", None) or ())
    ]
    rank = {operation: n for n, operation in enumerate(operations)}
    path_rank = {path: rank[(path, method)] for path, method in reversed(operations)}
    last = len(rank)

    def openapi() -> dict[str, Any]:
        schema = original()
        schema["paths"] = {
            path: dict(sorted(ops.items(), key=lambda op: rank.get((path, op[0]), last)))
            for path, ops in sorted(
                schema.get("paths", {}).items(), key=lambda p: path_rank.get(p[0], last)
            )
        }
        return schema

    app.openapi = openapi  # type: ignore[method-assign]


def _declare_problem_schema(app: FastAPI) -> None:
    """Errors are problem documents in the spec too: ``Problem`` is a named component and
    FastAPI's default 422 body is replaced by it."""
    original = app.openapi
    done: list[dict[str, Any]] = []

    def openapi() -> dict[str, Any]:
        if done:
            return done[0]
        schema = original()
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        problem = Problem.model_json_schema(ref_template="#/components/schemas/{model}")
        for name, definition in problem.pop("$defs", {}).items():
            components.setdefault(name, definition)
        components.setdefault("Problem", problem)
        if "JsonValue" in components:
            components["JsonValue"] = JSON_VALUE_SCHEMA
        problem_ref = {PROBLEM_MEDIA_TYPE: {"schema": {"$ref": "#/components/schemas/Problem"}}}
        for path, methods in schema.get("paths", {}).items():
            for operation in methods.values():
                responses = operation.setdefault("responses", {})
                if path.startswith("/v1/") and "422" not in responses:
                    # An unknown query parameter is refused on every /v1 route (query_guard).
                    responses["422"] = {"description": "Invalid input"}
                    operation["responses"] = responses = dict(sorted(responses.items()))
                if path.startswith("/v1/") and "503" not in responses:
                    # Every /v1 request may read the database (its key, at least): a dropped
                    # connection is a 503 database-unavailable with Retry-After.
                    responses["503"] = {
                        "description": "Database unavailable (see Retry-After)",
                        "content": dict(problem_ref),
                    }
                for status, response in responses.items():
                    refs = str(response.get("content", ""))
                    if status[0] in "45" and ("Readiness" not in refs):
                        response["content"] = dict(problem_ref)
                if "422" in responses and responses["422"].get("description") in (
                    None,
                    "Validation Error",  # FastAPI's default
                ):
                    responses["422"]["description"] = "Invalid input"
                if "requestBody" in operation and "415" not in responses:
                    # Every body is JSON; another content type is refused (app.api.body_guard).
                    unsupported = {
                        "description": "The body is not declared as JSON "
                        "(Content-Type: application/json)",
                        "content": dict(problem_ref),
                    }
                    operation["responses"] = dict(
                        sorted([*responses.items(), ("415", unsupported)], key=lambda r: r[0])
                    )
        for unused in ("HTTPValidationError", "ValidationError"):
            components.pop(unused, None)
        app.openapi_schema = schema
        done.append(schema)
        return schema

    app.openapi = openapi  # type: ignore[method-assign]
