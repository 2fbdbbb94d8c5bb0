"""The Discord front door: gateway events -> the memory core -> Discord messages.

- :class:`MemoryBot` translates a message into an ``IncomingMessage`` (see
  :mod:`bots.discord.events`) and hands it to the core's conversation, which stores it,
  decides whether to answer and answers through a :class:`DiscordReply`
  (:mod:`bots.discord.replies`); ``/memory`` lives in :mod:`bots.discord.commands`.
- ``MemoryBot(core)`` makes the client without touching the network (tests);
  :func:`run_discord` is what ``memorybot run --discord`` calls.

The client is always an ``AutoShardedClient``: without ``shard_count`` it asks Discord for
the recommended number (one for small bots, more as the bot grows, so one process keeps
working past 2,500 guilds); with ``shard_count``/``shard_ids`` several processes split the
shards between them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator
from typing import Any

import discord
import yarl
from discord import app_commands
from discord.gateway import DiscordWebSocket
from discord.http import Route

from bots.discord.commands import (
    MemoryCommands,
    MemoryGroup,
    answer_command_error,
    message_commands,
    sync_command_tree,
)
from bots.discord.events import (
    CONVERSATION_TYPES,
    Place,
    attachments_of,
    guild_id_of,
    incoming_message,
    is_allowed,
    is_content_edit,
    message_text,
    place_for,
    place_of,
)
from bots.discord.forwards import forward_of
from bots.discord.places import forget_place, forget_server, resolved
from bots.discord.replies import ChannelProblems, DiscordReply
from bots.learn.discord_catch_up import recheck_recent
from config.settings import DiscordSettings
from memory_core.bootstrap import Core
from memory_core.errors import ConfigError, MemorybotError
from memory_core.models import IncomingMessage

log = logging.getLogger(__name__)

# The bot's answers never ping @everyone, roles or users named in the text (a model can be
# talked into writing "@everyone"); replying may ping the person it answers.
SAFE_MENTIONS = discord.AllowedMentions(everyone=False, users=False, roles=False, replied_user=True)


def bot_intents() -> discord.Intents:
    """Default intents + the privileged message content (memory needs the text)."""
    intents = discord.Intents.default()
    intents.message_content = True
    return intents


class MemoryBot(discord.AutoShardedClient):
    def __init__(self, core: Core, **options: Any) -> None:
        """``options`` are discord.py's: ``shard_count`` and ``shard_ids`` split the shards
        between processes; tests pass e.g. ``guild_ready_timeout=0.05``."""
        options.setdefault("allowed_mentions", SAFE_MENTIONS)
        super().__init__(intents=bot_intents(), **options)
        self.core = core
        self.settings = core.settings.discord
        self.problems = ChannelProblems()
        self.conversation = core.conversation
        self.memory_commands = MemoryCommands(core)
        self.tree: app_commands.CommandTree[MemoryBot] = app_commands.CommandTree(self)
        self.tree.add_command(MemoryGroup(self.memory_commands))
        for menu in message_commands(self.memory_commands, bot_name=core.settings.bot.name):
            self.tree.add_command(menu)
        self.tree.error(answer_command_error)
        self.rechecking: asyncio.Task[int] | None = None

    # -- a fresh session ---------------------------------------------------------------
    async def on_ready(self) -> None:
        """A fresh gateway session (a start, or a RESUME Discord refused): what was deleted
        or edited meanwhile reached no event (messages, channels, threads, a server that
        removed the bot), so memory is brought in line with this session's view of Discord
        (:mod:`bots.learn.discord_catch_up`), in the background; after the previous session's
        catch-up, if that one is still running."""
        self.rechecking = asyncio.create_task(self._catch_up(self.rechecking))

    async def _catch_up(self, previous: asyncio.Task[int] | None) -> int:
        if previous is not None and not previous.done():
            await asyncio.gather(previous, return_exceptions=True)
        return await recheck_recent(self, self.core, bot_name=self.bot_name)

    async def close(self) -> None:
        if self.rechecking is not None and not self.rechecking.done():
            self.rechecking.cancel()
            await asyncio.gather(self.rechecking, return_exceptions=True)
        await self.memory_commands.learns.close()  # (a learn goes on with the next one)
        await super().close()

    # -- messages ------------------------------------------------------------------------
    def place_of_person(self, message: discord.Message, guild_id: int | None) -> Place | None:
        """Where a person's message (new or edited) was said, or None for what memorybot
        ignores: bots (itself included), system messages, places outside the allow-lists."""
        if self.user is None or message.author.bot or message.type not in CONVERSATION_TYPES:
            return None
        channel = message.channel
        place = place_of(
            channel, guild_id=guild_id, channel_id=channel.id, user_id=message.author.id
        )
        return place if is_allowed(place, self.settings) else None

    async def on_message(self, message: discord.Message) -> None:
        place = self.place_of_person(message, guild_id_of(message))
        if place is None or self.user is None:
            return
        place = await resolved(self.core, place, message.channel)
        incoming = incoming_message(
            message,
            place,
            bot_id=self.user.id,
            bot_name=self.bot_name,
            forwarded=await forward_of(self, message),  # a forward's names and origin
        )
        if incoming is None:  # stickers only: nothing to remember
            return
        try:
            # Two processes briefly serving one shard (a rolling restart) both receive the
            # event: the store keeps a message once (by its id, in the same round trip) and
            # only the first is answered. While Redis is away the message waits in memory.
            await self.answer(message, incoming)
        except MemorybotError as exc:
            # The store is down or refused the message: say where, keep serving the rest.
            log.error("message %s in %s not handled: %s", message.id, place.scope, exc)

    @property
    def bot_name(self) -> str:
        return self.core.settings.bot.name

    async def answer(self, message: discord.Message, incoming: IncomingMessage) -> None:
        """Store the message; if the core says to answer, answer it as a reply to it."""
        turn = await self.conversation.receive(incoming)
        if turn is None:
            return
        sink = DiscordReply(
            message,
            mention=incoming.addressed or incoming.direct,
            problems=self.problems,
            pacing=self.core.pacing,
        )
        stream = self.settings.stream_interval_s if self.settings.stream_replies else None
        await self.conversation.answer(turn, sink, stream_interval_s=stream, links=sink)

    # -- edits ---------------------------------------------------------------------------
    async def on_raw_message_edit(self, event: discord.RawMessageUpdateEvent) -> None:
        """A person's message edited on Discord: memory holds its new text instead, and
        forgets what the edit took out (raw: an edit of a message sent before the client
        started, or pushed out of its cache, is an edit too). Updates that change neither
        text nor files (link previews) are no edits."""
        message = event.message
        place = self.place_of_person(message, event.guild_id)
        if place is None or self.user is None or not is_content_edit(event):
            return
        place = await resolved(self.core, place, message.channel)
        await self.conversation.edit(
            place.scope,
            str(message.id),
            message_text(message, bot_id=self.user.id, bot_name=self.bot_name),
            when=message.created_at,
            attachments=attachments_of(message),
        )

    # -- deletions -----------------------------------------------------------------------
    async def on_raw_message_delete(self, event: discord.RawMessageDeleteEvent) -> None:
        """A message deleted on Discord is deleted from memory too."""
        await self.forget_deleted(event.guild_id, event.channel_id, [event.message_id])

    async def on_raw_bulk_message_delete(self, event: discord.RawBulkMessageDeleteEvent) -> None:
        """A moderator's purge: every message in it is forgotten."""
        await self.forget_deleted(event.guild_id, event.channel_id, sorted(event.message_ids))

    async def forget_deleted(
        self, guild_id: int | None, channel_id: int, message_ids: list[int]
    ) -> None:
        channel = self.get_channel(channel_id)
        user_id = 0
        if guild_id is None:
            # A DM's scope is keyed by its user, which a delete event does not carry.
            dm = await self._dm_channel(channel_id)
            if dm is None or dm.recipient is None:
                return
            user_id = dm.recipient.id
        place = place_of(channel, guild_id=guild_id, channel_id=channel_id, user_id=user_id)
        place = await resolved(self.core, place, channel)
        if not is_allowed(place, self.settings):
            return
        # A snowflake carries its send time: memory is read from there, not all of it.
        deleted = [(str(i), discord.utils.snowflake_time(i)) for i in message_ids]
        await self.conversation.delete(place.scope, deleted)

    # -- places that leave (see bots.discord.places) ---------------------------------------
    async def on_guild_channel_delete(self, channel: discord.abc.GuildChannel) -> None:
        """A channel (with its threads) or a forum (with its posts) was deleted."""
        place = place_for(
            guild_id=channel.guild.id, channel_id=channel.id, parent_id=None, user_id=0
        )
        await forget_place(self.core, place.scope, "its channel was deleted")

    async def on_raw_thread_delete(self, event: discord.RawThreadDeleteEvent) -> None:
        """A thread or forum post was deleted (cached or not: the event names its channel)."""
        place = place_for(
            guild_id=event.guild_id,
            channel_id=event.thread_id,
            parent_id=event.parent_id,
            user_id=0,
        )
        await forget_place(self.core, place.scope, "the thread was deleted")

    async def on_guild_remove(self, guild: discord.Guild) -> None:
        """The bot was removed from a server (kicked, banned, or it left): GUILD_DELETE
        without ``unavailable``. An outage is ``on_guild_unavailable``, which forgets
        nothing."""
        await forget_server(self.core, guild.id)

    async def _dm_channel(self, channel_id: int) -> discord.DMChannel | None:
        channel = self.get_channel(channel_id)
        if isinstance(channel, discord.DMChannel) and channel.recipient is not None:
            return channel
        try:  # discord.py does not cache DM channels it only saw messages in
            fetched = await self.fetch_channel(channel_id)
        except discord.HTTPException as exc:
            log.warning("cannot look up DM channel %s: %s %s", channel_id, exc.status, exc.code)
            return None
        return fetched if isinstance(fetched, discord.DMChannel) else None


