"""Discord events -> the core's words: scopes, who is speaking, whether the bot is asked.

Translation only: nothing here sends to Discord or touches Redis, so the rules (which scope
a thread maps to, what counts as addressing the bot, which places are allowed) are plain
functions that read a discord.py object and return a value.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

import discord

from bots.discord.files import image_source
from config.settings import DiscordSettings
from memory_core.models import Attachment, IncomingMessage
from memory_core.scopes import Audience, Scope

# Message types that people write; joins, pins, thread-created notices and the like are not
# conversation and are never remembered.
CONVERSATION_TYPES = frozenset({discord.MessageType.default, discord.MessageType.reply})

_MENTION = re.compile(r"<(@!?|@&|#)(\d+)>")


@dataclass(frozen=True, slots=True)
class Place:
    """Where something happened, as the core names it."""

    scope: str
    guild_id: int | None  # None: a DM
    channel_id: int  # the channel, thread or DM channel
    parent_id: int | None = None  # a thread's (or forum post's) parent channel

    @property
    def is_dm(self) -> bool:
        return self.guild_id is None


def place_for(
    *, guild_id: int | None, channel_id: int, parent_id: int | None, user_id: int
) -> Place:
    """The scope of a conversation place.

    A DM is keyed by the user rather than the DM channel, so the scope says whose memory it is
    (forget me, export); a thread is its own scope under its parent channel
    (``discord:{guild}:{channel}:{thread}``), as the gateway names the parent.
    """
    if guild_id is None:
        return Place(scope=Scope.discord_dm(str(user_id)).key, guild_id=None, channel_id=channel_id)
    if parent_id:
        scope = Scope.thread_of("discord", str(guild_id), str(parent_id), str(channel_id))
    else:
        scope = Scope.channel_of("discord", str(guild_id), str(channel_id))
    return Place(
        scope=scope.key, guild_id=guild_id, channel_id=channel_id, parent_id=parent_id or None
    )


def place_of(channel: object, *, guild_id: int | None, channel_id: int, user_id: int) -> Place:
    """The place of a message or an interaction (threads and forum posts know their parent)."""
    parent_id = channel.parent_id if isinstance(channel, discord.Thread) else None
    return place_for(guild_id=guild_id, channel_id=channel_id, parent_id=parent_id, user_id=user_id)


def guild_id_of(message: discord.Message) -> int | None:
    """The guild a message was sent in, None for a DM. ``message.guild`` is None also for a
    guild message whose guild discord.py has not cached; the message then sits on a
    PartialMessageable that still carries the payload's guild id."""
    if message.guild is not None:
        return message.guild.id
    if isinstance(message.channel, discord.PartialMessageable):
        return message.channel.guild_id
    return None


def is_allowed(place: Place, settings: DiscordSettings) -> bool:
    """The allow-lists: when one is set, everything outside it (DMs included) is ignored.

    A thread is allowed when its parent channel is.
    """
    if settings.allowed_guild_ids and place.guild_id not in settings.allowed_guild_ids:
        return False
    if settings.allowed_channel_ids:
        allowed = set(settings.allowed_channel_ids)
        return place.channel_id in allowed or place.parent_id in allowed
    return True


def readable_text(
    content: str,
    *,
    bot_id: int,
    bot_name: str,
    users: Mapping[int, str],
    roles: Mapping[int, str],
    channels: Mapping[int, str],
) -> str:
    """Replace ``<@id>``, ``<@&id>`` and ``<#id>`` with names, so memory (and the model) reads
    "@Alice" instead of a number; the bot's own mention becomes ``@{bot_name}``."""

    def name(match: re.Match[str]) -> str:
        kind, ident = match.group(1), int(match.group(2))
        if kind in ("@", "@!"):
            if ident == bot_id:
                return f"@{bot_name}"
            found = users.get(ident)
        elif kind == "@&":
            found = roles.get(ident)
        else:
            found = channels.get(ident)
            return f"#{found}" if found else match.group(0)
        return f"@{found}" if found else match.group(0)

    return _MENTION.sub(name, content).strip()


