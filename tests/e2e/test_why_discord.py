"""``/memory why`` and source lines through the Discord front door: the real discord.py
client against the fake Discord, a real Core on the private Redis, the fake OpenAI server.
A link proves itself by resolving, in the fake's own state, to the message it names."""

from __future__ import annotations

import re

import pytest

from tests.discord_world import World, command, embed_text, say, serving
from tests.fakes.discord import JSON, FakeDiscord
from tests.fakes.openai_server import FakeOpenAI
from tests.helpers import PAPAYA as ANSWER
from tests.helpers import CoreFactory
from tests.observed_discord import ObservedBot

pytestmark = pytest.mark.fake("discord")

SMALL_WINDOW = {"window_tokens": 60, "window_min_tokens": 0}
OLD = "the launch code word is papaya, agreed with the tangerine squad"
LINK = re.compile(r"https://discord\.com/channels/(@me|\d+)/(\d+)/(\d+)")


def resolve(fake: FakeDiscord, url: str) -> JSON:
    """The message a discord.com link opens, found in the fake's state: its channel must be
    the link's, in the link's guild (``@me``: a DM channel)."""
    match = LINK.fullmatch(url)
    assert match, url
    guild, channel_id, message_id = match.groups()
    message = fake.messages[int(message_id)]
    assert int(message["channel_id"]) == int(channel_id)
    channel = fake.channels[int(channel_id)]
    assert channel.guild_id == (None if guild == "@me" else int(guild))
    return message


async def ask(fake: FakeDiscord, bot: ObservedBot, world: World, *, chatter: int = 10) -> JSON:
    """An old message, chatter that pushes it out of the working window, then alice asks."""
    old = await say(fake, bot, world.general, world.bob, OLD)
    for i in range(chatter):
        await say(fake, bot, world.general, world.bob, f"unrelated chatter number {i} about lunch")
    await say(
        fake, bot, world.general, world.alice, "what is the launch code word?", mentions_bot=True
    )
    await fake.wait_for_messages(world.general.id, 1)
    return old


async def test_memory_why_lists_the_recalled_message_with_a_link_that_resolves(
    fake: FakeDiscord, world: World, make_core: CoreFactory, papaya: FakeOpenAI
) -> None:
    core = await make_core(memory=SMALL_WINDOW)
    async with serving(fake, core) as bot:
        await core.admin.remember_me(
            world.scope(world.general),
            "I am vegetarian",
            user_id=str(world.alice.user.id),
            name="alice",
        )
        old = await ask(fake, bot, world)
        _, mine = await command(fake, "memory why", world.general, world.alice)
        _, theirs = await command(fake, "memory why", world.general, world.bob)
    assert mine.ephemeral and theirs.ephemeral
    text = embed_text(mine)
    [line] = [x for x in text.splitlines() if "bob: the launch code word is papaya" in x]
    [url] = [m.group(0) for m in LINK.finditer(line)]
    target = resolve(fake, url)
    assert target["id"] == old["id"] and target["content"] == OLD
    assert "I am vegetarian" in text  # alice asked: her own facts are shown to her
    other = embed_text(theirs)
    assert "bob: the launch code word is papaya" in other and url in other
    assert "vegetarian" not in other and "facts about alice, shown only to them: 1" in other


async def test_source_line_links_the_recalled_message_and_memory_keeps_the_plain_answer(
    fake: FakeDiscord, world: World, make_core: CoreFactory, papaya: FakeOpenAI
) -> None:
    core = await make_core(memory=SMALL_WINDOW)
    scope = world.scope(world.general)
    async with serving(fake, core) as bot:
        _, configured = await command(
            fake, "memory config sources", world.general, world.admin, value="on"
        )
        assert configured.ephemeral
        old = await ask(fake, bot, world)
    [reply] = [m for m in fake.sent_messages if m.channel_id == world.general.id]
    assert reply.content is not None
    answer, source = reply.content.split("\n")
    assert answer == ANSWER
    match = re.fullmatch(r"-# \[from (\d{4}-\d\d-\d\d)\]\((\S+)\)", source)
    assert match, source
    assert resolve(fake, match.group(2))["id"] == old["id"]
    entries = await core.repo.reads.all_entries(scope)
    assert entries[-1].role == "assistant" and entries[-1].text == ANSWER


async def test_source_lines_are_off_by_default(
    fake: FakeDiscord, world: World, make_core: CoreFactory, papaya: FakeOpenAI
) -> None:
    core = await make_core(memory=SMALL_WINDOW)
    async with serving(fake, core) as bot:
        await ask(fake, bot, world)
    [reply] = [m for m in fake.sent_messages if m.channel_id == world.general.id]
    assert reply.content == ANSWER


async def test_a_message_deleted_on_discord_takes_the_record_away(
    fake: FakeDiscord, world: World, make_core: CoreFactory, papaya: FakeOpenAI
) -> None:
    core = await make_core(memory=SMALL_WINDOW)
    key = core.store.keys.scope(world.scope(world.general)).why
    async with serving(fake, core) as bot:
        old = await ask(fake, bot, world)
        assert await core.store.client.exists(key)
        where = {"channel_id": str(world.general.id), "guild_id": str(world.guild.id)}
        await fake.dispatch("MESSAGE_DELETE", {"id": old["id"], **where}, guild_id=world.guild.id)
        await bot.deleted(old)
        _, why = await command(fake, "memory why", world.general, world.alice)
    assert not await core.store.client.exists(key)
    assert "No answer to explain yet" in (why.content or "") + embed_text(why)


async def test_in_a_dm_the_link_is_an_at_me_link_that_resolves(
    fake: FakeDiscord, world: World, make_core: CoreFactory, papaya: FakeOpenAI
) -> None:
    core = await make_core(memory=SMALL_WINDOW)
    user = world.alice.user.id
    dm_channel = fake.dm_channel_id(user)
    async with serving(fake, core) as bot:
        old = await fake.send_dm(user_id=user, content=OLD)
        await bot.handled(old)
        for i in range(6):
            await bot.handled(await fake.send_dm(user_id=user, content=f"lunch chatter {i}"))
        await bot.handled(await fake.send_dm(user_id=user, content="what is the code word?"))
        await fake.wait_for_messages(dm_channel, 8)
        _, why = await command(fake, "memory why", dm_channel, world.alice)
    assert why.ephemeral
    [line] = [x for x in embed_text(why).splitlines() if "alice: the launch code word" in x]
    [url] = [m.group(0) for m in LINK.finditer(line)]
    assert url.startswith(f"https://discord.com/channels/@me/{dm_channel}/")
    assert resolve(fake, url)["id"] == old["id"]
