"""The next-turn prompt: load what the budget needs, project it, report.

The read's cost follows the budget, not the session: the newest items' keys (seq and stored
counts) are loaded in batches sized from the session's average item size until the window the
budget asks for is covered; older items are loaded only if mandatory (pinned, system, pinned
prefix, newest user message). If the projection says the window was too small to decide
(``needs_more``), the window doubles.

Every answer is what one consistent state of the session projects to:

1. the session row is read alone; a projection is deterministic and every write bumps the
   version, so the prompt of a (session, version, format, budget) is kept in a per-process
   cache (``CONTEXT_CACHE_PROMPTS``) and a read before the next write stops here;
2. the usual case then runs on the same connection without a transaction: one statement
   reads the window's keys, the mandatory older items and the session's version; equal to
   the row's, it saw the state the row describes (every write bumps the version, and
   versions only grow). When that batch does not settle the read, more batches follow on the
   same connection, each one statement checked the same way, bringing the mandatory items
   older than the window it extends. Bodies come from the item cache or by seq (items never
   change);
3. anything else (a write landed in between, a read that needs the whole memory) runs in
   one REPEATABLE READ snapshot.
"""

from __future__ import annotations

import dataclasses
from bisect import bisect_left
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from itertools import accumulate
from operator import itemgetter

from sqlalchemy.ext.asyncio import AsyncConnection

from app.domain.formats import FormatName
from app.domain.items import StoredItem
from app.domain.projection import (
    Budget,
    ContextSource,
    ProjectedContext,
    WindowHint,
    project_context,
    window_hint,
)
from app.domain.sessions import SessionState
from app.services.access import check_visible, found, load_session
from app.services.recall import cancel_recall, recall_context, start_recall
from app.services.runtime import Actor, Runtime
from app.store.context import (
    Batch,
    ContextRepository,
    FirstBatch,
    Older,
    WindowKeys,
    session_with_batch,
)
from app.store.items import ItemRepository
from app.store.raw import DriverConnection
from app.store.window_sizes import WindowSize, WindowSizes

MAX_ATTEMPTS = 12


@dataclass(frozen=True, slots=True)
class ContextResult:
    format: FormatName
    version: int
    projected: ProjectedContext


def _reaches(items: int, tokens: int, chars: int, hint: WindowHint) -> bool:
    """Whether a window of these totals reaches every minimum of the hint."""
    return (
        (hint.min_items is None or items >= hint.min_items)
        and (hint.min_tokens is None or tokens >= hint.min_tokens)
        and (hint.min_chars is None or chars >= hint.min_chars)
    )


_TOKENS = itemgetter(1)  # of a key: (seq, tokens, chars)
_CHARS = itemgetter(2)


def _covered(keys: list[tuple[int, int, int]], hint: WindowHint) -> bool:
    """Whether the window's (seq, tokens, chars) rows reach every minimum of the hint."""
    return _reaches(len(keys), sum(map(_TOKENS, keys)), sum(map(_CHARS, keys)), hint)


def _covering(keys: list[tuple[int, int, int]], hint: WindowHint, low: int, high: int) -> int:
    """The fewest of the newest ``keys`` (at least ``low``, at most ``high``) that reach every
    minimum of the hint; ``high`` if none do. (Stored counts are never negative, so the
    running sums only grow and each minimum is first reached where a bisection finds it.)"""
    head = keys[:high]
    size = max(low, 1, hint.min_items or 0)
    for column, minimum in ((_TOKENS, hint.min_tokens), (_CHARS, hint.min_chars)):
        if minimum is not None:
            size = max(size, bisect_left(list(accumulate(map(column, head))), minimum) + 1)
    return size if size <= len(head) else high


def _batch_size(state: SessionState, hint: WindowHint, keys: list[tuple[int, int, int]]) -> int:
    """Enough rows to cover the rest of the hint, plus a margin: at the average size of the
    keys loaded so far (the newest items can be much smaller than the session's), or of the
    session's items before any is."""
    have = len(keys)
    seen_tokens = sum(map(_TOKENS, keys))
    seen_chars = sum(map(_CHARS, keys))
    items, tokens, chars = (
        (have, seen_tokens, seen_chars)
        if have
        else (state.item_count, state.token_count, state.char_count)
    )
    avg_tokens = max(tokens / max(items, 1), 1.0)
    avg_chars = max(chars / max(items, 1), 1.0)
    want = 16
    if hint.min_items is not None:
        want = max(want, hint.min_items - have)
    if hint.min_tokens is not None:
        want = max(want, int((hint.min_tokens - seen_tokens) / avg_tokens * 1.1))
    if hint.min_chars is not None:
        want = max(want, int((hint.min_chars - seen_chars) / avg_chars * 1.1))
    return min(max(want, 16), 5000)


