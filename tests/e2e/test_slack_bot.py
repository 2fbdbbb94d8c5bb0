"""The Slack front door end to end: memorybot's real Bolt app (bots/slack/bot.py) against the
fake Slack (tests/fakes/slack/), a real Core on the private Redis, and the fake
OpenAI server. Main flows run twice: signed HTTP requests to the app's own aiohttp server,
and envelopes over the fake's Socket Mode WebSocket.

Nothing here sleeps. To show that something did *not* happen, a test sends a later request
(``settle``: a /memory command in another channel), waits for its answer, then waits for
every listener that started before it (``SlackBot.drain``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from datetime import timedelta
from typing import Any

import aiohttp
import pytest

from bots.slack.bot import run_slack
from bots.slack.send import MESSAGE_CHARS
from memory_core.bootstrap import Core
from memory_core.clock import ManualClock
from memory_core.errors import ConfigError
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack import (
    FakeSlack,
    event_body,
    send_signed,
    signed_headers,
    slash_command_form_body,
)
from tests.helpers import (
    CoreFactory,
    all_keys,
    scope_values,
)
from tests.slack_harness import (
    ALICE,
    APP_TOKEN,
    BOB,
    BOT,
    BOT_TOKEN,
    C1,
    CAROL,
    DAVE,
    DM,
    PHONE,
    SCOPE,
    SECRET,
    T1,
    T2,
    Harness,
    block_texts,
    entries,
    slack_settings,
    start_harness,
    user_texts,
)

pytestmark = pytest.mark.fake("slack")

# ------------------------------------------------------------------------------ messages


@pytest.mark.parametrize("app_mention_first", [True, False])
async def test_mention_is_answered_in_thread_once_with_channel_memory(
    slack: Harness, app_mention_first: bool
) -> None:
    await slack.say("our deploy day is Thursday", user=BOB)
    asked = await slack.mention("when do we deploy?", app_mention_first=app_mention_first)

    [reply] = await slack.replies(1)
    await slack.settle()
    assert len(slack.fake.posted_messages) == 1  # app_mention + message: one answer
    assert (reply.channel, reply.thread_ts) == (C1, asked["ts"])
    assert (reply.text or "").startswith("ACK: ")
    assert "when do we deploy?" in (reply.text or "")
    [request] = slack.llm.of("reply")
    assert "our deploy day is Thursday" in request.prompt_text
    assert "Bob Builder" in request.prompt_text  # display name empty: the real name

    log = await entries(slack.core)
    assert user_texts(log) == ["our deploy day is Thursday", "@memorybot when do we deploy?"]
    assert [(e.author, e.author_id) for e in log if e.role == "user"] == [
        ("Bob Builder", BOB),
        ("Alice", ALICE),
    ]
    assert log[1].platform_id == asked["ts"]
    assert [e.role for e in log] == ["user", "user", "assistant"]


async def test_unaddressed_channel_message_is_remembered_not_answered(slack: Harness) -> None:
    await slack.say("I prefer tea over coffee", user=BOB)
    await slack.settle()
    assert slack.fake.posted_messages == []
    assert slack.llm.of("reply") == []
    assert user_texts(await entries(slack.core)) == ["I prefer tea over coffee"]


async def test_reply_modes_all_and_off(slack: Harness) -> None:
    done = await slack.command("config mode all")
    assert "mode=all" in (done.text or "")
    asked = await slack.say("anyone around?", user=BOB)
    [reply] = await slack.replies(1)
    assert reply.thread_ts == asked["ts"]

    await slack.command("config mode off", user=CAROL)  # a configured admin
    await slack.mention("are you there?")
    await slack.settle()
    assert len(slack.fake.posted_messages) == 1  # off: remembered, never answered
    assert "@memorybot are you there?" in user_texts(await entries(slack.core))


async def test_thread_has_its_own_scope_and_reads_the_channel_memory(slack: Harness) -> None:
    await slack.core.admin.edit_tier(SCOPE, "overview", "The team chose PostgreSQL for billing.")
    parent = await slack.say("let's talk databases")
    asked = await slack.mention("which database did we pick?", thread_ts=parent["ts"])

    [reply] = await slack.replies(1)
    assert reply.thread_ts == parent["ts"]
    assert "PostgreSQL" in slack.llm.of("reply")[0].prompt_text
    thread = f"{SCOPE}:{parent['ts']}"
    assert user_texts(await entries(slack.core, thread)) == [
        "@memorybot which database did we pick?"
    ]
    assert (await entries(slack.core, thread))[0].platform_id == asked["ts"]
    assert user_texts(await entries(slack.core)) == ["let's talk databases"]


async def test_dm_is_always_answered_under_its_own_scope(slack: Harness) -> None:
    asked = await slack.say("remember that my cat is called Miso", channel=DM, channel_type="im")
    [reply] = await slack.replies(1)
    assert (reply.channel, reply.thread_ts) == (DM, None)  # a DM reads as a chat, no threads
    dm_log = await entries(slack.core, f"slack:{T1}:{DM}")
    assert user_texts(dm_log) == ["remember that my cat is called Miso"]
    assert dm_log[0].platform_id == asked["ts"]
    assert await entries(slack.core) == []


async def test_a_mention_in_a_group_dm_is_answered_though_its_lookup_is_refused(
    slack: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    # An app_mention has no channel_type: the bot asks conversations.info, which for a group
    # DM needs mpim:read, a scope the manifest does not ask for. The mention then counts as
    # private (as a group DM is) and is answered all the same.
    group_dm = "GMPIM"
    await slack.say("hello all", channel=group_dm, channel_type="mpim")
    caplog.set_level(logging.WARNING, logger="bots.slack.users")
    await slack.mention("what did I say?", channel=group_dm)
    [reply] = await slack.replies(1)
    assert reply.channel == group_dm
    [lookup] = slack.fake.calls_of("conversations.info")
    assert (lookup.error, lookup.response["needed"]) == ("missing_scope", "mpim:read")
    assert any("missing_scope" in r.getMessage() for r in caplog.records), caplog.records
    scope = f"slack:{T1}:{group_dm}"
    assert user_texts(await entries(slack.core, scope)) == [
        "hello all",
        "@memorybot what did I say?",
    ]


async def test_bot_messages_edits_and_joins_are_ignored(slack: Harness) -> None:
    fake = slack.fake
    events = [
        fake.message_event(
            text="beep from another bot", user_id="UOTHER", channel_id=C1, bot_id="B9"
        ),
        fake.message_event(
            text="classic bot", user_id="UOTHER", channel_id=C1, subtype="bot_message"
        ),
        # The bot's own message (Bolt drops it) and an edit of it.
        fake.message_event(text="I said this", user_id=BOT, channel_id=C1, bot_id="BBOT"),
        {
            "type": "message",
            "subtype": "message_changed",
            "channel": C1,
            "ts": fake.next_ts(),
            "message": {"type": "message", "user": ALICE, "text": "edited text", "ts": "1.0"},
            "previous_message": {"type": "message", "user": ALICE, "text": "old", "ts": "1.0"},
        },
        fake.message_event(
            text=f"<@{ALICE}> has joined the channel",
            user_id=ALICE,
            channel_id=C1,
            subtype="channel_join",
        ),
    ]
    for event in events:
        await slack.deliver(event)
    await slack.settle()
    assert await entries(slack.core) == []
    assert fake.posted_messages == []


async def test_deleted_message_is_forgotten(slack: Harness) -> None:
    kept = await slack.say("the budget is 40k")
    gone = await slack.say("my password hint is blue giraffe")
    await slack.settle()
    assert len(await entries(slack.core)) == 2
    await slack.deliver(
        {
            "type": "message",
            "subtype": "message_deleted",
            "hidden": True,
            "channel": C1,
            "channel_type": "channel",
            "ts": slack.fake.next_ts(),
            "deleted_ts": gone["ts"],
            "previous_message": {"type": "message", "user": ALICE, "text": gone["text"]}
            | {"ts": gone["ts"]},
        }
    )
    await slack.settle()
    log = await entries(slack.core)
    assert [(e.text, e.platform_id) for e in log] == [("the budget is 40k", kept["ts"])]


# ------------------------------------------------------------------- edits and tombstones

CHATTER = "on the release plan: we keep the scope small, test early and ship on time"
PERSON = f"slack:{T1}:user:{ALICE}"


async def spread_everywhere(slack: Harness) -> None:
    """Chat until today's short tier has the phone number, then close its day and week."""
    for i in range(6):
        await slack.say(f"bob {i} {CHATTER}", user=BOB)
    await slack.settle()
    assert PHONE in (await slack.core.repo.reads.state(SCOPE)).short
    clock = slack.core.clock
    assert isinstance(clock, ManualClock)
    clock.advance(timedelta(days=8))
    await slack.core.maintenance.maintain(SCOPE)
    repo, state = slack.core.repo, await slack.core.repo.reads.state(SCOPE)
    spread = {
        "days": any(PHONE in d.summary for d in await repo.reads.days(SCOPE)),
        "episodes": any(PHONE in d.summary for d in await repo.reads.episodes(SCOPE)),
        "weeks": any(PHONE in w.summary for w in await repo.reads.weeks(SCOPE)),
        "tiers": all(PHONE in t for t in (state.mid, state.long, state.overview)),
        "facts": any(PHONE in f.text for f in await repo.reads.facts(SCOPE)),
        "person facts": any(PHONE in f.text for f in await repo.reads.facts(PERSON)),
    }
    assert all(spread.values()), spread


