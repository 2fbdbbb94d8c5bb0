"""Daily token budgets where admins and members meet them: the console as a new user runs
it (a real process) and Discord (the real discord.py client against the fake Discord). An
admin sets ``daily_tokens 10``; the first message gets the model's answer, the second the
notice, and the fake model's request log shows exactly one reply call."""

from __future__ import annotations

import asyncio

import pytest

from tests.discord_world import World, command, embed_text, say, serving
from tests.fakes.discord import FakeDiscord
from tests.fakes.openai_server import FakeOpenAI
from tests.helpers import CLI, CoreFactory

pytestmark = pytest.mark.fake("discord")


async def test_console_budget_notice_after_the_first_answer(
    cli: CLI, clean_redis: str, fake_llm: FakeOpenAI
) -> None:
    run = await cli(
        "console",
        "--scope",
        "team",
        "--user",
        "Bob",
        stdin="/memory config daily_tokens 10\nfirst question\nsecond question\n"
        "/memory show stats\n",
        REDIS_URL=clean_redis,
        OPENAI_BASE_URL=fake_llm.base_url,
    )
    assert run.code == 0, run.err
    assert "daily_tokens=10" in run.out
    assert run.out.count("ACK:") == 1
    assert "this channel's daily token budget of 10 tokens is used up" in run.out
    assert "resets at 00:00 UTC" in run.out
    assert fake_llm.count("reply") == 1
    spent = [line for line in run.out.splitlines() if line.startswith("this channel: ")]
    assert len(spent) == 1 and spent[0].endswith("/ 10 tokens today, resets 00:00 UTC")
    assert "messages: 3" in run.out  # two questions, one answer: the notice is not stored


async def test_eight_consoles_at_once_past_a_members_limit_make_one_model_call(
    cli: CLI, clean_redis: str, fake_llm: FakeOpenAI
) -> None:
    """Eight `memorybot console` processes of one member (Bob, 50 tokens a day in "team")
    ask at the same moment: each process checks and holds against the same counters in
    Redis, so one model call goes out and seven notices come back."""
    env = {"REDIS_URL": clean_redis, "OPENAI_BASE_URL": fake_llm.base_url}
    set_up = await cli(
        "console",
        "--scope",
        "team",
        "--user",
        "Ann",
        stdin="/memory config user_daily_tokens 50\n",
        **env,
    )
    assert set_up.code == 0 and "user_daily_tokens=50" in set_up.out, set_up.err
    fake_llm.delay = 1.0  # the first answer is still on its way when the others ask
    runs = await asyncio.gather(
        *(
            cli("console", "--scope", "team", "--user", "Bob", stdin=f"question {n}?\n", **env)
            for n in range(8)
        )
    )
    assert all(run.code == 0 for run in runs), [run.err for run in runs]
    assert fake_llm.count("reply") == 1
    said = "".join(run.out for run in runs)
    assert said.count("ACK:") == 1
    assert said.count("your daily token budget of 50 tokens is used up") == 7


async def test_discord_admin_sets_a_budget_and_the_second_mention_gets_the_notice(
    fake: FakeDiscord, world: World, make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    core = await make_core()
    async with serving(fake, core) as bot:
        _, refused = await command(
            fake, "memory config daily_tokens", world.general, world.alice, value="10"
        )
        assert refused.ephemeral and "Only admins" in (refused.content or "")
        _, done = await command(
            fake, "memory config daily_tokens", world.general, world.admin, value="10"
        )
        assert "daily_tokens=10" in (done.content or embed_text(done))
        await say(fake, bot, world.general, world.alice, "what is new?", mentions_bot=True)
        await say(fake, bot, world.general, world.bob, "and now?", mentions_bot=True)
        first, second = await fake.wait_for_messages(world.general.id, 2)
        # Another guild's channel has no such limit.
        await say(fake, bot, world.other_channel, world.carol, "hello?", mentions_bot=True)
        await fake.wait_for_messages(world.other_channel.id, 1)
        _, stats = await command(fake, "memory show", world.general, world.bob, section="stats")
    assert first.content is not None and first.content.startswith("ACK:")
    assert second.content is not None
    assert "this channel's daily token budget of 10 tokens is used up" in second.content
    assert fake_llm.count("reply") == 2
    shown = embed_text(stats)
    assert stats.ephemeral and "/ 10 tokens today, resets 00:00 UTC" in shown
    assert "you: 0 tokens today (no limit)" in shown  # bob's own: his message got the notice
