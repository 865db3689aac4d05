"""Compaction use cases: compact a session (manual or automatic) and list past results.

How a compaction runs (``run_compaction``):

- ``window`` / ``structured``: everything under the session lock, in one write transaction:
  load working memory and the session state, plan the turn-safe cut, fold, commit.
- ``llm``: three phases, so the session stays writable while a model thinks.
  1. a read transaction (no lock): working memory, summary, last compact result, ``epoch``;
  2. no lock, no transaction: the LLM call (``app.llm``), then the pure domain result;
  3. ``rt.run_write`` (lock + one transaction): re-check, then commit.

The commit (``_commit``) is one transaction, all or nothing: archive exactly the planned seqs
(``archived_reason = "compacted"``; they stay in the archive), update the session row (counters,
``summary``, ``last_compaction``), insert the ``compactions`` row, log ``compacted``. It refuses
with ``WorkingMemoryReplaced`` (409) when, since phase 1, the ``epoch`` moved (a restore or
clear), another compaction or a summary edit committed, or a planned item left working memory.
Items appended meanwhile are untouched: they have higher seqs than anything planned.

Nothing to compact is a normal outcome: the result says ``compacted_items == 0`` (the report's
first note says why) and nothing is written. ``dry_run`` computes the same result and writes
nothing either.

Failures of manual compactions propagate (an LLM failure is ``UpstreamFailed``: 502 with its
cause); an LLM failure is also logged as a ``compaction_failed`` event, best effort, so the
operation log shows it. Automatic compactions are run by ``app.services.auto_compaction``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime

from pydantic import ValidationError
from sqlalchemy.ext.asyncio import AsyncConnection

from app.domain.compaction import (
    CompactPolicy,
    CompactResult,
    CutPlan,
    build_llm_messages,
    llm_compaction_result,
    parse_llm_summary,
    plan_cut,
    structured_compaction,
    window_compaction,
    without_nul,
)
from app.domain.errors import (
    DomainError,
    LimitExceeded,
    LLMNotConfigured,
    LockBackendUnavailable,
    WorkingMemoryReplaced,
)
from app.domain.items import StoredItem
from app.domain.sessions import SessionState
from app.llm import LLMClient, LLMError
from app.llm import LLMSettings as ClientSettings
from app.locks import compaction_key
from app.services.access import check_visible, load_session
from app.services.runtime import Actor, Encoded, IdempotencyRequest, Runtime, event, utcnow
from app.settings import Settings
from app.store.compactions import CompactionRepository
from app.store.events import EventRepository
from app.store.idempotency import IdempotencyRepository
from app.store.items import ItemRepository
from app.store.sessions import Counters, SessionRepository

log = logging.getLogger(__name__)

# Bounded IN lists: both backends cap bound parameters per statement.
ARCHIVE_CHUNK = 5000


@dataclass(frozen=True, slots=True)
class CompactRequest:
    """What to compact and how (the ``POST .../compact`` body, or ``config.auto_compact``)."""

    policy: CompactPolicy = "structured"
    keep_last_items: int | None = None
    keep_last_tokens: int | None = None
    pinned_prefix_items: int = 0
    instructions: str | None = None
    model: str | None = None
    dry_run: bool = False


@dataclass(frozen=True, slots=True)
class _Loaded:
    """Working memory and the session state a compaction was planned from."""

    state: SessionState
    items: list[StoredItem]


def build_llm_client(settings: Settings) -> LLMClient | None:
    """The app's one LLM client, or None when no ``LLM__BASE_URL`` is configured."""
    llm = settings.llm
    if not llm.base_url:
        return None
    return LLMClient(
        ClientSettings(
            base_url=llm.base_url,
            model=llm.model,
            api_key=llm.api_key.get_secret_value() if llm.api_key else None,
            timeout=llm.timeout_seconds,
            retries=llm.retries,
            json_mode=llm.json_mode,
        )
    )


def _previous(state: SessionState) -> CompactResult | None:
    if not state.last_compaction:
        return None
    try:
        return CompactResult.model_validate(state.last_compaction)
    except ValidationError:  # written by an older version: carry the summary text only
        return None


def _plan(request: CompactRequest, items: list[StoredItem]) -> CutPlan:
    return plan_cut(
        items,
        keep_last_items=request.keep_last_items,
        keep_last_tokens=request.keep_last_tokens,
        pinned_prefix_items=request.pinned_prefix_items,
    )