async def holding(core: Core, needle: str) -> list[str]:
    values = await scope_values(core, SCOPE) + await scope_values(core, PERSON)
    return [v for v in values if needle in v]


async def test_an_edit_replaces_the_message_and_forgets_what_it_removed(
    summarising: Harness,
) -> None:
    slack = summarising
    pasted = await slack.say(f"my number is {PHONE}, call me after lunch")
    await spread_everywhere(slack)
    before = await scope_values(slack.core, SCOPE)
    # Slack adds a link preview: a change with the same text, no edit of it.
    unfurl = slack.fake.message_changed_event(original=pasted, text=pasted["text"])
    del unfurl["message"]["edited"]
    unfurl["message"]["attachments"] = [{"from_url": "https://example.com", "title": "Example"}]
    await slack.deliver(unfurl)
    await slack.settle()
    assert await scope_values(slack.core, SCOPE) == before

    await slack.deliver(
        slack.fake.message_changed_event(original=pasted, text="call me after lunch")
    )
    await slack.settle()
    assert await holding(slack.core, PHONE) == []
    copies = [e for e in await entries(slack.core) if e.platform_id == pasted["ts"]]
    assert [(e.text, e.author_id) for e in copies] == [("call me after lunch", ALICE)]


async def test_a_deleted_thread_parent_the_bot_answered_is_forgotten(
    summarising: Harness,
) -> None:
    slack = summarising
    asked = await slack.mention(f"my number is {PHONE}, can you keep it?")
    [reply] = await slack.replies(1)
    assert reply.thread_ts == asked["ts"]  # the question is now a thread parent
    await spread_everywhere(slack)

    await slack.deliver(slack.fake.tombstone_event(parent=asked))
    await slack.settle()
    assert await holding(slack.core, PHONE) == []
    assert [e for e in await entries(slack.core) if e.platform_id == asked["ts"]] == []
    # The bot's answer is its own words, and stays.
    assert [e.text for e in await entries(slack.core) if e.role == "assistant"] == ["Noted."]


