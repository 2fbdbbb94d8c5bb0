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
from pathlib import Path
from typing import Any

from bots.bench.fake_llm import FakeOpenAI
from bots.bench.harness import private_settings
from config.settings import Settings
from memory_core.bootstrap import build_core
from memory_core.models import IncomingMessage

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
    rng = random.Random(3)
    async with FakeOpenAI(delay=llm_latency_ms / 1000) as fake:
        core = await build_core(
            private_settings(
                settings,
                llm={
                    "base_url": fake.base_url,
                    "api_key": None,
                    "max_retries": 0,
                    "concurrency": llm_concurrency,
                },
            ),
        )
        latencies: list[float] = []
        reply_ms: list[float] = []
        memory: list[tuple[float, float]] = []
        sent = replies = failed = 0
        pending: set[asyncio.Task[None]] = set()
        calls = dict.fromkeys(("reply", "compact", "refresh"), 0)

        def tally(into: dict[str, int]) -> None:
            for purpose in into:
                into[purpose] += fake.count(purpose)
            fake.requests.clear()

        async def one(i: int) -> None:
            nonlocal replies, failed
            msg = IncomingMessage(
                scope=f"load:s{i % scopes}",
                text=" ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 30))),
                author=f"user{i % 50}",
                author_id=str(i % 50),
                direct=i % reply_every == 0,
            )
            t0 = time.perf_counter()
            try:
                stored = await core.pipeline.ingest(msg)
            except Exception:  # noqa: BLE001 - counted: a message the bot could not take
                failed += 1
                return
            latencies.append((time.perf_counter() - t0) * 1000)
            if msg.direct and stored.stored:
                reply = await core.pipeline.reply(msg, exclude_id=stored.id)
                replies += reply.kind == "llm"
                reply_ms.append((time.perf_counter() - t0) * 1000)

        started = time.perf_counter()
        try:
            for second in range(seconds):
                tick = started + second
                for k in range(rate):
                    i = second * rate + k
                    task = asyncio.create_task(one(i))
                    pending.add(task)
                    task.add_done_callback(pending.discard)
                    sent += 1
                    # Spread the second's messages evenly, as a real stream would come.
                    delay = tick + (k + 1) / rate - time.perf_counter()
                    if delay > 0:
                        await asyncio.sleep(delay)
                if second % 5 == 0:
                    # The fake model shares this process and keeps every request it saw:
                    # count them and let them go, so RSS measures the bot, not the fake.
                    tally(calls)
                    memory.append((round(time.perf_counter() - started, 1), round(rss_mb(), 1)))
                if progress is not None:
                    progress(second + 1)
            sending_s = time.perf_counter() - started
            await asyncio.gather(*pending)
            await core.pipeline.drain()
            elapsed = time.perf_counter() - started
            stored_total = 0
            for s in range(scopes):
                stored_total += await core.repo.log_length(f"load:s{s}")
            user_stored = stored_total - replies
        finally:
            await core.discard()
        memory.append((round(time.perf_counter() - started, 1), round(rss_mb(), 1)))
        tally(calls)
    half = len(memory) // 2
    return {
        "rate_per_s": rate,
        "scopes": scopes,
        "seconds": seconds,
        "elapsed_s": round(elapsed, 1),
        "achieved_rate_per_s": round(sent / sending_s, 1),  # while sending
        "drain_s": round(elapsed - sending_s, 1),  # answering and summarising what was left
        "sent": sent,
        "stored": user_stored,
        "lost": sent - user_stored - failed,
        "refused": failed,
        "ingest_p50_ms": round(statistics.median(latencies), 3) if latencies else None,
        "ingest_p99_ms": round(sorted(latencies)[int(0.99 * (len(latencies) - 1))], 3)
        if latencies
        else None,
        "replies": replies,
        "reply_p50_ms": _percentile(reply_ms, 0.5),
        "reply_p99_ms": _percentile(reply_ms, 0.99),
        "llm_concurrency": llm_concurrency,
        "llm_calls": calls,
        "llm_latency_ms": llm_latency_ms,
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
