"""Daily token budgets through the Slack front door: the real Bolt app (signed HTTP
requests) against the fake Slack, a real Core on the private Redis, the fake OpenAI server."""

from __future__ import annotations

import asyncio

import pytest

from tests.slack_harness import ALICE, BOB, Harness, block_texts

pytestmark = pytest.mark.fake("slack")


async def test_slack_member_budget_stops_one_member_not_the_others(http: Harness) -> None:
    """An admin gives each member 10 tokens a day here; Bob's second mention gets the
    notice while Alice is still answered, and the fake model saw exactly the two calls that
    were within budget."""
    slack = http
    refused = await slack.command("config user_daily_tokens 10", user=BOB)
    assert "Only admins" in (refused.text or "")
    configured = await slack.command("config user_daily_tokens 10", user=ALICE)
    assert "user_daily_tokens=10" in block_texts(configured)
    await slack.mention("what is new?", user=BOB)
    await slack.replies(1)
    await slack.mention("and now?", user=BOB)
    await slack.replies(2)
    await slack.mention("anything for me?", user=ALICE)
    first, second, third = await slack.replies(3)
    assert (first.text or "").startswith("ACK:") and (third.text or "").startswith("ACK:")
    assert "your daily token budget of 10 tokens is used up" in (second.text or "")
    assert "resets at 00:00 UTC" in (second.text or "")
    assert slack.llm.count("reply") == 2
    stats = block_texts(await slack.command("show stats", user=BOB))
    assert "you: " in stats and "/ 10 tokens today, resets 00:00 UTC" in stats


async def test_eight_mentions_at_once_past_a_members_limit_make_one_model_call(
    http: Harness,
) -> None:
    """Bob may spend 50 tokens a day here and asks eight questions at the same moment: the
    first call holds its tokens against his limit before it starts, so the seven others
    see it and get the notice; the fake model saw one call."""
    slack = http
    await slack.command("config user_daily_tokens 50", user=ALICE)
    slack.llm.delay = 0.3  # the first call is still in flight when the others are checked
    await asyncio.gather(*(slack.mention(f"question {n}?", user=BOB) for n in range(8)))
    replies = await slack.replies(8)
    assert slack.llm.count("reply") == 1
    notices = [r for r in replies if "your daily token budget of 50 tokens" in (r.text or "")]
    assert len(notices) == 7
