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

Which facts a summary call sees and where the facts it extracts go is
:mod:`memory_core.tiers.fact_routing`; what retention trims is :mod:`memory_core.tiers.retention`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from config.settings import MemorySettings
from memory_core import calendar
from memory_core.clock import Clock
from memory_core.errors import LLMUnavailable, StoreError, UnknownTimezone
from memory_core.llm.usage import SpendTag, charge_to
from memory_core.models import DaySummary, LogEntry, ScopeState, WeekSummary
from memory_core.scopes import Scope
from memory_core.store.locks import LockHolder
from memory_core.store.repo import MemoryRepo
from memory_core.text.language import resolve
from memory_core.tiers.episodes import episode
from memory_core.tiers.fact_routing import KnownFacts, speakers_of
from memory_core.tiers.facts import merge_ops
from memory_core.tiers.retention import trim_due, trim_target
from memory_core.tiers.summarize import Summarizer

log = logging.getLogger(__name__)

MAX_STEPS = 5000  # a safety stop: a scope catching up after a year needs ~3 steps a day
READ_LIMIT = 5000  # entries read per step; a backlog is eaten in several steps


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
class _Known:
    """What a step learned of the scope after it, so the next step need not read it again."""

    state: ScopeState | None = None
    days: list[DaySummary] | None = None
    # A thread's channel's state, read once per run: the settings the thread inherits
    # (the states the compare-and-set steps hand back are the thread's own).
    parent: ScopeState | None = None


def _iso(when: datetime) -> str:
    return when.isoformat(timespec="seconds")


