"""Where Slack offers no slash command (inside a thread, where every answer of the bot
lives): message shortcuts, the App Home tab, and memory leaving with its place. The real
Bolt app (signed HTTP requests) against the fake Slack, as strict as the manifest sets the
app up (its events, its Home tab), the fake OpenAI server."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.fakes.slack import event_body, send_signed
from tests.helpers import all_keys, forgotten
from tests.slack_harness import ALICE, BOB, C1, SCOPE, SECRET, T1, Harness, block_texts

pytestmark = pytest.mark.fake("slack")

EVE = "U5"
FORGET = "memorybot_forget_message"
REMEMBER = "memorybot_remember_message"


async def texts(slack: Harness, scope: str) -> list[str]:
    return [e.text for e in await slack.core.repo.reads.all_entries(scope)]


async def shortcut(slack: Harness, callback_id: str, message: dict[str, Any], user: str) -> str:
    """Run a message shortcut on ``message`` as ``user``; the private answer's text."""
    payload = slack.fake.message_action_payload(
        callback_id=callback_id, user_id=user, channel_id=C1, message=message
    )
    await slack.send_click(payload)
    return block_texts(await slack.response_to(payload["response_url"]))


async def a_thread(slack: Harness) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """Alice asks in #general; Bob writes his badge number in the thread under the answer."""
    asked = await slack.mention("who has the spare key?", user=ALICE)
    await slack.replies(1)
    bobs = await slack.say("my badge is 77-1234", user=BOB, thread_ts=asked["ts"])
    await slack.settle()
    return f"{SCOPE}:{asked['ts']}", asked, bobs


async def test_forget_this_message_in_a_thread_by_its_author_or_an_admin(http: Harness) -> None:
    slack = http
    thread, asked, bobs = await a_thread(slack)
    slack.fake.add_user(EVE, "eve", display_name="Eve")  # neither its author nor an admin
    refused = await shortcut(slack, FORGET, bobs, EVE)
    assert "Only the message's author or an admin" in refused
    assert "my badge is 77-1234" in await texts(slack, thread)
    done = await shortcut(slack, FORGET, bobs, BOB)
    assert "Forgot that message" in done
    assert await texts(slack, thread) == []
    # An admin may forget someone else's: Alice's question in the channel.
    assert "Forgot that message" in await shortcut(slack, FORGET, asked, ALICE)
    users = [e.text for e in await slack.core.repo.reads.all_entries(SCOPE) if e.role == "user"]
    assert users == []


async def test_remember_this_pins_a_note_with_its_link_admins_only(http: Harness) -> None:
    slack = http
    thread, _, bobs = await a_thread(slack)
    refused = await shortcut(slack, REMEMBER, bobs, BOB)
    assert "Only admins" in refused
    pinned = await shortcut(slack, REMEMBER, bobs, ALICE)
    assert "Remembered" in pinned
    [fact] = await slack.core.repo.reads.facts(thread)
    assert fact.pinned and "77-1234" in fact.text and "https://" in fact.text
    assert fact.text.startswith("Bob Builder: my badge is 77-1234 (https://")


async def test_the_app_home_shows_what_is_kept_and_forgets_me_everywhere(http: Harness) -> None:
    slack = http
    thread, _, _ = await a_thread(slack)
    await slack.say("bob in the channel", user=BOB)
    await slack.say("alice in the channel", user=ALICE)
    await slack.settle()
    await slack.deliver(slack.fake.app_home_opened_event(user_id=BOB))
    home = await slack.fake.wait_for_home(BOB)
    shown = json.dumps(home["blocks"])
    assert f"<#{C1}>: 1 message" in shown and "a thread in" in shown
    # Forget me everywhere: asked again first, then done, and the home says what went.
    await slack.send_click(
        slack.fake.home_block_action_payload(
            user_id=BOB, action_id="memory_home_forget_everywhere", view=home
        )
    )
    asking = await slack.fake.wait_for_home(BOB, lambda v: "It cannot be undone" in json.dumps(v))
    await slack.send_click(
        slack.fake.home_block_action_payload(
            user_id=BOB, action_id="memory_home_confirm", view=asking
        )
    )
    done = await slack.fake.wait_for_home(BOB, lambda v: "Forgot you" in json.dumps(v))
    assert "keeps nothing you said" in json.dumps(done["blocks"])
    assert await texts(slack, thread) == []
    assert await texts(slack, SCOPE) != [] and all(
        "bob in" not in t for t in await texts(slack, SCOPE)
    )


async def test_a_deleted_channel_is_forgotten_and_an_archived_one_is_not(http: Harness) -> None:
    slack = http
    thread, _, _ = await a_thread(slack)
    slack.fake.add_channel("C2", "archive-me")
    await slack.say("kept while archived", user=BOB, channel="C2")
    await slack.settle()
    # An archive is no deletion (the app does not even subscribe to it): C2 stays.
    slack.fake.archive_channel("C2")
    await slack.deliver(slack.fake.channel_deleted_event(channel_id=C1, user_id=ALICE))
    await slack.settle()
    assert await forgotten(slack.core, SCOPE) and await forgotten(slack.core, thread)
    assert await texts(slack, f"slack:{T1}:C2") == ["kept while archived"]


@pytest.mark.parametrize("told_by", ["channel_left", "member_left_channel"])
async def test_the_bot_removed_from_a_channel_forgets_it_and_its_threads(
    http: Harness, told_by: str
) -> None:
    """Slack tells the app with channel_left (group_left: private), which it may withhold,
    and with member_left_channel naming the bot: either alone forgets the channel. A person
    leaving changes nothing, and another channel keeps its memory."""
    slack = http
    thread, _, _ = await a_thread(slack)
    slack.fake.add_channel("G2", "secret", is_private=True)
    await slack.say("kept elsewhere", user=BOB, channel="G2", channel_type="group")
    await slack.settle()
    await slack.deliver(slack.fake.member_left_event(channel_id=C1, user_id=BOB))
    await slack.settle()
    assert await texts(slack, thread) != []
    left, member_left = slack.fake.bot_removed_events(channel_id=C1, user_id=ALICE)
    await slack.deliver(left if told_by == "channel_left" else member_left)
    await slack.bot.drain()
    assert await forgotten(slack.core, SCOPE) and await forgotten(slack.core, thread)
    assert await texts(slack, f"slack:{T1}:G2") == ["kept elsewhere"]
    # From a private channel: group_left.
    private_left, _ = slack.fake.bot_removed_events(channel_id="G2", user_id=ALICE)
    assert private_left["type"] == "group_left"
    await slack.deliver(private_left)
    await slack.bot.drain()
    assert await forgotten(slack.core, f"slack:{T1}:G2")


async def test_uninstalling_the_app_forgets_the_workspace(http: Harness) -> None:
    slack = http
    thread, _, _ = await a_thread(slack)
    await slack.command("remember me I am on call this week", user=BOB)
    # Users' tokens revoked (not the bot's): the app stays, and so does memory.
    await slack.deliver(slack.fake.tokens_revoked_event(bot_user_ids=[], oauth_user_ids=[BOB]))
    await slack.settle()
    assert await texts(slack, thread) != []
    for payload in slack.fake.uninstall():  # tokens_revoked (the bot's), app_uninstalled
        sent = await send_signed(slack.url, signing_secret=SECRET, body=event_body(payload))
        assert sent.status == 200
    await slack.bot.drain()
    # Nothing of the workspace is left: no memory, no counters, no spend, no cached names.
    left = [k for k in await all_keys(slack.core) if "T1" in k]
    assert left == [], left
