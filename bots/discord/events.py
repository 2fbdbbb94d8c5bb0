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

# Message types that people write (and a poll's result, which says what the poll decided);
# joins, pins, thread-created notices and the like are not conversation and are never
# remembered.
CONVERSATION_TYPES = frozenset(
    {discord.MessageType.default, discord.MessageType.reply, discord.MessageType.poll_result}
)

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
    """A message's text as memory keeps it (mentions as names), new or edited alike, after
    what the message is when it is more than its words: a forum post's title and tags, a
    forwarded message (its own text; its author is not given), a poll, a poll's result, a
    voice message. Those notes are data, bounded like a file's line."""
    said = readable_text(
        message.content,
        bot_id=bot_id,
        bot_name=bot_name,
        users={user.id: user.display_name for user in message.mentions},
        roles={role.id: role.name for role in message.role_mentions},
        channels={channel.id: channel.name for channel in message.channel_mentions},
    )
    notes = [_forum_post(message), *_forwarded(message), _poll(message), _poll_result(message)]
    notes.append(_voice(message))
    return "\n".join(part for part in (*notes, said) if part).strip()


def _forum_post(message: discord.Message) -> str:
    """The first message of a forum post (it has the post's id): its title and tags."""
    channel = message.channel
    if not isinstance(channel, discord.Thread) or message.id != channel.id:
        return ""
    if not isinstance(channel.parent, discord.ForumChannel):
        return ""
    tags = ", ".join(_data(tag.name, 40) for tag in channel.applied_tags)
    return f"[forum post: {_data(channel.name, 100)}" + (f"; tags: {tags}]" if tags else "]")


def _forwarded(message: discord.Message) -> list[str]:
    """A forwarded message: what it said, from the member who forwarded it."""
    reference = message.reference
    if reference is None or reference.type is not discord.MessageReferenceType.forward:
        return []
    texts = (
        readable_text(snapshot.content, bot_id=0, bot_name="", users={}, roles={}, channels={})
        for snapshot in message.message_snapshots
    )
    return [f"[forwarded message, its author not given] {text}".rstrip() for text in texts]


def _poll(message: discord.Message) -> str:
    poll = message.poll
    if poll is None:
        return ""
    answers = "; ".join(_data(answer.text or "", 55) for answer in poll.answers)
    several = " (several answers allowed)" if poll.multiple else ""
    return f"[poll] {_data(poll.question, 300)}: {answers}{several}"


def _poll_result(message: discord.Message) -> str:
    if message.type is not discord.MessageType.poll_result or not message.embeds:
        return ""
    fields = {str(f.name): str(f.value or "") for f in message.embeds[0].fields}
    question = _data(fields.get("poll_question_text", ""), 300)
    winner = _data(fields.get("victor_answer_text", ""), 55)
    if not winner:
        return f"[poll closed] {question}: no answer won"
    votes, total = fields.get("victor_answer_votes", "?"), fields.get("total_votes", "?")
    return f"[poll closed] {question}: {winner} won, {votes} of {total} votes"


def _voice(message: discord.Message) -> str:
    if not message.flags.voice:
        return ""
    durations = [a.duration for a in message.attachments if a.duration is not None]
    seconds = f", {durations[0]:.0f} s" if durations else ""
    return f"[voice message{seconds}]"


def _data(value: str, limit: int) -> str:
    """User-chosen words in a note: one bounded line, no brackets."""
    value = " ".join(value.split()).replace("[", "(").replace("]", ")")
    return value if len(value) <= limit else value[: limit - 1] + "…"


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
    forwarded = [a for snapshot in message.message_snapshots for a in snapshot.attachments]
    return tuple(
        Attachment(
            name=attachment.filename,
            kind=attachment.content_type or "",
            size=attachment.size,
            description=attachment.description or attachment.title or "",
            url=attachment.url,
            image=image_source(attachment),
        )
        for attachment in (*message.attachments, *forwarded)
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
