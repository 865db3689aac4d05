"""Domain errors: what can go wrong in a use case, in words that know nothing of HTTP.

Hierarchy (the API maps each leaf to a status and a stable problem ``type``)::

    DomainError
    ├── NotFound               (SessionNotFound, ItemNotFound, SnapshotNotFound, ...)
    ├── Conflict               (SessionExists, DuplicateItemId, WorkingMemoryReplaced,
    │                          TransactionConflict, ...)
    ├── PreconditionFailed     (VersionMismatch, SessionRecreated)
    ├── InvalidInput           (bad item, bad budget, a value the database refuses, ...)
    │   │                      carries field-level ``errors``
    │   └── LimitExceeded      (too many items, item or metadata too large, past a database
    │                          limit)
    ├── IdempotencyKeyReused   (same key, another body)
    ├── Unavailable            (LockTimeout, LockBackendUnavailable, DatabaseUnavailable)
    │                          carries ``retry_after``
    ├── Forbidden              (a key granting more than it holds, OutsideKeyPrefix)
    ├── LLMNotConfigured       (policy ``llm`` on a server without an LLM endpoint: not
    │                          temporary; the client picks another policy)
    ├── SemanticSearchOff      (``mode=semantic`` on a server without an embedder)
    └── UpstreamFailed         (the LLM used for compaction failed)
"""

from __future__ import annotations

from typing import Any


class DomainError(Exception):
    """Base of every error a use case raises on purpose."""

    code: str = "error"
    title: str = "Error"

    def __init__(self, detail: str, *, errors: list[dict[str, Any]] | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.errors = errors


class NotFound(DomainError):
    code = "not-found"
    title = "Not found"


class SessionNotFound(NotFound):
    code = "session-not-found"
    title = "Session not found"


class ItemNotFound(NotFound):
    code = "item-not-found"
    title = "Item not found"


class SnapshotNotFound(NotFound):
    code = "snapshot-not-found"
    title = "Snapshot not found"


class KeyNotFound(NotFound):
    code = "key-not-found"
    title = "API key not found"


class Conflict(DomainError):
    code = "conflict"
    title = "Conflict"


class SessionExists(Conflict):
    code = "session-exists"
    title = "Session already exists"


class DuplicateItemId(Conflict):
    code = "duplicate-item-id"
    title = "Item id already in working memory"


class WorkingMemoryReplaced(Conflict):
    code = "working-memory-replaced"
    title = "Working memory was replaced meanwhile"


class TransactionConflict(Conflict):
    """The database aborted the transaction to resolve a conflict with a concurrent one (a
    serialization failure or a deadlock): nothing was written, and the same request (with the
    same ``Idempotency-Key``) can be sent again."""

    code = "transaction-conflict"
    title = "Conflict with a concurrent transaction"


class EmptyWorkingMemory(Conflict):
    code = "empty-working-memory"
    title = "Working memory is empty"


class PreconditionFailed(DomainError):
    code = "precondition-failed"
    title = "Precondition failed"


class VersionMismatch(PreconditionFailed):
    code = "version-mismatch"
    title = "Session version does not match If-Match"


class SessionRecreated(PreconditionFailed):
    """A write with ``If-Match`` found the session it addressed deleted, and another session
    by the same id created meanwhile, at the very version the client expected. Nothing was
    written; reading the (new) session and retrying is safe."""

    code = "session-recreated"
    title = "Session was deleted and created again"


class InvalidInput(DomainError):
    code = "invalid-input"
    title = "Invalid input"


class LimitExceeded(InvalidInput):
    code = "limit-exceeded"
    title = "Limit exceeded"


class LLMNotConfigured(DomainError):
    """The ``llm`` compaction policy was asked for, but this server has no LLM endpoint.

    A well-formed, valid request this deployment refuses (403: waiting or retrying does not
    help until an operator sets ``LLM__BASE_URL``; the client can choose the ``structured`` or
    ``window`` policy instead). Not a 422: the request is valid by the published schema, which
    cannot know how a server is deployed. Not a 409: the session's state is not at fault."""

    code = "llm-not-configured"
    title = "No LLM endpoint is configured"


class SemanticSearchOff(DomainError):
    """``mode=semantic`` was asked for, but this server has no embedder
    (``EMBEDDINGS__PROVIDER=none``). As ``LLMNotConfigured``: a valid request this deployment
    refuses (403, not temporary; ``fulltext`` or ``hybrid``, which answers as full text, work)."""

    code = "semantic-search-off"
    title = "Semantic search is off on this server"


class IdempotencyKeyReused(DomainError):
    code = "idempotency-key-reused"
    title = "Idempotency key reused with a different request"


class Unavailable(DomainError):
    code = "unavailable"
    title = "Service unavailable"

    def __init__(self, detail: str, *, retry_after: int = 1) -> None:
        super().__init__(detail)
        self.retry_after = retry_after


class LockTimeout(Unavailable):
    code = "lock-timeout"
    title = "Session is busy"


class LockBackendUnavailable(Unavailable):
    code = "lock-backend-unavailable"
    title = "Lock backend unavailable"


class DatabaseUnavailable(Unavailable):
    """The database connection failed mid-request (restart, failover, dropped connection): the
    transaction was not committed, or its outcome is unknown; a retry with the same
    ``Idempotency-Key`` is safe either way."""

    code = "database-unavailable"
    title = "Database unavailable"


class UpstreamFailed(DomainError):
    code = "upstream-failed"
    title = "Upstream model failed"


class Forbidden(DomainError):
    """The caller is known but may not do this (a key granting more than it holds)."""

    code = "forbidden"
    title = "Forbidden"


class OutsideKeyPrefix(Forbidden):
    """A key confined to a session-id prefix asked to create a session outside it. The key
    knows its own prefix, so naming it leaks nothing (reads outside it stay 404)."""

    code = "outside-key-prefix"
    title = "Session id outside the key's prefix"
