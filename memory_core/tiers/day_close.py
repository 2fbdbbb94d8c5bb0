"""Closing a scope's day: what is left of it summarised into 'short' (in chunks), then the
day appended to the days list in one compare-and-set, retention's trim with it; a day that
ends a week marks the week for consolidation."""

from __future__ import annotations

import logging

from memory_core import calendar
from memory_core.models import ScopeState
from memory_core.tiers.compaction import READ_LIMIT, Compactor
from memory_core.tiers.episodes import episode
from memory_core.tiers.steps import Known, MaintenanceReport, StepPolicy, iso
from memory_core.tiers.tier_refresh import TierRefresher

# maintenance's own logger: its lines keep one name whichever part writes them
log = logging.getLogger("memory_core.tiers.maintenance")


class DayCloser:
    def __init__(
        self, *, policy: StepPolicy, compactor: Compactor, refresher: TierRefresher
    ) -> None:
        self.policy = policy  # the repo, settings and clock the steps share come with it
        self.repo = policy.repo
        self.settings = policy.settings
        self.clock = policy.clock
        self.compactor = compactor
        self.refresher = refresher

    async def finish_day(
        self, scope: str, state: ScopeState, report: MaintenanceReport
    ) -> Known | None:
        tz = self.policy.tz(state)
        end_ms = calendar.day_end_ms(state.day, tz)
        leftover, next_message = await self.repo.reads.day_view(
            scope, after_id=state.short_upto, end_ms=end_ms, limit=READ_LIMIT
        )
        if leftover:
            # Summarise the rest of the day into 'short' first (in chunks if it is large;
            # each chunk is its own atomic step, so a crash loses no progress).
            step = await self.compactor.compact(scope, state, report, final=True, entries=leftover)
            if step is None or step.state is None or step.state.short_upto != leftover[-1].id:
                return step
            if len(leftover) >= READ_LIMIT:
                return step
            # All of the day is summarised now: close it in the same step (a message that
            # arrives late for that day is summarised into the next one, never lost).
            state = step.state
        today = calendar.local_day(self.clock.now(), tz)
        # The next day with messages (days in between were idle: nothing to summarise).
        next_day = calendar.local_day_ms(next_message.ms, tz) if next_message else today
        week = ""
        week_start = self.settings.week_start
        if calendar.week_of(state.day, week_start) != calendar.week_of(next_day, week_start):
            week = calendar.week_of(state.day, week_start)
        summary = None
        if state.short.strip():
            summary = episode(
                state.day,
                state.short,
                messages=state.day_msgs,
                degraded=False,
                facts=await self.repo.reads.facts(scope) if state.fact_seq else (),
            )
        elif week and not any(
            calendar.in_week(d.day, week) for d in await self.repo.reads.days(scope)
        ):
            week = ""  # an idle week: nothing to consolidate, no LLM call
        result, after, days = await self.repo.steps.close_day(
            scope,
            day=state.day,
            next_day=next_day,
            summary=summary,
            expected_upto=state.short_upto,
            new_upto="",
            tokens=0,
            count=0,
            days_max=self.settings.days_max,
            week=week,
            now_iso=iso(self.clock.now()),
            epoch=state.epoch,
            trim_before=self.policy.trim_target(state)[0],
            trimmed_ms=self.policy.trim_target(state)[1],
            episodes_max=self.settings.weeks_max * 7,  # as long as the weeks list reaches
        )
        if result == -1 and after is not None:
            return await self.refresher.refresh(scope, after, report, None)
        if result != 1:
            return Known()
        if summary is None:
            report.idle_days += 1
        else:
            report.days_closed += 1
            report.closed.append(state.day)
            log.info("closed day %s of %s (next day %s)", state.day, scope, next_day)
        return Known(state=after, days=days)
