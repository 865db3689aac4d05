"""/v1/sessions/{id}/search and /v1/search: ranked search over one session (full text, by
meaning or hybrid, the default) or the caller's whole tenant (the same modes); keyset pages;
the tenant-wide search ranks a bounded candidate set."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.responses import Response

from app.api.deps import ActorDep, RuntimeDep
from app.api.encoding import dumps, search_body
from app.api.memory_schemas import SearchResults
from app.api.problems import problem_responses
from app.api.query_guard import GuardedRoute
from app.api.responses import json_response
from app.api.session_ids import SessionIdPath
from app.domain.projection.budget import MAX_QUERY_CHARS
from app.services import search as service
from app.services.runtime import Encoded

router = APIRouter(tags=["search"], route_class=GuardedRoute)

SessionId = SessionIdPath
Q = Annotated[
    str,
    Query(
        min_length=1,
        max_length=MAX_QUERY_CHARS,
        description="Words to find: any of them matches, rare words weigh more, common words "
        '(stop words) need not match, exact tokens (`E1042`, `retry.py`) and `"quoted '
        'phrases"` rank first. A query with no word in it (only spaces, punctuation or stop '
        "words) finds nothing",
    ),
]
ScopeQuery = Annotated[
    service.Scope,
    Query(description="`memory`: working memory only; `history`: archived items too"),
]
Limit = Annotated[int, Query(ge=1, le=100)]
ModeQuery = Annotated[
    service.Mode,
    Query(
        description="`fulltext`: the query's words; `semantic`: by meaning (the session's "
        "embedded items); `hybrid`: both rankings fused, exact tokens (file names, error codes, "
        "ids) first. With semantic search off on the server, `hybrid` answers as `fulltext` "
        "(the response's `mode` says so) and `semantic` is a 403 `semantic-search-off`; when the "
        "embedder fails, `hybrid` answers as `fulltext` too and `semantic` is a 502"
    ),
]
MinScore = Annotated[
    float | None,
    Query(
        ge=-1.0,
        le=1.0,
        description="`semantic`/`hybrid`: a hit found by meaning counts when its cosine "
        "similarity (`scores.semantic`) is at least this; omitted: the relevance floor of "
        "the server's embedding model (docs/semantic-search.md)",
    ),
]
CURSOR_PATTERN = service.CURSOR_PATTERN
Cursor = Annotated[
    str | None,
    Query(
        pattern=CURSOR_PATTERN,
        max_length=service.CURSOR_MAX_CHARS,
        description="`next_cursor` of the previous page (opaque)",
    ),
]


def _encode_page(page: service.SearchPage) -> Encoded:
    body = search_body(
        [s.hit for s in page.hits],
        page.next_cursor,
        scores=[(s.fulltext, s.semantic) for s in page.hits],
        mode=page.mode,
    )
    return Encoded(200, dumps(body))


@router.get(
    "/v1/sessions/{session_id}/search",
    response_model=SearchResults,
    operation_id="searchSession",
    summary="Search one session's working memory or history (full text, by meaning, or both)",
    responses={
        **problem_responses(404, 422, 502),
        403: {
            **problem_responses(403)[403],
            "description": "The key lacks the scope, or `semantic-search-off`: `mode=semantic` "
            "on a server without an embedder",
        },
    },
)
async def search_session(
    session_id: SessionId,
    q: Q,
    rt: RuntimeDep,
    actor: ActorDep,
    scope: ScopeQuery = "memory",
    limit: Limit = 20,
    cursor: Cursor = None,
    mode: ModeQuery = "hybrid",
    min_score: MinScore = None,
) -> Response:
    page = await service.search_session_modes(
        rt,
        actor,
        session_id,
        q=q,
        scope=scope,
        limit=limit,
        cursor=cursor,
        mode=mode,
        min_score=min_score,
    )
    return json_response(_encode_page(page))


@router.get(
    "/v1/search",
    response_model=SearchResults,
    operation_id="searchAll",
    summary="Search across the tenant's sessions (full text, by meaning, or both), best first",
    description=f"Full text ranks at most the best {service.TENANT_CANDIDATES} matching items "
    f"(the same set on every page), and meaning at most {service.TENANT_VECTOR_CANDIDATES} embedded items "
    "(every one when the tenant has fewer): a bound on the cost, whatever the tenant holds. A "
    "query that matches more should be narrowed, or asked of one session.",
    responses={
        **problem_responses(422, 502),
        403: {
            **problem_responses(403)[403],
            "description": "The key lacks the scope, or `semantic-search-off`: `mode=semantic` "
            "on a server without an embedder",
        },
    },
)
async def search_all(
    q: Q,
    rt: RuntimeDep,
    actor: ActorDep,
    scope: ScopeQuery = "memory",
    limit: Limit = 20,
    cursor: Cursor = None,
    mode: ModeQuery = "hybrid",
    min_score: MinScore = None,
) -> Response:
    page = await service.search_all_modes(
        rt,
        actor,
        q=q,
        scope=scope,
        limit=limit,
        cursor=cursor,
        mode=mode,
        min_score=min_score,
    )
    return json_response(_encode_page(page))
