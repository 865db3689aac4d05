"""What a tool call answers, and who made it.

A tool that succeeds returns the REST response's body twice: as ``structured_content`` (the
JSON object itself) and as one text block (the same JSON, for clients that only show text).
A tool that fails returns an MCP tool error (``is_error``) whose content is the problem
document the REST route would have answered: ``type``, ``title``, ``status``, ``detail`` and,
for invalid input, ``errors``.

The caller is the ``Actor`` that ``app.mcp.endpoint`` resolved from the HTTP request that
carried the call (the SDK hands the tool that request); the runtime is the application's.
"""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import Context
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS, CallToolResult, TextContent
from pydantic import ValidationError
from starlette.requests import Request

from app import jsonutil
from app.api.problems import PROBLEM_BASE, status_for
from app.domain import errors as e
from app.domain.wire_errors import is_type_label, merge_union_errors
from app.services.runtime import Actor, Encoded, Runtime

# JSON-RPC error code the MCP specification gives an unknown resource.
RESOURCE_NOT_FOUND = -32002


class Refused(Exception):
    """A tool or resource refused the call: carries the problem document to answer with."""

    def __init__(self, problem: dict[str, Any]) -> None:
        super().__init__(problem.get("detail", ""))
        self.problem = problem


def problem(
    status: int,
    code: str,
    title: str,
    detail: str,
    *,
    errors: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "type": PROBLEM_BASE + code,
        "title": title,
        "status": status,
        "detail": detail,
    }
    if errors is not None:
        body["errors"] = errors
    return body


def _clean_errors(
    raw: list[Any], *, prefix: tuple[str, ...] = (), default_type: str = "invalid"
) -> list[dict[str, Any]]:
    out = []
    for err in raw:
        # wire names only: pydantic's labels of union members are no argument's name
        loc = [x if isinstance(x, int) else str(x) for x in err.get("loc", [])]
        loc = [x for x in loc if not is_type_label(x)]
        kind = str(err.get("type") or default_type)
        out.append({"loc": [*prefix, *loc], "msg": str(err.get("msg", "")), "type": kind})
    return merge_union_errors(out)


def domain_problem(exc: e.DomainError) -> dict[str, Any]:
    """The problem document ``app.api.problems`` answers ``exc`` with over REST."""
    status = status_for(exc)
    errors = (
        _clean_errors(exc.errors, default_type=exc.code.replace("-", "_"))
        if exc.errors is not None
        else None
    )
    if status == 422 and errors is None:
        errors = []
    body = problem(status, exc.code, exc.title, exc.detail, errors=errors)
    if isinstance(exc, e.Unavailable):
        body["retry_after"] = exc.retry_after
    return body


def validation_problem(exc: ValidationError, *, prefix: tuple[str, ...] = ()) -> dict[str, Any]:
    errors = _clean_errors(list(exc.errors()), prefix=prefix)
    return problem(
        422,
        "validation-error",
        "Request validation failed",
        f"{len(errors)} invalid argument(s): "
        + "; ".join(f"{'.'.join(map(str, err['loc']))}: {err['msg']}" for err in errors),
        errors=errors,
    )


def scope_problem(needed: str, actor: Actor) -> dict[str, Any]:
    return problem(
        403,
        "insufficient-scope",
        "Insufficient scope",
        f"this tool needs the {needed!r} scope; the key has {', '.join(sorted(actor.scopes))}",
    )


def _text(value: Any) -> str:
    return jsonutil.dumps(value)


def ok(encoded: Encoded) -> CallToolResult:
    """A tool's answer: the REST body of the same operation."""
    body = jsonutil.loads(encoded.body) if encoded.body else {}
    return CallToolResult(
        content=[TextContent(type="text", text=encoded.body or "{}")],
        structured_content=body,
    )


def ok_value(body: dict[str, Any]) -> CallToolResult:
    return ok(Encoded(200, _text(body)))


def failed(problem_body: dict[str, Any]) -> CallToolResult:
    """An MCP tool error carrying a problem document."""
    return CallToolResult(
        content=[TextContent(type="text", text=_text(problem_body))],
        structured_content=problem_body,
        is_error=True,
    )


def resource_error(problem_body: dict[str, Any]) -> MCPError:
    """A failed resource read: a JSON-RPC error whose ``data`` is the problem document."""
    status = int(problem_body.get("status", 500))
    if status == 404:
        code = RESOURCE_NOT_FOUND
    elif status < 500:
        code = INVALID_PARAMS
    else:
        code = INTERNAL_ERROR
    return MCPError(code=code, message=str(problem_body.get("detail", "")), data=problem_body)


def caller(ctx: Context) -> tuple[Runtime, Actor]:
    """The runtime and the caller of the HTTP request that carried this message."""
    request = ctx.request_context.request
    if not isinstance(request, Request):  # only reachable through the /mcp endpoint
        raise Refused(problem(401, "api-key-required", "API key required", "no HTTP request"))
    actor = request.scope.get("state", {}).get("actor")
    if not isinstance(actor, Actor):
        raise Refused(problem(401, "api-key-required", "API key required", "no caller"))
    return request.app.state.runtime, actor


def require(actor: Actor, scope: str) -> None:
    """The scope the REST route for the same operation needs (read, or write)."""
    if scope not in actor.scopes:
        raise Refused(scope_problem(scope, actor))
