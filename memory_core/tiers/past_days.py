"""A place's past, summarised once it is put before the place's own memory (learning, see
:mod:`memory_core.service.learning`): each past day into its day record, in chunks as the
rest of a day is at rollover, with the facts its summaries learn (about the channel, and
about the people who spoke where the whole server could hear); the weeks before the place's
first week consolidated; all put in their places before the place's own records.

The place's own days are never touched: the past ends before the start of the place's first
day (its messages from then on are stored as live ones are). A week that the past shares
with the place's first days is consolidated by the place itself at its end, from its days
list, which now holds the past's days too.

On the scope's bill, under its budgets: past a budget, and whenever the model cannot be
reached, a day is summarised extractively (learning never stops for the model).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from memory_core import calendar
from memory_core.errors import LLMUnavailable
from memory_core.llm.usage import SpendTag, charge_to
from memory_core.models import DaySummary, Fact, LogEntry, ScopeState, WeekSummary
from memory_core.scopes import Scope
from memory_core.store.learning import LearningStore
from memory_core.text.language import resolve
from memory_core.tiers.compaction import take_oldest
from memory_core.tiers.episodes import episode
from memory_core.tiers.facts import merge_ops
from memory_core.tiers.maintenance import Maintainer
from memory_core.tiers.steps import iso
from memory_core.tiers.summarize import CompactOutcome, RefreshOutcome


class _Forgotten(Exception):
    """Something was forgotten while the past was summarised: what was made is not written."""


@dataclass
class PastReport:
    days: int = 0  # day records made
    weeks: int = 0  # weeks consolidated
    extractive: int = 0  # summaries made without the model (budget, offline, unreachable)


class PastDays:
    def __init__(self, maintainer: Maintainer, learning: LearningStore) -> None:
        self.maintainer = maintainer
        self.learning = learning

    async def summarise(
        self, scope: str, entries: Sequence[LogEntry], *, cutoff_day: str, epoch: int
    ) -> PastReport | None:
        """Summarise ``entries`` (the scope's past, oldest first, all before ``cutoff_day``,
        the place's first day, read at ``epoch``) into day records and weeks, put before
        the scope's own. None when something was forgotten since they were read: nothing
        made of them is written after that (each write compares the epoch), and the caller
        reads what is left and summarises it again."""
        m = self.maintainer
        report = PastReport()
        if not entries:
            return report
        state = await m.repo.reads.state(scope)
        if state.epoch != epoch:
            return None
        try:
            return await self._summarise(scope, state, entries, cutoff_day, report)
        except _Forgotten:
            return None

    async def _summarise(
        self,
        scope: str,
        state: ScopeState,
        entries: Sequence[LogEntry],
        cutoff_day: str,
        report: PastReport,
    ) -> PastReport:
        m = self.maintainer
        epoch = state.epoch
        parent = Scope.of(scope).parent
        state = state.inherit(await m.repo.reads.state(parent.key) if parent else None)
        tz = m.policy.tz(state)
        try:
            with charge_to(SpendTag(scope)):
                days = []
                for day, group in _by_day(entries, tz):
                    # The budgets, looked at before each day: past one, the rest of the
                    # past is summarised extractively (as maintenance does past it).
                    if m.over_budget is not None and await m.over_budget(scope):
                        m.policy.budget_reached.add(scope)
                    days.append(await self._day(scope, state, day, group, tz, report))
                added = await self.learning.insert_days(
                    scope,
                    days,
                    days_max=m.settings.days_max,
                    episodes_max=m.settings.weeks_max * 7,
                    epoch=epoch,
                )
                if added is None:
                    raise _Forgotten
                report.days = added
                await self._weeks(scope, state, days, cutoff_day, report)
        finally:
            m.policy.budget_reached.discard(scope)
        # The tiers made from the days list (mid, overview) are made again with the past in
        # it, by the scope's own maintenance; a place that had no day of its own opens one.
        fields: dict[str, str | int] = {"refresh_pending": 1, "refresh_seq": state.refresh_seq + 1}
        if not state.day:
            fields["day"] = cutoff_day
        await m.repo.writes.set_fields(scope, fields)
        return report

    async def _day(
        self,
        scope: str,
        state: ScopeState,
        day: str,
        entries: list[LogEntry],
        tz: str,
        report: PastReport,
    ) -> DaySummary:
        m = self.maintainer
        settings = m.settings
        short, degraded, rest = "", False, entries
        lang = resolve(state.lang or settings.language, (e.text for e in entries[-50:]))
        while rest:
            chunk = take_oldest(rest, settings.compact_max_input_tokens)
            rest = rest[len(chunk) :]
            force = m.policy.force_extractive(scope, state)
            known = await m.compactor.known_facts(scope, state, chunk, force)
            outcome = await self._compact(day, short, chunk, tz, lang, force, known.for_prompt())
            report.extractive += int(force or outcome.degraded or m.summarizer.llm.offline)
            short, degraded = outcome.summary, degraded or outcome.degraded
            said_iso = iso(calendar.from_ms(chunk[-1].ms))  # facts dated when they were said
            known = await m.compactor.merging_into(scope, state, chunk, known, outcome.facts)
            channel, personal = known.route(outcome.facts, chunk)
            if channel:
                ops = merge_ops(
                    known.channel,
                    channel,
                    now_iso=said_iso,
                    facts_max=settings.facts_max,
                    origin=scope,
                )
                if not await self.learning.write_facts(scope, ops, epoch=state.epoch):
                    raise _Forgotten
            await m.compactor.learn_about_people(scope, state, known, personal, said_iso)
        facts = await m.repo.reads.facts(scope)
        return episode(day, short, messages=len(entries), degraded=degraded, facts=facts)

    async def _compact(
        self,
        day: str,
        previous: str,
        chunk: list[LogEntry],
        tz: str,
        lang: str,
        force: bool,
        known: Sequence[Fact],
    ) -> CompactOutcome:
        summarizer = self.maintainer.summarizer
        size = self.maintainer.settings.short_tokens
        try:
            return await summarizer.compact(
                day=day,
                previous=previous,
                entries=chunk,
                tz=tz,
                lang=lang,
                max_tokens=size,
                force_extractive=force,
                known_facts=known,
            )
        except LLMUnavailable:  # the past is not worth waiting for the model: extractive
            return await summarizer.compact(
                day=day,
                previous=previous,
                entries=chunk,
                tz=tz,
                lang=lang,
                max_tokens=size,
                force_extractive=True,
            )

    async def _weeks(
        self,
        scope: str,
        state: ScopeState,
        days: list[DaySummary],
        cutoff_day: str,
        report: PastReport,
    ) -> None:
        """Each past week before the place's first one, its summary and the long-term tier
        folded through them, oldest first."""
        m = self.maintainer
        settings = m.settings
        first_own = calendar.week_of(cutoff_day, settings.week_start)
        weeks: dict[str, list[DaySummary]] = {}
        for day in days:
            week = calendar.week_of(day.day, settings.week_start)
            if week < first_own:
                weeks.setdefault(week, []).append(day)
        long, made = "", []
        lang = resolve(state.lang or settings.language, (d.summary for d in days[-20:]))
        for week, week_days in sorted(weeks.items()):
            force = m.policy.force_extractive(scope, state)
            try:
                outcome = await self._fold(week, week_days, long, lang, force)
            except LLMUnavailable:  # (as for days: extractive rather than waiting)
                outcome = await self._fold(week, week_days, long, lang, True)
            long = outcome.long or long
            made.append(
                WeekSummary(
                    week=week, summary=outcome.week, days=len(week_days), degraded=outcome.degraded
                )
            )
        added = await self.learning.insert_weeks(
            scope, made, weeks_max=settings.weeks_max, epoch=state.epoch
        )
        if added is None:
            raise _Forgotten
        report.weeks = added
        # A place younger than a week has no long-term tier yet: its past's is it. (An
        # older place keeps its own; its past is in its weeks and day records.)
        if (
            long
            and not state.long.strip()
            and not await self.learning.set_fields_at(scope, {"long": long}, epoch=state.epoch)
        ):
            raise _Forgotten

    async def _fold(
        self, week: str, week_days: list[DaySummary], long: str, lang: str, force: bool
    ) -> RefreshOutcome:
        """One past week's summary, and the long-term tier with it folded in."""
        settings = self.maintainer.settings
        return await self.maintainer.summarizer.refresh(
            days=week_days,
            long=long,
            week=week,
            week_days=week_days,
            lang=lang,
            mid_tokens=settings.mid_tokens,
            overview_tokens=settings.overview_tokens,
            week_tokens=settings.week_tokens,
            long_tokens=settings.long_tokens,
            force_extractive=force,
        )


def _by_day(entries: Sequence[LogEntry], tz: str) -> list[tuple[str, list[LogEntry]]]:
    groups: dict[str, list[LogEntry]] = {}
    for entry in entries:
        groups.setdefault(calendar.local_day_ms(entry.ms, tz), []).append(entry)
    return sorted(groups.items())
