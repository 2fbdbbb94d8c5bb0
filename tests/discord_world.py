"""The Discord world the end-to-end tests play in: guilds, channels and members on the fake
Discord, a bot serving them, and what users do there (post, run commands) while the tests wait
for the bot.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import aiohttp
import discord

from bots.discord.bot import bot_intents
from memory_core.bootstrap import Core
from memory_core.service.past import PastPage, PastSource
from tests.fakes.discord import (
    JSON,
    FakeChannel,
    FakeDiscord,
    FakeGuild,
    FakeInteraction,
    FakeMember,
    InteractionResponse,
)
from tests.fakes.openai_server import FakeOpenAI
from tests.observed_discord import ObservedBot


@dataclass
class World:
    guild: FakeGuild
    general: FakeChannel
    random: FakeChannel
    thread: FakeChannel
    forum: FakeChannel
    forum_post: FakeChannel
    alice: FakeMember
    bob: FakeMember
    admin: FakeMember
    other_guild: FakeGuild
    other_channel: FakeChannel
    carol: FakeMember

    def scope(self, channel: FakeChannel) -> str:
        """Its scope: a thread's names its channel (discord:G:C:T)."""
        if channel.is_thread:
            return f"discord:{channel.guild_id}:{channel.parent_id}:{channel.id}"
        return f"discord:{channel.guild_id}:{channel.id}"


def build_world(fake: FakeDiscord) -> World:
    """Two guilds: the Memory Lab (channels, a thread, a forum post, members and an admin) and
    one elsewhere, for isolation."""
    guild = fake.add_guild(name="Memory Lab")
    general = fake.add_text_channel(guild.id, "general")
    forum = fake.add_forum(guild.id, "ideas")
    other_guild = fake.add_guild(name="Elsewhere")
    return World(
        guild=guild,
        general=general,
        random=fake.add_text_channel(guild.id, "random"),
        thread=fake.add_thread(general.id, "side-topic"),
        forum=forum,
        forum_post=fake.add_thread(forum.id, "Release plan"),
        alice=fake.add_member(guild.id, name="alice"),
        bob=fake.add_member(guild.id, name="bob"),
        admin=fake.add_member(guild.id, name="root", manage_guild=True),
        other_guild=other_guild,
        other_channel=fake.add_text_channel(other_guild.id, "general"),
        carol=fake.add_member(other_guild.id, name="carol"),
    )


@contextlib.asynccontextmanager
async def serving(fake: FakeDiscord, core: Core, **options: Any) -> AsyncIterator[ObservedBot]:
    bot = ObservedBot(core, **options)
    register_commands(fake, bot)
    async with fake.running(bot):
        yield bot


def register_commands(fake: FakeDiscord, bot: ObservedBot) -> None:
    """/memory as a deployment's earlier ``serve --sync`` left it registered: the fake lets
    users invoke registered commands only."""
    fake.register_commands([command.to_dict(bot.tree) for command in bot.tree.get_commands()])


async def say(
    fake: FakeDiscord,
    bot: ObservedBot,
    channel: FakeChannel,
    member: FakeMember,
    text: str,
    **kwargs: Any,
) -> JSON:
    """A user posts; returns once the bot has handled the message."""
    sent = await fake.send_message(
        channel_id=channel.id, author_id=member.user.id, content=text, **kwargs
    )
    await bot.handled(sent)
    return sent


async def command(
    fake: FakeDiscord,
    name: str,
    channel: FakeChannel | int,
    member: FakeMember,
    **options: str | int | bool,
) -> tuple[FakeInteraction, InteractionResponse]:
    channel_id = channel if isinstance(channel, int) else channel.id
    interaction = await fake.invoke_command(
        name=name, channel_id=channel_id, user_id=member.user.id, options=options or None
    )
    return interaction, await fake.wait_for_response(interaction)


def embed_text(response: InteractionResponse) -> str:
    parts: list[str] = []
    for embed in response.embeds:
        parts += [embed.get("title") or "", embed.get("description") or ""]
        parts += [f"{f['name']}\n{f['value']}" for f in embed.get("fields", [])]
    return "\n".join(parts)


def custom_id(response: InteractionResponse, prefix: str) -> str:
    ids = [
        c["custom_id"]
        for row in response.components
        for c in row.get("components", [])
        if str(c.get("custom_id", "")).startswith(prefix)
    ]
    assert len(ids) == 1, response.components
    return str(ids[0])


async def texts_in(core: Core, scope: str) -> list[str]:
    return [e.text for e in (await core.admin.show(scope, recent=100)).recent]


def last_prompt(fake_llm: FakeOpenAI) -> str:
    return fake_llm.of("reply")[-1].prompt_text


CHATTER = "on the release plan: we keep the scope small, test early and ship on time"


async def chatter(fake: FakeDiscord, bot: ObservedBot, world: World, count: int) -> None:
    for i in range(count):
        await say(fake, bot, world.general, world.bob, f"bob {i} {CHATTER}")


async def copies_of(core: Core, scope: str, message: JSON) -> list[tuple[str, str]]:
    entries = await core.repo.reads.all_entries(scope)
    return [(e.text, e.author_id) for e in entries if e.platform_id == message["id"]]


# -------------------------------------------------------------------------- the past

LONG_AGO = datetime(2015, 1, 1, tzinfo=UTC)  # before any Discord message


@contextlib.asynccontextmanager
async def learning_client(fake: FakeDiscord, **options: Any) -> AsyncIterator[discord.Client]:
    """A discord.py client with the bot's intents, ready: what a source of the past reads
    with (``options``: e.g. ``max_ratelimit_timeout``)."""
    client = discord.Client(intents=bot_intents(), guild_ready_timeout=0.05, **options)
    async with fake.running(client):
        yield client


async def learn(source: PastSource, since: datetime = LONG_AGO, cursor: str = "") -> list[PastPage]:
    return [page async for page in source.pages(since, cursor)]


async def spend_budget(fake: FakeDiscord, path: str) -> None:
    """Another process of the bot (same token) uses a route's budget: one GET of ``path``."""
    async with (
        aiohttp.ClientSession() as session,
        session.get(
            f"{fake.api_base}{path}", headers={"Authorization": f"Bot {fake.valid_token}"}
        ) as response,
    ):
        assert response.status == 200, await response.text()


def answers(fake: FakeDiscord, interaction: FakeInteraction) -> list[str]:
    """What the bot said in the command's private answer, edit after edit."""
    return [
        edit.content
        for edit in fake.edits
        if edit.interaction_id == interaction.id and edit.content is not None
    ]


async def said(fake: FakeDiscord, interaction: FakeInteraction, start: str) -> str:
    await fake.wait_for(
        lambda: any(text.startswith(start) for text in answers(fake, interaction)),
        timeout=20,
        what=f"an answer starting {start!r}",
    )
    return next(text for text in answers(fake, interaction) if text.startswith(start))
