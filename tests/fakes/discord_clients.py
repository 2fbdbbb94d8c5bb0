"""discord.py clients the fake Discord's own tests drive: a recording bot, a small world, intents,
waiting on what a client received.
"""

from __future__ import annotations

import asyncio
import io
from dataclasses import dataclass
from typing import Any

import discord

from tests.fakes.discord import (
    FakeChannel,
    FakeGuild,
    FakeMember,
)

# discord.py waits this long after the last GUILD_CREATE before on_ready (default 2 s).
GUILD_READY_TIMEOUT = 0.05


WAIT = 5.0


def bot_intents(*, message_content: bool = True) -> discord.Intents:
    intents = discord.Intents.default()
    intents.message_content = message_content
    return intents


@dataclass
class World:
    guild: FakeGuild
    general: FakeChannel
    thread: FakeChannel
    forum: FakeChannel
    forum_post: FakeChannel
    alice: FakeMember
    admin: FakeMember


class ForgetView(discord.ui.View):
    def __init__(self, clicks: asyncio.Queue[int]) -> None:
        super().__init__(timeout=30)
        self.clicks = clicks

    @discord.ui.button(label="Forget", custom_id="memory:forget", style=discord.ButtonStyle.danger)
    async def forget(
        self, interaction: discord.Interaction, button: discord.ui.Button[Any]
    ) -> None:
        await self.clicks.put(interaction.user.id)
        await interaction.response.edit_message(content="forgotten", view=None)
        self.stop()


class RecordingBot(discord.Client):
    """A throwaway bot: records what it receives and performs ``!``-commands."""

    def __init__(self, **options: Any) -> None:
        options.setdefault("intents", bot_intents())
        super().__init__(guild_ready_timeout=GUILD_READY_TIMEOUT, **options)
        self.received: asyncio.Queue[discord.Message] = asyncio.Queue()
        self.errors: asyncio.Queue[Exception] = asyncio.Queue()
        self.clicks: asyncio.Queue[int] = asyncio.Queue()
        self.edits: asyncio.Queue[discord.RawMessageUpdateEvent] = asyncio.Queue()

    async def on_raw_message_edit(self, event: discord.RawMessageUpdateEvent) -> None:
        await self.edits.put(event)

    async def on_message(self, message: discord.Message) -> None:
        if message.author == self.user:
            return  # the fake echoes the bot's own messages, as Discord does
        await self.received.put(message)
        try:
            await self.perform(message)
        except Exception as exc:
            await self.errors.put(exc)

    async def perform(self, message: discord.Message) -> None:
        channel = message.channel
        match message.content.split(" ")[0]:
            case "!ping":
                await message.reply("pong")
            case "!typing":
                async with channel.typing():
                    await channel.send("typed")
            case "!edit":
                sent = await channel.send("v1")
                await sent.edit(content="v2")
            case "!file":
                await channel.send(
                    "here",
                    file=discord.File(io.BytesIO(b"hello memory"), filename="notes.txt"),
                    embed=discord.Embed(title="Summary", description="short"),
                )
            case "!buttons":
                await channel.send("Forget this?", view=ForgetView(self.clicks))
            case "!long":
                await channel.send("x" * 2001)
            case "!invite":
                assert isinstance(channel, discord.TextChannel)
                await channel.create_invite()
            case _:
                pass


async def next_item(queue: asyncio.Queue[Any]) -> Any:
    return await asyncio.wait_for(queue.get(), WAIT)
