"""Redis restarts (AOF on) while messages stream in: the bot holds what it cannot store,
stores it in order when Redis is back, and stores nothing twice."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from memory_core.bootstrap import build_core
from memory_core.clock import ManualClock
from memory_core.errors import StoreUnavailable
from memory_core.models import IncomingMessage
from memorybot_testkit.converse import converse
from memorybot_testkit.redis_servers import LocalRedis, free_port
from tests.helpers import START, make_settings


async def test_restart_mid_stream_loses_nothing_and_duplicates_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    port = free_port()
    server = LocalRedis(port, extra=("--appendonly", "yes", "--appendfsync", "always"))
    settings = make_settings(redis_url=server.url, memory={"compact_trigger_tokens": 10**6})
    clock = ManualClock(START)
    core = await build_core(settings, clock=clock, background=True)
    restarted: LocalRedis | None = None
    try:
        held_seen = 0
        for i in range(1000):
            if i == 400:
                # Stop Redis (SIGTERM: it fsyncs its AOF) and start it again on the same port
                # and data directory after a pause; messages keep coming meanwhile.
                server.proc.terminate()
                server.proc.wait(10)
            if i == 600:
                restarted = LocalRedis(
                    port,
                    extra=("--appendonly", "yes", "--appendfsync", "always", "--dir", server.dir),
                )
            clock.set(START + timedelta(seconds=i))
            result = await core.intake.accept(
                IncomingMessage(
                    scope=f"s{i % 100}",
                    text=f"message {i}",
                    author=f"u{i % 7}",
                    author_id=str(i % 7),
                )
            )
            held_seen = max(held_seen, core.intake.held)
            assert result.stored or result.buffered
            await asyncio.sleep(0.001)
        await asyncio.wait_for(_until(lambda: core.intake.held == 0), timeout=30)
        assert held_seen > 0, "the outage was noticed: messages were held"
        for scope in range(100):
            texts = [e.text for e in await core.repo.reads.all_entries(f"console:s{scope}")]
            expected = [f"message {i}" for i in range(scope, 1000, 100)]
            assert texts == expected, scope  # all there, in order, once
        assert any("holding messages in memory" in r.message for r in caplog.records)
    finally:
        await core.close()
        if restarted is not None:
            restarted.stop()
        server.stop()


async def test_during_an_outage_replies_apologise_and_past_the_bound_messages_are_refused() -> None:
    port = free_port()
    server = LocalRedis(port)
    core = await build_core(
        make_settings(redis_url=server.url, store={"outage_buffer": 3}), background=False
    )
    try:
        server.proc.terminate()
        server.proc.wait(10)
        reply = await converse(
            core, IncomingMessage(scope="b", text="hello?", author="a", direct=True)
        )
        assert reply is not None and reply.kind == "apology"
        assert "memory is unavailable" in reply.text
        for i in range(2):
            result = await core.intake.accept(IncomingMessage(scope="b", text=f"m{i}", author="a"))
            assert result.buffered
        assert core.intake.held == 3
        with pytest.raises(StoreUnavailable, match="NOT stored"):
            await core.intake.accept(IncomingMessage(scope="b", text="m3", author="a"))
    finally:
        core.intake.outage._buffer.clear()  # Redis will not come back in this test
        await core.close()
        server.stop()


async def _until(predicate) -> None:  # type: ignore[no-untyped-def]
    while not predicate():  # noqa: ASYNC110 - polls the pipeline's own counter, no event to wait on
        await asyncio.sleep(0.05)
