"""Platform calls paced fleet-wide: each of a platform's limits (a Slack method in a
workspace, posts in one channel, a Discord route per channel) is an :class:`Allowance`, and
every process of the fleet takes its calls from the same sliding window in Redis (the
:class:`~memory_core.fleet.ratelimit.FleetRateLimiter` on one key), so that however many
answers are written at once, and by however many processes, the platform never has to
refuse one.

Both doors pace an answer by one rule (:meth:`Pacing.room`): a streamed answer's next update
goes only when there is room, taken from a share that leaves :data:`KEPT_FOR_LAST_WORDS`
calls for the others (:meth:`Allowance.leaving`), and is skipped otherwise; an answer's last
words wait for room, up to :data:`LAST_WORDS_WAIT_S`, then go all the same. Which limits a
platform has, and their numbers, are the front door's; this module only counts.

Redis away: the call goes (logged once per process); the platform's own answer to too many
calls (a 429 its client waits out) is then the guard.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from memory_core.errors import StoreError
from memory_core.fleet.ratelimit import FleetRateLimiter
from memory_core.store.keys import KeySchema

log = logging.getLogger(__name__)

KEPT_FOR_LAST_WORDS = 2  # of an allowance's calls, always left for answers' last words
LAST_WORDS_WAIT_S = 30.0  # the longest an answer's last words wait for room


@dataclass(frozen=True, slots=True)
class Allowance:
    """At most ``calls`` in any ``window_s`` seconds. A platform's per-minute tier can be
    held as a tenth of it every six seconds: the same rate, without spending a whole minute's
    calls in its first seconds and starving the rest of it."""

    calls: int
    window_s: float

    def __post_init__(self) -> None:
        if self.calls < 1 or self.window_s <= 0:
            raise ValueError("an allowance is at least one call in a positive window")

    def leaving(self, kept: int) -> Allowance:
        """The share of calls that may go when they like (a draft's update): the same
        window, with ``kept`` of its calls always left for those that must go (an answer's
        last words), at least one."""
        return Allowance(calls=max(1, self.calls - kept), window_s=self.window_s)


class Pacing:
    """The fleet's allowances, one Redis key each (:meth:`KeySchema.platform_rate`)."""

    def __init__(self, client: Any, keys: KeySchema) -> None:
        self.client = client
        self.keys = keys
        self._warned = False

    def _limiter(self, name: str, allowance: Allowance) -> FleetRateLimiter:
        return FleetRateLimiter(
            self.client,
            self.keys,
            limit=allowance.calls,
            window_s=allowance.window_s,
            key=self.keys.platform_rate(name),
        )

    async def room(self, name: str, allowance: Allowance, *, wait: bool) -> bool:
        """Whether one more call of ``name`` may go (it is then counted), by the rule both
        doors answer by: ``wait`` (an answer's last words): wait for room, then True, even
        past :data:`LAST_WORDS_WAIT_S`; else (a draft's update): only if the share that
        leaves :data:`KEPT_FOR_LAST_WORDS` calls has room now."""
        if wait:
            await self.wait(name, allowance, max_wait_s=LAST_WORDS_WAIT_S)
            return True
        return await self.now(name, allowance.leaving(KEPT_FOR_LAST_WORDS))

    async def now(self, name: str, allowance: Allowance) -> bool:
        """Whether one more call of ``name`` may go now (it is then counted); never waits."""
        try:
            return await self._limiter(name, allowance).try_acquire()
        except StoreError as exc:
            self._unpaced(exc)
            return True

    async def wait(self, name: str, allowance: Allowance, *, max_wait_s: float) -> bool:
        """Wait until one more call of ``name`` may go (it is then counted): False when that
        would take longer than ``max_wait_s`` (nothing counted; the caller decides)."""
        try:
            return await self._limiter(name, allowance).acquire_within(max_wait_s)
        except StoreError as exc:
            self._unpaced(exc)
            return True

    def _unpaced(self, exc: StoreError) -> None:
        if not self._warned:
            self._warned = True
            log.warning("platform calls go unpaced while Redis is away: %s", exc)
