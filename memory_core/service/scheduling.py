"""When a scope's maintenance runs (what it does is :mod:`memory_core.tiers.maintenance`'s).

A message that makes maintenance due hands the scope to a :class:`MaintenanceScheduler`: in
the background, one run at a time per scope in this process (a scope due again meanwhile
runs once more after it), at most ``llm.concurrency`` at once; or at once, awaited, where no
background is wanted (replay, one-shot commands). The fleet's lock keeps it one at a time
per scope across processes. A ``manual`` scheduler never runs one by itself: a test drives
maintenance step by step by calling ``maintain``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from memory_core import calendar
from memory_core.models import IngestResult
from memory_core.tiers.maintenance import Maintainer, MaintenanceReport

if TYPE_CHECKING:
    from memory_core.fleet.metrics import Metrics

log = logging.getLogger(__name__)

KEPT_REPORTS = 1000


class MaintenanceScheduler:
    def __init__(
        self,
        maintainer: Maintainer,
        *,
        zones: calendar.ZoneFallback,
        concurrency: int,
        background: bool = True,
        metrics: Metrics | None = None,
    ) -> None:
        self.maintainer = maintainer
        self.zones = zones
        self.background = background
        self.manual = False  # True: only ``maintain`` runs it (a test drives each step)
        self.metrics = metrics
        self.reports: list[MaintenanceReport] = []
        self.on_report: Callable[[MaintenanceReport], None] | None = None
        # False: maintenance runs without the fleet lock (replay; correctness never depends
        # on the lock, it only saves duplicate LLM calls).
        self.lock = True
        self._running: dict[str, asyncio.Task[None]] = {}
        self._due_again: set[str] = set()
        self._slots = asyncio.Semaphore(max(1, concurrency))

    def due_after(self, scope: str, result: IngestResult, ts_ms: int) -> bool:
        """Whether the message just stored (at ``ts_ms``, ``result`` the store's answer)
        makes ``scope``'s maintenance due: the first message of a new local day (lazy
        rollover), or enough unsummarised text."""
        tz = self.zones.usable(scope, result.tz)
        if tz != (result.tz or self.zones.default):
            return False  # its maintenance would only report the bad zone: the sweep does
        if result.state_day and calendar.local_day_ms(ts_ms, tz) > result.state_day:
            return True
        if result.retry_at > ts_ms:
            return False
        return self.maintainer.compaction_due(result.unsum_tokens, result.unsum_count)

    async def schedule(self, scope: str) -> None:
        """Run maintenance for ``scope``: in the background, or now (never when manual)."""
        if self.manual:
            return
        if not self.background:
            await self.maintain(scope)
            return
        if scope in self._running:
            self._due_again.add(scope)
            return
        self._running[scope] = asyncio.create_task(self._in_background(scope))

    async def _in_background(self, scope: str) -> None:
        try:
            while True:
                self._due_again.discard(scope)
                async with self._slots:
                    await self.maintain(scope)
                if scope not in self._due_again:
                    break
        except Exception:
            log.exception("maintenance of %s failed", scope)
        finally:
            self._running.pop(scope, None)

    async def maintain(self, scope: str) -> MaintenanceReport:
        """Maintain ``scope`` now; its report is kept (the last KEPT_REPORTS) and counted."""
        report = await self.maintainer.run(scope, lock=self.lock)
        self.reports.append(report)
        if self.metrics is not None:
            self.metrics.maintenance(report)
        if len(self.reports) > KEPT_REPORTS:
            del self.reports[: KEPT_REPORTS // 2]
        if self.on_report is not None:
            self.on_report(report)
        return report

    async def drain(self) -> None:
        """Wait for the background runs (shutdown, the end of a replay)."""
        while self._running:
            await asyncio.gather(*list(self._running.values()), return_exceptions=True)
