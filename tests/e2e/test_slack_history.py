"""Learning a Slack channel's past (bots/learn/slack_history.py) end to end: the door's own
slack_sdk client against the fake Slack's conversations.history / conversations.replies,
names and audience looked up as the live door does, on virtual time (a wait moves the
source's clock and the fake's rate windows; nothing sleeps).
"""

from __future__ import annotations

import json

import pytest
from slack_sdk.web.async_client import AsyncWebClient

from bots.slack.bot import SlackBot
from memory_core.scopes import Audience
from memory_core.service.past import LearnRefused, PastPage
from tests.fakes.slack import FakeSlack
from tests.slack_harness import (
    ALICE,
    BOB,
    BOT_TOKEN,
    C1,
    DM,
    SCOPE,
    SINCE,
    VirtualTime,
    learned,
    past_messages,
    past_source,
    past_ts,
    read_past,
    seed_past,
)

pytestmark = pytest.mark.fake("slack")

# 30 threads among 2,000 messages; one of them longer than a page (200) of replies.
THREADS = {5 + 60 * k: 1 + k % 6 for k in range(30)} | {1805: 450}


async def test_a_channel_with_2000_messages_and_30_threads_is_read_whole(
    fake: FakeSlack, slack_door: SlackBot, virtual_time: VirtualTime
) -> None:
    expected = seed_past(fake, threads=THREADS)
    pages = await read_past(past_source(slack_door, virtual_time))

    got = learned(pages)
    assert len(got) == len(set(got)) == len(expected)  # nothing twice
    assert set(got) == set(expected)
    messages = past_messages(pages)
    assert {m.role for m in messages} == {"user"}
    assert {m.audience for m in messages} == {Audience.SERVER}  # a public channel
    assert {m.author_id for m in messages} == {ALICE, BOB, "U3"}
    assert all(m.ts.timestamp() == float(m.platform_id) for m in messages)
    assert sum(page.skipped for page in pages) == 0
    # Every page but the last says where to go on; history pages of 200, the long thread
    # in three pages of replies.
    assert [bool(page.cursor) for page in pages] == [True] * (len(pages) - 1) + [False]
    histories = fake.calls_of("conversations.history", ok_only=True)
    assert len(histories) == 10 and all(c.params["limit"] == "200" for c in histories)
    replies = fake.calls_of("conversations.replies", ok_only=True)
    assert len(replies) == 31 + 2
    # Paced at 50 requests a minute per method, without a single 429.
    assert [c for c in fake.calls if c.status == 429] == []
    assert virtual_time.waits and max(virtual_time.waits) == pytest.approx(60 / 50)


@pytest.mark.parametrize("where", ["history", "first thread", "inside a thread", "last"])
async def test_reading_on_from_a_page_cursor_yields_the_rest_once(
    fake: FakeSlack, slack_door: SlackBot, virtual_time: VirtualTime, where: str
) -> None:
    seed_past(fake, threads=THREADS)
    pages = await read_past(past_source(slack_door, virtual_time))
    places = [json.loads(page.cursor) for page in pages[:-1]]
    stop = {
        "history": next(i for i, p in enumerate(places) if i > 3 and not p["threads"]),
        "first thread": next(i for i, p in enumerate(places) if p["threads"]),
        "inside a thread": next(i for i, p in enumerate(places) if p["replies"]),
        "last": len(pages) - 2,
    }[where]

    resumed = await read_past(past_source(slack_door, virtual_time), cursor=pages[stop].cursor)
    before, after = learned(pages[: stop + 1]), learned(resumed)
    assert after  # there was something left
    assert sorted(before + after) == sorted(learned(pages))
    assert len(set(before + after)) == len(before + after)


