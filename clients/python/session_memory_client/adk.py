"""A Google ADK session service whose sessions live in the Session Memory Service:
``Runner(agent=..., app_name="shop", session_service=ServiceSessionService(client))``.

``ServiceSessionService`` is a ``google.adk.sessions.BaseSessionService`` with the semantics of
ADK's own services (``InMemorySessionService``, ``SqliteSessionService``):

- Each ADK session ``(app_name, user_id, session_id)`` is one service session whose id is
  ``adk:{app}:{user}:{session}`` (``namespace=`` replaces ``adk``). Each part is escaped
  (``%``, ``:``, ``/``, ``~`` and the characters a session id may not hold become ``%XX`` of
  their UTF-8 bytes), so the id
  prefix up to the last ``:`` is one user's sessions of one app: an API key confined to
  ``adk:{app}:`` or ``adk:{app}:{user}:`` sees exactly those, and a context request's
  ``recall: {scope: "prefix"}`` searches the user's other sessions of the app.
- Each event is one opaque item ``{"type": "adk_event", "event": ...}``, the event as
  ``Event.model_dump(mode="json", by_alias=True, exclude_none=True)``; reading validates it
  back into an equal ``Event`` (bytes travel as base64, as ADK's JSON does). The service
  finds the event's texts for search and counts their tokens; it does not render events
  into provider formats. (When the service speaks ``gemini``, an event's ``content`` could be
  written as a ``gemini`` item beside the event's other fields, making the budgeted prompt
  available as ``Content``s; the item ``type`` tells the two layouts apart, so old sessions
  would keep reading.)
- State follows ADK's scoping. ``app:`` keys are shared by every user of the app and live in
  the metadata of the session ``adk:{app}:~app``; ``user:`` keys are shared by one user's
  sessions of the app and live in ``adk:{app}:{user}:~user`` (``~`` is always escaped in a
  part, so these ids never collide with an ADK session's). ``temp:`` keys reach the
  in-memory session only and are never stored. Session-scoped state is the session's
  metadata ``state`` (its initial state) updated by the ``stateDelta`` of every later event:
  the event item is the record of the change, written in one atomic append, so a delta
  cannot be lost between two writes. After each append the folded state is saved back into
  the metadata as a checkpoint (``state_seq``: the last event it includes), fenced by the
  session's version; a checkpoint that loses a race is skipped, and the next read folds the
  events after it (and saves it). App and user state are read-modify-written under the
  version fence (``If-Match``) and retried on a conflict, so two appends racing on the same
  key keep both deltas, the later one winning.
- ``get_session(config=GetSessionConfig(num_recent_events=N, after_timestamp=T))`` returns
  the newest N events, and of those the ones from T on, as ADK's services do.
  ``list_sessions`` returns sessions without events, oldest ``last_update_time`` first.

Limits (the service's): an id of more than 256 characters is refused (``InvalidInputError``);
app and user state, and a session's initial state, are metadata (16 KiB by default,
``LIMITS__MAX_METADATA_BYTES``); an event is an item (5 MB by default).

Needs ``google-adk`` (``pip install "session-memory-client[adk]"``).
"""

from __future__ import annotations

import asyncio
import random
import time
import unicodedata
import uuid
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.errors.session_not_found_error import SessionNotFoundError
from google.adk.events.event import Event
from google.adk.sessions.base_session_service import (
    BaseSessionService,
    GetSessionConfig,
    ListSessionsResponse,
)
from google.adk.sessions.session import Session
from google.adk.sessions.state import State
from pydantic_core import to_jsonable_python

from session_memory_client.client import AsyncSessionMemoryClient
from session_memory_client.errors import (
    ConflictError,
    NotFoundError,
    PayloadTooLargeError,
    PreconditionFailedError,
)

ITEM_TYPE = "adk_event"
PAGE = 1000  # the most items one GET /items returns
APP_STATE = "~app"  # a part never escapes to this: "~" is always escaped
USER_STATE = "~user"
SHARED_STATE_ATTEMPTS = 20
_REFUSED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})


def escape(part: str) -> str:
    """One part of a service session id: ``%``, ``:``, ``/``, ``~`` and the characters an id
    may not hold as ``%XX`` of their UTF-8 bytes; everything else as is."""
    out: list[str] = []
    for char in part:
        if char in "%:/~" or unicodedata.category(char) in _REFUSED_CATEGORIES:
            out.extend(f"%{byte:02X}" for byte in char.encode("utf-8", "surrogatepass"))
        else:
            out.append(char)
    return "".join(out)


