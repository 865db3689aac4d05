"""Retention and erasure use cases: the sweep (expired sessions, old archive, snapshots and
events), complete erasure of a session or a tenant with its audit record, and storage figures.

The sweep runs in the background of every replica (``services.housekeeping``). One run per
interval across replicas: the first to claim the interval's key in Redis (``SET NX PX``) runs
it, the others skip; without Redis (embedded mode, or Redis down) every replica runs it, which
is only wasted work: each batch takes session rows with ``FOR UPDATE SKIP LOCKED``, so two
sweeps share the sessions and neither waits for a write nor makes one wait longer than one
short batch (``RETENTION__SWEEP_BATCH_ROWS`` rows).

What it does, in small transactions:

1. expired sessions (``expires_at`` passed) are erased completely, an audit record each;
2. sessions without a TTL of their own follow the server default (it may have changed);
3. archived items older than ``history_seconds``, events older than ``events_seconds`` and
   snapshots beyond ``keep_snapshots`` (automatic ones first) are erased, each session's
   erasure logged as one ``history_pruned`` event (counts and seq ranges). Working memory is
   never touched.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from redis.exceptions import RedisError

from app.domain.keys import within_prefix
from app.domain.retention import (
    ErasedCounts,
    RetentionDefaults,
    TenantNotFound,
    effective_ttl,
    policy_for,
    seq_range,
    snapshots_to_erase,
    subject_digest,
)
from app.domain.sessions import SessionState
from app.locks import RedisLocks
from app.services.access import load_session
from app.services.runtime import Actor, Runtime, utcnow
from app.store.retention import RetentionRepository, ReviewRow, Usage
from app.store.sessions import SessionRepository

log = logging.getLogger(__name__)

SWEEP_KEY = "sm:retention:sweep"
_REVIEW_PAGE = 200
_EXPIRED_PER_BATCH = 50
# Pages of SQLite's FTS5 index merged per transaction: about 10 ms at 20,000 items.
_MERGE_PAGES = 100


def defaults_of(rt: Runtime) -> RetentionDefaults:
    r = rt.settings.retention
    return RetentionDefaults(
        session_ttl_seconds=r.session_ttl_seconds,
        history_seconds=r.history_seconds,
        keep_snapshots=r.keep_snapshots,
        events_seconds=r.events_seconds,
    )


@dataclass
class SweepReport:
    """What one sweep run did (also what the metrics record)."""

    ran: bool = True
    sessions_expired: int = 0
    sessions_pruned: int = 0
    erased: ErasedCounts = field(default_factory=ErasedCounts)
    seconds: float = 0.0


# -- the sweep --------------------------------------------------------------------------------


async def claim_sweep(rt: Runtime, *, now: float | None = None) -> bool:
    """True if this replica runs this interval's sweep: it claimed the interval's key, or
    there is no Redis to claim it in (then every replica sweeps; SKIP LOCKED keeps it safe)."""
    if not isinstance(rt.locks, RedisLocks):
        return True
    interval = rt.settings.retention.sweep_interval_seconds
    slot = int((time.time() if now is None else now) // interval)
    # per database: deployments sharing one Redis each sweep their own
    where = hashlib.sha256(rt.settings.database_url.encode()).hexdigest()[:16]
    try:
        claimed = await rt.locks.redis.set(
            f"{SWEEP_KEY}:{where}:{slot}",
            secrets.token_hex(8),
            nx=True,
            px=max(int(interval * 1000), 1),
        )
    except (RedisError, OSError) as exc:
        log.warning("retention sweep runs unclaimed: redis unreachable (%s)", type(exc).__name__)
        return True
    return bool(claimed)


async def run_sweep(rt: Runtime, *, claim: bool = True) -> SweepReport:
    """One sweep: expired sessions, then per-session retention. ``claim``: skip it if another
    replica already runs this interval's."""
    if claim and not await claim_sweep(rt):
        return SweepReport(ran=False)
    started = time.monotonic()
    report = SweepReport()
    await _erase_expired(rt, report)
    await _review_sessions(rt, report)
    await _purge_tombstones(rt)
    if report.erased.total_rows:
        await merge_search_index(rt)
    report.seconds = time.monotonic() - started
    rt.notify("retention_swept", report)
    return report


async def merge_search_index(rt: Runtime, *, pages: int = _MERGE_PAGES) -> int:
    """SQLite: merge the full-text index until the text of erased rows has left it, in short
    transactions of at most ``pages`` pages each (other writes go in between; the delete
    itself never rebuilds the index). Returns the number of steps; 0 on Postgres."""
    if not rt.store.is_sqlite:
        return 0
    steps = 0
    while True:
        async with rt.store.write() as db:
            more = await RetentionRepository(db).merge_search_index_step(pages=pages)
        steps += 1
        if not more:
            return steps


