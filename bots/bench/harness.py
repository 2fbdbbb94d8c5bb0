"""``memorybot bench ingest``: the pipeline's own time per message, without the LLM.

Runs against the configured store under a private key prefix (deleted afterwards), so it
never touches real memory. Reports p50/p99 of ``ingest`` (what every message costs), of
prompt assembly (what a reply costs before the LLM), throughput, and the median Redis PING
round trip measured in the same run, for scale.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import gc
import random
import secrets
import statistics
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import numpy as np

from config.settings import Settings
from memory_core.bootstrap import build_core
from memory_core.clock import ManualClock
from memory_core.llm.client import OfflineLLM
from memory_core.models import IncomingMessage
from memory_core.recall.embedding import DIMENSIONS

WORDS = [
    "alice",
    "bob",
    "carol",
    "release",
    "friday",
    "deploy",
    "coffee",
    "tea",
    "meeting",
    "budget",
    "42",
    "tokyo",
    "osaka",
    "plan",
    "decided",
    "tomorrow",
    "review",
    "docs",
    "bug",
    "fix",
    "redis",
    "cache",
    "latency",
    "weekend",
    "trip",
    "photo",
    "music",
]


def private_settings(settings: Settings, **sections: dict[str, Any]) -> Settings:
    """``settings`` on a private key prefix (a throwaway core deletes its keys with
    ``Core.discard()``), with some sections' fields changed: benchmarks never touch memory."""
    updates: dict[str, Any] = {
        "store": settings.store.model_copy(update={"key_prefix": f"mbbench{secrets.token_hex(3)}"})
    }
    for name, fields in sections.items():
        updates[name] = getattr(settings, name).model_copy(update=fields)
    return settings.model_copy(update=updates)


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return 0.0
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def _text(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 30)))