def is_addressed(message: discord.Message, bot_id: int) -> bool:
    """Mentioned (directly or through its managed role) or replied to."""
    if any(user.id == bot_id for user in message.mentions):
        return True
    if any(role.tags is not None and role.tags.bot_id == bot_id for role in message.role_mentions):
        return True
    reference = message.reference
    if reference is None:
        return False
    replied = reference.resolved or reference.cached_message
    return isinstance(replied, discord.Message) and replied.author.id == bot_id


def audience_of(place: Place, channel: object, guild: discord.Guild | None) -> Audience:
    """Who can read the place: a DM, the whole server, or some of its members."""
    if place.is_dm:
        return Audience.DM
    return Audience.SERVER if visible_to_everyone(channel, guild) else Audience.PRIVATE


def visible_to_everyone(channel: object, guild: discord.Guild | None) -> bool:
    """Whether the whole server can see the place: ``@everyone`` may view the channel (a
    public thread: its parent channel; a private thread: never). Unknown counts as no."""
    if guild is None:
        return False
    if isinstance(channel, discord.Thread):
        if channel.is_private() or channel.parent is None:
            return False
        channel = channel.parent
    if not isinstance(channel, discord.abc.GuildChannel):
        return False  # not cached (a PartialMessageable): visibility unknown
    return bool(channel.permissions_for(guild.default_role).view_channel)


def message_text(message: discord.Message, *, bot_id: int, bot_name: str) -> str:
    """A message's text as memory keeps it (mentions as names), new or edited alike."""
    return readable_text(
        message.content,
        bot_id=bot_id,
        bot_name=bot_name,
        users={user.id: user.display_name for user in message.mentions},
        roles={role.id: role.name for role in message.role_mentions},
        channels={channel.id: channel.name for channel in message.channel_mentions},
    )


def is_content_edit(event: discord.RawMessageUpdateEvent) -> bool:
    """Whether a MESSAGE_UPDATE is someone editing what memory keeps of a message: its text,
    or its files (an edit can remove attachments and leave the text as it was). Discord also
    sends one when it adds link previews or embeds, or a message is pinned: then nobody
    edited it (no ``edited_timestamp``) or text and files are what they were."""
    if "content" not in event.data or not event.data.get("edited_timestamp"):
        return False
    before, after = event.cached_message, event.message
    if before is None:
        return True  # not cached: the core compares with what it stored
    return before.content != after.content or _file_ids(before) != _file_ids(after)


def _file_ids(message: discord.Message) -> list[int]:
    return [attachment.id for attachment in message.attachments]


def attachments_of(message: discord.Message) -> tuple[Attachment, ...]:
    """The files of a message (new or edited alike) as memory remembers them: name, type,
    size, alt text and link; never the file. The name is ``filename``, as Discord shows it
    and the link ends; a ``title`` stands in for a missing description. An image also
    carries a way to read its bytes, for its caption (``llm.vision_model``)."""
    return tuple(
        Attachment(
            name=attachment.filename,
            kind=attachment.content_type or "",
            size=attachment.size,
            description=attachment.description or attachment.title or "",
            url=attachment.url,
            image=image_source(attachment),
        )
        for attachment in message.attachments
    )


def incoming_message(
    message: discord.Message, place: Place, *, bot_id: int, bot_name: str
) -> IncomingMessage | None:
    """The core's view of a message, or None when there is nothing to remember (stickers
    only). A message of files only is remembered by its files."""
    text = message_text(message, bot_id=bot_id, bot_name=bot_name)
    attachments = attachments_of(message)
    if not text and not attachments:
        return None
    return IncomingMessage(
        scope=place.scope,
        text=text,
        attachments=attachments,
        author=message.author.display_name,
        author_id=str(message.author.id),
        ts=message.created_at,
        platform_id=str(message.id),
        addressed=is_addressed(message, bot_id),
        direct=place.is_dm,
        place_name=place_name(message, place),
        audience=audience_of(place, message.channel, message.guild),
    )


def place_name(message: discord.Message, place: Place) -> str:
    """What the dashboard shows for the place: "#general (My Server)", "DM with Alice"."""
    if place.is_dm:
        return f"DM with {message.author.display_name}"
    channel = getattr(message.channel, "name", None) or str(message.channel.id)
    guild = message.guild.name if message.guild is not None else str(place.guild_id)
    return f"#{channel} ({guild})"
