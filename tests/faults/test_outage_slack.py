"""A real Redis restarts while a Slack workspace talks (the real Bolt app over signed HTTP
against the fake Slack): nothing is lost, and Slack's redeliveries and the double delivery
of a mention (app_mention + message) are stored and answered once."""

from __future__ import annotations

import pytest

from config.prompts import load_prompts
from memory_core.bootstrap import build_core
from memory_core.clock import ManualClock
from memorybot_testkit.redis_servers import LocalRedis, free_port
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack import FakeSlack
from tests.helpers import AOF, START, make_settings, until
from tests.slack_harness import SCOPE, slack_settings, start_harness

pytestmark = pytest.mark.fake("slack")


async def test_a_redis_restart_loses_no_message_and_doubles_none(
    fake: FakeSlack, fake_llm: FakeOpenAI
) -> None:
    port = free_port()
    server = LocalRedis(port, extra=AOF)
    restarted: LocalRedis | None = None
    settings = make_settings(
        redis_url=server.url, llm_url=fake_llm.base_url, slack=slack_settings(fake)
    )
    core = await build_core(settings, clock=ManualClock(START), background=False)
    try:
        async for slack in start_harness("http", fake, core, fake_llm):
            await slack.say("before")
            await slack.settle()  # handled (Bolt acks first, then runs the listener)
            server.proc.terminate()  # SIGTERM: Redis fsyncs its AOF and stops
            server.proc.wait(10)
            during = await slack.say("during the outage")
            await slack.mention("anyone there?")  # app_mention + message, one ts
            [apology] = await slack.replies(1)
            assert core.intake.held == 2
            restarted = LocalRedis(port, extra=(*AOF, "--dir", server.dir))
            await until(lambda: core.intake.held == 0)
            await slack.deliver(during)  # Slack retries a delivery it thinks failed
            await slack.say("after")
            await slack.settle()
        texts = [e.text for e in await core.repo.reads.all_entries(SCOPE) if e.role == "user"]
    finally:
        await core.close()
        if restarted is not None:
            restarted.stop()
        server.stop()
    assert (apology.text or "") == load_prompts("en").store_down
    assert len(fake.posted_messages) == 1
    assert texts == ["before", "during the outage", "@memorybot anyone there?", "after"]
