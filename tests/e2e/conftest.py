"""Fixtures of the end-to-end tests: the Slack app running against the fake Slack (over HTTP,
Socket Mode or both), the CLI in a private home. The fake platforms themselves (``fake``,
``world``) are in tests/conftest.py, shared with the fault tests.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bots.slack.bot import SlackBot
from memory_core.clock import ManualClock
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack import FakeSlack
from tests.helpers import (
    CLI,
    CoreFactory,
    quoting_facts,
)
from tests.slack_harness import (
    PHONE,
    SINCE,
    SMALL,
    Harness,
    VirtualTime,
    quiet_replies,
    slack_settings,
    start_harness,
)


@pytest.fixture(params=["http", "socket"])
async def slack(
    request: pytest.FixtureRequest, fake: FakeSlack, make_core: CoreFactory, fake_llm: FakeOpenAI
) -> AsyncIterator[Harness]:
    core = await make_core(slack=slack_settings(fake))
    async for harness in start_harness(request.param, fake, core, fake_llm):
        yield harness


@pytest.fixture
async def http(
    fake: FakeSlack, make_core: CoreFactory, fake_llm: FakeOpenAI
) -> AsyncIterator[Harness]:
    core = await make_core(slack=slack_settings(fake))
    async for harness in start_harness("http", fake, core, fake_llm):
        yield harness


@pytest.fixture(params=["http", "socket"])
async def summarising(
    request: pytest.FixtureRequest, fake: FakeSlack, make_core: CoreFactory, fake_llm: FakeOpenAI
) -> AsyncIterator[Harness]:
    """The app over a core that compacts after a few messages, on a clock the test moves."""
    fake_llm.responder = quiet_replies(quoting_facts(PHONE))
    clock = ManualClock(datetime.now(UTC))  # the fake's ts are the real time
    core = await make_core(slack=slack_settings(fake), clock=clock, memory=SMALL)
    async for harness in start_harness(request.param, fake, core, fake_llm):
        yield harness


@pytest.fixture
async def small_window(
    fake: FakeSlack, make_core: CoreFactory, fake_llm: FakeOpenAI
) -> AsyncIterator[Harness]:
    """A window of a few messages: what a question finds beyond them, recall found."""
    memory = {"window_tokens": 60, "window_min_tokens": 0}
    core = await make_core(slack=slack_settings(fake), memory=memory)
    async for harness in start_harness("http", fake, core, fake_llm):
        yield harness


@pytest.fixture
def cli(tmp_path: Path) -> CLI:
    return CLI(tmp_path)


@pytest.fixture
async def slack_door(fake: FakeSlack, make_core: CoreFactory) -> SlackBot:
    """The Slack door's listeners over a core, not served: what reads a channel's past."""
    return SlackBot(await make_core(slack=slack_settings(fake)))


@pytest.fixture
def virtual_time(fake: FakeSlack) -> VirtualTime:
    """Waits that move a clock and the fake Slack's rate windows instead of sleeping."""
    return VirtualTime(fake)


@pytest.fixture(params=["http", "socket"])
async def learning(
    request: pytest.FixtureRequest, fake: FakeSlack, make_core: CoreFactory, fake_llm: FakeOpenAI
) -> AsyncIterator[Harness]:
    """The app over a core ten days after the channel's past (its history paced fast)."""
    core = await make_core(
        slack=slack_settings(fake),
        clock=ManualClock(SINCE + timedelta(days=10)),
        learn={"slack_requests_per_minute": 1000},
        offline=True,
    )
    async for harness in start_harness(request.param, fake, core, fake_llm):
        yield harness