async def _erase_expired(rt: Runtime, report: SweepReport) -> None:
    """Erase expired sessions, a batch of rows at a time (each batch one short transaction,
    one DELETE per table for all its sessions)."""
    batch_rows = rt.settings.retention.sweep_batch_rows
    # a large session takes several transactions: its audit record adds them up (a sweep cut
    # short in between leaves the rest to the next one, whose record counts only that rest)
    partial: dict[tuple[str, str], ErasedCounts] = {}
    while True:
        now = utcnow()
        async with rt.store.write() as db:
            repo = RetentionRepository(db)
            expired = await repo.lock_expired(now=now, limit=_EXPIRED_PER_BATCH)
            # committed with the first batch: from here no write lands on these sessions
            await repo.mark_erasing(expired)
            counts, complete = await repo.erase_sessions(expired, limit=batch_rows)
            for key, erased in counts.items():
                report.erased.merge(erased)
                partial.setdefault(key, ErasedCounts()).merge(erased)
            if complete:
                done = [(t, s, partial.pop((t, s))) for t, s in expired]
                await repo.record_erasures(done, reason="expired", now=now)
                report.sessions_expired += len(done)
        for tenant_id, session_id in expired:
            rt.forget_vectors(tenant_id, session_id)
        if complete and len(expired) < _EXPIRED_PER_BATCH:
            return


async def _purge_tombstones(rt: Runtime) -> None:
    """Tenant tombstones outlive their erasure by the key cache's lifetime (and a minute): by
    then no replica can hold a key of the tenant, and the id may be used again."""
    margin = timedelta(seconds=rt.settings.auth.cache_seconds + 60)
    async with rt.store.write() as db:
        await RetentionRepository(db).purge_tombstones(finished_before=utcnow() - margin)


async def _review_sessions(rt: Runtime, report: SweepReport) -> None:
    """Walk the sessions retention may apply to, a page at a time (no lock while reading)."""
    defaults = defaults_of(rt)
    configured_only = (
        defaults.session_ttl_seconds is None
        and defaults.history_seconds is None
        and defaults.keep_snapshots is None
        and defaults.events_seconds is None
    )
    after: tuple[str, str] | None = None
    while True:
        async with rt.store.read() as db:
            page = await RetentionRepository(db).review_page(
                after=after, limit=_REVIEW_PAGE, configured_only=configured_only
            )
        for row in page:
            await _review_one(rt, row, defaults, report)
        if len(page) < _REVIEW_PAGE:
            return
        after = (page[-1].tenant_id, page[-1].id)


def _default_ttl_due(row: ReviewRow, defaults: RetentionDefaults) -> tuple[bool, int | None]:
    """Whether a session without a TTL of its own (``config.ttl_seconds``) should now have
    another one (the server default changed), and which."""
    if (row.config or {}).get("ttl_seconds") is not None:
        return False, row.ttl_seconds
    wanted = effective_ttl(row.config, defaults)
    return wanted != row.ttl_seconds, wanted


async def _review_one(
    rt: Runtime, row: ReviewRow, defaults: RetentionDefaults, report: SweepReport
) -> None:
    if _default_ttl_due(row, defaults)[0]:
        async with rt.store.write() as db:
            repo = RetentionRepository(db)
            locked = await repo.lock_session(row.tenant_id, row.id)
            # decided again from the locked row: a config written since the page was read
            # (a TTL of its own, say) wins over the server default
            if locked is not None:
                due, wanted = _default_ttl_due(locked, defaults)
                if due:
                    await repo.set_ttl(
                        row.tenant_id, row.id, ttl_seconds=wanted, updated_at=locked.updated_at
                    )
    policy = policy_for(row.config, defaults)
    if policy.prunes:
        await prune_session(rt, row.tenant_id, row.id, report=report)


