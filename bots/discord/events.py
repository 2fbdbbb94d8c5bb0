"""Discord events -> the core's words: scopes, who is speaking, whether the bot is asked.

Translation only: nothing here sends to Discord or touches Redis, so the rules (which scope
a thread maps to, what counts as addressing the bot, which places are allowed) are plain
functions that read a discord.py object and return a value.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

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


@dataclass(frozen=True, slots=True)
class Forwarded:
    """What the door looked up for a forwarded message (this module does no I/O): the names
    of the people, roles and channels its snapshots mention, and where it was forwarded
    from (``origin``: "#random", "#news (Other Server)", "another server", "a DM"; "" not
    known). See :mod:`bots.discord.forwards`."""

    users: Mapping[int, str] = field(default_factory=dict)
    roles: Mapping[int, str] = field(default_factory=dict)
    channels: Mapping[int, str] = field(default_factory=dict)
    origin: str = ""


def is_forward(message: discord.Message) -> bool:
    reference = message.reference
    return reference is not None and reference.type is discord.MessageReferenceType.forward


def message_text(
    message: discord.Message,
    *,
    bot_id: int,
    bot_name: str,
    forwarded: Forwarded | None = None,
) -> str:
    """A message's text as memory keeps it (mentions as names), new or edited alike, after
    what the message is when it is more than its words: a forum post's title and tags, a
    forwarded message (what it said: its text, embeds and Components V2 text, mentions by
    the names in ``forwarded``; where from; its author is not given), a poll, a poll's
    result, a voice message. Those notes are data, bounded like a file's line."""
    said = readable_text(
        message.content,
        bot_id=bot_id,
        bot_name=bot_name,
        users={user.id: user.display_name for user in message.mentions},
        roles={role.id: role.name for role in message.role_mentions},
        channels={channel.id: channel.name for channel in message.channel_mentions},
    )
    forwards = _forwarded(message, forwarded or Forwarded(), bot_id=bot_id, bot_name=bot_name)
    notes = [_forum_post(message), *forwards, _poll(message), _poll_result(message)]
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


def forward_note(origin: str = "") -> str:
    """What marks a forwarded message's text: where it was forwarded from, when known (the
    same words for a DiscordChatExporter file's forwards, which say no origin)."""
    where = f"from {_data(origin, 150)}" if origin else "message"
    return f"[forwarded {where}, its author not given]"


def _forwarded(
    message: discord.Message, forwarded: Forwarded, *, bot_id: int, bot_name: str
) -> list[str]:
    """A forwarded message: what it said (its text, its embeds', its Components V2 text),
    mentions by name, from the member who forwarded it."""
    if not is_forward(message):
        return []

    def readable(text: str) -> str:
        return readable_text(
            text,
            bot_id=bot_id,
            bot_name=bot_name,
            users=forwarded.users,
            roles=forwarded.roles,
            channels=forwarded.channels,
        )

    note = forward_note(forwarded.origin)
    found = []
    for snapshot in message.message_snapshots:
        parts = [snapshot.content, *_embed_texts(snapshot.embeds)]
        parts += _component_texts(snapshot.components)
        text = "\n".join(said for said in map(readable, parts) if said)
        found.append(f"{note} {text}".rstrip())
    return found


def forwarded_texts(message: discord.Message) -> Iterator[str]:
    """Every text of a forward's snapshots that may hold mentions (what the door looks up)."""
    if not is_forward(message):
        return
    for snapshot in message.message_snapshots:
        yield snapshot.content
        yield from _embed_texts(snapshot.embeds)
        yield from _component_texts(snapshot.components)


def mentioned_ids(texts: Iterable[str]) -> tuple[set[int], set[int], set[int]]:
    """The ids of the users, roles and channels ``<@id>``, ``<@&id>``, ``<#id>`` name."""
    users: set[int] = set()
    roles: set[int] = set()
    channels: set[int] = set()
    for text in texts:
        for kind, ident in _MENTION.findall(text):
            {"@": users, "@!": users, "@&": roles}.get(kind, channels).add(int(ident))
    return users, roles, channels


def _embed_texts(embeds: Sequence[discord.Embed]) -> list[str]:
    """An embed's words: its author, title, description, fields ("name: value"), footer."""
    texts: list[str] = []
    for embed in embeds:
        texts += [embed.author.name or "", embed.title or "", embed.description or ""]
        texts += [f"{f.name}: {f.value}" if f.name else str(f.value or "") for f in embed.fields]
        texts.append(embed.footer.text or "")
    return [text.strip() for text in texts if text and text.strip()]


def _component_texts(components: Sequence[object]) -> list[str]:
    """The text of Components V2 (its Text Displays, in containers and sections too), in
    order; buttons, menus, media and separators say nothing to remember."""
    texts: list[str] = []
    for component in components:
        if isinstance(component, discord.TextDisplay):
            texts.append(component.content)
        elif isinstance(component, discord.SectionComponent | discord.Container):
            texts += _component_texts(component.children)
    return [text.strip() for text in texts if text and text.strip()]


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
    message: discord.Message,
    place: Place,
    *,
    bot_id: int,
    bot_name: str,
    forwarded: Forwarded | None = None,
) -> IncomingMessage | None:
    """The core's view of a message, or None when there is nothing to remember (stickers
    only). A message of files only is remembered by its files. ``forwarded``: what the
    door looked up for a forward (see :func:`message_text`)."""
    text = message_text(message, bot_id=bot_id, bot_name=bot_name, forwarded=forwarded)
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
