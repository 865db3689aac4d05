"""What every use case needs: the store, the locks, the settings; and the write protocol.

The write protocol (``run_write``, DESIGN §6): open one transaction whose first statement locks
the session's row (``SELECT ... FOR UPDATE``; on SQLite the transaction is ``BEGIN IMMEDIATE``),
replay a stored response if the ``Idempotency-Key`` was seen, else run the operation and store
its encoded response in the same transaction, commit. The database orders the writes to one
session: the next writer always sees this one's work, and nothing depends on a lock service
being up or a lock not expiring. The idempotency record commits with the write, so a retry can
never apply a write twice nor miss one that was acknowledged; two retries racing each other
meet at the record's primary key, and the later one replays the first one's answer.

Redis locks (``rt.locks``) only single-flight expensive work (an LLM compaction across
replicas); no write waits for them.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, TypeVar

from sqlalchemy.ext.asyncio import AsyncConnection

from app.domain.errors import IdempotencyKeyReused
from app.domain.sessions import SessionState
from app.locks import LocalLocks, RedisLocks
from app.settings import Settings
from app.store.db import Store
from app.store.events import EventRecord
from app.store.idempotency import (
    IdempotencyRepository,
    IdempotencyScope,
    IdempotencyTaken,
    StoredResponse,
)
from app.store.sessions import SessionRepository

if TYPE_CHECKING:
    from app.embeddings import Embedder
    from app.embeddings.cache import SessionVectorCache
    from app.llm import LLMClient

R = TypeVar("R")

log = logging.getLogger(__name__)


def utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class Actor:
    """Who is calling: the tenant every query is scoped to, and what the key may do."""

    tenant_id: str = "default"
    key_name: str | None = None
    key_id: str = ""  # the API key's public id ("" with auth off): scopes idempotency records
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

    def scope(self, actor: Actor) -> IdempotencyScope:
        return IdempotencyScope(actor.tenant_id, actor.key_id, self.method, self.path, self.key)


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
    # Semantic search: the embedder (None: EMBEDDINGS__PROVIDER=none, or not started), set by
    # services.indexing at start-up.
    embedder: Embedder | None = None
    # Searched sessions' stacked vectors (app.embeddings.cache), set with the embedder.
    vector_cache: SessionVectorCache | None = None
    # Postgres with pgvector (migration 0011 added item_vectors.embedding): detected by the
    # indexer at start; tenant-wide searches by meaning then use the HNSW index.
    pgvector: bool = False
    # Called once an append committed, with the new session row; registered at start-up by
    # background jobs (automatic compaction), so this module imports none of them.
    append_hooks: list[Callable[[Runtime, Actor, str, SessionState], object]] = field(
        default_factory=list
    )

    # Set by an erasure on SQLite: the housekeeping merges the full-text index in the
    # background so the erased text leaves it (services.retention.merge_search_index).
    index_merge_wanted: asyncio.Event = field(default_factory=asyncio.Event)

    def schedule_index_merge(self) -> None:
        if self.store.is_sqlite:
            self.index_merge_wanted.set()

    def after_append(self, actor: Actor, session_id: str, state: SessionState | None) -> None:
        """Run the append hooks (maybe start an automatic compaction). Never raises and never
        waits, so an append can neither fail nor slow down because of them."""
        if state is None:
            return
        for hook in self.append_hooks:
            try:
                hook(self, actor, session_id, state)
            except Exception:  # a bug here must not turn a stored append into an error
                log.exception("append hook %r failed", hook)

    def forget_vectors(self, tenant_id: str, session_id: str | None = None) -> None:
        """Drop the session's (None: the tenant's) vectors from this process's cache: called
        once a delete, an erasure or the retention sweep has erased them, so they leave memory
        at once (every cache would refuse them anyway: their stamp no longer matches)."""
        if self.vector_cache is not None:
            self.vector_cache.evict(tenant_id, session_id)

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
        replay: Callable[[StoredResponse], Encoded] | None = None,
        creates: str | None = None,
    ) -> tuple[R | None, Encoded]:
        """Run ``op`` in the session's write order; returns its result (None on a replay).

        ``replay`` rebuilds the answer of a record the one-statement append stored (kind
        ``append``); other records hold their body. ``creates``: the other session the write
        creates (a fork), to which its idempotency record then belongs (DESIGN §6: it dies
        with the session it created)."""
        for attempt in (1, 2):
            try:
                return await self._write_once(
                    actor,
                    session_id,
                    op=op,
                    encode=encode,
                    idempotency=idempotency,
                    replay=replay,
                    creates=creates,
                )
            except IdempotencyTaken:
                # A twin request with the same key committed first: start again, and the
                # record it stored answers this one.
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    async def _write_once(
        self,
        actor: Actor,
        session_id: str,
        *,
        op: Callable[[AsyncConnection, datetime], Awaitable[R]],
        encode: Callable[[R], Encoded],
        idempotency: IdempotencyRequest | None,
        replay: Callable[[StoredResponse], Encoded] | None,
        creates: str | None,
    ) -> tuple[R | None, Encoded]:
        async with self.store.write() as db:
            await SessionRepository(db).lock(actor.tenant_id, session_id)
            now = utcnow()
            repo = scope = None
            if idempotency is not None:
                repo, scope = IdempotencyRepository(db), idempotency.scope(actor)
                stored = await repo.get(scope)
                if stored and (
                    (stored.expires_at and stored.expires_at <= now)
                    or (creates is not None and await _outlived(db, actor, session_id, stored))
                ):
                    await repo.delete(scope)
                    stored = None
                if stored:
                    return None, self.replayed(stored, idempotency, replay)
            result = await op(db, now)
            default_ttl = self.settings.retention.session_ttl_seconds
            if default_ttl is not None:  # a session without a TTL of its own gets the default
                expires_at = await SessionRepository(db).apply_default_ttl(
                    actor.tenant_id, session_id, ttl_seconds=default_ttl, now=now
                )
                if expires_at is not None and isinstance(result, SessionState):
                    result = replace(result, ttl_seconds=default_ttl, expires_at=expires_at)  # type: ignore[assignment]
            encoded = encode(result)
            if repo is not None and scope is not None and idempotency is not None:
                await repo.put(
                    scope,
                    session_id=creates or session_id,
                    stored=StoredResponse(
                        idempotency.request_hash, encoded.status_code, encoded.body
                    ),
                    now=now,
                    expires_at=self.idempotency_expiry(now),
                )
        return result, encoded

    def idempotency_expiry(self, now: datetime) -> datetime:
        return now + timedelta(seconds=self.settings.idempotency_ttl_seconds)

    @staticmethod
    def replayed(
        stored: StoredResponse,
        idempotency: IdempotencyRequest,
        replay: Callable[[StoredResponse], Encoded] | None,
    ) -> Encoded:
        """The answer a stored record gives a retry (422 if the key came with another body)."""
        if stored.request_hash != idempotency.request_hash:
            raise IdempotencyKeyReused(
                "this Idempotency-Key was used with a different request body"
            )
        if stored.kind != "response":
            if replay is None:
                raise AssertionError(f"no replay for a record of kind {stored.kind!r}")
            encoded = replay(stored)
        else:
            encoded = Encoded(stored.status_code, stored.response)
        return Encoded(encoded.status_code, encoded.body, encoded.version, replayed=True)


async def _outlived(
    db: AsyncConnection, actor: Actor, session_id: str, stored: StoredResponse
) -> bool:
    """Whether the record of a write that created another session (a fork's, found under
    its origin's route, belonging to the fork) outlived ``session_id``, the one it wrote
    to: that one was deleted, or deleted and created again since. (A record belonging to
    the session it wrote to is deleted with it.)"""
    if stored.session_id is None or stored.session_id == session_id:
        return False
    origin = await SessionRepository(db).get(actor.tenant_id, session_id)
    return origin is None or stored.created_at is None or origin.created_at > stored.created_at


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
