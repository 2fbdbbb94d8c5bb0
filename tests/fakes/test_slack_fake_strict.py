"""The fake Slack refuses what Slack refuses (issue 17): posts to a channel that does not
exist (never heard of, or deleted) or one the bot is not in, an ephemeral message to someone
who is not in the channel, methods the installed scopes do not allow, and text or blocks over
Slack's limits; and a click in an ephemeral message has Slack's ephemeral payload shape.

The fake knows a conversation when a test adds it, or when it sends an event from it: Slack
sends message events only from conversations the app is in, so the conversation exists, the
bot is a member and so is the event's author. Whoever runs a slash command or clicks a button
in a conversation is a member of it too.

It also answers as Slack does about places and the app going away (a deleted channel is
not found, an archived one takes no posts, an uninstalled app's bot token is
``account_inactive``), reads history as conversations.history / conversations.replies
document it (pages, bounds, threads, the per-type scopes, the 15-message, one-a-minute
tier of apps outside the Marketplace), publishes Home tabs only as views.publish allows,
and builds shortcut and Home tab payloads only for what exists.

Each check is made through slack_sdk's real client, as the bot makes its calls.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from tests.fakes.slack import EVENT_SCOPES, FakeSlack, event_subscription
from tests.helpers import slack_bot_scopes, slack_manifest_list

BOT_TOKEN = "xoxb-test-bot-token"
ALICE, BOB, BOT = "U1", "U2", "UBOT"
CHANNEL, OUTSIDE, GONE, NEVER = "C1", "COUT", "CGONE", "CNEVER"
SECTION = {"type": "section", "text": {"type": "mrkdwn", "text": "hi"}}


def workspace(server: FakeSlack) -> None:
    server.add_user(ALICE, "alice")
    server.add_user(BOB, "bob")
    server.add_channel(CHANNEL, "general", members=[ALICE])
    server.add_channel(GONE, "old", members=[ALICE]).bot_is_member = True
    server.delete_channel(GONE)
    server.add_channel(OUTSIDE, "elsewhere", members=[ALICE]).bot_is_member = False


pytestmark = pytest.mark.fake("slack", bot_token=BOT_TOKEN, team_id="T1", setup=workspace)


async def _post(web_client: AsyncWebClient, method: str, **message: Any) -> None:
    """One chat.* call of ``method`` with the arguments each one needs."""
    if method == "chat.postMessage":
        await web_client.chat_postMessage(**message)
    elif method == "chat.postEphemeral":
        await web_client.chat_postEphemeral(user=ALICE, **message)
    else:
        posted = await web_client.chat_postMessage(channel=message["channel"], text="first")
        await web_client.chat_update(ts=str(posted["ts"]), **message)


async def _error(web_client: AsyncWebClient, method: str, **message: Any) -> str:
    with pytest.raises(SlackApiError) as caught:
        await _post(web_client, method, **message)
    return str(caught.value.response["error"])


POSTS = ["chat.postMessage", "chat.postEphemeral"]
ALL_POSTS = [*POSTS, "chat.update"]


@pytest.mark.parametrize("method", POSTS)
async def test_a_deleted_channel_is_not_found(web_client: AsyncWebClient, method: str) -> None:
    assert await _error(web_client, method, channel=GONE, text="hi") == "channel_not_found"


@pytest.mark.parametrize("method", POSTS)
async def test_a_channel_nobody_told_the_fake_about_is_not_found(
    web_client: AsyncWebClient, method: str
) -> None:
    assert await _error(web_client, method, channel=NEVER, text="hi") == "channel_not_found"


async def test_an_update_in_a_channel_that_does_not_exist_is_not_found(
    web_client: AsyncWebClient,
) -> None:
    posted = await web_client.chat_postMessage(channel=CHANNEL, text="first")
    with pytest.raises(SlackApiError) as caught:
        await web_client.chat_update(channel=NEVER, ts=str(posted["ts"]), text="moved?")
    assert caught.value.response["error"] == "channel_not_found"


async def test_a_file_shared_to_a_channel_that_does_not_exist_is_refused(
    web_client: AsyncWebClient,
) -> None:
    with pytest.raises(SlackApiError) as caught:
        await web_client.files_upload_v2(channel=NEVER, filename="a.txt", content=b"a")
    assert caught.value.response["error"] == "invalid_channel"
    await web_client.files_upload_v2(channel=CHANNEL, filename="a.txt", content=b"a")


async def test_a_conversation_an_event_came_from_exists_with_its_author_in_it(
    fake: FakeSlack, web_client: AsyncWebClient
) -> None:
    said = fake.message_event(text="hi", user_id=BOB, channel_id="CNEW", channel_type="group")
    fake.event_payload(event=said)  # what Slack delivers: the conversation exists
    await web_client.chat_postMessage(channel="CNEW", text="answer")
    await web_client.chat_postEphemeral(channel="CNEW", user=BOB, text="only bob")
    assert await _error(web_client, "chat.postEphemeral", channel="CNEW", text="x") == (
        "user_not_in_channel"  # Alice said nothing there
    )
    info = (await web_client.conversations_info(channel="CNEW"))["channel"]
    assert (info["is_private"], info["is_group"]) == (True, True)  # channel_type "group"
    mention = fake.app_mention_event(text="hi", user_id=BOB, channel_id="DNEW")
    fake.event_payload(event=mention)  # no channel_type: a D id is a DM
    dm = (await web_client.conversations_info(channel="DNEW"))["channel"]
    assert (dm["is_im"], dm["user"]) == (True, BOB)


async def test_an_event_from_a_deleted_channel_does_not_bring_it_back(
    fake: FakeSlack, web_client: AsyncWebClient
) -> None:
    fake.event_payload(event=fake.message_event(text="hi", user_id=ALICE, channel_id=GONE))
    assert await _error(web_client, "chat.postMessage", channel=GONE, text="hi") == (
        "channel_not_found"
    )


async def test_an_ephemeral_to_someone_not_in_the_channel_is_refused(
    fake: FakeSlack, web_client: AsyncWebClient
) -> None:
    with pytest.raises(SlackApiError) as caught:
        await web_client.chat_postEphemeral(channel=CHANNEL, user=BOB, text="psst")
    assert caught.value.response["error"] == "user_not_in_channel"
    fake.add_member(CHANNEL, BOB)
    await web_client.chat_postEphemeral(channel=CHANNEL, user=BOB, text="psst")
    fake.remove_member(CHANNEL, BOB)  # Bob leaves
    with pytest.raises(SlackApiError) as caught:
        await web_client.chat_postEphemeral(channel=CHANNEL, user=BOB, text="psst")
    assert caught.value.response["error"] == "user_not_in_channel"


@pytest.mark.parametrize("how", ["message", "command", "click"])
async def test_who_speaks_runs_a_command_or_clicks_in_a_channel_is_in_it(
    fake: FakeSlack, web_client: AsyncWebClient, how: str
) -> None:
    if how == "message":
        fake.event_payload(event=fake.message_event(text="hi", user_id=BOB, channel_id=CHANNEL))
    elif how == "command":
        fake.slash_command_payload(text="show", user_id=BOB, channel_id=CHANNEL)
    else:
        fake.block_action_payload(action_id="go", user_id=BOB, channel_id=CHANNEL)
    await web_client.chat_postEphemeral(channel=CHANNEL, user=BOB, text="only bob")
    assert [m.user for m in fake.ephemerals] == [BOB]


async def test_a_command_in_a_conversation_the_bot_is_not_in_makes_no_channel(
    fake: FakeSlack, web_client: AsyncWebClient
) -> None:
    # Slash commands work anywhere, also where the bot is not; only events prove it is there.
    fake.slash_command_payload(text="show", user_id=BOB, channel_id=NEVER)
    assert await _error(web_client, "chat.postMessage", channel=NEVER, text="hi") == (
        "channel_not_found"
    )


@pytest.mark.parametrize("method", POSTS)
async def test_a_channel_the_bot_is_not_in_is_refused(
    web_client: AsyncWebClient, method: str
) -> None:
    assert await _error(web_client, method, channel=OUTSIDE, text="hi") == "not_in_channel"
    await _post(web_client, method, channel=CHANNEL, text="hi")  # a member: accepted


@pytest.mark.parametrize("method", ALL_POSTS)
async def test_text_over_40000_characters_is_too_long(
    fake: FakeSlack, web_client: AsyncWebClient, method: str
) -> None:
    assert await _error(web_client, method, channel=CHANNEL, text="x" * 40_001) == "msg_too_long"
    fake.age_rate_windows(1.0)  # a second later: a channel takes one new message a second
    await _post(web_client, method, channel=CHANNEL, text="x" * 40_000)


@pytest.mark.parametrize("method", ALL_POSTS)
async def test_more_than_50_blocks_are_invalid(
    fake: FakeSlack, web_client: AsyncWebClient, method: str
) -> None:
    error = await _error(web_client, method, channel=CHANNEL, text="t", blocks=[SECTION] * 51)
    assert error == "invalid_blocks"
    fake.age_rate_windows(1.0)  # a second later: a channel takes one new message a second
    await _post(web_client, method, channel=CHANNEL, text="t", blocks=[SECTION] * 50)


@pytest.mark.parametrize("method", ALL_POSTS)
async def test_a_section_text_over_3000_is_invalid(
    fake: FakeSlack, web_client: AsyncWebClient, method: str
) -> None:
    def section(chars: int) -> dict[str, Any]:
        return {"type": "section", "text": {"type": "mrkdwn", "text": "x" * chars}}

    error = await _error(web_client, method, channel=CHANNEL, text="t", blocks=[section(3001)])
    assert error == "invalid_blocks"
    fake.age_rate_windows(1.0)  # a second later: a channel takes one new message a second
    await _post(web_client, method, channel=CHANNEL, text="t", blocks=[section(3000)])


async def test_a_method_outside_the_installed_scopes_is_missing_scope() -> None:
    async with FakeSlack(bot_token=BOT_TOKEN, scopes=["chat:write", "commands"]) as fake:
        fake.add_user(ALICE, "alice")
        fake.add_channel(CHANNEL, "general", members=[ALICE])
        client = AsyncWebClient(token=BOT_TOKEN, base_url=fake.api_url)
        await client.chat_postEphemeral(channel=CHANNEL, user=ALICE, text="allowed")
        with pytest.raises(SlackApiError) as caught:
            await client.users_info(user=ALICE)
        response = caught.value.response
        assert response["error"] == "missing_scope"
        assert response["needed"] == "users:read"
        assert response["provided"] == "chat:write,commands"
        assert await client.auth_test()  # needs no scope


async def test_a_click_in_an_ephemeral_message_has_the_ephemeral_shape(fake: FakeSlack) -> None:
    payload = fake.block_action_payload(
        action_id="go", value="v", user_id=ALICE, channel_id=CHANNEL, ephemeral=True
    )
    container = payload["container"]
    assert container["is_ephemeral"] is True and container["channel_id"] == CHANNEL
    assert "message" not in payload  # nothing to chat.update: answer by response_url
    assert payload["response_url"].startswith(fake.base_url)
    normal = fake.block_action_payload(action_id="go", user_id=ALICE, channel_id=CHANNEL)
    assert normal["container"]["is_ephemeral"] is False and "message" in normal


async def test_conversations_info_needs_the_read_scope_of_the_conversations_type() -> None:
    # One read scope per kind of conversation (conversations.info's reference): a public
    # channel needs channels:read, a private one groups:read, a DM im:read, a group DM
    # mpim:read.
    async with FakeSlack(bot_token=BOT_TOKEN, scopes=["channels:read", "groups:read"]) as fake:
        fake.add_channel(CHANNEL, "general")
        fake.add_channel("CPRIV", "private", is_private=True)
        fake.add_channel("DALICE", "DALICE", is_im=True, user_id=ALICE)
        group_dm = fake.message_event(
            text="hi", user_id=ALICE, channel_id="GMP", channel_type="mpim"
        )
        fake.event_payload(event=group_dm)
        client = AsyncWebClient(token=BOT_TOKEN, base_url=fake.api_url)
        assert (await client.conversations_info(channel=CHANNEL))["channel"]["id"] == CHANNEL
        assert (await client.conversations_info(channel="CPRIV"))["channel"]["is_private"]
        for channel, needed in (("DALICE", "im:read"), ("GMP", "mpim:read")):
            with pytest.raises(SlackApiError) as caught:
                await client.conversations_info(channel=channel)
            response = caught.value.response
            assert (response["error"], response["needed"]) == ("missing_scope", needed)


# ------------------------------------------------------------------------- history helpers

PRIVATE, DM = "GPRIV", "DALICE"


def _seed(fake: FakeSlack, channel: str, count: int, *, start: int = 1) -> list[dict[str, Any]]:
    """``count`` past messages by Alice in ``channel``, ts 1600000000.000001 and up."""
    said = [
        fake.message_event(
            text=f"m{n}", user_id=ALICE, channel_id=channel, ts=f"1600000000.{n:06d}"
        )
        for n in range(start, start + count)
    ]
    fake.add_history(channel, said)
    return said


async def _texts(web_client: AsyncWebClient, method: str, **args: Any) -> list[str]:
    answer = await web_client.api_call(method, http_verb="GET", params=args)
    return [m["text"] for m in answer["messages"]]


async def _api_error(web_client: AsyncWebClient, method: str, **args: Any) -> str:
    with pytest.raises(SlackApiError) as caught:
        await web_client.api_call(method, http_verb="GET", params=args)
    return str(caught.value.response["error"])


# --------------------------------------------------------------------- conversations.history


async def test_history_is_newest_first_in_pages_of_limit(
    fake: FakeSlack, web_client: AsyncWebClient
) -> None:
    _seed(fake, CHANNEL, 5)
    first = await web_client.conversations_history(channel=CHANNEL, limit=2)
    assert [m["text"] for m in first["messages"]] == ["m5", "m4"]
    assert first["has_more"] is True
    second = await web_client.conversations_history(
        channel=CHANNEL, limit=2, cursor=first["response_metadata"]["next_cursor"]
    )
    assert [m["text"] for m in second["messages"]] == ["m3", "m2"]
    message = first["messages"][0]
    assert set(message) >= {"type", "user", "text", "ts"}
    assert not {"channel", "event_ts", "channel_type"} & set(message)  # no event fields
    assert await _api_error(
        web_client, "conversations.history", channel=CHANNEL, cursor="nope"
    ) == ("invalid_cursor")


async def test_history_limit_defaults_to_100_and_stops_at_999(
    fake: FakeSlack, web_client: AsyncWebClient
) -> None:
    _seed(fake, CHANNEL, 1001)
    assert len(await _texts(web_client, "conversations.history", channel=CHANNEL)) == 100
    assert (
        len(await _texts(web_client, "conversations.history", channel=CHANNEL, limit=5000)) == 999
    )
    for bad in ("0", "many"):
        error = await _api_error(web_client, "conversations.history", channel=CHANNEL, limit=bad)
        assert error == "invalid_arguments"


async def test_history_bounds_are_exclusive_unless_inclusive(
    fake: FakeSlack, web_client: AsyncWebClient
) -> None:
    said = _seed(fake, CHANNEL, 5)
    bounds = {"oldest": said[1]["ts"], "latest": said[3]["ts"]}
    assert await _texts(web_client, "conversations.history", channel=CHANNEL, **bounds) == ["m3"]
    inclusive = await _texts(
        web_client, "conversations.history", channel=CHANNEL, inclusive="true", **bounds
    )
    assert inclusive == ["m4", "m3", "m2"]
    # Plucking one message, as the method's reference shows.
    one = await web_client.conversations_history(
        channel=CHANNEL, latest=said[2]["ts"], inclusive=True, limit=1
    )
    assert [m["text"] for m in one["messages"]] == ["m3"] and one["latest"] == said[2]["ts"]
    for arg, error in (("oldest", "invalid_ts_oldest"), ("latest", "invalid_ts_latest")):
        assert await _api_error(
            web_client, "conversations.history", channel=CHANNEL, **{arg: "x"}
        ) == (error)


async def test_history_shows_threads_edits_and_deletions_as_slack_does(
    fake: FakeSlack, web_client: AsyncWebClient
) -> None:
    parent = fake.message_event(text="plan?", user_id=ALICE, channel_id=CHANNEL)
    fake.event_payload(event=parent)
    reply = fake.message_event(
        text="friday", user_id=BOB, channel_id=CHANNEL, thread_ts=parent["ts"]
    )
    broadcast = fake.message_event(
        text="also here",
        user_id=BOB,
        channel_id=CHANNEL,
        thread_ts=parent["ts"],
        subtype="thread_broadcast",
    )
    edited = fake.message_event(text="typo", user_id=ALICE, channel_id=CHANNEL)
    gone = fake.message_event(text="oops", user_id=ALICE, channel_id=CHANNEL)
    for event in (reply, broadcast, edited, gone):
        fake.event_payload(event=event)
    fake.event_payload(event=fake.message_changed_event(original=edited, text="fixed"))
    fake.event_payload(event=fake.message_deleted_event(original=gone))
    posted = await web_client.chat_postMessage(
        channel=CHANNEL, text="noted", thread_ts=parent["ts"]
    )
    await web_client.chat_update(channel=CHANNEL, ts=str(posted["ts"]), text="noted!")

    history = (await web_client.conversations_history(channel=CHANNEL))["messages"]
    # Replies stay in their thread, unless also sent to the channel; "oops" is gone.
    assert [m["text"] for m in history] == ["fixed", "also here", "plan?"]
    assert history[0]["edited"]["user"] == ALICE
    top = history[2]
    assert (top["thread_ts"], top["reply_count"], top["latest_reply"]) == (
        parent["ts"],
        3,
        posted["ts"],
    )
    assert top["reply_users"] == [BOB, BOT] and top["reply_users_count"] == 2

    thread = (await web_client.conversations_replies(channel=CHANNEL, ts=parent["ts"]))["messages"]
    assert [m["text"] for m in thread] == ["plan?", "friday", "also here", "noted!"]
    assert [m.get("parent_user_id") for m in thread[1:]] == [ALICE] * 3
    assert thread[3]["edited"]["user"] == BOT and thread[3]["bot_id"] == "BBOT"
    # Any message of the thread leads to the whole thread.
    by_reply = await _texts(web_client, "conversations.replies", channel=CHANNEL, ts=reply["ts"])
    assert by_reply == [m["text"] for m in thread]
    # A message without replies is its own thread; a ts that is no message is not found.
    assert await _texts(web_client, "conversations.replies", channel=CHANNEL, ts=edited["ts"]) == [
        "fixed"
    ]
    assert await _api_error(
        web_client, "conversations.replies", channel=CHANNEL, ts="1.000001"
    ) == ("thread_not_found")
    with pytest.raises(ValueError, match="tombstone"):
        fake.message_deleted_event(original=parent)

    # The parent deleted: a tombstone, as long as its thread has replies.
    fake.event_payload(event=fake.tombstone_event(parent=parent))
    history = (await web_client.conversations_history(channel=CHANNEL))["messages"]
    assert (history[-1]["subtype"], history[-1]["reply_count"]) == ("tombstone", 3)


async def test_replies_come_oldest_first_parent_first_in_pages(
    fake: FakeSlack, web_client: AsyncWebClient
) -> None:
    [parent] = _seed(fake, CHANNEL, 1)
    fake.add_history(
        CHANNEL,
        [
            fake.message_event(
                text=f"r{n}",
                user_id=BOB,
                channel_id=CHANNEL,
                ts=f"1600000001.{n:06d}",
                thread_ts=parent["ts"],
            )
            for n in range(1, 6)
        ],
    )
    first = await web_client.conversations_replies(channel=CHANNEL, ts=parent["ts"], limit=3)
    assert [m["text"] for m in first["messages"]] == ["m1", "r1", "r2"]
    rest = await web_client.conversations_replies(
        channel=CHANNEL, ts=parent["ts"], limit=3, cursor=first["response_metadata"]["next_cursor"]
    )
    assert [m["text"] for m in rest["messages"]] == ["r3", "r4", "r5"]
    assert (first["has_more"], rest["has_more"]) == (True, False)
    assert await _texts(web_client, "conversations.history", channel=CHANNEL) == ["m1"]


async def test_history_needs_the_history_scope_of_the_conversations_type() -> None:
    scopes = ["channels:history", "chat:write"]
    async with FakeSlack(bot_token=BOT_TOKEN, scopes=scopes) as fake:
        fake.add_user(ALICE, "alice")
        fake.add_channel(CHANNEL, "general")
        fake.add_channel(PRIVATE, "secret", is_private=True)
        fake.add_channel(DM, DM, is_im=True, user_id=ALICE)
        client = AsyncWebClient(token=BOT_TOKEN, base_url=fake.api_url)
        await client.conversations_history(channel=CHANNEL)
        for channel, needed in ((PRIVATE, "groups:history"), (DM, "im:history")):
            for method in ("conversations.history", "conversations.replies"):
                with pytest.raises(SlackApiError) as caught:
                    await client.api_call(
                        method, http_verb="GET", params={"channel": channel, "ts": "1.000001"}
                    )
                response = caught.value.response
                assert (response["error"], response["needed"]) == ("missing_scope", needed)


async def test_history_of_a_conversation_the_bot_is_not_in_is_refused(
    fake: FakeSlack, web_client: AsyncWebClient
) -> None:
    # A public channel the bot has not joined: not_in_channel. A private one it is not in
    # does not exist as far as the bot can see.
    fake.add_channel(PRIVATE, "secret", is_private=True).bot_is_member = False
    for channel, error in ((OUTSIDE, "not_in_channel"), (PRIVATE, "channel_not_found")):
        assert await _api_error(web_client, "conversations.history", channel=channel) == error
    for channel in (GONE, NEVER):
        assert await _api_error(web_client, "conversations.history", channel=channel) == (
            "channel_not_found"
        )


async def test_restricted_apps_read_15_messages_a_page_once_a_minute() -> None:
    async with FakeSlack(bot_token=BOT_TOKEN, history_tier="restricted") as fake:
        fake.add_user(ALICE, "alice")
        fake.add_channel(CHANNEL, "general")
        [parent, *_] = _seed(fake, CHANNEL, 40)
        fake.add_history(
            CHANNEL,
            [
                fake.message_event(
                    text=f"r{n}",
                    user_id=ALICE,
                    channel_id=CHANNEL,
                    ts=f"1600000002.{n:06d}",
                    thread_ts=parent["ts"],
                )
                for n in range(1, 30)
            ],
        )
        client = AsyncWebClient(token=BOT_TOKEN, base_url=fake.api_url)
        page = await client.conversations_history(channel=CHANNEL, limit=200)
        assert len(page["messages"]) == 15 and page["has_more"] is True
        # The minute is per method: replies still has its own request.
        thread = await client.conversations_replies(channel=CHANNEL, ts=parent["ts"])
        assert len(thread["messages"]) == 15  # the default is 15 too
        for method in ("conversations.history", "conversations.replies"):
            with pytest.raises(SlackApiError) as caught:
                await client.api_call(
                    method, http_verb="GET", params={"channel": CHANNEL, "ts": parent["ts"]}
                )
            assert caught.value.response.status_code == 429
            assert caught.value.response["error"] == "ratelimited"
            assert 0 < int(caught.value.response.headers["Retry-After"]) <= 60
        fake.age_rate_windows(60)
        cursor = page["response_metadata"]["next_cursor"]
        following = await client.conversations_history(channel=CHANNEL, cursor=cursor)
        assert following["messages"][0]["ts"] == page["messages"][-1]["ts"][:-6] + "000025"


# ------------------------------------------------------------------- places and the app gone


@pytest.mark.parametrize(
    ("channel", "private", "kind"),
    [("CPUB", False, "channel_deleted"), (PRIVATE, True, "group_deleted")],
)
async def test_a_deleted_channel_is_gone_with_its_history(
    fake: FakeSlack, web_client: AsyncWebClient, channel: str, private: bool, kind: str
) -> None:
    fake.add_channel(channel, "doomed", is_private=private, members=[ALICE])
    _seed(fake, channel, 2)
    event = fake.channel_deleted_event(channel_id=channel, user_id=ALICE)
    assert event["type"] == kind and event["channel"] == channel
    fake.event_payload(event=event)
    assert await _error(web_client, "chat.postMessage", channel=channel, text="hi") == (
        "channel_not_found"
    )
    assert await _api_error(web_client, "conversations.history", channel=channel) == (
        "channel_not_found"
    )


@pytest.mark.parametrize(
    ("channel", "private", "kind", "not_found"),
    [("CPUB", False, "channel_left", "not_in_channel"), (PRIVATE, True, "group_left", None)],
)
async def test_the_bot_removed_from_a_channel_no_longer_reads_or_posts_there(
    fake: FakeSlack,
    web_client: AsyncWebClient,
    channel: str,
    private: bool,
    kind: str,
    not_found: str | None,
) -> None:
    """channel_left / group_left ({type, channel, actor_id, event_ts}) and
    member_left_channel naming the bot: either one, through event_payload, takes the bot out;
    its history answers not_in_channel (a private one: channel_not_found, it cannot see it)."""
    fake.add_channel(channel, "kicked", is_private=private, members=[ALICE, BOB])
    _seed(fake, channel, 2)
    left, member_left = fake.bot_removed_events(channel_id=channel, user_id=ALICE)
    assert (left["type"], left["channel"], left["actor_id"]) == (kind, channel, ALICE)
    assert member_left["type"] == "member_left_channel" and member_left["user"] == BOT
    assert member_left["channel_type"] == ("G" if channel.startswith("G") else "C")
    # A person leaving: only they are out.
    fake.event_payload(event=fake.member_left_event(channel_id=channel, user_id=BOB))
    assert BOB not in fake.channels[channel].members
    assert await _texts(web_client, "conversations.history", channel=channel) == ["m2", "m1"]
    fake.event_payload(event=member_left)
    assert await _api_error(web_client, "conversations.history", channel=channel) == (
        not_found or "channel_not_found"
    )
    assert await _error(web_client, "chat.postMessage", channel=channel, text="hi") == (
        "not_in_channel"
    )


async def test_a_pre_bot_thread_parent_is_shown_by_conversations_replies(
    fake: FakeSlack, web_client: AsyncWebClient
) -> None:
    """A parent posted before the app was there is in no event, only in the Web API:
    conversations.replies of its ts (``limit`` 1) shows it first, replies after."""
    [parent] = _seed(fake, CHANNEL, 1)
    fake.event_payload(
        event=fake.message_event(
            text="a reply", user_id=BOB, channel_id=CHANNEL, thread_ts=parent["ts"]
        )
    )
    assert await _texts(
        web_client, "conversations.replies", channel=CHANNEL, ts=parent["ts"], limit=1
    ) == ["m1"]
    assert await _texts(web_client, "conversations.replies", channel=CHANNEL, ts=parent["ts"]) == [
        "m1",
        "a reply",
    ]


async def test_an_archived_channel_keeps_its_history_but_takes_no_posts(
    fake: FakeSlack, web_client: AsyncWebClient
) -> None:
    _seed(fake, CHANNEL, 2)
    event = fake.channel_archive_event(channel_id=CHANNEL, user_id=ALICE)
    assert (event["type"], event["user"]) == ("channel_archive", ALICE)
    fake.event_payload(event=event)
    for method in POSTS:
        assert await _error(web_client, method, channel=CHANNEL, text="hi") == "is_archived"
    assert await _texts(web_client, "conversations.history", channel=CHANNEL) == ["m2", "m1"]
    assert (await web_client.conversations_info(channel=CHANNEL))["channel"]["is_archived"] is True
    fake.add_channel(PRIVATE, "secret", is_private=True)
    assert fake.channel_archive_event(channel_id=PRIVATE, user_id=ALICE)["type"] == (
        "group_archive"
    )
    fake.add_channel(DM, DM, is_im=True, user_id=ALICE)
    with pytest.raises(ValueError, match="DM"):
        fake.channel_deleted_event(channel_id=DM, user_id=ALICE)


async def test_after_uninstall_the_bot_token_fails_and_slack_sends_nothing_more(
    fake: FakeSlack, web_client: AsyncWebClient
) -> None:
    revoked, uninstalled = fake.uninstall()
    assert revoked["event"]["tokens"] == {"bot": [BOT]}
    assert uninstalled["event"] == {"type": "app_uninstalled"}
    assert uninstalled["team_id"] == "T1" and not fake.installed
    with pytest.raises(SlackApiError) as caught:
        await web_client.auth_test()
    assert caught.value.response["error"] == "account_inactive"
    # The app-level token belongs to the app, not to the installation.
    opened = await AsyncWebClient(base_url=fake.api_url).apps_connections_open(
        app_token=fake.app_token
    )
    assert opened["ok"]
    with pytest.raises(ValueError, match="uninstalled"):
        fake.event_payload(event=fake.message_event(text="hi", user_id=ALICE, channel_id=CHANNEL))
    with pytest.raises(ValueError, match="uninstalled"):
        fake.slash_command_payload(text="show", user_id=ALICE, channel_id=CHANNEL)


def test_the_manifest_holds_the_scope_of_every_event_it_subscribes_to() -> None:
    scopes = set(slack_bot_scopes())
    for event in slack_manifest_list("bot_events"):
        assert event in EVENT_SCOPES, f"the fake does not know the event {event}"
        needed = EVENT_SCOPES[event]
        assert needed is None or needed in scopes, f"{event} needs {needed}"
    assert event_subscription({"type": "message", "channel_type": "group"}) == "message.groups"
    assert event_subscription({"type": "channel_deleted"}) == "channel_deleted"


async def test_events_the_app_does_not_subscribe_to_are_never_delivered() -> None:
    events = ["app_mention", "message.channels", "channel_deleted"]
    async with FakeSlack(
        bot_token=BOT_TOKEN, scopes=["channels:history"], bot_events=events
    ) as fake:
        fake.add_channel(CHANNEL, "general")
        fake.event_payload(event=fake.message_event(text="hi", user_id=ALICE, channel_id=CHANNEL))
        said = fake.message_event(text="hi", user_id=ALICE, channel_id=DM, channel_type="im")
        with pytest.raises(ValueError, match=r"message\.im"):
            fake.event_payload(event=said)
        with pytest.raises(ValueError, match="channels:read"):
            fake.event_payload(event=fake.channel_deleted_event(channel_id=CHANNEL, user_id=ALICE))
        with pytest.raises(ValueError, match="app_mentions:read"):
            fake.event_payload(
                event=fake.app_mention_event(text="hi", user_id=ALICE, channel_id=CHANNEL)
            )
        # Not subscribed to them: the uninstall events are not sent at all.
        assert fake.uninstall() == []


# ------------------------------------------------------------------------ App Home, shortcuts


def _home(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"type": "home", "blocks": list(blocks) or [SECTION]}


async def test_views_publish_refuses_what_slack_refuses(
    fake: FakeSlack, web_client: AsyncWebClient
) -> None:
    async def refused(**args: Any) -> dict[str, Any]:
        with pytest.raises(SlackApiError) as caught:
            await web_client.views_publish(**args)
        return dict(caught.value.response.data)

    unknown = await refused(user_id="UNOBODY", view=_home())
    assert unknown["error"] == "invalid_arguments"
    assert unknown["response_metadata"]["messages"] == ["invalid `user_id`"]
    modal = {"type": "modal", "title": {"type": "plain_text", "text": "M"}, "blocks": [SECTION]}
    for view in (
        modal,
        _home(*[SECTION] * 101),
        _home({"type": "section", "text": {"type": "mrkdwn", "text": ""}}),
        {**_home(), "private_metadata": "x" * 3001},
    ):
        answer = await refused(user_id=ALICE, view=view)
        assert answer["error"] == "invalid_arguments" and answer["response_metadata"]["messages"]
    assert (await refused(user_id=ALICE, view={**_home(), "callback_id": "x" * 300_000}))[
        "error"
    ] == "view_too_large"
    await web_client.views_publish(user_id=ALICE, view=_home(*[SECTION] * 100))
    assert (await refused(user_id=ALICE, view=_home(), hash="1.2"))["error"] == "hash_conflict"
    assert fake.home_view(BOB) is None


async def test_a_published_home_view_is_stored_as_slack_returns_it(
    fake: FakeSlack, web_client: AsyncWebClient
) -> None:
    # A JSON string, as the method's reference describes the argument.
    answer = await web_client.api_call(
        "views.publish", json={"user_id": ALICE, "view": json.dumps(_home())}
    )
    view = answer["view"]
    assert set(view) >= {"id", "hash", "team_id", "app_id", "bot_id", "type", "blocks", "state"}
    assert (view["team_id"], view["app_id"], view["bot_id"]) == ("T1", fake.api_app_id, "BBOT")
    assert view["blocks"][0]["block_id"]  # Slack names blocks that came without an id
    assert fake.home_view(ALICE) == view
    again = await web_client.views_publish(user_id=ALICE, view=_home(), hash=view["hash"])
    assert again["view"]["id"] == view["id"] and again["view"]["hash"] != view["hash"]
    messages_tab = fake.app_home_opened_event(user_id=ALICE, tab="messages")
    assert "view" not in messages_tab and messages_tab["channel"].startswith("D")


async def test_views_publish_needs_no_scope_but_an_enabled_home_tab() -> None:
    async with FakeSlack(bot_token=BOT_TOKEN, scopes=["chat:write"]) as fake:
        fake.add_user(ALICE, "alice")
        client = AsyncWebClient(token=BOT_TOKEN, base_url=fake.api_url)
        await client.views_publish(user_id=ALICE, view=_home())
        with pytest.raises(SlackApiError, match="not_allowed_token_type"):
            await AsyncWebClient(token=fake.app_token, base_url=fake.api_url).views_publish(
                user_id=ALICE, view=_home()
            )
    async with FakeSlack(bot_token=BOT_TOKEN, home_tab_enabled=False) as fake:
        fake.add_user(ALICE, "alice")
        client = AsyncWebClient(token=BOT_TOKEN, base_url=fake.api_url)
        with pytest.raises(SlackApiError, match="not_enabled"):
            await client.views_publish(user_id=ALICE, view=_home())
        with pytest.raises(ValueError, match="not enabled"):
            fake.app_home_opened_event(user_id=ALICE)
        fake.app_home_opened_event(user_id=ALICE, tab="messages")


async def test_a_home_tab_click_has_the_view_shape(
    fake: FakeSlack, web_client: AsyncWebClient
) -> None:
    with pytest.raises(ValueError, match="no Home tab"):
        fake.home_block_action_payload(user_id=ALICE, action_id="go")
    button = {
        "type": "button",
        "action_id": "go",
        "text": {"type": "plain_text", "text": "Go"},
        "value": "v1",
    }
    accessory = {**SECTION, "block_id": "s1", "accessory": button}
    view = (await web_client.views_publish(user_id=ALICE, view=_home(accessory)))["view"]
    payload = fake.home_block_action_payload(user_id=ALICE, action_id="go")
    assert payload["container"] == {"type": "view", "view_id": view["id"]}
    assert payload["view"] == view
    assert payload["actions"][0] | {"action_ts": ""} == {
        "action_id": "go",
        "block_id": "s1",
        "type": "button",
        "text": {"type": "plain_text", "text": "Go"},
        "value": "v1",
        "action_ts": "",
    }
    assert not {"channel", "message", "response_url", "state"} & set(payload)
    with pytest.raises(ValueError, match="no element"):
        fake.home_block_action_payload(user_id=ALICE, action_id="missing")


async def test_a_message_shortcut_needs_a_message_that_exists_and_shows_it_as_it_is_now(
    fake: FakeSlack,
) -> None:
    said = fake.message_event(text="draft", user_id=ALICE, channel_id=CHANNEL)
    with pytest.raises(ValueError, match="no message"):
        fake.message_action_payload(callback_id="c", user_id=BOB, channel_id=CHANNEL, message=said)
    fake.event_payload(event=said)
    fake.event_payload(event=fake.message_changed_event(original=said, text="final"))
    payload = fake.message_action_payload(
        callback_id="c", user_id=BOB, channel_id=CHANNEL, message=said
    )
    assert (payload["message"]["text"], payload["message"]["edited"]["user"]) == ("final", ALICE)
    assert payload["response_url"].startswith(fake.base_url)
    assert BOB in fake.channels[CHANNEL].members  # who runs a shortcut there is in it
    dm = fake.message_event(text="hi", user_id=ALICE, channel_id=DM, channel_type="im")
    fake.event_payload(event=dm)
    in_dm = fake.message_action_payload(callback_id="c", user_id=ALICE, channel_id=DM, message=dm)
    assert in_dm["channel"] == {"id": DM, "name": "directmessage"}
