"""/v1/sessions/{id}/snapshots, /restore and /fork: freeze, export, restore and branch a
session's state."""

from __future__ import annotations

import re
from typing import Annotated

from fastapi import APIRouter, Path, Query
from fastapi.responses import Response

from app.api.deps import ActorDep, IdempotencyDep, IfMatchDep, RuntimeDep
from app.api.encoding import dumps, encode_session
from app.api.memory_schemas import (
    ForkCreate,
    RestoreRead,
    RestoreRequest,
    SnapshotCreate,
    SnapshotDocument,
    SnapshotList,
    SnapshotRead,
)
from app.api.problems import problem_responses
from app.api.query_guard import GuardedRoute
from app.api.responses import json_response
from app.api.schemas import SessionRead
from app.api.session_ids import SessionIdPath
from app.api.snapshot_encoding import encode_restore, encode_snapshot, snapshot_dict
from app.domain.errors import InvalidInput
from app.services import snapshots as service
from app.services.runtime import Encoded

router = APIRouter(
    prefix="/v1/sessions/{session_id}",
    tags=["snapshots"],
    route_class=GuardedRoute,
)

SessionId = SessionIdPath
SnapshotId = Annotated[str, Path(description="Snapshot id", max_length=128)]


# A snapshot page cursor is a session version (decimal digits); the spec declares the pattern.
CURSOR_PATTERN = r"^[0-9]{1,18}$"
_CURSOR_RE = re.compile(CURSOR_PATTERN)


def _cursor(cursor: str | None) -> int | None:
    if cursor is None:
        return None
    if not _CURSOR_RE.fullmatch(cursor):  # FastAPI checked it too; str.isdigit() is too lax
        raise InvalidInput(
            "invalid cursor", errors=[{"loc": ["query", "cursor"], "msg": "not a cursor"}]
        )
    return int(cursor)


@router.post(
    "/snapshots",
    status_code=201,
    response_model=SnapshotRead,
    operation_id="createSnapshot",
    summary="Freeze working memory, summary, last compact result, config and metadata",
    responses=problem_responses(400, 404, 412, 413, 422, 503),
)
async def create_snapshot(
    session_id: SessionId,
    rt: RuntimeDep,
    actor: ActorDep,
    if_match: IfMatchDep,
    idem: IdempotencyDep,
    body: SnapshotCreate | None = None,
) -> Response:
    encoded = await service.create_snapshot(
        rt,
        actor,
        session_id,
        label=body.label if body else None,
        if_match=if_match,
        idempotency=idem,
        encode=encode_snapshot,
    )
    return json_response(encoded)


@router.get(
    "/snapshots",
    response_model=SnapshotList,
    operation_id="listSnapshots",
    summary="List snapshots, newest first (cursor-paginated)",
    responses=problem_responses(404, 422),
)
async def list_snapshots(
    session_id: SessionId,
    rt: RuntimeDep,
    actor: ActorDep,
    cursor: Annotated[
        str | None, Query(pattern=CURSOR_PATTERN, description="`next_cursor` of a page")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> Response:
    rows, next_version = await service.list_snapshots(
        rt, actor, session_id, before_version=_cursor(cursor), limit=limit
    )
    body = {
        "items": [snapshot_dict(r) for r in rows],
        "next_cursor": str(next_version) if next_version is not None else None,
    }
    return json_response(Encoded(200, dumps(body)))


@router.get(
    "/snapshots/{snapshot_id}",
    response_model=SnapshotDocument,
    operation_id="exportSnapshot",
    summary="Export a snapshot as one versioned JSON document",
    responses=problem_responses(404),
)
async def export_snapshot(
    session_id: SessionId, snapshot_id: SnapshotId, rt: RuntimeDep, actor: ActorDep
) -> Response:
    document = await service.export_snapshot(rt, actor, session_id, snapshot_id)
    return json_response(Encoded(200, dumps(document)))


@router.delete(
    "/snapshots/{snapshot_id}",
    status_code=204,
    operation_id="deleteSnapshot",
    summary="Delete a snapshot",
    responses=problem_responses(404, 503),
)
async def delete_snapshot(
    session_id: SessionId, snapshot_id: SnapshotId, rt: RuntimeDep, actor: ActorDep
) -> Response:
    await service.delete_snapshot(rt, actor, session_id, snapshot_id)
    return Response(status_code=204)


@router.post(
    "/restore",
    response_model=RestoreRead,
    operation_id="restoreSession",
    summary="Restore a snapshot (by id or as a whole exported document); undoable",
    responses=problem_responses(400, 404, 409, 412, 413, 422, 503),
)
async def restore_session(
    session_id: SessionId,
    body: RestoreRequest,
    rt: RuntimeDep,
    actor: ActorDep,
    if_match: IfMatchDep,
    idem: IdempotencyDep,
) -> Response:
    encoded = await service.restore_session(
        rt,
        actor,
        session_id,
        snapshot_id=body.snapshot_id,
        document=body.snapshot,
        if_match=if_match,
        idempotency=idem,
        encode=encode_restore,
    )
    return json_response(encoded)


@router.post(
    "/fork",
    status_code=201,
    response_model=SessionRead,
    operation_id="forkSession",
    summary="Start a new session from this one's current state or one of its snapshots",
    responses=problem_responses(404, 409, 413, 422, 503),
)
async def fork_session(
    session_id: SessionId,
    rt: RuntimeDep,
    actor: ActorDep,
    idem: IdempotencyDep,
    body: ForkCreate | None = None,
) -> Response:
    body = body or ForkCreate()
    command = service.ForkCommand(
        new_session_id=body.new_session_id, snapshot_id=body.snapshot_id, metadata=body.metadata
    )
    encoded = await service.fork_session(
        rt, actor, session_id, command, idempotency=idem, encode=encode_session(201)
    )
    return json_response(encoded)
