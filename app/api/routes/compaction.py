"""/v1/sessions/{id}/compact and /compactions: compact working memory, list past results."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field

from app.api.deps import ActorDep, IdempotencyDep, RuntimeDep
from app.api.encoding import dumps
from app.api.problems import problem_responses
from app.api.query_guard import GuardedRoute
from app.api.responses import json_response
from app.api.schemas import StrictBody
from app.api.session_ids import SessionIdPath
from app.domain.compaction import CompactResult
from app.services import compaction as service
from app.services.runtime import Encoded

router = APIRouter(
    prefix="/v1/sessions/{session_id}",
    tags=["compaction"],
    route_class=GuardedRoute,
)

SessionId = SessionIdPath


class CompactRequest(StrictBody):
    """How to compact. Without keep settings the newest user turn is kept."""

    model_config = ConfigDict(extra="forbid")

    policy: Literal["window", "structured", "llm"] = Field(
        "structured",
        description="`window`: drop old items, no summary; `structured`: mechanical sectioned "
        "summary, no LLM; `llm`: the configured OpenAI-compatible model writes the summary",
    )
    keep_last_items: int | None = Field(
        None, ge=0, le=1_000_000, description="keep at least this many newest items"
    )
    keep_last_tokens: int | None = Field(
        None, ge=0, le=100_000_000, description="keep at least this many newest tokens"
    )
    pinned_prefix_items: int = Field(
        0, ge=0, le=1_000_000, description="the first N items of working memory always stay"
    )
    instructions: str | None = Field(
        None, max_length=4000, description="`llm` only: extra instructions for the summary"
    )
    model: str | None = Field(
        None, min_length=1, max_length=200, description="`llm` only: overrides the configured model"
    )
    dry_run: bool = Field(False, description="compute and return the result, change nothing")


class CompactionList(BaseModel):
    items: list[CompactResult]
    next_cursor: str | None = Field(
        description="Pass as `cursor` for the next (older) page; null at the end"
    )


@router.post(
    "/compact",
    response_model=CompactResult,
    operation_id="compactSession",
    summary="Compact working memory into a summary (the compacted items stay in history)",
    description="Nothing to compact is not an error: `compacted_items` is 0 and the report's "
    "first note says why. 409 if a restore, clear or another compaction committed while an "
    "`llm` summary was being written; 502 (naming the cause) if the model failed, with working "
    "memory untouched; 403 `llm-not-configured` for `policy: llm` on a server without an LLM "
    "endpoint (not temporary: choose the structured or window policy).",
    responses={
        **problem_responses(400, 404, 409, 413, 422, 502, 503),
        403: {
            **problem_responses(403)[403],
            "description": "The key lacks the scope, or `llm-not-configured`: `policy: llm` on "
            "a server without an LLM endpoint",
        },
    },
)
async def compact_session(
    session_id: SessionId,
    body: CompactRequest,
    rt: RuntimeDep,
    actor: ActorDep,
    idem: IdempotencyDep,
) -> Response:
    request = service.CompactRequest(**body.model_dump())
    encoded = await service.compact_session(
        rt, actor, session_id, request=request, idempotency=idem
    )
    return json_response(encoded)


@router.get(
    "/compactions",
    response_model=CompactionList,
    operation_id="listCompactions",
    summary="Past compact results, newest first",
    responses=problem_responses(404, 422),
)
async def list_compactions(
    session_id: SessionId,
    rt: RuntimeDep,
    actor: ActorDep,
    cursor: Annotated[str | None, Query(max_length=128)] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> Response:
    page, next_cursor = await service.list_compactions(
        rt, actor, session_id, cursor=cursor, limit=limit
    )
    body = {"items": [r.model_dump(mode="json") for r in page], "next_cursor": next_cursor}
    return json_response(Encoded(200, dumps(body)))
