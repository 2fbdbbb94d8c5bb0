"""The refresh of the tiers built from days: mid and overview after a day closes, and at a
week boundary the week's summary and the long-term tier, in one compare-and-set."""

from __future__ import annotations

from memory_core import calendar
from memory_core.errors import LLMUnavailable
from memory_core.models import DaySummary, ScopeState, WeekSummary
from memory_core.text.language import resolve
from memory_core.tiers.steps import Known, MaintenanceReport, StepPolicy, iso
from memory_core.tiers.summarize import Summarizer


class TierRefresher:
    def __init__(self, *, summarizer: Summarizer, policy: StepPolicy) -> None:
        self.policy = policy  # the repo, settings and clock the steps share come with it
        self.repo = policy.repo
        self.settings = policy.settings
        self.clock = policy.clock
        self.summarizer = summarizer

    async def refresh(
        self,
        scope: str,
        state: ScopeState,
        report: MaintenanceReport,
        days: list[DaySummary] | None,
    ) -> Known | None:
        if self.policy.waiting(state, report):
            return None
        settings = self.settings
        if days is None:
            days = await self.repo.reads.days(scope)
        week = state.week_pending
        week_days = [d for d in days if calendar.in_week(d.day, week)] if week else []
        lang = resolve(state.lang or settings.language, (d.summary for d in days))
        try:
            outcome = await self.summarizer.refresh(
                days=days,
                long=state.long,
                week=week,
                week_days=week_days,
                lang=lang,
                mid_tokens=settings.mid_tokens,
                overview_tokens=settings.overview_tokens,
                week_tokens=settings.week_tokens,
                long_tokens=settings.long_tokens,
                force_extractive=self.policy.force_extractive(scope, state),
            )
        except LLMUnavailable as exc:
            return await self.policy.llm_failed(scope, state, exc, report)
        week_summary = None
        if week and week_days:
            week_summary = WeekSummary(
                week=week, summary=outcome.week, days=len(week_days), degraded=outcome.degraded
            )
        result, after = await self.repo.steps.apply_refresh(
            scope,
            refresh_seq=state.refresh_seq,
            mid=outcome.mid,
            overview=outcome.overview,
            week=week,
            week_summary=week_summary,
            long=outcome.long if week_summary else "",
            weeks_max=settings.weeks_max,
            now_iso=iso(self.clock.now()),
            epoch=state.epoch,
        )
        if result != 1:
            return Known()
        report.refreshes += 1
        report.weeks += 1 if week_summary else 0
        return Known(state=after)
