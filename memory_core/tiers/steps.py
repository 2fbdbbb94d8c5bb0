"""What maintenance's steps share: the run's report, what a step learned for the next one,
and :class:`StepPolicy`, the rules every step follows (the scope's timezone, when to wait
after an LLM failure and when the extractive summary stands in, retention's cut-off)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime

from config.settings import MemorySettings
from memory_core import calendar
from memory_core.clock import Clock
from memory_core.errors import LLMUnavailable
from memory_core.models import DaySummary, ScopeState
from memory_core.store.locks import LockHolder
from memory_core.store.repo import MemoryRepo
from memory_core.tiers.retention import trim_due, trim_target

# maintenance's own logger: its lines keep one name whichever part writes them
log = logging.getLogger("memory_core.tiers.maintenance")


@dataclass
class MaintenanceReport:
    scope: str
    compactions: int = 0
    days_closed: int = 0  # days summarised and appended to the days list
    idle_days: int = 0  # days passed with nothing to summarise (no LLM call)
    refreshes: int = 0
    weeks: int = 0
    failures: int = 0
    skipped: bool = False  # another worker holds the scope
    held_by: LockHolder | None = None  # when skipped: who holds it (None: not readable)
    held_until_ms: int = 0  # when skipped: real time its lock runs out unless renewed
    broken: str = ""  # why the scope cannot be maintained until someone fixes it
    waiting_until: int = 0  # ms: an LLM failure asked us to wait
    closed: list[str] = field(default_factory=list)


@dataclass
class Known:
    """What a step learned of the scope after it, so the next step need not read it again."""

    state: ScopeState | None = None
    days: list[DaySummary] | None = None
    # A thread's channel's state, read once per run: the settings the thread inherits
    # (the states the compare-and-set steps hand back are the thread's own).
    parent: ScopeState | None = None


def iso(when: datetime) -> str:
    return when.isoformat(timespec="seconds")


class StepPolicy:
    """The rules maintenance's steps share, and the scopes whose daily token budget is
    reached during their run (their summaries are extractive, as offline)."""

    def __init__(self, *, repo: MemoryRepo, settings: MemorySettings, clock: Clock) -> None:
        self.repo = repo
        self.settings = settings
        self.clock = clock
        self.budget_reached: set[str] = set()  # scopes whose run is within such a day

    def tz(self, state: ScopeState) -> str:
        """The scope's timezone. A stored one that does not exist (an import, a hand edit)
        raises UnknownTimezone: days cut at a guessed midnight would stay wrong for good, so
        such a scope is reported and left alone rather than rolled over in another zone."""
        name = state.tz or self.settings.timezone
        calendar.zone(name)
        return name

    def waiting(self, state: ScopeState, report: MaintenanceReport) -> bool:
        """True while an earlier LLM failure asks us to wait (unless we stand in now)."""
        if state.failures >= self.settings.summary_attempts:
            return False
        if state.retry_at > calendar.to_ms(self.clock.now()):
            report.waiting_until = state.retry_at
            return True
        return False

    def force_extractive(self, scope: str, state: ScopeState) -> bool:
        """The extractive summariser stands in: the model kept failing, or the scope's
        daily token budget is reached (no model call then; the model is back tomorrow)."""
        if scope in self.budget_reached:
            return True
        return state.failures >= self.settings.summary_attempts

    async def llm_failed(
        self, scope: str, state: ScopeState, exc: LLMUnavailable, report: MaintenanceReport
    ) -> Known | None:
        delay = min(3600.0, self.settings.retry_base_s * 2**state.failures)
        if exc.retry_after is not None and exc.retry_after > 0:
            delay = max(delay, exc.retry_after)
        retry_at = calendar.to_ms(self.clock.now()) + int(delay * 1000)
        failures = await self.repo.steps.note_failure(scope, retry_at_ms=retry_at)
        report.failures += 1
        report.waiting_until = retry_at
        log.warning(
            "summary of %s failed (%s); attempt %d of %d, retrying in %.0fs",
            scope,
            exc,
            failures,
            self.settings.summary_attempts,
            delay,
        )
        # Once the attempts are used up the next step stands in with the extractive summary.
        return Known() if failures >= self.settings.summary_attempts else None

    # -- steps -------------------------------------------------------------------------
    def trim_due(self, state: ScopeState) -> bool:
        return trim_due(
            state,
            now_ms=calendar.to_ms(self.clock.now()),
            retention_days=self.settings.retention_days,
        )

    def trim_target(self, state: ScopeState) -> tuple[str, int]:
        return trim_target(
            state,
            now_ms=calendar.to_ms(self.clock.now()),
            retention_days=self.settings.retention_days,
        )