@contextlib.contextmanager
def discord_endpoints(settings: DiscordSettings) -> Iterator[None]:
    """Point discord.py at ``api_base``/``gateway_url`` when set (a proxy, a test server).

    discord.py keeps both as class attributes, so they are set for the process and put back
    afterwards."""
    saved = (Route.BASE, DiscordWebSocket.DEFAULT_GATEWAY)
    if settings.api_base:
        Route.BASE = settings.api_base.rstrip("/")
    if settings.gateway_url:
        DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(settings.gateway_url)
    try:
        yield
    finally:
        Route.BASE, DiscordWebSocket.DEFAULT_GATEWAY = saved


async def run_discord(
    core: Core,
    *,
    sync_commands: bool = False,
    shard_count: int | None = None,
    shard_ids: list[int] | None = None,
) -> None:
    """Serve Discord until cancelled (the client is closed on the way out).

    Raises ConfigError when DISCORD_TOKEN is missing or refused, when Discord cannot be
    reached (or answers the login with an error), when the Message Content intent is not
    enabled for the bot, or when the commands cannot be registered.
    """
    import aiohttp  # discord.py's transport: what a network failure is raised as

    settings = core.settings.discord
    # What to check when Discord does not answer: the setting that points elsewhere, or the
    # way out to discord.com.
    check = (
        f"check discord.api_base (MEMORYBOT_DISCORD__API_BASE={settings.api_base}), which "
        "sends memorybot there instead of discord.com"
        if settings.api_base
        else "check this machine's network (a firewall, a proxy) and https://discordstatus.com"
    )
    if settings.token is None or not settings.token.get_secret_value().strip():
        raise ConfigError(
            "DISCORD_TOKEN is not set: create a bot in the Discord Developer Portal and put its "
            "token in DISCORD_TOKEN (see docs/discord.md)"
        )
    token = settings.token.get_secret_value().strip()
    with discord_endpoints(settings):
        client = MemoryBot(core, shard_count=shard_count, shard_ids=shard_ids)
        async with client:
            try:
                await client.login(token)
            except discord.LoginFailure as exc:
                raise ConfigError(
                    "Discord refused DISCORD_TOKEN: copy the bot token again from the Developer "
                    "Portal (Bot > Reset Token) into DISCORD_TOKEN"
                ) from exc
            except discord.HTTPException as exc:  # 5xx, or a proxy's error page
                said = " ".join(str(exc.text or exc.response.reason).split())[:200]
                raise ConfigError(
                    f"Discord answered the login at {Route.BASE} with HTTP {exc.status} "
                    f"({said}): {check}"
                ) from exc
            except (aiohttp.ClientError, OSError, TimeoutError) as exc:
                raise ConfigError(
                    f"cannot reach Discord at {Route.BASE} to log in "
                    f"({str(exc) or type(exc).__name__}): {check}"
                ) from exc
            if sync_commands:
                await sync_command_tree(client.tree, settings.sync_guild_ids)
            try:
                await client.connect()
            except (aiohttp.ClientConnectionError, discord.GatewayNotFound) as exc:
                # Logged in, then asking for the gateway failed (discord.py retries the
                # gateway itself once it knows where it is).
                raise ConfigError(
                    f"cannot reach Discord's gateway through {Route.BASE} "
                    f"({str(exc) or type(exc).__name__}): {check}"
                ) from exc
            except discord.PrivilegedIntentsRequired as exc:
                raise ConfigError(
                    "the Message Content intent is not enabled for this bot: in the Discord "
                    "Developer Portal (https://discord.com/developers/applications) open your "
                    "application > Bot > Privileged Gateway Intents, turn on MESSAGE CONTENT "
                    "INTENT and save"
                ) from exc
