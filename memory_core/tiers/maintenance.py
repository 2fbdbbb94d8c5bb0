"""Keeping a scope's tiers up to date: compaction, day rollover, tier refresh, weeks.

One entry point, :meth:`Maintainer.run`, used by the pipeline (in the background after a
message), by ``memorybot rollover`` and by the scheduler. It takes a few small steps, each
ending in one atomic compare-and-set in Redis, so it is idempotent: running it twice, from
two processes at once, or again after a crash half-way, appends each day and week once.

Step order per scope (the first that applies runs, then the state is read again):
1. a week is waiting to be consolidated -> refresh tiers (the week needs it before more days close)
2. the scope's day is over -> summarise what is left of it (in chunks), then close the day
3. a day was closed -> refresh tiers: mid, overview (and week, long at a week boundary)
4. today's unsummarised messages passed the threshold -> compact them into 'short'

LLM failures are retried later (back-off kept in the scope's state, so it survives restarts
and is shared by the fleet); after ``summary_attempts`` failures in a row the extractive
summary stands in so memory keeps moving.

Each job is a part of its own, composed here: the fleet lock
(:mod:`~memory_core.tiers.maintenance_lock`), compaction (:mod:`~memory_core.tiers.compaction`),
the day's close (:mod:`~memory_core.tiers.day_close`), the refresh of the tiers built from days
(:mod:`~memory_core.tiers.tier_refresh`), and the rules they share
(:mod:`~memory_core.tiers.steps`). Which facts a summary call sees and where the facts it
extracts go is :mod:`memory_core.tiers.fact_routing`; what retention trims is
:mod:`memory_core.tiers.retention`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime

from config.settings import MemorySettings
from memory_core import calendar
from memory_core.clock import Clock
from memory_core.errors import UnknownTimezone
from memory_core.llm.usage import SpendTag, charge_to
from memory_core.models import ScopeState
from memory_core.scopes import Scope
from memory_core.store.repo import MemoryRepo
from memory_core.tiers.compaction import Compactor
from memory_core.tiers.day_close import DayCloser
from memory_core.tiers.maintenance_lock import MaintenanceLock
from memory_core.tiers.steps import Known, MaintenanceReport, StepPolicy
from memory_core.tiers.summarize import Summarizer
from memory_core.tiers.tier_refresh import TierRefresher

__all__ = ["MAX_STEPS", "Maintainer", "MaintenanceReport", "why_broken"]

log = logging.getLogger(__name__)

MAX_STEPS = 5000  # a safety stop: a scope catching up after a year needs ~3 steps a day


class Maintainer:
    """Runs maintenance's steps for one scope, in order, through its parts (one per job)."""

    def __init__(
        self,
        *,
        repo: MemoryRepo,
        summarizer: Summarizer,
        settings: MemorySettings,
        clock: Clock,
        lock_ttl_ms: int = 30_000,
        recover: Callable[[str], Awaitable[int]] | None = None,
        over_budget: Callable[[str], Awaitable[bool]] | None = None,
    ) -> None:
        self.summarizer = summarizer
        self.settings = settings
        self.clock = clock
        self.lock_ttl_ms = lock_ttl_ms
        # Finishes forgets a crash interrupted, before any summary reads the scope.
        self.recover = recover
        # Whether the scope's (or its server's) daily token budget is reached: its run then
        # summarises extractively, as offline, until the scope's next local day.
        self.over_budget = over_budget
        self.repo = repo

    @property
    def repo(self) -> MemoryRepo:
        return self._repo

    @repo.setter
    def repo(self, repo: MemoryRepo) -> None:
        """The parts are built around the repo: a new one (a test's faulty client) reaches
        every part."""
        self._repo = repo
        self.policy = StepPolicy(repo=repo, settings=self.settings, clock=self.clock)
        self.lock = MaintenanceLock(repo=repo, ttl_ms=self.lock_ttl_ms)
        self.compactor = Compactor(summarizer=self.summarizer, policy=self.policy)
        self.refresher = TierRefresher(summarizer=self.summarizer, policy=self.policy)
        self.day_closer = DayCloser(
            policy=self.policy, compactor=self.compactor, refresher=self.refresher
        )

    # -- cheap checks ------------------------------------------------------------------
    def tz(self, state: ScopeState) -> str:
        """The scope's timezone (UnknownTimezone for one that does not exist)."""
        return self.policy.tz(state)

    def compaction_due(self, unsum_tokens: int, unsum_count: int) -> bool:
        settings = self.settings
        return (
            unsum_tokens >= settings.compact_trigger_tokens
            and unsum_count >= settings.compact_min_messages
        )

    def due(self, state: ScopeState, now: datetime) -> bool:
        """Whether ``state`` has work now. Idle scopes are not due: a day with no messages
        has nothing to summarise (it is closed, for free, when the next message comes),
        except once at a week boundary, so a week that ended quietly is consolidated.
        Raises UnknownTimezone for a scope whose stored timezone does not exist."""
        if state.forgets_pending:
            return True
        if not state.day:
            return False
        if state.refresh_pending:
            return True
        tz = self.tz(state)
        today = calendar.local_day(now, tz)
        if today > state.day:
            if state.last_ms >= calendar.to_ms(calendar.day_start(state.day, tz)):
                return True
            week_start = self.settings.week_start
            if calendar.week_of(state.day, week_start) != calendar.week_of(today, week_start):
                return True
            return self.policy.trim_due(state)
        return self.compaction_due(state.unsum_tokens, state.unsum_count) or self.policy.trim_due(
            state
        )

    # -- the loop ----------------------------------------------------------------------
    async def run(self, scope: str, *, lock: bool = True) -> MaintenanceReport:
        """Bring ``scope`` up to date. ``lock=False`` skips the fleet lock: correctness never
        depends on it (every write is a compare-and-set); it only saves duplicate LLM calls."""
        report = MaintenanceReport(scope=scope)
        known = Known()
        token = await self.lock.take(scope, report, known) if lock else ""
        if report.skipped:
            return report
        keeper = asyncio.create_task(self.lock.keep(scope, token)) if token else None
        try:
            parent = Scope.of(scope).parent
            known.parent = await self.repo.reads.state(parent.key) if parent else None
            if self.over_budget is not None and await self.over_budget(scope):
                self.policy.budget_reached.add(scope)
            with charge_to(SpendTag(scope)):  # the summary calls are on the scope's bill
                for _ in range(MAX_STEPS):
                    step = await self._step(scope, report, known)
                    if step is None:
                        break
                    step.parent = known.parent
                    known = step
                else:
                    log.warning("maintenance of %s stopped after %d steps", scope, MAX_STEPS)
        except UnknownTimezone as exc:
            report.broken = why_broken(exc)
            log.warning("maintenance of %s skipped: %s", scope, report.broken)
        finally:
            self.policy.budget_reached.discard(scope)
            await self.lock.release(scope, token, keeper)
        return report

    async def _step(self, scope: str, report: MaintenanceReport, known: Known) -> Known | None:
        """One step; returns what it learned of the state after it (None: nothing to do)."""
        state = (known.state or await self.repo.reads.state(scope)).inherit(known.parent)
        if state.forgets_pending and self.recover is not None:
            await self.recover(scope)  # finish an interrupted forget before summarising
            return Known()
        if not state.day:
            return None
        now = self.clock.now()
        tz = self.tz(state)
        if state.refresh_pending and state.week_pending:
            return await self.refresher.refresh(scope, state, report, known.days)
        if calendar.local_day(now, tz) > state.day:
            return await self.day_closer.finish_day(scope, state, report)
        if state.refresh_pending:
            return await self.refresher.refresh(scope, state, report, known.days)
        if self.compaction_due(state.unsum_tokens, state.unsum_count):
            return await self.compactor.compact(scope, state, report, final=False)
        if self.policy.trim_due(state):
            # A quiet scope closes no more days, so retention runs on its own here.
            minid, target_ms = self.policy.trim_target(state)
            await self.repo.writes.trim_log_before(scope, minid)
            await self.repo.writes.set_fields(scope, {"trimmed_ms": target_ms})
            return None
        return None


def why_broken(exc: Exception) -> str:
    """Why a scope cannot be maintained, and what fixes it."""
    if isinstance(exc, UnknownTimezone):
        return f"{exc}; set one with /memory config timezone <Area/City>"
    return str(exc) or type(exc).__name__
