"""/v1/sessions/{id}/items/pop and DELETE /v1/sessions/{id}/items: take the newest item out of
working memory, or empty it (items stay in history)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query
from fastapi.responses import Response

from app.api.deps import ActorDep, IdempotencyDep, IfMatchDep, RuntimeDep
from app.api.encoding import dumps, rendered_page, session_dict
from app.api.memory_schemas import ClearRead, PopRead
from app.api.problems import problem_responses
from app.api.query_guard import GuardedRoute
from app.api.responses import json_response
from app.api.schemas import FormatName
from app.api.session_ids import SESSION_ID_DESCRIPTION, SessionIdValue
from app.services import memory as service
from app.services.runtime import Encoded

router = APIRouter(
    prefix="/v1/sessions/{session_id}/items",
    tags=["items"],
    route_class=GuardedRoute,
)

SessionId = Annotated[SessionIdValue, Path(description=SESSION_ID_DESCRIPTION)]


def _encode_pop(format: FormatName | None) -> Any:
    def encode(result: service.PopResult) -> Encoded:
        body: dict[str, Any] = {"item": result.item.to_wire(), "version": result.version}
        if format is not None:
            items = rendered_page(format, [result.item])["items"]
            body["rendered"] = items[0] if len(items) == 1 else None
        return Encoded(200, dumps(body), version=result.version)

    return encode


def _encode_clear(result: service.ClearResult) -> Encoded:
    body = {"cleared_items": result.cleared_items, "session": session_dict(result.state)}
    return Encoded(200, dumps(body), version=result.state.version)


@router.post(
    "/pop",
    response_model=PopRead,
    operation_id="popItem",
    summary="Remove and return the newest item of working memory (409 if empty)",
    responses=problem_responses(400, 404, 409, 412, 422, 503),
)
async def pop_item(
    session_id: SessionId,
    rt: RuntimeDep,
    actor: ActorDep,
    if_match: IfMatchDep,
    idem: IdempotencyDep,
    format: Annotated[
        FormatName | None,
        Query(
            description="Also return the popped item in this format as `rendered` (exactly as "
            "it was appended, when appended in it; null if the format cannot carry it)"
        ),
    ] = None,
) -> Response:
    encoded = await service.pop_item(
        rt, actor, session_id, if_match=if_match, idempotency=idem, encode=_encode_pop(format)
    )
    return json_response(encoded)


@router.delete(
    "",
    response_model=ClearRead,
    operation_id="clearItems",
    summary="Clear working memory and the summary (items stay in history)",
    responses=problem_responses(400, 404, 412, 503),
)
async def clear_items(
    session_id: SessionId, rt: RuntimeDep, actor: ActorDep, if_match: IfMatchDep
) -> Response:
    encoded = await service.clear_items(
        rt, actor, session_id, if_match=if_match, encode=_encode_clear
    )
    return json_response(encoded)