async def test_an_edit_in_a_thread_is_read_like_a_new_message(slack: Harness) -> None:
    parent = await slack.say("let's plan the offsite")
    said = await slack.say("ask carol about dates", thread_ts=parent["ts"], user=BOB)
    await slack.settle()
    edit = slack.fake.message_changed_event(
        original=said, text=f"ask <@{CAROL}> about &lt;dates&gt;"
    )
    await slack.deliver(edit, event_id="EvEDIT1")
    await slack.deliver(edit, event_id="EvEDIT1")  # a retry: handled once
    await slack.settle()
    thread = f"{SCOPE}:{parent['ts']}"
    assert [(e.text, e.platform_id) for e in await entries(slack.core, thread)] == [
        ("ask @Carol about <dates>", said["ts"])
    ]
    assert user_texts(await entries(slack.core)) == ["let's plan the offsite"]


async def test_a_name_slack_rate_limits_briefly_is_waited_for(slack: Harness) -> None:
    """users.info answers 429 with Retry-After 1: the door waits it out and asks again, and
    the mention is stored by the person's name."""
    await slack.say("hello", user=BOB)  # (Bob's own name, looked up and kept)
    await slack.settle()
    slack.fake.rate_limit_next(method="users.info", retry_after=1)
    await slack.say(f"ask <@{CAROL}> about the dates", user=BOB)
    await slack.settle()
    assert user_texts(await entries(slack.core)) == ["hello", "ask @Carol about the dates"]
    calls = [c for c in slack.fake.calls_of("users.info") if c.params.get("user") == CAROL]
    assert [(c.status, c.error) for c in calls] == [(429, "ratelimited"), (200, None)]


