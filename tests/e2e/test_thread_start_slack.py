"""On Slack every conversation with the bot goes on in a thread under the message that
asked: a follow-up there must see the question and the answer that opened it. The real
Bolt app (signed HTTP requests) against the fake Slack, the fake OpenAI server."""

from __future__ import annotations

import pytest

from tests.slack_harness import ALICE, BOB, SCOPE, Harness, block_texts

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
    [kept] = [e for e in await slack.core.repo.all_entries(SCOPE) if e.role == "assistant"]
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
