"""Metrics are counted in memory and shared through Redis per minute, fleet-wide."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime

from memory_core.fleet.metrics import read_minutes, read_recall_caches, totals
from memory_core.models import IncomingMessage
from memory_core.store.heartbeats import Heartbeats
from memorybot_testkit.converse import converse
from tests.fakes.openai_server import FakeOpenAI
from tests.helpers import CoreFactory


async def test_two_processes_add_up(make_core: CoreFactory, fake_llm: FakeOpenAI) -> None:
    a = await make_core()
    b = await make_core()
    for core, n in ((a, 3), (b, 2)):
        for i in range(n):
            await converse(
                core, IncomingMessage(scope="m", text=f"hello {i}", author="A", direct=True)
            )
    fake_llm.fail_next(1, purposes=("reply",))
    await converse(a, IncomingMessage(scope="m", text="again", author="A", direct=True))
    now = datetime.now(UTC)
    await a.metrics.flush(now)
    await b.metrics.flush(now)
    assert await a.metrics.flush(now) == 0  # nothing new: nothing written
    sums = totals(await read_minutes(a.metrics.store, minutes=2, now=now))
    assert sums["messages"] == 2 * 5 + 1  # each answered question stores its answer too
    assert sums["replies_llm"] == 5 and sums["replies_apology"] == 1
    assert sums["llm:reply:calls"] == 6 and sums["llm:reply:failures"] == 1
    assert sums["llm:reply:prompt_tokens"] > 0


async def test_sweeps_are_recorded_per_job(make_core: CoreFactory) -> None:
    core = await make_core(offline=True)
    await core.intake.accept(IncomingMessage(scope="s", text="hi", author="A"))
    report = await core.scheduler.sweep(force=True)
    await core.scheduler.record("manual", report)
    entry = json.loads(await core.store.client.hget(core.store.keys.sweeps, "manual"))
    assert entry["worker"] == core.scheduler.worker and "queued" in entry and "at" in entry


async def test_heartbeats_keep_the_live_and_drop_the_silent(make_core: CoreFactory) -> None:
    """The one registry the embedding workers and the recall indexes report to: a beat is
    read back with its time, a status older than the TTL (a process that died) or one that
    cannot be read is dropped as it is read, and leaving drops the entry at once."""
    core = await make_core(offline=True)
    redis = core.store.client
    beats = Heartbeats(redis, core.store.keys.recall_caches, ttl_s=60)
    await beats.beat("alive", {"bytes": 10.0})
    await redis.hset(beats.key, "died", json.dumps({"bytes": 99, "at": time.time() - 61}))
    await redis.hset(beats.key, "garbled", "not json")
    [status] = await beats.live()
    assert status["bytes"] == 10 and abs(status["at"] - time.time()) < 5
    assert set(await redis.hkeys(beats.key)) == {"alive"}
    assert await read_recall_caches(redis, core.store.keys) == {
        "processes": 1,
        "bytes": 10,
        "scopes": 0,
        "limit_bytes": 0,
    }
    await beats.leave("alive")
    assert await beats.live() == [] and await redis.hkeys(beats.key) == []
