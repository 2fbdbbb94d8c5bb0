"""The fleet metrics' Redis side: per-minute hashes of counters, one per metric bucket of the
key schema (each process adds to its own, so a cluster spreads the writes; readers add the
buckets up). What is counted is :mod:`memory_core.fleet.metrics`'s; the processes' gauges
(their recall indexes now) are heartbeats (:mod:`memory_core.store.heartbeats`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from memory_core.store.keys import KeySchema
from memory_core.store.redis_errors import translates_redis_errors

BUCKET_TTL_S = 3 * 86400  # how long a minute's counters stay


@translates_redis_errors
class MetricsStore:
    def __init__(self, client: Any, keys: KeySchema) -> None:
        self.client = client
        self.keys = keys

    async def add(self, minute: str, bucket: int, counts: Mapping[str, int]) -> None:
        """Add ``counts`` to ``minute``'s counters in ``bucket`` (one round trip)."""
        key = self.keys.metrics(minute, bucket)
        pipe = self.client.pipeline(transaction=False)
        for name, value in counts.items():
            pipe.hincrby(key, name, value)
        pipe.expire(key, BUCKET_TTL_S)
        await pipe.execute()

    async def minutes(self, stamps: Sequence[str]) -> list[dict[str, int]]:
        """Each minute's counters, every bucket added up, in the order given."""
        n = self.keys.metric_buckets
        pipe = self.client.pipeline(transaction=False)
        for stamp in stamps:
            for bucket in range(n):
                pipe.hgetall(self.keys.metrics(stamp, bucket))
        rows = await pipe.execute()
        out: list[dict[str, int]] = []
        for i in range(len(stamps)):
            minute: Counter[str] = Counter()
            for row in rows[i * n : (i + 1) * n]:
                minute.update({k: int(v) for k, v in row.items()})
            out.append(dict(minute))
        return out
