"""The fake Slack's history as a reader of a channel's past meets it: per-method rates (Slack's
tiers: so many requests a minute, then HTTP 429 with ``Retry-After``), and the messages of other
bots and of Slack itself (joins, topics...) as conversations.history shows them, and messages
deleted or edited while the app was away (no event reaches it; the Web API shows the change).
Pages, bounds, threads, scopes and the restricted tier are in test_slack_fake_strict.py.

Each check goes through slack_sdk's real client, without its retry handlers (a 429 is raised).
"""

from __future__ import annotations

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from tests.fakes.slack import FakeSlack

BOT_TOKEN = "xoxb-test-bot-token"
ALICE, BOB = "U1", "U2"
CHANNEL = "C1"


def workspace(server: FakeSlack) -> None:
    server.add_user(ALICE, "alice")
    server.add_user(BOB, "bob")
    server.add_channel(CHANNEL, "general", members=[ALICE, BOB])


pytestmark = pytest.mark.fake("slack", bot_token=BOT_TOKEN, team_id="T1", setup=workspace)


async def _retry_after(web_client: AsyncWebClient) -> int:
    with pytest.raises(SlackApiError) as caught:
        await web_client.conversations_history(channel=CHANNEL)
    response = caught.value.response
    assert (response.status_code, response["error"]) == (429, "ratelimited")
    return int(response.headers["Retry-After"])


async def test_a_method_answers_its_rate_a_minute_then_429_until_the_minute_is_over(
    fake: FakeSlack, web_client: AsyncWebClient
) -> None:
    fake.limit_rate("conversations.history", per_minute=3)
    for _ in range(3):
        await web_client.conversations_history(channel=CHANNEL)
    assert 59 <= await _retry_after(web_client) <= 60
    assert 59 <= await _retry_after(web_client) <= 60  # a refused call does not count
    # Other methods have their own rate.
    assert (await web_client.users_info(user=ALICE))["ok"] is True

    fake.age_rate_windows(30)
    assert 29 <= await _retry_after(web_client) <= 30
    fake.age_rate_windows(30)  # the first three calls are a minute old: three more go through
    for _ in range(3):
        await web_client.conversations_history(channel=CHANNEL)
    assert await _retry_after(web_client) >= 59
    statuses = [c.status for c in fake.calls_of("conversations.history")]
    assert statuses == [200, 200, 200, 429, 429, 429, 200, 200, 200, 429]
    with pytest.raises(ValueError, match="at least one"):
        fake.limit_rate("conversations.history", per_minute=0)


async def test_a_rate_counts_calls_the_minute_before_not_ever(
    fake: FakeSlack, web_client: AsyncWebClient
) -> None:
    fake.limit_rate("conversations.history", per_minute=2)
    await web_client.conversations_history(channel=CHANNEL)
    fake.age_rate_windows(45)
    await web_client.conversations_history(channel=CHANNEL)
    assert 14 <= await _retry_after(web_client) <= 15  # until the first leaves the minute
    fake.age_rate_windows(15)
    await web_client.conversations_history(channel=CHANNEL)
    assert 44 <= await _retry_after(web_client) <= 45


