"""/v1/sessions/{id}/items: append and read working memory."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import Response

from app.api.deps import (
    IDEMPOTENCY_KEY,
    IF_MATCH,
    ActorDep,
    ReadInRoute,
    RuntimeDep,
    actor_of,
    expected_version,
    idempotency_of,
    read_all,
    runtime_of,
)
from app.api.encoding import dumps, encode_append, items_dicts, rendered_page
from app.api.hot_route import hot_route
from app.api.paging import SeqPosition
from app.api.problems import problem_responses
from app.api.query_guard import GuardedRoute
from app.api.responses import json_response
from app.api.schemas import (
    AppendRead,
    FormatName,
    ItemList,
    ItemRead,
    ItemsAppend,
    RenderedItemList,
)
from app.api.session_ids import SESSION_ID_DESCRIPTION, SESSION_ID_IN_PATH, SessionIdValue
from app.services import items as service
from app.services.runtime import Encoded

router = APIRouter(
    prefix="/v1/sessions/{session_id}/items",
    tags=["items"],
    route_class=GuardedRoute,
)

SessionId = Annotated[SessionIdValue, Path(description=SESSION_ID_DESCRIPTION)]


_CREATE = ReadInRoute(
    "query",
    "create",
    bool,
    {"type": "boolean"},
    description="Create the session if it does not exist",
    title="Create",
    default=False,
)
_APPEND_PARAMETERS = (SESSION_ID_IN_PATH, _CREATE, IF_MATCH, IDEMPOTENCY_KEY)


@hot_route(
    router,
    "POST",
    "",
    status_code=201,
    response_model=AppendRead,
    operation_id="appendItems",
    summary="Append a batch of items (atomic: all or none)",
    responses=problem_responses(400, 404, 409, 412, 413, 422, 503),
    openapi_extra={"parameters": [param.spec for param in _APPEND_PARAMETERS]},
)
async def append_items(request: Request, body: ItemsAppend) -> Response:
    # Every agent's hot path: the path, query and headers are read here (``ReadInRoute``),
    # not declared as parameters, and the runtime and caller without Depends (app.api.deps).
    # (An append may create the session, ``?create=true``: the same rule as every session id.)
    session_id, create, if_match, idempotency_key = read_all(request, _APPEND_PARAMETERS)
    version = expected_version(if_match)
    idem = idempotency_of(request, idempotency_key, await request.body())
    batch = service.ingest_batch(
        body.format, body.items, system=body.system, system_instruction=body.system_instruction
    )
    encoded = await service.append_items(
        runtime_of(request),
        actor_of(request),
        session_id,
        batch=batch,
        if_match=version,
        create=create,
        idempotency=idem,
        encode=encode_append,
    )
    return json_response(encoded)


@router.get(
    "",
    response_model=ItemList | RenderedItemList,
    operation_id="listItems",
    summary="Working memory, oldest first, paginated by seq",
    responses=problem_responses(404, 422),
)
async def list_items(
    session_id: SessionId,
    rt: RuntimeDep,
    actor: ActorDep,
    after_seq: SeqPosition,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    last: Annotated[
        int | None, Query(ge=1, le=1000, description="The newest N items, oldest first")
    ] = None,
    format: Annotated[
        FormatName,
        Query(
            description="`canonical`: stored items with their envelope; a provider format: "
            "its own items or messages, exactly as appended in it (a page never ends inside a "
            "provider message)"
        ),
    ] = "canonical",
) -> Response:
    page, next_cursor, version = await service.list_items(
        rt, actor, session_id, after_seq=after_seq, limit=limit, last=last, format=format
    )
    if format == "canonical":
        body = dumps({"items": items_dicts(page), "next_cursor": next_cursor})
    else:
        body = dumps({"format": format, **rendered_page(format, page), "next_cursor": next_cursor})
    return json_response(Encoded(200, body, version=version))


@router.get(
    "/{item_id}",
    response_model=ItemRead,
    operation_id="getItem",
    summary="One item of working memory",
    responses=problem_responses(404),
)
async def get_item(
    session_id: SessionId,
    item_id: Annotated[str, Path(max_length=128)],
    rt: RuntimeDep,
    actor: ActorDep,
) -> Response:
    item = await service.get_item(rt, actor, session_id, item_id)
    return json_response(Encoded(200, dumps(item.to_wire())))