async def prune_session(
    rt: Runtime, tenant_id: str, session_id: str, *, report: SweepReport | None = None
) -> list[dict[str, Any]]:
    """Erase what the session's retention says is due, in transactions of at most
    ``RETENTION__SWEEP_BATCH_ROWS`` rows of each kind, each taking the session row with SKIP
    LOCKED (a session a write holds is left for the next sweep). Each transaction that erased
    something logs one ``history_pruned`` event saying what; returns their data."""
    batch = rt.settings.retention.sweep_batch_rows
    defaults = defaults_of(rt)
    logged: list[dict[str, Any]] = []
    while True:
        now = utcnow()
        counts = ErasedCounts()
        async with rt.store.write() as db:
            repo = RetentionRepository(db)
            locked = await repo.lock_session(tenant_id, session_id)
            if locked is None:
                break
            policy = policy_for(locked.config, defaults)
            more = False
            archive: list[int] = []
            old_events: list[int] = []
            dropped: list[str] = []
            cutoff = policy.history_cutoff(now)
            if cutoff is not None:
                pruned = await repo.prune_archive(tenant_id, session_id, before=cutoff, limit=batch)
                archive = pruned.keys
                counts.add("archive", pruned.rows, pruned.bytes)
                more = more or pruned.rows >= batch
            cutoff = policy.events_cutoff(now)
            if cutoff is not None:
                pruned = await repo.prune_events(tenant_id, session_id, before=cutoff, limit=batch)
                old_events = pruned.keys
                counts.add("events", pruned.rows, pruned.bytes)
                more = more or pruned.rows >= batch
            if policy.keep_snapshots is not None:
                doomed = snapshots_to_erase(
                    await repo.snapshot_infos(tenant_id, session_id), policy.keep_snapshots
                )
                pruned = await repo.delete_snapshots(tenant_id, session_id, doomed[:batch])
                dropped = [str(k) for k in pruned.keys]
                counts.add("snapshots", pruned.rows, pruned.bytes)
                more = more or len(doomed) > batch
            if counts.total_rows:
                data = _pruned_data(archive, old_events, dropped)
                await repo.log_event(
                    tenant_id, session_id, type="history_pruned", data=data, now=now
                )
                logged.append(data)
        if archive:
            rt.forget_vectors(tenant_id, session_id)
        if report is not None:
            report.erased.merge(counts)
        if not more:
            break
    if report is not None and logged:
        report.sessions_pruned += 1
    return logged


def _pruned_data(archive: list[int], old_events: list[int], snaps: list[str]) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for name, seqs in (("archive", archive), ("events", old_events)):
        span = seq_range(seqs)
        data[name] = span.as_dict() if span else {"count": 0}
    data["snapshots"] = {"count": len(snaps), "ids": sorted(snaps)}
    return data


# -- complete erasure --------------------------------------------------------------------------


async def erase_session_now(
    rt: Runtime, actor: Actor, session_id: str, *, now: datetime, db: Any
) -> ErasedCounts | None:
    """Inside a write that holds the session's row: erase every row of it, in this
    transaction, and leave the audit record. None if there was no session."""
    counts = await SessionRepository(db).delete_everything(actor.tenant_id, session_id)
    if counts is None:
        return None
    repo = RetentionRepository(db)
    await repo.record_erasure(
        kind="session",
        reason="deleted",
        tenant_id=actor.tenant_id,
        subject_id=session_id,
        key_id=actor.key_id,
        key_name=actor.key_name,
        counts=counts,
        now=now,
    )
    rt.schedule_index_merge()  # the erased text leaves SQLite's index in the background
    return counts


@dataclass(frozen=True, slots=True)
class TenantErasure:
    sessions: int
    row_counts: dict[str, int]
    erasure_id: str
    key_ids: list[str]


async def erase_tenant(
    rt: Runtime, tenant_id: str, *, key_id: str | None, key_name: str | None
) -> TenantErasure:
    """Erase everything a tenant holds, revoking first:

    1. one transaction writes the tenant's tombstone and deletes its API keys: from its commit
       no write of the tenant lands on any replica (every write path checks the tombstone in
       the database, whatever a replica's key cache holds), and on Postgres it waited out the
       creates already in flight;
    2. each session is erased completely in its own transaction (its row locked first, like a
       delete), a page of them at a time until none is left (nothing new can appear);
    3. the rest (idempotency records without a session) goes with the audit record, after a
       walk of every table finds nothing of the tenant; the tombstone stays until no replica
       can still hold a cached key (``AUTH__CACHE_SECONDS``), then the sweep removes it.

    An erasure cut short (a replica died) resumes when it is asked again. ``TenantNotFound``
    if the tenant holds nothing and no erasure of it is unfinished."""
    async with rt.store.read() as db:
        repo = RetentionRepository(db)
        if not (
            await repo.tenant_exists(tenant_id) or await repo.tenant_erasure_unfinished(tenant_id)
        ):
            raise TenantNotFound(f"tenant {tenant_id!r} holds nothing")
    async with rt.store.write() as db:
        key_ids = await RetentionRepository(db).begin_tenant_erasure(tenant_id, now=utcnow())
    total = ErasedCounts()
    total.add("api_keys", len(key_ids))
    erased_sessions = 0
    while True:
        while True:
            async with rt.store.read() as db:
                ids = await RetentionRepository(db).tenant_session_ids(
                    tenant_id, after=None, limit=_REVIEW_PAGE
                )
            if not ids:
                break
            for session_id in ids:
                async with rt.store.write() as db:
                    await SessionRepository(db).lock(tenant_id, session_id)
                    counts, _ = await RetentionRepository(db).erase_session(tenant_id, session_id)
                if counts.rows.get("sessions"):
                    erased_sessions += 1
                total.merge(counts)
        now = utcnow()
        async with rt.store.write() as db:
            repo = RetentionRepository(db)
            total.merge(await repo.erase_tenant_rest(tenant_id))
            left = await repo.tenant_leftovers(tenant_id)
            if left:  # cannot happen while the tombstone stands; never claim what is not so
                log.error("tenant erasure found rows left, erasing again: %s", left)
                continue
            erasure_id = await repo.record_erasure(
                kind="tenant",
                reason="tenant_erased",
                tenant_id=tenant_id,
                subject_id=tenant_id,
                key_id=key_id,
                key_name=key_name,
                counts=total,
                now=now,
            )
            await repo.finish_tenant_erasure(tenant_id, now=now)
        break
    rt.forget_vectors(tenant_id)
    rt.notify("tenant_erased", erased_sessions, total)
    await merge_search_index(rt)  # SQLite: the erased text leaves the index before we answer
    return TenantErasure(erased_sessions, dict(sorted(total.rows.items())), erasure_id, key_ids)


