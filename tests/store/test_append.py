"""The one-statement append on Postgres writes exactly what the general three-statement path
writes: the same item rows, the same ``appended`` event, the same session row; and it writes
nothing when the fence or the item-id uniqueness refuses it."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from app import jsonutil
from app.domain.errors import DuplicateItemId
from app.domain.items import NewItem, StoredItem, item_chars, parse_canonical_items, record_of
from app.domain.sessions import SessionState
from app.domain.tokens import item_tokens
from app.store.append import AppendRepository
from app.store.db import Store
from app.store.events import EventRecord, EventRepository
from app.store.items import ItemRepository
from app.store.sessions import Counters, SessionRepository

RAW = [
    {"type": "message", "role": "system", "content": "Be brief.", "pinned": True},
    {"type": "message", "role": "user", "content": [{"type": "text", "text": "héllo"}]},
    {"type": "function_call", "call_id": "c1", "name": "ls", "arguments": '{"dir": "."}'},
    {"type": "function_call_output", "call_id": "c1", "output": "a.py\nb.py", "id": "out-1"},
    {"type": "message", "role": "assistant", "content": "Two files.", "metadata": {"k": [1, 2]}},
]
NOW = datetime(2026, 11, 29, 12, 0, 0, 123456, tzinfo=UTC)


@pytest.fixture
async def store(pg_database: str) -> AsyncIterator[Store]:
    store = Store.from_url(pg_database, pool_size=2, max_overflow=0)
    yield store
    await store.dispose()


def batch() -> list[NewItem]:
    return parse_canonical_items(RAW)


async def new_session(store: Store, session_id: str) -> None:
    async with store.write() as db:
        await SessionRepository(db).insert(
            tenant_id="t-append",
            session_id=session_id,
            metadata={},
            config={},
            summary=None,
            now=NOW,
        )


def ids_for(items: list[NewItem], round_: int = 0) -> list[str]:
    return [item.id or f"gen-{round_}-{i}" for i, item in enumerate(items)]


async def general_path(
    store: Store, session_id: str, items: list[NewItem], round_: int = 0
) -> SessionState:
    """What services.items does on SQLite (and did everywhere before the one-statement path)."""
    measured = [(item, item_tokens(item.body), item_chars(item.body)) for item in items]
    async with store.write() as db:
        state = await SessionRepository(db).bump(
            "t-append",
            session_id,
            counters=Counters(
                items=len(items),
                tokens=sum(t for _, t, _ in measured),
                chars=sum(c for _, _, c in measured),
                new_seqs=len(items),
                events=1,
            ),
            now=NOW,
        )
        assert state is not None
        first = state.last_seq - len(items) + 1
        stored = [
            StoredItem(
                body=item.body,
                id=item_id,
                seq=first + i,
                tokens=tokens,
                chars=chars,
                pinned=item.pinned,
                metadata=item.metadata,
                created_at=NOW,
            )
            for i, ((item, tokens, chars), item_id) in enumerate(
                zip(measured, ids_for(items, round_), strict=True)
            )
        ]
        await ItemRepository(db).insert("t-append", session_id, stored)
        await EventRepository(db).insert(
            "t-append",
            session_id,
            [
                EventRecord(
                    seq=state.event_seq,
                    type="appended",
                    version=state.version,
                    request_id="req-1",
                    actor="key-1",
                    data={"count": len(items), "first_seq": first, "last_seq": state.last_seq},
                    created_at=NOW,
                )
            ],
        )
    return state


async def one_statement(
    store: Store,
    session_id: str,
    items: list[NewItem],
    *,
    expected: int | None = None,
    round_: int = 0,
) -> SessionState | None:
    async with store.write() as db:
        return await AppendRepository(db).append(
            "t-append",
            session_id,
            batch=[
                (
                    item,
                    item_id,
                    item_tokens(item.body),
                    item_chars(item.body),
                    jsonutil.dumps(record_of(item)),
                )  # fmt: skip
                for item, item_id in zip(items, ids_for(items, round_), strict=True)
            ],
            now=NOW,
            expected_version=expected,
            request_id="req-1",
            actor="key-1",
        )


async def rows(store: Store, session_id: str) -> dict[str, Any]:
    async with store.read() as db:
        items = (
            await db.execute(
                sa.text(
                    "SELECT seq, item_id, type, role, call_id, body, tokens, chars, pinned, "
                    "metadata, archived, created_at, search_text FROM items "
                    "WHERE tenant_id = 't-append' AND session_id = :s ORDER BY seq"
                ),
                {"s": session_id},
            )
        ).all()
        events = (
            await db.execute(
                sa.text(
                    "SELECT seq, type, version, request_id, actor, data, created_at FROM events "
                    "WHERE tenant_id = 't-append' AND session_id = :s ORDER BY seq"
                ),
                {"s": session_id},
            )
        ).all()
        state = await SessionRepository(db).get("t-append", session_id)
    assert state is not None
    return {
        "items": [tuple(r) for r in items],
        "events": [tuple(r) for r in events],
        "session": {**vars_of(state), "id": None},
    }


@pytest.mark.postgres
async def test_one_statement_writes_what_the_general_path_writes(store: Store) -> None:
    await new_session(store, "general")
    await new_session(store, "single")
    for round_ in range(2):  # twice: the second batch gets the next seq range and event
        items = batch()
        if round_:
            items = [dataclasses.replace(i, id=None) if i.id else i for i in items]
        expected = await general_path(store, "general", items, round_)
        got = await one_statement(store, "single", items, round_=round_)
        assert got is not None
        assert _comparable(got) == _comparable(expected)
        # the session row's time is the database's on both paths, not the caller's NOW
        assert got.updated_at != NOW and expected.updated_at != NOW
        assert abs(got.updated_at - expected.updated_at) < timedelta(seconds=30)
    general, single = await rows(store, "general"), await rows(store, "single")
    assert {**single, "session": _comparable(single["session"])} == {
        **general,
        "session": _comparable(general["session"]),
    }
    assert [r[0] for r in single["items"]] == list(range(1, 2 * len(RAW) + 1))
    assert single["events"][-1][5] == {"count": 5, "first_seq": 6, "last_seq": 10}


def vars_of(state: SessionState) -> dict[str, Any]:
    return {f: getattr(state, f) for f in state.__dataclass_fields__}


def _comparable(state: SessionState | dict[str, Any]) -> dict[str, Any]:
    """A session row without what differs between two sessions written a moment apart (the
    id, the database clock's time of the write)."""
    values = vars_of(state) if isinstance(state, SessionState) else dict(state)
    return {**values, "id": None, "updated_at": None}


@pytest.mark.postgres
async def test_one_statement_writes_nothing_when_refused(store: Store) -> None:
    await new_session(store, "refused")
    before = await rows(store, "refused")
    # stale If-Match: no row matches the fence
    assert await one_statement(store, "refused", batch(), expected=7) is None
    # missing session
    assert await one_statement(store, "nobody-here", batch()) is None
    # an id already live in working memory
    assert await one_statement(store, "refused", batch()) is not None
    middle = await rows(store, "refused")
    with pytest.raises(DuplicateItemId):
        await one_statement(store, "refused", batch())
    assert await rows(store, "refused") == middle
    assert before["items"] == [] and len(middle["items"]) == len(RAW)
    # the right If-Match goes through
    assert await one_statement(
        store, "refused", parse_canonical_items(RAW[:2]), expected=2, round_=1
    )
