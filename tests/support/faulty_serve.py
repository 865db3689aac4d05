"""`session-memory serve` with one fault switch on its real psycopg connections, for system
tests of what the server does with a connection left unfit for reuse.

A statement whose parameters carry ``LEAVE_IN_TRANSACTION`` (an item's text, say) runs as
usual, and then its connection is left in an open transaction (a real ``BEGIN`` sent on it):
the state a bug or an interrupted call could leave a pooled connection in. Nothing else is
changed: the pools, the store and the app are the real ones.

    python -m tests.support.faulty_serve serve --port 8080
"""

from __future__ import annotations

import sys
from typing import Any

import psycopg

LEAVE_IN_TRANSACTION = "fault-injection:leave-this-connection-in-a-transaction"

_execute = psycopg.AsyncCursor.execute


async def _execute_then_break(self: Any, query: Any, params: Any = None, **kwargs: Any) -> Any:
    cursor = await _execute(self, query, params, **kwargs)
    if params is not None and LEAVE_IN_TRANSACTION in repr(params):
        await self.connection.execute("BEGIN")
    return cursor


if __name__ == "__main__":
    psycopg.AsyncCursor.execute = _execute_then_break  # type: ignore[method-assign]
    from app.cli import main

    sys.exit(main())