def _fold(request: CompactRequest, loaded: _Loaded, plan: CutPlan) -> CompactResult:
    """The result of a ``window`` or ``structured`` compaction (pure, no I/O)."""
    state = loaded.state
    fold = window_compaction if request.policy == "window" else structured_compaction
    result = without_nul(fold(plan, previous=_previous(state), previous_summary=state.summary))
    if request.instructions or request.model:
        notes = [
            *result.report.notes,
            f"instructions and model apply to the llm policy only; ignored by {request.policy}",
        ]
        result = result.model_copy(
            update={"report": result.report.model_copy(update={"notes": notes})}
        )
    return result


async def _load(db: AsyncConnection, actor: Actor, session_id: str) -> _Loaded:
    # Compaction is the one use case that reads the whole of working memory.
    state = await load_session(db, actor, session_id)
    items = await ItemRepository(db).live_from_seq(actor.tenant_id, session_id, from_seq=0)
    return _Loaded(state, items)


def _compacted_event_data(result: CompactResult, *, automatic: bool) -> dict[str, object]:
    return {
        "compaction_id": result.id,
        "policy": result.policy,
        "first_seq": result.report.first_seq,
        "last_seq": result.report.last_seq,
        "count": result.compacted_items,
        "automatic": automatic,
    }


async def _commit(
    db: AsyncConnection,
    now: datetime,
    actor: Actor,
    session_id: str,
    *,
    planned_from: SessionState,
    plan: CutPlan,
    result: CompactResult,
    automatic: bool,
    max_summary_chars: int,
) -> tuple[CompactResult, SessionState]:
    """Replace the planned range by the summary, atomically (see the module docstring).

    ``run_write`` locked the session row first, so what is read here stands until the commit."""
    limit = max_summary_chars
    if result.summary is not None and len(result.summary) > limit:
        raise LimitExceeded(
            f"the compaction's summary would be {len(result.summary)} characters, over "
            f"LIMITS__MAX_SUMMARY_CHARS ({limit}); nothing was compacted",
            errors=[{"loc": ["summary"], "msg": f"longer than {limit} characters"}],
        )
    current = await load_session(db, actor, session_id)
    if current.epoch != planned_from.epoch:
        raise WorkingMemoryReplaced(
            "working memory was replaced meanwhile (a restore or clear); nothing was compacted"
        )
    previous_id = (planned_from.last_compaction or {}).get("id")
    if (current.last_compaction or {}).get("id") != previous_id or (
        current.summary != planned_from.summary
    ):
        raise WorkingMemoryReplaced(
            "another compaction or a summary update committed meanwhile; nothing was compacted"
        )
    seqs = plan.compacted_seqs
    archived = 0
    items = ItemRepository(db)
    for start in range(0, len(seqs), ARCHIVE_CHUNK):
        archived += await items.archive(
            actor.tenant_id,
            session_id,
            reason="compacted",
            seqs=seqs[start : start + ARCHIVE_CHUNK],
        )
    if archived != len(seqs):
        raise WorkingMemoryReplaced(
            f"{len(seqs) - archived} of the items being compacted left working memory "
            "meanwhile; nothing was compacted"
        )
    result = result.model_copy(update={"created_at": now})
    state = await SessionRepository(db).bump(
        actor.tenant_id,
        session_id,
        counters=Counters(
            items=-len(plan.compacted),
            tokens=-plan.compacted_tokens,
            chars=-sum(item.chars for item in plan.compacted),
        ),
        now=now,
        expected_version=current.version,
        values={"summary": result.summary, "last_compaction": result.model_dump(mode="json")},
    )
    assert state is not None  # the row is there: we hold its lock and just read it
    await CompactionRepository(db).insert(actor.tenant_id, session_id, result)
    await EventRepository(db).insert(
        actor.tenant_id,
        session_id,
        [
            event(
                actor,
                seq=state.event_seq,
                type="compacted",
                version=state.version,
                now=now,
                data=_compacted_event_data(result, automatic=automatic),
            )
        ],
    )
    return result, state


def encode_result(result: CompactResult, version: int | None = None) -> Encoded:
    """The response body of a compaction (also what an idempotent retry gets back)."""
    return Encoded(200, result.model_dump_json(), version=version)


