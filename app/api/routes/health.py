"""Operational endpoints: liveness and readiness."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import Response

from app.api.deps import RuntimeDep
from app.api.encoding import dumps
from app.api.schemas import Health, Readiness
from app.domain.errors import LockBackendUnavailable
from app.locks import LocalLocks

router = APIRouter(tags=["operations"])


@router.get("/healthz", response_model=Health, operation_id="healthz", summary="Liveness")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get(
    "/readyz",
    response_model=Readiness,
    operation_id="readyz",
    summary="Readiness: the database reachable (and whether the lock backend is)",
    description="503 when the database does not answer. The lock backend (Redis) only "
    "single-flights LLM compactions, so a replica without it keeps serving every request: "
    '`locks` says `"unavailable"` and the status stays 200.',
    responses={503: {"model": Readiness, "description": "The database is unavailable"}},
)
async def readyz(rt: RuntimeDep) -> Response:
    database = "ok"
    try:
        await rt.store.ping()
    except Exception:  # any failure means not ready
        database = "unavailable"
    if isinstance(rt.locks, LocalLocks):
        locks = "in-process"
    else:
        locks = "ok"
        try:
            await rt.locks.ping()
        except LockBackendUnavailable:
            locks = "unavailable"
    ok = database == "ok"  # no request needs Redis to be served correctly (DESIGN §6)
    body = {"status": "ok" if ok else "unavailable", "database": database, "locks": locks}
    return Response(dumps(body), status_code=200 if ok else 503, media_type="application/json")
