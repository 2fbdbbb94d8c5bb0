"""More work at once than Redis connections: it waits for a connection, it does not fail.

redis-py's default asyncio pool holds 100 connections and raises "Too many connections" at
the 101st concurrent command; a rollover at concurrency 128 hit it in the benchmarks. The
store uses a blocking pool of store.max_connections instead. Here the pool is tiny (3) and
the work wide (a burst of 200 messages, a sweep at concurrency 32)."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from memory_core.clock import ManualClock
from memory_core.models import IncomingMessage
from tests.helpers import START, CoreFactory


async def test_a_burst_wider_than_the_pool_waits_instead_of_failing(
    make_core: CoreFactory,
) -> None:
    clock = ManualClock(START)
    core = await make_core(
        offline=True,
        clock=clock,
        store={"max_connections": 3},
        scheduler={"concurrency": 32},
    )
    pool = core.store.client.connection_pool
    assert pool.max_connections == 3
    scopes = [f"discord:1:{i}" for i in range(40)]
    burst = [
        core.intake.accept(IncomingMessage(scope=scopes[i % 40], text=f"m{i}", author="a"))
        for i in range(200)
    ]
    results = await asyncio.gather(*burst)
    assert all(r.stored for r in results)
    clock.set(START + timedelta(days=1, hours=1))
    report = await core.scheduler.sweep(force=True)
    assert report.worked == 40, report
    for scope in scopes:
        view = await core.admin.show(scope)
        assert view.messages == 5 and len(view.days) == 1, (scope, view.messages, view.days)
    assert len(pool._in_use_connections) + len(pool._available_connections) <= 3