async def _replayed(
    rt: Runtime, actor: Actor, idempotency: IdempotencyRequest | None
) -> Encoded | None:
    """A stored response for this Idempotency-Key, checked before paying for an LLM call.

    Only a shortcut: ``run_write`` checks again with the row locked, which makes it exact.
    """
    if idempotency is None:
        return None
    async with rt.store.read() as db:
        stored = await IdempotencyRepository(db).get(idempotency.scope(actor))
    if stored is None or (stored.expires_at is not None and stored.expires_at <= utcnow()):
        return None
    if stored.request_hash != idempotency.request_hash:
        return None  # run_write raises IdempotencyKeyReused
    return Encoded(stored.status_code, stored.response, replayed=True)


async def run_compaction(
    rt: Runtime,
    actor: Actor,
    session_id: str,
    *,
    request: CompactRequest,
    idempotency: IdempotencyRequest | None = None,
    automatic: bool = False,
) -> tuple[CompactResult | None, Encoded]:
    """Compact ``session_id``; the result (None on an idempotent replay) and its response.

    Raises ``LLMNotConfigured``, ``LLMError`` (``UpstreamFailed``), ``WorkingMemoryReplaced``,
    ``SessionNotFound`` and the write protocol's errors; on any of them nothing was changed.
    """
    check_visible(actor, session_id)
    if request.policy == "llm" and rt.llm is None:
        raise LLMNotConfigured(
            "the llm policy needs an OpenAI-compatible endpoint, and this server has none "
            "(an operator sets LLM__BASE_URL; retrying will not help): use the structured or "
            "window policy",
            errors=[{"loc": ["body", "policy"], "msg": "no LLM endpoint is configured"}],
        )
    replay = await _replayed(rt, actor, idempotency)
    if replay is not None:
        return None, replay

    if request.policy != "llm":
        if request.dry_run:
            async with rt.store.read() as db:
                loaded = await _load(db, actor, session_id)
            return _dry(request, loaded)

        async def op(db: AsyncConnection, now: datetime) -> tuple[CompactResult, int]:
            loaded = await _load(db, actor, session_id)
            plan = _plan(request, loaded.items)
            result = _fold(request, loaded, plan)
            if plan.is_empty:
                return result, loaded.state.version
            committed, state = await _commit(
                db, now, actor, session_id,
                planned_from=loaded.state, plan=plan, result=result, automatic=automatic,
                max_summary_chars=rt.settings.limits.max_summary_chars,
            )  # fmt: skip
            return committed, state.version

        outcome, encoded = await rt.run_write(
            actor,
            session_id,
            op=op,
            encode=lambda r: encode_result(r[0], r[1]),
            idempotency=idempotency,
        )
        return (outcome[0] if outcome else None), encoded

    async with single_flight(rt, compaction_key(actor.tenant_id, session_id)):
        return await _llm_compaction(
            rt, actor, session_id, request=request, idempotency=idempotency, automatic=automatic
        )


@asynccontextmanager
async def single_flight(rt: Runtime, key: str) -> AsyncIterator[None]:
    """One holder of ``key`` across replicas (Redis; in-process in the embedded mode), so two
    replicas never pay for the same LLM call. Correctness never rests on it (the commit locks
    the session row and re-checks what it read): with Redis down the work runs unguarded."""
    try:
        async with rt.locks.hold(key):
            yield
            return
    except LockBackendUnavailable:
        log.warning("lock backend unreachable: compacting %s without single-flight", key)
    yield


