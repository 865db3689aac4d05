"""/v1/sessions: create, list, read, update, delete."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Annotated, Literal

from fastapi import APIRouter, Query
from fastapi.responses import Response

from app.api.deps import ActorDep, IdempotencyDep, IfMatchDep, RuntimeDep
from app.api.encoding import dumps, encode_session, session_dict
from app.api.problems import problem_responses
from app.api.query_guard import GuardedRoute
from app.api.responses import etag, json_response
from app.api.schemas import SessionCreate, SessionList, SessionRead, SessionUpdate
from app.api.session_ids import SessionIdPath
from app.domain.errors import InvalidInput
from app.domain.ids import SESSION_ID_PATTERN, SESSION_PREFIX_MAX, is_valid_session_id
from app.services import indexing, retention
from app.services import sessions as service
from app.services.runtime import Encoded

router = APIRouter(prefix="/v1/sessions", tags=["sessions"], route_class=GuardedRoute)

SessionId = SessionIdPath


def _cursor_encode(after_id: str | None) -> str | None:
    # The cursor is the last id of the page: any session id is a valid position, so the spec
    # can say exactly what a cursor looks like (clients percent-encode it in the query).
    return after_id or None


def _cursor_decode(cursor: str | None) -> str | None:
    if not cursor:
        return None
    if not is_valid_session_id(cursor) and not _UPDATED_RE.match(cursor):
        raise InvalidInput(
            "invalid cursor", errors=[{"loc": ["query", "cursor"], "msg": "not a cursor"}]
        )
    return cursor


@router.post(
    "",
    status_code=201,
    response_model=SessionRead,
    operation_id="createSession",
    summary="Create a session",
    responses={
        **problem_responses(409, 413, 422, 503),
        # a key confined to a prefix sees no session outside it, nor may create one there
        404: {**problem_responses(404)[404], "description": "The id is outside the key's prefix"},
    },
)
async def create_session(
    body: SessionCreate, rt: RuntimeDep, actor: ActorDep, idem: IdempotencyDep
) -> Response:
    command = service.SessionCreateCommand(
        id=body.id, metadata=body.metadata, config=body.config.to_dict(), summary=body.summary
    )
    encoded = await service.create_session(
        rt, actor, command, encode=encode_session(201), idempotency=idem
    )
    return json_response(encoded)


# order=updated: "<microseconds since 1970 UTC>.<the id's UTF-8 in hex>" of the page's last
# row. Every string of that form names a position (as a search cursor does); any other string
# (a session id, say) names the start. The spec's pattern admits both orders' cursors.
_UPDATED_RE = re.compile(r"^([0-9]{1,18})\.((?:[0-9a-f]{2}){1,1024})$")
_CURSOR_PATTERN = f"{SESSION_ID_PATTERN}|{_UPDATED_RE.pattern}"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _updated_cursor_encode(position: tuple[datetime, str] | None) -> str | None:
    if position is None:
        return None
    when, session_id = position
    micros = (when - _EPOCH) // timedelta(microseconds=1)
    return f"{micros}.{session_id.encode().hex()}"


def _updated_cursor_decode(cursor: str | None) -> tuple[datetime, str] | None:
    match = _UPDATED_RE.match(cursor or "")
    if match is None:
        return None
    try:
        when = _EPOCH + timedelta(microseconds=int(match.group(1)))
    except OverflowError:
        when = datetime.max.replace(tzinfo=UTC)
    session_id = bytes.fromhex(match.group(2)).decode("utf-8", "replace").replace("\x00", "\ufffd")
    return when, session_id


@router.get(
    "",
    response_model=SessionList,
    operation_id="listSessions",
    summary="List sessions (cursor-paginated, by id or newest first)",
    responses=problem_responses(422),
)
async def list_sessions(
    rt: RuntimeDep,
    actor: ActorDep,
    cursor: Annotated[
        str | None,
        Query(
            min_length=1,
            max_length=1024,
            pattern=_CURSOR_PATTERN,
            description="`next_cursor` of the previous page (listed with the same `order`; "
            "with `order=id` it is the last id of that page)",
        ),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    prefix: Annotated[
        str | None,
        Query(max_length=SESSION_PREFIX_MAX, description="Only ids with this prefix"),
    ] = None,
    order: Annotated[
        Literal["id", "updated"],
        Query(
            description="`id`: by id, ascending; `updated`: the most recently written first "
            "(then by id, descending)"
        ),
    ] = "id",
) -> Response:
    if order == "updated":
        rows, position = await service.list_sessions_by_updated(
            rt, actor, before=_updated_cursor_decode(cursor), limit=limit, prefix=prefix
        )
        next_cursor = _updated_cursor_encode(position)
    else:
        rows, next_after = await service.list_sessions(
            rt, actor, after_id=_cursor_decode(cursor), limit=limit, prefix=prefix
        )
        next_cursor = _cursor_encode(next_after)
    body = {"items": [session_dict(r) for r in rows], "next_cursor": next_cursor}
    return json_response(Encoded(200, dumps(body)))


@router.get(
    "/{session_id}",
    response_model=SessionRead,
    operation_id="getSession",
    summary="Read a session (ETag: its version)",
    responses=problem_responses(404),
)
async def get_session(session_id: SessionId, rt: RuntimeDep, actor: ActorDep) -> Response:
    state, storage = await retention.session_with_storage(rt, actor, session_id)
    counts = await indexing.index_counts(rt, actor.tenant_id, session_id)
    search_index = None
    if counts is not None and rt.embedder is not None:
        search_index = {
            "model": rt.embedder.model,
            "indexed": counts.indexed,
            "pending": counts.pending,
            "pending_exact": counts.pending_exact,
        }
    body = session_dict(state) | {"storage": storage, "search_index": search_index}
    return json_response(Encoded(200, dumps(body), version=state.version))


@router.patch(
    "/{session_id}",
    response_model=SessionRead,
    operation_id="updateSession",
    summary="Update metadata, config or summary",
    responses={
        **problem_responses(400, 404, 412, 413, 422, 503),
        409: {
            **problem_responses(409)[409],
            "description": "`transaction-conflict`: a concurrent transaction conflicted with "
            "this one; nothing was written, send it again",
        },
    },
)
async def update_session(
    session_id: SessionId,
    body: SessionUpdate,
    rt: RuntimeDep,
    actor: ActorDep,
    if_match: IfMatchDep,
) -> Response:
    fields = body.model_fields_set
    values = {name: getattr(body, name) for name in ("metadata", "config", "summary")}
    if body.config is not None:
        values["config"] = body.config.to_dict()
    command = service.SessionUpdateCommand(
        **{name: value for name, value in values.items() if name in fields}
    )
    encoded = await service.update_session(
        rt, actor, session_id, command, if_match=if_match, encode=encode_session(200)
    )
    return json_response(encoded)


@router.delete(
    "/{session_id}",
    status_code=204,
    operation_id="deleteSession",
    summary="Delete a session and everything it holds",
    responses=problem_responses(400, 404, 412, 503),
)
async def delete_session(
    session_id: SessionId, rt: RuntimeDep, actor: ActorDep, if_match: IfMatchDep
) -> Response:
    await service.delete_session(rt, actor, session_id, if_match=if_match)
    return Response(status_code=204)


__all__ = ["etag", "router"]
