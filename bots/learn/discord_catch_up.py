"""What changed on Discord while the bot was away.

A gateway session that resumes gets what it missed; one that cannot (the bot restarted, or
Discord refused the RESUME and a fresh session began) does not: a message deleted or edited
meanwhile, a channel deleted, a server that removed the bot would stay in memory as they
were. So on every fresh session (``on_ready``: after READY and the GUILD_CREATEs that follow
it) the bot brings memory in line with Discord, as the events it missed would have:

1. **Servers.** A server with memory that is not among the client's guilds removed the bot
   (kicked, banned, or it left): it is forgotten as on ``GUILD_DELETE``
   (``on_guild_remove``). A guild READY lists as ``unavailable`` (an outage) is among the
   client's guilds and is never forgotten. No request: READY says it.
2. **Channels and threads.** A place with memory in an available guild that the gateway did
   not describe (not in the client's cache after READY: deleted, archived, or out of sight) is
   asked for, one request each, most recently active first, at most
   ``bot.catch_up_places``: 404 Unknown Channel is a deleted channel (with its threads) or
   thread, forgotten as on ``CHANNEL_DELETE``/``THREAD_DELETE``; 403 Missing Access is a place
   the bot may no longer see, whose memory stays (as it does live, where losing access
   forgets nothing); any other failure (5xx, a rate limit discord.py gave up on) changes
   nothing.
3. **Messages.** The ``bot.catch_up_places`` places most recently active within the last
   ``bot.catch_up_hours`` have their last ``RECHECK_MESSAGES`` messages read again: what is
   no longer there is forgotten, what was edited is updated.

Requests go one after the other, so Discord's rate limits hold (discord.py waits them out);
``catch_up_hours = 0`` turns 2 and 3 off. What the allow-lists exclude is left alone, and so
are guilds (and DMs) of shards another process serves.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import timedelta

import discord

from bots.discord.events import Place, attachments_of, is_allowed, message_text, place_for
from bots.discord.forwards import forward_of
from bots.discord.places import forget_place, forget_server
from config.settings import DiscordSettings
from memory_core import calendar
from memory_core.bootstrap import Core
from memory_core.errors import MemorybotError
from memory_core.scopes import Scope

log = logging.getLogger(__name__)

RECHECK_MESSAGES = 100

# Discord's JSON error codes (API reference, "JSON Error Codes").
UNKNOWN_CHANNEL = 10003
MISSING_ACCESS = 50001


async def recheck_recent(bot: discord.Client, core: Core, *, bot_name: str) -> int:
    """Bring memory in line with Discord after a fresh session (see the module); how many
    stored messages changed (forgotten or edited)."""
    window = core.settings.bot
    try:
        count = await core.repo.reads.scope_count()
        active = await core.repo.reads.scopes(offset=0, limit=count)  # newest first
    except MemorybotError as exc:  # Redis away: the next fresh session tries again
        log.warning("could not catch up with Discord after a fresh session: %s", exc)
        return 0
    reach = Reach(bot, core.settings.discord)
    places = _places(active)
    servers = await forget_removed_servers(bot, core, reach, [place for place, _ in places])
    if not window.catch_up_hours:
        return 0
    seen = Unseen(bot, core, reach)
    await seen.ask([place for place, _ in places], limit=window.catch_up_places)
    since = calendar.to_ms(core.clock.now() - timedelta(hours=window.catch_up_hours))
    recent = [place for place, last in places if last >= since]
    chosen = [p for p in recent if reach.rechecks(p) and not seen.is_gone(p)]
    changed = 0
    for place in chosen[: window.catch_up_places]:
        changed += await seen.recheck(place, bot_name)
    if servers or seen.gone or changed:
        log.warning(
            "caught up with Discord after a fresh session: %d servers and %d places "
            "forgotten, %d messages changed",
            servers,
            len(seen.gone),
            changed,
        )
    return changed


def _places(active: Sequence[tuple[str, int]]) -> list[tuple[Scope, int]]:
    """The Discord channels, threads and DMs among the scopes, with their last activity
    (people are not places)."""
    out: list[tuple[Scope, int]] = []
    for scope, last in active:
        try:
            place = Scope.of(scope)
        except MemorybotError:  # not a scope memorybot writes: nothing to catch up
            continue
        if place.platform == "discord" and not place.person:
            out.append((place, last))
    return out


class Reach:
    """The Discord places this client answers for: the guilds of its shards (DMs: shard 0's),
    within the allow-lists."""

    def __init__(self, bot: discord.Client, settings: DiscordSettings) -> None:
        self.bot = bot
        self.settings = settings
        if isinstance(bot, discord.AutoShardedClient):
            self.shard_count, self.shards = bot.shard_count or 1, frozenset(bot.shards)
        else:
            self.shard_count, self.shards = bot.shard_count or 1, frozenset({bot.shard_id or 0})

    def serves(self, guild_id: int | None) -> bool:
        """Whether this client's shards receive the guild's events (DMs: shard 0)."""
        shard = 0 if guild_id is None else (guild_id >> 22) % self.shard_count
        return shard in self.shards

    def owns_server(self, guild_id: int) -> bool:
        """A server whose absence from READY this client may act on."""
        allowed = self.settings.allowed_guild_ids
        return self.serves(guild_id) and (not allowed or guild_id in allowed)

    def guild(self, place: Scope) -> discord.Guild | None:
        """The place's guild, when the session described it (not in an outage) and the
        allow-lists let the place in."""
        if not place.server.isdigit() or not _ids_of(place):
            return None
        guild = self.bot.get_guild(int(place.server))
        if guild is None or guild.unavailable or not is_allowed(_place(place), self.settings):
            return None
        return guild

    def rechecks(self, place: Scope) -> bool:
        """Whether the place's recent messages are read again: a DM of this client, or a
        place of a guild it describes."""
        if place.dm_user:
            return (
                place.dm_user.isdigit()
                and self.serves(None)
                and is_allowed(_place(place), self.settings)
            )
        return self.guild(place) is not None


async def forget_removed_servers(
    bot: discord.Client, core: Core, reach: Reach, places: Sequence[Scope]
) -> int:
    """Forget the servers with memory that are not among the client's guilds, as
    ``on_guild_remove`` does; how many. READY lists every guild the bot is in, those in an
    outage included (``unavailable``), and discord.py keeps those too."""
    if not bot.intents.guilds:
        return 0  # without the GUILDS intent READY's guilds are not kept: nothing to go by
    present = {guild.id for guild in bot.guilds}
    servers = {int(p.server) for p in places if p.server.isdigit()}
    removed = sorted(g for g in servers - present if reach.owns_server(g))
    for guild_id in removed:
        await forget_server(core, guild_id, when=" while away")
    return len(removed)


class Unseen:
    """Places of the client's guilds that the session did not describe, asked for one by
    one; what they turned out to be."""

    def __init__(self, bot: discord.Client, core: Core, reach: Reach) -> None:
        self.bot = bot
        self.core = core
        self.reach = reach
        self.found: dict[int, object] = {}  # channel id -> what Discord answered
        self.asked: set[int] = set()
        self.gone: set[str] = set()  # the scopes forgotten (a channel's: with its threads)

    def is_gone(self, place: Scope) -> bool:
        return place.key in self.gone or place.root.key in self.gone

    async def ask(self, places: Sequence[Scope], *, limit: int) -> None:
        """Ask Discord for each place with memory that the cache does not know, most
        recently active first, at most ``limit`` requests; a thread whose channel is not
        known either is asked for after its channel (whose deletion took the thread)."""
        for place in places:
            guild = self.reach.guild(place)
            if guild is None or guild.get_channel_or_thread(_ids_of(place)[-1]) is not None:
                continue
            channel = place.root
            if place.is_thread and guild.get_channel(_ids_of(channel)[-1]) is None:
                asks = [channel, place]
            else:
                asks = [place]
            for target in asks:
                target_id = _ids_of(target)[-1]
                if self.is_gone(target) or target_id in self.asked:
                    continue
                if len(self.asked) >= limit:
                    log.info(
                        "asked Discord about %d unlisted places: no more (bot.catch_up_places)",
                        limit,
                    )
                    return
                self.asked.add(target_id)
                try:
                    self.found[target_id] = await self.bot.fetch_channel(target_id)
                except discord.HTTPException as exc:
                    await self.failed(target, exc)
                except discord.InvalidData:
                    pass  # a channel of a type discord.py does not know: it exists

    async def failed(self, place: Scope, exc: discord.HTTPException) -> None:
        """What Discord's refusal to show a place says about it (a DM is never deleted)."""
        if isinstance(exc, discord.NotFound) and exc.code == UNKNOWN_CHANNEL and place.server:
            why = "its thread" if place.is_thread else "its channel (with its threads)"
            if await forget_place(self.core, place.key, f"{why} was deleted while away"):
                self.gone.add(place.key)
        elif isinstance(exc, discord.Forbidden) and exc.code == MISSING_ACCESS:
            # Live, a place the bot loses access to keeps its memory (it may come back).
            log.warning(
                "cannot see %s any more (403 Missing Access): its memory stays; grant View "
                "Channel and Read Message History to catch it up",
                place.key,
            )
        else:
            log.warning(
                "could not catch up %s after a fresh session: %s %s",
                place.key,
                exc.status,
                exc.code,
            )

    async def recheck(self, place: Scope, bot_name: str) -> int:
        """Read the place's recent history again; how many stored messages changed."""
        try:
            channel = await self.channel(place)
            if not isinstance(channel, discord.abc.Messageable):
                return 0
            return await _recheck(self.bot, self.core, place.key, channel, bot_name)
        except discord.HTTPException as exc:
            await self.failed(place, exc)
        except (discord.DiscordException, MemorybotError) as exc:
            log.warning("could not re-check %s after a fresh session: %s", place.key, exc)
        return 0

    async def channel(self, place: Scope) -> object:
        if place.dm_user:
            user = await self.bot.fetch_user(int(place.dm_user))
            return user.dm_channel or await user.create_dm()
        channel_id = _ids_of(place)[-1]
        if (cached := self.bot.get_channel(channel_id)) is not None:
            return cached
        if channel_id in self.asked and channel_id not in self.found:
            return None  # asked already: Discord did not show it (said above why)
        if channel_id not in self.found:
            self.found[channel_id] = await self.bot.fetch_channel(channel_id)
        return self.found[channel_id]


def _ids_of(place: Scope) -> list[int]:
    """A guild place's channel id, then its thread's; [] when they are not Discord ids."""
    ids = [place.channel, place.thread] if place.is_thread else [place.channel]
    return [int(i) for i in ids] if all(i.isdigit() for i in ids) else []


def _place(place: Scope) -> Place:
    """The door's view of a stored place (what the allow-lists read)."""
    if place.dm_user:
        return place_for(guild_id=None, channel_id=0, parent_id=None, user_id=int(place.dm_user))
    ids = _ids_of(place)
    return place_for(
        guild_id=int(place.server),
        channel_id=ids[-1],
        parent_id=ids[0] if place.is_thread else None,
        user_id=0,
    )


async def _recheck(
    bot: discord.Client, core: Core, scope: str, channel: discord.abc.Messageable, bot_name: str
) -> int:
    history = [m async for m in channel.history(limit=RECHECK_MESSAGES)]  # newest first
    if not history:
        return 0
    oldest = calendar.to_ms(history[-1].created_at)
    seen = {str(m.id): m for m in history}
    me = bot.user
    stored = await core.repo.reads.entries_from(scope, oldest, limit=RECHECK_MESSAGES * 3)
    changed = 0
    for entry in stored:
        if not entry.platform_id.isdigit() or int(entry.platform_id) < int(history[-1].id):
            continue  # the console's, a replay's; or older than what was read
        message = seen.get(entry.platform_id)
        if message is None:
            changed += await core.conversation.delete(scope, [(entry.platform_id, entry.ts)])
        elif entry.role == "user" and me is not None:
            forwarded = await forward_of(bot, message)  # (as live: the same text)
            text = message_text(message, bot_id=me.id, bot_name=bot_name, forwarded=forwarded)
            if await core.conversation.edit(
                scope, entry.platform_id, text, when=entry.ts, attachments=attachments_of(message)
            ):
                changed += 1
    return changed
