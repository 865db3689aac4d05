"""What every use case needs: the store, the locks, the settings; and the write protocol.

The write protocol (``run_write``): take the session's lock, open one transaction, replay a
stored response if the ``Idempotency-Key`` was seen, else run the operation and store its
encoded response in the same transaction, commit, release the lock. The lock covers the commit,
so the next writer always sees this one's work; the idempotency record commits with the write,
so a retry can never apply a write twice nor miss one that was acknowledged.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, TypeVar

from sqlalchemy.ext.asyncio import AsyncConnection

from app.domain.errors import IdempotencyKeyReused
from app.locks import LocalLocks, RedisLocks, lock_key
from app.settings import Settings
from app.store.db import Store
from app.store.events import EventRecord
from app.store.idempotency import IdempotencyRepository, StoredResponse

if TYPE_CHECKING:
    from app.domain.sessions import SessionState
    from app.llm import LLMClient
    from app.services.auto_compaction import AutoCompactor

R = TypeVar("R")

log = logging.getLogger(__name__)


def utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class Actor:
    """Who is calling: the tenant every query is scoped to, and what the key may do."""

    tenant_id: str = "default"
    key_name: str | None = None
    request_id: str | None = None
    scopes: frozenset[str] = frozenset({"read", "write", "admin"})
    session_prefix: str | None = None


@dataclass(frozen=True, slots=True)
class IdempotencyRequest:
    key: str
    method: str
    path: str
    request_hash: str

    @staticmethod
    def hash_request(body: bytes, query: str = "") -> str:
        return hashlib.sha256(query.encode() + b"\n" + body).hexdigest()


@dataclass(frozen=True, slots=True)
class Encoded:
    """A use case's result as the response body the client gets (stored for replays)."""

    status_code: int
    body: str
    version: int | None = None
    replayed: bool = False


Encoder = Callable[[R], Encoded]


@dataclass
class Runtime:
    settings: Settings
    store: Store
    locks: LocalLocks | RedisLocks
    hooks: dict[str, Callable[..., None]] = field(default_factory=dict)
    # Compaction: the one LLM client (None: no LLM__BASE_URL) and the background scheduler.
    llm: LLMClient | None = None
    auto_compactor: AutoCompactor | None = None

    def after_append(
        self, actor: Actor, session_id: str, state: SessionState | None
    ) -> None:
        """Called once an append committed: maybe start an automatic compaction. Never raises
        and never waits, so an append can neither fail nor slow down because of it."""
        if self.auto_compactor is None or state is None:
            return
        try:
            self.auto_compactor.after_append(self, actor, session_id, state)
        except Exception:  # a bug here must not turn a stored append into an error
            log.exception("auto-compaction check failed")

    def notify(self, hook: str, *args: object) -> None:
        """Tell whoever listens (app.metrics) that something happened; hooks and their
        arguments are listed in app/metrics.py. Nobody listening is fine."""
        callback = self.hooks.get(hook)
        if callback is None:
            return
        try:
            callback(*args)
        except Exception:  # an observer's failure must not fail a committed write
            log.exception("hook %s failed", hook)

    async def run_write(
        self,
        actor: Actor,
        session_id: str,
        *,
        op: Callable[[AsyncConnection, datetime], Awaitable[R]],
        encode: Callable[[R], Encoded],
        idempotency: IdempotencyRequest | None = None,
    ) -> tuple[R | None, Encoded]:
        """Run ``op`` as the session's one writer; returns its result (None on a replay)."""
        async with self.locks.hold(lock_key(actor.tenant_id, session_id)):
            async with self.store.write() as db:
                now = utcnow()
                repo = IdempotencyRepository(db) if idempotency else None
                if idempotency and repo:
                    stored = await repo.get(
                        actor.tenant_id, idempotency.method, idempotency.path, idempotency.key
                    )
                    if stored and stored.expires_at and stored.expires_at <= now:
                        await repo.delete(
                            actor.tenant_id, idempotency.method, idempotency.path, idempotency.key
                        )
                        stored = None
                    if stored:
                        if stored.request_hash != idempotency.request_hash:
                            raise IdempotencyKeyReused(
                                "this Idempotency-Key was used with a different request body"
                            )
                        return None, Encoded(stored.status_code, stored.response, replayed=True)
                result = await op(db, now)
                encoded = encode(result)
                if idempotency and repo:
                    await repo.put(
                        actor.tenant_id,
                        idempotency.method,
                        idempotency.path,
                        idempotency.key,
                        stored=StoredResponse(
                            idempotency.request_hash, encoded.status_code, encoded.body
                        ),
                        now=now,
                        expires_at=now + timedelta(seconds=self.settings.idempotency_ttl_seconds),
                    )
            return result, encoded


def event(
    actor: Actor,
    *,
    seq: int,
    type: str,
    version: int,
    now: datetime,
    data: dict[str, object] | None = None,
) -> EventRecord:
    return EventRecord(
        seq=seq,
        type=type,
        version=version,
        request_id=actor.request_id,
        actor=actor.key_name,
        data=dict(data or {}),
        created_at=now,
    )
