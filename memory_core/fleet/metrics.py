"""Fleet-wide metrics: each process counts in memory and adds its counts to per-minute
hashes in Redis every few seconds, so the dashboard and /metrics see the whole fleet without
a single extra command on the message path. Each process writes to its own bucket of the key
schema (a random one), so on a Redis Cluster the flushes of many processes spread over the
shards; readers add the buckets up.

Counters: messages stored; replies by kind; maintenance work (compactions, days closed,
weeks, tier refreshes, summary failures); summaries written by the model vs the extractive
stand-in; LLM calls, failures, tokens and time by purpose; recall indexes built and
evicted, and the time the builds took. Beside the counters, each process reports what its
recall indexes hold now (bytes, scopes: gauges, a heartbeat per process in
:class:`~memory_core.store.heartbeats.Heartbeats`, read back by :func:`read_recall_caches`).
The counters' hashes are :class:`~memory_core.store.metrics.MetricsStore`'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from memory_core.llm.client import LLMStats
from memory_core.recall.sync import CacheStats
from memory_core.store.heartbeats import Heartbeats
from memory_core.store.keys import KeySchema
from memory_core.store.metrics import MetricsStore
from memory_core.tiers.maintenance import MaintenanceReport
from memory_core.tiers.summarize import SummaryStats

log = logging.getLogger(__name__)


def minute_of(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y%m%d%H%M")


class Metrics:
    def __init__(
        self,
        client: Any,
        keys: KeySchema,
        *,
        llm_stats: Callable[[], LLMStats],
        summary_stats: Callable[[], SummaryStats],
        recall_stats: Callable[[], CacheStats] | None = None,
        recall_limit_bytes: int = 0,
    ) -> None:
        self.store = MetricsStore(client, keys)
        self.recall_caches = recall_caches(client, keys)
        self.keys = keys
        self.bucket = secrets.randbelow(keys.metric_buckets)
        self.process = secrets.token_hex(6)  # this process's entry among the recall caches
        self._llm_stats = llm_stats
        self._summary_stats = summary_stats
        self._recall_stats = recall_stats
        self._recall_limit_bytes = recall_limit_bytes
        self.counts: Counter[str] = Counter()
        self._flushed: Counter[str] = Counter()
        self._task: asyncio.Task[None] | None = None

    # -- counting (in memory, free) ----------------------------------------------------
    def incr(self, name: str, n: int = 1) -> None:
        self.counts[name] += n

    def maintenance(self, report: MaintenanceReport) -> None:
        self.counts["compactions"] += report.compactions
        self.counts["days_closed"] += report.days_closed
        self.counts["weeks"] += report.weeks
        self.counts["refreshes"] += report.refreshes
        self.counts["summary_failures"] += report.failures

    def snapshot(self) -> Counter[str]:
        """Everything counted so far by this process, LLM and summary counters included."""
        total = Counter(self.counts)
        for purpose, stats in self._llm_stats().by_purpose.items():
            total[f"llm:{purpose}:calls"] += stats.calls
            total[f"llm:{purpose}:failures"] += stats.failures
            total[f"llm:{purpose}:prompt_tokens"] += stats.prompt_tokens
            total[f"llm:{purpose}:completion_tokens"] += stats.completion_tokens
            total[f"llm:{purpose}:ms"] += int(stats.seconds * 1000)
        summaries = self._summary_stats()
        total["summaries_llm"] += summaries.llm
        total["summaries_fallback"] += summaries.fallbacks + summaries.forced
        total["summaries_offline"] += summaries.offline
        if self._recall_stats is not None:
            recall = self._recall_stats()
            total["recall_evictions"] += recall.evictions
            total["recall_builds"] += recall.builds
            total["recall_build_ms"] += int(recall.build_seconds * 1000)
        return total

    def keep_to_itself(self) -> None:
        """Share nothing counted so far, nor the recall indexes' status, from now on: a run
        that must leave Redis as it found it (``ask --dry-run``) still builds an index."""
        self._flushed = self.snapshot()
        self._recall_stats = None

    # -- sharing (Redis, every few seconds) --------------------------------------------
    async def flush(self, now: datetime | None = None) -> int:
        """Add what was counted since the last flush to this minute's bucket, and report
        what this process's recall indexes hold now."""
        recall = self._recall_stats() if self._recall_stats is not None else None
        if recall is not None and recall.builds:  # (a process that never searched: nothing)
            status = {
                "bytes": recall.bytes,
                "scopes": recall.scopes,
                "limit_bytes": self._recall_limit_bytes,
            }
            await self.recall_caches.beat(self.process, status)
        current = self.snapshot()
        delta = current - self._flushed
        if not delta:
            return 0
        await self.store.add(minute_of(now or datetime.now(UTC)), self.bucket, delta)
        self._flushed = current
        return len(delta)

    def start(self, interval_s: float = 10.0) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._loop(interval_s))

    async def _loop(self, interval_s: float) -> None:
        while True:
            await asyncio.sleep(interval_s)
            try:
                await self.flush()
            except Exception:  # logged; metrics never take the bot down
                log.exception("could not share metrics")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        with contextlib.suppress(Exception):
            await self.flush()


async def read_minutes(
    store: MetricsStore, *, minutes: int, now: datetime | None = None
) -> list[tuple[str, dict[str, int]]]:
    """The fleet's per-minute counters for the last ``minutes`` minutes, oldest first."""
    end = (now or datetime.now(UTC)).astimezone(UTC)
    stamps = [minute_of(end - timedelta(minutes=m)) for m in range(minutes - 1, -1, -1)]
    return list(zip(stamps, await store.minutes(stamps), strict=True))


RECALL_CACHE_TTL_S = 60.0  # a process silent this long (it flushes every 10 s) is gone


def recall_caches(client: Any, keys: KeySchema) -> Heartbeats:
    """The bot processes' reports of their recall indexes."""
    return Heartbeats(client, keys.recall_caches, ttl_s=RECALL_CACHE_TTL_S)


async def read_recall_caches(client: Any, keys: KeySchema) -> dict[str, float]:
    """The fleet's recall indexes now, added up over the live processes: how many report,
    the bytes their indexes hold, the scopes cached, and their limits (each process's
    ``memory.recall_cache_mb``). A process that stopped reporting is dropped."""
    live = await recall_caches(client, keys).live()
    return {
        "processes": len(live),
        "bytes": sum(float(s.get("bytes", 0)) for s in live),
        "scopes": sum(float(s.get("scopes", 0)) for s in live),
        "limit_bytes": sum(float(s.get("limit_bytes", 0)) for s in live),
    }


def totals(rows: list[tuple[str, dict[str, int]]]) -> Counter[str]:
    out: Counter[str] = Counter()
    for _, row in rows:
        out.update(row)
    return out
