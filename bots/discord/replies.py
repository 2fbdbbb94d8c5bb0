"""Posting answers on Discord: :class:`DiscordReply` is the core's ``ReplySink`` for one
answer (the typing indicator, the first message a reply to the one that asked, edits of the
streamed draft), and channels the bot may not write in are reported once. Streaming,
splitting under 2,000 characters, never posting an answer twice and what is remembered are
decided in :mod:`memory_core.service.streaming` and :mod:`memory_core.service.conversation`.

Discord's per-route limits are kept fleet-wide before each call (``room``: five messages,
and five edits, per five seconds in a channel; the typing trigger too), so that answers
written at once in one channel never meet a 429: a draft's edit that finds no room is
skipped, the answer's last words wait for theirs. A 429 that still comes is waited out by
discord.py inside its HTTP client, so a send simply takes longer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

import discord

from bots.discord.events import guild_id_of
from bots.discord.links import message_url
from memory_core.fleet.pacing import Allowance, Pacing
from memory_core.service.streaming import Call

log = logging.getLogger(__name__)

MESSAGE_LIMIT = 2000  # characters of a message's content
GUILD_CHANNELS = (discord.Thread, discord.TextChannel, discord.VoiceChannel, discord.StageChannel)
TYPING_REFRESH_S = 8.0  # Discord shows "typing" for 10 s after each trigger
#: Per channel, as Discord answers bots (its headers say so; no published number). A draft's
#: update leaves two of them for answers' last words, which then rarely wait.
POSTS = EDITS = TYPING = Allowance(calls=5, window_s=5.0)


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


def permissions(channel: object) -> discord.Permissions | None:
    """The bot's permissions in a server's channel or thread, as discord.py's cache says
    (None in a DM, where it may do everything)."""
    if isinstance(channel, GUILD_CHANNELS):
        return channel.permissions_for(channel.guild.me)
    return None


@contextlib.asynccontextmanager
async def keep_typing(
    channel: discord.abc.Messageable, problems: ChannelProblems, pacing: Pacing | None = None
) -> AsyncIterator[None]:
    """Show "memorybot is typing..." until the block ends (the LLM is working); a trigger
    the channel's limit has no room for is skipped (the next one comes soon)."""
    channel_id = getattr(channel, "id", 0)

    async def typing() -> None:
        while True:
            if pacing is None or await pacing.now(f"discord:typing:{channel_id}", TYPING):
                try:
                    await channel.typing()  # one trigger; it lasts about 10 s
                except discord.HTTPException as exc:
                    problems.failed(channel_id, exc)
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
        self,
        trigger: discord.Message,
        *,
        mention: bool,
        problems: ChannelProblems,
        pacing: Pacing | None = None,
    ) -> None:
        self.trigger = trigger
        self.channel = trigger.channel
        self.mention = mention
        self.problems = problems
        self.pacing = pacing
        self.replied = False  # the first message of the answer is posted

    def can_send(self) -> bool:
        allowed = permissions(self.channel)
        in_thread = isinstance(self.channel, discord.Thread)
        if allowed is None or (
            allowed.view_channel
            and (allowed.send_messages_in_threads if in_thread else allowed.send_messages)
        ):
            return True
        self.problems.forbidden(self.channel.id, "the bot lacks Send Messages here")
        return False

    def typing(self) -> contextlib.AbstractAsyncContextManager[None]:
        return keep_typing(self.channel, self.problems, self.pacing)

    async def room(self, call: Call, *, wait: bool) -> bool:
        """The channel's limit for one more message or edit, fleet-wide."""
        if self.pacing is None:
            return True
        name = f"discord:{call}:{self.channel.id}"
        return await self.pacing.room(name, POSTS if call == "post" else EDITS, wait=wait)

    def markup(self, text: str) -> str:
        return text  # Discord writes Markdown

    async def post(self, *, text: str) -> discord.Message | None:
        """The first message replies to the trigger (a message reference) where the bot may
        read the channel's history, else it is a plain message: Discord refuses a reference
        without Read Message History, a 403 for an answer already paid for."""
        allowed = permissions(self.channel)
        try:
            if self.replied or not (allowed is None or allowed.read_message_history):
                posted = await self.channel.send(text)
            else:
                reference = self.trigger.to_reference(fail_if_not_exists=False)
                posted = await self.channel.send(
                    text, reference=reference, mention_author=self.mention
                )
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
