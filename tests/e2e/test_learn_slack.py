"""/memory learn on Slack as an admin uses it: the real Bolt app (HTTP and Socket Mode)
against the fake Slack Web API, a real Redis: the channel's past read with its threads, what
was found and what it costs said privately, learned on confirm, once."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest

from bots.slack.bot import run_slack
from memory_core.clock import ManualClock
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack import FakeSlack
from tests.helpers import CoreFactory
from tests.slack_harness import (
    ALICE,
    BOB,
    SCOPE,
    SINCE,
    Harness,
    entries,
    learn,
    past_ts,
    seed_past,
    slack_settings,
    start_harness,
)

pytestmark = pytest.mark.fake("slack")


async def test_an_admin_learns_the_channel_s_past_with_its_threads_once(
    learning: Harness,
) -> None:
    seed_past(learning.fake, messages=300, threads={5: 3, 100: 2})
    refused = await learn(learning, "learn 30", "*Only admins", user=BOB)
    assert "(/memory learn)" in refused

    found = await learn(learning, "learn 30", f"Found 305 new messages in {SCOPE}")
    assert "0 already remembered" in found and "/memory learn confirm" in found
    assert await entries(learning.core) == []  # nothing learned before confirm

    done = await learn(learning, "learn confirm", f"Learned 305 messages of {SCOPE}")
    assert "day records" in done
    log = await entries(learning.core)
    assert [e.text for e in log][:3] == ["message 0 for @Bob Builder", "message 1", "message 2"]
    assert len(log) == 300 and {e.author for e in log} == {"Alice", "Bob Builder", "Carol"}
    thread = await entries(learning.core, f"{SCOPE}:{past_ts(5)}")
    assert [e.text for e in thread] == [f"reply {n} to 5" for n in (1, 2, 3)]

    again = await learn(learning, "learn 30", f"Nothing new to learn in {SCOPE}")
    assert "305 messages already remembered" in again
    assert len(await entries(learning.core)) == 300


@pytest.fixture
async def learning_briefly(
    fake: FakeSlack, make_core: CoreFactory, fake_llm: FakeOpenAI
) -> AsyncIterator[Harness]:
    """As ``learning``, over HTTP, with rate-limit waits capped at a second."""
    core = await make_core(
        slack=slack_settings(fake),
        clock=ManualClock(SINCE + timedelta(days=10)),
        learn={"slack_requests_per_minute": 1000, "max_wait_s": 1.0},
        offline=True,
    )
    async for harness in start_harness("http", fake, core, fake_llm):
        yield harness


async def test_2000_messages_and_30_threads_interrupted_half_way_and_resumed(
    learning_briefly: Harness,
) -> None:
    slack = learning_briefly
    threads = {5 + 60 * k: 1 + k % 6 for k in range(30)}
    seed_past(slack.fake, messages=2000, threads=threads)
    replies = sum(threads.values())
    # Slack holds the thread reads back a minute after the twelfth: past the one-second cap.
    slack.fake.limit_rate("conversations.replies", per_minute=12)
    stopped = await learn(slack, "learn 30", f"The learn of {SCOPE} stopped")
    assert "Run /memory learn again to go on where it stopped" in stopped
    halfway = await slack.core.learner.status(SCOPE)
    assert halfway.status == "reading" and 0 < halfway.new < 2000 + replies

    slack.fake.limit_rate("conversations.replies", per_minute=10_000)
    slack.fake.age_rate_windows(60)
    found = await learn(slack, "learn 30", f"Found {2000 + replies} new messages in {SCOPE}")
    assert "0 already remembered" in found
    await learn(slack, "learn confirm", f"Learned {2000 + replies} messages of {SCOPE}")
    log = await entries(slack.core)
    assert [e.text.split(" for ")[0] for e in log] == [f"message {n}" for n in range(2000)]
    for parent, count in threads.items():
        thread = await entries(slack.core, f"{SCOPE}:{past_ts(parent)}")
        assert [e.text for e in thread] == [f"reply {r} to {parent}" for r in range(1, count + 1)]


async def test_a_learn_stops_with_the_app_and_goes_on_after(
    fake: FakeSlack, make_core: CoreFactory
) -> None:
    """The app is stopped (a deploy) while a learn waits between pages: the learn stops
    with it, no task left behind, and what it read is kept for the next /memory learn."""
    seed_past(fake, messages=2_000)
    core = await make_core(
        slack=slack_settings(fake),
        clock=ManualClock(SINCE + timedelta(days=10)),
        learn={"slack_requests_per_minute": 2},  # a page, then half a minute's wait
        offline=True,
    )
    app = asyncio.create_task(run_slack(core))
    await fake.wait_for_socket_connections(count=1)
    fields = fake.slash_command_payload(
        text="learn 30", user_id=ALICE, channel_id="C1", team_id="T1"
    )
    await fake.socket_send_slash_command(payload=fields)

    async def read_a_page() -> bool | None:
        return True if (await core.learner.status(SCOPE)).new > 0 else None

    for _ in range(200):
        if await read_a_page():
            break
        await asyncio.sleep(0.05)
    learns = [t for t in asyncio.all_tasks() if t.get_name() == f"learn {SCOPE}"]
    assert learns and not any(job.done() for job in learns)  # waiting for the next page
    app.cancel()
    with pytest.raises(asyncio.CancelledError):
        await app
    assert all(job.done() for job in learns), "the learn stopped with the app"
    halfway = await core.learner.status(SCOPE)
    assert halfway.status == "reading" and 0 < halfway.new < 2_000
