"""The shared rate limit's Redis side: sliding-window logs of admitted requests, one sorted
set per key of the key schema's ``llm_rate`` buckets. How the limit is split over them and
how long to wait is :mod:`memory_core.fleet.ratelimit`'s."""

from __future__ import annotations

from typing import Any

from memory_core.store.redis_errors import translates_redis_errors
from memory_core.store.scripts import run_script


@translates_redis_errors
class RateLog:
    def __init__(self, client: Any) -> None:
        self.client = client

    async def admit(self, key: str, *, now_ms: int, window_ms: int, limit: int, member: str) -> int:
        """Admit one request into the log at ``key`` if fewer than ``limit`` were admitted
        in the last ``window_ms``: 0, else how many ms to wait (one atomic script)."""
        return int(
            await run_script(self.client, "rate_acquire", [key], [now_ms, window_ms, limit, member])
        )
