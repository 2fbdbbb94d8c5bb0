"""``memorybot bench ingest``: the message path's own time per message, without the LLM.

Runs against the configured store under a private key prefix (deleted afterwards), so it
never touches real memory. Reports p50/p99 of ``ingest`` (what every message costs), of
prompt assembly (what a reply costs before the LLM), throughput, and the median Redis PING
round trip measured in the same run, for scale.
"""

from __future__ import annotations

import asyncio
import random
import secrets
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from config.settings import Settings
from memory_core.bootstrap import Core, build_core
from memory_core.clock import ManualClock
from memory_core.llm.client import OfflineLLM
from memory_core.models import IncomingMessage

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


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return 0.0
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def _text(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 30)))


@dataclass
class IngestRun:
    """What ``bench_ingest`` measures: times in milliseconds, the embedding lag in seconds,
    the moments of the run from ``time.perf_counter()``."""

    ingest_ms: list[float] = field(default_factory=list)
    assemble_ms: list[float] = field(default_factory=list)
    ping_ms: list[float] = field(default_factory=list)  # sampled during the run
    quiet_ms: list[float] = field(default_factory=list)  # before it, the worker idle
    lane_ping_ms: list[float] = field(default_factory=list)
    lag_s: list[float] = field(default_factory=list)
    started: float = 0.0  # the first message
    sent: float = 0.0  # the last one stored
    caught_up: float = 0.0  # the last one embedded
    embedded: int = 0
    caught_spinning: int = 0

    async def ping(self, core: Core, into: list[float]) -> None:
        t0 = time.perf_counter()
        await core.store.client.ping()
        into.append((time.perf_counter() - t0) * 1000)

    async def before(self, core: Core, worker: Any) -> None:
        """Everything loaded and warm, then the PINGs the run is compared with: redis-py's
        on a quiet connection, then by the connection messages are stored by."""
        if worker is not None:
            await worker.ready()  # its model loaded: not a cost of the run
        # The query embedder's model too, and connections and scripts.
        await core.replier.build_prompt(
            IncomingMessage(scope="bench:warm", text="warm up", author="u")
        )
        for _ in range(20):
            await core.store.client.ping()
        for _ in range(200):
            await self.ping(core, self.quiet_ms)
        lane = core.store.lane  # the connection messages are stored by, on one server
        for _ in range(200 if lane is not None else 0):
            t0 = time.perf_counter()
            await lane.call("PING")  # type: ignore[union-attr]
            self.lane_ping_ms.append((time.perf_counter() - t0) * 1000)

    async def ingest(
        self,
        core: Core,
        clock: ManualClock,
        worker: Any,
        *,
        scopes: int,
        messages: int,
        assemble_every: int,
        progress: Callable[[int], None] | None,
    ) -> None:
        """The messages, one after another over the scopes, a prompt assembled every
        ``assemble_every``-th, a PING and the worker's lag sampled every 50th."""
        rng = random.Random(7)
        scope_names = [f"bench:s{i}" for i in range(scopes)]
        self.started = time.perf_counter()
        for i in range(messages):
            clock.advance(timedelta(seconds=1))
            scope = scope_names[i % scopes]
            msg = IncomingMessage(scope=scope, text=_text(rng), author=f"user{i % 7}")
            t0 = time.perf_counter()
            await core.intake.accept(msg)
            self.ingest_ms.append((time.perf_counter() - t0) * 1000)
            if assemble_every and i % assemble_every == 0:
                t0 = time.perf_counter()
                await core.replier.build_prompt(msg)
                self.assemble_ms.append((time.perf_counter() - t0) * 1000)
            if i % 50 == 0:
                await self.ping(core, self.ping_ms)
                if worker is not None and worker.status:
                    self.lag_s.append(float(worker.status.get("lag_s", 0.0)))
            if progress is not None:
                progress(i + 1)
        self.sent = time.perf_counter()

    def figures(self) -> dict[str, Any]:
        """The run's figures (after the store, scopes and messages ``bench_ingest`` names)."""
        ingest_ms, ping_ms, lane_ping_ms = self.ingest_ms, self.ping_ms, self.lane_ping_ms
        elapsed = self.sent - self.started - sum(self.assemble_ms) / 1000 - sum(ping_ms) / 1000
        quiet = statistics.median(self.quiet_ms)
        return {
            "p50_ms": round(percentile(ingest_ms, 0.50), 4),
            "p99_ms": round(percentile(ingest_ms, 0.99), 4),
            "mean_ms": round(statistics.fmean(ingest_ms), 4) if ingest_ms else 0.0,
            "msgs_per_s": round(len(ingest_ms) / elapsed, 1) if elapsed > 0 else 0.0,
            "assemble_p50_ms": round(percentile(self.assemble_ms, 0.50), 4),
            "assemble_p99_ms": round(percentile(self.assemble_ms, 0.99), 4),
            "redis_ping_ms": round(quiet, 4),  # quiet: before the run, the worker idle
            "ping_during_run_ms": round(statistics.median(ping_ms), 4) if ping_ms else 0.0,
            "p50_over_ping": round(percentile(ingest_ms, 0.5) / quiet, 2) if quiet > 0 else None,
            # The same, by the connection messages are stored by (hiredis, no pool): the round
            # trip itself, without redis-py's Python per command (which the PING above includes).
            "lane_ping_ms": round(statistics.median(lane_ping_ms), 4) if lane_ping_ms else None,
            # Messages whose reply the bot waited for on its CPU (FastLane.call's ``spin``).
            "caught_spinning": self.caught_spinning,
        }

    def embedding_figures(self) -> dict[str, Any]:
        """How the background embedding kept up: its lag during the run, and its catch-up."""
        embedded, lag_s = self.embedded, self.lag_s
        return {
            "embedded": embedded,
            "embed_lag_p50_s": round(percentile(lag_s, 0.50), 3),
            "embed_lag_max_s": round(max(lag_s, default=0.0), 3),
            "embed_catch_up_s": round(self.caught_up - self.sent, 3),
            # From the first message stored to the last one embedded.
            "embed_msgs_per_s": round(embedded / (self.caught_up - self.started), 1)
            if embedded
            else 0.0,
        }


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
    # No maintenance during the measurement: this times the message path, not summaries.
    run_settings = private_settings(settings, memory={"compact_trigger_tokens": 10**9})
    clock = ManualClock()
    core = await build_core(run_settings, clock=clock, llm=OfflineLLM())
    worker = core.recall.worker if core.recall is not None else None
    run = IngestRun()
    try:
        await run.before(core, worker)
        await run.ingest(
            core,
            clock,
            worker,
            scopes=scopes,
            messages=messages,
            assemble_every=assemble_every,
            progress=progress,
        )
        if core.recall is not None:
            await core.recall.drain()
        run.caught_up = time.perf_counter()
        run.embedded = int(worker.status.get("embedded", 0)) if worker is not None else 0
        lane = core.store.lane
        run.caught_spinning = int(lane.caught_spinning) if lane is not None else 0
    finally:
        await core.discard()
    return {
        "store": core.store.description,
        "scopes": scopes,
        "messages": messages,
        **run.figures(),
        "embedding": "worker process" if worker is not None else "none or in-process",
        **run.embedding_figures(),
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
            await core.intake.accept(
                IncomingMessage(scope=f"bench:idle{i}", text=_text(rng), author="u")
            )
        day0.set(datetime_at(2025, 8, 12, 9))
        await core.scheduler.sweep(force=True)
        sample = min(overhead_sample, scopes)
        for name in [f"bench:o{i}" for i in range(sample)] + [f"bench:a{i}" for i in range(scopes)]:
            await core.intake.accept(IncomingMessage(scope=name, text=_text(rng), author="u"))
        day0.set(datetime_at(2025, 8, 13, 0, 1))
        # 1. Overhead: zero-latency model, one scope at a time.
        llm.latency_s = 0.0
        started = time.perf_counter()
        for i in range(sample):
            await core.maintenance.maintain(f"bench:o{i}")
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
