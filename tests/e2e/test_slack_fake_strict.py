"""The fake Slack refuses what Slack refuses (issue 17): posts to a deleted channel or one the
bot is not in, methods the installed scopes do not allow, and text or blocks over Slack's
limits; and a click in an ephemeral message has Slack's ephemeral payload shape.

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
ALICE = "U1"
CHANNEL, OUTSIDE, GONE = "C1", "COUT", "CGONE"
SECTION = {"type": "section", "text": {"type": "mrkdwn", "text": "hi"}}


@pytest.fixture
async def fake() -> AsyncIterator[FakeSlack]:
    async with FakeSlack(bot_token=BOT_TOKEN, team_id="T1") as server:
        server.add_user(ALICE, "alice")
        server.add_channel(CHANNEL, "general")
        server.add_channel(GONE, "old").bot_is_member = True
        server.delete_channel(GONE)
        server.add_channel(OUTSIDE, "elsewhere").bot_is_member = False
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
