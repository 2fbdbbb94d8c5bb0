"""Who may act on a message, and where, checked against Slack: a message shortcut in a DM
between two people (Slack offers it there, the app is not in that DM) changes nothing and
says why; the app's own DM is its person's; in a Slack Connect channel an owner of the other
organisation is no admin of the host's memory. The real Bolt app (signed HTTP requests)
against the fake Slack, as the manifest installs the app."""

from __future__ import annotations

from typing import Any

import pytest

from tests.helpers import all_keys
from tests.slack_harness import ALICE, BOB, CAROL, DAVE, DM, T1, T2, Harness, block_texts

pytestmark = pytest.mark.fake("slack")

FORGET = "memorybot_forget_message"
REMEMBER = "memorybot_remember_message"
BETWEEN, SHARED = "DBOBCAROL", "CSHARED"
NOT_HERE = "I am not part of this conversation"


async def shortcut(
    slack: Harness, callback_id: str, message: dict[str, Any], user: str, channel: str
) -> str:
    """Run a message shortcut on ``message`` as ``user``; the private answer's text."""
    payload = slack.fake.message_action_payload(
        callback_id=callback_id, user_id=user, channel_id=channel, message=message
    )
    await slack.send_click(payload)
    return block_texts(await slack.response_to(payload["response_url"]))


async def texts(slack: Harness, scope: str) -> list[str]:
    return [e.text for e in await slack.core.repo.reads.all_entries(scope)]


async def test_a_shortcut_in_a_dm_between_two_people_changes_nothing_and_says_why(
    http: Harness,
) -> None:
    slack = http
    slack.fake.add_dm_between(BETWEEN, BOB, CAROL)
    carols = slack.fake.message_event(
        text="my door code is 4242", user_id=CAROL, channel_id=BETWEEN, channel_type="im"
    )
    slack.fake.add_history(BETWEEN, [carols])
    # Bob is no admin there (nobody is), and Carol's message is not his to pin or forget.
    assert NOT_HERE in await shortcut(slack, REMEMBER, carols, BOB, BETWEEN)
    assert NOT_HERE in await shortcut(slack, FORGET, carols, BOB, BETWEEN)
    # Nor does its author act on a memory the app does not keep; nor does /memory there.
    assert NOT_HERE in await shortcut(slack, FORGET, carols, CAROL, BETWEEN)
    typed = await slack.command("remember Carol's code is 4242", user=BOB, channel=BETWEEN)
    assert NOT_HERE in (typed.text or "")
    await slack.bot.drain()
    # No memory of it (only the cached answer of whose DM it is).
    kept = [k for k in await all_keys(slack.core) if BETWEEN in k]
    assert len(kept) == 1 and ":cache:slack-dm:" in kept[0], kept
    assert await slack.core.repo.reads.facts(f"slack:{T1}:{BETWEEN}") == []
    # Slack said whose the DM is (not the app's: channel_not_found; asked once, then
    # cached); nothing of the message was looked up.
    [lookup] = slack.fake.calls_of("conversations.info")
    assert (lookup.params["channel"], lookup.error) == (BETWEEN, "channel_not_found")
    assert slack.fake.calls_of("chat.getPermalink") == []


async def test_the_apps_own_dm_is_its_persons(http: Harness) -> None:
    slack = http
    mine = await slack.say("my locker is 12", user=ALICE, channel=DM, channel_type="im")
    await slack.replies(1)  # a DM is answered
    pinned = await shortcut(slack, REMEMBER, mine, ALICE, DM)
    assert "Remembered" in pinned
    [note] = await slack.core.repo.reads.facts(f"slack:{T1}:{DM}")
    assert note.pinned and note.text.startswith("Alice: my locker is 12 (https://")
    assert "Forgot that message" in await shortcut(slack, FORGET, mine, ALICE, DM)
    assert "my locker is 12" not in await texts(slack, f"slack:{T1}:{DM}")
    info = slack.fake.calls_of("conversations.info")
    assert [(c.params["channel"], c.response["channel"]["user"]) for c in info] == [(DM, ALICE)]


async def test_when_slack_cannot_say_whose_dm_it_is_nothing_changes(http: Harness) -> None:
    slack = http
    mine = await slack.say("my bike lock is 9", user=ALICE, channel=DM, channel_type="im")
    await slack.replies(1)
    slack.fake.fail_next(method="conversations.info", error="missing_scope")
    answer = await shortcut(slack, REMEMBER, mine, ALICE, DM)
    assert "could not check whose conversation this is" in answer
    assert await slack.core.repo.reads.facts(f"slack:{T1}:{DM}") == []


async def test_an_owner_of_the_other_organisation_is_no_admin_of_a_shared_channel(
    http: Harness,
) -> None:
    slack = http
    slack.fake.add_channel(SHARED, "shared", shared_with=[T2])
    bobs = await slack.say("the launch slips to Friday", user=BOB, channel=SHARED)
    daves = await slack.say("noted on our side", user=DAVE, channel=SHARED)
    await slack.settle()
    scope = f"slack:{T1}:{SHARED}"
    # Dave owns T2, not T1, whose memory this is: not Bob's message, not a pinned note.
    refused = await shortcut(slack, FORGET, bobs, DAVE, SHARED)
    assert "author or an admin of this server or workspace" in refused
    assert "Only admins" in await shortcut(slack, REMEMBER, bobs, DAVE, SHARED)
    assert "Only admins" in (await slack.command("forget all", user=DAVE, channel=SHARED)).text
    assert "the launch slips to Friday" in await texts(slack, scope)
    assert await slack.core.repo.reads.facts(scope) == []
    # His own message is his; a T1 admin forgets Bob's.
    assert "Forgot that message" in await shortcut(slack, FORGET, daves, DAVE, SHARED)
    assert "Forgot that message" in await shortcut(slack, FORGET, bobs, ALICE, SHARED)
    assert await texts(slack, scope) == []
