"""Killed with SIGKILL mid-compaction, mid-rollover and mid-forget, memorybot comes back
consistent: no duplicate day, no lost raw message, a forgotten text stays forgotten."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from pathlib import Path

from memory_core.clock import ManualClock
from memory_core.models import IncomingMessage
from tests.fakes.openai_server import FakeOpenAI
from tests.helpers import START, CoreFactory, lock_expired, manual_maintenance, scope_values

ROOT = Path(__file__).parents[2]
SCOPE = "console:crash"
FAST = {"compact_trigger_tokens": 200, "compact_min_messages": 5, "compact_keep_tokens": 0}


async def _spawn(action: str, env: dict[str, str]) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.faults.child",
        action,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), **env},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def _kill_when(
    proc: asyncio.subprocess.Process, condition: Callable[[], Awaitable[bool]]
) -> None:
    for _ in range(600):
        if await condition():
            proc.send_signal(signal.SIGKILL)
            await proc.wait()
            return
        if proc.returncode is not None:
            break
        await asyncio.sleep(0.01)
    out, err = await proc.communicate()
    raise AssertionError(f"the child was not caught in the act: {out!r} {err[-800:]!r}")


async def _messages(core, clock: ManualClock, n: int, day: datetime) -> None:  # type: ignore[no-untyped-def]
    for i in range(n):
        clock.set(day + timedelta(minutes=i))
        await core.intake.accept(
            IncomingMessage(scope=SCOPE, text=f"note {i} about the launch plan " * 3, author="A")
        )


def _env(redis_url: str, fake: FakeOpenAI, now: datetime, **extra: str) -> dict[str, str]:
    return {
        "REDIS_URL": redis_url,
        "OPENAI_BASE_URL": fake.base_url,
        "CHILD_NOW": now.isoformat(),
        "CHILD_SCOPE": SCOPE,
        **extra,
    }


async def test_killed_during_compaction(
    make_core: CoreFactory, fake_llm: FakeOpenAI, clean_redis: str
) -> None:
    clock = ManualClock(START)
    core = await make_core(clock=clock, memory=FAST, scheduler={"lock_ttl_s": 1.0})
    manual_maintenance(core)
    await _messages(core, clock, 20, START)
    fake_llm.slow = {"compact": 60.0}
    proc = await _spawn("maintain", _env(clean_redis, fake_llm, START + timedelta(hours=1)))
    await _kill_when(proc, lambda: _true(fake_llm.count("compact") >= 1))
    fake_llm.slow = {}
    state = await core.repo.reads.state(SCOPE)
    assert state.short == "" and state.short_upto == ""  # nothing half-written
    assert await core.repo.reads.log_length(SCOPE) == 20
    # The dead child's lock runs out: Redis expires it (PX), in real time.
    await lock_expired(core.store.client, core.store.keys.scope(SCOPE).lock)
    clock.set(START + timedelta(hours=1))
    report = await core.maintenance.maintain(SCOPE)
    assert report.compactions == 1
    assert (await core.repo.reads.state(SCOPE)).short.startswith("S:")
    assert await core.repo.reads.log_length(SCOPE) == 20


async def test_killed_during_rollover(
    make_core: CoreFactory, fake_llm: FakeOpenAI, clean_redis: str
) -> None:
    clock = ManualClock(START)
    core = await make_core(clock=clock, memory=FAST, scheduler={"lock_ttl_s": 1.0})
    manual_maintenance(core)
    await _messages(core, clock, 12, START)
    fake_llm.slow = {"refresh": 60.0}  # the day is closed, then the tier refresh hangs
    next_day = START + timedelta(days=1, hours=1)
    proc = await _spawn("maintain", _env(clean_redis, fake_llm, next_day))
    await _kill_when(proc, lambda: _true(fake_llm.count("refresh") >= 1))
    fake_llm.slow = {}
    assert [d.day for d in await core.repo.reads.days(SCOPE)] == ["2025-08-11"]
    assert (await core.repo.reads.state(SCOPE)).refresh_pending
    await lock_expired(core.store.client, core.store.keys.scope(SCOPE).lock)
    clock.set(next_day)
    for _ in range(2):  # twice: the second run must change nothing
        await core.maintenance.maintain(SCOPE)
    assert [d.day for d in await core.repo.reads.days(SCOPE)] == ["2025-08-11"]
    state = await core.repo.reads.state(SCOPE)
    assert not state.refresh_pending and state.mid.startswith("MID:")
    assert await core.repo.reads.log_length(SCOPE) == 12


async def test_killed_during_forget(
    make_core: CoreFactory, fake_llm: FakeOpenAI, clean_redis: str
) -> None:
    clock = ManualClock(START)
    core = await make_core(clock=clock, offline=True, scheduler={"lock_ttl_s": 1.0})
    secret = "Zebra-Pass-4471"
    k = core.store.keys.scope(SCOPE)
    # A big scope, loaded directly, so the forget takes long enough to be caught in the act.
    pipe = core.store.client.pipeline(transaction=False)
    base = int(START.timestamp() * 1000)
    for i in range(60_000):
        text = f"the code is {secret}" if i % 997 == 0 else f"ordinary message {i}"
        pipe.xadd(
            k.log,
            {"r": "user", "a": "A", "u": "a", "t": text, "ts": str(base + i), "p": "", "k": "5"},
            id=f"{base + i}-0",
        )
    await pipe.execute()
    await core.repo.writes.set_fields(
        SCOPE, {"day": "2025-08-11", "short": f"They said {secret}.", "last_ms": base + 60_000}
    )
    proc = await _spawn("forget", _env(clean_redis, fake_llm, START, CHILD_TEXT=secret))
    await _kill_when(proc, lambda: _pending(core, k.forgets))
    assert (await core.repo.reads.state(SCOPE)).forgets_pending  # killed mid-forget
    # Restart: the next maintenance finishes the forget before anything else.
    await lock_expired(core.store.client, core.store.keys.scope(SCOPE).lock)
    clock.set(START + timedelta(hours=1))
    await core.maintenance.maintain(SCOPE)
    values = await scope_values(core, SCOPE)
    assert not [v for v in values if secret.lower() in v.lower()]
    assert await core.repo.reads.log_length(SCOPE) == 60_000 - 61
    assert not (await core.repo.reads.state(SCOPE)).forgets_pending


async def _true(value: bool) -> bool:
    return value


async def _pending(core, key: str) -> bool:  # type: ignore[no-untyped-def]
    return bool(await core.store.client.llen(key))
