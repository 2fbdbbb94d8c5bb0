"""The scope tree through the Discord front door: the unmodified discord.py client against
the fake Discord, a real Core on the private Redis, the fake OpenAI server. A channel's
threads (public and private) are under it: a forget, a setting, a budget in the channel
reaches them; a member forgets themselves across the whole server and their DM."""

from __future__ import annotations

import pytest

from memory_core.scopes import Scope
from tests.discord_world import (
    World,
    command,
    custom_id,
    embed_text,
    last_prompt,
    say,
    serving,
    texts_in,
)
from tests.fakes.discord import FakeDiscord
from tests.fakes.openai_server import FakeOpenAI
from tests.helpers import CoreFactory, forgotten

pytestmark = pytest.mark.fake("discord")


async def test_forget_all_in_a_channel_reaches_its_public_and_private_threads(
    fake: FakeDiscord, world: World, make_core: CoreFactory
) -> None:
    core = await make_core()
    private = fake.add_thread(world.general.id, "hr", private=True, owner_id=world.alice.user.id)
    fake.join_thread(private.id, fake.bot_user.id)
    async with serving(fake, core) as bot:
        await say(fake, bot, world.general, world.alice, "the channel's line", mentions_bot=False)
        await say(fake, bot, world.thread, world.alice, "public thread secret 1111")
        await say(fake, bot, private, world.alice, "private thread secret 2222")
        await say(fake, bot, world.random, world.alice, "another channel stays")
        general = world.scope(world.general)
        assert sorted(await core.repo.reads.threads_of(general)) == sorted(
            [world.scope(world.thread), world.scope(private)]
        )
        _, asked = await command(fake, "memory forget all", world.general, world.admin)
        assert "its threads included" in (asked.content or "")
        click = await fake.click_button(
            message=asked.message_id or 0,
            custom_id=custom_id(asked, "memory:forget-all:confirm"),
            user_id=world.admin.user.id,
        )
        await fake.wait_for_response(click)
        [done] = await fake.wait_for_edits(asked.message_id)
    assert "and its threads (2)" in (done.content or "")
    for place in (world.general, world.thread, private):
        assert await forgotten(core, world.scope(place)), place.name
    assert await texts_in(core, world.scope(world.random)) == ["another channel stays"]


async def test_forget_me_everywhere_reaches_channels_threads_and_the_dm(
    fake: FakeDiscord, world: World, make_core: CoreFactory
) -> None:
    core = await make_core()
    async with serving(fake, core) as bot:
        for place in (world.general, world.random, world.thread, world.forum_post):
            await say(fake, bot, place, world.alice, f"alice in {place.name}", mentions_bot=False)
            await say(fake, bot, place, world.bob, f"bob in {place.name}", mentions_bot=False)
        dm = await fake.send_dm(user_id=world.alice.user.id, content="alice's DM line")
        await bot.handled(dm)
        _, done = await command(
            fake, "memory forget me", world.random, world.alice, everywhere=True
        )
    text = embed_text(done)
    assert "in 5 places" in text, text
    for place in (world.general, world.random, world.thread, world.forum_post):
        left = await texts_in(core, world.scope(place))
        assert left == [f"bob in {place.name}"], (place.name, left)
    dm_scope = Scope.discord_dm(str(world.alice.user.id)).key
    assert not any("alice" in t for t in await texts_in(core, dm_scope))


async def test_a_thread_answers_by_its_channels_mode_and_within_its_budget(
    fake: FakeDiscord, world: World, make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    core = await make_core()
    async with serving(fake, core) as bot:
        await command(fake, "memory config mode", world.general, world.admin, value="all")
        await say(fake, bot, world.thread, world.alice, "no mention here", mentions_bot=False)
        [answer] = await fake.wait_for_messages(world.thread.id, 1)
        assert "no mention here" in last_prompt(fake_llm)
        await command(fake, "memory config daily_tokens", world.general, world.admin, value="10")
        await say(fake, bot, world.thread, world.alice, "and again", mentions_bot=False)
        [_, notice] = await fake.wait_for_messages(world.thread.id, 2)
    assert answer.content and "daily token budget" in (notice.content or "")
    assert fake_llm.count("reply") == 1
