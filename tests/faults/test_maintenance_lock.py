"""A scope's maintenance lock says who holds it (host, pid, since) and until when. A holder
that was killed is taken over at once, not after the lock's 30 s; a live one is named in the
skip; a renewal Redis refuses never hides the work's own outcome nor keeps the lock."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError

from memory_core.bootstrap import Core
from memory_core.clock import ManualClock
from memory_core.errors import StoreError
from memory_core.models import IncomingMessage
from memory_core.store.repo import MemoryRepo
from memory_core.store.scripts import SHAS
from tests.fakes.openai_server import FakeOpenAI
from tests.faults.child import spawn
from tests.helpers import START, CoreFactory, manual_maintenance, spawn_memorybot

SCOPE = "console:locked"
FAST = {"compact_trigger_tokens": 200, "compact_min_messages": 5, "compact_keep_tokens": 0}
NEXT_DAY = START + timedelta(days=1, hours=1)


async def _messages(core: Core, clock: ManualClock, n: int) -> None:
    manual_maintenance(core)
    for i in range(n):
        clock.set(START + timedelta(minutes=i))
        await core.intake.accept(
            IncomingMessage(scope=SCOPE, text=f"note {i} about the launch plan " * 3, author="A")
        )


async def _rollover(home: Path, env: dict[str, str], *args: str) -> tuple[int, str, str]:
    proc = await spawn_memorybot(home, "rollover", "--at", NEXT_DAY.isoformat(), *args, env=env)
    out, err = await asyncio.wait_for(proc.communicate(), timeout=90)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def _until(condition: Any, what: str) -> None:
    for _ in range(1000):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


async def test_a_killed_holders_lock_is_taken_over_at_once(
    make_core: CoreFactory, fake_llm: FakeOpenAI, clean_redis: str, tmp_path: Path
) -> None:
    clock = ManualClock(START)
    core = await make_core(clock=clock, memory=FAST)
    await _messages(core, clock, 12)
    fake_llm.slow = {"refresh": 60.0}  # the child closes the day, then hangs in the refresh
    env = {
        "REDIS_URL": clean_redis,
        "OPENAI_BASE_URL": fake_llm.base_url,
        "CHILD_NOW": NEXT_DAY.isoformat(),
        "CHILD_SCOPE": SCOPE,
        "CHILD_LOCK_TTL_S": "30",
    }
    child = await spawn("maintain", env)
    try:
        await _until(lambda: fake_llm.count("refresh") >= 1, "the child's tier refresh")
    finally:
        child.send_signal(signal.SIGKILL)
        await child.wait()
    fake_llm.slow = {}
    lock = core.store.keys.scope(SCOPE).lock
    assert await core.store.client.pttl(lock) > 20_000, "the dead child's lock is still there"
    code, out, err = await _rollover(
        tmp_path, {"REDIS_URL": clean_redis, "OPENAI_BASE_URL": fake_llm.base_url}, "--json"
    )
    assert code == 0, err
    report = json.loads(out)
    assert report["skipped"] == 0 and report["held"] == []
    assert report["refreshes"] == 1
    state = await core.repo.reads.state(SCOPE)
    assert not state.refresh_pending and state.mid.startswith("MID:")
    assert [d.day for d in await core.repo.reads.days(SCOPE)] == ["2025-08-11"]


async def test_a_live_holder_is_named_with_its_expiry(
    make_core: CoreFactory, fake_llm: FakeOpenAI, clean_redis: str, tmp_path: Path
) -> None:
    clock = ManualClock(START)
    core = await make_core(clock=clock, memory=FAST, llm={"timeout_s": 120.0})
    await _messages(core, clock, 12)
    clock.set(NEXT_DAY)
    fake_llm.slow = {"refresh": 60.0}
    holding = asyncio.create_task(core.maintainer.run(SCOPE))  # this process holds the lock
    try:
        await _until(lambda: fake_llm.count("refresh") >= 1, "the tier refresh")
        env = {"REDIS_URL": clean_redis, "OPENAI_BASE_URL": fake_llm.base_url}
        code, out, err = await _rollover(tmp_path, env, "--json")
        assert code == 0, err
        report = json.loads(out)
        assert report["skipped"] == 1
        [held] = report["held"]
        assert held["scope"] == SCOPE
        assert held["holder"]["host"] == socket.gethostname()
        assert held["holder"]["pid"] == os.getpid()
        until = datetime.fromisoformat(held["until"])
        assert timedelta(seconds=5) < until - datetime.now(UTC) <= timedelta(seconds=30)
        code, out, err = await _rollover(tmp_path, env)
        assert code == 0, err
        assert f"{SCOPE}: skipped, its maintenance lock is held by" in err
        assert f"pid {os.getpid()}" in err and "until" in err
    finally:
        holding.cancel()
        fake_llm.slow = {}
        with pytest.raises(asyncio.CancelledError):
            await holding


class RenewRefused(Redis):
    """A real Redis connection on which renewing a lock fails (the connection drops), and the
    step's next read fails too, once the renewal has."""

    renew_failed: asyncio.Event

    async def evalsha(self, sha: str, numkeys: int, *keys_and_args: Any) -> Any:
        if sha == SHAS["renew_lock"]:
            self.renew_failed.set()
            raise RedisConnectionError("Connection reset by peer while renewing")
        return await super().evalsha(sha, numkeys, *keys_and_args)

    async def xrange(self, *args: Any, **kwargs: Any) -> Any:
        await asyncio.wait_for(self.renew_failed.wait(), timeout=10)
        raise ResponseError("OOM command not allowed when used memory > 'maxmemory'.")


async def test_a_failed_renewal_neither_hides_the_steps_error_nor_keeps_the_lock(
    make_core: CoreFactory, clean_redis: str
) -> None:
    clock = ManualClock(START)
    core = await make_core(clock=clock, offline=True, memory=FAST, scheduler={"lock_ttl_s": 0.3})
    await _messages(core, clock, 12)  # compaction is due: the step reads the log
    client = RenewRefused.from_url(clean_redis, decode_responses=True)
    assert isinstance(client, RenewRefused)
    client.renew_failed = asyncio.Event()
    core.maintainer.repo = MemoryRepo(client, core.store.keys)
    try:
        with pytest.raises(StoreError, match="OOM"):  # translated at the store boundary
            await core.maintainer.run(SCOPE)
    finally:
        await client.aclose()
    assert client.renew_failed.is_set()
    assert await core.store.client.get(core.store.keys.scope(SCOPE).lock) is None, "unlocked"