async def read_context(
    rt: Runtime,
    actor: Actor,
    session_id: str,
    *,
    format: FormatName,
    overrides: Mapping[str, object],
) -> ContextResult:
    memo = rt.store.prompt_cache
    sizes = rt.store.window_sizes
    sized = _sizes_key(actor, session_id, overrides) if sizes is not None else None
    last = sizes.get(sized) if sizes is not None and sized is not None else None
    # Postgres: the usual case is only RawQuery statements, each in autocommit, on a pooled
    # connection without SQLAlchemy's Connection around it (``Store.statements``).
    connection = rt.store.read() if rt.store.is_sqlite else rt.store.statements()
    async with connection as db:
        state, first = await _first_statement(rt, db, actor, session_id, last)
        full = _budget(state, overrides)
        budget = full.reserved()  # the rest of the prompt (recall's share set aside)
        started = None
        if full.recall_tokens:
            # recall depends on the index too, which changes without a new version
            memo = None
            # its query and the query's embedding go on while the prompt is projected
            started = start_recall(rt, actor, state, full)
        if memo is not None:
            cached = memo.get(_memo_key(actor, state, format, budget))
            if isinstance(cached, ContextResult):
                if sizes is not None and sized is not None and last is not None:
                    sizes.put(sized, dataclasses.replace(last, cached=True))
                rt.notify("context_projected", cached.projected.report.projected_tokens)
                return cached
        settled = None
        if sizes is not None and sized is not None:
            settled = _remember(sizes, sized, state, budget)
        try:
            at_once, stale = await _at_once(
                rt, db, actor, state, budget, format, last=last, first=first, settled=settled
            )
        except BaseException:
            cancel_recall(started)
            raise
    try:
        if at_once is not None:
            projected = at_once
        else:
            state, budget, projected = await _in_snapshot(
                rt, actor, session_id, None if stale else state, overrides, format
            )
            full = _budget(state, overrides)
    except BaseException:
        cancel_recall(started)
        raise
    if full.recall_tokens:
        projected = await recall_context(
            rt, actor, state, projected, budget=full, format=format, started=started
        )
    else:
        cancel_recall(started)
    rt.notify("context_projected", projected.report.projected_tokens)
    result = ContextResult(format=format, version=state.version, projected=projected)
    if memo is not None:
        memo.put(
            _memo_key(actor, state, format, budget), result, chars=projected.report.projected_chars
        )
    return result


