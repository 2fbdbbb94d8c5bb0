"""``memorybot bench recall``: recall's query latency and memory as a scope grows, or over
many scopes, on the configured store under a private key prefix (deleted afterwards).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import gc
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from config.settings import Settings
from memory_core.bootstrap import build_core
from memory_core.llm.client import OfflineLLM
from memory_core.recall.embedding import DIMENSIONS
from memorybot_bench.harness import WORDS, percentile, private_settings


class LoopStallMeter:
    """The longest the event loop could not run: a ticker asks to wake every TICK seconds
    and notes how late it woke. Used around index builds and queries."""

    TICK = 0.002

    def __init__(self) -> None:
        self.max_ms = 0.0
        self._task: asyncio.Task[None] | None = None

    async def _tick(self) -> None:
        while True:
            t0 = time.perf_counter()
            await asyncio.sleep(self.TICK)
            late = (time.perf_counter() - t0 - self.TICK) * 1000
            self.max_ms = max(self.max_ms, late)

    async def __aenter__(self) -> LoopStallMeter:
        self._task = asyncio.create_task(self._tick())
        await asyncio.sleep(0)  # the ticker starts before what it measures
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task


def _random_vectors(rng: np.random.Generator, n: int) -> list[str]:
    """Stored vectors as recall stores them (unit length, float16, base64): the bench
    scopes' messages have theirs in Redis, as a live scope's would. Made ``n`` at a time:
    a million of them one by one took longer than the index they fill."""
    vecs = rng.standard_normal((n, DIMENSIONS)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    rows = vecs.astype(np.float16)
    return [base64.b64encode(row.tobytes()).decode("ascii") for row in rows]


def _rss_bytes(field: str = "VmRSS") -> int:
    """The process's resident memory (``VmHWM``: its peak), from /proc (0 elsewhere)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _reset_peak_rss() -> bool:
    """Start the peak (``VmHWM``) again from now (Linux 4.0+): each size's peak is its own."""
    try:
        with open("/proc/self/clear_refs", "w") as refs:
            refs.write("5")
    except OSError:
        return False
    return True


async def _fill_scopes(
    core: Any,
    names: list[str],
    size: int,
    *,
    vectors: bool,
    rng: random.Random,
    vector_rng: np.random.Generator,
    vocabulary: list[str],
) -> None:
    """``size`` messages spread over the ``names`` scopes (round robin), each with its
    stored vector when recall embeds."""
    start_ms = 1_700_000_000_000
    for batch in range(0, size, 2000):
        count = min(size, batch + 2000) - batch
        blobs = _random_vectors(vector_rng, count) if vectors else []
        pipe = core.store.client.pipeline(transaction=False)
        for n, i in enumerate(range(batch, batch + count)):
            keys = core.store.keys.scope(names[i % len(names)])
            text = " ".join(rng.choice(vocabulary) for _ in range(rng.randint(5, 30)))
            fields: dict[Any, Any] = {
                "r": "user",
                "a": f"user{i % 9}",
                "u": str(i % 9),
                "t": text,
                "ts": str(start_ms + i * 1000),
                "p": "",
                "k": "20",
            }
            entry_id = f"{start_ms + i * 1000}-0"
            pipe.xadd(keys.log, fields, id=entry_id)
            if vectors:
                pipe.hset(keys.vectors, entry_id, blobs[n])
        await pipe.execute()


