"""A real Redis restarts while members talk on Discord (the real discord.py client against
the fake Discord): nothing they said is lost or stored twice. The duplicate check is part
of storing the message (one round trip), so an outage sends messages to the outage buffer
instead of failing before it."""

from __future__ import annotations

import pytest

from config.prompts import load_prompts
from memory_core.bootstrap import build_core
from memory_core.clock import ManualClock
from memorybot_testkit.redis_servers import LocalRedis, free_port
from tests.discord_world import World, say, serving
from tests.fakes.discord import FakeDiscord
from tests.fakes.openai_server import FakeOpenAI
from tests.helpers import AOF, START, make_settings, until

pytestmark = pytest.mark.fake("discord")


async def test_a_redis_restart_loses_no_message_and_doubles_none(
    fake: FakeDiscord, world: World, fake_llm: FakeOpenAI
) -> None:
    port = free_port()
    server = LocalRedis(port, extra=AOF)
    restarted: LocalRedis | None = None
    settings = make_settings(redis_url=server.url, llm_url=fake_llm.base_url)
    core = await build_core(settings, clock=ManualClock(START), background=False)
    scope = world.scope(world.general)
    try:
        async with serving(fake, core) as bot:
            for i in range(3):
                await say(fake, bot, world.general, world.alice, f"before {i}")
            server.proc.terminate()  # SIGTERM: Redis fsyncs its AOF and stops
            server.proc.wait(10)
            for i in range(3):
                await say(fake, bot, world.general, world.bob, f"during {i}")
            await say(fake, bot, world.general, world.alice, "anyone?", mentions_bot=True)
            [apology] = await fake.wait_for_messages(world.general.id, 1)
            assert core.intake.held == 4
            restarted = LocalRedis(port, extra=(*AOF, "--dir", server.dir))
            await until(lambda: core.intake.held == 0)
            for i in range(2):
                await say(fake, bot, world.general, world.alice, f"after {i}")
        texts = [e.text for e in await core.repo.reads.all_entries(scope) if e.role == "user"]
    finally:
        await core.close()
        if restarted is not None:
            restarted.stop()
        server.stop()
    assert apology.content == load_prompts("en").store_down
    assert texts == [
        *(f"before {i}" for i in range(3)),
        *(f"during {i}" for i in range(3)),
        "@memorybot anyone?",
        *(f"after {i}" for i in range(2)),
    ]
