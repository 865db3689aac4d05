"""/v1/whoami: what the caller's key is and may do (the inspector reads it to decide whether
to offer write actions). It reveals nothing the key's holder does not already hold: its own
tenant, name, public id, scopes and session prefix, never the secret or another key."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Request
from pydantic import BaseModel, Field

from app.api.deps import ActorDep
from app.api.problems import problem_responses
from app.api.query_guard import GuardedRoute

router = APIRouter(prefix="/v1", tags=["auth"], route_class=GuardedRoute)

Scope = Literal["read", "write", "admin"]
SCOPES: tuple[Scope, ...] = ("admin", "read", "write")  # sorted, as the answer lists them


class WhoAmIRead(BaseModel):
    auth: Literal["on", "off"] = Field(
        description="`off`: the server runs without keys on loopback and every caller has "
        "every scope"
    )
    tenant_id: str
    key_id: str | None = Field(description="The key's public id; null with auth off")
    key_name: str | None
    scopes: list[Scope] = Field(description="Sorted: what this key may do")
    session_prefix: str | None = Field(
        description="The key sees and creates only sessions whose id starts with this"
    )


@router.get(
    "/whoami",
    response_model=WhoAmIRead,
    operation_id="whoami",
    summary="The caller's tenant, key and scopes",
    responses=problem_responses(),
)
async def whoami(request: Request, actor: ActorDep) -> WhoAmIRead:
    auth_on = bool(getattr(request.app.state, "auth_required", False))
    return WhoAmIRead(
        auth="on" if auth_on else "off",
        tenant_id=actor.tenant_id,
        key_id=actor.key_id or None,
        key_name=actor.key_name,
        scopes=[scope for scope in SCOPES if scope in actor.scopes],
        session_prefix=actor.session_prefix,
    )
