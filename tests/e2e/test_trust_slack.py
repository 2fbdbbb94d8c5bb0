"""Privacy and forgetting where Slack members meet the bot: the real Bolt app over signed
HTTP against the fake Slack, a real Core on the private Redis, and a fake model that
summarises like an LLM (one sentence per message, naming the speaker)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack import FakeSlack
from tests.helpers import CoreFactory, all_keys, key_values, sentence_summaries, telling_facts
from tests.slack_harness import (
    ALICE,
    BOB,
    SCOPE,
    T1,
    Harness,
    slack_settings,
    start_harness,
    user_texts,
)

pytestmark = pytest.mark.fake("slack")


AL = "U7"
PRIVATE = "CPRIV"  # a private channel (channel_type "group")
SMALL = {"compact_trigger_tokens": 100, "compact_min_messages": 3, "compact_keep_tokens": 0}


@pytest.fixture
async def private_slack(
    fake: FakeSlack, make_core: CoreFactory, fake_llm: FakeOpenAI
) -> AsyncIterator[Harness]:
    fake.add_user(AL, "al", display_name="al")
    fake.add_channel(PRIVATE, "close-friends", is_private=True)
    fake_llm.responder = sentence_summaries(telling_facts)
    core = await make_core(slack=slack_settings(fake), memory=SMALL)
    async for harness in start_harness("http", fake, core, fake_llm):
        yield harness


async def test_forget_me_by_a_member_whose_name_is_inside_another_name(
    private_slack: Harness,
) -> None:
    lines = [
        (ALICE, "Alice likes hojicha tea very much"),
        (AL, "my phone number is 555 0100 call me tonight"),
        (BOB, "the standup moves to ten tomorrow morning"),
    ]
    for user, text in lines * 4:
        await private_slack.say(text, user=user)
        await private_slack.bot.drain()
    await private_slack.core.drain()  # the summaries are written in the background
    before = (await private_slack.core.repo.reads.state(SCOPE)).short
    assert "hojicha" in before and "555 0100" in before
    forgot = await private_slack.command("forget me", user=AL)
    assert "Forgot you (al)" in (forgot.text or "")
    log = await private_slack.core.repo.reads.all_entries(SCOPE)
    texts = user_texts(log)
    assert texts.count("Alice likes hojicha tea very much") == 4
    assert texts.count("the standup moves to ten tomorrow morning") == 4
    assert not any("555 0100" in t for t in texts)
    after = (await private_slack.core.repo.reads.state(SCOPE)).short
    assert "hojicha" in after and "standup" in after and "555 0100" not in after
    values = [
        v
        for key in await all_keys(private_slack.core)
        for v in await key_values(private_slack.core, key)
    ]
    assert not any("555 0100" in v for v in values)


async def test_a_fact_said_in_a_private_channel_is_in_no_other_channels_prompt(
    private_slack: Harness,
) -> None:
    for _ in range(5):
        await private_slack.say(
            "between us: I am pregnant, due in May " * 3, channel=PRIVATE, channel_type="group"
        )
        await private_slack.say("I drink green tea every morning before work " * 3)
    await private_slack.bot.drain()
    await private_slack.core.drain()  # the facts are learned in the background
    person = await private_slack.core.repo.reads.facts(f"slack:{T1}:user:{ALICE}")
    assert [f.text for f in person] == ["Alice likes green tea"]  # before anyone asks
    await private_slack.mention("what do you know about me?")  # app_mention: no channel_type
    await private_slack.mention("what do you know about me?", channel=PRIVATE)
    await private_slack.replies(2)
    prompts = [r.prompt_text for r in private_slack.llm.of("reply")]  # answered concurrently
    [private_prompt] = [p for p in prompts if "between us" in p]  # its own window
    [public_prompt] = [p for p in prompts if p is not private_prompt]
    assert "green tea" in public_prompt and "pregnant" not in public_prompt
    assert "pregnant" in private_prompt and "green tea" in private_prompt
    person = await private_slack.core.repo.reads.facts(f"slack:{T1}:user:{ALICE}")
    assert [f.text for f in person] == ["Alice likes green tea"]
    private_facts = await private_slack.core.repo.reads.facts(f"slack:{T1}:{PRIVATE}")
    assert [(f.text, f.shared) for f in private_facts] == [("Alice is pregnant", False)]
