"""Automatic compaction: checked after each append, run in the background, retried with backoff.

``AutoCompactor.after_append`` is registered as an append hook of the runtime at start-up
(``start_compaction``) and called by the append use case once its statement committed, with
the session state the append returned (counters and config: no extra query).
It is synchronous and cheap: parse ``config.auto_compact``, compare counters with the trigger,
and maybe start an asyncio task. It never raises and never awaits, so an append can neither
wait for nor fail because of automatic compaction.

Rules (all per process; each replica paces itself):

- at most one automatic compaction runs per session at a time;
- the task runs ``run_compaction`` like a manual one: for ``llm`` the session lock is taken
  only for the commit, so appends keep flowing while the model writes;
- a failure is logged as a ``compaction_failed`` event (cause, detail, attempt, the backoff)
  and the session backs off: trigger checks are ignored until ``backoff * 2**(failures-1)``
  seconds (capped) have passed; the next append after that retries. A success clears it;
- a run that compacted nothing (the keep settings or the turn boundaries allow no cut yet)
  backs off the same way without an event, so a session sitting above its trigger does not
  reload its working memory on every append;
- a conflict (a restore, clear or another compaction committed meanwhile) is not a failure:
  nothing is logged, nothing backs off; the next append checks again.

Backoff state is kept in memory, not derived from events: it costs the append path nothing,
and a restart simply allows one early retry. Tasks are tracked and cancelled at shutdown
(``close``); a cancelled commit rolls back, so working memory is never half-compacted.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from app.domain.compaction.auto import AutoCompactConfig, auto_compact_due, parse_auto_compact
from app.domain.errors import Conflict, InvalidInput, NotFound
from app.domain.sessions import SessionState
from app.services.compaction import CompactRequest, record_failure, run_compaction
from app.services.runtime import Actor, Runtime

log = logging.getLogger(__name__)

SessionKey = tuple[str, str]
MAX_BACKOFF_ENTRIES = 100_000


@dataclass(slots=True)
class _Backoff:
    failures: int = 0
    not_before: float = 0.0


def compact_request(config: AutoCompactConfig) -> CompactRequest:
    keep_last_items, keep_last_tokens = config.effective_keep()
    return CompactRequest(
        policy=config.policy,
        keep_last_items=keep_last_items,
        keep_last_tokens=keep_last_tokens,
        pinned_prefix_items=config.pinned_prefix_items,
        instructions=config.instructions,
        model=config.model,
    )


class AutoCompactor:
    """Schedules and paces background compactions for one server process."""

    def __init__(
        self,
        *,
        backoff_seconds: float,
        max_backoff_seconds: float,
        enabled: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.backoff_seconds = backoff_seconds
        self.max_backoff_seconds = max_backoff_seconds
        self.enabled = enabled
        self._clock = clock
        self._tasks: set[asyncio.Task[None]] = set()
        self._running: set[SessionKey] = set()
        self._backoff: dict[SessionKey, _Backoff] = {}
        self._closed = False

    @property
    def running(self) -> int:
        return len(self._running)

    def backoff_remaining(self, tenant_id: str, session_id: str) -> float:
        """Seconds until trigger checks count again for this session (0 when not backing off)."""
        state = self._backoff.get((tenant_id, session_id))
        return max(0.0, state.not_before - self._clock()) if state else 0.0

    def after_append(self, rt: Runtime, actor: Actor, session_id: str, state: SessionState) -> bool:
        """Start a background compaction if the trigger is reached; True if one was started."""
        raw = state.config.get("auto_compact")
        if not self.enabled or self._closed or not isinstance(raw, dict):
            return False
        try:
            config = parse_auto_compact(raw)
        except InvalidInput:  # validated when set; a hand-edited row must not break appends
            return False
        if not auto_compact_due(config, item_count=state.item_count, token_count=state.token_count):
            return False
        key = (actor.tenant_id, session_id)
        if key in self._running:
            return False
        pacing = self._backoff.get(key)
        if pacing is not None and self._clock() < pacing.not_before:
            return False
        background = Actor(
            tenant_id=actor.tenant_id,
            key_name=actor.key_name,
            request_id=actor.request_id,
            scopes=actor.scopes,
        )
        self._running.add(key)
        task = asyncio.get_running_loop().create_task(
            self._run(rt, background, session_id, config), name=f"auto-compact:{session_id}"
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return True

    def _back_off(self, key: SessionKey) -> tuple[int, float]:
        if len(self._backoff) >= MAX_BACKOFF_ENTRIES:
            now = self._clock()
            for stale in [k for k, v in self._backoff.items() if v.not_before <= now]:
                del self._backoff[stale]
        pacing = self._backoff.setdefault(key, _Backoff())
        pacing.failures += 1
        delay = min(self.backoff_seconds * 2 ** (pacing.failures - 1), self.max_backoff_seconds)
        pacing.not_before = self._clock() + delay
        return pacing.failures, delay

    async def _run(
        self, rt: Runtime, actor: Actor, session_id: str, config: AutoCompactConfig
    ) -> None:
        key = (actor.tenant_id, session_id)
        started = time.perf_counter()
        try:
            result, _ = await run_compaction(
                rt, actor, session_id, request=compact_request(config), automatic=True
            )
        except asyncio.CancelledError:
            raise
        except (Conflict, NotFound) as exc:
            log.info("automatic compaction of %s skipped: %s", session_id, exc)
        except Exception as exc:
            rt.notify("compaction_finished", time.perf_counter() - started, True)
            attempt, delay = self._back_off(key)
            log.warning(
                "automatic compaction of %s failed (attempt %d, retry in %.1f s): %s",
                session_id, attempt, delay, exc,
            )  # fmt: skip
            await record_failure(
                rt,
                actor,
                session_id,
                policy=config.policy,
                exc=exc,
                automatic=True,
                extra={"attempt": attempt, "retry_after_seconds": round(delay, 3)},
            )
        else:
            if result is not None and result.compacted_items > 0:
                rt.notify("compaction_finished", time.perf_counter() - started, False)
                self._backoff.pop(key, None)
            else:
                self._back_off(key)
        finally:
            self._running.discard(key)

    async def wait_idle(self) -> None:
        """Wait until no automatic compaction runs (tests; bound it with asyncio.timeout)."""
        while self._tasks:
            await asyncio.wait(set(self._tasks))

    async def close(self) -> None:
        """Stop accepting work, cancel what runs, wait for it to unwind (commits roll back)."""
        self._closed = True
        tasks = set(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)


def build_auto_compactor(rt: Runtime) -> AutoCompactor:
    settings = rt.settings.auto_compact
    return AutoCompactor(
        backoff_seconds=settings.backoff_seconds,
        max_backoff_seconds=settings.max_backoff_seconds,
        enabled=settings.enabled,
    )


def start_compaction(rt: Runtime) -> None:
    """Lifespan start: the LLM client (if configured) and the background scheduler."""
    from app.services.compaction import build_llm_client

    rt.llm = build_llm_client(rt.settings)
    rt.append_hooks.append(build_auto_compactor(rt).after_append)


def auto_compactor_of(rt: Runtime) -> AutoCompactor | None:
    """The scheduler ``start_compaction`` registered, if any."""
    for hook in rt.append_hooks:
        owner = getattr(hook, "__self__", None)
        if isinstance(owner, AutoCompactor):
            return owner
    return None


async def stop_compaction(rt: Runtime) -> None:
    """Lifespan end, before the store and locks close: cancel background runs, close the client."""
    compactor = auto_compactor_of(rt)
    if compactor is not None:
        rt.append_hooks.remove(compactor.after_append)
        await compactor.close()
    llm, rt.llm = rt.llm, None
    if llm is not None:
        await llm.aclose()
