"""``memorybot bench all``: every figure next to its alternatives, measured in one run, written
to docs/benchmarks.md with plots.

1. pipeline time per message (ingest, reply-path assembly) at 1, 1k, 10k scopes, next to a
   Redis PING and a plain RPUSH of a JSON message (the least any Redis-backed bot does);
2. LLM calls and tokens per 100 channel messages, replies off and on, for memorybot, the seed
   design, a full-history bot and LangChain's summary buffer, counted at one fake server;
3. prompt tokens per reply as history grows, the same four;
4. rollover: scopes per second and overhead per scope at several concurrencies, idle scopes;
5. Redis memory: bytes per stored message and per idle scope after a simulated year;
6. recall latency at 1k, 10k, 100k messages in a scope;
7. load: a steady rate of messages with replies and background maintenance;
8. (recall quality on LoCoMo: saved from ``memorybot eval locomo --json``, not measured here);
9. Redis Cluster: each node's share of the work on local 3- and 6-node clusters.

Quick mode (CI) shrinks every size so the whole run takes a couple of minutes on 2 cores.
Figures are medians of repeated runs where a run is short enough to repeat.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import platform
import secrets
import shutil
import statistics
import subprocess
import tempfile
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import memory_core
from config.settings import Settings
from memory_core.bootstrap import build_core
from memory_core.clock import ManualClock
from memory_core.llm.client import OfflineLLM
from memory_core.models import IncomingMessage
from memory_core.text.tokens import TokenCounter
from memorybot_bench.alternatives import (
    FullHistory,
    LangChainSummaryBuffer,
    Memorybot,
    MemoryUnderTest,
    SeedDesign,
    conversation,
)
from memorybot_bench.cluster_bench import bench_cluster
from memorybot_bench.harness import bench_ingest, bench_rollover, private_settings
from memorybot_bench.load import load_run
from memorybot_bench.recall_bench import bench_recall
from memorybot_testkit.openai_server import FakeOpenAI

START = datetime(2025, 8, 11, 9, 0, tzinfo=UTC)
Log = Callable[[str], None]


@dataclass(frozen=True)
class Sizes:
    scopes: tuple[int, ...]
    ingest_messages: int
    repeats: int
    calls_messages: int
    growth: tuple[int, ...]
    rollover_scopes: int
    rollover_concurrency: tuple[int, ...]
    year_days: int
    recall: tuple[int, ...]
    load: tuple[int, int, int]  # rate per second, scopes, seconds
    cluster: tuple[tuple[int, ...], int, int]  # node counts, scopes, messages

    @classmethod
    def of(cls, quick: bool) -> Sizes:
        if quick:
            return cls(
                (1, 100),
                600,
                1,
                200,
                (10, 100, 500),
                300,
                (8, 32),
                60,
                (1000, 10000),
                (50, 200, 15),
                ((3, 6), 100, 600),
            )
        return cls(
            (1, 1000, 10000),
            10000,
            3,
            1000,
            (10, 100, 1000, 10000),
            10000,
            (16, 64, 128),
            365,
            (1000, 10000, 100000),
            (200, 1000, 600),
            ((3, 6), 1000, 10000),
        )


def _median(runs: list[dict[str, Any]], key: str) -> float:
    return float(statistics.median(r[key] for r in runs))


# -- 1. pipeline time --------------------------------------------------------------------
async def pipeline_time(settings: Settings, sizes: Sizes, log: Log) -> list[dict[str, Any]]:
    rows = []
    for scopes in sizes.scopes:
        messages = max(sizes.ingest_messages, scopes * 2)
        runs = [
            await bench_ingest(settings, scopes=scopes, messages=messages)
            for _ in range(sizes.repeats)
        ]
        rpush = await _rpush_baseline(settings, messages=min(messages, 5000))
        row = {
            "scopes": scopes,
            "messages": messages,
            "ingest_p50_ms": _median(runs, "p50_ms"),
            "ingest_p99_ms": _median(runs, "p99_ms"),
            "msgs_per_s": _median(runs, "msgs_per_s"),
            "assemble_p50_ms": _median(runs, "assemble_p50_ms"),
            "assemble_p99_ms": _median(runs, "assemble_p99_ms"),
            "ping_ms": _median(runs, "redis_ping_ms"),
            "rpush_p50_ms": rpush,
        }
        log(f"pipeline time at {scopes} scopes: {row}")
        rows.append(row)
    return rows


async def embedded_pipeline(
    settings: Settings, redis_rows: list[dict[str, Any]], sizes: Sizes, log: Log
) -> dict[str, Any] | None:
    """Section 1 again on the embedded store (the Valkey server memorybot runs, over its Unix
    socket, in a throwaway data directory), beside ``redis_rows``, the external Redis's rows
    of the same run. None when the run is on the embedded store already."""
    if not settings.store.redis_url:
        return None
    data_dir = Path(tempfile.mkdtemp(prefix="mbbench-embedded-"))
    store = settings.store.model_copy(update={"redis_url": None, "data_dir": data_dir})
    try:
        core = await build_core(settings.model_copy(update={"store": store}), llm=OfflineLLM())
        try:
            info: Any = await core.store.client.info("server")
            server = f"Valkey {info.get('valkey_version', info.get('redis_version'))}"
        finally:
            await core.close()
        rows = await pipeline_time(settings.model_copy(update={"store": store}), sizes, log)
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
    return {"server": server, "redis": redis_rows, "embedded": rows}


async def _rpush_baseline(settings: Settings, *, messages: int) -> float:
    """The least a Redis-backed bot does per message: RPUSH one JSON document."""
    core = await build_core(private_settings(settings), llm=OfflineLLM())
    key = f"{core.store.keys.prefix}:rpush"
    times = []
    try:
        for i in range(messages):
            doc = json.dumps({"ts": i, "user": "u", "text": "a message of a few words " * 3})
            t0 = time.perf_counter()
            await core.store.client.rpush(key, doc)
            times.append((time.perf_counter() - t0) * 1000)
    finally:
        await core.discard()
    return round(statistics.median(times), 4)


# -- 2 and 3. LLM cost and prompt growth ---------------------------------------------------
ROLLOVER_LATENCY_MS = 100
COMPARED_BUDGET = 2000  # memorybot's prompt budget here: LangChain's buffer is 2,000 tokens


async def _contenders(settings: Settings, base_url: str, tag: str) -> list[MemoryUnderTest]:
    memory = settings.memory.model_copy(update={"budget_tokens": COMPARED_BUDGET})
    memorybot = await Memorybot.create(
        settings.model_copy(update={"memory": memory}),
        base_url,
        f"bench:{tag}{secrets.token_hex(2)}",
    )
    return [
        memorybot,
        SeedDesign(base_url),
        FullHistory(base_url),
        LangChainSummaryBuffer(base_url),
    ]


def _tokens(counter: TokenCounter, fake: FakeOpenAI, since: int) -> tuple[int, int]:
    """(requests, tokens sent + received) at the fake server since request ``since``."""
    sent = 0
    for request in fake.requests[since:]:
        sent += counter.count_messages(
            [{"content": str(m.get("content", ""))} for m in request.messages]
        )
    return len(fake.requests) - since, sent


async def llm_cost(settings: Settings, sizes: Sizes, log: Log) -> list[dict[str, Any]]:
    counter = TokenCounter()
    rows = []
    chat = conversation(sizes.calls_messages, start=START)
    async with FakeOpenAI() as fake:
        for replies in (False, True):
            for bot in await _contenders(settings, fake.base_url, "cost"):
                since = len(fake.requests)
                for author, text, when in chat:
                    await bot.message(author, text, when, reply=replies)
                await bot.close()
                calls, tokens = _tokens(counter, fake, since)
                per = 100 / len(chat)
                row = {
                    "memory": bot.name,
                    "replies": "on" if replies else "off",
                    "llm_calls_per_100": round(calls * per, 1),
                    "llm_tokens_per_100": round(tokens * per),
                }
                log(f"LLM cost: {row}")
                rows.append(row)
    return rows


async def prompt_growth(settings: Settings, sizes: Sizes, log: Log) -> list[dict[str, Any]]:
    counter = TokenCounter()
    rows = []
    total = max(sizes.growth)
    chat = conversation(total, start=START)
    checkpoints = set(sizes.growth)
    async with FakeOpenAI() as fake:
        for bot in await _contenders(settings, fake.base_url, "growth"):
            for i, (author, text, when) in enumerate(chat, start=1):
                ask = i in checkpoints
                since = len(fake.requests)
                await bot.message(author, text, when, reply=ask)
                if ask:
                    replies = [r for r in fake.requests[since:] if r.purpose == "reply"]
                    prompt = (
                        counter.count_messages(
                            [{"content": str(m.get("content", ""))} for m in replies[-1].messages]
                        )
                        if replies
                        else 0
                    )
                    rows.append({"memory": bot.name, "history": i, "prompt_tokens": prompt})
                    log(f"prompt growth: {bot.name} at {i} messages: {prompt} tokens")
            await bot.close()
    return rows


# -- 4. rollover ----------------------------------------------------------------------------
async def rollover(settings: Settings, sizes: Sizes, log: Log) -> list[dict[str, Any]]:
    rows = []
    for concurrency in sizes.rollover_concurrency:
        result = await bench_rollover(
            settings,
            scopes=sizes.rollover_scopes,
            idle=sizes.rollover_scopes // 10,
            latency_ms=ROLLOVER_LATENCY_MS,
            concurrency=concurrency,
            overhead_sample=min(300, sizes.rollover_scopes),
        )
        log(f"rollover at concurrency {concurrency}: {result}")
        rows.append(result)
    return rows


# -- 5. Redis memory --------------------------------------------------------------------------
async def redis_memory(settings: Settings, sizes: Sizes, log: Log) -> dict[str, Any]:
    """A busy scope (40 messages a day) and an idle one through a simulated year, retention
    30 days, offline summaries; bytes measured with MEMORY USAGE on every key of each (on
    the embedded store too: it is a Valkey server)."""
    clock = ManualClock(START)
    core = await build_core(
        private_settings(settings, memory={"retention_days": 30}),
        clock=clock,
        llm=OfflineLLM(),
        background=False,
    )
    chat = conversation(sizes.year_days * 40, start=START, per_day=40)
    try:
        await core.intake.accept(IncomingMessage(scope="bench:idle", text="hello once", author="x"))
        day = ""
        for author, text, when in chat:
            if when.date().isoformat() != day:  # the nightly sweep, as the scheduler runs it
                clock.set(when - timedelta(hours=8))
                await core.scheduler.sweep(force=True)
                day = when.date().isoformat()
            clock.set(when)
            await core.intake.accept(IncomingMessage(scope="bench:busy", text=text, author=author))
        clock.set(chat[-1][2] + timedelta(days=1, hours=1))
        await core.scheduler.sweep(force=True)
        busy = await _scope_bytes(core, "bench:busy")
        idle = await _scope_bytes(core, "bench:idle")
        log_bytes = await core.store.client.memory_usage(
            core.store.keys.scope("bench:busy").log, samples=0
        )
        stored = await core.repo.reads.log_length("bench:busy")
    finally:
        await core.discard()
    result = {
        "days": sizes.year_days,
        "messages_sent": len(chat),
        "messages_kept": stored,
        "bytes_per_kept_message": round(int(log_bytes or 0) / max(1, stored)),
        "busy_scope_bytes": busy,
        "idle_scope_bytes": idle,
    }
    log(f"Redis memory: {result}")
    return result


async def _scope_bytes(core: Any, scope: str) -> int:
    total = 0
    for key in core.store.keys.scope(scope).all():
        total += int(await core.store.client.memory_usage(key, samples=0) or 0)
    return total


# -- the whole run ------------------------------------------------------------------------------
async def run_all(settings: Settings, *, quick: bool, out: Path, log: Log) -> dict[str, Any]:
    warnings.filterwarnings("ignore", message=".*ConversationSummaryBufferMemory.*")
    sizes = Sizes.of(quick)
    started = time.perf_counter()
    results: dict[str, Any] = {"quick": quick, "machine": machine(settings)}
    results["pipeline"] = await pipeline_time(settings, sizes, log)
    results["embedded_pipeline"] = await embedded_pipeline(
        settings, results["pipeline"], sizes, log
    )
    results["llm_cost"] = await llm_cost(settings, sizes, log)
    results["prompt_growth"] = await prompt_growth(settings, sizes, log)
    results["rollover"] = await rollover(settings, sizes, log)
    results["redis_memory"] = await redis_memory(settings, sizes, log)
    results["recall"] = (await bench_recall(settings, sizes=list(sizes.recall), queries=50))[
        "sizes"
    ]
    rate, scopes, seconds = sizes.load
    results["load"] = await load_run(settings, rate=rate, scopes=scopes, seconds=seconds)
    log(f"load: { {k: v for k, v in results['load'].items() if k != 'rss_samples'} }")
    nodes, scopes, messages = sizes.cluster
    results["cluster"] = await bench_cluster(
        settings, nodes=nodes, scopes=scopes, messages=messages
    )
    for row in results["cluster"]["clusters"]:
        log(f"cluster of {row['nodes']}: {row['overall']}")
    results["seconds"] = round(time.perf_counter() - started, 1)
    from memorybot_bench.report import write_report

    write_report(results, out)
    return results


def machine(settings: Settings) -> dict[str, Any]:
    import os

    def version(package: str) -> str:
        from importlib.metadata import PackageNotFoundError
        from importlib.metadata import version as v

        try:
            return v(package)
        except PackageNotFoundError:
            return "-"

    commit = "-"
    checkout = Path(memory_core.__file__).parent  # memorybot's, the code measured
    with contextlib.suppress(OSError):
        commit = (
            subprocess.run(
                ["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"],
                capture_output=True,
                text=True,
                timeout=5,
                check=False,
            ).stdout.strip()
            or "-"
        )
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "store": "Redis" if settings.store.redis_url else "embedded store",
        "memorybot": f"{version('memorybot')} ({commit})",
        "redis_py": version("redis"),
        "langchain_classic": version("langchain-classic"),
        "openai": version("openai"),
    }


def run(settings: Settings, *, quick: bool, out: Path, log: Log) -> dict[str, Any]:
    return asyncio.run(run_all(settings, quick=quick, out=out, log=log))