async def _first_statement(
    rt: Runtime,
    db: AsyncConnection | DriverConnection,
    actor: Actor,
    session_id: str,
    last: WindowSize | None,
) -> tuple[SessionState, tuple[FirstBatch, Batch] | None]:
    """The session row, and on Postgres with it the first batch of a read like ``last``."""
    if last is None or last.cached or rt.store.is_sqlite:
        # The session row alone (one statement, no transaction) says if the prompt is known;
        # if not, the same connection goes on with the usual case.
        return await load_session(db, actor, session_id), None
    # Read before with this budget, and not answered by the prompt cache then (an agent's
    # loop writes between reads): the session row and the first batch the last read took,
    # with room for what was appended since, in one statement.
    check_visible(actor, session_id)
    plan = FirstBatch(last.include_system, last.prefix_items, last.keys + last.keys // 8)
    row, batch = await session_with_batch(db, actor.tenant_id, session_id, plan)
    return found(row, session_id), (plan, batch)


def _remember(
    sizes: WindowSizes, key: Hashable, state: SessionState, budget: Budget
) -> Callable[[int], None]:
    """What ``_at_once`` tells the keys its window took, to size the next read like it."""

    def settled(keys: int) -> None:
        size = WindowSize(state.item_count, keys, budget.keep_system, budget.pinned_prefix_items)
        sizes.put(key, size)

    return settled


def _sizes_key(actor: Actor, session_id: str, overrides: Mapping[str, object]) -> Hashable | None:
    """What names a session's reads with one budget in ``WindowSizes`` (None: a budget with
    parts that cannot be a key; such a read is not remembered)."""
    key = (actor.tenant_id, session_id, tuple(sorted(overrides.items())))
    try:
        hash(key)
    except TypeError:
        return None
    return key


def _memo_key(actor: Actor, state: SessionState, format: FormatName, budget: Budget) -> object:
    """What names one prompt for good: the session (its creation time tells it from an
    earlier one with the same id), its version, the format and the budget."""
    return (actor.tenant_id, state.id, state.created_at, state.version, format, budget)


def _repository(
    rt: Runtime, db: AsyncConnection | DriverConnection, actor: Actor, state: SessionState
) -> ContextRepository:
    return ContextRepository(
        db,
        actor.tenant_id,
        state.id,
        session_created_at=state.created_at,
        cache=rt.store.item_cache,
    )


async def _at_once(
    rt: Runtime,
    db: AsyncConnection | DriverConnection,
    actor: Actor,
    state: SessionState,
    budget: Budget,
    format: FormatName,
    *,
    last: WindowSize | None = None,
    first: tuple[FirstBatch, Batch] | None = None,
    settled: Callable[[int], None] | None = None,
) -> tuple[ProjectedContext | None, bool]:
    """The usual case without a transaction (no BEGIN and COMMIT round trips): one statement
    reads the window's keys, the mandatory older items and the session's version; equal to
    ``state``'s, it saw the state ``state`` describes (every write bumps the version). The
    window is the fewest of the keys it read that reach the hint. Then the bodies not cached,
    which never change. If that does not settle the read (too few keys, or ``needs_more``),
    the general loop goes on on this connection, every statement checked against ``state``.
    Gives up (None) if the version differs (second value True: a write landed since ``state``
    was read) or the whole memory is needed; the snapshot path then does the general case.

    ``last``: how the last read of the session with this budget went (``WindowSizes``): its
    window's keys and every item appended since size the first batch. ``first``: a first
    batch read with the session row, used if it holds the mandatory items this budget wants
    (a batch of any size serves: too few keys, and more batches follow). ``settled``: told
    the keys the window took when the first hint settles the read."""
    hint = window_hint(budget, attempt=0)
    if hint is None:
        return None, False
    repo = _repository(rt, db, actor, state)
    limit = _batch_size(state, hint, [])
    if last is not None:  # what the last read needed, and every item appended since
        limit = max(limit, last.keys + max(0, state.item_count - last.item_count))
    mandatory = (budget.keep_system, budget.pinned_prefix_items)
    if first is not None and (first[0].include_system, first[0].prefix_items) == mandatory:
        batch = first[1]
    else:
        batch = await repo.batch(
            limit=limit,
            include_system=budget.keep_system,
            prefix_items=budget.pinned_prefix_items,
        )
    if batch.session_version != state.version:
        return None, True
    window, older = batch.split(_covering(batch.keys, hint, batch.min_window, batch.max_window))
    exhausted = window.older_seq is None
    if exhausted or _covered(window.rows, hint):
        wanted = [seq for seq, _, _ in reversed(window.rows)]  # ascending
        # the older mandatory items first (all older than the window), then the window
        items = await repo.items([*older.seqs, *wanted], live_only=False)
        if len(items) != len(older.seqs) + len(wanted):  # purged meanwhile: the snapshot decides
            return None, False
        if exhausted:
            source = _source(state, items, window_start=None)
        else:
            source = _source(state, items, window_start=wanted[0], runs=older.runs)
        projected = project_context(source, budget, format=format)
        if not projected.needs_more:
            if settled is not None:
                settled(len(wanted))
            return projected, False
        first_attempt = 1
    else:
        first_attempt = 0
    return await _project(
        rt, db, actor, state, budget, format,
        verified=False, autocommit=True, start=(window, older), first_attempt=first_attempt,
        settled=settled if first_attempt == 0 else None,
    )  # fmt: skip


async def _in_snapshot(
    rt: Runtime,
    actor: Actor,
    session_id: str,
    state: SessionState | None,
    overrides: Mapping[str, object],
    format: FormatName,
) -> tuple[SessionState, Budget, ProjectedContext]:
    """The general case in one REPEATABLE READ snapshot. ``state``, if given, was read before
    the snapshot began; the first query checks it is still current."""
    async with rt.store.read(snapshot=True) as db:
        projected = None
        if state is not None:
            budget = _budget(state, overrides).reserved()
            projected, _ = await _project(rt, db, actor, state, budget, format, verified=False)
        if state is None or projected is None:
            state = await load_session(db, actor, session_id)
            budget = _budget(state, overrides).reserved()
            projected, _ = await _project(rt, db, actor, state, budget, format, verified=True)
        assert projected is not None
    return state, budget, projected


async def _project(
    rt: Runtime,
    db: AsyncConnection | DriverConnection,
    actor: Actor,
    state: SessionState,
    budget: Budget,
    format: FormatName,
    *,
    verified: bool,
    autocommit: bool = False,
    start: tuple[WindowKeys, Older] | None = None,
    first_attempt: int = 0,
    settled: Callable[[int], None] | None = None,
) -> tuple[ProjectedContext | None, bool]:
    """Load windows until one settles the read, then project it. In a snapshot ``db``,
    ``state`` was read before the snapshot began unless ``verified``: the first window query
    also returns the session's version, and (None, True) comes back if it is not ``state``'s
    (every write bumps the version, so an equal version means an identical row).

    ``autocommit``: ``db`` runs each statement on its own (the usual case's connection), so
    every batch is checked against ``state``'s version (a batch reads the keys, the mandatory
    items older than them and the version in one statement). (None, False): the whole memory
    is needed, which only a snapshot reads. ``start``: the window already read and the
    mandatory items older than it, ``first_attempt``: the first hint to try (the ones before
    it were settled by ``start``). ``settled``: told how many keys the window took when the
    first hint settles the read (``WindowSizes``)."""
    session_id = state.id
    repo = _repository(rt, db, actor, state)

    async def whole_memory() -> tuple[ProjectedContext | None, bool]:
        if autocommit or not verified:
            return None, False
        assert isinstance(db, AsyncConnection)
        items = await ItemRepository(db).list_live(
            actor.tenant_id, session_id, after_seq=None, limit=state.item_count + 1
        )
        source = _source(state, items, window_start=None)
        return project_context(source, budget, format=format), False

    last_batch: WindowKeys | None = None
    older = Older(seqs=[], runs=[])
    if start is not None:
        last_batch, older = start
    keys: list[tuple[int, int, int]] = list(last_batch.rows) if last_batch is not None else []
    loaded: dict[int, StoredItem] = {}
    exhausted = last_batch is not None and last_batch.older_seq is None
    for attempt in range(first_attempt, MAX_ATTEMPTS):
        hint = window_hint(budget, attempt=attempt)
        if hint is None:
            return await whole_memory()
        while not exhausted and not _covered(keys, hint):
            limit = _batch_size(state, hint, keys)
            batch = await repo.batch(
                before_seq=keys[-1][0] if keys else None,
                limit=limit,
                include_system=budget.keep_system,
                prefix_items=budget.pinned_prefix_items,
            )
            if autocommit or not verified:
                if batch.session_version != state.version:
                    return None, True
                verified = True
            # the window grows by ``limit`` keys (as far as the batch allows); the batch's
            # mandatory rows are those older than it
            last_batch, older = batch.split(min(max(limit, batch.min_window), batch.max_window))
            keys.extend(last_batch.rows)
            exhausted = last_batch.older_seq is None
        wanted = [seq for seq, _, _ in reversed(keys)]  # ascending
        whole = exhausted or last_batch is None
        # the older mandatory items (read with the batch the window ends in), then the window
        seqs = wanted if whole else [*older.seqs, *wanted]
        missing = [seq for seq in seqs if seq not in loaded]
        # (autocommit: the keys were read at ``state``'s version, which decided them)
        for item in await repo.items(missing, live_only=not autocommit):
            loaded[item.seq] = item
        window = [loaded[seq] for seq in seqs if seq in loaded]
        if autocommit and len(window) != len(seqs):  # purged meanwhile
            return None, False
        if whole:
            source = _source(state, window, window_start=None)
            return project_context(source, budget, format=format), False
        window_start = keys[-1][0]
        source = _source(state, window, window_start=window_start, runs=older.runs)
        projected = project_context(source, budget, format=format)
        if not projected.needs_more:
            if settled is not None and attempt == 0:
                settled(len(keys))
            return projected, False
    return await whole_memory()  # the window never settled: the whole memory always does


def _budget(state: SessionState, overrides: Mapping[str, object]) -> Budget:
    defaults = state.config.get("context") if state.config else None
    return Budget.merged(defaults if isinstance(defaults, dict) else None, overrides)


def _source(
    state: SessionState,
    items: list[StoredItem],
    *,
    window_start: int | None,
    runs: list[tuple[int, int]] | None = None,
) -> ContextSource:
    return ContextSource(
        summary=state.summary,
        items=items,
        total_items=state.item_count,
        total_tokens=state.token_count,
        total_chars=state.char_count,
        window_start_seq=window_start,
        unloaded_runs=runs or (),
    )
