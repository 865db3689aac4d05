"""/v1/sessions/{id}/events and /history: the operation log and every item ever appended."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from fastapi.responses import Response

from app.api.deps import ActorDep, RuntimeDep
from app.api.encoding import dumps
from app.api.memory_schemas import EventList, HistoryList
from app.api.paging import SeqPosition
from app.api.problems import problem_responses
from app.api.query_guard import GuardedRoute
from app.api.responses import json_response
from app.api.session_ids import SessionIdPath
from app.services import history as service
from app.services.runtime import Encoded

router = APIRouter(prefix="/v1/sessions/{session_id}", tags=["history"], route_class=GuardedRoute)

SessionId = SessionIdPath
Limit = Annotated[int, Query(ge=1, le=1000)]


@router.get(
    "/events",
    response_model=EventList,
    operation_id="listEvents",
    summary="The operation log, oldest first, paginated by seq",
    responses=problem_responses(404, 422),
)
async def list_events(
    session_id: SessionId,
    rt: RuntimeDep,
    actor: ActorDep,
    after_seq: SeqPosition,
    limit: Limit = 100,
) -> Response:
    rows, next_cursor = await service.list_events(
        rt, actor, session_id, after_seq=after_seq, limit=limit
    )
    items = [
        {
            "seq": e.seq,
            "type": e.type,
            "version": e.version,
            "request_id": e.request_id,
            "actor": e.actor,
            "data": e.data,
            "created_at": e.created_at,
        }
        for e in rows
    ]
    return json_response(Encoded(200, dumps({"items": items, "next_cursor": next_cursor})))


@router.get(
    "/history",
    response_model=HistoryList,
    operation_id="listHistory",
    summary="Every item ever appended, archived ones included, paginated by seq",
    responses=problem_responses(404, 422),
)
async def list_history(
    session_id: SessionId,
    rt: RuntimeDep,
    actor: ActorDep,
    after_seq: SeqPosition,
    limit: Limit = 100,
) -> Response:
    rows, next_cursor = await service.list_history(
        rt, actor, session_id, after_seq=after_seq, limit=limit
    )
    items: list[dict[str, Any]] = [
        {**e.item.to_wire(), "archived": e.archived, "archived_reason": e.archived_reason}
        for e in rows
    ]
    return json_response(Encoded(200, dumps({"items": items, "next_cursor": next_cursor})))
