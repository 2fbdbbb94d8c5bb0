"""Rollover on a calendar: APScheduler fires sweeps; a sweep brings every due scope up to date.

Jobs (APScheduler 3.x ``AsyncIOScheduler`` inside ``memorybot run``):
- ``midnight``: local midnight of the configured timezone (DST handled by the cron trigger);
- ``sweep``: every ``sweep_minutes`` (15 by default). Every UTC offset in use is a multiple of
  15 minutes, so a scope with its own timezone rolls over within seconds of its own midnight;
  the same job catches up whatever a stopped fleet missed;
- ``weekly``: the configured day and hour, for weeks whose last days were idle;
- one sweep at start-up: catch-up after downtime.

``memorybot rollover`` calls the same :meth:`RolloverScheduler.sweep`: one code path. Any
number of processes may fire the same job; the fleet queue shares the scopes out, and the
maintainer's compare-and-set scripts make each (scope, day) and (scope, week) happen once.
A scope that cannot be maintained (a stored timezone that does not exist) is skipped and
listed in the report's ``broken``, with the reason; the others go on.

The scheduler sits below the service layer: it is handed what it calls (the repo, the
maintainer for its ``due`` check, and ``maintain``, the pipeline's run of one scope) by
``memory_core.bootstrap``, and imports nothing above it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from config.settings import Settings
from memory_core import calendar
from memory_core.clock import Clock
from memory_core.errors import MemorybotError, StoreError
from memory_core.fleet.queue import FleetQueue
from memory_core.models import ScopeState
from memory_core.store.repo import MemoryRepo
from memory_core.tiers.maintenance import Maintainer, MaintenanceReport, why_broken

log = logging.getLogger(__name__)

# Brings one scope up to date (the pipeline's ``maintain``: the maintainer's run with its
# lock, metrics and reports).
Maintain = Callable[[str], Awaitable[MaintenanceReport]]


# An enumerator's marker lives this long unless its heartbeat renews it: a process that dies
# while enumerating holds the others up for about this long.
ENUMERATION_LEASE_S = 10.0
# How long workers wait, with the queue empty, for a live enumerator to queue more; past it
# they stop (the enumerator works what it queues itself, the next sweep the rest).
ENUMERATION_WAIT_S = 60.0


@dataclass
class SweepReport:
    enumerated: bool = False
    queued: int = 0
    worked: int = 0
    days_closed: int = 0
    idle_days: int = 0
    weeks: int = 0
    refreshes: int = 0
    compactions: int = 0
    failed: int = 0
    skipped: int = 0
    seconds: float = 0.0
    scopes: list[str] = field(default_factory=list)
    # Scopes that cannot be maintained until someone fixes them: {"scope", "reason"}.
    broken: list[dict[str, str]] = field(default_factory=list)
    # Skipped scopes, with who holds their lock and until when: {"scope", "holder", "until"}.
    held: list[dict[str, Any]] = field(default_factory=list)

    def add(self, report: MaintenanceReport) -> None:
        self.worked += 1
        self.days_closed += report.days_closed
        self.idle_days += report.idle_days
        self.weeks += report.weeks
        self.refreshes += report.refreshes
        self.compactions += report.compactions
        self.failed += int(report.failures > 0)
        self.skipped += int(report.skipped)
        self.scopes.append(report.scope)
        if report.broken:
            self.broke(report.scope, report.broken)
        if report.skipped:
            holder = report.held_by
            self.held.append(
                {
                    "scope": report.scope,
                    "holder": holder.as_dict() if holder is not None else None,
                    "until": _iso_ms(report.held_until_ms),
                }
            )

    def broke(self, scope: str, reason: str) -> None:
        if all(b["scope"] != scope for b in self.broken):
            self.broken.append({"scope": scope, "reason": reason})

    def figures(self) -> dict[str, Any]:
        """The counts (what the dashboard shows for the last sweep of each job)."""
        data = {k: v for k, v in self.__dict__.items() if not isinstance(v, list)}
        data["seconds"] = round(self.seconds, 3)
        data["broken"] = len(self.broken)
        return data

    def as_dict(self) -> dict[str, Any]:
        return {**self.figures(), "broken": list(self.broken), "held": list(self.held)}


def _iso_ms(ms: int) -> str:
    return calendar.from_ms(ms).isoformat(timespec="seconds") if ms else ""


def _local_trigger(tz: str, *, hour: int = 0, weekday: str | None = None, offset_s: int = 5) -> Any:
    """An APScheduler trigger firing at local ``hour``:00 (+offset) in ``tz``.

    APScheduler 3's CronTrigger skips the day after a spring-forward DST change when asked
    for the next fire time just after midnight (agronholm/apscheduler#606, still in 3.11.3),
    which would skip a rollover; this trigger uses the calendar module's pure time maths.
    """
    from apscheduler.triggers.base import BaseTrigger

    class LocalTimeTrigger(BaseTrigger):  # type: ignore[misc]
        def get_next_fire_time(
            self, previous_fire_time: datetime | None, now: datetime
        ) -> datetime:
            after = now if previous_fire_time is None else max(now, previous_fire_time)
            base = after - timedelta(seconds=offset_s)
            fire = calendar.next_local_time(base, tz, hour=hour, weekday=weekday)
            return (fire + timedelta(seconds=offset_s)).astimezone(calendar.zone(tz))

        def __str__(self) -> str:
            return f"local {weekday or 'daily'} {hour:02d}:00 {tz}"

    return LocalTimeTrigger()


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{id(object()) & 0xFFFF:x}"


class RolloverScheduler:
    def __init__(
        self,
        *,
        repo: MemoryRepo,
        maintainer: Maintainer,
        maintain: Maintain,
        fleet: FleetQueue,
        settings: Settings,
        clock: Clock,
        worker: str | None = None,
    ) -> None:
        self.repo = repo
        self.maintainer = maintainer  # which scopes are due: its cheap checks, no work
        self.maintain = maintain
        self.fleet = fleet
        self.settings = settings
        self.clock = clock
        self.worker = worker or worker_name()
        self._aps: Any = None
        self._running = asyncio.Lock()
        self.last: SweepReport | None = None
        self.enumeration_lease_s = ENUMERATION_LEASE_S
        self.enumeration_wait_s = ENUMERATION_WAIT_S

    # -- one sweep ---------------------------------------------------------------------
    def slot(self) -> str:
        """The sweep slot of now: all processes firing the same job agree on it."""
        minutes = self.settings.scheduler.sweep_minutes
        now = int(self.clock.now().timestamp()) // (minutes * 60) * (minutes * 60)
        return calendar.from_ms(now * 1000).isoformat(timespec="minutes")

    async def sweep(
        self,
        *,
        only: Sequence[str] | None = None,
        force: bool = False,
        progress: Callable[[SweepReport], None] | None = None,
    ) -> SweepReport:
        """Queue the due scopes (one process per slot, unless ``force`` or ``only``) and work
        the queue with the others until it is empty."""
        started = time.perf_counter()
        report = SweepReport()
        slot = self.slot()
        if only is not None or force:
            report.enumerated = True
            report.queued = await self._enumerate(only, report)
        else:
            await self._enumerate_slot(slot, report)
        await self._work(report, slot, progress, take_over=only is None and not force)
        report.seconds = time.perf_counter() - started
        self.last = report
        return report

    async def _enumerate_slot(self, slot: str, report: SweepReport) -> None:
        """Enumerate the slot's due scopes, unless another live process is doing so. The
        marker is renewed by a heartbeat while this runs, and never outlives a failure."""
        lease_ms = int(self.enumeration_lease_s * 1000)
        if not await self.fleet.win_sweep(slot, self.worker, lease_ms=lease_ms):
            return
        report.enumerated = True
        heartbeat = asyncio.create_task(self._keep_enumerating(slot, lease_ms))
        finished = False
        try:
            report.queued += await self._enumerate(None, report)
            finished = True
        finally:
            heartbeat.cancel()
            await asyncio.gather(heartbeat, return_exceptions=True)
            await self._end_enumeration(slot, finished=finished)

    async def _keep_enumerating(self, slot: str, lease_ms: int) -> None:
        while True:
            await asyncio.sleep(lease_ms / 3000)
            try:
                if not await self.fleet.keep_sweep(slot, self.worker, lease_ms=lease_ms):
                    log.warning("sweep %s: another process took over enumerating it", slot)
                    return
            except StoreError as exc:  # the next beat tries again; the lease is 3 beats long
                log.warning("sweep %s: could not renew the enumeration marker: %s", slot, exc)

    async def _end_enumeration(self, slot: str, *, finished: bool) -> None:
        """Mark the slot done, or free it for another process after a failure. Runs in a
        ``finally``: its own Redis error is logged, never raised over the sweep's."""
        ttl_s = self.settings.scheduler.sweep_minutes * 60 * 4
        try:
            if finished:
                await self.fleet.mark_enumerated(slot, ttl_s=ttl_s)
            else:
                await self.fleet.abandon_sweep(slot, self.worker)
        except StoreError as exc:
            log.warning(
                "sweep %s: could not update its marker (it lapses in %.0fs): %s",
                slot,
                self.enumeration_lease_s,
                exc,
            )

    async def _enumerate(self, only: Sequence[str] | None, report: SweepReport) -> int:
        now = self.clock.now()
        now_ms = calendar.to_ms(now)
        queued = 0
        if only is not None:
            states = [(scope, await self.repo.reads.state(scope)) for scope in only]
            return await self.fleet.enqueue(self._due(states, now, report), now_ms=now_ms)
        async for batch in self.fleet.states():
            queued += await self.fleet.enqueue(self._due(batch, now, report), now_ms=now_ms)
        return queued

    def _due(
        self, states: Sequence[tuple[str, ScopeState]], now: datetime, report: SweepReport
    ) -> list[str]:
        """The scopes with work now. A scope whose state cannot be read (a timezone that
        does not exist, a hand-edited day) is reported and skipped: one bad scope never
        stops the sweep of the others."""
        due: list[str] = []
        for scope, state in states:
            try:
                if self.maintainer.due(state, now):
                    due.append(scope)
            except (MemorybotError, ValueError) as exc:  # ValueError: a day that is no date
                reason = why_broken(exc)
                log.warning("rollover of %s skipped: %s", scope, reason)
                report.broke(scope, reason)
        return due

    async def _work(
        self,
        report: SweepReport,
        slot: str,
        progress: Callable[[SweepReport], None] | None,
        *,
        take_over: bool,
    ) -> None:
        """Work the queue until it is empty and nobody fills it any more. ``take_over``: a
        slot whose enumerator died before it finished is enumerated by this process."""
        lease_ms = int(self.settings.scheduler.lease_s * 1000)

        async def worker() -> None:
            idle_since: float | None = None
            while True:
                # Leases are about processes staying alive: real time, not the clock.
                scope = await self.fleet.claim(now_ms=int(time.time() * 1000), lease_ms=lease_ms)
                if scope is None:
                    status = await self.fleet.sweep_status(slot)
                    if status == "open" and take_over:
                        await self._enumerate_slot(slot, report)
                        continue
                    if status != "enumerating":
                        return
                    idle_since = idle_since or time.monotonic()
                    idle_s = time.monotonic() - idle_since
                    if idle_s > self.enumeration_wait_s:
                        log.warning("sweep %s: its enumerator queued nothing for a while", slot)
                        return
                    # The queue is still being filled: look again soon, less often the
                    # longer it stays empty (every look reads every bucket).
                    await asyncio.sleep(min(0.05 + idle_s / 4, 0.4))
                    continue
                idle_since = None
                try:
                    report.add(await self.maintain(scope))
                except Exception:  # one scope's failure never blocks the others
                    log.exception("rollover of %s failed; it will be retried", scope)
                    report.failed += 1
                finally:
                    await self.fleet.finish(scope)
                if progress is not None:
                    progress(report)

        await asyncio.gather(*(worker() for _ in range(self.settings.scheduler.concurrency)))

    # -- APScheduler -------------------------------------------------------------------
    def start(self) -> None:
        """Register the jobs and start firing them (needs a running event loop)."""
        from apscheduler.schedulers.asyncio import AsyncIOScheduler
        from apscheduler.triggers.cron import CronTrigger

        s = self.settings
        tz = calendar.zone(s.memory.timezone)
        aps = AsyncIOScheduler(timezone=tz)
        options = {"coalesce": True, "max_instances": 1, "misfire_grace_time": 3600}
        aps.add_job(
            self.fire,
            CronTrigger(hour=0, minute=0, second=5, timezone=tz),
            id="midnight",
            **options,
        )
        aps.add_job(
            self.fire,
            CronTrigger(minute=f"*/{s.scheduler.sweep_minutes}", second=20, timezone="UTC"),
            id="sweep",
            args=["sweep"],
            **options,
        )
        aps.add_job(
            self.fire,
            _local_trigger(
                s.memory.timezone,
                hour=s.scheduler.weekly_hour,
                weekday=s.scheduler.weekly_day,
                offset_s=120,
            ),
            id="weekly",
            args=["weekly"],
            **options,
        )
        aps.start()
        self._aps = aps
        # Catch up at once whatever was missed while the fleet was down.
        self._startup = asyncio.create_task(self.fire("startup"))

    async def fire(self, job: str = "sweep") -> None:
        """One job firing: a sweep, unless this process is already sweeping."""
        if self._running.locked():
            return
        async with self._running:
            try:
                report = await self.sweep()
            except Exception:  # logged; the next firing tries again
                log.exception("rollover sweep failed")
                return
        await self.record(job, report)
        if report.worked or report.queued:
            log.info("rollover sweep (%s): %s", job, report.figures())

    async def record(self, job: str, report: SweepReport) -> None:
        """The last sweep of each job, for the dashboard."""
        entry = {"at": self.clock.now().isoformat(timespec="seconds"), "worker": self.worker}
        entry.update(report.figures())
        with contextlib.suppress(StoreError):  # bookkeeping only: never fails a sweep
            await self.fleet.record_sweep(job, json.dumps(entry))

    async def stop(self) -> None:
        if self._aps is not None:
            self._aps.shutdown(wait=False)
            self._aps = None
        startup = getattr(self, "_startup", None)
        if startup is not None and not startup.done():
            startup.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await startup

    def next_fire_times(self) -> dict[str, Any]:
        if self._aps is None:
            return {}
        return {job.id: job.next_run_time for job in self._aps.get_jobs()}
