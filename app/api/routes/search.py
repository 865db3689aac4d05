"""/v1/sessions/{id}/search and /v1/search: ranked full-text search over one session or the
caller's whole tenant (keyset pages; the tenant-wide search ranks a bounded candidate set)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.responses import Response

from app.api.deps import ActorDep, RuntimeDep
from app.api.encoding import dumps, search_body
from app.api.memory_schemas import SearchResults
from app.api.problems import problem_responses
from app.api.responses import json_response
from app.api.session_ids import SessionIdPath
from app.services import search as service
from app.services.runtime import Encoded
from app.store.search import SearchHit

router = APIRouter(tags=["search"])

SessionId = SessionIdPath
Q = Annotated[
    str,
    Query(
        min_length=1,
        max_length=1000,
        description="Words to find (all of them); a query with no word in it (only spaces or "
        "punctuation) finds nothing",
    ),
]
ScopeQuery = Annotated[
    service.Scope,
    Query(description="`memory`: working memory only; `history`: archived items too"),
]
Limit = Annotated[int, Query(ge=1, le=100)]
CURSOR_PATTERN = service.CURSOR_PATTERN
Cursor = Annotated[
    str | None,
    Query(
        pattern=CURSOR_PATTERN,
        max_length=service.CURSOR_MAX_CHARS,
        description="`next_cursor` of the previous page (opaque)",
    ),
]


def _encode(hits: list[SearchHit], next_cursor: str | None) -> Encoded:
    return Encoded(200, dumps(search_body(hits, next_cursor)))


@router.get(
    "/v1/sessions/{session_id}/search",
    response_model=SearchResults,
    operation_id="searchSession",
    summary="Full-text search in one session's working memory or history, best first",
    responses=problem_responses(404, 422),
)
async def search_session(
    session_id: SessionId,
    q: Q,
    rt: RuntimeDep,
    actor: ActorDep,
    scope: ScopeQuery = "memory",
    limit: Limit = 20,
    cursor: Cursor = None,
) -> Response:
    hits, next_cursor = await service.search_session(
        rt, actor, session_id, q=q, scope=scope, limit=limit, cursor=cursor
    )
    return json_response(_encode(hits, next_cursor))


@router.get(
    "/v1/search",
    response_model=SearchResults,
    operation_id="searchAll",
    summary="Full-text search across the tenant's sessions, best first",
    description=f"Ranks at most the first {service.TENANT_CANDIDATES} matching items the index "
    "finds (a bound on the cost, whatever the tenant holds): a query that matches more should "
    "be narrowed.",
    responses=problem_responses(422),
)
async def search_all(
    q: Q,
    rt: RuntimeDep,
    actor: ActorDep,
    scope: ScopeQuery = "memory",
    limit: Limit = 20,
    cursor: Cursor = None,
) -> Response:
    hits, next_cursor = await service.search_all(
        rt, actor, q=q, scope=scope, limit=limit, cursor=cursor
    )
    return json_response(_encode(hits, next_cursor))
