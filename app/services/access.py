"""Access checks and the steps every write shares, below the use cases (which import them;
this module imports no use case): what a key may see, loading a session, fencing a write on
its version, logging it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, TypeVar

from sqlalchemy.ext.asyncio import AsyncConnection

from app import jsonutil
from app.domain.errors import (
    InvalidInput,
    OutsideKeyPrefix,
    SessionNotFound,
    SessionRecreated,
    VersionMismatch,
)
from app.domain.ids import SESSION_ID_MAX
from app.domain.items import NewItem, item_chars, new_item_id
from app.domain.retention import is_expired
from app.domain.sessions import SessionState, check_session_id
from app.services.runtime import Actor, event, utcnow
from app.store.events import EventRepository
from app.store.raw import DriverConnection
from app.store.sessions import Counters, SessionRepository


def json_size(value: object) -> int:
    return len(jsonutil.dumps_bytes(value))


def check_visible(actor: Actor, session_id: str) -> None:
    """A key confined to a prefix sees nothing outside it: 404, like another tenant's."""
    if actor.session_prefix and not session_id.startswith(actor.session_prefix):
        raise SessionNotFound(f"session {session_id!r} not found")


def check_creatable(actor: Actor, session_id: str, *, loc: list[str | int]) -> None:
    """A key confined to a prefix may create only inside it: 403 naming the prefix (the key
    knows it; a 404 on a create reads like a bug). ``loc`` names the wire field of the id."""
    prefix = actor.session_prefix
    if prefix and not session_id.startswith(prefix):
        raise OutsideKeyPrefix(
            f"this key creates sessions only under its prefix {prefix!r}; "
            f"{session_id!r} is outside it",
            errors=[{"loc": loc, "msg": f"must start with {prefix!r}", "type": "outside_prefix"}],
        )


def new_session_id(actor: Actor) -> str:
    """A fresh id the caller may use: under its key's session prefix, if it has one."""
    candidate = (actor.session_prefix or "ses_") + new_item_id()[4:]
    if len(candidate) > SESSION_ID_MAX:
        raise InvalidInput(
            "this key's session prefix leaves no room for a generated id: name the session",
            errors=[{"loc": ["body", "id"], "msg": f"required: prefix + 24 > {SESSION_ID_MAX}"}],
        )
    return check_session_id(candidate)


def found(state: SessionState | None, session_id: str) -> SessionState:
    """``state``, unless there is none or it expired (swept or not: an expired session is
    gone for every operation at once, app.domain.retention)."""
    if state is None or is_expired(state.expires_at, utcnow()):
        raise SessionNotFound(f"session {session_id!r} not found")
    return state


async def load_session(
    db: AsyncConnection | DriverConnection, actor: Actor, session_id: str
) -> SessionState:
    check_visible(actor, session_id)
    return found(await SessionRepository(db).get(actor.tenant_id, session_id), session_id)


async def load_current(
    db: AsyncConnection, actor: Actor, session_id: str, if_match: int | None
) -> SessionState:
    """``load_session``, refused with 412 if the caller expected another version."""
    state = await load_session(db, actor, session_id)
    if if_match is not None and state.version != if_match:
        raise VersionMismatch(
            f"session is at version {state.version}, the request expected {if_match}"
        )
    return state


async def fail_write(
    db: AsyncConnection, actor: Actor, session_id: str, if_match: int | None
) -> None:
    """Explain why a fenced update matched no row: missing (or expired, or being erased)
    session, or stale version. Without ``If-Match`` only the first can be: a session found
    now was deleted and created again while the write ran, and the write did not land (404,
    never a 412 the client did not ask for)."""
    if if_match is None:
        raise SessionNotFound(f"session {session_id!r} not found")
    state = found(await SessionRepository(db).get(actor.tenant_id, session_id), session_id)
    if state.version == if_match:  # another session by the same id, at the same version
        raise SessionRecreated(
            f"session {session_id!r} was deleted and created again while this write ran; "
            "nothing was written: read it and retry"
        )
    raise VersionMismatch(
        f"session is at version {state.version}, the request expected {if_match}"
    )


async def record_write(
    db: AsyncConnection,
    actor: Actor,
    session_id: str,
    *,
    now: datetime,
    event_type: str,
    data: dict[str, object] | None = None,
    expected_version: int | None,
    counters: Counters | None = None,
    values: dict[str, Any] | None = None,
) -> SessionState:
    """The last step of a write: bump the session row (fenced on ``expected_version``: a stale
    writer fails here with 404 or 412) and log one event at the new version."""
    bumped = await SessionRepository(db).bump(
        actor.tenant_id,
        session_id,
        counters=counters or Counters(),
        now=now,
        expected_version=expected_version,
        values=values,
    )
    if bumped is None:
        await fail_write(db, actor, session_id, expected_version)
        raise AssertionError("unreachable")
    await EventRepository(db).insert(
        actor.tenant_id,
        session_id,
        [
            event(
                actor,
                seq=bumped.event_seq,
                type=event_type,
                version=bumped.version,
                now=now,
                data=data,
            )
        ],
    )
    return bumped


# Texts longer than this in all are measured (tokenized) in a worker thread: tiktoken takes
# about 1.5 us a character, so a 4 MB tool output would stall every request of the process
# (and its lock renewals) for seconds on the event loop. tiktoken releases the GIL.
OFF_LOOP_CHARS = 256 * 1024

T = TypeVar("T")


def batch_chars(batch: Sequence[NewItem]) -> int:
    return sum(item_chars(item.body) for item in batch)


async def off_loop_if_large(fn: Callable[..., T], *args: Any, chars: int) -> T:
    """``fn(*args)``, in a worker thread when the texts it measures are large."""
    if chars > OFF_LOOP_CHARS:
        return await asyncio.to_thread(fn, *args)
    return fn(*args)
