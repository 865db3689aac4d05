"""Session use cases: create, read, list, update, delete."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from app.domain.errors import LimitExceeded
from app.domain.sessions import SessionState, check_config, check_session_id
from app.services.access import (
    check_creatable,
    check_visible,
    json_size,
    load_current,
    load_session,
    new_session_id,
    record_write,
)
from app.services.retention import erase_session_now
from app.services.runtime import Actor, Encoded, IdempotencyRequest, Runtime, event, utcnow
from app.store.events import EventRepository
from app.store.sessions import SessionRepository

_UNSET: Any = object()


def _check_sizes(
    rt: Runtime, *, metadata: Any = None, config: Any = None, summary: Any = None
) -> None:
    limits = rt.settings.limits
    if metadata is not None and json_size(metadata) > limits.max_metadata_bytes:
        raise LimitExceeded(
            f"metadata is larger than {limits.max_metadata_bytes} bytes",
            errors=[{"loc": ["metadata"], "msg": "too large"}],
        )
    if config is not None and json_size(config) > limits.max_config_bytes:
        raise LimitExceeded(
            f"config is larger than {limits.max_config_bytes} bytes",
            errors=[{"loc": ["config"], "msg": "too large"}],
        )
    if isinstance(summary, str) and len(summary) > limits.max_summary_chars:
        raise LimitExceeded(
            f"summary is longer than {limits.max_summary_chars} characters",
            errors=[{"loc": ["summary"], "msg": "too long"}],
        )


@dataclass(frozen=True, slots=True)
class SessionCreateCommand:
    id: str | None
    metadata: dict[str, Any]
    config: dict[str, Any]
    summary: str | None


async def create_session(
    rt: Runtime,
    actor: Actor,
    command: SessionCreateCommand,
    *,
    encode: Any,
    idempotency: IdempotencyRequest | None = None,
) -> Encoded:
    session_id = check_session_id(command.id) if command.id else new_session_id(actor)
    check_creatable(actor, session_id, loc=["body", "id"])
    _check_sizes(rt, metadata=command.metadata, config=command.config, summary=command.summary)
    config = check_config(command.config)

    async def op(db: AsyncConnection, now: datetime) -> SessionState:
        state = await SessionRepository(db).insert(
            tenant_id=actor.tenant_id,
            session_id=session_id,
            metadata=command.metadata,
            config=config,
            summary=command.summary,
            now=now,
        )
        await EventRepository(db).insert(
            actor.tenant_id,
            session_id,
            [event(actor, seq=1, type="created", version=1, now=now)],
        )
        return state

    _, encoded = await rt.run_write(
        actor, session_id, op=op, encode=encode, idempotency=idempotency
    )
    return encoded


async def get_session(rt: Runtime, actor: Actor, session_id: str) -> SessionState:
    async with rt.store.read() as db:
        return await load_session(db, actor, session_id)


def _listing_prefix(actor: Actor, prefix: str | None) -> tuple[bool, str | None]:
    """(anything visible?, the prefix to filter by): the narrower of the key's prefix and the
    one asked for; disjoint ones match nothing."""
    if actor.session_prefix:
        if prefix is None or actor.session_prefix.startswith(prefix):
            return True, actor.session_prefix
        if not prefix.startswith(actor.session_prefix):
            return False, None
    return True, prefix


async def list_sessions_by_updated(
    rt: Runtime,
    actor: Actor,
    *,
    before: tuple[datetime, str] | None,
    limit: int,
    prefix: str | None = None,
) -> tuple[list[SessionState], tuple[datetime, str] | None]:
    """A page of sessions newest first (last update, then id, descending) and the position of
    the next page (None at the end). A session written while a client pages moves to the
    front: one already seen is not seen twice, one not seen yet is seen by the next walk from
    the first page."""
    visible, prefix = _listing_prefix(actor, prefix)
    if not visible:
        return [], None
    async with rt.store.read() as db:
        rows = await SessionRepository(db).list_by_updated(
            actor.tenant_id, before=before, limit=limit + 1, prefix=prefix, live_at=utcnow()
        )
    last = rows[limit - 1] if len(rows) > limit else None
    return rows[:limit], (last.updated_at, last.id) if last is not None else None


async def list_sessions(
    rt: Runtime, actor: Actor, *, after_id: str | None, limit: int, prefix: str | None = None
) -> tuple[list[SessionState], str | None]:
    visible, prefix = _listing_prefix(actor, prefix)
    if not visible:
        return [], None
    async with rt.store.read() as db:
        rows = await SessionRepository(db).list(
            actor.tenant_id, after_id=after_id, limit=limit + 1, prefix=prefix, live_at=utcnow()
        )
    next_after = rows[limit - 1].id if len(rows) > limit else None
    return rows[:limit], next_after


@dataclass(frozen=True, slots=True)
class SessionUpdateCommand:
    metadata: Any = _UNSET
    config: Any = _UNSET
    summary: Any = _UNSET


async def update_session(
    rt: Runtime,
    actor: Actor,
    session_id: str,
    command: SessionUpdateCommand,
    *,
    if_match: int | None,
    encode: Any,
) -> Encoded:
    check_visible(actor, session_id)
    values: dict[str, Any] = {}
    if command.metadata is not _UNSET:
        _check_sizes(rt, metadata=command.metadata)
        values["metadata"] = command.metadata or {}
    if command.config is not _UNSET:
        _check_sizes(rt, config=command.config)
        values["config"] = check_config(command.config or {})
    if command.summary is not _UNSET:
        _check_sizes(rt, summary=command.summary)
        values["summary"] = command.summary or None

    async def op(db: AsyncConnection, now: datetime) -> SessionState:
        return await record_write(
            db,
            actor,
            session_id,
            now=now,
            event_type="config_updated" if "config" in values else "updated",
            data={"fields": sorted(values)},
            expected_version=if_match,
            values=values,
        )

    _, encoded = await rt.run_write(actor, session_id, op=op, encode=encode)
    return encoded


async def delete_session(
    rt: Runtime, actor: Actor, session_id: str, *, if_match: int | None
) -> None:
    check_visible(actor, session_id)

    async def op(db: AsyncConnection, now: datetime) -> None:
        await load_current(db, actor, session_id, if_match)
        await erase_session_now(rt, actor, session_id, now=now, db=db)

    await rt.run_write(actor, session_id, op=op, encode=lambda _: Encoded(204, ""))
    rt.forget_vectors(actor.tenant_id, session_id)