async def bench_ingest(
    settings: Settings,
    *,
    scopes: int,
    messages: int,
    assemble_every: int = 10,
    progress: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Store ``messages`` one after another over ``scopes`` scopes, assembling a prompt every
    ``assemble_every``-th, with background embedding on as in production (the worker process
    of the local model, unless recall embeds otherwise). The PING it is compared with is
    measured first (redis-py's asyncio client, as the issue that set the target measured it),
    on a quiet connection with the worker idle, then one by the connection messages are
    stored by; another is sampled during the run. Embedding lag is sampled from the worker's
    own reports during the run, and its catch-up timed after the last message."""
    # No maintenance during the measurement: this times the pipeline, not summaries.
    run_settings = private_settings(settings, memory={"compact_trigger_tokens": 10**9})
    clock = ManualClock()
    core = await build_core(run_settings, clock=clock, llm=OfflineLLM())
    worker = core.pipeline.recall.worker if core.pipeline.recall is not None else None
    rng = random.Random(7)
    ingest_ms: list[float] = []
    assemble_ms: list[float] = []
    ping_ms: list[float] = []
    quiet_ms: list[float] = []
    lane_ping_ms: list[float] = []
    lag_s: list[float] = []
    scope_names = [f"bench:s{i}" for i in range(scopes)]
    try:
        if worker is not None:
            await worker.ready()  # its model loaded: not a cost of the run
        # The query embedder's model too, and connections and scripts.
        await core.pipeline.build_prompt(
            IncomingMessage(scope="bench:warm", text="warm up", author="u")
        )
        for _ in range(20):
            await core.store.client.ping()
        for _ in range(200):
            t0 = time.perf_counter()
            await core.store.client.ping()
            quiet_ms.append((time.perf_counter() - t0) * 1000)
        lane = core.store.lane  # the connection messages are stored by, on one server
        for _ in range(200 if lane is not None else 0):
            t0 = time.perf_counter()
            await lane.call("PING")  # type: ignore[union-attr]
            lane_ping_ms.append((time.perf_counter() - t0) * 1000)
        started = time.perf_counter()
        for i in range(messages):
            clock.advance(timedelta(seconds=1))
            scope = scope_names[i % scopes]
            msg = IncomingMessage(scope=scope, text=_text(rng), author=f"user{i % 7}")
            t0 = time.perf_counter()
            await core.pipeline.ingest(msg)
            ingest_ms.append((time.perf_counter() - t0) * 1000)
            if assemble_every and i % assemble_every == 0:
                t0 = time.perf_counter()
                await core.pipeline.build_prompt(msg)
                assemble_ms.append((time.perf_counter() - t0) * 1000)
            if i % 50 == 0:
                t0 = time.perf_counter()
                await core.store.client.ping()
                ping_ms.append((time.perf_counter() - t0) * 1000)
                if worker is not None and worker.status:
                    lag_s.append(float(worker.status.get("lag_s", 0.0)))
            if progress is not None:
                progress(i + 1)
        sent = time.perf_counter()
        elapsed = sent - started - sum(assemble_ms) / 1000 - sum(ping_ms) / 1000
        if core.pipeline.recall is not None:
            await core.pipeline.recall.drain()
        caught_up = time.perf_counter()
        embedded = worker.status.get("embedded", 0) if worker is not None else 0
        caught = core.store.lane.caught_spinning if core.store.lane is not None else 0
    finally:
        await core.discard()
    quiet = statistics.median(quiet_ms)
    return {
        "store": core.store.description,
        "scopes": scopes,
        "messages": messages,
        "p50_ms": round(_percentile(ingest_ms, 0.50), 4),
        "p99_ms": round(_percentile(ingest_ms, 0.99), 4),
        "mean_ms": round(statistics.fmean(ingest_ms), 4) if ingest_ms else 0.0,
        "msgs_per_s": round(messages / elapsed, 1) if elapsed > 0 else 0.0,
        "assemble_p50_ms": round(_percentile(assemble_ms, 0.50), 4),
        "assemble_p99_ms": round(_percentile(assemble_ms, 0.99), 4),
        "redis_ping_ms": round(quiet, 4),  # quiet: before the run, the worker idle
        "ping_during_run_ms": round(statistics.median(ping_ms), 4) if ping_ms else 0.0,
        "p50_over_ping": round(_percentile(ingest_ms, 0.5) / quiet, 2) if quiet > 0 else None,
        # The same, by the connection messages are stored by (hiredis, no pool): the round
        # trip itself, without redis-py's Python per command (which the PING above includes).
        "lane_ping_ms": round(statistics.median(lane_ping_ms), 4) if lane_ping_ms else None,
        # Messages whose reply the bot waited for on its CPU (FastLane.call's ``spin``).
        "caught_spinning": int(caught),
        "embedding": "worker process" if worker is not None else "none or in-process",
        "embedded": int(embedded),
        "embed_lag_p50_s": round(_percentile(lag_s, 0.50), 3),
        "embed_lag_max_s": round(max(lag_s, default=0.0), 3),
        "embed_catch_up_s": round(caught_up - sent, 3),
        # From the first message stored to the last one embedded.
        "embed_msgs_per_s": round(int(embedded) / (caught_up - started), 1) if embedded else 0.0,
    }


class LatencyLLM:
    """A stand-in model for benchmarks: answers well-formed summaries after a set latency.

    It lives here, not in the tests, because ``memorybot bench`` must run on an installed
    copy; it is never used outside benchmarks."""

    offline = False

    def __init__(self, latency_s: float) -> None:
        from memory_core.llm.client import LLMStats

        self.latency_s = latency_s
        self.stats = LLMStats()
        self.busy_s = 0.0

    async def complete(
        self,
        messages: Any,
        *,
        purpose: Any,
        json_output: bool = False,
        max_tokens: int | None = None,
    ) -> Any:
        import asyncio
        import json

        from memory_core.llm.client import ChatResult

        started = time.perf_counter()
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        self.busy_s += time.perf_counter() - started
        self.stats.of(purpose).calls += 1
        if purpose == "compact":
            text = json.dumps({"summary": "The team talked about the release.", "facts": []})
        elif purpose == "refresh":
            text = json.dumps(
                {
                    "mid": "This week: the release.",
                    "overview": "Overview: the release.",
                    "week": "The week of the release.",
                    "long": "Long term: releases.",
                }
            )
        else:
            text = "ok"
        return ChatResult(text=text, prompt_tokens=0, completion_tokens=0, model="latency")

    def stream(
        self, messages: Any, *, purpose: Any = "reply", max_tokens: int | None = None
    ) -> Any:
        raise NotImplementedError("benchmarks do not stream")

    async def embed(self, texts: Any) -> list[list[float]]:
        raise NotImplementedError("benchmarks do not embed")

    async def describe_image(
        self, image: bytes, *, mime: str, instruction: str, max_tokens: int
    ) -> Any:
        raise NotImplementedError("benchmarks do not caption images")

    async def close(self) -> None:
        return None


async def bench_rollover(
    settings: Settings,
    *,
    scopes: int,
    idle: int,
    latency_ms: float,
    concurrency: int,
    overhead_sample: int = 300,
    progress: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Scopes per second for a day's rollover at a concurrency, with a model of set latency;
    the per-scope overhead outside the model, measured with a zero-latency model one scope
    at a time; and proof that idle scopes cost nothing."""
    run_settings = private_settings(
        settings,
        memory={"compact_trigger_tokens": 10**9},
        scheduler={"concurrency": concurrency, "lease_s": 3600},
    )
    day0 = ManualClock(datetime_at(2025, 8, 11, 9))
    llm = LatencyLLM(latency_ms / 1000)
    core = await build_core(run_settings, clock=day0, llm=llm)
    rng = random.Random(11)
    try:
        # Idle scopes: active two days ago, rolled over since, silent now.
        for i in range(idle):
            await core.pipeline.ingest(
                IncomingMessage(scope=f"bench:idle{i}", text=_text(rng), author="u")
            )
        day0.set(datetime_at(2025, 8, 12, 9))
        await core.scheduler.sweep(force=True)
        sample = min(overhead_sample, scopes)
        for name in [f"bench:o{i}" for i in range(sample)] + [f"bench:a{i}" for i in range(scopes)]:
            await core.pipeline.ingest(IncomingMessage(scope=name, text=_text(rng), author="u"))
        day0.set(datetime_at(2025, 8, 13, 0, 1))
        # 1. Overhead: zero-latency model, one scope at a time.
        llm.latency_s = 0.0
        started = time.perf_counter()
        for i in range(sample):
            await core.pipeline.maintain(f"bench:o{i}")
        overhead_ms = (time.perf_counter() - started) * 1000 / max(1, sample)
        # 2. Throughput: the set latency, the given concurrency, through the scheduler.
        llm.latency_s = latency_ms / 1000
        calls_before = llm.stats.calls()
        started = time.perf_counter()
        report = await core.scheduler.sweep(
            force=True, progress=(lambda r: progress(r.worked)) if progress else None
        )
        elapsed = time.perf_counter() - started
        calls = llm.stats.calls() - calls_before
    finally:
        await core.discard()
    return {
        "store": core.store.description,
        "scopes": scopes,
        "idle_scopes": idle,
        "latency_ms": latency_ms,
        "concurrency": concurrency,
        "rolled_over": report.days_closed,
        "queued": report.queued,
        "seconds": round(elapsed, 3),
        "scopes_per_s": round(report.days_closed / elapsed, 1) if elapsed else 0.0,
        "llm_calls": calls,
        "llm_calls_per_scope": round(calls / max(1, report.days_closed), 2),
        "overhead_ms_per_scope": round(overhead_ms, 3),
        "ideal_scopes_per_s": round(concurrency / (2 * latency_ms / 1000), 1)
        if latency_ms
        else None,
    }


def datetime_at(year: int, month: int, day: int, hour: int, minute: int = 0) -> Any:
    from datetime import UTC, datetime

    return datetime(year, month, day, hour, minute, tzinfo=UTC)


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
    limit_mb = run_settings.memory.recall_cache_mb
    core = await build_core(run_settings, llm=OfflineLLM())
    rng = random.Random(13)
    vector_rng = np.random.default_rng(13)
    vocabulary = [f"{w}{i}" for w in WORDS for i in range(40)]  # ~1,000 distinct words
    results: list[dict[str, Any]] = []
    done = 0
    try:
        recall = core.pipeline.recall
        assert recall is not None
        if recall.embedder is not None:
            await recall.embedder(["warm the model up"])  # a process loads it once
        model_rss = _rss_bytes()
        # A process that has answered before: one scope built (in a worker thread, whose
        # BLAS and stack come once per thread) and searched, then dropped, so the memory
        # measured below is the indexes', not what the first search of a process sets up.
        await _fill_scopes(
            core,
            ["bench:warmup"],
            3000,
            vectors=recall.embedder is not None,
            rng=rng,
            vector_rng=vector_rng,
            vocabulary=vocabulary,
        )
        await recall.search("bench:warmup", "warm up", limit=200)
        recall.forget("bench:warmup")
        for size in sizes:
            names = [f"bench:recall{size}s{j}" for j in range(min(scopes, size))]
            await _fill_scopes(
                core,
                names,
                size,
                vectors=recall.embedder is not None,
                rng=rng,
                vector_rng=vector_rng,
                vocabulary=vocabulary,
            )
            scope = names[-1]
            asks = [
                " ".join(rng.choice(vocabulary) for _ in range(rng.randint(3, 8)))
                for _ in range(queries)
            ]
            gc.collect()
            before = recall.cache_stats
            evictions, builds = before.evictions, before.builds
            rss_before = _rss_bytes()
            peak_known = _reset_peak_rss()
            # The loop's longest stall apart while indexes are built (and their vectors
            # loaded), without the rankings, and while the queries run: a ranking holds the
            # loop for its length (~15 ms at 100k messages in a scope, ~100 at a million).
            build_stall, query_stall = LoopStallMeter(), LoopStallMeter()
            cold: list[float] = []
            for name in names:
                t0 = time.perf_counter()
                async with build_stall:
                    await recall.warm(name)
                async with query_stall:
                    await recall.search(name, asks[0], limit=200)
                cold.append((time.perf_counter() - t0) * 1000)
            cold_ms = statistics.fmean(cold)
            stats = recall.cache_stats
            cached = sum(len(index.docs) for index in recall._indexes.values())
            index_bytes = stats.bytes
            rss_built = _rss_bytes()
            times: list[float] = []
            async with query_stall:
                for ask in asks:
                    t0 = time.perf_counter()
                    await recall.search(scope, ask, limit=200)
                    times.append((time.perf_counter() - t0) * 1000)
                    done += 1
                    if progress is not None:
                        progress(done)
            # A forget elsewhere (one message deleted, the epoch moved): a rebuild.
            first = await core.repo.entries_after(scope, "", limit=1)
            if first:
                await core.repo.delete_entries(scope, [first[0].id])
            await core.repo.bump_epoch(scope)
            t0 = time.perf_counter()
            async with build_stall:
                await recall.warm(scope)
            async with query_stall:
                await recall.search(scope, asks[0], limit=200)
            rebuild_ms = (time.perf_counter() - t0) * 1000
            peak = _rss_bytes("VmHWM") if peak_known else 0
            stats = recall.cache_stats
            results.append(
                {
                    "messages": size,
                    "scopes": len(names),
                    "first_query_ms": round(cold_ms, 2),
                    "p50_ms": round(_percentile(times, 0.5), 3),
                    "p99_ms": round(_percentile(times, 0.99), 3),
                    "rebuild_ms": round(rebuild_ms, 2),
                    "loop_stall_max_ms": round(max(build_stall.max_ms, query_stall.max_ms), 2),
                    "loop_stall_build_ms": round(build_stall.max_ms, 2),
                    "loop_stall_query_ms": round(query_stall.max_ms, 2),
                    # Counted by the indexes themselves, over the messages still cached.
                    "messages_cached": cached,
                    "index_mb": round(index_bytes / 2**20, 1),
                    "index_bytes_per_message": round(index_bytes / max(cached, 1)),
                    "cache_mb": limit_mb,
                    "evictions": stats.evictions - evictions,
                    "builds": stats.builds - builds,
                    # The process: after the model, before this size's first query, and at
                    # its peak from then on (building, querying, rebuilding).
                    "model_rss_mb": round(model_rss / 2**20, 1),
                    "rss_before_mb": round(rss_before / 2**20, 1),
                    "rss_built_mb": round(rss_built / 2**20, 1),
                    "rss_growth_bytes_per_message": round(
                        (rss_built - rss_before) / max(cached, 1)
                    ),
                    "peak_rss_mb": round(peak / 2**20, 1) if peak else None,
                    "peak_growth_bytes_per_message": round((peak - rss_before) / max(cached, 1))
                    if peak
                    else None,
                    # Whether the process grew no more than the cache's bound from before the
                    # first query to its peak (a single scope bigger than the bound is kept
                    # whole: the one being searched is never evicted).
                    "peak_within_cache": (peak - rss_before) <= limit_mb * 2**20 if peak else None,
                }
            )
            for name in names:  # the next size starts from an empty cache
                recall.forget(name)
            gc.collect()
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
