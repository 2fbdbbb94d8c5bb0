"""Places discord.py cannot describe, and places that leave.

A thread that is not in the client's cache (archived, or an event that came before its
thread did) is named by its id alone; the tree recorded which channel it is under when
memory first stored something of it. Used for deletes, edits and message commands in such
threads.

Discord's developer terms ask to delete data once keeping it is no longer needed: a deleted
channel or thread, a server that removed the bot, whether the event came live or was found
missing after a fresh session (:mod:`bots.learn.discord_catch_up`). Never on an outage (a
guild "unavailable"), an archived thread or a lost connection: those come back."""

from __future__ import annotations

import logging

import discord

from bots.discord.events import Place, place_for
from memory_core.bootstrap import Core
from memory_core.errors import MemorybotError
from memory_core.scopes import Scope, server_key

log = logging.getLogger(__name__)


async def resolved(core: Core, place: Place, channel: object) -> Place:
    """``place``, or the thread the tree knows it to be when discord.py cannot describe it
    (a place described as it is: a cached channel or thread, a DM, stays as it is)."""
    if place.guild_id is None or place.parent_id is not None:
        return place
    if isinstance(channel, discord.abc.GuildChannel | discord.Thread):
        return place  # described: a channel, not a thread
    try:
        parent = await core.repo.reads.thread_parent(
            server_key("discord", str(place.guild_id)), str(place.channel_id)
        )
        channel_id = Scope.of(parent).channel if parent else ""
    except MemorybotError as exc:  # Redis away, or a record that names no channel
        log.warning("cannot look up the channel of %s: %s", place.scope, exc)
        return place
    if not channel_id.isdigit():
        return place
    return place_for(
        guild_id=place.guild_id, channel_id=place.channel_id, parent_id=int(channel_id), user_id=0
    )


async def forget_place(core: Core, scope: str, why: str) -> bool:
    """Forget a deleted channel (with its threads) or thread; False when the store failed."""
    try:
        keys = await core.admin.place.forget_all(scope, keep_settings=False)
    except MemorybotError as exc:
        log.error("memory of %s not forgotten (%s): %s", scope, why, exc)
        return False
    if keys:
        log.warning("forgot %s: %s", scope, why)
    return True


async def forget_server(core: Core, guild_id: int, *, when: str = "") -> None:
    """Forget every place of a server that removed the bot (kicked, banned, or it left)."""
    try:
        places = await core.admin.place.forget_server(server_key("discord", str(guild_id)))
    except MemorybotError as exc:
        log.error("memory of server %s not forgotten: %s", guild_id, exc)
        return
    log.warning("removed from server %s%s: forgot its %d places", guild_id, when, places)
