"""A request limit shared by every process of the fleet: the LLM's requests a minute, and a
platform's limit on one kind of call (:mod:`memory_core.fleet.pacing`).

A sliding-window log in Redis, split into allowances: the LLM's limit is divided between up
to :data:`RATE_BUCKETS` buckets of the key schema (spread over a cluster's shards), each a
sliding window of its own holding at most its share; a platform's limit, small and per
workspace or channel, is one log on one key. A request takes room in the first bucket that
has it, trying them in turn from a random one. No window of ``window_s`` seconds ever holds
more than ``limit`` admitted requests in all, whichever process sent them (the shares add up
to the limit exactly). The error is on the safe side only: a request waits when every bucket
it tried was full at the moment it tried, so under contention the fleet may admit a little
less than the limit, never more. Waiting uses real time (it is the provider's clock that
counts), not the injected clock.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from typing import Any

from memory_core.errors import StoreUnavailable
from memory_core.store.keys import KeySchema
from memory_core.store.ratelimit import RateLog

RATE_BUCKETS = 16  # evenly spaced over the key schema's buckets


class FleetRateLimiter:
    def __init__(
        self,
        client: Any,
        keys: KeySchema,
        *,
        limit: int,
        window_s: float = 60.0,
        key: str | None = None,
    ) -> None:
        """The LLM's limit over the key schema's buckets, or (``key``) one log on that key."""
        if limit < 1:
            raise ValueError("limit must be at least 1")
        self.log = RateLog(client)
        self.limit = limit
        if key is not None:
            self.keys = [key]
        else:
            n = min(RATE_BUCKETS, limit, keys.buckets)
            spread = keys.buckets // n
            self.keys = [keys.llm_rate(i * spread) for i in range(n)]
        n = len(self.keys)
        # Shares of the limit that add up to it: the first limit % n buckets take one more.
        self.shares = [limit // n + (1 if i < limit % n else 0) for i in range(n)]
        self.window_ms = int(window_s * 1000)
        # The provider counts requests when they arrive, a little after we admit them, and
        # not all arrive equally late: count our window a little longer to stay under theirs.
        self.margin_ms = min(500, self.window_ms // 5)
        self.waited_s = 0.0

    async def acquire(self) -> None:
        """Wait until this process may send one more request."""
        await self._acquire(max_wait_s=None)

    async def acquire_within(self, max_wait_s: float) -> bool:
        """Wait, at most ``max_wait_s``, until this process may send one more request:
        False when that would take longer (then nothing was taken)."""
        return await self._acquire(max_wait_s=max_wait_s)

    async def _acquire(self, *, max_wait_s: float | None) -> bool:
        member = secrets.token_hex(8)
        started = time.monotonic()
        while True:
            wait_ms = await self._try_buckets(member)
            if wait_ms <= 0:
                return True
            # A little jitter so waiting processes do not all retry at the same instant.
            delay = wait_ms / 1000 + (secrets.randbelow(50) / 1000)
            if max_wait_s is not None and time.monotonic() - started + delay > max_wait_s:
                return False
            self.waited_s += delay
            await asyncio.sleep(delay)

    async def try_acquire(self) -> bool:
        """Admit one more request if there is room now (never waits)."""
        return await self._try_buckets(secrets.token_hex(8)) <= 0

    async def _try_buckets(self, member: str) -> int:
        """0 once a bucket admitted the request, else the shortest wait any bucket named."""
        start = secrets.randbelow(len(self.keys))
        shortest: int | None = None
        down: StoreUnavailable | None = None
        for step in range(len(self.keys)):
            i = (start + step) % len(self.keys)
            try:
                wait_ms = await self.log.admit(
                    self.keys[i],
                    now_ms=int(time.time() * 1000),
                    window_ms=self.window_ms + self.margin_ms,
                    limit=self.shares[i],
                    member=member,
                )
            except StoreUnavailable as exc:
                # A cluster shard that is down holds some shares: the others still admit
                # (the fleet then stays under the limit by those shares).
                down = exc
                continue
            if wait_ms <= 0:
                return 0
            shortest = wait_ms if shortest is None else min(shortest, wait_ms)
        if shortest is None and down is not None:
            raise down
        return shortest or 1
