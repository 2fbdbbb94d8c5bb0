"""The fake Slack tells DMs apart as Slack does: the app's own DM with a person, whom
``conversations.info`` names (``is_im``, ``user``; im:read), and a DM between two people,
which the app is not in and never sees (``channel_not_found`` from every method, no event
from it) though a message shortcut run there still reaches it. And a member of another
organisation in a Slack Connect channel is of their own team, in ``users.info`` and in the
payloads of what they do.

Each check is made through slack_sdk's real client, as the bot makes its calls.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from tests.fakes.slack import FakeSlack

BOT_TOKEN = "xoxb-test-bot-token"
ALICE, BOB, CAROL, DAVE = "U1", "U2", "U3", "U4"
OWN_DM, BETWEEN, SHARED = "DALICE", "DBOBCAROL", "CSHARED"


def workspace(server: FakeSlack) -> None:
    for user_id, name in ((ALICE, "alice"), (BOB, "bob"), (CAROL, "carol")):
        server.add_user(user_id, name)
    server.add_user(DAVE, "dave", team_id="T2", is_owner=True)
    server.add_channel(OWN_DM, OWN_DM, is_im=True, user_id=ALICE)
    server.add_dm_between(BETWEEN, BOB, CAROL)
    server.add_channel(SHARED, "shared", shared_with=["T2"])


pytestmark = pytest.mark.fake(
    "slack",
    bot_token=BOT_TOKEN,
    team_id="T1",
    scopes=["im:read", "im:write", "channels:read", "chat:write", "im:history", "users:read"],
    setup=workspace,
)


async def _error(call: Awaitable[object]) -> str:
    with pytest.raises(SlackApiError) as caught:
        await call
    return str(caught.value.response["error"])


async def test_the_apps_own_dm_names_its_person_and_a_dm_between_people_is_not_found(
    fake: FakeSlack, web_client: AsyncWebClient
) -> None:
    own = (await web_client.conversations_info(channel=OWN_DM))["channel"]
    assert (own["is_im"], own["user"]) == (True, ALICE)
    calls: list[Callable[[], Awaitable[object]]] = [
        lambda: web_client.conversations_info(channel=BETWEEN),
        lambda: web_client.conversations_history(channel=BETWEEN),
        lambda: web_client.chat_postMessage(channel=BETWEEN, text="hi"),
        lambda: web_client.conversations_open(channel=BETWEEN),
    ]
    for call in calls:
        assert await _error(call()) == "channel_not_found"


async def test_a_dm_between_people_sends_no_event_but_its_shortcuts_reach_the_app(
    fake: FakeSlack, web_client: AsyncWebClient
) -> None:
    said = fake.message_event(text="my pin", user_id=CAROL, channel_id=BETWEEN, channel_type="im")
    with pytest.raises(ValueError, match="DM between people"):
        fake.event_payload(event=said)
    fake.add_history(BETWEEN, [said])
    payload = fake.message_action_payload(
        callback_id="c", user_id=BOB, channel_id=BETWEEN, message=said
    )
    assert payload["channel"] == {"id": BETWEEN, "name": "directmessage"}
    assert payload["message"]["user"] == CAROL
    link = web_client.chat_getPermalink(channel=BETWEEN, message_ts=said["ts"])
    assert await _error(link) == "channel_not_found"


async def test_a_member_of_another_organisation_is_of_their_own_team(
    fake: FakeSlack, web_client: AsyncWebClient
) -> None:
    said = fake.message_event(text="hello", user_id=ALICE, channel_id=SHARED)
    fake.event_payload(event=said)
    payload = fake.message_action_payload(
        callback_id="c", user_id=DAVE, channel_id=SHARED, message=said
    )
    assert (payload["team"]["id"], payload["user"]["team_id"]) == ("T1", "T2")
    dave = (await web_client.users_info(user=DAVE))["user"]
    assert (dave["team_id"], dave["is_owner"]) == ("T2", True)