@dataclass
class RecallRun:
    """One recall benchmark on a core: the scopes it fills, the queries it asks, and the
    figures of each size."""

    core: Any
    recall: Any  # the core's recall
    queries: int
    scopes: int
    limit_mb: int
    progress: Callable[[int], None] | None
    rng: random.Random = field(default_factory=lambda: random.Random(13))
    vector_rng: np.random.Generator = field(default_factory=lambda: np.random.default_rng(13))
    # ~1,000 distinct words
    vocabulary: list[str] = field(
        default_factory=lambda: [f"{w}{i}" for w in WORDS for i in range(40)]
    )
    done: int = 0
    model_rss: int = 0

    async def fill(self, names: list[str], size: int) -> None:
        await _fill_scopes(
            self.core,
            names,
            size,
            vectors=self.recall.embedder is not None,
            rng=self.rng,
            vector_rng=self.vector_rng,
            vocabulary=self.vocabulary,
        )

    async def warm_process(self) -> None:
        """The model loaded, then a process that has answered before: one scope built (in a
        worker thread, whose BLAS and stack come once per thread) and searched, then dropped,
        so the memory measured after is the indexes', not what the first search of a process
        sets up."""
        if self.recall.embedder is not None:
            await self.recall.embedder(["warm the model up"])  # a process loads it once
        self.model_rss = _rss_bytes()
        await self.fill(["bench:warmup"], 3000)
        await self.recall.search("bench:warmup", "warm up", limit=200)
        self.recall.forget("bench:warmup")

    async def cold(self, names: list[str], ask: str, stalls: Stalls) -> float:
        """Each scope's index built and searched once: the mean time of a first query."""
        cold: list[float] = []
        for name in names:
            t0 = time.perf_counter()
            async with stalls.build:
                await self.recall.warm(name)
            async with stalls.query:
                await self.recall.search(name, ask, limit=200)
            cold.append((time.perf_counter() - t0) * 1000)
        return statistics.fmean(cold)

    async def warm(self, scope: str, asks: list[str], stalls: Stalls) -> list[float]:
        """The queries on a built index, each timed."""
        times: list[float] = []
        async with stalls.query:
            for ask in asks:
                t0 = time.perf_counter()
                await self.recall.search(scope, ask, limit=200)
                times.append((time.perf_counter() - t0) * 1000)
                self.done += 1
                if self.progress is not None:
                    self.progress(self.done)
        return times

    async def rebuild(self, scope: str, ask: str, stalls: Stalls) -> float:
        """A forget elsewhere (one message deleted, the epoch moved): the rebuild, timed."""
        first = await self.core.repo.reads.entries_after(scope, "", limit=1)
        if first:
            await self.core.repo.writes.delete_entries(scope, [first[0].id])
        await self.core.repo.writes.bump_epoch(scope)
        t0 = time.perf_counter()
        async with stalls.build:
            await self.recall.warm(scope)
        async with stalls.query:
            await self.recall.search(scope, ask, limit=200)
        return (time.perf_counter() - t0) * 1000

    async def size(self, size: int) -> dict[str, Any]:
        """``size`` messages over the scopes: built, queried, rebuilt; then let go."""
        names = [f"bench:recall{size}s{j}" for j in range(min(self.scopes, size))]
        await self.fill(names, size)
        scope = names[-1]
        asks = [
            " ".join(self.rng.choice(self.vocabulary) for _ in range(self.rng.randint(3, 8)))
            for _ in range(self.queries)
        ]
        gc.collect()
        before = self.recall.cache_stats
        evictions, builds = before.evictions, before.builds
        memory = Memory(before=_rss_bytes(), peak_known=_reset_peak_rss())
        # The loop's longest stall apart while indexes are built (and their vectors
        # loaded), without the rankings, and while the queries run: a ranking holds the
        # loop for its length (~15 ms at 100k messages in a scope, ~100 at a million).
        stalls = Stalls()
        cold_ms = await self.cold(names, asks[0], stalls)
        cached = sum(len(index.docs) for index in self.recall._indexes.values())
        index_bytes = self.recall.cache_stats.bytes
        memory.built = _rss_bytes()
        times = await self.warm(scope, asks, stalls)
        rebuild_ms = await self.rebuild(scope, asks[0], stalls)
        memory.peak = _rss_bytes("VmHWM") if memory.peak_known else 0
        stats = self.recall.cache_stats
        for name in names:  # the next size starts from an empty cache
            self.recall.forget(name)
        gc.collect()
        return {
            "messages": size,
            "scopes": len(names),
            "first_query_ms": round(cold_ms, 2),
            "p50_ms": round(percentile(times, 0.5), 3),
            "p99_ms": round(percentile(times, 0.99), 3),
            "rebuild_ms": round(rebuild_ms, 2),
            **stalls.figures(),
            # Counted by the indexes themselves, over the messages still cached.
            "messages_cached": cached,
            "index_mb": round(index_bytes / 2**20, 1),
            "index_bytes_per_message": round(index_bytes / max(cached, 1)),
            "cache_mb": self.limit_mb,
            "evictions": stats.evictions - evictions,
            "builds": stats.builds - builds,
            **memory.figures(self.model_rss, cached, self.limit_mb),
        }


