"""Search use cases: full-text search over one session's memory or history, and across every
session of the tenant the caller may see (its key's session prefix applies).

A query is words; operators and punctuation are words too, never syntax. A query with no word
in it (whitespace or punctuation only) matches nothing: an empty result, not an error. Only an
empty ``q`` is refused (the API declares ``minLength: 1``)."""

from __future__ import annotations

from typing import Literal

from app.domain.errors import InvalidInput
from app.services.access import load_session
from app.services.runtime import Actor, Runtime
from app.store.search import SearchHit, SearchRepository

Scope = Literal["memory", "history"]
MAX_QUERY_CHARS = 1000


def check_query(q: str) -> str:
    """The query's text, stripped (possibly empty: it then matches nothing)."""
    if not q:
        raise InvalidInput(
            "the search query is empty", errors=[{"loc": ["query", "q"], "msg": "empty"}]
        )
    text = q.strip()
    if len(text) > MAX_QUERY_CHARS:
        raise InvalidInput(
            "the search query is too long",
            errors=[{"loc": ["query", "q"], "msg": f"at most {MAX_QUERY_CHARS} characters"}],
        )
    return text


MAX_OFFSET = 10_000  # deepest page a cursor may ask for (the API's cursor pattern says so)


def _page(hits: list[SearchHit], *, offset: int, limit: int) -> tuple[list[SearchHit], int | None]:
    more = len(hits) > limit and offset + limit <= MAX_OFFSET
    return hits[:limit], (offset + limit if more else None)


async def search_session(
    rt: Runtime,
    actor: Actor,
    session_id: str,
    *,
    q: str,
    scope: Scope,
    limit: int,
    offset: int = 0,
) -> tuple[list[SearchHit], int | None]:
    """Ranked hits in one session (``memory``: working memory; ``history``: every item ever
    appended) and the offset of the next page (None at the end)."""
    text = check_query(q)
    async with rt.store.read() as db:
        await load_session(db, actor, session_id)
        if not text:
            return [], None
        hits = await SearchRepository(db).search(
            actor.tenant_id,
            text,
            session_id=session_id,
            include_archived=scope == "history",
            limit=limit + 1,
            offset=offset,
        )
    return _page(hits, offset=offset, limit=limit)


async def search_all(
    rt: Runtime, actor: Actor, *, q: str, scope: Scope, limit: int, offset: int = 0
) -> tuple[list[SearchHit], int | None]:
    """Ranked hits across the tenant's sessions visible to the caller."""
    text = check_query(q)
    if not text:
        return [], None
    async with rt.store.read() as db:
        hits = await SearchRepository(db).search(
            actor.tenant_id,
            text,
            session_prefix=actor.session_prefix,
            include_archived=scope == "history",
            limit=limit + 1,
            offset=offset,
        )
    return _page(hits, offset=offset, limit=limit)
