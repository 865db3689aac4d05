"""Create on append without a transaction (Postgres: the append statement, then, for a missing
session, the upsert of its row): it writes what the transactional
create writes (session row, items, ``created`` + ``appended`` events), concurrent first
appends to one new id all land with exactly one ``created``, and it writes nothing where the
transactional path would refuse or must decide: a tenant whose erasure began (even one that
began while the statement waited for the tenant's lock), an id held by an expired session or
one being erased."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from app import jsonutil
from app.domain.items import NewItem, StoredItem, item_chars, parse_canonical_items, record_of
from app.domain.retention import ERASING
from app.domain.sessions import SessionState
from app.domain.tokens import item_tokens
from app.store.append import AppendRepository
from app.store.db import Store
from app.store.events import EventRecord, EventRepository
from app.store.items import ItemRepository
from app.store.retention import RetentionRepository
from app.store.sessions import Counters, SessionRepository
from app.store.tables import sessions as sessions_table

pytestmark = pytest.mark.postgres

TENANT = "t-create-append"
RAW = [
    {"type": "message", "role": "user", "content": "héllo", "metadata": {"k": 1.5}},
    {"type": "function_call", "call_id": "c1", "name": "ls", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "c1", "output": "a.py", "id": "out-1"},
]
NOW = datetime(2026, 12, 4, 12, 0, 0, 654321, tzinfo=UTC)


@pytest.fixture
async def store(pg_database: str) -> AsyncIterator[Store]:
    store = Store.from_url(pg_database, pool_size=20, max_overflow=0)
    yield store
    await store.dispose()


def measured(items: list[NewItem], prefix: str) -> list[tuple[NewItem, str, int, int, str]]:
    return [
        (
            item,
            item.id or f"{prefix}-{i}",
            item_tokens(item.body),
            item_chars(item.body),
            jsonutil.dumps(record_of(item)),
        )
        for i, item in enumerate(items)
    ]


async def create_append(
    store: Store,
    session_id: str,
    items: list[NewItem],
    *,
    prefix: str = "gen",
    tenant: str = TENANT,
    default_ttl: int | None = None,
) -> SessionState | None:
    async with store.statements() as conn:
        return await AppendRepository(conn).append(
            tenant,
            session_id,
            batch=measured(items, prefix),
            now=NOW,
            expected_version=None,
            request_id="req-1",
            actor="key-1",
            create=True,
            default_ttl=default_ttl,
        )


async def general_create(store: Store, session_id: str, items: list[NewItem]) -> SessionState:
    """What services.items does on SQLite: create the row at version 0, bump it with two
    events, insert the items and the ``created`` + ``appended`` events."""
    batch = measured(items, "gen")
    n = len(batch)
    async with store.write() as db:
        sessions = SessionRepository(db)
        assert await sessions.insert_if_missing(tenant_id=TENANT, session_id=session_id, now=NOW)
        state = await sessions.bump(
            TENANT,
            session_id,
            counters=Counters(
                items=n,
                tokens=sum(b[2] for b in batch),
                chars=sum(b[3] for b in batch),
                new_seqs=n,
                events=2,
            ),
            now=NOW,
        )
        assert state is not None
        first = state.last_seq - n + 1
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
            for i, (item, item_id, tokens, chars, _) in enumerate(batch)
        ]
        await ItemRepository(db).insert(TENANT, session_id, stored)

        def event(seq: int, type_: str, data: dict[str, Any]) -> EventRecord:
            return EventRecord(seq, type_, state.version, "req-1", "key-1", data, NOW)

        await EventRepository(db).insert(
            TENANT,
            session_id,
            [
                event(state.event_seq - 1, "created", {}),
                event(
                    state.event_seq,
                    "appended",
                    {"count": n, "first_seq": first, "last_seq": state.last_seq},
                ),
            ],
        )
    return state


async def rows(store: Store, session_id: str, tenant: str = TENANT) -> dict[str, Any]:
    async with store.read() as db:
        items = (
            await db.execute(
                sa.text(
                    "SELECT seq, item_id, type, role, call_id, body, tokens, chars, pinned, "
                    "metadata, archived, created_at, search_text FROM items "
                    "WHERE tenant_id = :t AND session_id = :s ORDER BY seq"
                ),
                {"t": tenant, "s": session_id},
            )
        ).all()
        events = (
            await db.execute(
                sa.text(
                    "SELECT seq, type, version, request_id, actor, data, created_at FROM events "
                    "WHERE tenant_id = :t AND session_id = :s ORDER BY seq"
                ),
                {"t": tenant, "s": session_id},
            )
        ).all()
        state = await SessionRepository(db).get(tenant, session_id)
    return {
        "items": [tuple(r) for r in items],
        "events": [tuple(r) for r in events],
        "session": state,
    }


def comparable(state: SessionState | None) -> dict[str, Any]:
    """A session row without what differs between two sessions written a moment apart."""
    assert state is not None
    values = {f: getattr(state, f) for f in state.__dataclass_fields__}
    return {**values, "id": None, "updated_at": None}


async def test_first_append_writes_what_the_transactional_create_writes(store: Store) -> None:
    items = parse_canonical_items(RAW)
    expected = await general_create(store, "by-transaction", items)
    got = await create_append(store, "by-statement", items)
    assert got is not None
    assert comparable(got) == comparable(expected)
    assert (got.version, got.event_seq, got.last_seq, got.item_count) == (1, 2, 3, 3)
    assert got.created_at == NOW and got.updated_at != NOW  # the row's time: the database's
    general, single = await rows(store, "by-transaction"), await rows(store, "by-statement")
    assert single["items"] == general["items"]
    assert single["events"] == general["events"]
    assert [e[1] for e in single["events"]] == ["created", "appended"]
    assert comparable(single["session"]) == comparable(general["session"])

    # the next create-append bumps the row exactly as the plain one-statement append does
    more = [i for i in parse_canonical_items(RAW) if i.id is None]
    again = await create_append(store, "by-statement", more, prefix="next")
    assert again is not None and (again.version, again.event_seq, again.last_seq) == (2, 3, 5)
    after = await rows(store, "by-statement")
    assert [e[1] for e in after["events"]] == ["created", "appended", "appended"]
    assert after["events"][-1][5] == {"count": 2, "first_seq": 4, "last_seq": 5}
    assert after["session"].created_at == NOW  # the create's time is kept


async def test_a_new_session_takes_the_server_default_ttl(store: Store) -> None:
    state = await create_append(store, "with-ttl", parse_canonical_items(RAW[:1]), default_ttl=600)
    assert state is not None and state.ttl_seconds == 600
    assert state.expires_at is not None and state.expires_at - state.updated_at == timedelta(
        seconds=600
    )
    plain = await create_append(store, "without-ttl", parse_canonical_items(RAW[:1]))
    assert plain is not None and plain.ttl_seconds is None and plain.expires_at is None


async def test_concurrent_first_appends_all_land_with_one_created_event(store: Store) -> None:
    n = 16
    items = [
        parse_canonical_items([{"type": "message", "role": "user", "content": f"m{k}"}])
        for k in range(n)
    ]
    states = await asyncio.gather(
        *(create_append(store, "racing", items[k], prefix=f"c{k}") for k in range(n))
    )
    assert all(s is not None for s in states)
    assert sorted(s.version for s in states if s is not None) == list(range(1, n + 1))
    got = await rows(store, "racing")
    assert [r[0] for r in got["items"]] == list(range(1, n + 1))
    assert sorted(jsonutil.loads(r[5])["content"] for r in got["items"]) == sorted(
        f"m{k}" for k in range(n)
    )
    types = [e[1] for e in got["events"]]
    assert types == ["created"] + ["appended"] * n
    assert [e[0] for e in got["events"]] == list(range(1, n + 2))
    assert got["session"].version == n and got["session"].item_count == n


async def test_nothing_is_written_for_a_tenant_being_erased(store: Store) -> None:
    tenant = "t-erased-before"
    async with store.write() as db:
        await RetentionRepository(db).begin_tenant_erasure(tenant, now=NOW)
    assert await create_append(store, "s1", parse_canonical_items(RAW), tenant=tenant) is None
    got = await rows(store, "s1", tenant)
    assert got == {"items": [], "events": [], "session": None}


async def test_an_erasure_that_begins_while_the_create_waits_is_seen(store: Store) -> None:
    """The statement's own snapshot is older than the tombstone here: it started while the
    erasure held the tenant's lock. The guard looks after the lock is granted, so it sees the
    tombstone and the create writes nothing (else the session would outlive the erasure)."""
    tenant = "t-erased-during"
    async with store.write() as db:
        await RetentionRepository(db).begin_tenant_erasure(tenant, now=NOW)
        waiting = asyncio.create_task(
            create_append(store, "s1", parse_canonical_items(RAW), tenant=tenant)
        )
        await asyncio.sleep(0.5)
        assert not waiting.done()  # blocked on the tenant's lock, its snapshot already taken
    assert await asyncio.wait_for(waiting, 10) is None
    assert (await rows(store, "s1", tenant))["session"] is None


async def test_creates_in_flight_hold_off_the_erasure(store: Store) -> None:
    """The other order: an erasure that begins while a create holds the tenant's lock waits
    for it to commit (so its listing of the tenant's sessions finds the new one); once the
    tombstone is written, the one-statement create writes nothing."""
    tenant = "t-erased-after"
    async with store.write() as db:  # a transactional create holds the tenant's lock shared
        await RetentionRepository(db).check_tenant_writable(tenant)
        erasure = asyncio.create_task(_begin_erasure(store, tenant))
        await asyncio.sleep(0.3)
        assert not erasure.done()
    await asyncio.wait_for(erasure, 10)
    assert await create_append(store, "s1", parse_canonical_items(RAW), tenant=tenant) is None


async def _begin_erasure(store: Store, tenant: str) -> None:
    async with store.write() as db:
        await RetentionRepository(db).begin_tenant_erasure(tenant, now=NOW)


@pytest.mark.parametrize("expires_at", ["past", "erasing"])
async def test_nothing_is_written_over_an_expired_or_erasing_session(
    store: Store, expires_at: str
) -> None:
    sid = f"held-{expires_at}"
    assert await create_append(store, sid, parse_canonical_items(RAW[:1])) is not None
    mark = NOW - timedelta(days=1) if expires_at == "past" else ERASING
    async with store.write() as db:
        await db.execute(
            sa.update(sessions_table)
            .where(sessions_table.c.tenant_id == TENANT, sessions_table.c.id == sid)
            .values(expires_at=mark)
        )
    before = await rows(store, sid)
    more = parse_canonical_items([{"type": "message", "role": "user", "content": "late"}])
    assert await create_append(store, sid, more, prefix="late") is None
    assert await rows(store, sid) == before