async def test_a_429_is_waited_out_and_the_reading_goes_on(
    fake: FakeSlack, slack_door: SlackBot, virtual_time: VirtualTime
) -> None:
    expected = seed_past(fake, messages=600, threads={10: 3, 20: 1, 300: 2})
    fake.rate_limit_next(method="conversations.history", retry_after=7)
    # Replies answered at 2 a minute: the source, pacing for 50, is told to wait.
    fake.limit_rate("conversations.replies", per_minute=2)

    pages = await read_past(past_source(slack_door, virtual_time))
    assert sorted(learned(pages)) == sorted(expected)
    assert 7 in virtual_time.waits
    limited = [c for c in fake.calls if c.status == 429]
    assert [c.method for c in limited] == ["conversations.history", "conversations.replies"]
    assert max(virtual_time.waits) > 1.2  # the replies' minute was waited out, virtually


async def test_a_wait_over_the_cap_refuses_and_learning_again_goes_on(
    fake: FakeSlack, slack_door: SlackBot, virtual_time: VirtualTime
) -> None:
    expected = seed_past(fake, messages=600)
    source = past_source(slack_door, virtual_time, max_wait_s=120)
    pages: list[PastPage] = []

    async def read_until_refused() -> None:
        async for page in source.pages(SINCE):
            pages.append(page)
            fake.rate_limit_next(method="conversations.history", retry_after=300)

    with pytest.raises(LearnRefused, match=r"wait 300 s .*120 s.*run learn again"):
        await read_until_refused()
    assert (
        len(pages) == 1 and 300 not in virtual_time.waits
    )  # refused, not waited (nor by slack_sdk)

    rest = await read_past(past_source(slack_door, virtual_time), cursor=pages[-1].cursor)
    assert sorted(learned(pages) + learned(rest)) == sorted(expected)


async def test_the_restricted_tier_reads_15_a_page_one_request_a_minute(
    fake: FakeSlack, slack_door: SlackBot, virtual_time: VirtualTime
) -> None:
    fake.history_tier = "restricted"
    expected = seed_past(fake, messages=100, threads={3: 20, 50: 1})
    pages = await read_past(past_source(slack_door, virtual_time, restricted=True))

    assert sorted(learned(pages)) == sorted(expected)
    history = fake.calls_of("conversations.history", ok_only=True)
    replies = fake.calls_of("conversations.replies", ok_only=True)
    assert all(len(c.response["messages"]) <= 15 for c in history + replies)
    assert len(history) == 7 and len(replies) == 3  # 100 / 15; the parent and 20 replies / 15
    assert [c for c in fake.calls if c.status == 429] == []  # paced, never refused
    assert max(virtual_time.waits) == pytest.approx(60, abs=1)


@pytest.mark.parametrize(
    ("channel", "kind", "audience"),
    [
        (C1, "public", Audience.SERVER),
        ("GSECRET", "private", Audience.PRIVATE),
        ("CSHARED", "shared", Audience.SHARED),
        (DM, "dm", Audience.DM),
    ],
)
async def test_the_audience_is_the_conversations_as_the_live_door_decides_it(
    fake: FakeSlack,
    slack_door: SlackBot,
    virtual_time: VirtualTime,
    channel: str,
    kind: str,
    audience: Audience,
) -> None:
    if kind in ("private", "shared"):
        fake.add_channel(
            channel,
            kind,
            is_private=kind == "private",
            shared_with=["TOTHER"] if kind == "shared" else (),
        )
    expected = seed_past(fake, channel=channel, messages=5, threads={2: 2})
    pages = await read_past(past_source(slack_door, virtual_time, channel=channel))
    assert sorted(learned(pages)) == sorted(expected)
    assert {m.audience for m in past_messages(pages)} == {audience}
    assert {m.scope for m in past_messages(pages)} == {
        f"slack:T1:{channel}",
        f"slack:T1:{channel}:{past_ts(2)}",
    }


