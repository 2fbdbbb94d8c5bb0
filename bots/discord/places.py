"""Places discord.py cannot describe, found in memory's tree: a thread that is not in the
client's cache (archived, or an event that came before its thread did) is named by its id
alone; the tree recorded which channel it is under when memory first stored something of
it. Used for deletes, edits and message commands in such threads."""

from __future__ import annotations

import logging

import discord

from bots.discord.events import Place, place_for
from memory_core.bootstrap import Core
from memory_core.errors import MemorybotError
from memory_core.scopes import Scope, server_key

log = logging.getLogger(__name__)


async def known_thread(core: Core, place: Place, channel: object) -> Place | None:
    """``place`` as the thread the tree knows it to be; None when the place is described
    as it is (a cached channel or thread, a DM) or the tree does not know it either."""
    if place.guild_id is None or place.parent_id is not None:
        return None
    if isinstance(channel, discord.abc.GuildChannel | discord.Thread):
        return None  # described: a channel, not a thread
    try:
        parent = await core.repo.thread_parent(
            server_key("discord", str(place.guild_id)), str(place.channel_id)
        )
        channel_id = Scope.of(parent).channel if parent else ""
    except MemorybotError as exc:  # Redis away, or a record that names no channel
        log.warning("cannot look up the channel of %s: %s", place.scope, exc)
        return None
    if not channel_id.isdigit():
        return None
    return place_for(
        guild_id=place.guild_id, channel_id=place.channel_id, parent_id=int(channel_id), user_id=0
    )


async def resolved(core: Core, place: Place, channel: object) -> Place:
    """``place``, or the thread the tree knows it to be."""
    return await known_thread(core, place, channel) or place
