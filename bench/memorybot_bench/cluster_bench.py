"""``memorybot bench cluster``: how evenly the nodes of a Redis Cluster share memorybot's work.

For each node count a local cluster is started (the testkit's
:class:`~memorybot_testkit.redis_servers.LocalCluster`: its own processes on loopback, stopped
afterwards), and a core on it runs three phases over
many scopes: the ingest of ``messages`` messages spread over ``scopes`` scopes, a rollover
sweep past midnight, and a question and its answer in every scope from a stand-in model
(the fake OpenAI-compatible server, through the real client and the fleet's LLM rate
limit). Before
each phase every node's command counters are zeroed (``CONFIG RESETSTAT``); after it,
``INFO commandstats`` gives the commands each node served (those a Lua script runs count
too: they are work the node does). A node's share is its part of the total;
``max_share_over_ideal`` is the largest share times the node count: 1.0 is perfectly even,
3.0 on three nodes is one node doing everything. ``cpu_max_share_over_ideal`` is the same
for the CPU time of each node's process (``INFO cpu``), which also weighs what a command
costs (a round trip costs a node more than a command inside a script).

The user's own store is never touched: the core's store is the local cluster.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import SecretStr

from config.settings import Settings
from memory_core.bootstrap import Core, build_core
from memory_core.clock import ManualClock
from memory_core.models import IncomingMessage
from memorybot_bench.harness import WORDS
from memorybot_testkit.converse import converse
from memorybot_testkit.openai_server import FakeOpenAI
from memorybot_testkit.redis_servers import LocalCluster, server_binary, server_version

TARGET = 1.5  # the bar: no node serves more than 1.5x its even share
DAY = datetime(2025, 8, 11, 9, 0, tzinfo=UTC)  # a Monday
Progress = Callable[[int], None]


def shares(calls: Sequence[int]) -> dict[str, Any]:
    """Each node's part of the commands, and the largest over the even part (1.0: even)."""
    total = sum(calls)
    parts = [c / total if total else 0.0 for c in calls]
    return {
        "calls": list(calls),
        "shares": [round(p, 4) for p in parts],
        "max_share_over_ideal": round(max(parts) * len(calls), 3) if total else 0.0,
    }


def cluster_settings(settings: Settings, url: str, llm_url: str) -> Settings:
    """``settings`` on the local cluster and the stand-in model; no compaction while the
    messages come in (the sweep does the day's work), recall by words (the local embedding
    model is CPU, not Redis), a fleet rate limit high enough never to wait."""
    sections = {
        "store": {"redis_url": SecretStr(url), "cluster": True},
        "llm": {
            "base_url": llm_url,
            "api_key": None,
            "max_retries": 0,
            "concurrency": 16,
            "rpm_limit": 10**9,
        },
        "memory": {
            "compact_trigger_tokens": 10**9,
            "recall_embedder": "off",
            "timezone": "UTC",
        },
        "scheduler": {"concurrency": 16, "lease_s": 3600},
    }
    return settings.model_copy(
        update={name: getattr(settings, name).model_copy(update=f) for name, f in sections.items()}
    )


def _overall(phases: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The phases together: commands and CPU time summed per node."""
    calls = [sum(col) for col in zip(*(p["calls"] for p in phases.values()), strict=True)]
    cpu = [sum(col) for col in zip(*(p["cpu_s"] for p in phases.values()), strict=True)]
    return {**shares(calls), **_cpu(cpu)}


def _cpu(cpu: Sequence[float]) -> dict[str, Any]:
    total = sum(cpu)
    return {
        "cpu_s": [round(s, 3) for s in cpu],
        "cpu_max_share_over_ideal": round(max(cpu) * len(cpu) / total, 3) if total else 0.0,
    }


async def _phase(
    cluster: LocalCluster, units: int, work: Callable[[], Awaitable[None]]
) -> dict[str, Any]:
    cluster.reset_stats()
    cpu_before = cluster.cpu_seconds()
    started = time.perf_counter()
    await work()
    seconds = time.perf_counter() - started
    cpu = [after - before for after, before in zip(cluster.cpu_seconds(), cpu_before, strict=True)]
    return {
        **shares(cluster.command_calls()),
        **_cpu(cpu),
        "seconds": round(seconds, 3),
        "per_s": round(units / seconds, 1) if seconds > 0 else 0.0,
    }


async def _run_phases(
    core: Core,
    cluster: LocalCluster,
    clock: ManualClock,
    scopes: int,
    messages: int,
    tick: Progress,
) -> dict[str, dict[str, Any]]:
    names = [f"bench:c{i}" for i in range(scopes)]

    async def ingest() -> None:
        for i in range(messages):
            clock.set(DAY + timedelta(seconds=i))
            text = " ".join(WORDS[(i * 7 + j) % len(WORDS)] for j in range(8 + i % 20))
            msg = IncomingMessage(scope=names[i % scopes], text=text, author=f"user{i % 7}")
            await core.intake.accept(msg)
            tick(1)

    async def sweep() -> None:
        clock.set(DAY + timedelta(days=1, minutes=1))
        await core.scheduler.sweep(force=True)
        await core.drain()
        tick(scopes)

    async def replies() -> None:
        for name in names:  # asked by name: stored, answered, the answer stored
            ask = IncomingMessage(
                scope=name, text="what did we decide?", author="user1", addressed=True
            )
            await converse(core, ask)
            tick(1)

    phases = {"ingest": await _phase(cluster, messages, ingest)}
    phases["sweep"] = await _phase(cluster, scopes, sweep)
    phases["replies"] = await _phase(cluster, scopes, replies)
    return phases


async def bench_cluster(
    settings: Settings,
    *,
    nodes: Sequence[int],
    scopes: int,
    messages: int,
    progress: Progress | None = None,
) -> dict[str, Any]:
    done = 0

    def tick(n: int) -> None:
        nonlocal done
        done += n
        if progress is not None:
            progress(done)

    rows = []
    async with FakeOpenAI() as fake:
        for count in nodes:
            with LocalCluster(count) as cluster:
                clock = ManualClock(DAY)
                core = await build_core(
                    cluster_settings(settings, cluster.url, fake.base_url), clock=clock
                )
                try:
                    phases = await _run_phases(core, cluster, clock, scopes, messages, tick)
                finally:
                    await core.close()
                overall = _overall(phases)
                worst = max(p["max_share_over_ideal"] for p in phases.values())
                rows.append(
                    {
                        "nodes": count,
                        "ports": [server.port for server in cluster.servers],
                        "phases": phases,
                        "overall": overall,
                        "worst_phase_max_share_over_ideal": worst,
                        "even": worst <= TARGET,
                        "msgs_per_s": phases["ingest"]["per_s"],
                    }
                )
    return {
        "server": server_version(server_binary()),
        "scopes": scopes,
        "messages": messages,
        "replies": scopes,
        "target_max_share_over_ideal": TARGET,
        "clusters": rows,
    }