async def _llm_compaction(
    rt: Runtime,
    actor: Actor,
    session_id: str,
    *,
    request: CompactRequest,
    idempotency: IdempotencyRequest | None,
    automatic: bool,
) -> tuple[CompactResult | None, Encoded]:
    # llm, phase 1: a consistent read, no lock.
    async with rt.store.read() as db:
        loaded = await _load(db, actor, session_id)
    plan = _plan(request, loaded.items)
    if plan.is_empty:
        result = llm_compaction_result(
            plan,
            parse_llm_summary(""),
            previous=_previous(loaded.state),
            previous_summary=loaded.state.summary,
            model=request.model,
        )
        return result, encode_result(result, loaded.state.version)

    # Phase 2: the model writes the summary while the session stays writable.
    assert rt.llm is not None
    messages = build_llm_messages(
        plan, previous_summary=loaded.state.summary, instructions=request.instructions
    )
    model = request.model or rt.llm.settings.model
    text = await rt.llm.complete(messages, model=model)
    result = without_nul(
        llm_compaction_result(
            plan,
            parse_llm_summary(text),
            previous=_previous(loaded.state),
            previous_summary=loaded.state.summary,
            model=model,
        )
    )
    if request.dry_run:
        return result, encode_result(result, loaded.state.version)

    # Phase 3: the commit, as the session's one writer.
    async def commit(db: AsyncConnection, now: datetime) -> tuple[CompactResult, int]:
        committed, state = await _commit(
            db, now, actor, session_id,
            planned_from=loaded.state, plan=plan, result=result, automatic=automatic,
            max_summary_chars=rt.settings.limits.max_summary_chars,
        )  # fmt: skip
        return committed, state.version

    outcome, encoded = await rt.run_write(
        actor,
        session_id,
        op=commit,
        encode=lambda r: encode_result(r[0], r[1]),
        idempotency=idempotency,
    )
    return (outcome[0] if outcome else None), encoded


def _dry(request: CompactRequest, loaded: _Loaded) -> tuple[CompactResult, Encoded]:
    result = _fold(request, loaded, _plan(request, loaded.items))
    return result, encode_result(result, loaded.state.version)


def failure_cause(exc: BaseException) -> str:
    """A short machine-readable cause for a ``compaction_failed`` event."""
    if isinstance(exc, LLMError):
        return exc.cause
    if isinstance(exc, DomainError):
        return exc.code
    return type(exc).__name__


async def record_failure(
    rt: Runtime,
    actor: Actor,
    session_id: str,
    *,
    policy: CompactPolicy,
    exc: BaseException,
    automatic: bool,
    extra: dict[str, object] | None = None,
) -> bool:
    """Log a ``compaction_failed`` event (its own small write); False if that failed too.

    Never raises: the caller is already reporting ``exc``.
    """
    detail = exc.detail if isinstance(exc, DomainError) else str(exc) or type(exc).__name__

    async def op(db: AsyncConnection, now: datetime) -> None:
        state = await SessionRepository(db).bump(
            actor.tenant_id, session_id, counters=Counters(), now=now
        )
        if state is None:
            return  # deleted meanwhile: nothing to log against
        data: dict[str, object] = {
            "policy": policy,
            "cause": failure_cause(exc),
            "detail": detail[:2000],
            "automatic": automatic,
            **(extra or {}),
        }
        await EventRepository(db).insert(
            actor.tenant_id,
            session_id,
            [
                event(
                    actor,
                    seq=state.event_seq,
                    type="compaction_failed",
                    version=state.version,
                    now=now,
                    data=data,
                )
            ],
        )

    try:
        await rt.run_write(actor, session_id, op=op, encode=lambda _: Encoded(204, ""))
    except Exception:  # best effort by contract
        log.warning("could not record compaction_failed for %s", session_id, exc_info=True)
        return False
    return True


async def compact_session(
    rt: Runtime,
    actor: Actor,
    session_id: str,
    *,
    request: CompactRequest,
    idempotency: IdempotencyRequest | None = None,
) -> Encoded:
    """``POST /v1/sessions/{id}/compact``: compact now, report failures to the caller."""
    started = time.perf_counter()
    try:
        result, encoded = await run_compaction(
            rt, actor, session_id, request=request, idempotency=idempotency
        )
    except LLMError as exc:
        rt.notify("compaction_finished", time.perf_counter() - started, True)
        await record_failure(rt, actor, session_id, policy=request.policy, exc=exc, automatic=False)
        raise
    if result is not None and result.compacted_items and not request.dry_run:
        rt.notify("compaction_finished", time.perf_counter() - started, False)
    return encoded


async def list_compactions(
    rt: Runtime, actor: Actor, session_id: str, *, cursor: str | None, limit: int
) -> tuple[list[CompactResult], str | None]:
    """Past compact results, newest first, and the cursor of the next page (None at the end)."""
    async with rt.store.read() as db:
        await load_session(db, actor, session_id)
        page = await CompactionRepository(db).list(
            actor.tenant_id, session_id, before_id=cursor, limit=limit + 1
        )
    more = len(page) > limit
    page = page[:limit]
    return page, (page[-1].id if more and page else None)
