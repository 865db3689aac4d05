"""What a database error means for the request: the one place that classifies driver errors,
by SQLSTATE class on Postgres and by result code on SQLite, into domain errors (the API maps
those to problems). ``Store`` applies it to every connection it hands out.

- connection trouble, retryable as it is: 503 ``DatabaseUnavailable`` with Retry-After.
  Postgres: SQLSTATE class 08 (connection exception), 53 (insufficient resources), 57
  (operator intervention: shutdown, cancelled statement), a driver error without SQLSTATE (a
  refused, lost or closed connection), a disconnect. SQLite: SQLITE_BUSY, SQLITE_LOCKED
  ("database is locked"), SQLITE_FULL. Either: an exhausted pool.
- 55P03 lock_not_available (``lock_timeout`` on the session row): 503 ``LockTimeout``.
- 40001 serialization_failure, 40P01 deadlock_detected: 409 ``TransactionConflict``.
- class 54 program limit exceeded (a jsonb value or a tsvector too large, ...), SQLite
  SQLITE_TOOBIG: 413 ``LimitExceeded``.
- class 22 data exception (a number out of range, a string too long, invalid text
  representation, a datetime overflow, ...): 422 ``InvalidInput``.
- anything else (a bug, a missing migration, "no such table"): re-raised, a 500.

Only connection trouble is retryable as it is. A serialization failure or deadlock rolled the
transaction back, so sending the request again is safe, but it is a 409 (not retried inside:
the transaction's body belongs to the caller) that names the cause. A limit or a data error is
deterministic: the same request fails the same way.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import exc as sa_exc

from app.domain.errors import (
    DatabaseUnavailable,
    DomainError,
    InvalidInput,
    LimitExceeded,
    LockTimeout,
    TransactionConflict,
)

# What a store connection can raise from the driver or the pool: the classification's input.
DATABASE_ERRORS = (sa_exc.DBAPIError, sa_exc.TimeoutError)

_RETRYABLE_CLASSES = ("08", "53", "57")
_TRANSACTION_CONFLICTS = ("40001", "40P01")
_SQLITE_UNAVAILABLE = ("SQLITE_BUSY", "SQLITE_LOCKED", "SQLITE_FULL")


def domain_error_for(exc: Exception, *, sqlite: bool) -> DomainError | None:
    """The domain error ``exc`` (a ``DATABASE_ERRORS`` instance) stands for, or None when it is
    not the request's or the connection's doing (a bug: let it surface as a 500)."""
    if isinstance(exc, sa_exc.TimeoutError):
        return _unavailable("no database connection was free in time")
    if not isinstance(exc, sa_exc.DBAPIError):
        return None
    orig = exc.orig
    if sqlite:
        return _sqlite_error(exc, orig)
    if exc.connection_invalidated:
        return _unavailable(f"the database connection was lost ({type(orig).__name__})")
    sqlstate: str | None = getattr(orig, "sqlstate", None)
    if sqlstate is None:
        # A client-side driver error: a refused, lost or closed connection is one; a value
        # psycopg cannot adapt (a DataError) is not, and stays a 500.
        if isinstance(exc, sa_exc.OperationalError | sa_exc.InterfaceError):
            return _unavailable(f"the database connection failed ({type(orig).__name__})")
        return None
    message = _message(orig)
    if sqlstate == "55P03":
        return LockTimeout(
            "another write to this session is in progress; retry shortly", retry_after=1
        )
    if sqlstate in _TRANSACTION_CONFLICTS:
        return TransactionConflict(
            f"the database aborted this request to resolve a conflict with a concurrent one "
            f"({message}); nothing was written: send it again"
        )
    if sqlstate.startswith(_RETRYABLE_CLASSES):
        return _unavailable(f"the database is unavailable ({message})")
    if sqlstate.startswith("54"):
        return LimitExceeded(f"the request exceeds a database limit: {message}")
    if sqlstate.startswith("22"):
        return InvalidInput(f"the database refused a value of this request: {message}")
    return None


def _sqlite_error(exc: sa_exc.DBAPIError, orig: Any) -> DomainError | None:
    name = str(getattr(orig, "sqlite_errorname", ""))
    text = str(orig)
    if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")) or (
        not name
        and isinstance(exc, sa_exc.OperationalError)
        and ("locked" in text or "busy" in text)
    ):
        # another write held the database for LOCK__WAIT_SECONDS (its busy timeout)
        return LockTimeout("another write is in progress; retry shortly", retry_after=1)
    if name.startswith(_SQLITE_UNAVAILABLE):
        return _unavailable(f"the database is full ({text})")
    if name == "SQLITE_TOOBIG":
        return LimitExceeded(f"the request exceeds a database limit: {text}")
    # Everything else ("no such table", misuse, a constraint nobody caught) is a bug.
    return None


def _message(orig: Any) -> str:
    diag = getattr(orig, "diag", None)
    primary = getattr(diag, "message_primary", None)
    return str(primary or orig).strip()


def _unavailable(detail: str) -> DatabaseUnavailable:
    """Connection trouble: a 503 with Retry-After. The pool replaces the connection (a
    disconnect invalidates every pooled connection, so a retry gets a fresh one), and the
    transaction was not committed or its outcome is unknown; a retry with the same
    ``Idempotency-Key`` is safe either way."""
    return DatabaseUnavailable(f"{detail}; retry shortly", retry_after=1)
