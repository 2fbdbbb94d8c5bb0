"""The fake Slack refuses what Slack refuses (issue 17): posts to a channel that does not
exist (never heard of, or deleted) or one the bot is not in, an ephemeral message to someone
who is not in the channel, methods the installed scopes do not allow, and text or blocks over
Slack's limits; and a click in an ephemeral message has Slack's ephemeral payload shape.

The fake knows a conversation when a test adds it, or when it sends an event from it: Slack
sends message events only from conversations the app is in, so the conversation exists, the
bot is a member and so is the event's author. Whoever runs a slash command or clicks a button
in a conversation is a member of it too.

Each check is made through slack_sdk's real client, as the bot makes its calls.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from tests.fakes.slack_server import FakeSlack

BOT_TOKEN = "xoxb-test-bot-token"
ALICE, BOB = "U1", "U2"
CHANNEL, OUTSIDE, GONE, NEVER = "C1", "COUT", "CGONE", "CNEVER"
SECTION = {"type": "section", "text": {"type": "mrkdwn", "text": "hi"}}


@pytest.fixture
async def fake() -> AsyncIterator[FakeSlack]:
    async with FakeSlack(bot_token=BOT_TOKEN, team_id="T1") as server:
        server.add_user(ALICE, "alice")
        server.add_user(BOB, "bob")
        server.add_channel(CHANNEL, "general", members=[ALICE])
        server.add_channel(GONE, "old", members=[ALICE]).bot_is_member = True
        server.delete_channel(GONE)
        server.add_channel(OUTSIDE, "elsewhere", members=[ALICE]).bot_is_member = False
        yield server


@pytest.fixture
def client(fake: FakeSlack) -> AsyncWebClient:
    return AsyncWebClient(token=BOT_TOKEN, base_url=fake.api_url)


async def _post(client: AsyncWebClient, method: str, **message: Any) -> None:
    """One chat.* call of ``method`` with the arguments each one needs."""
    if method == "chat.postMessage":
        await client.chat_postMessage(**message)
    elif method == "chat.postEphemeral":
        await client.chat_postEphemeral(user=ALICE, **message)
    else:
        posted = await client.chat_postMessage(channel=message["channel"], text="first")
        await client.chat_update(ts=str(posted["ts"]), **message)


async def _error(client: AsyncWebClient, method: str, **message: Any) -> str:
    with pytest.raises(SlackApiError) as caught:
        await _post(client, method, **message)
    return str(caught.value.response["error"])


POSTS = ["chat.postMessage", "chat.postEphemeral"]
ALL_POSTS = [*POSTS, "chat.update"]


@pytest.mark.parametrize("method", POSTS)
async def test_a_deleted_channel_is_not_found(client: AsyncWebClient, method: str) -> None:
    assert await _error(client, method, channel=GONE, text="hi") == "channel_not_found"


@pytest.mark.parametrize("method", POSTS)
async def test_a_channel_nobody_told_the_fake_about_is_not_found(
    client: AsyncWebClient, method: str
) -> None:
    assert await _error(client, method, channel=NEVER, text="hi") == "channel_not_found"


async def test_an_update_in_a_channel_that_does_not_exist_is_not_found(
    client: AsyncWebClient,
) -> None:
    posted = await client.chat_postMessage(channel=CHANNEL, text="first")
    with pytest.raises(SlackApiError) as caught:
        await client.chat_update(channel=NEVER, ts=str(posted["ts"]), text="moved?")
    assert caught.value.response["error"] == "channel_not_found"


async def test_a_file_shared_to_a_channel_that_does_not_exist_is_refused(
    client: AsyncWebClient,
) -> None:
    with pytest.raises(SlackApiError) as caught:
        await client.files_upload_v2(channel=NEVER, filename="a.txt", content=b"a")
    assert caught.value.response["error"] == "invalid_channel"
    await client.files_upload_v2(channel=CHANNEL, filename="a.txt", content=b"a")


async def test_a_conversation_an_event_came_from_exists_with_its_author_in_it(
    fake: FakeSlack, client: AsyncWebClient
) -> None:
    said = fake.message_event(text="hi", user_id=BOB, channel_id="CNEW", channel_type="group")
    fake.event_payload(event=said)  # what Slack delivers: the conversation exists
    await client.chat_postMessage(channel="CNEW", text="answer")
    await client.chat_postEphemeral(channel="CNEW", user=BOB, text="only bob")
    assert await _error(client, "chat.postEphemeral", channel="CNEW", text="x") == (
        "user_not_in_channel"  # Alice said nothing there
    )
    info = (await client.conversations_info(channel="CNEW"))["channel"]
    assert (info["is_private"], info["is_group"]) == (True, True)  # channel_type "group"
    mention = fake.app_mention_event(text="hi", user_id=BOB, channel_id="DNEW")
    fake.event_payload(event=mention)  # no channel_type: a D id is a DM
    dm = (await client.conversations_info(channel="DNEW"))["channel"]
    assert (dm["is_im"], dm["user"]) == (True, BOB)


async def test_an_event_from_a_deleted_channel_does_not_bring_it_back(
    fake: FakeSlack, client: AsyncWebClient
) -> None:
    fake.event_payload(event=fake.message_event(text="hi", user_id=ALICE, channel_id=GONE))
    assert await _error(client, "chat.postMessage", channel=GONE, text="hi") == (
        "channel_not_found"
    )


async def test_an_ephemeral_to_someone_not_in_the_channel_is_refused(
    fake: FakeSlack, client: AsyncWebClient
) -> None:
    with pytest.raises(SlackApiError) as caught:
        await client.chat_postEphemeral(channel=CHANNEL, user=BOB, text="psst")
    assert caught.value.response["error"] == "user_not_in_channel"
    fake.add_member(CHANNEL, BOB)
    await client.chat_postEphemeral(channel=CHANNEL, user=BOB, text="psst")
    fake.remove_member(CHANNEL, BOB)  # Bob leaves
    with pytest.raises(SlackApiError) as caught:
        await client.chat_postEphemeral(channel=CHANNEL, user=BOB, text="psst")
    assert caught.value.response["error"] == "user_not_in_channel"


@pytest.mark.parametrize("how", ["message", "command", "click"])
async def test_who_speaks_runs_a_command_or_clicks_in_a_channel_is_in_it(
    fake: FakeSlack, client: AsyncWebClient, how: str
) -> None:
    if how == "message":
        fake.event_payload(event=fake.message_event(text="hi", user_id=BOB, channel_id=CHANNEL))
    elif how == "command":
        fake.slash_command_payload(text="show", user_id=BOB, channel_id=CHANNEL)
    else:
        fake.block_action_payload(action_id="go", user_id=BOB, channel_id=CHANNEL)
    await client.chat_postEphemeral(channel=CHANNEL, user=BOB, text="only bob")
    assert [m.user for m in fake.ephemerals] == [BOB]


async def test_a_command_in_a_conversation_the_bot_is_not_in_makes_no_channel(
    fake: FakeSlack, client: AsyncWebClient
) -> None:
    # Slash commands work anywhere, also where the bot is not; only events prove it is there.
    fake.slash_command_payload(text="show", user_id=BOB, channel_id=NEVER)
    assert await _error(client, "chat.postMessage", channel=NEVER, text="hi") == (
        "channel_not_found"
    )


@pytest.mark.parametrize("method", POSTS)
async def test_a_channel_the_bot_is_not_in_is_refused(client: AsyncWebClient, method: str) -> None:
    assert await _error(client, method, channel=OUTSIDE, text="hi") == "not_in_channel"
    await _post(client, method, channel=CHANNEL, text="hi")  # a member: accepted


@pytest.mark.parametrize("method", ALL_POSTS)
async def test_text_over_40000_characters_is_too_long(client: AsyncWebClient, method: str) -> None:
    assert await _error(client, method, channel=CHANNEL, text="x" * 40_001) == "msg_too_long"
    await _post(client, method, channel=CHANNEL, text="x" * 40_000)


@pytest.mark.parametrize("method", ALL_POSTS)
async def test_more_than_50_blocks_are_invalid(client: AsyncWebClient, method: str) -> None:
    error = await _error(client, method, channel=CHANNEL, text="t", blocks=[SECTION] * 51)
    assert error == "invalid_blocks"
    await _post(client, method, channel=CHANNEL, text="t", blocks=[SECTION] * 50)


@pytest.mark.parametrize("method", ALL_POSTS)
async def test_a_section_text_over_3000_is_invalid(client: AsyncWebClient, method: str) -> None:
    def section(chars: int) -> dict[str, Any]:
        return {"type": "section", "text": {"type": "mrkdwn", "text": "x" * chars}}

    error = await _error(client, method, channel=CHANNEL, text="t", blocks=[section(3001)])
    assert error == "invalid_blocks"
    await _post(client, method, channel=CHANNEL, text="t", blocks=[section(3000)])


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
