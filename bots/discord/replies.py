"""Posting answers on Discord: :class:`DiscordReply` is the core's ``ReplySink`` for one
answer (the typing indicator, the first message a reply to the one that asked, edits of the
streamed draft), and channels the bot may not write in are reported once. Streaming,
splitting under 2,000 characters and what is remembered are decided in
:mod:`memory_core.service.conversation`.

Rate limits (HTTP 429) are not handled here on purpose: discord.py waits them out and
retries inside its HTTP client, so a send simply takes longer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

import discord

from bots.discord.events import guild_id_of
from bots.discord.links import message_url

log = logging.getLogger(__name__)

MESSAGE_LIMIT = 2000
TYPING_REFRESH_S = 8.0  # Discord shows "typing" for 10 s after each trigger


class ChannelProblems:
    """Remembers the channels already reported, so a channel where the bot may not write is
    logged once, not on every message."""

    def __init__(self) -> None:
        self.reported: set[int] = set()

    def forbidden(self, channel_id: int, detail: str) -> None:
        if channel_id in self.reported:
            return
        self.reported.add(channel_id)
        log.warning(
            "missing permissions in Discord channel %s (%s): memorybot still remembers what it "
            "can read there but cannot answer; grant View Channel, Send Messages (in Threads) "
            "and Read Message History (docs/discord.md)",
            channel_id,
            detail,
        )

    def failed(self, channel_id: int, exc: discord.HTTPException) -> None:
        if isinstance(exc, discord.Forbidden):
            self.forbidden(channel_id, f"{exc.status} {exc.code}: {exc.text}")
        else:
            log.warning(
                "could not post in Discord channel %s: %s %s", channel_id, exc.status, exc.code
            )


def can_send(channel: discord.abc.Messageable) -> bool:
    """What discord.py's cache says about our permissions (a DM is always writable)."""
    if isinstance(channel, discord.Thread):
        perms = channel.permissions_for(channel.guild.me)
        return perms.view_channel and perms.send_messages_in_threads
    if isinstance(channel, discord.TextChannel | discord.VoiceChannel | discord.StageChannel):
        perms = channel.permissions_for(channel.guild.me)
        return perms.view_channel and perms.send_messages
    return True


@contextlib.asynccontextmanager
async def keep_typing(
    channel: discord.abc.Messageable, problems: ChannelProblems
) -> AsyncIterator[None]:
    """Show "memorybot is typing..." until the block ends (the LLM is working)."""

    async def typing() -> None:
        while True:
            try:
                await channel.typing()  # one trigger; it lasts about 10 s
            except discord.HTTPException as exc:
                problems.failed(getattr(channel, "id", 0), exc)
                return
            await asyncio.sleep(TYPING_REFRESH_S)

    task = asyncio.create_task(typing())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


class DiscordReply:
    """One answer to ``trigger`` (the ``ReplySink`` of the core's conversation): the first
    message replies to it, what follows is posted in the channel."""

    message_chars = MESSAGE_LIMIT

    def __init__(
        self, trigger: discord.Message, *, mention: bool, problems: ChannelProblems
    ) -> None:
        self.trigger = trigger
        self.channel = trigger.channel
        self.mention = mention
        self.problems = problems
        self.replied = False  # the first message of the answer is posted

    def can_send(self) -> bool:
        if can_send(self.channel):
            return True
        self.problems.forbidden(self.channel.id, "the bot lacks Send Messages here")
        return False

    def typing(self) -> contextlib.AbstractAsyncContextManager[None]:
        return keep_typing(self.channel, self.problems)

    def markup(self, text: str) -> str:
        return text  # Discord writes Markdown

    async def post(self, *, text: str) -> discord.Message | None:
        try:
            if self.replied:
                return await self.channel.send(text)
            posted = await send_first(self.trigger, text, mention=self.mention)
        except discord.HTTPException as exc:
            self.problems.failed(self.channel.id, exc)
            return None
        self.replied = True
        return posted

    def message_id(self, handle: discord.Message) -> str:
        return str(handle.id)

    async def edit(self, *, handle: discord.Message, text: str) -> bool:
        try:
            await handle.edit(content=text)
        except discord.HTTPException as exc:
            self.problems.failed(self.channel.id, exc)
            return False
        return True

    async def source_line(self, *, platform_id: str, label: str, in_parent: bool) -> str:
        """Small text (``-#``) linking to the recalled message, in this same channel (or,
        ``in_parent``, in this thread's channel)."""
        channel_id = self.channel.id
        if in_parent and isinstance(self.channel, discord.Thread) and self.channel.parent_id:
            channel_id = self.channel.parent_id
        url = message_url(
            guild_id=guild_id_of(self.trigger), channel_id=channel_id, message_id=platform_id
        )
        return f"-# [{label}]({url})" if url else ""


async def send_first(trigger: discord.Message, text: str, *, mention: bool) -> discord.Message:
    """The first message of an answer: a reply to ``trigger`` (a message reference) where
    the bot may read the channel's history, else a plain message in the channel (Discord
    refuses a reference without Read Message History: a 403 for an answer already paid for)."""
    channel = trigger.channel
    if can_read_history(channel):
        return await channel.send(
            text, reference=trigger.to_reference(fail_if_not_exists=False), mention_author=mention
        )
    return await channel.send(text)


def can_read_history(channel: object) -> bool:
    guild_channel = (
        discord.Thread | discord.TextChannel | discord.VoiceChannel | discord.StageChannel
    )
    if isinstance(channel, guild_channel):
        return channel.permissions_for(channel.guild.me).read_message_history
    return True  # a DM
