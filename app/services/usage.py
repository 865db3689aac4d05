"""Working memory over time, for the inspector's chart (``GET /ui/api/sessions/{id}/usage``):
the items and stored tokens working memory held at each version of a session, and where
compactions happened.

No figure of the API holds this: an event records what a write did (``appended``: a seq
range; ``compacted``: a compaction id; ``popped``: a seq; ``cleared``; ``restored``: the new
seq range), not the token count it left. So the series is replayed from the event log over
the item history (each item's stored ``tokens``, which ``token_count`` sums): the same counts
the session row keeps, at every version instead of the last one only. Items the retention
sweep has pruned from the history are no longer known; a replay that meets one says so
(``complete: false``) and counts it as zero.

Reads (``POST .../context``) write nothing, so no read is in this series: the page charts the
reads it made itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from app.services.access import load_session
from app.services.pairing import MAX_PAIRED_ITEMS
from app.services.runtime import Actor, Runtime
from app.store.compactions import CompactionRepository
from app.store.events import EventRecord, EventRepository
from app.store.items import ItemRepository

# The most events replayed (a page of the event log at a time); a longer log is cut short and
# the answer says so.
MAX_EVENTS = 50_000
_EVENT_PAGE = 1_000
MAX_COMPACTIONS = 10_000


@dataclass(frozen=True, slots=True)
class UsagePoint:
    """Working memory right after one event: its version, the event's type and time, and the
    items and stored tokens working memory held then (the session's ``item_count`` and
    ``token_count`` at that version; the summary is not among them)."""

    version: int
    event: str
    at: datetime
    items: int
    tokens: int


@dataclass(frozen=True, slots=True)
class CompactionPoint:
    version: int
    compaction_id: str
    policy: str
    automatic: bool
    compacted_items: int
    compacted_tokens: int
    summary_tokens: int


@dataclass(slots=True)
class Usage:
    version: int
    points: list[UsagePoint] = field(default_factory=list)
    compactions: list[CompactionPoint] = field(default_factory=list)
    complete: bool = True
    notes: list[str] = field(default_factory=list)


def _seqs(data: Mapping[str, Any]) -> range:
    first, last = data.get("first_seq"), data.get("last_seq")
    if isinstance(first, int) and isinstance(last, int):
        return range(first, last + 1)
    return range(0)


def replay(
    events: Sequence[EventRecord],
    tokens_of: Mapping[int, int],
    compactions: Mapping[str, tuple[Sequence[tuple[int, int]], int, int]],
) -> tuple[list[UsagePoint], list[CompactionPoint], set[int]]:
    """Working memory after each event, replayed: ``tokens_of`` maps seq -> stored tokens of
    every item the history still holds; ``compactions`` maps a compaction id -> (its compacted
    seq ranges, compacted tokens, summary tokens). Returns the points, the compaction points
    and the seqs working memory held that the history no longer has (counted as zero)."""
    live: set[int] = set()
    total = 0  # kept as items come and go: a sum over working memory per event is quadratic
    missing: set[int] = set()
    points: list[UsagePoint] = []
    marks: list[CompactionPoint] = []

    def add(seqs: range | Sequence[int]) -> None:
        nonlocal total
        for s in seqs:
            if s not in live:
                live.add(s)
                total += tokens_of.get(s, 0)
            if s not in tokens_of:
                missing.add(s)

    def remove(seqs: range | Sequence[int] | set[int]) -> None:
        nonlocal total
        for s in seqs:
            if s in live:
                live.discard(s)
                total -= tokens_of.get(s, 0)

    for e in events:
        data = e.data or {}
        if e.type == "created" and isinstance(data.get("items"), int):
            add(range(1, int(data["items"]) + 1))  # a fork: its copied items are seq 1..n
        elif e.type == "appended":
            add(_seqs(data))
        elif e.type == "popped" and isinstance(data.get("seq"), int):
            remove([int(data["seq"])])
        elif e.type == "cleared":
            remove(set(live))
        elif e.type == "restored":
            remove(set(live))
            add(_seqs(data))
        elif e.type == "compacted":
            cid = str(data.get("compaction_id", ""))
            ranges, compacted_tokens, summary_tokens = compactions.get(cid, ((), 0, 0))
            if ranges:
                for first, last in ranges:
                    remove(range(first, last + 1))
            else:  # a compaction record gone: its event still names its span
                remove(_seqs(data))
            marks.append(
                CompactionPoint(
                    version=e.version,
                    compaction_id=cid,
                    policy=str(data.get("policy", "")),
                    automatic=bool(data.get("automatic", False)),
                    compacted_items=int(data.get("count", 0)),
                    compacted_tokens=compacted_tokens,
                    summary_tokens=summary_tokens,
                )
            )
        points.append(
            UsagePoint(
                version=e.version,
                event=e.type,
                at=e.created_at,
                items=len(live),
                tokens=total,
            )
        )
    return points, marks, missing


async def usage_over_versions(rt: Runtime, actor: Actor, session_id: str) -> Usage:
    """The session's working memory at each version (see the module docstring), read in one
    transaction, so the last point is the session as ``GET /v1/sessions/{id}`` shows it."""
    async with rt.store.read() as db:
        state = await load_session(db, actor, session_id)
        log = EventRepository(db)
        events: list[EventRecord] = []
        after: int | None = None
        while len(events) < MAX_EVENTS:
            page = await log.list(actor.tenant_id, session_id, after_seq=after, limit=_EVENT_PAGE)
            events += page
            if len(page) < _EVENT_PAGE:
                break
            after = page[-1].seq
        rows = await ItemRepository(db).history(
            actor.tenant_id, session_id, after_seq=None, limit=MAX_PAIRED_ITEMS
        )
        results = await CompactionRepository(db).list(
            actor.tenant_id, session_id, before_id=None, limit=MAX_COMPACTIONS
        )
    tokens_of = {item.seq: item.tokens for item, _, _ in rows}
    compactions = {
        r.id: (
            list(r.report.compacted_ranges),
            r.report.compacted_tokens,
            r.report.summary_tokens,
        )
        for r in results
    }
    points, marks, missing = replay(events, tokens_of, compactions)
    usage = Usage(version=state.version, points=points, compactions=marks)
    if missing:
        usage.complete = False
        usage.notes.append(
            f"{len(missing)} item(s) of earlier versions are no longer in the history "
            "(pruned by retention, or past the first "
            f"{MAX_PAIRED_ITEMS:,} items): counted as 0 tokens"
        )
    if len(events) >= MAX_EVENTS:
        usage.complete = False
        usage.notes.append(f"only the first {MAX_EVENTS:,} events are charted")
    return usage
