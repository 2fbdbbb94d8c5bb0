"""DMs and group DMs between people on the fake Discord, as Discord documents them: the bot
is in neither and receives nothing from them; a message command reaches them only from a
user install, in the PRIVATE_CHANNEL context (2) with only the user install among the
``authorizing_integration_owners``; the bot's own DM is BOT_DM (1). The real discord.py
client reads it all through ``Interaction.context``, ``is_user_integration()`` and
``is_guild_integration()``."""

from __future__ import annotations

import asyncio
from typing import NamedTuple

import discord
import pytest
from discord import app_commands
from discord.ext import commands

from tests.fakes.discord import FakeDiscord, FakeDiscordError

pytestmark = pytest.mark.fake("discord", bot_name="private-bot")
WAIT = 5.0


class Peeked(NamedTuple):
    context: int  # 0 GUILD, 1 BOT_DM, 2 PRIVATE_CHANNEL
    guild_install: bool
    user_install: bool
    content: str


class PeekBot(commands.Bot):
    """A "Peek" message command, offered everywhere to guild and user installs; and a count
    of the messages the gateway brings."""

    def __init__(self, peeked: asyncio.Queue[Peeked]) -> None:
        intents = discord.Intents.default()
        intents.message_content = True
        super().__init__(command_prefix="!", intents=intents, guild_ready_timeout=0.05)
        self.seen: list[str] = []

        async def peek(interaction: discord.Interaction, message: discord.Message) -> None:
            context = interaction.context
            await peeked.put(
                Peeked(
                    context=0 if context.guild else 1 if context.dm_channel else 2,
                    guild_install=interaction.is_guild_integration(),
                    user_install=interaction.is_user_integration(),
                    content=message.content,
                )
            )
            await interaction.response.send_message("ok", ephemeral=True)

        menu = app_commands.ContextMenu(
            name="Peek",
            callback=peek,
            allowed_installs=app_commands.AppInstallationType(guild=True, user=True),
            allowed_contexts=app_commands.AppCommandContext(
                guild=True, dm_channel=True, private_channel=True
            ),
        )
        self.tree.add_command(menu)

    async def on_message(self, message: discord.Message) -> None:
        self.seen.append(message.content)


async def test_a_dm_between_people_and_a_group_dm_are_private_channels_of_user_installs(
    fake: FakeDiscord,
) -> None:
    alice, bob, carol = (fake.add_user(name=n) for n in ("alice", "bob", "carol"))
    peeked: asyncio.Queue[Peeked] = asyncio.Queue()
    bot = PeekBot(peeked)
    fake.register_commands([c.to_dict(bot.tree) for c in bot.tree.get_commands()])
    between = fake.add_dm_between(alice.id, bob.id)
    group = fake.add_group_dm([alice.id, bob.id, carol.id])
    with pytest.raises(FakeDiscordError, match="dm_channel_id"):
        fake.add_dm_between(alice.id, fake.bot_user.id)

    async def peek(channel_id: int, message: dict[str, object]) -> Peeked:
        await fake.invoke_message_command(
            name="Peek", channel_id=channel_id, user_id=alice.id, message_id=int(str(message["id"]))
        )
        return await asyncio.wait_for(peeked.get(), WAIT)

    async with fake.running(bot):
        in_dm = fake.say_in_private(between.id, author_id=bob.id, content="bob to alice")
        in_group = fake.say_in_private(group.id, author_id=carol.id, content="carol to all")
        with pytest.raises(FakeDiscordError, match="not in DM"):
            fake.say_in_private(between.id, author_id=carol.id, content="carol is not there")
        with pytest.raises(FakeDiscordError, match="between people"):
            fake.say_in_private(fake.dm_channel_id(alice.id), author_id=alice.id, content="x")
        with pytest.raises(FakeDiscordError, match="not offered in PRIVATE_CHANNEL"):
            await peek(between.id, in_dm)  # no user install yet
        fake.install_for_user(alice.id)
        assert await peek(between.id, in_dm) == Peeked(2, False, True, "bob to alice")
        assert await peek(group.id, in_group) == Peeked(2, False, True, "carol to all")
        mine = await fake.send_dm(user_id=alice.id, content="alice to the bot")
        assert await peek(fake.dm_channel_id(alice.id), mine) == Peeked(
            1, False, True, "alice to the bot"
        )
        with pytest.raises(FakeDiscordError, match="cannot see"):
            await fake.invoke_message_command(
                name="Peek", channel_id=between.id, user_id=carol.id, message_id=int(in_dm["id"])
            )
    assert bot.seen == ["alice to the bot"]  # nothing said between people reached the bot
