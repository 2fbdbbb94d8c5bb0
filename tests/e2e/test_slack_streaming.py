"""Answers streamed on Slack, end to end (the real Bolt app against the fake Slack, whose
rate limits are Slack's: each method's tier per workspace, a message a second per channel):
native streams (chat.startStream / appendStream / stopStream) in the answer's thread, paced
so that answers written at once never meet a 429; a workspace that does not allow streams
gets each answer in one post; and an answer is never posted twice, whatever happens to its
stream on the way.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack import FakeSlack
from tests.helpers import CoreFactory, answer_to, answering
from tests.slack_harness import (
    ALICE,
    BOB,
    C1,
    CAROL,
    T1,
    Harness,
    entries,
    slack_app_options,
    slack_settings,
    slack_workspace,
    start_harness,
)

pytestmark = pytest.mark.fake("slack")

MEMBERS = (ALICE, BOB, CAROL)
CHANNELS = ("C1", "C2", "C3", "C4", "C5")


@pytest.fixture
async def streaming(
    fake: FakeSlack, make_core: CoreFactory, fake_llm: FakeOpenAI
) -> AsyncIterator[Harness]:
    """The app with stream_replies on, a model that takes its time, over signed HTTP."""
    for channel in CHANNELS:
        fake.add_channel(channel, channel.lower(), members=MEMBERS)
    fake_llm.responder = answering
    fake_llm.stream_piece_delay = 0.05
    core = await make_core(
        slack=slack_settings(fake, stream_replies=True, stream_interval_s=0.2),
        llm={"concurrency": 8},
    )
    async for harness in start_harness("http", fake, core, fake_llm):
        yield harness


def thread_messages(fake: FakeSlack, channel: str, thread_ts: str) -> list[str]:
    """What the app wrote in a thread, as it reads now: its streams and its posts."""
    streamed = [
        (s.ts, s.text) for s in fake.streams if (s.channel, s.thread_ts) == (channel, thread_ts)
    ]
    posted = [
        (m.ts, m.text or "")
        for m in fake.posted_messages
        if (m.channel, m.thread_ts) == (channel, thread_ts)
    ]
    updated = {u.ts: u.text or "" for u in fake.updates}
    return [updated.get(ts, text) for ts, text in sorted(streamed + posted)]


async def answered(fake: FakeSlack, asked: list[tuple[str, str, int]]) -> None:
    """Wait until every question (channel, ts, number) reads its whole answer."""

    def done() -> bool | None:
        for channel, ts, number in asked:
            if "".join(thread_messages(fake, channel, ts)) != answer_to(number):
                return None
        return True

    await fake.wait_for(done, timeout=30, description="every answer complete")


def rate_limited(fake: FakeSlack) -> list[str]:
    return [f"{c.method} {c.params.get('channel')}" for c in fake.calls if c.status == 429]


@pytest.mark.parametrize("where", ["five channels", "one channel"])
async def test_five_answers_streamed_at_once_keep_slacks_limits_and_each_is_shown_once(
    streaming: Harness, where: str
) -> None:
    """Five members ask at once, in five channels of the workspace (the streams share its
    Tier 2 and Tier 4 allowances) or in five threads of one channel (which takes a new
    message a second). Slack never answers 429, each answer reads whole in its thread, once:
    a stream that found no room to start is posted whole when complete."""
    fake = streaming.fake
    channels = CHANNELS if where == "five channels" else (C1,) * 5
    events = await asyncio.gather(
        *(
            streaming.mention(f"question {n}?", user=MEMBERS[n % 3], channel=channel)
            for n, channel in enumerate(channels)
        )
    )
    asked = [(str(e["channel"]), str(e["ts"]), n) for n, e in enumerate(events)]
    await answered(fake, asked)
    await streaming.bot.drain()
    assert rate_limited(fake) == []
    for channel, ts, number in asked:
        assert thread_messages(fake, channel, ts) == [answer_to(number)]  # one message
    assert fake.streams, "no answer was streamed"
    assert all(s.state == "stopped" for s in fake.streams)
    assert fake.updates == []  # every stream was completed by its stop
    if where == "five channels":
        assert len(fake.streams) == 5 and sum(s.appends for s in fake.streams) >= 5
    remembered = []
    for channel in sorted(set(channels)):
        log = await entries(streaming.core, f"slack:{T1}:{channel}")
        remembered += [e.text for e in log if e.role == "assistant"]
    assert sorted(remembered) == sorted(answer_to(n) for n in range(5))


@pytest.mark.fake(
    "slack", **slack_app_options(), stream_refusal="not_allowed", setup=slack_workspace
)
async def test_a_workspace_that_refuses_streams_gets_each_answer_in_one_post(
    streaming: Harness,
) -> None:
    """chat.startStream refused (the plan does not allow it): the answer is posted whole,
    once, and the workspace is not asked to stream again for a while."""
    fake = streaming.fake
    asked = []
    for n, channel in enumerate(("C1", "C2")):
        event = await streaming.mention(f"question {n}?", channel=channel)
        asked.append((channel, str(event["ts"]), n))
        await answered(fake, asked)
    await streaming.bot.drain()
    assert [c.error for c in fake.calls_of("chat.startStream")] == ["not_allowed"]
    assert [(m.channel, m.text) for m in fake.posted_messages] == [
        ("C1", answer_to(0)),
        ("C2", answer_to(1)),
    ]
    assert fake.streams == [] and fake.updates == [] and rate_limited(fake) == []


async def test_a_stream_slack_ended_on_the_way_is_completed_in_place(
    streaming: Harness,
) -> None:
    """Slack ends a stream that waited too long (appends then fail with
    message_not_in_streaming_state): its message is completed with chat.update, never
    posted again."""
    fake = streaming.fake
    event = await streaming.mention("question 7?")
    [started] = await fake.wait_for_calls("chat.startStream", ok_only=True)
    fake.time_out_stream(str(started.response["ts"]))
    await answered(fake, [(C1, str(event["ts"]), 7)])
    await streaming.bot.drain()
    [stream] = fake.streams
    assert stream.timed_out and stream.text == answer_to(7)
    assert [u.ts for u in fake.updates] == [stream.ts]
    assert fake.posted_messages == []


async def test_a_stream_that_cannot_be_completed_is_followed_by_what_it_lacks_only(
    streaming: Harness,
) -> None:
    """The stream ended, and Slack refuses the update that would complete it: what the
    stream does not show follows it in one post, from its last whole word, and no part of
    the answer is shown twice."""
    fake = streaming.fake
    event = await streaming.mention("question 8?")
    [started] = await fake.wait_for_calls("chat.startStream", ok_only=True)
    await fake.wait_for_calls("chat.appendStream", ok_only=True)
    fake.time_out_stream(str(started.response["ts"]))
    fake.fail_next(method="chat.update", error="cant_update_message")
    await fake.wait_for_messages(count=1, timeout=30)
    await streaming.bot.drain()
    [stream] = fake.streams
    [rest] = fake.posted_messages
    answer = answer_to(8)
    shown = stream.text
    assert shown and answer.startswith(shown) and shown != answer
    assert rest.thread_ts == event["ts"]
    text = rest.text or ""
    assert text.startswith("…")
    words_shown, words_posted = shown.split(), text.removeprefix("…").split()
    # the posted part starts at the first word the stream does not show whole
    assert words_shown[: len(words_shown) - 1] + words_posted == answer.split() or (
        words_shown + words_posted == answer.split()
    )