async def erase_own_tenant(rt: Runtime, actor: Actor, tenant_id: str) -> TenantErasure:
    """The admin endpoint: an admin key erases its own tenant; any other answers 404."""
    if tenant_id != actor.tenant_id or actor.session_prefix:
        raise TenantNotFound(f"tenant {tenant_id!r} not found")
    return await erase_tenant(rt, tenant_id, key_id=actor.key_id, key_name=actor.key_name)


# -- storage -----------------------------------------------------------------------------------

_KINDS = ("working_memory", "archive", "snapshots", "events")


def _storage_dict(usage: dict[str, Usage], kinds: tuple[str, ...]) -> dict[str, Any]:
    out = {
        kind: {"rows": usage.get(kind, Usage()).rows, "bytes": usage.get(kind, Usage()).bytes}
        for kind in kinds
    }
    out["total"] = {
        "rows": sum(v["rows"] for v in out.values()),
        "bytes": sum(v["bytes"] for v in out.values()),
    }
    return out


async def session_with_storage(
    rt: Runtime, actor: Actor, session_id: str
) -> tuple[SessionState, dict[str, Any]]:
    """The session (404 if missing or expired) and what it stores: rows and bytes of working
    memory, archive, snapshots and events."""
    async with rt.store.read() as db:
        state = await load_session(db, actor, session_id)
        usage = await RetentionRepository(db).session_storage(actor.tenant_id, session_id)
    return state, _storage_dict(usage, _KINDS)


async def tenant_storage(rt: Runtime, actor: Actor, tenant_id: str) -> dict[str, Any]:
    """The tenant's total (admin, own tenant only; 404 otherwise)."""
    if tenant_id != actor.tenant_id or actor.session_prefix:
        raise TenantNotFound(f"tenant {tenant_id!r} not found")
    async with rt.store.read() as db:
        usage = await RetentionRepository(db).tenant_storage(tenant_id)
    body = _storage_dict(usage, _KINDS)
    body["sessions"] = usage.get("sessions", Usage()).rows
    return {"tenant_id": tenant_id, "storage": body}


async def list_erasures(
    rt: Runtime, actor: Actor, *, session_id: str | None, limit: int
) -> list[dict[str, Any]]:
    """The tenant's erasure records, newest first; with ``session_id``, only that id's (found
    by its digest: the records never hold the id).

    A key confined to a prefix reads only its share, as everywhere: an id outside its prefix
    has no records for it (as an id never erased); without ``session_id``, only the records
    asked by keys within its share (the records hold no id, so the sweep's and wider keys'
    erasures of its sessions are found by id only); and a key outside its share, which its
    key listing does not show either, stays unnamed (``key_id``, ``key_name`` null)."""
    prefix = actor.session_prefix
    if prefix and session_id is not None and not session_id.startswith(prefix):
        return []
    digest = None if session_id is None else subject_digest(actor.tenant_id, session_id)
    async with rt.store.read() as db:
        rows = await RetentionRepository(db).erasure_records(
            digest=digest,
            tenant_id=actor.tenant_id,
            asked_within=prefix if prefix and digest is None else None,
            limit=limit,
        )
    out = []
    for row in rows:
        if not within_prefix(prefix, row["key_prefix"]):
            row.update(key_id=None, key_name=None)
        out.append({k: v for k, v in row.items() if k not in ("tenant_id", "key_prefix")})
    return out
