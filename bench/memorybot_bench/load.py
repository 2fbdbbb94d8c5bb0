"""A load run on loopback: messages at a steady rate across many scopes, with a fake LLM of
realistic latency answering every Nth message, maintenance in the background as in
production. Reports lost messages (must be zero), ingest latency, replies, LLM calls and the
process's memory over time (must stay flat)."""

from __future__ import annotations

import asyncio
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from config.settings import Settings
from memory_core.bootstrap import Core, build_core
from memory_core.models import IncomingMessage
from memory_core.service.streaming import KeptAnswer
from memorybot_bench.harness import private_settings
from memorybot_testkit.openai_server import FakeOpenAI

WORDS = (
    "release deploy coffee meeting budget tokyo plan review docs bug cache latency weekend "
    "trip photo music garden train dinner movie lunch project deadline design test friday"
).split()


def rss_mb() -> float:
    """Resident memory of this process, from /proc (Linux)."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return 0.0
    import os

    return pages * os.sysconf("SC_PAGE_SIZE") / 1_048_576


@dataclass
class LoadRun:
    """One load run on a core and the fake model it answers with: what was sent, what came
    back, and the process's memory over time."""

    core: Core
    fake: FakeOpenAI
    scopes: int
    reply_every: int
    rng: random.Random = field(default_factory=lambda: random.Random(3))
    started: float = 0.0
    sent: int = 0
    replies: int = 0
    failed: int = 0
    latencies: list[float] = field(default_factory=list)
    reply_ms: list[float] = field(default_factory=list)
    memory: list[tuple[float, float]] = field(default_factory=list)
    pending: set[asyncio.Task[None]] = field(default_factory=set)
    calls: dict[str, int] = field(
        default_factory=lambda: dict.fromkeys(("reply", "compact", "refresh"), 0)
    )

    def tally(self) -> None:
        """Count the fake model's requests by purpose and let them go."""
        for purpose in self.calls:
            self.calls[purpose] += self.fake.count(purpose)
        self.fake.requests.clear()

    def sample_memory(self) -> None:
        self.memory.append((round(time.perf_counter() - self.started, 1), round(rss_mb(), 1)))

    async def one(self, i: int) -> None:
        """Message ``i``: stored, and answered when it is one of those asked."""
        msg = IncomingMessage(
            scope=f"load:s{i % self.scopes}",
            text=" ".join(self.rng.choice(WORDS) for _ in range(self.rng.randint(5, 30))),
            author=f"user{i % 50}",
            author_id=str(i % 50),
            direct=i % self.reply_every == 0,
        )
        t0 = time.perf_counter()
        conversation = self.core.conversation
        try:
            turn = await conversation.receive(msg)
        except Exception:  # noqa: BLE001 - counted: a message the bot could not take
            self.failed += 1
            return
        self.latencies.append((time.perf_counter() - t0) * 1000)
        if turn is not None:
            done = await conversation.answer(turn, KeptAnswer(), stream_interval_s=None)
            self.replies += done.reply is not None and done.reply.kind == "llm"
            self.reply_ms.append((time.perf_counter() - t0) * 1000)

    async def send(self, rate: int, seconds: int, progress: Callable[[int], None] | None) -> float:
        """``rate`` messages a second for ``seconds``, each on a task of its own; the seconds
        the sending took."""
        self.started = time.perf_counter()
        for second in range(seconds):
            tick = self.started + second
            for k in range(rate):
                task = asyncio.create_task(self.one(second * rate + k))
                self.pending.add(task)
                task.add_done_callback(self.pending.discard)
                self.sent += 1
                # Spread the second's messages evenly, as a real stream would come.
                delay = tick + (k + 1) / rate - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
            if second % 5 == 0:
                # The fake model shares this process and keeps every request it saw:
                # count them and let them go, so RSS measures the bot, not the fake.
                self.tally()
                self.sample_memory()
            if progress is not None:
                progress(second + 1)
        return time.perf_counter() - self.started

    async def stored(self) -> int:
        """The messages the users sent that memory holds (the bot's replies left out)."""
        total = 0
        for s in range(self.scopes):
            total += await self.core.repo.reads.log_length(f"load:s{s}")
        return total - self.replies


async def load_run(
    settings: Settings,
    *,
    rate: int = 200,
    scopes: int = 1000,
    seconds: int = 600,
    reply_every: int = 20,
    llm_latency_ms: float = 400,
    llm_concurrency: int = 16,
    progress: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """``rate`` messages a second for ``seconds`` over ``scopes`` scopes, every
    ``reply_every``-th answered. The model's concurrency is raised from the default 4 to
    ``llm_concurrency``: at 400 ms a call, 4 in flight answer 10 calls a second, fewer than
    this load asks for (10 replies a second plus compaction), and replies would queue."""
    async with FakeOpenAI(delay=llm_latency_ms / 1000) as fake:
        llm = {
            "base_url": fake.base_url,
            "api_key": None,
            "max_retries": 0,
            "concurrency": llm_concurrency,
        }
        core = await build_core(private_settings(settings, llm=llm))
        run = LoadRun(core, fake, scopes=scopes, reply_every=reply_every)
        try:
            sending_s = await run.send(rate, seconds, progress)
            await asyncio.gather(*run.pending)
            await core.drain()
            elapsed = time.perf_counter() - run.started
            user_stored = await run.stored()
        finally:
            await core.discard()
        run.sample_memory()
        run.tally()
    asked = {"rate_per_s": rate, "scopes": scopes, "seconds": seconds}
    model = {"concurrency": llm_concurrency, "latency_ms": llm_latency_ms}
    return _figures(run, asked, model, elapsed=elapsed, sending_s=sending_s, stored=user_stored)


def _figures(
    run: LoadRun,
    asked: dict[str, int],
    model: dict[str, float],
    *,
    elapsed: float,
    sending_s: float,
    stored: int,
) -> dict[str, Any]:
    """The figures of a run, after what it was asked (rate, scopes, seconds)."""
    latencies, memory = run.latencies, run.memory
    half = len(memory) // 2
    return {
        **asked,
        "elapsed_s": round(elapsed, 1),
        "achieved_rate_per_s": round(run.sent / sending_s, 1),  # while sending
        "drain_s": round(elapsed - sending_s, 1),  # answering and summarising what was left
        "sent": run.sent,
        "stored": stored,
        "lost": run.sent - stored - run.failed,
        "refused": run.failed,
        "ingest_p50_ms": round(statistics.median(latencies), 3) if latencies else None,
        "ingest_p99_ms": round(sorted(latencies)[int(0.99 * (len(latencies) - 1))], 3)
        if latencies
        else None,
        "replies": run.replies,
        "reply_p50_ms": _percentile(run.reply_ms, 0.5),
        "reply_p99_ms": _percentile(run.reply_ms, 0.99),
        "llm_concurrency": model["concurrency"],
        "llm_calls": run.calls,
        "llm_latency_ms": model["latency_ms"],
        "rss_mb_start": memory[0][1] if memory else None,
        "rss_mb_mid": memory[half][1] if memory else None,
        "rss_mb_end": memory[-1][1] if memory else None,
        "rss_samples": memory,
    }


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[int(q * (len(ordered) - 1))], 1)
