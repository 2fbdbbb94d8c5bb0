"""Processes that say every few seconds that they are alive, and what they hold now.

One Redis hash per kind of process: its name -> the JSON of its last status, with the time it
was written (``at``). Reading it back gives the live statuses and drops the entries of the
processes that stopped reporting (they died, or left without saying so), so the hash never
outgrows the fleet. The embedding workers (:mod:`memory_core.recall.worker`, their backlog and
lag) and the bot processes' recall indexes (:mod:`memory_core.fleet.metrics`, their memory)
report this way, for /metrics and the dashboard.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

from memory_core.store.redis_errors import translates_redis_errors


@translates_redis_errors
class Heartbeats:
    """The statuses under ``key``; one older than ``ttl_s`` is a process that is gone."""

    def __init__(self, client: Any, key: str, *, ttl_s: float) -> None:
        self.client = client
        self.key = key
        self.ttl_s = ttl_s

    async def beat(self, name: str, status: Mapping[str, float]) -> None:
        """``name`` is alive, and this is what it holds now."""
        entry = {**status, "at": round(time.time(), 3)}
        await self.client.hset(self.key, name, json.dumps(entry))

    async def live(self) -> list[dict[str, float]]:
        """The statuses written within ``ttl_s``; the others (and unreadable ones) are
        dropped."""
        raw: dict[str, str] = await self.client.hgetall(self.key)
        now = time.time()
        live: list[dict[str, float]] = []
        gone: list[str] = []
        for name, blob in raw.items():
            try:
                status = json.loads(blob)
                fresh = now - float(status["at"]) < self.ttl_s
            except (ValueError, KeyError, TypeError):
                fresh = False
            if fresh:
                live.append(status)
            else:
                gone.append(name)
        if gone:
            await self.client.hdel(self.key, *gone)
        return live

    async def leave(self, name: str) -> None:
        """``name`` stops (its entry goes at once, not after ``ttl_s``)."""
        await self.client.hdel(self.key, name)