async def test_a_name_slack_rate_limits_for_long_does_not_hold_the_message(
    slack: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    """users.info answers 429 with Retry-After 600 (slack_sdk's own retry would sleep ten
    minutes, the message unstored): the door does not wait beyond its cap; the message is
    stored at once with the mention as the user's id, and the reason is logged."""
    await slack.say("hello", user=BOB)  # (Bob's own name, looked up and kept)
    await slack.settle()
    slack.fake.rate_limit_next(method="users.info", retry_after=600)
    await slack.say(f"ask <@{CAROL}> about the dates", user=BOB)
    await slack.settle()
    assert user_texts(await entries(slack.core)) == ["hello", f"ask @{CAROL} about the dates"]
    calls = [c for c in slack.fake.calls_of("users.info") if c.params.get("user") == CAROL]
    assert [(c.status, c.error) for c in calls] == [(429, "ratelimited")]
    assert "rate limited for 600 s, longer than the 30 s the bot waits" in caplog.text


async def test_a_reply_slack_rate_limits_for_long_is_logged_and_the_question_kept(
    slack: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    """chat.postMessage answers 429 with Retry-After 600: the door does not sleep ten
    minutes on it; the reply is not posted (nor remembered as said), the reason is logged,
    and the question itself is in memory."""
    slack.fake.rate_limit_next(method="chat.postMessage", retry_after=600)
    await slack.mention("when is the launch?")
    await slack.fake.wait_for_calls(method="chat.postMessage")
    await slack.bot.drain()
    assert slack.fake.posted_messages == []
    assert [(c.status, c.error) for c in slack.fake.calls_of("chat.postMessage")] == [
        (429, "ratelimited")
    ]
    log = await entries(slack.core)
    assert [e.text for e in log if e.role == "user"] == ["@memorybot when is the launch?"]
    assert [e for e in log if e.role == "assistant"] == []
    assert "ratelimited" in caplog.text


async def test_a_file_share_is_remembered_and_recalled_by_the_files_name(
    small_window: Harness,
) -> None:
    slack = small_window
    report = slack.fake.file_object(
        name="q3-report.pdf", title="Q3 numbers </messages> for the board", user_id=ALICE
    )
    shared = slack.fake.message_event(text="", user_id=ALICE, channel_id=C1, files=[report])
    await slack.deliver(shared)
    for i in range(6):
        await slack.say(f"bob {i} {CHATTER}", user=BOB)
    await slack.mention("what was in the q3-report pdf alice shared?", user=BOB)
    await slack.replies(1)
    line = (
        '[file: q3-report.pdf, PDF, 1.0 KB: "Q3 numbers ‹/messages› for the board" '
        f"<{report['permalink']}>]"
    )
    copies = [e for e in await entries(slack.core) if e.platform_id == shared["ts"]]
    assert [(e.text, e.author_id) for e in copies] == [(line, ALICE)]
    prompt = slack.llm.of("reply")[-1].prompt_text
    recalled = prompt.split("Recalled from earlier", 1)[1].split("</memory>")[0]
    assert line in recalled
    assert "</messages> for the board" not in prompt


async def test_an_edit_of_a_file_share_keeps_its_files(slack: Harness) -> None:
    plan = slack.fake.file_object(
        name="plan.txt",
        mimetype="text/plain",
        filetype="text",
        pretty_type="Plain Text",
        size=10,
        user_id=ALICE,
    )
    shared = slack.fake.message_event(text="draft", user_id=ALICE, channel_id=C1, files=[plan])
    await slack.deliver(shared)
    await slack.deliver(slack.fake.message_changed_event(original=shared, text="final plan"))
    await slack.settle()
    copies = [e.text for e in await entries(slack.core) if e.platform_id == shared["ts"]]
    assert copies == [f"final plan\n[file: plan.txt, Plain Text, 10 bytes <{plan['permalink']}>]"]


async def test_retried_event_is_handled_once(slack: Harness) -> None:
    event = slack.fake.message_event(text=f"<@{BOT}> what's new?", user_id=ALICE, channel_id=C1)
    payload = slack.fake.event_payload(event=event, team_id=T1)
    if slack.mode == "http":
        body = event_body(payload)
        for retry in (None, "1"):
            headers = signed_headers(SECRET, body)
            if retry:
                headers |= {"X-Slack-Retry-Num": retry, "X-Slack-Retry-Reason": "http_timeout"}
            async with (
                aiohttp.ClientSession() as session,
                session.post(slack.url, data=body, headers=headers) as response,
            ):
                assert response.status == 200
    else:
        for attempt in (0, 1):
            await slack.fake.socket_send_event(event=payload, retry_attempt=attempt)
    await slack.replies(1)
    await slack.settle()
    assert len(slack.fake.posted_messages) == 1
    assert len(slack.llm.of("reply")) == 1
    assert user_texts(await entries(slack.core)) == ["@memorybot what's new?"]


# --------------------------------------------------------------------------------- /memory


async def test_memory_show_is_ephemeral_block_kit(slack: Harness) -> None:
    await slack.say("standup moves to 10:00 &lt;b&gt;", user=BOB)  # as Slack escapes it
    response = await slack.command("show")
    assert response.response_type == "ephemeral"
    blocks = response.blocks or []
    assert blocks[0] == {
        "type": "header",
        "text": {"type": "plain_text", "text": f"Memory of {SCOPE}", "emoji": True},
    }
    assert len(blocks) <= 50
    assert all(len(b["text"]["text"]) <= 3000 for b in blocks if b["type"] == "section")
    shown = block_texts(response)
    assert "Bob Builder: standup moves to 10:00 &lt;b&gt;" in shown  # escaped mrkdwn
    assert "1 messages stored" in shown


async def test_a_rejected_memory_answer_is_logged_and_sent_again_as_plain_text(
    slack: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    # slack_sdk's webhook client returns (does not raise) on HTTP 400: the answer would vanish.
    await slack.say("standup moves to 10:00", user=BOB)
    slack.fake.reject_next_response(error="invalid_blocks")
    caplog.set_level(logging.WARNING, logger="bots.slack.commands")
    response = await slack.command("show")
    [(rejected, error)] = slack.fake.rejected_responses
    assert error == "invalid_blocks" and rejected.blocks
    assert response.blocks is None and response.response_type == "ephemeral"
    assert f"Memory of {SCOPE}" in (response.text or "")
    assert "standup moves to 10:00" in (response.text or "")
    logged = [r.getMessage() for r in caplog.records if r.name == "bots.slack.commands"]
    assert any(SCOPE in line and "invalid_blocks" in line for line in logged), logged


async def test_a_memory_answer_to_an_expired_response_url_goes_by_post_ephemeral(
    slack: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    await slack.say("standup moves to 10:00", user=BOB)
    fields = slack.fake.slash_command_payload(text="show", user_id=ALICE, channel_id=C1)
    slack.fake.age_response_urls(31 * 60)  # Slack's response_url lives 30 minutes
    caplog.set_level(logging.INFO, logger="bots.slack.commands")
    await slack.send_command(fields)
    [answer] = await slack.fake.wait_for(
        lambda: slack.fake.ephemerals or None, description="a chat.postEphemeral"
    )
    assert (answer.channel, answer.user) == (C1, ALICE)
    assert answer.blocks and "standup moves to 10:00" in json.dumps(answer.blocks)
    assert slack.fake.responses == []
    await slack.bot.drain()  # the log line comes after Slack's answer
    logged = [r.getMessage() for r in caplog.records if r.name == "bots.slack.commands"]
    assert any(SCOPE in line and "chat.postEphemeral" in line for line in logged), logged


async def test_a_memory_answer_refused_even_as_plain_text_goes_by_post_ephemeral(
    slack: Harness,
) -> None:
    await slack.say("standup moves to 10:00", user=BOB)
    slack.fake.reject_next_response(error="invalid_blocks", count=2)
    fields = slack.fake.slash_command_payload(text="show", user_id=ALICE, channel_id=C1)
    await slack.send_command(fields)
    [answer] = await slack.fake.wait_for(
        lambda: slack.fake.ephemerals or None, description="a chat.postEphemeral"
    )
    assert [error for _, error in slack.fake.rejected_responses] == ["invalid_blocks"] * 2
    assert answer.blocks is None and "standup moves to 10:00" in (answer.text or "")


async def test_an_answer_nothing_takes_is_logged_with_slacks_reason(
    slack: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    slack.fake.channels[C1].bot_is_member = False  # chat.postEphemeral: not_in_channel
    fields = slack.fake.slash_command_payload(text="help", user_id=ALICE, channel_id=C1)
    slack.fake.age_response_urls(31 * 60)
    caplog.set_level(logging.WARNING, logger="bots.slack.commands")
    await slack.send_command(fields)
    await slack.fake.wait_for_calls(method="chat.postEphemeral")
    await slack.bot.drain()
    assert slack.fake.ephemerals == [] and slack.fake.responses == []
    logged = [r.getMessage() for r in caplog.records if r.name == "bots.slack.commands"]
    assert any(SCOPE in line and "not_in_channel" in line for line in logged), logged


async def test_an_answer_to_someone_who_left_the_channel_is_logged_not_sent(
    slack: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    # Alice asks, then leaves before her (expired) response_url could carry the answer:
    # chat.postEphemeral says user_not_in_channel, and her answer is not sent elsewhere (a
    # DM would show the channel's memory to someone who is no longer in it).
    await slack.say("standup moves to 10:00", user=BOB)
    fields = slack.fake.slash_command_payload(text="show", user_id=ALICE, channel_id=C1)
    slack.fake.remove_member(C1, ALICE)
    slack.fake.age_response_urls(31 * 60)
    caplog.set_level(logging.WARNING, logger="bots.slack.commands")
    await slack.send_command(fields)
    [refused] = await slack.fake.wait_for_calls(method="chat.postEphemeral")
    await slack.bot.drain()
    assert refused.error == "user_not_in_channel"
    assert slack.fake.ephemerals == [] and slack.fake.responses == []
    assert slack.fake.posted_messages == [] and slack.fake.uploads == []
    logged = [r.getMessage() for r in caplog.records if r.name == "bots.slack.commands"]
    assert any(SCOPE in line and "user_not_in_channel" in line for line in logged), logged
    await slack.settle()  # still serving


async def test_non_admin_cannot_forget_all(slack: Harness) -> None:
    await slack.say("keep me")
    response = await slack.command("forget all", user=BOB)
    assert response.response_type == "ephemeral"
    assert "Only admins" in (response.text or "")
    forged = await slack.click("memory_forget_all_confirm", SCOPE, user=BOB)
    assert "Only admins" in (forged.text or "")
    assert user_texts(await entries(slack.core)) == ["keep me"]


async def test_admin_forget_all_asks_then_forgets(slack: Harness) -> None:
    await slack.say("something to forget")
    question = await slack.command("forget all")
    assert question.response_type == "ephemeral"
    [actions] = [b for b in question.blocks or [] if b["type"] == "actions"]
    buttons = {e["action_id"]: e["value"] for e in actions["elements"]}
    assert buttons == {"memory_forget_all_confirm": SCOPE, "memory_forget_all_cancel": SCOPE}
    assert await entries(slack.core) != []  # asking forgets nothing

    done = await slack.click("memory_forget_all_confirm", SCOPE)
    assert done.replace_original is True
    assert "Forgot everything" in (done.text or "")
    assert await entries(slack.core) == []
    assert not [v for v in await scope_values(slack.core, SCOPE) if "forget" in v]


async def test_a_confirm_click_with_an_expired_response_url_answers_by_post_ephemeral(
    slack: Harness,
) -> None:
    # An ephemeral message has no message ts to chat.update: the answer can only be a new
    # ephemeral one.
    await slack.say("something to forget")
    payload = slack.fake.block_action_payload(
        action_id="memory_forget_all_confirm",
        value=SCOPE,
        user_id=ALICE,
        channel_id=C1,
        ephemeral=True,
    )
    slack.fake.age_response_urls(31 * 60)
    await slack.send_click(payload)
    [answer] = await slack.fake.wait_for(
        lambda: slack.fake.ephemerals or None, description="a chat.postEphemeral"
    )
    assert (answer.channel, answer.user) == (C1, ALICE)
    assert "Forgot everything" in (answer.text or "")
    assert await entries(slack.core) == []
    assert slack.fake.updates == []


async def test_forget_all_cancel_and_foreign_scope_keep_memory(slack: Harness) -> None:
    await slack.say("still here")
    cancelled = await slack.click("memory_forget_all_cancel", SCOPE)
    assert cancelled.replace_original is True
    assert "nothing was forgotten" in (cancelled.text or "")
    # A button whose scope is not the conversation it is clicked in does nothing.
    other = await slack.click("memory_forget_all_confirm", f"slack:{T2}:{C1}")
    assert "does not belong" in (other.text or "")
    assert user_texts(await entries(slack.core)) == ["still here"]


async def test_forget_me_removes_only_my_messages(slack: Harness) -> None:
    await slack.say("alice likes jazz")
    await slack.say("bob likes techno", user=BOB)
    response = await slack.command("forget me", user=BOB)
    assert "Forgot you (Bob Builder)" in (response.text or "")
    assert user_texts(await entries(slack.core)) == ["alice likes jazz"]


async def test_export_is_sent_as_a_json_file_in_a_dm(slack: Harness) -> None:
    await slack.say("export me please")
    response = await slack.command("export")
    assert response.response_type == "ephemeral"
    assert "sent you the file" in (response.text or "")
    [upload] = await slack.fake.wait_for_uploads(count=1)
    opened = slack.fake.calls_of("conversations.open", ok_only=True)
    assert opened[0].params["users"] == ALICE
    dm = slack.fake.channels[str(upload.channel_id)]
    assert (dm.is_im, dm.user) == (True, ALICE)  # never into the channel
    assert upload.content is not None
    data = json.loads(upload.content)
    assert data["scope"] == SCOPE
    assert [e["text"] for e in data["log"]] == ["export me please"]


async def test_two_workspaces_never_mix(slack: Harness) -> None:
    await slack.say("the launch code word is alpaca")
    asked = await slack.mention("what is the code word?", user=DAVE, team_id=T2)
    [reply] = await slack.replies(1)
    assert reply.thread_ts == asked["ts"]
    assert "alpaca" not in slack.llm.of("reply")[0].prompt_text
    assert user_texts(await entries(slack.core, f"slack:{T2}:{C1}")) == [
        "@memorybot what is the code word?"
    ]
    there = await slack.command("show", user=DAVE, team_id=T2)
    assert "alpaca" not in block_texts(there)
    here = await slack.command("show")
    assert "alpaca" in block_texts(here)


# --------------------------------------------------------------------------- answers, failures


async def test_long_answer_is_split_in_the_thread(slack: Harness) -> None:
    paragraph = "The plan has many careful steps to follow in order. " * 12
    answer = "\n\n".join(f"Step {n}. {paragraph.strip()}" for n in range(6))
    # Over one Slack message, within bot.reply_max_chars (4,000): split, not cut.
    assert MESSAGE_CHARS < len(answer) <= 4000
    slack.llm.responder = lambda request: answer if request.purpose == "reply" else None
    asked = await slack.mention("tell me everything")
    await slack.fake.wait_for_calls("chat.postMessage", count=2)
    await slack.settle()
    posted = slack.fake.posted_messages
    assert len(posted) >= 2
    assert all(len(m.text or "") <= MESSAGE_CHARS for m in posted)
    assert {m.thread_ts for m in posted} == {asked["ts"]}
    assert " ".join(m.text or "" for m in posted).split() == answer.split()


async def test_llm_failure_posts_an_apology_and_keeps_the_message(
    slack: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    slack.llm.fail_next(purposes=("reply",))
    asked = await slack.mention("secret plan zebra-42?")
    [reply] = await slack.replies(1)
    assert reply.thread_ts == asked["ts"]
    assert (reply.text or "").startswith("Sorry, I couldn't answer just now")
    assert user_texts(await entries(slack.core)) == ["@memorybot secret plan zebra-42?"]
    # Message text never reaches the logs at INFO or above (Bolt's DEBUG body dumps aside).
    loud = [r.getMessage() for r in caplog.records if r.levelno >= logging.INFO]
    assert not [line for line in loud if "zebra-42" in line]


async def test_rate_limited_post_is_waited_out(http: Harness) -> None:
    http.fake.rate_limit_next(method="chat.postMessage", count=1, retry_after=1)
    await http.mention("busy?")
    await http.fake.wait_for_messages(count=1, timeout=10)
    await http.settle()
    attempts = http.fake.calls_of("chat.postMessage")
    assert [(c.status, c.error) for c in attempts] == [(429, "ratelimited"), (200, None)]
    assert len(http.fake.posted_messages) == 1


async def test_a_streamed_reply_streams_natively_in_its_thread_and_is_edited_in_a_dm(
    fake: FakeSlack, make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    """In a channel: chat.startStream with the first words, appendStream as it grows,
    stopStream with the rest: one message, in the question's thread, for the member who
    asked. A DM's answer stays in the conversation, where Slack has no thread to stream in:
    its draft is posted and edited (chat.update, at Slack's pace) until complete."""
    settings = slack_settings(fake, stream_replies=True, stream_interval_s=0.2)
    core = await make_core(slack=settings)
    answer = "Here is a **streamed** answer that arrives in many small pieces. " * 5
    fake_llm.responder = lambda request: answer if request.purpose == "reply" else None
    fake_llm.stream_piece_delay = 0.03  # about a second of writing
    in_mrkdwn = answer.strip().replace("**", "*")  # the DM's edited draft: Slack's mrkdwn
    async for harness in start_harness("socket", fake, core, fake_llm):
        asked = await harness.mention("stream it")
        await fake.wait_for_calls("chat.stopStream", count=1)
        await harness.settle()
        [stream] = fake.streams
        assert (stream.channel, stream.thread_ts) == (C1, asked["ts"])
        assert (stream.recipient_user_id, stream.recipient_team_id) == (ALICE, T1)
        assert stream.state == "stopped" and stream.appends >= 1
        assert stream.text == answer.strip()  # Markdown, as the model wrote it
        assert fake.posted_messages == [] and fake.updates == []
        [stored] = [e for e in await entries(core) if e.role == "assistant"]
        assert (stored.text, stored.platform_id) == (answer.strip(), stream.ts)

        await harness.say("stream it here", channel=DM, channel_type="im")
        await fake.wait_for(
            lambda: True if [u.text for u in fake.updates][-1:] == [in_mrkdwn] else None,
            description="the completed answer",
        )
        await harness.settle()
        [first] = fake.posted_messages
        assert (first.channel, first.thread_ts) == (DM, None)
        assert (first.text or "").endswith(" …")
        assert all(u.ts == first.ts for u in fake.updates)
        assert len(fake.streams) == 1
        in_dm = await entries(core, f"slack:{T1}:{DM}")
        assert [e.text for e in in_dm if e.role == "assistant"] == [answer.strip()]


# ------------------------------------------------------------------------ HTTP request checks


async def test_bad_signature_is_refused_and_nothing_stored(http: Harness) -> None:
    event = http.fake.app_mention_event(text="hi", user_id=ALICE, channel_id=C1)
    body = event_body(http.fake.event_payload(event=event))
    refused = await send_signed(http.url, signing_secret="not-the-secret", body=body)
    assert refused.status == 401
    command = slash_command_form_body(
        http.fake.slash_command_payload(text="forget all confirm", user_id=ALICE, channel_id=C1)
    )
    assert (await send_signed(http.url, signing_secret="wrong", body=command)).status == 401
    assert http.fake.calls == []
    assert await all_keys(http.core) == []


async def test_stale_timestamp_is_refused(http: Harness) -> None:
    event = http.fake.app_mention_event(text="hi", user_id=ALICE, channel_id=C1)
    body = event_body(http.fake.event_payload(event=event))
    stale = await send_signed(
        http.url, signing_secret=SECRET, body=body, timestamp=int(time.time()) - 6 * 60
    )
    assert stale.status == 401
    assert await all_keys(http.core) == []


async def test_request_url_challenge_is_answered(http: Harness) -> None:
    body = json.dumps({"type": "url_verification", "challenge": "c-123", "token": "t"})
    answered = await send_signed(http.url, signing_secret=SECRET, body=body)
    assert answered.status == 200
    assert json.loads(answered.text) == {"challenge": "c-123"}


# ------------------------------------------------------------------------------- run_slack


async def test_run_slack_serves_socket_mode_until_cancelled(
    fake: FakeSlack, make_core: CoreFactory
) -> None:
    core = await make_core(slack=slack_settings(fake))
    task = asyncio.create_task(run_slack(core))
    await fake.wait_for_socket_connections(count=1)
    await fake.socket_send_event(
        event=fake.app_mention_event(text="hello?", user_id=ALICE, channel_id=C1)
    )
    [reply] = await fake.wait_for_messages(count=1)
    assert reply.channel == C1
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await fake.wait_for(lambda: True if fake.open_socket_count == 0 else None)
    assert len(fake.calls_of("auth.test")) >= 1


async def test_run_slack_refuses_a_bad_bot_token(fake: FakeSlack, make_core: CoreFactory) -> None:
    fake.invalidate_token("xoxb-revoked")
    core = await make_core(slack=slack_settings(fake, bot_token="xoxb-revoked"))
    with pytest.raises(ConfigError, match=r"SLACK_BOT_TOKEN \(invalid_auth\)"):
        await run_slack(core)
    assert fake.open_socket_count == 0


async def test_run_slack_refuses_a_bad_app_token(fake: FakeSlack, make_core: CoreFactory) -> None:
    core = await make_core(slack=slack_settings(fake, app_token="xapp-1-never-issued"))
    with pytest.raises(ConfigError, match=r"SLACK_APP_TOKEN \(invalid_auth\)"):
        await run_slack(core)


@pytest.mark.parametrize(
    ("settings", "missing"),
    [
        ({}, "SLACK_BOT_TOKEN"),
        ({"bot_token": BOT_TOKEN, "mode": "socket"}, "SLACK_APP_TOKEN"),
        ({"bot_token": BOT_TOKEN}, "SLACK_SIGNING_SECRET"),  # auto without app token: HTTP
        ({"bot_token": "xapp-1-wrong-kind", "app_token": APP_TOKEN}, "SLACK_BOT_TOKEN"),
    ],
)
async def test_run_slack_names_the_missing_setting(
    make_core: CoreFactory, settings: dict[str, Any], missing: str
) -> None:
    core = await make_core(slack=settings)
    with pytest.raises(ConfigError, match=missing):
        await run_slack(core)
