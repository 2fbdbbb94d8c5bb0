"""``memorybot bench ingest``: the pipeline's own time per message, without the LLM.

Runs against the configured store under a private key prefix (deleted afterwards), so it
never touches real memory. Reports p50/p99 of ``ingest`` (what every message costs), of
prompt assembly (what a reply costs before the LLM), throughput, and the median Redis PING
round trip measured in the same run, for scale.
"""

from __future__ import annotations

import random
import secrets
import statistics
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from config.settings import Settings
from memory_core.bootstrap import build_core
from memory_core.clock import ManualClock
from memory_core.llm import OfflineLLM
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
    prefix = f"mbbench{secrets.token_hex(3)}"
    memory = settings.memory.model_copy(
        # No maintenance during the measurement: this times the pipeline, not summaries.
        update={"compact_trigger_tokens": 10**9}
    )
    store = settings.store.model_copy(update={"key_prefix": prefix})
    run_settings = settings.model_copy(update={"memory": memory, "store": store})
    clock = ManualClock()
    core = await build_core(run_settings, clock=clock, llm=OfflineLLM(), autosave=False)
    rng = random.Random(7)
    ingest_ms: list[float] = []
    assemble_ms: list[float] = []
    ping_ms: list[float] = []
    scope_names = [f"bench:s{i}" for i in range(scopes)]
    try:
        for _ in range(20):  # warm up connections and scripts
            await core.store.client.ping()
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
            if progress is not None:
                progress(i + 1)
        elapsed = time.perf_counter() - started - sum(assemble_ms) / 1000 - sum(ping_ms) / 1000
    finally:
        await _cleanup(core.store.client, f"{prefix}:*")
        await core.close()
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
        "redis_ping_ms": round(statistics.median(ping_ms), 4) if ping_ms else 0.0,
        "p50_over_ping": round(_percentile(ingest_ms, 0.5) / statistics.median(ping_ms), 2)
        if ping_ms and statistics.median(ping_ms) > 0
        else None,
    }


async def _cleanup(client: Any, pattern: str) -> None:
    batch: list[str] = []
    async for key in client.scan_iter(match=pattern, count=1000):
        batch.append(key)
        if len(batch) >= 500:
            await client.delete(*batch)
            batch.clear()
    if batch:
        await client.delete(*batch)
