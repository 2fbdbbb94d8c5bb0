"""On Slack every conversation with the bot goes on in a thread under the message that
asked: a follow-up there must see the question and the answer that opened it. The real
Bolt app (signed HTTP requests) against the fake Slack, the fake OpenAI server."""

from __future__ import annotations

import pytest

from tests.helpers import all_keys, key_values
from tests.slack_harness import ALICE, BOB, CAROL, SCOPE, Harness, block_texts

pytestmark = pytest.mark.fake("slack")


async def test_a_follow_up_in_the_bots_thread_sees_what_opened_it(http: Harness) -> None:
    slack = http
    asked = await slack.mention("note: the lab door code is 4417-B", user=BOB)
    [answer] = await slack.replies(1)
    assert answer.thread_ts == asked["ts"]
    await slack.mention("what was the door code again?", user=BOB, thread_ts=asked["ts"])
    [_, follow_up] = await slack.replies(2)
    assert follow_up.thread_ts == asked["ts"]
    prompt = slack.llm.of("reply")[-1].prompt_text
    began = prompt.split("How this thread began", 1)[1].split("##", 1)[0]
    assert "4417-B" in began and (answer.text or "")[:30] in began
    # The answer is kept under its own ts: deleting it in Slack forgets it.
    [kept] = [e for e in await slack.core.repo.reads.all_entries(SCOPE) if e.role == "assistant"]
    assert kept.platform_id == answer.ts and kept.answers == asked["ts"]


async def test_a_mention_under_someone_elses_message_sees_that_message(http: Harness) -> None:
    slack = http
    posted = await slack.say("the build server moved to rack 12", user=ALICE)
    await slack.settle()
    await slack.mention("where is it now?", user=BOB, thread_ts=posted["ts"])
    await slack.replies(1)
    assert "rack 12" in slack.llm.of("reply")[-1].prompt_text


async def test_forgetting_the_message_that_opened_a_thread_reaches_the_thread(
    http: Harness,
) -> None:
    slack = http
    asked = await slack.mention("my badge number is 99-1234", user=BOB)
    await slack.replies(1)
    forgot = block_texts(await slack.command("forget 99-1234"))
    assert "Forgot" in forgot
    await slack.mention("what is my badge number?", user=BOB, thread_ts=asked["ts"])
    await slack.replies(2)
    assert "99-1234" not in slack.llm.of("reply")[-1].prompt_text


# Before the bot was in the channel (and before the core's clock: a forget's tombstones,
# timed by that clock, cover it).
BEFORE_THE_BOT = "1700000000.000100"


def began(prompt: str) -> str:
    return prompt.split("How this thread began", 1)[1].split("##", 1)[0] if prompt else ""


async def test_a_thread_under_a_message_from_before_the_bot_reads_it_from_slack_once(
    http: Harness,
) -> None:
    """Memory never heard the thread's parent: it is read with conversations.replies (once:
    then kept) and given as the thread's start, as context, never stored as said; and what
    is forgotten leaves it."""
    slack = http
    parent = slack.fake.message_event(
        text=f"the vault code is 7781, <@{ALICE}> has the key",
        user_id=BOB,
        channel_id="C1",
        ts=BEFORE_THE_BOT,
    )
    slack.fake.add_history("C1", [parent])
    await slack.mention("what is the vault code?", user=CAROL, thread_ts=BEFORE_THE_BOT)
    await slack.replies(1)
    first = began(slack.llm.of("reply")[-1].prompt_text)
    assert "Bob Builder: the vault code is 7781, @Alice has the key" in first
    await slack.mention("and who has the key?", user=CAROL, thread_ts=BEFORE_THE_BOT)
    await slack.replies(2)
    assert "7781" in began(slack.llm.of("reply")[-1].prompt_text)
    [read] = slack.fake.calls_of("conversations.replies")
    assert read.params["ts"] == BEFORE_THE_BOT
    # Context, not memory: in no log, so never summarised, recalled or exported.
    thread = f"{SCOPE}:{BEFORE_THE_BOT}"
    for scope in (SCOPE, thread):
        stored = {e.platform_id for e in await slack.core.repo.reads.all_entries(scope)}
        assert BEFORE_THE_BOT not in stored
    # Forgotten in the channel (its threads with it): out of the prompt and of Redis.
    assert "Forgot" in block_texts(await slack.command("forget 7781"))
    await slack.mention("the code again?", user=CAROL, thread_ts=BEFORE_THE_BOT)
    await slack.replies(3)
    assert "7781" not in slack.llm.of("reply")[-1].prompt_text
    assert len(slack.fake.calls_of("conversations.replies")) == 2  # (what was kept went)
    for key in await all_keys(slack.core):
        assert not any("7781" in value for value in await key_values(slack.core, key)), key
