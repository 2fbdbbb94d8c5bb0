"""Maintenance's fleet lock on a scope: taken with the state in one round trip (or taken
over from a holder that is provably gone), renewed every third of its time while the work
goes on, released whatever the work raised. Correctness never depends on it (every write is a
compare-and-set); it only saves duplicate LLM calls."""

from __future__ import annotations

import asyncio
import logging

from memory_core.errors import StoreError
from memory_core.store.repo import MemoryRepo
from memory_core.tiers.steps import Known, MaintenanceReport

# maintenance's own logger: its lines keep one name whichever part writes them
log = logging.getLogger("memory_core.tiers.maintenance")


class MaintenanceLock:
    def __init__(self, *, repo: MemoryRepo, ttl_ms: int) -> None:
        self.repo = repo
        # Renewed every third of itself while the work goes on, so a slow LLM call keeps it,
        # and a worker that dies delays the scope's maintenance by at most this much.
        self.ttl_ms = ttl_ms

    async def take(self, scope: str, report: MaintenanceReport, known: Known) -> str:
        """The lock's token ("" when another worker holds it: the report says who); the
        state read with it goes into ``known``."""
        claim = await self.repo.steps.lock_and_state(scope, self.ttl_ms)
        if claim.token is None:
            report.skipped = True
            report.held_by, report.held_until_ms = claim.holder, claim.expires_ms
            return ""
        if claim.taken_from is not None:
            log.warning(
                "took over the maintenance lock of %s from pid %d on %s: it is gone",
                scope,
                claim.taken_from.pid,
                claim.taken_from.host,
            )
        known.state = claim.state
        return claim.token

    async def keep(self, scope: str, token: str) -> None:
        """Renew the lock until cancelled. A renewal Redis refuses is logged and tried again
        on the next beat: it must never end the work nor hide how the work ended."""
        while True:
            await asyncio.sleep(self.ttl_ms / 3000)
            try:
                held = await self.repo.steps.renew_lock(scope, token, self.ttl_ms)
            except StoreError as exc:
                log.warning("%s; trying again, its writes stay safe meanwhile", exc)
                continue
            if not held:
                log.warning("lost the maintenance lock of %s; its writes stay safe", scope)
                return

    async def release(self, scope: str, token: str, keeper: asyncio.Task[None] | None) -> None:
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
                await self.repo.steps.unlock(scope, token)
            except StoreError as exc:
                log.warning("%s", exc)
