"""What a forwarded message needs looked up before it becomes text (:mod:`bots.discord.events`
does no I/O): the names of whom and what its snapshots mention, and where it came from.

Discord sends a forward's snapshot with the users it mentions, but discord.py keeps only the
``<@id>`` in its text, so each id is named from the client's cache of users, else with one
``GET /users/{id}`` (at most :data:`MAX_LOOKUPS` a message): a user's own display name, as the
snapshot's ``mentions`` give it (a snapshot carries no member, so no server nickname), the
same however the cache stands, so reading the message again (a catch-up, a learn) gives the
same text. Roles are named from the forwarding server's, channels from the client's cache.

Where it came from is ``message_reference``'s ``channel_id`` and ``guild_id``: "#channel" in
the same server, "#channel (Server)" in another server the bot is in, "another server" in
one it is not in, "a DM" when there is no server; a channel the bot does not know is left
unnamed.
"""

from __future__ import annotations

import logging

import discord

from bots.discord.events import Forwarded, forwarded_texts, guild_id_of, is_forward, mentioned_ids

log = logging.getLogger(__name__)

MAX_LOOKUPS = 10  # users looked up over REST for one message; the others keep their <@id>


async def forward_of(client: discord.Client, message: discord.Message) -> Forwarded | None:
    """What ``message``, a forward, needs looked up; None for any other message."""
    if not is_forward(message):
        return None
    users, roles, channels = mentioned_ids(forwarded_texts(message))
    names: dict[int, str] = {}
    lookups = 0
    for user_id in sorted(users):
        user = client.get_user(user_id)
        if user is None and lookups < MAX_LOOKUPS:
            lookups += 1
            try:
                user = await client.fetch_user(user_id)
            except discord.HTTPException as exc:  # gone, or Discord refused: the id stays
                log.info("forward %s: user %s not found (%s)", message.id, user_id, exc.status)
        if user is not None:
            names[user_id] = user.display_name
    guild = message.guild
    return Forwarded(
        users=names,
        roles={r: role.name for r in roles if guild and (role := guild.get_role(r))},
        channels={c: name for c in channels if (name := _channel_name(client, c))},
        origin=origin_of(client, message),
    )


def origin_of(client: discord.Client, message: discord.Message) -> str:
    """Where a forward came from, as far as the bot can tell ("" when it cannot)."""
    reference = message.reference
    if reference is None:
        return ""
    if reference.guild_id is None:
        return "a DM"
    channel = _channel_name(client, reference.channel_id) if reference.channel_id else ""
    where = f"#{channel}" if channel else ""
    if reference.guild_id == guild_id_of(message):
        return where
    guild = client.get_guild(reference.guild_id)
    if guild is None:
        return "another server"
    return f"{where} ({guild.name})" if where else guild.name


def _channel_name(client: discord.Client, channel_id: int) -> str:
    channel = client.get_channel(channel_id)
    name = getattr(channel, "name", None)
    return name if isinstance(name, str) else ""