@dataclass
class Stalls:
    """The event loop's longest stalls, apart while indexes are built and while queried."""

    build: LoopStallMeter = field(default_factory=LoopStallMeter)
    query: LoopStallMeter = field(default_factory=LoopStallMeter)

    def figures(self) -> dict[str, float]:
        return {
            "loop_stall_max_ms": round(max(self.build.max_ms, self.query.max_ms), 2),
            "loop_stall_build_ms": round(self.build.max_ms, 2),
            "loop_stall_query_ms": round(self.query.max_ms, 2),
        }


@dataclass
class Memory:
    """The process's resident memory around one size, in bytes."""

    before: int  # before its first query
    peak_known: bool  # whether the peak could be started again for it
    built: int = 0  # its indexes built
    peak: int = 0  # the peak from before its first query on (0: unknown)

    def figures(self, model_rss: int, cached: int, limit_mb: int) -> dict[str, Any]:
        before, built, peak = self.before, self.built, self.peak
        return {
            # The process: after the model, before this size's first query, and at
            # its peak from then on (building, querying, rebuilding).
            "model_rss_mb": round(model_rss / 2**20, 1),
            "rss_before_mb": round(before / 2**20, 1),
            "rss_built_mb": round(built / 2**20, 1),
            "rss_growth_bytes_per_message": round((built - before) / max(cached, 1)),
            "peak_rss_mb": round(peak / 2**20, 1) if peak else None,
            "peak_growth_bytes_per_message": round((peak - before) / max(cached, 1))
            if peak
            else None,
            # Whether the process grew no more than the cache's bound from before the
            # first query to its peak (a single scope bigger than the bound is kept
            # whole: the one being searched is never evicted).
            "peak_within_cache": (peak - before) <= limit_mb * 2**20 if peak else None,
        }


async def bench_recall(
    settings: Settings,
    *,
    sizes: list[int],
    queries: int = 100,
    scopes: int = 1,
    cache_mb: int | None = None,
    progress: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Recall query latency and memory at several sizes: the first query (which builds the
    in-process index from Redis, words and stored vectors), warm queries (one sync round
    trip, the query's embedding, the ranking), and a rebuild after a forget elsewhere moved
    the epoch. ``loop_stall_max_ms``: the longest the event loop could not run meanwhile.

    ``scopes``: each size's messages spread over that many scopes, each searched once (its
    index built) before the warm queries, which go to the last one; past ``cache_mb``
    (``memory.recall_cache_mb``) the least recently searched are evicted. Memory: the
    indexes' own count of their bytes (what the cache is bounded by) per message indexed,
    and the process's resident memory before the first query and at its peak after."""
    memory = {"recall_cache_mb": cache_mb} if cache_mb is not None else {}
    run_settings = private_settings(settings, memory=memory)
    core = await build_core(run_settings, llm=OfflineLLM())
    recall = core.recall
    try:
        assert recall is not None
        run = RecallRun(
            core,
            recall,
            queries=queries,
            scopes=scopes,
            limit_mb=run_settings.memory.recall_cache_mb,
            progress=progress,
        )
        await run.warm_process()
        results = [await run.size(size) for size in sizes]
    finally:
        await core.discard()
    return {
        "store": core.store.description,
        "queries": queries,
        "embedder": getattr(recall.embedder, "name", "configured model")
        if recall.embedder is not None
        else "none (words only)",
        "sizes": results,
    }
