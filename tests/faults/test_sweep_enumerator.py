"""One process per sweep slot enumerates the due scopes while the others wait for the queue
to fill. An enumerator that is killed, stuck or failing holds the others up for seconds, not
for the hour its slot marker used to live."""

from __future__ import annotations

import asyncio
import json
import signal
import time
from datetime import timedelta

import pytest

from memory_core.clock import ManualClock
from memory_core.models import IncomingMessage
from tests.faults.child import read_until, spawn
from tests.helpers import START, CoreFactory, manual_maintenance

NO_COMPACTION = {"compact_trigger_tokens": 10**6}
SCOPES = [f"console:e{i}" for i in range(6)]
NEXT_DAY = START + timedelta(days=1, minutes=1)


async def _a_day_of_messages(make_core: CoreFactory) -> ManualClock:
    clock = ManualClock(START)
    core = await make_core(clock=clock, offline=True, memory=NO_COMPACTION)
    manual_maintenance(core)
    for i, scope in enumerate(SCOPES):
        clock.set(START + timedelta(seconds=i))
        await core.intake.accept(IncomingMessage(scope=scope, text=f"note {i}", author="A"))
    clock.set(NEXT_DAY)
    return clock


async def test_a_killed_enumerator_holds_the_other_worker_up_for_seconds(
    make_core: CoreFactory, clean_redis: str
) -> None:
    await _a_day_of_messages(make_core)
    env = {"REDIS_URL": clean_redis, "CHILD_NOW": NEXT_DAY.isoformat()}
    stuck = await spawn("sweep-stuck", env)
    worker: asyncio.subprocess.Process | None = None
    try:
        await read_until(stuck, "enumerating")  # it won the slot and is filling the queue
        worker = await spawn("sweep", env)
        await read_until(worker, "sweeping")
        # While the enumerator lives (its 3 s marker kept alive by its heartbeat) the other
        # worker waits for the queue it is filling.
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(asyncio.shield(worker.wait()), timeout=4)
        stuck.send_signal(signal.SIGKILL)
        await stuck.wait()
        killed_at = time.monotonic()
        out, err = await asyncio.wait_for(worker.communicate(), timeout=30)
        waited = time.monotonic() - killed_at
    finally:
        for proc in (stuck, worker):
            if proc is not None and proc.returncode is None:
                proc.kill()
                await proc.wait()
    assert worker.returncode == 0, err.decode()[-1500:]
    report = json.loads(out.decode().splitlines()[-2])
    assert waited < 15, f"the worker waited {waited:.1f}s for a dead enumerator"
    # The survivor enumerated the slot itself and rolled every scope over.
    assert report["enumerated"] and report["days_closed"] == len(SCOPES)


async def test_an_enumerator_that_fails_clears_its_marker(make_core: CoreFactory) -> None:
    clock = await _a_day_of_messages(make_core)
    failing = await make_core(clock=clock, offline=True, memory=NO_COMPACTION)

    async def broken_index(**_: object):  # type: ignore[no-untyped-def]
        raise ConnectionError("the scopes index could not be read")
        yield []

    failing.scheduler.fleet.states = broken_index  # type: ignore[method-assign]
    with pytest.raises(ConnectionError):
        await failing.scheduler.sweep()
    marker = failing.store.keys.fleet_sweep(failing.scheduler.slot())
    assert await failing.store.client.get(marker) is None
    # So the next worker of the same slot enumerates it at once instead of waiting.
    other = await make_core(clock=clock, offline=True, memory=NO_COMPACTION)
    started = time.monotonic()
    report = await other.scheduler.sweep()
    assert report.enumerated and report.days_closed == len(SCOPES)
    assert time.monotonic() - started < 5


async def test_workers_wait_a_bounded_time_for_a_live_but_stuck_enumerator(
    make_core: CoreFactory,
) -> None:
    clock = await _a_day_of_messages(make_core)
    core = await make_core(clock=clock, offline=True, memory=NO_COMPACTION)
    scheduler = core.scheduler
    # Another process won the slot and keeps its marker alive, but never fills the queue.
    marker = core.store.keys.fleet_sweep(scheduler.slot())
    await core.store.client.set(marker, "enumerating:elsewhere", px=60_000)
    scheduler.enumeration_wait_s = 0.5
    started = time.monotonic()
    report = await asyncio.wait_for(scheduler.sweep(), timeout=10)
    assert time.monotonic() - started < 5
    assert not report.enumerated and report.worked == 0
