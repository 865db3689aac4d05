"""/v1/admin/keys: create, list and revoke the API keys of the caller's tenant (admin scope,
checked by ``AuthMiddleware``). A secret is returned once, at creation; only its hash is kept.

/v1/admin/tenants/{tenant_id}: erase the caller's own tenant, or read its storage totals;
/v1/admin/erasures: the tenant's erasure audit records (docs/retention.md).

Key creation takes no ``Idempotency-Key``: replaying it would mean storing the secret.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field

from app.api.deps import ActorDep, RuntimeDep
from app.api.encoding import dumps
from app.api.problems import problem_responses
from app.api.query_guard import GuardedRoute
from app.api.responses import json_response
from app.api.schemas import SessionStorage
from app.api.session_ids import SessionIdValue, SessionPrefixValue
from app.domain.errors import InvalidInput
from app.domain.keys import KEY_ID_PATTERN, NAME_PATTERN, ApiKey, Scope
from app.services import keys as service
from app.services import retention
from app.services.runtime import Encoded

router = APIRouter(prefix="/v1/admin/keys", tags=["admin"], route_class=GuardedRoute)

_CURSOR_RE = re.compile(KEY_ID_PATTERN)


class ApiKeyCreate(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    name: str = Field(
        min_length=1,
        max_length=128,
        pattern=NAME_PATTERN,
        description="Shown in events as the actor",
        examples=["ingest-worker"],
    )
    scopes: list[Scope] = Field(
        min_length=1,
        max_length=3,
        description="Any of `read`, `write`, `admin`; no more than the calling key holds",
        examples=[["read", "write"]],
    )
    session_prefix: SessionPrefixValue | None = Field(
        None,
        description="Confine the key to session ids starting with this (inside the caller's): "
        "1-256 characters a session id may hold",
        examples=["agent-7:", "tenant:user@"],
    )


class ApiKeyRead(BaseModel):
    id: str = Field(description="Public id: the secret's first part", examples=["smk_0123456789ab"])
    tenant_id: str
    name: str
    scopes: list[Scope]
    session_prefix: str | None
    created_at: datetime
    revoked_at: datetime | None


class ApiKeyCreated(ApiKeyRead):
    secret: str = Field(description="The key itself, shown only in this response")


class ApiKeyList(BaseModel):
    items: list[ApiKeyRead]
    next_cursor: str | None = Field(
        description="Pass as `cursor` for the next page; null at the end"
    )


def key_dict(key: ApiKey) -> dict[str, object]:
    return {
        "id": key.id,
        "tenant_id": key.tenant_id,
        "name": key.name,
        "scopes": sorted(key.scopes),
        "session_prefix": key.session_prefix,
        "created_at": key.created_at,
        "revoked_at": key.revoked_at,
    }


@router.post(
    "",
    status_code=201,
    response_model=ApiKeyCreated,
    operation_id="createApiKey",
    summary="Create an API key in the caller's tenant (the secret is shown once)",
    responses=problem_responses(403, 422),
)
async def create_key(body: ApiKeyCreate, rt: RuntimeDep, actor: ActorDep) -> Response:
    created = await service.create_key(
        rt.store,
        actor,
        service.KeyCreateCommand(
            name=body.name, scopes=frozenset(body.scopes), session_prefix=body.session_prefix
        ),
    )
    return json_response(Encoded(201, dumps(key_dict(created.key) | {"secret": created.secret})))


@router.get(
    "",
    response_model=ApiKeyList,
    operation_id="listApiKeys",
    summary="List the tenant's API keys (no secrets), cursor-paginated by id",
    responses=problem_responses(422),
)
async def list_keys(
    rt: RuntimeDep,
    actor: ActorDep,
    cursor: Annotated[
        str | None, Query(pattern=KEY_ID_PATTERN, description="`next_cursor` of a page")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    include_revoked: Annotated[bool, Query(description="Also list revoked keys")] = False,
) -> Response:
    if cursor is not None and not _CURSOR_RE.fullmatch(cursor):
        raise InvalidInput(
            "invalid cursor", errors=[{"loc": ["query", "cursor"], "msg": "not a cursor"}]
        )
    rows, next_cursor = await service.list_keys(
        rt.store, actor, after_id=cursor, limit=limit, include_revoked=include_revoked
    )
    body = {"items": [key_dict(k) for k in rows], "next_cursor": next_cursor}
    return json_response(Encoded(200, dumps(body)))


@router.delete(
    "/{key_id}",
    status_code=204,
    operation_id="revokeApiKey",
    summary="Revoke an API key (idempotent); 404 for a key of another tenant",
    responses=problem_responses(404),
)
async def revoke_key(
    key_id: Annotated[str, Path(max_length=64)],
    request: Request,
    rt: RuntimeDep,
    actor: ActorDep,
) -> Response:
    resolver = getattr(request.app.state, "key_resolver", None)
    await service.revoke_key(rt.store, actor, key_id, resolver=resolver)
    return Response(status_code=204)


# -- /v1/admin/tenants: erase a tenant, see its storage; /v1/admin/erasures: the audit trail --

tenants_router = APIRouter(prefix="/v1/admin", tags=["admin"], route_class=GuardedRoute)

TenantIdPath = Annotated[
    str, Path(pattern=r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$", description="The tenant's id")
]


class TenantErased(BaseModel):
    tenant_id: str
    sessions: int = Field(description="Sessions erased")
    row_counts: dict[str, int] = Field(description="Rows erased per table")
    erasure_id: str = Field(description="The audit record of this erasure")


class TenantStorageTotals(SessionStorage):
    sessions: int = Field(description="Sessions the tenant holds")


class TenantStorage(BaseModel):
    tenant_id: str
    storage: TenantStorageTotals


class ErasureRead(BaseModel):
    id: str
    kind: str = Field(description="`session` or `tenant`")
    reason: str = Field(description="`deleted`, `expired` or `tenant_erased`")
    subject_digest: str = Field(
        description="SHA-256 of the tenant and id (see docs/retention.md); never the id itself"
    )
    key_id: str | None = Field(
        description="The API key that asked (null: the sweep, or, for a key confined to a "
        "prefix, a key outside its share)"
    )
    key_name: str | None
    row_counts: dict[str, int]
    created_at: datetime


class ErasureList(BaseModel):
    items: list[ErasureRead]


@tenants_router.delete(
    "/tenants/{tenant_id}",
    response_model=TenantErased,
    operation_id="eraseTenant",
    summary="Erase the caller's tenant: every session, key and record (irreversible)",
    responses=problem_responses(404, 422),
)
async def erase_tenant(
    tenant_id: TenantIdPath, request: Request, rt: RuntimeDep, actor: ActorDep
) -> Response:
    erased = await retention.erase_own_tenant(rt, actor, tenant_id)
    resolver = getattr(request.app.state, "key_resolver", None)
    if resolver is not None:  # this process stops honouring the erased keys at once
        for key_id in erased.key_ids:
            resolver.forget(key_id)
    body = {
        "tenant_id": tenant_id,
        "sessions": erased.sessions,
        "row_counts": erased.row_counts,
        "erasure_id": erased.erasure_id,
    }
    return json_response(Encoded(200, dumps(body)))


@tenants_router.get(
    "/tenants/{tenant_id}/storage",
    response_model=TenantStorage,
    operation_id="getTenantStorage",
    summary="Rows and bytes the caller's tenant stores, by kind",
    responses=problem_responses(404, 422),
)
async def tenant_storage(tenant_id: TenantIdPath, rt: RuntimeDep, actor: ActorDep) -> Response:
    body = await retention.tenant_storage(rt, actor, tenant_id)
    return json_response(Encoded(200, dumps(body)))


@tenants_router.get(
    "/erasures",
    response_model=ErasureList,
    operation_id="listErasures",
    summary="The tenant's erasure audit records, newest first (optionally of one session id)",
    description="A key confined to a session prefix reads its share's only "
    "(docs/retention.md): an id outside its prefix has no records, and without `session_id` "
    "it lists the erasures asked by keys within its share.",
    responses=problem_responses(422),
)
async def list_erasures(
    rt: RuntimeDep,
    actor: ActorDep,
    session_id: Annotated[
        SessionIdValue | None, Query(description="Only the records of this (erased) session id")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> Response:
    rows = await retention.list_erasures(rt, actor, session_id=session_id, limit=limit)
    return json_response(Encoded(200, dumps({"items": rows})))
