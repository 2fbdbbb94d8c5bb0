"""Posting answers on Discord: the typing indicator, a streamed draft edited about once a
second, the final answer split under 2,000 characters, and channels the bot may not write in.

Rate limits (HTTP 429) are not handled here on purpose: discord.py waits them out and
retries inside its HTTP client, so a send simply takes longer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

import discord

from bots.frontdoor import Throttle, split_message

log = logging.getLogger(__name__)

MESSAGE_LIMIT = 2000
TYPING_REFRESH_S = 8.0  # Discord shows "typing" for 10 s after each trigger
STREAMING_MARK = " …"  # shown at the end of a draft while the answer is still coming


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


def _preview(text: str) -> str:
    """A draft under the limit, marked as still being written."""
    room = MESSAGE_LIMIT - len(STREAMING_MARK)
    return text[:room].rstrip() + STREAMING_MARK


class Draft:
    """An answer that streams in: posted with the first words, then edited at most once per
    ``interval_s``. Errors stop the drafting (the final answer is still attempted)."""

    def __init__(
        self,
        trigger: discord.Message,
        *,
        interval_s: float,
        mention: bool,
        problems: ChannelProblems,
    ) -> None:
        self.trigger = trigger
        self.throttle = Throttle(interval_s)
        self.mention = mention
        self.problems = problems
        self.message: discord.Message | None = None
        self.shown = ""
        self.broken = False

    async def update(self, text: str) -> None:
        """``on_progress`` for the pipeline: the answer so far."""
        if self.broken or not text.strip() or not self.throttle.ready():
            return
        preview = _preview(text)
        try:
            if self.message is None:
                self.message = await send_first(self.trigger, preview, mention=self.mention)
            else:
                self.message = await self.message.edit(content=preview)
        except discord.HTTPException as exc:
            # Never let a Discord error escape into the LLM stream: the answer must still be
            # finished and stored.
            self.broken = True
            self.problems.failed(self.trigger.channel.id, exc)
            return
        self.shown = preview


async def send_reply(
    trigger: discord.Message,
    text: str,
    *,
    draft: Draft | None,
    mention: bool,
    problems: ChannelProblems,
) -> bool:
    """Post the final answer: the first part replies to ``trigger`` (or replaces the draft),
    the rest follows in the channel, each part under Discord's 2,000 characters. Returns
    whether it was all posted."""
    chunks = split_message(text, MESSAGE_LIMIT)
    if not chunks:
        return False
    channel = trigger.channel
    try:
        if draft is not None and draft.message is not None:
            if draft.shown != chunks[0]:
                await draft.message.edit(content=chunks[0])
        else:
            await send_first(trigger, chunks[0], mention=mention)
        for chunk in chunks[1:]:
            await channel.send(chunk)
    except discord.HTTPException as exc:
        problems.failed(channel.id, exc)
        return False
    return True


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
