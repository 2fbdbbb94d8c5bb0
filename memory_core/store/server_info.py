"""What the server says about itself, for `memorybot doctor` and the dashboard's health page:
how fast it answers, which version, how much memory it holds (a cluster's nodes added up)."""

from __future__ import annotations

import time
from typing import Any

from memory_core.store.redis_errors import translates_redis_errors


@translates_redis_errors
class ServerInfo:
    def __init__(self, client: Any) -> None:
        self.client = client

    async def ping_ms(self) -> float:
        """One PING's round trip, in milliseconds."""
        started = time.perf_counter()
        await self.client.ping()
        return (time.perf_counter() - started) * 1000

    async def version(self) -> str:
        info = await self.client.info("server")
        return str(info.get("redis_version", "?")) if isinstance(info, dict) else "?"

    async def memory(self) -> tuple[int | None, int | None, int | None]:
        """used_memory, its peak and maxmemory; on a cluster, summed over the nodes; (None,
        None, None) when the server does not say."""
        try:
            info = await self.client.info("memory")
        except NotImplementedError:
            return None, None, None
        nodes = (
            [info] if "used_memory" in info else [v for v in info.values() if isinstance(v, dict)]
        )
        if not nodes:
            return None, None, None

        def total(name: str) -> int | None:
            values = [int(n[name]) for n in nodes if name in n]
            return sum(values) if values else None

        return total("used_memory"), total("used_memory_peak"), total("maxmemory") or None