async def test_history_shows_other_bots_and_slacks_own_messages_as_slack_does(
    fake: FakeSlack, web_client: AsyncWebClient
) -> None:
    fake.add_history(
        CHANNEL,
        [
            fake.system_message_event(
                subtype="channel_join", user_id=BOB, channel_id=CHANNEL, ts="1600000001.000000"
            ),
            fake.bot_message_event(
                text="build green", bot_id="BCI", channel_id=CHANNEL, ts="1600000002.000000"
            ),
            fake.bot_message_event(
                text="standup!",
                bot_id="B0OTHER",
                user_id="UOTHER",
                username="standup-bot",
                channel_id=CHANNEL,
                ts="1600000003.000000",
            ),
            fake.system_message_event(
                subtype="channel_topic",
                user_id=ALICE,
                channel_id=CHANNEL,
                ts="1600000004.000000",
                value="deploys",
            ),
        ],
    )
    topic, app_bot, legacy, join = (await web_client.conversations_history(channel=CHANNEL))[
        "messages"
    ]
    assert (join["subtype"], join["user"], join["text"]) == (
        "channel_join",
        BOB,
        f"<@{BOB}> has joined the channel",
    )
    assert (topic["subtype"], topic["topic"]) == ("channel_topic", "deploys")
    assert topic["text"] == f"<@{ALICE}> set the channel topic: deploys"
    # A legacy integration or webhook: subtype bot_message, a username, no user.
    assert (legacy["subtype"], legacy["bot_id"], legacy["username"]) == (
        "bot_message",
        "BCI",
        "bot",
    )
    assert "user" not in legacy
    # An app's bot user: no subtype, its user, bot_id and bot_profile.
    assert "subtype" not in app_bot
    assert (app_bot["user"], app_bot["bot_id"]) == ("UOTHER", "B0OTHER")
    assert app_bot["bot_profile"]["name"] == "standup-bot"
    for message in (topic, app_bot, legacy, join):
        assert message["type"] == "message"
        assert not {"channel", "event_ts", "channel_type"} & set(message)
    with pytest.raises(ValueError, match="not a system message subtype"):
        fake.system_message_event(subtype="message_changed", user_id=ALICE, channel_id=CHANNEL)


# ---------------------------------------------------------------- changes made while away


async def test_a_message_deleted_or_edited_while_the_app_is_away_changes_only_the_web_api(
    fake: FakeSlack, web_client: AsyncWebClient
) -> None:
    """No event reaches the app; what conversations.history and .replies show changes as in
    Slack: an edit with its ``edited`` stamp, a delete gone, a deleted parent with replies a
    tombstone, and the tombstone gone with its last reply (the thread is then not found)."""
    said = [
        fake.message_event(text=text, user_id=ALICE, channel_id=CHANNEL)
        for text in ("kept", "typo", "oops", "plan?")
    ]
    for event in said:
        fake.event_payload(event=event)
    _, typo, oops, parent = said
    reply = fake.message_event(
        text="friday", user_id=BOB, channel_id=CHANNEL, thread_ts=parent["ts"]
    )
    fake.event_payload(event=reply)

    edit = fake.edit_quietly(typo, text="fixed")
    deletion = fake.delete_quietly(oops)
    assert (edit["subtype"], edit["message"]["text"]) == ("message_changed", "fixed")
    assert (deletion["subtype"], deletion["deleted_ts"]) == ("message_deleted", oops["ts"])
    history = (await web_client.conversations_history(channel=CHANNEL))["messages"]
    assert [m["text"] for m in history] == ["plan?", "fixed", "kept"]
    assert history[1]["edited"] == {"user": ALICE, "ts": edit["message"]["edited"]["ts"]}
    assert "edited" not in history[2]

    tombstone = fake.delete_quietly(parent)  # it has a reply: a tombstone stays
    assert tombstone["message"]["subtype"] == "tombstone"
    history = (await web_client.conversations_history(channel=CHANNEL))["messages"]
    assert [m.get("subtype") for m in history] == ["tombstone", None, None]
    thread = await web_client.conversations_replies(channel=CHANNEL, ts=parent["ts"])
    assert [m["text"] for m in thread["messages"]] == ["This message was deleted.", "friday"]

    fake.delete_quietly(reply)  # the last reply: the tombstone goes with it
    history = (await web_client.conversations_history(channel=CHANNEL))["messages"]
    assert [m["text"] for m in history] == ["fixed", "kept"]
    for ts in (parent["ts"], reply["ts"]):
        with pytest.raises(SlackApiError) as caught:
            await web_client.conversations_replies(channel=CHANNEL, ts=ts)
        assert caught.value.response["error"] == "thread_not_found"
    assert fake.socket_envelopes == []
    with pytest.raises(ValueError, match="no message"):
        fake.delete_quietly(oops)
