"""Which call each tool output answers, for views that show a session's items side by side
(the inspector's timeline): computed by the projection's own pairing rule
(``app.domain.projection.analysis``: an output answers the latest earlier call with its pairing
key), so a view never pairs otherwise than the prompt does. Gemini calls without an id get a
derived key that repeats turn after turn, and so can a client's own ids: pairing by key alone
would put every turn's output under the first call."""

from __future__ import annotations

from app.domain.projection.analysis import analyse
from app.services.access import load_session
from app.services.runtime import Actor, Runtime
from app.store.items import ItemRepository

# The most items a view is paired for (the inspector draws at most as many: ui/static/js).
MAX_PAIRED_ITEMS = 20_000


async def paired_calls(
    rt: Runtime, actor: Actor, session_id: str, *, archived: bool
) -> tuple[dict[int, int], int]:
    """``{output seq: call seq}`` over the session's first ``MAX_PAIRED_ITEMS`` items of
    working memory (``archived``: of every item ever appended, in seq order), and the
    session's version they were read at. An output with no such call is left out."""
    async with rt.store.read() as db:
        state = await load_session(db, actor, session_id)
        repo = ItemRepository(db)
        if archived:
            rows = await repo.history(
                actor.tenant_id, session_id, after_seq=None, limit=MAX_PAIRED_ITEMS
            )
            items = [item for item, _, _ in rows]
        else:
            items = await repo.list_live(
                actor.tenant_id, session_id, after_seq=None, limit=MAX_PAIRED_ITEMS
            )
    call_of = analyse([item.body for item in items], 0).call_of
    return {items[o].seq: items[c].seq for o, c in call_of.items()}, state.version
