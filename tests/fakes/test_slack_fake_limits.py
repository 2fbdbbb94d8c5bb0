"""The fake Slack keeps Slack's rate limits by default, as its documentation gives them: each
method answers its tier's requests a minute (Tier 2: 20, Tier 3: 50, Tier 4: 100), per
workspace, and a channel takes one new message a second (a post, or a stream started); past
a limit the answer is HTTP 429 ``ratelimited`` with ``Retry-After``, and the refused call is
not counted. A test asks for more only as an app Slack granted more would have it
(``limit_rate``, ``limit_channel_posts``), or moves time instead of waiting.

Each check goes through slack_sdk's real client, without its retry handlers (a 429 raises).
"""

from __future__ import annotations

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from tests.fakes.slack import FakeSlack

BOT_TOKEN = "xoxb-test-bot-token"
ALICE = "U1"
CHANNEL, OTHER = "C1", "C2"


def workspace(server: FakeSlack) -> None:
    server.add_user(ALICE, "alice")
    server.add_channel(CHANNEL, "general", members=[ALICE])
    server.add_channel(OTHER, "random", members=[ALICE])


pytestmark = pytest.mark.fake("slack", bot_token=BOT_TOKEN, team_id="T1", setup=workspace)


async def _refused(call: object) -> int:
    """The Retry-After of a call Slack refused for its rate."""
    with pytest.raises(SlackApiError) as caught:
        await call  # type: ignore[misc]
    response = caught.value.response
    assert (response.status_code, response["error"]) == (429, "ratelimited")
    return int(response.headers["Retry-After"])


@pytest.mark.parametrize(
    ("method", "tier"),
    [("chat.update", 50), ("chat.startStream", 20), ("chat.appendStream", 100)],
)
def test_each_method_has_its_documented_tier_by_default(
    fake: FakeSlack, method: str, tier: int
) -> None:
    assert fake.method_rate(method) == tier
    assert fake.method_rate("auth.test") is None  # "special": no number to keep


async def test_chat_update_answers_fifty_a_minute_in_a_workspace_then_429(
    fake: FakeSlack, web_client: AsyncWebClient
) -> None:
    posted = await web_client.chat_postMessage(channel=CHANNEL, text="first")
    for n in range(50):
        await web_client.chat_update(channel=CHANNEL, ts=str(posted["ts"]), text=f"edit {n}")
    wait = await _refused(web_client.chat_update(channel=CHANNEL, ts=str(posted["ts"]), text="x"))
    assert 59 <= wait <= 60
    # the workspace's limit, whatever the channel
    elsewhere = await web_client.chat_postMessage(channel=OTHER, text="there")
    assert await _refused(web_client.chat_update(channel=OTHER, ts=str(elsewhere["ts"]), text="x"))
    fake.age_rate_windows(60)
    await web_client.chat_update(channel=CHANNEL, ts=str(posted["ts"]), text="a minute later")
    statuses = [c.status for c in fake.calls_of("chat.update")]
    assert statuses == [200] * 50 + [429, 429, 200]


async def test_a_channel_takes_one_new_message_a_second(
    fake: FakeSlack, web_client: AsyncWebClient
) -> None:
    with pytest.raises(SlackApiError, match="msg_too_long"):  # no message: does not count
        await web_client.chat_postMessage(channel=CHANNEL, text="x" * 40_001)
    await web_client.chat_postMessage(channel=CHANNEL, text="one")
    assert await _refused(web_client.chat_postMessage(channel=CHANNEL, text="two")) == 1
    await web_client.chat_postMessage(channel=OTHER, text="another channel")  # its own second
    fake.age_rate_windows(1.0)
    await web_client.chat_postMessage(channel=CHANNEL, text="a second later")
    # a stream started is a new message too
    parent = fake.message_event(text="ask", user_id=ALICE, channel_id=CHANNEL)
    fake.event_payload(event=parent)
    stream = web_client.chat_startStream(
        channel=CHANNEL,
        thread_ts=parent["ts"],
        markdown_text="hi",
        recipient_user_id=ALICE,
        recipient_team_id="T1",
    )
    assert await _refused(stream) == 1
    assert [m.text for m in fake.posted_messages] == ["one", "another channel", "a second later"]


async def test_a_test_asks_for_more_as_an_app_granted_more_would(
    fake: FakeSlack, web_client: AsyncWebClient
) -> None:
    fake.limit_channel_posts(per_second=3)
    for n in range(3):
        await web_client.chat_postMessage(channel=CHANNEL, text=f"burst {n}")
    assert await _refused(web_client.chat_postMessage(channel=CHANNEL, text="fourth")) == 1
    fake.limit_rate("chat.update", per_minute=2)
    ts = str(fake.posted_messages[0].ts)
    for n in range(2):
        await web_client.chat_update(channel=CHANNEL, ts=ts, text=f"edit {n}")
    assert await _refused(web_client.chat_update(channel=CHANNEL, ts=ts, text="third"))
    with pytest.raises(ValueError, match="at least one"):
        fake.limit_channel_posts(per_second=0)
