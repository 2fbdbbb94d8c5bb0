"""A requests-per-minute limit for the LLM, shared by every process of the fleet.

A sliding-window log in Redis: no window of ``window_s`` seconds ever holds more than
``limit`` admitted requests, whichever process sent them. Waiting uses real time (it is the
provider's clock that counts), not the injected clock.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from typing import Any

from memory_core.store.redis_errors import translates_redis_errors
from memory_core.store.scripts import run_script


@translates_redis_errors
class FleetRateLimiter:
    def __init__(self, client: Any, key: str, *, limit: int, window_s: float = 60.0) -> None:
        if limit < 1:
            raise ValueError("limit must be at least 1")
        self.client = client
        self.key = key
        self.limit = limit
        self.window_ms = int(window_s * 1000)
        # The provider counts requests when they arrive, a little after we admit them, and
        # not all arrive equally late: count our window a little longer to stay under theirs.
        self.margin_ms = min(500, self.window_ms // 5)
        self.waited_s = 0.0

    async def acquire(self) -> None:
        """Wait until this process may send one more request."""
        member = secrets.token_hex(8)
        while True:
            now = int(time.time() * 1000)
            wait_ms = int(
                await run_script(
                    self.client,
                    "rate_acquire",
                    [self.key],
                    [now, self.window_ms, self.limit, member],
                )
            )
            if wait_ms <= 0:
                return
            # A little jitter so waiting processes do not all retry at the same instant.
            delay = wait_ms / 1000 + (secrets.randbelow(50) / 1000)
            self.waited_s += delay
            await asyncio.sleep(delay)
