"""The scope tree through the Slack front door: the real Bolt app (signed HTTP requests)
against the fake Slack, a real Core on the private Redis, the fake OpenAI server.

On Slack every answer lives in a thread and no slash command runs in one, so what a member
does with ``/memory`` in the channel must reach the channel's threads: forget me, forget
all, settings and budgets. A Slack Connect channel (shared with another organisation, as
``conversations.info`` and the events say) is its own audience."""

from __future__ import annotations

import pytest
from slack_sdk.web.async_client import AsyncWebClient

from memory_core.scopes import Audience
from tests.helpers import all_keys
from tests.slack_harness import ALICE, BOB, BOT_TOKEN, C1, DAVE, SCOPE, T1, T2, Harness, block_texts

pytestmark = pytest.mark.fake("slack")

SHARED = "CSHARED"


async def thread_under_an_answer(slack: Harness) -> tuple[str, str]:
    """Bob asks in the channel; the bot answers in a thread under his message; Bob follows
    up there with his home address. (The thread's scope, the asking message's ts.)"""
    asked = await slack.mention("who fixes the printer?", user=BOB)
    [answer] = await slack.replies(1)
    assert answer.thread_ts == asked["ts"]
    await slack.say("send it to my home: 12 Elm Street", user=BOB, thread_ts=asked["ts"])
    await slack.settle()
    thread = f"{SCOPE}:{asked['ts']}"
    texts = [e.text for e in await slack.core.repo.reads.all_entries(thread)]
    assert texts == ["send it to my home: 12 Elm Street"]
    return thread, asked["ts"]


async def test_forget_me_in_the_channel_reaches_the_thread_under_the_answer(
    http: Harness,
) -> None:
    slack = http
    thread, ts = await thread_under_an_answer(slack)
    await slack.say("Alice's note in the thread", user=ALICE, thread_ts=ts)
    forgot = block_texts(await slack.command("forget me", user=BOB))
    assert "Forgot you (Bob Builder) in 2 places" in forgot
    assert [e.text for e in await slack.core.repo.reads.all_entries(thread)] == [
        "Alice's note in the thread"
    ]
    # The next prompt in the thread holds nothing of it.
    await slack.mention("where should parcels go?", user=ALICE, thread_ts=ts)
    await slack.replies(2)
    assert "Elm Street" not in slack.llm.of("reply")[-1].prompt_text


async def test_forget_all_in_the_channel_reaches_its_threads(http: Harness) -> None:
    slack = http
    thread, _ = await thread_under_an_answer(slack)
    ask = await slack.command("forget all")
    assert "its threads included" in block_texts(ask)
    [button] = [
        e["value"]
        for b in ask.blocks or []
        for e in b.get("elements", [])
        if e.get("action_id") == "memory_forget_all_confirm"
    ]
    done = await slack.click("memory_forget_all_confirm", button)
    assert "and its threads (1)" in block_texts(done)
    assert await slack.core.repo.reads.all_entries(thread) == []
    keys = "\n".join(await all_keys(slack.core))
    assert "Elm" not in keys
    for key in await all_keys(slack.core):
        if key.startswith(f"mb:{{{SCOPE}}}"):
            values = await slack.core.store.client.dump(key)
            assert b"Elm Street" not in (values or b""), key


async def test_a_thread_follows_the_channels_mode_and_budget(http: Harness) -> None:
    slack = http
    asked = await slack.mention("hello there", user=BOB)
    await slack.replies(1)
    assert "mode=all" in block_texts(await slack.command("config mode all"))
    # Not a mention: the channel answers everything, so does the thread under it.
    await slack.say("a plain follow-up", user=BOB, thread_ts=asked["ts"])
    [_, follow_up] = await slack.replies(2)
    assert follow_up.thread_ts == asked["ts"]
    # The channel's daily budget is spent by its threads too.
    assert "daily_tokens=10" in block_texts(await slack.command("config daily_tokens 10"))
    await slack.say("one more in the thread", user=BOB, thread_ts=asked["ts"])
    [*_, notice] = await slack.replies(3)
    assert "this channel's daily token budget of 10 tokens is used up" in (notice.text or "")
    calls = slack.llm.count("reply")
    other = await slack.mention("a new question, a new thread", user=ALICE)
    [*_, refused] = await slack.replies(4)
    assert refused.thread_ts == other["ts"]
    assert "daily token budget" in (refused.text or "")
    assert slack.llm.count("reply") == calls  # no model call past the limit
    stats = block_texts(await slack.command("show stats", user=BOB))
    assert "/ 10 tokens today" in stats


async def test_a_slack_connect_channel_is_its_own_audience(http: Harness) -> None:
    """#shared is shared with another organisation (T2, where Dave works): Alice's pinned
    fact from the workspace never reaches a prompt there, and what Dave pins about himself
    there is never kept among the host workspace's people."""
    slack = http
    slack.fake.add_channel(SHARED, "shared-with-acme", shared_with=[T2])
    # conversations.info says so (is_shared, is_ext_shared), and the door reads it.
    client = AsyncWebClient(token=BOT_TOKEN, base_url=slack.fake.api_url)
    assert await slack.bot.directory.audience(client, T1, SHARED) is Audience.SHARED
    assert await slack.bot.directory.audience(client, T1, C1) is Audience.SERVER
    pinned = block_texts(await slack.command("remember me I sit on the board", user=ALICE))
    assert "follows you" in pinned
    await slack.mention("what do you know about me?", user=ALICE)
    await slack.replies(1)
    assert "I sit on the board" in slack.llm.of("reply")[-1].prompt_text

    await slack.say("hello from acme", user=DAVE, channel=SHARED)
    event = slack.fake.message_event(text="hi", user_id=DAVE, channel_id=SHARED)
    assert event["user_team"] == T2  # the fake says who is external, as Slack does
    await slack.mention("what do you know about me?", user=ALICE, channel=SHARED)
    await slack.replies(2)
    assert "I sit on the board" not in slack.llm.of("reply")[-1].prompt_text

    kept = block_texts(
        await slack.command("remember me I am vegetarian", user=DAVE, channel=SHARED)
    )
    assert "follows you" not in kept
    shared_scope = f"slack:{T1}:{SHARED}"
    assert any("vegetarian" in f.text for f in await slack.core.repo.reads.facts(shared_scope))
    assert not [k for k in await all_keys(slack.core) if f"user:{DAVE}" in k]
    assert (await slack.core.repo.reads.state(shared_scope)).aud == "shared"


async def test_after_forget_me_no_why_record_elsewhere_shows_the_forgotten_fact(
    http: Harness,
) -> None:
    """Bob pins a fact about himself in #general and asks in #random; /memory why there
    shows it to him. He forgets himself in #general: #random's record (kept 24 hours) shows
    it no more, and his next fact gets a new id (never the old one's)."""
    slack = http
    slack.fake.add_channel("C2", "random")
    pinned = block_texts(await slack.command("remember me I am allergic to kiwi", user=BOB))
    assert "follows you" in pinned
    await slack.mention("what should I not eat?", user=BOB, channel="C2")
    await slack.replies(1)
    assert "allergic to kiwi" in block_texts(await slack.command("why", user=BOB, channel="C2"))
    await slack.command("forget me", user=BOB)
    assert "kiwi" not in block_texts(await slack.command("why", user=BOB, channel="C2"))
    again = block_texts(await slack.command("remember me I like tea", user=BOB))
    assert "me:f1" not in again and "me:f2" in again
