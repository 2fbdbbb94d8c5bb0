"""A Discord channel's past, for learning (:mod:`memory_core.service.past`): a text channel's
messages and its threads' (active, archived public, archived private: all where the bot may
manage threads, else those it was a member of), or a forum's posts, read with the bot's own
discord.py client and handed over as pages of what the live door would have stored.

The place's threads are listed once, at the start: the cursor carries them (which place is
being read, the last message id read there, the threads still to read), so a learn resumed
from any page's cursor reads the rest exactly once. Messages are mapped as
:mod:`bots.discord.events` maps a live one (scopes, ids, text as it is now, files, audience);
other bots, system messages and the bot's command output are skipped and counted; the bot's
own answers are kept as the assistant's.

Rate limits are discord.py's to wait out. Each request (with its waits) is capped at
``max_wait`` seconds, and a client built with ``max_ratelimit_timeout`` refuses longer waits
itself (``discord.RateLimited``); either way learning stops with :class:`LearnRefused`, and
running it again goes on from the last page handed over.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import TypeVar

import aiohttp
import discord

from bots.discord.events import CONVERSATION_TYPES, incoming_message, place_for, place_of
from bots.discord.forwards import forward_of
from memory_core.service.past import LearnRefused, PastMessage, PastPage

PAGE_SIZE = 100  # messages read per page: one history request's worth
MAX_WAIT = 60.0  # seconds one request may take, rate-limit waits included

T = TypeVar("T")
Learnable = discord.TextChannel | discord.ForumChannel


@dataclass(frozen=True, slots=True)
class Cursor:
    """Where a learn is: the channel or thread being read, the last message id read there
    (0: none yet) and the threads still to read after it."""

    at: int
    after: int = 0
    todo: tuple[int, ...] = ()

    def dump(self) -> str:
        return json.dumps(
            {"at": str(self.at), "after": str(self.after), "todo": [str(t) for t in self.todo]}
        )

    @classmethod
    def load(cls, text: str) -> Cursor:
        try:
            raw = json.loads(text)
            return cls(
                at=int(raw["at"]),
                after=int(raw["after"]),
                todo=tuple(int(t) for t in raw["todo"]),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise LearnRefused(
                f"the learn's cursor is not one a Discord learn wrote ({text[:80]!r}): "
                "start the learn again from the beginning"
            ) from exc


@dataclass
class _Batch:
    """A page being filled."""

    messages: list[PastMessage] = field(default_factory=list)
    skipped: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def read(self) -> int:
        return len(self.messages) + self.skipped

    def page(self, cursor: str) -> PastPage:
        return PastPage(
            messages=self.messages, cursor=cursor, skipped=self.skipped, notes=tuple(self.notes)
        )


class DiscordPast:
    """The past of one Discord text channel (and its threads) or forum (its posts), as a
    :class:`memory_core.service.past.PastSource`.

    Args:
        client: the bot's logged-in discord.py client (its guild cache ready).
        channel: the text channel or forum to learn.
        bot_name: the bot's name in memory (``settings.bot.name``): the author of its own
            messages, and what its mention reads as.
        max_wait: seconds one request to Discord may take, its rate-limit waits included;
            past it the learn stops with :class:`LearnRefused` (run it again to go on).
        page_size: messages read per page (at most 100, one history request).
    """

    name = "discord"

    def __init__(
        self,
        client: discord.Client,
        channel: Learnable,
        *,
        bot_name: str,
        max_wait: float = MAX_WAIT,
        page_size: int = PAGE_SIZE,
    ) -> None:
        if not 1 <= page_size <= PAGE_SIZE:
            raise ValueError(f"page_size is 1-{PAGE_SIZE}, not {page_size}")
        self.client = client
        self.channel = channel
        self.bot_name = bot_name
        self.max_wait = max_wait
        self.page_size = page_size
        self.place = place_for(
            guild_id=channel.guild.id, channel_id=channel.id, parent_id=None, user_id=0
        ).scope
        self._threads: dict[int, discord.Thread] = {}
        self._names: dict[int, str] = {}

    # -- the pages ---------------------------------------------------------------------
    async def pages(self, since: datetime, cursor: str = "") -> AsyncIterator[PastPage]:
        """The pages from ``cursor`` on (see the module's text)."""
        me = self._me()
        batch = _Batch()
        if cursor:
            where = Cursor.load(cursor)
        else:
            threads, notes = await self._list_threads(since, me)
            batch.notes += notes
            places = [] if isinstance(self.channel, discord.ForumChannel) else [self.channel.id]
            places += threads
            if not places:
                yield batch.page("")
                return
            where = Cursor(at=places[0], todo=tuple(places[1:]))
        while True:
            place = await self._place(where.at, batch)
            if place is not None:
                after = where.after or _first_id_at(since)
                try:
                    async for message in self._history(place, after):
                        await self._keep(message, batch)
                        where = Cursor(at=where.at, after=message.id, todo=where.todo)
                        if batch.read >= self.page_size:
                            yield batch.page(where.dump())
                            batch = _Batch()
                except discord.Forbidden as exc:
                    if place is self.channel:
                        raise LearnRefused(self._refused_history()) from exc
                    batch.notes.append(
                        f"thread #{place.name} not read: Discord refused memorybot its history "
                        "(a private thread it was not added to: give it Manage Threads)"
                    )
            if not where.todo:
                break
            where = Cursor(at=where.todo[0], todo=where.todo[1:])
        yield batch.page("")

    def _me(self) -> discord.Member:
        """The bot in the channel's server, after checking it may read the channel's past."""
        me = self.channel.guild.me
        where = f"#{self.channel.name} ({self.channel.guild.name})"
        if me is None:
            raise LearnRefused(f"memorybot is not in the server of {where}")
        allowed = self.channel.permissions_for(me)
        for granted, permission in (
            (allowed.view_channel, "View Channel"),
            (allowed.read_message_history, "Read Message History"),
        ):
            if not granted:
                raise LearnRefused(
                    f"memorybot cannot read the past of {where}: give it {permission} there "
                    "(Server Settings > Roles, or the channel's Permissions), then learn again"
                )
        return me

    # -- threads -----------------------------------------------------------------------
    async def _list_threads(
        self, since: datetime, me: discord.Member
    ) -> tuple[list[int], list[str]]:
        """The ids of the channel's threads (or the forum's posts) that may hold messages
        from ``since`` on, oldest first, and what the bot could not list."""
        channel = self.channel
        found: dict[int, discord.Thread] = {}
        async with self._capped():
            active = await channel.guild.active_threads()
        found.update((t.id, t) for t in active if t.parent_id == channel.id)
        # newest archive first: a thread archived before ``since`` says nothing after it
        listings = [(channel.archived_threads(limit=None), True)]
        notes: list[str] = []
        if isinstance(channel, discord.TextChannel):
            if channel.permissions_for(me).manage_threads:
                listings.append((channel.archived_threads(private=True, limit=None), True))
            else:
                # newest id first: no order of archive times to stop at
                joined = channel.archived_threads(private=True, joined=True, limit=None)
                listings.append((joined, False))
                notes.append(
                    f"private threads of #{channel.name} that memorybot was not added to are "
                    "not read: give it Manage Threads there to learn them too"
                )
        try:
            for listing, by_archive_time in listings:
                async for thread in self._each(listing):
                    if thread.archive_timestamp >= since:
                        found[thread.id] = thread
                    elif by_archive_time:
                        break
        except discord.Forbidden as exc:  # permissions changed since the check
            raise LearnRefused(
                f"Discord refused memorybot the threads of #{channel.name}: give it Read "
                "Message History there (and Manage Threads for private threads), then learn "
                "again"
            ) from exc
        self._threads.update(found)
        return sorted(found), notes

    async def _place(self, place_id: int, batch: _Batch) -> Learnable | discord.Thread | None:
        """The channel or thread to read; None (and a note) for a thread that cannot be."""
        if place_id == self.channel.id:
            return self.channel
        thread = self._threads.get(place_id) or self.channel.guild.get_thread(place_id)
        if thread is not None:
            return thread
        try:
            async with self._capped():
                fetched = await self.client.fetch_channel(place_id)
        except discord.NotFound:
            return None  # deleted since it was listed: nothing of it is kept anyway
        except discord.Forbidden:
            batch.notes.append(f"thread {place_id} not read: memorybot may not see it")
            return None
        if not isinstance(fetched, discord.Thread):
            return None
        self._threads[place_id] = fetched
        return fetched

    # -- messages ----------------------------------------------------------------------
    def _history(
        self, place: Learnable | discord.Thread, after: int
    ) -> AsyncIterator[discord.Message]:
        """The place's messages after the id ``after``, oldest first."""
        if isinstance(place, discord.ForumChannel):
            return _nothing()  # a forum says nothing itself: its posts are threads
        return self._each(
            place.history(limit=None, after=discord.Object(id=after), oldest_first=True)
        )

    def _refused_history(self) -> str:
        return (
            f"Discord refused memorybot the history of #{self.channel.name}: give it View "
            "Channel and Read Message History there, then learn again"
        )

    async def _author(self, message: discord.Message) -> str:
        """The author's name as the live door shows it: the server's display name (its
        nickname) when the author is still a member, else the account's."""
        author = message.author
        if isinstance(author, discord.Member):
            return author.display_name
        if author.id not in self._names:
            guild = self.channel.guild
            member = guild.get_member(author.id)
            if member is None:
                try:
                    async with self._capped():
                        member = await guild.fetch_member(author.id)
                except (discord.NotFound, discord.Forbidden):
                    member = None  # left the server since
            self._names[author.id] = (member or author).display_name
        return self._names[author.id]

    async def _keep(self, message: discord.Message, batch: _Batch) -> None:
        me = self.client.user
        own = me is not None and message.author.id == me.id
        # Its own answers are conversation; what it posted through an interaction's webhook
        # (/memory's follow-ups, command output) is not, and is not stored live either.
        answer = own and message.webhook_id is None and message.interaction_metadata is None
        if message.type not in CONVERSATION_TYPES or (message.author.bot and not answer):
            batch.skipped += 1
            return
        channel = message.channel
        place = place_of(channel, guild_id=self.channel.guild.id, channel_id=channel.id, user_id=0)
        incoming = incoming_message(
            message,
            place,
            bot_id=me.id if me else 0,
            bot_name=self.bot_name,
            forwarded=await forward_of(self.client, message),  # (as live: the same text)
        )
        if incoming is None:  # stickers only: nothing to remember
            batch.skipped += 1
            return
        batch.messages.append(
            PastMessage(
                scope=incoming.scope,
                platform_id=incoming.platform_id,
                ts=incoming.ts or message.created_at,
                text=incoming.text,
                author=self.bot_name if own else await self._author(message),
                author_id="bot" if own else incoming.author_id,
                role="assistant" if own else "user",
                audience=incoming.audience,
                place_name=incoming.place_name,
                attachments=incoming.attachments,
            )
        )

    # -- waits -------------------------------------------------------------------------
    async def _each(self, iterator: AsyncIterator[T]) -> AsyncIterator[T]:
        """``iterator``'s items, each step (a request and its waits) capped."""
        while True:
            async with self._capped():
                try:
                    item = await anext(iterator)
                except StopAsyncIteration:
                    return
            yield item

    @contextlib.asynccontextmanager
    async def _capped(self) -> AsyncIterator[None]:
        """A step of at most ``max_wait`` seconds; a wait over the cap (ours, or the
        client's ``max_ratelimit_timeout``) refuses."""
        try:
            async with asyncio.timeout(self.max_wait):
                yield
        except discord.RateLimited as exc:
            raise LearnRefused(
                f"Discord asks memorybot to wait {exc.retry_after:.0f} s, longer than it "
                "waits: run learn again later to go on from where it stopped"
            ) from exc
        except TimeoutError as exc:
            raise LearnRefused(
                f"Discord kept memorybot waiting over {self.max_wait:g} s (a rate limit, or "
                "Discord is slow): run learn again later to go on from where it stopped"
            ) from exc
        except (discord.DiscordServerError, aiohttp.ClientError) as exc:
            raise LearnRefused(
                f"Discord could not be read ({exc}): run learn again later to go on from "
                "where it stopped"
            ) from exc


async def _nothing() -> AsyncIterator[discord.Message]:
    return
    yield  # an async generator that yields nothing


def _first_id_at(since: datetime) -> int:
    """The id just before the first one Discord could give a message sent at ``since``."""
    return max(discord.utils.time_snowflake(since, high=False) - 1, 0)


async def discord_past(
    client: discord.Client,
    channel_id: int,
    *,
    bot_name: str,
    max_wait: float = MAX_WAIT,
    page_size: int = PAGE_SIZE,
) -> DiscordPast:
    """The source the door hands the learner for ``/memory learn`` in a channel or forum
    (the arguments: :class:`DiscordPast`'s)."""
    channel = client.get_channel(channel_id)
    if channel is None:
        try:
            channel = await client.fetch_channel(channel_id)
        except discord.HTTPException as exc:
            raise LearnRefused(
                f"memorybot cannot see channel {channel_id}: give it View Channel there"
            ) from exc
    if isinstance(channel, discord.Thread):
        raise LearnRefused(
            "learn in the channel (or forum) the thread is in: its threads are learnt with it"
        )
    if not isinstance(channel, discord.TextChannel | discord.ForumChannel):
        raise LearnRefused("memorybot learns the past of a text channel or a forum")
    return DiscordPast(client, channel, bot_name=bot_name, max_wait=max_wait, page_size=page_size)