@pytest.mark.parametrize(
    ("channel", "private", "needed"),
    [
        (C1, False, "channels:history"),
        ("GSECRET", True, "groups:history"),
        (DM, False, "im:history"),
    ],
)
async def test_a_missing_history_scope_is_refused_naming_it(
    fake: FakeSlack,
    slack_door: SlackBot,
    virtual_time: VirtualTime,
    channel: str,
    private: bool,
    needed: str,
) -> None:
    if private:
        fake.add_channel(channel, "secret", is_private=True)
    assert fake.scopes is not None
    fake.scopes = fake.scopes - {needed}
    with pytest.raises(LearnRefused, match=f"lacks the {needed} scope.*reinstall"):
        await read_past(past_source(slack_door, virtual_time, channel=channel))


async def test_a_channel_the_bot_is_not_in_is_refused_asking_for_an_invite(
    fake: FakeSlack, slack_door: SlackBot, virtual_time: VirtualTime
) -> None:
    fake.channels[C1].bot_is_member = False
    with pytest.raises(LearnRefused, match="not in conversation C1: invite it"):
        await read_past(past_source(slack_door, virtual_time))


async def test_bots_and_system_messages_are_skipped_the_bots_own_kept_edits_current(
    fake: FakeSlack, slack_door: SlackBot, virtual_time: VirtualTime
) -> None:
    said = [
        fake.message_event(text="deploy is thursday", user_id=ALICE, channel_id=C1, ts=past_ts(1)),
        fake.system_message_event(
            subtype="channel_join", user_id=BOB, channel_id=C1, ts=past_ts(2)
        ),
        fake.bot_message_event(text="build green", bot_id="BCI", channel_id=C1, ts=past_ts(3)),
        fake.bot_message_event(
            text="standup!", bot_id="BOTHER", user_id="UOTHER", channel_id=C1, ts=past_ts(4)
        ),
        fake.system_message_event(
            subtype="channel_topic", user_id=ALICE, channel_id=C1, ts=past_ts(5), value="ops"
        ),
        fake.message_event(text="oops", user_id=BOB, channel_id=C1, ts=past_ts(6)),
        fake.message_event(
            text="",
            user_id=BOB,
            channel_id=C1,
            ts=past_ts(7),
            files=[fake.file_object(name="plan.pdf", title="The plan", user_id=BOB)],
        ),
    ]
    fake.add_history(C1, said)
    fake.event_payload(event=fake.message_changed_event(original=said[0], text="deploy is friday"))
    fake.event_payload(event=fake.message_deleted_event(original=said[5]))
    client = AsyncWebClient(token=BOT_TOKEN, base_url=fake.api_url)
    answer = await client.chat_postMessage(
        channel=C1, text="Noted: *friday*", thread_ts=said[0]["ts"]
    )
    await client.chat_update(channel=C1, ts=str(answer["ts"]), text="Noted: friday &amp; on")

    pages = await read_past(past_source(slack_door, virtual_time))
    by_id = {m.platform_id: m for m in past_messages(pages)}
    assert set(by_id) == {past_ts(1), past_ts(7), answer["ts"]}
    assert by_id[past_ts(1)].text == "deploy is friday"  # as it is now
    assert [a.name for a in by_id[past_ts(7)].attachments] == ["plan.pdf"]
    own = by_id[answer["ts"]]
    assert (own.role, own.author, own.author_id) == ("assistant", "memorybot", "bot")
    assert (own.scope, own.text) == (f"{SCOPE}:{said[0]['ts']}", "Noted: friday & on")
    assert sum(page.skipped for page in pages) == 4  # join, two bots, topic


async def test_a_cursor_of_another_channel_is_refused(
    fake: FakeSlack, slack_door: SlackBot, virtual_time: VirtualTime
) -> None:
    seed_past(fake, messages=450)
    [first, *_] = await read_past(past_source(slack_door, virtual_time))
    fake.add_channel("C2", "random")
    other = past_source(slack_door, virtual_time, channel="C2")
    for cursor in (first.cursor, "{not json", json.dumps({"channel": "C2"})):
        with pytest.raises(LearnRefused, match="from the start"):
            await read_past(other, cursor=cursor)