def session_key(app_name: str, user_id: str, session_id: str, *, namespace: str = "adk") -> str:
    """The service session id of an ADK session."""
    return f"{namespace}:{escape(app_name)}:{escape(user_id)}:{escape(session_id)}"


def app_state_key(app_name: str, *, namespace: str = "adk") -> str:
    return f"{namespace}:{escape(app_name)}:{APP_STATE}"


def user_state_key(app_name: str, user_id: str, *, namespace: str = "adk") -> str:
    return f"{namespace}:{escape(app_name)}:{escape(user_id)}:{USER_STATE}"


def split_state(state: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(app, user, session) parts of a state or delta, app and user keys without their
    prefix; ``temp:`` keys are left out. Values as JSON data."""
    app: dict[str, Any] = {}
    user: dict[str, Any] = {}
    session: dict[str, Any] = {}
    for key, value in state.items():
        if key.startswith(State.APP_PREFIX):
            app[key.removeprefix(State.APP_PREFIX)] = value
        elif key.startswith(State.USER_PREFIX):
            user[key.removeprefix(State.USER_PREFIX)] = value
        elif not key.startswith(State.TEMP_PREFIX):
            session[key] = value
    return _json(app), _json(user), _json(session)


def _json(state: dict[str, Any]) -> dict[str, Any]:
    return to_jsonable_python(state, fallback=repr)  # type: ignore[no-any-return]


def event_item(event: Event) -> dict[str, Any]:
    """The item that stores an event."""
    return {
        "type": ITEM_TYPE,
        "event": event.model_dump(mode="json", by_alias=True, exclude_none=True),
    }


def item_event(item: Mapping[str, Any]) -> Event | None:
    """The event an item stores; ``None`` for an item that is not an ADK event (another
    client may have appended to the session)."""
    if item.get("type") != ITEM_TYPE or not isinstance(item.get("event"), Mapping):
        return None
    return Event.model_validate(item["event"])


@dataclass
class _Known:
    """What this service last read or wrote of a session: the checkpoint it may advance."""

    version: int
    metadata: dict[str, Any]


class ServiceSessionService(BaseSessionService):
    """A ``BaseSessionService`` (Google ADK) whose sessions, events and state live in the
    Session Memory Service (see the module's docstring for the layout)."""

    def __init__(
        self, client: AsyncSessionMemoryClient, *, namespace: str = "adk", cache_size: int = 1024
    ) -> None:
        if not namespace or ":" in namespace or "/" in namespace:
            raise ValueError(f"namespace must be non-empty, without ':' or '/': {namespace!r}")
        self.client = client
        self.namespace = namespace
        self._known: OrderedDict[str, _Known] = OrderedDict()
        self._cache_size = cache_size

    # --- sessions ----------------------------------------------------------------------

    async def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        state: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> Session:
        session_id = (session_id or "").strip() or str(uuid.uuid4())
        app_delta, user_delta, session_state = split_state(state or {})
        now = time.time()
        metadata = {
            "adk": {
                "kind": "session",
                "app_name": app_name,
                "user_id": user_id,
                "session_id": session_id,
            },
            "state": session_state,
            "state_seq": 0,
            "last_update_time": now,
        }
        key = session_key(app_name, user_id, session_id, namespace=self.namespace)
        try:
            created = await self.client.create_session(key, metadata=metadata)
        except ConflictError as exc:
            raise AlreadyExistsError(f"Session with id {session_id} already exists.") from exc
        self._remember(key, created["version"], metadata)
        await self._merge_shared(app_name, None, app_delta)
        await self._merge_shared(app_name, user_id, user_delta)
        app_state, user_state = await self._shared_states(app_name, user_id)
        return Session(
            id=session_id,
            app_name=app_name,
            user_id=user_id,
            state=_merged(session_state, app_state, user_state),
            last_update_time=now,
        )

    async def get_session(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        config: GetSessionConfig | None = None,
    ) -> Session | None:
        session_id = session_id.strip() if session_id else session_id
        key = session_key(app_name, user_id, session_id, namespace=self.namespace)
        try:
            stored, (app_state, user_state) = await asyncio.gather(
                self.client.get_session(key), self._shared_states(app_name, user_id)
            )
        except NotFoundError:
            return None
        metadata = dict(stored["metadata"])
        if (metadata.get("adk") or {}).get("kind") != "session":
            return None
        checkpoint = int(metadata.get("state_seq") or 0)
        recent = config.num_recent_events if config else None
        after = config.after_timestamp if config else None
        try:
            if recent is None:  # every event: the fold needs no other read
                items = [item async for item in self.client.iter_items(key, page_size=PAGE)]
                unfolded = [item for item in items if item["seq"] > checkpoint]
            else:
                items = (await self.client.list_items(key, last=recent))["items"] if recent else []
                unfolded = []
                if stored["last_seq"] > checkpoint:
                    unfolded = [item async for item in _items_after(self.client, key, checkpoint)]
        except NotFoundError:
            return None
        events = [event for event in map(item_event, items) if event is not None]
        if after is not None:
            events = _from_timestamp(events, after)
        metadata, advanced = _fold(metadata, unfolded)
        if advanced:  # save the fold, so that lists see it and the next read need not redo it
            version = await self._checkpoint(key, stored["version"], metadata)
        else:
            version = stored["version"]
        self._remember(key, version, metadata)
        return Session(
            id=session_id,
            app_name=app_name,
            user_id=user_id,
            state=_merged(metadata.get("state") or {}, app_state, user_state),
            events=events,
            last_update_time=float(metadata.get("last_update_time") or 0.0),
        )

    async def list_sessions(
        self, *, app_name: str, user_id: str | None = None
    ) -> ListSessionsResponse:
        prefix = f"{self.namespace}:{escape(app_name)}:" + (
            "" if user_id is None else f"{escape(user_id)}:"
        )
        rows: list[dict[str, Any]] = []
        cursor: str | None = None
        while True:
            page = await self.client.list_sessions(prefix=prefix, cursor=cursor, limit=1000)
            for row in page["items"]:
                adk = (row.get("metadata") or {}).get("adk") or {}
                if adk.get("kind") == "session" and adk.get("app_name") == app_name:
                    rows.append(row)
            cursor = page["next_cursor"]
            if cursor is None:
                break
        app_state = await self._shared_state(app_state_key(app_name, namespace=self.namespace))
        user_ids = {row["metadata"]["adk"]["user_id"] for row in rows}
        user_states = dict(
            zip(
                user_ids,
                await asyncio.gather(
                    *(
                        self._shared_state(user_state_key(app_name, uid, namespace=self.namespace))
                        for uid in user_ids
                    )
                ),
                strict=True,
            )
        )
        sessions = []
        for row in rows:
            metadata = row["metadata"]
            uid = metadata["adk"]["user_id"]
            sessions.append(
                Session(
                    id=metadata["adk"]["session_id"],
                    app_name=app_name,
                    user_id=uid,
                    state=_merged(metadata.get("state") or {}, app_state, user_states[uid]),
                    last_update_time=float(metadata.get("last_update_time") or 0.0),
                )
            )
        sessions.sort(key=lambda s: (s.last_update_time, s.user_id, s.id))
        return ListSessionsResponse(sessions=sessions)

    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        session_id = session_id.strip() if session_id else session_id
        key = session_key(app_name, user_id, session_id, namespace=self.namespace)
        self._known.pop(key, None)
        try:
            await self.client.delete_session(key)
        except NotFoundError:
            return

    async def get_user_state(self, *, app_name: str, user_id: str) -> dict[str, Any]:
        return await self._shared_state(user_state_key(app_name, user_id, namespace=self.namespace))

    # --- events -------------------------------------------------------------------------

    async def append_event(self, session: Session, event: Event) -> Event:
        if event.partial:
            return event
        self._apply_temp_state(session, event)
        event = self._trim_temp_delta_state(event)
        key = session_key(session.app_name, session.user_id, session.id, namespace=self.namespace)
        try:
            result = await self.client.append_items(key, [event_item(event)])
        except NotFoundError as exc:
            raise SessionNotFoundError(f"Session {session.id} not found.") from exc
        delta = event.actions.state_delta if event.actions else {}
        if delta:
            app_delta, user_delta, _ = split_state(delta)
            await self._merge_shared(session.app_name, None, app_delta)
            await self._merge_shared(session.app_name, session.user_id, user_delta)
        known = self._known.get(key)
        if known is not None and known.version + 1 == result["version"]:
            # Nobody wrote between this service's last look and this append: the checkpoint
            # it holds plus this event is the session's state.
            metadata, _ = _fold(known.metadata, result["items"])
            version = await self._checkpoint(key, result["version"], metadata)
            self._remember(key, version, metadata)
        else:
            self._known.pop(key, None)
        session.last_update_time = event.timestamp
        return self._commit_event_to_session(session, event)

    # --- state ----------------------------------------------------------------------------

    async def _checkpoint(self, key: str, version: int, metadata: dict[str, Any]) -> int:
        """Save ``metadata`` as of ``version``; the version after, or ``version`` when the
        session moved on meanwhile (or the state outgrew metadata): the next read folds."""
        try:
            updated = await self.client.update_session(key, metadata=metadata, if_match=version)
        except (PreconditionFailedError, PayloadTooLargeError, ConflictError, NotFoundError):
            return -1  # unknown: never matches an append's version
        return int(updated["version"])

    async def _shared_states(
        self, app_name: str, user_id: str
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        app_state, user_state = await asyncio.gather(
            self._shared_state(app_state_key(app_name, namespace=self.namespace)),
            self._shared_state(user_state_key(app_name, user_id, namespace=self.namespace)),
        )
        return app_state, user_state

    async def _shared_state(self, key: str) -> dict[str, Any]:
        try:
            stored = await self.client.get_session(key)
        except NotFoundError:
            return {}
        return dict((stored["metadata"] or {}).get("state") or {})

    async def _merge_shared(
        self, app_name: str, user_id: str | None, delta: dict[str, Any]
    ) -> None:
        """Apply a delta to app state (``user_id`` None) or user state: read, merge, write
        fenced by the version read; a write that lost a race is redone on what won it."""
        if not delta:
            return
        if user_id is None:
            key = app_state_key(app_name, namespace=self.namespace)
            identity = {"kind": "app_state", "app_name": app_name}
        else:
            key = user_state_key(app_name, user_id, namespace=self.namespace)
            identity = {"kind": "user_state", "app_name": app_name, "user_id": user_id}
        for attempt in range(SHARED_STATE_ATTEMPTS):
            try:
                try:
                    stored = await self.client.get_session(key)
                except NotFoundError:
                    await self.client.create_session(
                        key, metadata={"adk": identity, "state": delta}
                    )
                    return
                metadata = dict(stored["metadata"] or {})
                metadata["adk"] = identity
                metadata["state"] = {**(metadata.get("state") or {}), **delta}
                await self.client.update_session(key, metadata=metadata, if_match=stored["version"])
                return
            except (PreconditionFailedError, ConflictError, NotFoundError):
                await asyncio.sleep(random.uniform(0, 0.01 * 2 ** min(attempt, 6)))
        raise RuntimeError(f"could not update the state of {key!r}: too many concurrent writers")

    def _remember(self, key: str, version: int, metadata: dict[str, Any]) -> None:
        self._known[key] = _Known(version, metadata)
        self._known.move_to_end(key)
        while len(self._known) > self._cache_size:
            self._known.popitem(last=False)


async def _items_after(client: AsyncSessionMemoryClient, key: str, seq: int) -> Any:
    after = seq
    while True:
        page = await client.list_items(key, after_seq=after, limit=PAGE)
        for item in page["items"]:
            yield item
        if page["next_cursor"] is None:
            return
        after = page["next_cursor"]


def _fold(
    metadata: Mapping[str, Any], items: Iterable[Mapping[str, Any]]
) -> tuple[dict[str, Any], bool]:
    """The metadata with the session-scoped deltas of the events in ``items`` (after its
    ``state_seq``) applied, and whether any item was folded."""
    folded = dict(metadata)
    state = dict(folded.get("state") or {})
    seq = int(folded.get("state_seq") or 0)
    advanced = False
    for item in items:
        if item["seq"] <= seq:
            continue
        seq = item["seq"]
        advanced = True
        event = item_event(item)
        if event is None:
            continue
        folded["last_update_time"] = event.timestamp
        if event.actions and event.actions.state_delta:
            state.update(split_state(event.actions.state_delta)[2])
    folded["state"] = state
    folded["state_seq"] = seq
    return folded, advanced


def _from_timestamp(events: list[Event], after: float) -> list[Event]:
    """The events from the newest one older than ``after`` on, as ADK's services filter."""
    i = len(events) - 1
    while i >= 0 and events[i].timestamp >= after:
        i -= 1
    return events[i + 1 :]


def _merged(
    session_state: Mapping[str, Any], app_state: Mapping[str, Any], user_state: Mapping[str, Any]
) -> dict[str, Any]:
    merged = dict(session_state)
    merged.update({State.APP_PREFIX + k: v for k, v in app_state.items()})
    merged.update({State.USER_PREFIX + k: v for k, v in user_state.items()})
    return merged