class Maintainer:
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
        self.repo = repo
        self.summarizer = summarizer
        self.settings = settings
        self.clock = clock
        # Renewed every third of itself while the work goes on, so a slow LLM call keeps it,
        # and a worker that dies delays the scope's maintenance by at most this much.
        self.lock_ttl_ms = lock_ttl_ms
        # Finishes forgets a crash interrupted, before any summary reads the scope.
        self.recover = recover
        # Whether the scope's (or its server's) daily token budget is reached: its run then
        # summarises extractively, as offline, until the scope's next local day.
        self.over_budget = over_budget
        self._budget_reached: set[str] = set()  # scopes whose run is within such a day

    # -- cheap checks ------------------------------------------------------------------
    def tz(self, state: ScopeState) -> str:
        """The scope's timezone. A stored one that does not exist (an import, a hand edit)
        raises UnknownTimezone: days cut at a guessed midnight would stay wrong for good, so
        such a scope is reported and left alone rather than rolled over in another zone."""
        name = state.tz or self.settings.timezone
        calendar.zone(name)
        return name

    def compaction_due(self, unsum_tokens: int, unsum_count: int) -> bool:
        s = self.settings
        return unsum_tokens >= s.compact_trigger_tokens and unsum_count >= s.compact_min_messages

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
            return self._trim_due(state)
        return self.compaction_due(state.unsum_tokens, state.unsum_count) or self._trim_due(state)

    # -- the loop ----------------------------------------------------------------------
    async def run(self, scope: str, *, lock: bool = True) -> MaintenanceReport:
        """Bring ``scope`` up to date. ``lock=False`` skips the fleet lock: correctness never
        depends on it (every write is a compare-and-set); it only saves duplicate LLM calls."""
        report = MaintenanceReport(scope=scope)
        known = _Known()
        token = ""
        if lock:
            claim = await self.repo.lock_and_state(scope, self.lock_ttl_ms)
            if claim.token is None:
                report.skipped = True
                report.held_by, report.held_until_ms = claim.holder, claim.expires_ms
                return report
            if claim.taken_from is not None:
                log.warning(
                    "took over the maintenance lock of %s from pid %d on %s: it is gone",
                    scope,
                    claim.taken_from.pid,
                    claim.taken_from.host,
                )
            token, known.state = claim.token, claim.state
        keeper = asyncio.create_task(self._keep_lock(scope, token)) if token else None
        try:
            parent = Scope.of(scope).parent
            known.parent = await self.repo.state(parent.key) if parent else None
            if self.over_budget is not None and await self.over_budget(scope):
                self._budget_reached.add(scope)
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
            self._budget_reached.discard(scope)
            await self._release(scope, token, keeper)
        return report

    async def _keep_lock(self, scope: str, token: str) -> None:
        """Renew the lock until cancelled. A renewal Redis refuses is logged and tried again
        on the next beat: it must never end the work nor hide how the work ended."""
        while True:
            await asyncio.sleep(self.lock_ttl_ms / 3000)
            try:
                held = await self.repo.renew_lock(scope, token, self.lock_ttl_ms)
            except StoreError as exc:
                log.warning("%s; trying again, its writes stay safe meanwhile", exc)
                continue
            if not held:
                log.warning("lost the maintenance lock of %s; its writes stay safe", scope)
                return

    async def _release(self, scope: str, token: str, keeper: asyncio.Task[None] | None) -> None:
        """Stop renewing and unlock, whatever the work raised: this runs in a ``finally``,
        so an error here would replace the work's own."""
        if keeper is not None:
            keeper.cancel()
            # The keeper's outcome, not raised: cancelled, or an error it did not expect.
            (outcome,) = await asyncio.gather(keeper, return_exceptions=True)
            if not isinstance(outcome, asyncio.CancelledError | type(None)):
                log.error("renewing the maintenance lock of %s failed: %r", scope, outcome)
        if token:
            try:
                await self.repo.unlock(scope, token)
            except StoreError as exc:
                log.warning("%s", exc)

    async def _step(self, scope: str, report: MaintenanceReport, known: _Known) -> _Known | None:
        """One step; returns what it learned of the state after it (None: nothing to do)."""
        state = (known.state or await self.repo.state(scope)).inherit(known.parent)
        if state.forgets_pending and self.recover is not None:
            await self.recover(scope)  # finish an interrupted forget before summarising
            return _Known()
        if not state.day:
            return None
        now = self.clock.now()
        tz = self.tz(state)
        if state.refresh_pending and state.week_pending:
            return await self._refresh(scope, state, report, known.days)
        if calendar.local_day(now, tz) > state.day:
            return await self._finish_day(scope, state, report)
        if state.refresh_pending:
            return await self._refresh(scope, state, report, known.days)
        if self.compaction_due(state.unsum_tokens, state.unsum_count):
            return await self._compact(scope, state, report, final=False)
        if self._trim_due(state):
            # A quiet scope closes no more days, so retention runs on its own here.
            minid, target_ms = self._trim_target(state)
            await self.repo.trim_log_before(scope, minid)
            await self.repo.set_fields(scope, {"trimmed_ms": target_ms})
            return None
        return None

    def _waiting(self, state: ScopeState, report: MaintenanceReport) -> bool:
        """True while an earlier LLM failure asks us to wait (unless we stand in now)."""
        if state.failures >= self.settings.summary_attempts:
            return False
        if state.retry_at > calendar.to_ms(self.clock.now()):
            report.waiting_until = state.retry_at
            return True
        return False

    def _force_extractive(self, scope: str, state: ScopeState) -> bool:
        """The extractive summariser stands in: the model kept failing, or the scope's
        daily token budget is reached (no model call then; the model is back tomorrow)."""
        if scope in self._budget_reached:
            return True
        return state.failures >= self.settings.summary_attempts

    async def _llm_failed(
        self, scope: str, state: ScopeState, exc: LLMUnavailable, report: MaintenanceReport
    ) -> _Known | None:
        delay = min(3600.0, self.settings.retry_base_s * 2**state.failures)
        if exc.retry_after is not None and exc.retry_after > 0:
            delay = max(delay, exc.retry_after)
        retry_at = calendar.to_ms(self.clock.now()) + int(delay * 1000)
        failures = await self.repo.note_failure(scope, retry_at_ms=retry_at)
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
        return _Known() if failures >= self.settings.summary_attempts else None

    # -- steps -------------------------------------------------------------------------
    async def _compact(
        self,
        scope: str,
        state: ScopeState,
        report: MaintenanceReport,
        *,
        final: bool,
        entries: list[LogEntry] | None = None,
    ) -> _Known | None:
        if self._waiting(state, report):
            return None
        s = self.settings
        tz = self.tz(state)
        if entries is None:
            end_ms = calendar.day_end_ms(state.day, tz)
            entries = await self.repo.entries_after(
                scope, state.short_upto, before_ms=end_ms, limit=READ_LIMIT
            )
        candidates = entries if final else _drop_newest(entries, s.compact_keep_tokens)
        chunk = _take_oldest(candidates, s.compact_max_input_tokens)
        if not chunk:
            return None
        lang = resolve(state.lang or s.language, (e.text for e in chunk[-50:]))
        force = self._force_extractive(scope, state)
        known = await self._known_facts(scope, state, chunk, force)
        try:
            outcome = await self.summarizer.compact(
                day=state.day,
                previous=state.short,
                entries=chunk,
                tz=tz,
                lang=lang,
                max_tokens=s.short_tokens,
                force_extractive=force,
                known_facts=known.for_prompt(),
            )
        except LLMUnavailable as exc:
            return await self._llm_failed(scope, state, exc, report)
        now_iso = _iso(self.clock.now())
        channel_drafts, personal = known.route(outcome.facts, chunk)
        ops: list[list[str]] = []
        if channel_drafts:
            ops = merge_ops(
                known.channel,
                channel_drafts,
                now_iso=now_iso,
                facts_max=s.facts_max,
                origin=scope,
            )
        after = await self.repo.advance_short(
            scope,
            expected_upto=state.short_upto,
            expected_day=state.day,
            new_upto=chunk[-1].id,
            short=outcome.summary,
            tokens=sum(e.tokens for e in chunk),
            count=len(chunk),
            now_iso=now_iso,
            epoch=state.epoch,
            fact_ops=ops,
        )
        if after is None:
            return _Known()  # someone else moved the scope on: read it again
        report.compactions += 1
        for person_scope, drafts in personal.items():
            await self.repo.apply_person_facts(
                person_scope,
                merge_ops(
                    known.people.get(person_scope, []),
                    drafts,
                    now_iso=now_iso,
                    facts_max=s.facts_max,
                    origin=scope,
                    shared=True,
                ),
                before=known.people.get(person_scope, []),
                origin=scope,
                epoch=state.epoch,
            )
        return _Known(state=after)

    async def _known_facts(
        self, scope: str, state: ScopeState, chunk: Sequence[LogEntry], extractive: bool
    ) -> KnownFacts:
        """The facts a summary call may update: the channel's, and those about the people
        speaking in ``chunk`` who may carry facts across the guild or workspace."""
        speakers, travellers = speakers_of(scope, chunk)
        if extractive or self.summarizer.llm.offline:
            return KnownFacts(channel=[], people={}, speakers=speakers, travellers=travellers)
        channel = await self.repo.facts(scope) if state.fact_seq else []
        people = await self.repo.facts_of(sorted(set(travellers.values())))
        return KnownFacts(
            channel=channel,
            people={p: [f for f in facts if f.shared] for p, facts in people.items()},
            speakers=speakers,
            travellers=travellers,
        )

    async def _finish_day(
        self, scope: str, state: ScopeState, report: MaintenanceReport
    ) -> _Known | None:
        tz = self.tz(state)
        end_ms = calendar.day_end_ms(state.day, tz)
        leftover, nxt = await self.repo.day_view(
            scope, after_id=state.short_upto, end_ms=end_ms, limit=READ_LIMIT
        )
        if leftover:
            # Summarise the rest of the day into 'short' first (in chunks if it is large;
            # each chunk is its own atomic step, so a crash loses no progress).
            step = await self._compact(scope, state, report, final=True, entries=leftover)
            if step is None or step.state is None or step.state.short_upto != leftover[-1].id:
                return step
            if len(leftover) >= READ_LIMIT:
                return step
            # All of the day is summarised now: close it in the same step (a message that
            # arrives late for that day is summarised into the next one, never lost).
            state = step.state
        today = calendar.local_day(self.clock.now(), tz)
        # The next day with messages (days in between were idle: nothing to summarise).
        next_day = calendar.local_day_ms(nxt.ms, tz) if nxt else today
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
                facts=await self.repo.facts(scope) if state.fact_seq else (),
            )
        elif week and not any(calendar.in_week(d.day, week) for d in await self.repo.days(scope)):
            week = ""  # an idle week: nothing to consolidate, no LLM call
        result, after, days = await self.repo.close_day(
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
            now_iso=_iso(self.clock.now()),
            epoch=state.epoch,
            trim_before=self._trim_target(state)[0],
            trimmed_ms=self._trim_target(state)[1],
            episodes_max=self.settings.weeks_max * 7,  # as long as the weeks list reaches
        )
        if result == -1 and after is not None:
            return await self._refresh(scope, after, report, None)
        if result != 1:
            return _Known()
        if summary is None:
            report.idle_days += 1
        else:
            report.days_closed += 1
            report.closed.append(state.day)
            log.info("closed day %s of %s (next day %s)", state.day, scope, next_day)
        return _Known(state=after, days=days)

    async def _refresh(
        self,
        scope: str,
        state: ScopeState,
        report: MaintenanceReport,
        days: list[DaySummary] | None,
    ) -> _Known | None:
        if self._waiting(state, report):
            return None
        s = self.settings
        if days is None:
            days = await self.repo.days(scope)
        week = state.week_pending
        week_days = [d for d in days if calendar.in_week(d.day, week)] if week else []
        lang = resolve(state.lang or s.language, (d.summary for d in days))
        try:
            outcome = await self.summarizer.refresh(
                days=days,
                long=state.long,
                week=week,
                week_days=week_days,
                lang=lang,
                mid_tokens=s.mid_tokens,
                overview_tokens=s.overview_tokens,
                week_tokens=s.week_tokens,
                long_tokens=s.long_tokens,
                force_extractive=self._force_extractive(scope, state),
            )
        except LLMUnavailable as exc:
            return await self._llm_failed(scope, state, exc, report)
        week_summary = None
        if week and week_days:
            week_summary = WeekSummary(
                week=week, summary=outcome.week, days=len(week_days), degraded=outcome.degraded
            )
        result, after = await self.repo.apply_refresh(
            scope,
            refresh_seq=state.refresh_seq,
            mid=outcome.mid,
            overview=outcome.overview,
            week=week,
            week_summary=week_summary,
            long=outcome.long if week_summary else "",
            weeks_max=s.weeks_max,
            now_iso=_iso(self.clock.now()),
            epoch=state.epoch,
        )
        if result != 1:
            return _Known()
        report.refreshes += 1
        report.weeks += 1 if week_summary else 0
        return _Known(state=after)

    def _trim_due(self, state: ScopeState) -> bool:
        return trim_due(
            state,
            now_ms=calendar.to_ms(self.clock.now()),
            retention_days=self.settings.retention_days,
        )

    def _trim_target(self, state: ScopeState) -> tuple[str, int]:
        return trim_target(
            state,
            now_ms=calendar.to_ms(self.clock.now()),
            retention_days=self.settings.retention_days,
        )


def why_broken(exc: Exception) -> str:
    """Why a scope cannot be maintained, and what fixes it."""
    if isinstance(exc, UnknownTimezone):
        return f"{exc}; set one with /memory config timezone <Area/City>"
    return str(exc) or type(exc).__name__


def _drop_newest(entries: Sequence[LogEntry], keep_tokens: int) -> list[LogEntry]:
    """All but the newest entries worth ``keep_tokens``: those stay verbatim for now."""
    kept = 0
    cut = len(entries)
    for i in range(len(entries) - 1, -1, -1):
        kept += entries[i].tokens
        if kept > keep_tokens:
            break
        cut = i
    return list(entries[:cut])


def _take_oldest(entries: Sequence[LogEntry], max_tokens: int) -> list[LogEntry]:
    """The oldest entries within ``max_tokens`` (always at least one, however long)."""
    chunk: list[LogEntry] = []
    total = 0
    for entry in entries:
        if chunk and total + entry.tokens > max_tokens:
            break
        chunk.append(entry)
        total += entry.tokens
    return chunk
