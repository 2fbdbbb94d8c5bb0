"""A local fake of Discord (REST API + gateway) for end-to-end tests of discord.py bots.

The fake is an aiohttp server bound to ``127.0.0.1`` on an ephemeral port. An unmodified
discord.py 2.x client is pointed at it by patching three class attributes (see
:meth:`FakeDiscord.patch_client`):

* ``discord.http.Route.BASE`` - every REST URL is built from it;
* ``discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY`` - a plain ``Client`` never asks
  ``GET /gateway/bot``, it connects straight to this URL;
* ``discord.asset.Asset.BASE`` - so that an accidental avatar download hits the fake (and is
  recorded as an unknown route) instead of the internet.

Typical use::

    async with FakeDiscord() as fake:          # starts the server and patches discord.py
        guild = fake.add_guild(name="g")
        channel = fake.add_text_channel(guild.id, "general")
        alice = fake.add_member(guild.id, name="alice")
        client = discord.Client(intents=intents, guild_ready_timeout=0.05)
        async with fake.running(client):       # logs in, waits for on_ready, closes at the end
            await fake.send_message(channel_id=channel.id, author_id=alice.user.id, content="hi")
            [reply] = await fake.wait_for_messages(channel.id, 1)

The fake models what Discord does closely enough that bot bugs show up here rather than in
production: payloads follow the API v10 shapes, snowflakes are real time-based IDs serialised as
strings, the gateway uses ``zlib-stream`` transport compression exactly like Discord, intents
filter what is dispatched (including the privileged MESSAGE_CONTENT rules), guild events are
routed to the shard that owns the guild, interactions must be acknowledged within 3 seconds and
only once, and messages longer than 2000 characters are rejected.

It is never more lenient than Discord's documentation (issue 17): embeds over any documented
limit are refused with 50035 Invalid Form Body, interaction tokens expire after 15 minutes
(401, 50027 Invalid Webhook Token), only registered (synced, or ``register_commands``) commands
can be invoked, and only in the contexts their ``contexts`` and ``integration_types`` allow
(a group DM only through a user install), the first follow-up after a deferred response fills
the "thinking..." message and is as ephemeral as the defer was, and MESSAGE_CREATE/UPDATE and
THREAD_CREATE reach the bot only for channels it can view and for private threads it is a
member of (or may manage).

Beyond messages and slash commands the fake plays what people and Discord do to a bot: message
context-menu commands (``invoke_message_command``), forwards (``message_snapshots``), polls and
their POLL_RESULT message, voice messages, forum tags, deleted channels and threads, the bot
being removed from a guild or a guild going through an outage, and the bot losing its gateway
connection (``disconnect_bot`` / ``wait_for_reconnect``) while things happen that it is never
told about (``while_away=True``, ``delete_message_quietly``, ``edit_message_quietly``), which
it can only find again in channel history.

Everything the bot does is recorded on the instance (``sent_messages``, ``edits``, ``typing``,
``interaction_responses``, ``followups``, ``synced_commands``, ``unknown_routes``...), and the
``wait_for_*`` coroutines let tests wait for those records instead of sleeping.

discord.py details this fake depends on (checked against discord.py 2.7):

* JSON bodies are only decoded when ``Content-Type`` is exactly ``application/json``;
  aiohttp's ``json_response`` appends ``; charset=utf-8`` and discord.py would then see a str.
* A 429 without a ``Via`` header is treated as a Cloudflare ban (HTTPException, no retry).
* The gateway URL carries ``compress=zlib-stream`` (``zstd-stream`` if ``zstandard`` is
  importable); both are implemented.
* ``on_ready`` fires ``guild_ready_timeout`` (default 2 s) after the last GUILD_CREATE: tests
  should build clients with ``guild_ready_timeout=0.05``.
* ``AutoShardedClient`` sleeps 5 s in ``before_identify_hook`` before every shard but the
  first; override the hook in tests.
* GUILD_CREATE with ``"unavailable": false`` means "became available", without the key
  "joined"; the fake sends the former after READY and the latter for guilds added later.
* A failed ``client.start()`` (e.g. ``LoginFailure``) leaves the HTTP session open; call
  ``client.close()`` or aiohttp warns about an unclosed session.
* After a dropped connection discord.py always tries RESUME first; when that is refused (op 9
  ``false``) it IDENTIFYs again, and its default ``before_identify_hook`` sleeps 5 s before any
  IDENTIFY but the first: override the hook in tests that reconnect.
* discord.py drops a deleted channel's cached threads itself (``on_thread_delete`` for each):
  Discord sends no THREAD_DELETE for them, and neither does the fake.
"""

# The async helpers take a per-call ``timeout=`` on purpose (ASYNC109): tests read better as
# ``await fake.wait_for_messages(cid, 2, timeout=5)`` than wrapped in ``asyncio.timeout``, and
# the timeout also feeds the diagnostic message of FakeDiscordTimeout.
# ruff: noqa: ASYNC109

from __future__ import annotations

import asyncio
import base64
import contextlib
import copy
import enum
import importlib
import json
import math
import re
import secrets
import time
import unicodedata
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Final, Literal, Protocol, TypeAlias, TypeVar

import yarl
from aiohttp import WSMsgType, web

if TYPE_CHECKING:
    import discord

__all__ = [
    "DEFAULT_BOT_PERMISSIONS",
    "DEFAULT_EVERYONE_PERMISSIONS",
    "ChannelType",
    "DispatchRecord",
    "FakeChannel",
    "FakeDiscord",
    "FakeDiscordError",
    "FakeDiscordTimeout",
    "FakeForumTag",
    "FakeGuild",
    "FakeInteraction",
    "FakeMember",
    "FakeRole",
    "FakeUser",
    "Followup",
    "IdentifyRecord",
    "Intent",
    "InteractionResponse",
    "MessageEdit",
    "Permission",
    "PermissionOverwrite",
    "ReactionRecord",
    "RequestRecord",
    "ResumeRecord",
    "RouteKind",
    "SentMessage",
    "SyncedCommands",
    "TypingEvent",
    "UnknownRoute",
    "UploadedFile",
]

JSON: TypeAlias = dict[str, Any]
"""A decoded JSON object as exchanged with discord.py."""

OptionValue: TypeAlias = "str | int | float | bool | FakeUser | FakeMember | FakeChannel | FakeRole"
"""A slash-command option value; model objects become USER/CHANNEL/ROLE options."""

RouteKind: TypeAlias = Literal[
    "messages",  # POST /channels/{id}/messages
    "edit",  # PATCH /channels/{id}/messages/{id}
    "delete",  # DELETE /channels/{id}/messages/{id}
    "typing",  # POST /channels/{id}/typing
    "reactions",  # PUT/DELETE .../reactions/{emoji}/@me
    "threads",  # POST /channels/{id}/threads and .../messages/{id}/threads
    "interaction_callback",  # POST /interactions/{id}/{token}/callback
    "webhook",  # follow-ups and @original edits under /webhooks/{app}/{token}
    "commands",  # application command sync
    "other",  # every other known route
    "any",  # only for failure injection: matches every route
]

DISCORD_EPOCH_MS: Final = 1_420_070_400_000
MAX_CONTENT_LENGTH: Final = 2000
MAX_EMBEDS: Final = 10
MAX_EMBED_DESCRIPTION: Final = 4096
# Discord's documented embed limits (Channel resource, "Embed Limits"): per field of an embed,
# and 6,000 characters summed over every embed of one message.
EMBED_FIELD_LIMITS: Final = {"title": 256, "description": MAX_EMBED_DESCRIPTION}
MAX_EMBED_FIELDS: Final = 25
MAX_EMBED_FIELD_NAME: Final = 256
MAX_EMBED_FIELD_VALUE: Final = 1024
MAX_EMBED_FOOTER_TEXT: Final = 2048
MAX_EMBED_AUTHOR_NAME: Final = 256
MAX_EMBEDS_TOTAL_CHARS: Final = 6000
# Interaction tokens (follow-ups, @original) are valid for 15 minutes after creation.
INTERACTION_TOKEN_LIFETIME: Final = 15 * 60.0
EPHEMERAL_FLAG: Final = 1 << 6
LOADING_FLAG: Final = 1 << 7
# Message flags set by Discord itself (Message resource, "Message Flags").
IS_VOICE_MESSAGE_FLAG: Final = 1 << 13
HAS_SNAPSHOT_FLAG: Final = 1 << 14
# Message types the fake produces (Message resource, "Message Types").
MESSAGE_DEFAULT, MESSAGE_REPLY, MESSAGE_CONTEXT_MENU_COMMAND, MESSAGE_POLL_RESULT = 0, 19, 23, 46
# Message reference types: a reply (DEFAULT) or a forward (FORWARD, with message_snapshots).
REFERENCE_DEFAULT, REFERENCE_FORWARD = 0, 1
# "FORWARD can only be used for basic messages": DEFAULT, REPLY, CHAT_INPUT_COMMAND and
# CONTEXT_MENU_COMMAND, and never a message with a poll.
FORWARDABLE_MESSAGE_TYPES: Final = frozenset({0, 19, 20, 23})
# The documented subset of message fields a message snapshot carries (Message Snapshot Object);
# the sticker fields only when the message has stickers, as on message objects.
SNAPSHOT_FIELDS: Final = (
    "type",
    "content",
    "embeds",
    "attachments",
    "timestamp",
    "edited_timestamp",
    "flags",
    "mentions",
    "mention_roles",
    "stickers",
    "sticker_items",
    "components",
)
# Poll limits (Poll resource): question text 300, answer text 55, 10 answers, 32 days.
MAX_POLL_QUESTION: Final = 300
MAX_POLL_ANSWER: Final = 55
MAX_POLL_ANSWERS: Final = 10
MAX_POLL_HOURS: Final = 32 * 24
# Forum tags (Channel resource, "Forum Tag Object"): 20 per forum, names up to 20 characters,
# 5 applied to a post.
MAX_FORUM_TAGS: Final = 20
MAX_FORUM_TAG_NAME: Final = 20
MAX_APPLIED_TAGS: Final = 5
# Voice messages: the waveform has one byte per 100 ms, at most 256 of them.
MAX_WAVEFORM_POINTS: Final = 256
# Application command types: slash commands and the two context menus (user, message).
CHAT_INPUT, USER_COMMAND, MESSAGE_COMMAND = 1, 2, 3
MAX_COMMAND_DESCRIPTION: Final = 100
MAX_COMMAND_OPTIONS: Final = 25
# Close codes after which discord.py gives up instead of reconnecting (gateway.py).
_FATAL_CLOSE_CODES: Final = frozenset({1000, 4004, 4010, 4011, 4012, 4013, 4014})
INTERACTION_ACK_TIMEOUT: Final = 3.0
# Interaction context types: where a command is used (a server, the DM with the bot, a group
# DM or a DM between other users) and installation types: how the app got there.
CONTEXT_GUILD, CONTEXT_BOT_DM, CONTEXT_PRIVATE_CHANNEL = 0, 1, 2
GUILD_INSTALL, USER_INSTALL = 0, 1
_CONTEXT_NAMES: Final = {0: "a server (GUILD)", 1: "the bot's DM (BOT_DM)", 2: "PRIVATE_CHANNEL"}
_API_PATH = re.compile(r"^/api/v(?P<version>\d+)(?P<rest>/.*)$")
_USER_MENTION = re.compile(r"<@!?(\d+)>")


class Intent(enum.IntFlag):
    """Gateway intent bits (https://discord.com/developers/docs/events/gateway#gateway-intents)."""

    GUILDS = 1 << 0
    GUILD_MEMBERS = 1 << 1
    GUILD_PRESENCES = 1 << 8
    GUILD_MESSAGES = 1 << 9
    GUILD_MESSAGE_REACTIONS = 1 << 10
    DIRECT_MESSAGES = 1 << 12
    MESSAGE_CONTENT = 1 << 15
    GUILD_MESSAGE_POLLS = 1 << 24
    DIRECT_MESSAGE_POLLS = 1 << 25


PRIVILEGED_INTENTS: Final = Intent.GUILD_MEMBERS | Intent.GUILD_PRESENCES | Intent.MESSAGE_CONTENT


class Permission(enum.IntFlag):
    """The permission bits the fake needs to compute channel permissions."""

    CREATE_INSTANT_INVITE = 1 << 0
    KICK_MEMBERS = 1 << 1
    BAN_MEMBERS = 1 << 2
    ADMINISTRATOR = 1 << 3
    MANAGE_CHANNELS = 1 << 4
    MANAGE_GUILD = 1 << 5
    ADD_REACTIONS = 1 << 6
    VIEW_CHANNEL = 1 << 10
    SEND_MESSAGES = 1 << 11
    MANAGE_MESSAGES = 1 << 13
    EMBED_LINKS = 1 << 14
    ATTACH_FILES = 1 << 15
    READ_MESSAGE_HISTORY = 1 << 16
    MENTION_EVERYONE = 1 << 17
    USE_EXTERNAL_EMOJIS = 1 << 18
    MANAGE_ROLES = 1 << 28
    USE_APPLICATION_COMMANDS = 1 << 31
    MANAGE_THREADS = 1 << 34
    CREATE_PUBLIC_THREADS = 1 << 35
    CREATE_PRIVATE_THREADS = 1 << 36
    SEND_MESSAGES_IN_THREADS = 1 << 38


# Every bit Discord currently defines; owners and administrators get all of them.
ALL_PERMISSIONS: Final = (1 << 51) - 1

DEFAULT_EVERYONE_PERMISSIONS: Final = int(
    Permission.CREATE_INSTANT_INVITE
    | Permission.VIEW_CHANNEL
    | Permission.SEND_MESSAGES
    | Permission.SEND_MESSAGES_IN_THREADS
    | Permission.CREATE_PUBLIC_THREADS
    | Permission.CREATE_PRIVATE_THREADS
    | Permission.EMBED_LINKS
    | Permission.ATTACH_FILES
    | Permission.ADD_REACTIONS
    | Permission.USE_EXTERNAL_EMOJIS
    | Permission.READ_MESSAGE_HISTORY
    | Permission.USE_APPLICATION_COMMANDS
)
"""What Discord grants ``@everyone`` in a new guild (roughly)."""

DEFAULT_BOT_PERMISSIONS: Final = int(
    Permission.VIEW_CHANNEL
    | Permission.SEND_MESSAGES
    | Permission.SEND_MESSAGES_IN_THREADS
    | Permission.CREATE_PUBLIC_THREADS
    | Permission.EMBED_LINKS
    | Permission.ATTACH_FILES
    | Permission.ADD_REACTIONS
    | Permission.READ_MESSAGE_HISTORY
    | Permission.USE_APPLICATION_COMMANDS
)
"""Permissions of the bot's managed role unless ``add_guild(bot_permissions=...)`` overrides."""


class ChannelType(enum.IntEnum):
    """Channel types used by the fake (https://discord.com/developers/docs/resources/channel)."""

    GUILD_TEXT = 0
    DM = 1
    GROUP_DM = 3
    GUILD_CATEGORY = 4
    ANNOUNCEMENT_THREAD = 10
    PUBLIC_THREAD = 11
    PRIVATE_THREAD = 12
    GUILD_FORUM = 15


_THREAD_TYPES: Final = frozenset(
    {ChannelType.ANNOUNCEMENT_THREAD, ChannelType.PUBLIC_THREAD, ChannelType.PRIVATE_THREAD}
)


class FakeDiscordError(RuntimeError):
    """Raised when a test drives the fake in a way Discord could not reproduce."""


class FakeDiscordTimeout(TimeoutError):
    """Raised by the ``wait_for_*`` helpers; the message says what was awaited and what exists."""


# --------------------------------------------------------------------------------------------
# Snowflakes and timestamps
# --------------------------------------------------------------------------------------------


class SnowflakeGenerator:
    """Generates realistic, strictly increasing Discord snowflakes.

    The top 42 bits are milliseconds since the Discord epoch, so IDs are far above ``2**22``
    and ``discord.utils.snowflake_time`` gives the current time, like real IDs.
    """

    def __init__(self) -> None:
        self._last_ms = 0
        self._increment = 0
        self._back_dated_increment = 0

    def next(self, *, shard: tuple[int, int] | None = None) -> int:
        """Return a new ID; with ``shard=(shard_id, shard_count)`` a guild ID owned by that shard.

        Discord routes a guild to shard ``(guild_id >> 22) % shard_count``, i.e. by the
        timestamp part, so we move the timestamp forward a few milliseconds until it matches.
        """
        ms = max(int(time.time() * 1000) - DISCORD_EPOCH_MS, self._last_ms)
        if shard is not None:
            shard_id, shard_count = shard
            if not 0 <= shard_id < shard_count:
                raise ValueError(f"shard {shard_id} is not in range(0, {shard_count})")
            if ms == self._last_ms:
                ms += 1  # a fresh millisecond keeps the increment logic simple
            while ms % shard_count != shard_id:
                ms += 1
        if ms == self._last_ms:
            self._increment += 1
            if self._increment > 0xFFF:
                ms += 1
                self._increment = 0
        else:
            self._increment = 0
        self._last_ms = ms
        # worker id 1, process id 1: arbitrary but non-zero like real IDs
        return (ms << 22) | (1 << 17) | (1 << 12) | self._increment

    def back_dated(self, seconds: float) -> int:
        """A new ID whose timestamp lies ``seconds`` in the past, as Discord's ID for an
        event that reaches the bot late (gateway or event-loop lag). Process id 2 keeps it
        apart from :meth:`next`'s IDs; the increment keeps it unique."""
        ms = int(time.time() * 1000) - DISCORD_EPOCH_MS - int(seconds * 1000)
        self._back_dated_increment = (self._back_dated_increment + 1) & 0xFFF
        return (ms << 22) | (1 << 17) | (2 << 12) | self._back_dated_increment


def snowflake_time_iso(snowflake: int) -> str:
    """ISO-8601 timestamp embedded in a snowflake, as Discord formats message timestamps."""
    ms = (snowflake >> 22) + DISCORD_EPOCH_MS
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat()


def _now_iso() -> str:
    return datetime.now(tz=UTC).isoformat()


# --------------------------------------------------------------------------------------------
# The fake's world model (what tests build before or while a client is connected)
# --------------------------------------------------------------------------------------------


@dataclass
class FakeUser:
    """A Discord user (humans and the bot itself)."""

    id: int
    name: str
    bot: bool = False
    global_name: str | None = None

    def to_payload(self) -> JSON:
        """The user object as Discord serialises it."""
        return {
            "id": str(self.id),
            "username": self.name,
            # Humans migrated to unique usernames ("0"); bots kept a four digit discriminator.
            "discriminator": "0001" if self.bot else "0",
            "global_name": self.global_name,
            "avatar": None,
            "banner": None,
            "accent_color": None,
            "avatar_decoration_data": None,
            "public_flags": 0,
            "flags": 0,
            "bot": self.bot,
            "system": False,
        }


@dataclass
class FakeRole:
    """A guild role; the ``@everyone`` role has the guild's ID."""

    id: int
    guild_id: int
    name: str
    permissions: int
    position: int = 0
    managed: bool = False
    bot_id: int | None = None
    color: int = 0
    hoist: bool = False
    mentionable: bool = False

    def to_payload(self) -> JSON:
        """The role object as Discord serialises it (permissions are a string)."""
        payload: JSON = {
            "id": str(self.id),
            "name": self.name,
            "color": self.color,
            "colors": {
                "primary_color": self.color,
                "secondary_color": None,
                "tertiary_color": None,
            },
            "hoist": self.hoist,
            "icon": None,
            "unicode_emoji": None,
            "position": self.position,
            "permissions": str(self.permissions),
            "managed": self.managed,
            "mentionable": self.mentionable,
            "flags": 0,
        }
        if self.bot_id is not None:
            payload["tags"] = {"bot_id": str(self.bot_id)}
        return payload


@dataclass(frozen=True)
class PermissionOverwrite:
    """A channel permission overwrite for a role (``type="role"``) or a member."""

    id: int
    type: Literal["role", "member"]
    allow: int = 0
    deny: int = 0

    def to_payload(self) -> JSON:
        """The overwrite object as Discord serialises it (type 0 = role, 1 = member)."""
        return {
            "id": str(self.id),
            "type": 0 if self.type == "role" else 1,
            "allow": str(self.allow),
            "deny": str(self.deny),
        }


@dataclass
class FakeMember:
    """A user's membership in a guild."""

    guild_id: int
    user: FakeUser
    role_ids: list[int]
    joined_at: str
    nick: str | None = None

    def to_payload(self, *, with_user: bool = True) -> JSON:
        """The guild member object; MESSAGE_CREATE embeds it without ``user``."""
        payload: JSON = {
            "roles": [str(r) for r in self.role_ids],
            "nick": self.nick,
            "avatar": None,
            "banner": None,
            "joined_at": self.joined_at,
            "premium_since": None,
            "deaf": False,
            "mute": False,
            "pending": False,
            "flags": 0,
            "communication_disabled_until": None,
        }
        if with_user:
            payload["user"] = self.user.to_payload()
        return payload


@dataclass(frozen=True)
class FakeForumTag:
    """A tag a forum offers its posts (``available_tags``); at most one of ``emoji_id`` (a
    custom emoji) and ``emoji_name`` (a unicode emoji) is set."""

    id: int
    name: str
    moderated: bool = False
    emoji_id: int | None = None
    emoji_name: str | None = None

    def to_payload(self) -> JSON:
        """The forum tag object as Discord serialises it."""
        return {
            "id": str(self.id),
            "name": self.name,
            "moderated": self.moderated,
            "emoji_id": _opt_str(self.emoji_id),
            "emoji_name": self.emoji_name,
        }


@dataclass
class FakeChannel:
    """A guild channel, thread, forum or DM channel."""

    id: int
    type: ChannelType
    name: str | None
    guild_id: int | None
    parent_id: int | None = None
    position: int = 0
    topic: str | None = None
    overwrites: list[PermissionOverwrite] = field(default_factory=list)
    owner_id: int | None = None
    recipient_ids: list[int] = field(default_factory=list)
    archived: bool = False
    locked: bool = False
    message_count: int = 0
    total_message_sent: int = 0
    last_message_id: int | None = None
    created_at: str = field(default_factory=_now_iso)
    # thread members: what decides who receives a private thread's messages
    member_ids: set[int] = field(default_factory=set)
    # a forum's tags, and the IDs of those applied to one of its posts
    available_tags: list[FakeForumTag] = field(default_factory=list)
    applied_tags: list[int] = field(default_factory=list)

    @property
    def is_thread(self) -> bool:
        """Whether this channel is a thread (including forum posts)."""
        return self.type in _THREAD_TYPES


@dataclass
class FakeGuild:
    """A guild with its roles, channels and members."""

    id: int
    name: str
    owner_id: int
    bot_role_id: int
    roles: dict[int, FakeRole]
    members: dict[int, FakeMember]
    channel_ids: list[int] = field(default_factory=list)
    manager_role_id: int | None = None
    joined_at: str = field(default_factory=_now_iso)
    # Left out of READY and GUILD_CREATE (see FakeDiscord.withhold_guild): never cached.
    withheld: bool = False
    # In an outage (see FakeDiscord.guild_outage): nothing of it reaches the bot.
    unavailable: bool = False

    @property
    def everyone_role(self) -> FakeRole:
        """The ``@everyone`` role (same ID as the guild)."""
        return self.roles[self.id]


# --------------------------------------------------------------------------------------------
# Records of what the bot did
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class UploadedFile:
    """A file the bot uploaded (multipart ``files[n]`` part)."""

    filename: str
    data: bytes
    content_type: str | None
    description: str | None = None


def _walk_custom_ids(components: Sequence[JSON]) -> list[str]:
    found: list[str] = []
    for component in components:
        custom_id = component.get("custom_id")
        if isinstance(custom_id, str):
            found.append(custom_id)
        found.extend(_walk_custom_ids(component.get("components", [])))
        for key in ("accessory", "component"):
            child = component.get(key)
            if isinstance(child, dict):
                found.extend(_walk_custom_ids([child]))
    return found


@dataclass
class SentMessage:
    """A message the bot posted with ``POST /channels/{id}/messages``."""

    id: int
    channel_id: int
    guild_id: int | None
    content: str | None
    embeds: list[JSON]
    components: list[JSON]
    flags: int
    attachments: list[UploadedFile]
    message_reference: JSON | None
    allowed_mentions: JSON | None
    payload: JSON
    at: float

    @property
    def custom_ids(self) -> list[str]:
        """Every ``custom_id`` in the message's components (buttons, selects...)."""
        return _walk_custom_ids(self.components)


@dataclass
class MessageEdit:
    """An edit of an existing message (channel message, @original or a follow-up)."""

    message_id: int
    channel_id: int
    via: Literal["channel", "interaction"]
    payload: JSON
    attachments: list[UploadedFile]
    interaction_id: int | None
    at: float

    @property
    def content(self) -> str | None:
        """The new content, or None when the edit did not touch it."""
        value = self.payload.get("content")
        return value if isinstance(value, str) else None


@dataclass(frozen=True)
class TypingEvent:
    """A ``POST /channels/{id}/typing`` call."""

    channel_id: int
    at: float


@dataclass
class InteractionResponse:
    """The initial response to an interaction (``POST /interactions/{id}/{token}/callback``)."""

    interaction_id: int
    token: str
    type: int
    data: JSON
    attachments: list[UploadedFile]
    message_id: int | None
    at: float

    @property
    def flags(self) -> int:
        """Message flags of the response (``64`` = ephemeral)."""
        return int(self.data.get("flags") or 0)

    @property
    def ephemeral(self) -> bool:
        """Whether only the invoking user sees the response."""
        return bool(self.flags & EPHEMERAL_FLAG)

    @property
    def content(self) -> str | None:
        """The content of a type 4/7 response."""
        value = self.data.get("content")
        return value if isinstance(value, str) else None

    @property
    def embeds(self) -> list[JSON]:
        """Embeds of the response."""
        return list(self.data.get("embeds") or [])

    @property
    def components(self) -> list[JSON]:
        """Components of the response (or of the modal, for type 9)."""
        return list(self.data.get("components") or [])


@dataclass
class Followup:
    """A follow-up message (``POST /webhooks/{application_id}/{token}``).

    The first follow-up after a deferred response (type 5) fills the "thinking..." message
    instead of creating one (``replaced_loading``; ``message_id`` is then the original
    response's), and whether it is ephemeral was decided by the defer: ``flags`` are those of
    the message people see, ``payload`` is what the bot sent.
    """

    interaction_id: int
    token: str
    message_id: int
    channel_id: int
    payload: JSON
    attachments: list[UploadedFile]
    at: float
    message_flags: int = 0
    replaced_loading: bool = False

    @property
    def content(self) -> str | None:
        """The follow-up's content."""
        value = self.payload.get("content")
        return value if isinstance(value, str) else None

    @property
    def flags(self) -> int:
        """Flags of the resulting message (``64`` = ephemeral), not of the request."""
        return self.message_flags

    @property
    def ephemeral(self) -> bool:
        """Whether only the invoking user sees the follow-up."""
        return bool(self.flags & EPHEMERAL_FLAG)

    @property
    def embeds(self) -> list[JSON]:
        """Embeds of the follow-up."""
        return list(self.payload.get("embeds") or [])


@dataclass(frozen=True)
class SyncedCommands:
    """One bulk overwrite of application commands (what ``CommandTree.sync`` sends)."""

    guild_id: int | None
    commands: list[JSON]

    @property
    def names(self) -> list[str]:
        """Top-level command names."""
        return [str(c["name"]) for c in self.commands]


@dataclass(frozen=True)
class UnknownRoute:
    """A request the fake does not implement (answered with 404)."""

    method: str
    path: str
    query: dict[str, str]
    body: str


@dataclass(frozen=True)
class RequestRecord:
    """Every REST request the fake answered, with its status code."""

    method: str
    path: str
    kind: str
    status: int
    error: Any
    """The JSON error body for 4xx/5xx answers, else None."""


@dataclass(frozen=True)
class ReactionRecord:
    """A reaction the bot added (``added=True``) or removed."""

    channel_id: int
    message_id: int
    emoji: str
    added: bool


@dataclass(frozen=True)
class IdentifyRecord:
    """An IDENTIFY received on the gateway."""

    session_id: str
    shard_id: int
    shard_count: int
    intents: int
    token: str
    properties: JSON
    presence: JSON | None
    compression: str | None
    """Transport compression from the URL query (discord.py asks for ``zlib-stream``)."""


@dataclass(frozen=True)
class ResumeRecord:
    """A RESUME (op 6) received on the gateway and whether the session was resumed (else it
    was answered with op 9 INVALID_SESSION ``false``)."""

    session_id: str
    seq: int | None
    accepted: bool


@dataclass(frozen=True)
class DispatchRecord:
    """A DISPATCH (op 0) the fake wrote to a gateway session."""

    session_id: str
    shard_id: int
    event: str
    data: JSON
    seq: int


@dataclass(frozen=True)
class FakeInteraction:
    """An interaction the fake dispatched; tests use it to look up the bot's responses."""

    id: int
    token: str
    type: int
    application_id: int
    channel_id: int
    guild_id: int | None
    user_id: int
    payload: JSON


# --------------------------------------------------------------------------------------------
# Internal helpers
# --------------------------------------------------------------------------------------------


class _ApiError(Exception):
    """Raised by route handlers; becomes a Discord-shaped JSON error response."""

    def __init__(self, status: int, code: int, message: str, *, errors: JSON | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.body: JSON = {"message": message, "code": code}
        if errors is not None:
            self.body["errors"] = errors


def _form_error(field_name: str, code: str, message: str) -> _ApiError:
    """Discord's "Invalid Form Body" error (code 50035) for one field."""
    return _form_error_at((field_name,), code, message)


def _form_error_at(path: Sequence[str | int], code: str, message: str) -> _ApiError:
    """Invalid Form Body for a nested field: Discord nests ``errors`` along the path
    (``embeds.0.fields.1.value``), list indexes as string keys."""
    errors: JSON = {"_errors": [{"code": code, "message": message}]}
    for key in reversed(path):
        errors = {str(key): errors}
    return _ApiError(400, 50035, "Invalid Form Body", errors=errors)


def _too_long(path: Sequence[str | int], limit: int) -> _ApiError:
    return _form_error_at(path, "BASE_TYPE_MAX_LENGTH", f"Must be {limit} or fewer in length.")


def _validate_embeds(embeds: Sequence[Any]) -> None:
    """Refuse what Discord refuses: each documented embed limit, then the 6,000 total."""
    if len(embeds) > MAX_EMBEDS:
        raise _too_long(("embeds",), MAX_EMBEDS)
    total = 0
    for index, embed in enumerate(embeds):
        if not isinstance(embed, dict):
            raise _form_error_at(
                ("embeds", index),
                "MODEL_TYPE_CONVERT",
                "Only dictionaries may be used in a ModelType",
            )
        for key, limit in EMBED_FIELD_LIMITS.items():
            text = str(embed.get(key) or "")
            if len(text) > limit:
                raise _too_long(("embeds", index, key), limit)
            total += len(text)
        fields = embed.get("fields") or []
        if len(fields) > MAX_EMBED_FIELDS:
            raise _too_long(("embeds", index, "fields"), MAX_EMBED_FIELDS)
        for position, embed_field in enumerate(fields):
            for key, limit in (("name", MAX_EMBED_FIELD_NAME), ("value", MAX_EMBED_FIELD_VALUE)):
                text = str(embed_field.get(key) or "")
                if len(text) > limit:
                    raise _too_long(("embeds", index, "fields", position, key), limit)
                total += len(text)
        for part, key, limit in (
            ("footer", "text", MAX_EMBED_FOOTER_TEXT),
            ("author", "name", MAX_EMBED_AUTHOR_NAME),
        ):
            text = str((embed.get(part) or {}).get(key) or "")
            if len(text) > limit:
                raise _too_long(("embeds", index, part, key), limit)
            total += len(text)
    if total > MAX_EMBEDS_TOTAL_CHARS:
        raise _form_error_at(
            ("embeds",),
            "MAX_EMBED_SIZE_EXCEEDED",
            f"Embed size exceeds maximum size of {MAX_EMBEDS_TOTAL_CHARS}",
        )


@dataclass
class _Body:
    json: Any
    files: list[UploadedFile]
    # multipart field name -> file, so "attachments": [{"id": n}] can be matched to files[n]
    files_by_field: dict[str, UploadedFile]


@dataclass
class _Call:
    request: web.Request
    params: dict[str, str]
    body: _Body

    def int_param(self, name: str) -> int:
        return int(self.params[name])

    @property
    def payload(self) -> JSON:
        if isinstance(self.body.json, dict):
            return self.body.json
        return {}


_Handler: TypeAlias = Callable[[_Call], Awaitable[web.StreamResponse]]


@dataclass(frozen=True)
class _Route:
    method: str
    pattern: re.Pattern[str]
    kind: RouteKind
    handler: _Handler
    auth: bool


@dataclass
class _FailureRule:
    kind: RouteKind
    remaining: int
    status: int
    body: JSON
    headers: Callable[[], dict[str, str]]


@dataclass
class _InteractionState:
    interaction: FakeInteraction
    deadline: float | None
    # loop time after which the token no longer works for follow-ups and @original
    token_expires_at: float = float("inf")
    response_type: int | None = None
    original_message_id: int | None = None
    component_message_id: int | None = None
    modal: JSON | None = None


class _Compressor(Protocol):
    def compress(self, data: bytes) -> bytes: ...


class _ZlibStream:
    """``compress=zlib-stream``: one zlib context per connection, Z_SYNC_FLUSH per payload.

    discord.py buffers binary frames until it sees the ``00 00 ff ff`` sync-flush suffix and
    then inflates with a single long-lived decompressor, so we must never reset the context.
    """

    def __init__(self) -> None:
        self._context = zlib.compressobj()

    def compress(self, data: bytes) -> bytes:
        return self._context.compress(data) + self._context.flush(zlib.Z_SYNC_FLUSH)


class _ZstdStream:
    """``compress=zstd-stream`` (discord.py picks it when ``zstandard`` is installed)."""

    def __init__(self) -> None:
        zstandard = importlib.import_module("zstandard")
        self._flush_block: int = zstandard.COMPRESSOBJ_FLUSH_BLOCK
        self._context: Any = zstandard.ZstdCompressor().compressobj()

    def compress(self, data: bytes) -> bytes:
        return bytes(self._context.compress(data) + self._context.flush(self._flush_block))


def _make_compressor(kind: str | None) -> _Compressor | None:
    if kind is None:
        return None
    if kind == "zlib-stream":
        return _ZlibStream()
    if kind == "zstd-stream":
        return _ZstdStream()
    raise FakeDiscordError(f"unsupported gateway compression {kind!r}")


class _GatewaySession:
    """One gateway WebSocket connection (one shard of one client).

    Payloads go through a queue drained by a single writer task so that (a) synchronous code
    such as the model builders can enqueue events and (b) ordering is strictly FIFO, which
    matters because discord.py must see READY and GUILD_CREATE before any MESSAGE_CREATE.
    """

    def __init__(
        self,
        ws: web.WebSocketResponse,
        compressor: _Compressor | None,
        compression: str | None,
        serial: int = 0,
    ) -> None:
        self.ws = ws
        self.compression = compression
        self.serial = serial
        """Order of the connection among all the fake accepted (for reconnect waits)."""
        self.id = secrets.token_hex(16)
        self.seq = 0
        self.shard_id = 0
        self.shard_count = 1
        self.intents = 0
        self.identified = False
        self.ready = False
        self.closed = False
        self.detached = False
        """Dropped by ``disconnect_bot(resumable=True)``: still sequences (and keeps) its
        events, which a RESUME replays."""
        self.history: list[JSON] = []
        """Every dispatch sequenced on this session, for a RESUME to replay."""
        self._compressor = compressor
        self._queue: asyncio.Queue[JSON | None] = asyncio.Queue()
        self._writer = asyncio.create_task(self._write_loop(), name=f"fake-gateway-{self.id}")

    def owns(self, guild_id: int | None) -> bool:
        """Whether events for this guild (``None`` = DMs, always shard 0) go to this session."""
        if guild_id is None:
            return self.shard_id == 0
        return (guild_id >> 22) % self.shard_count == self.shard_id

    def send(self, op: int, data: Any, event: str | None = None) -> int:
        """Queue a payload; returns its sequence number (0 for non-dispatch opcodes)."""
        seq = 0
        payload: JSON = {"op": op, "d": data, "s": None, "t": None}
        if event is not None:
            self.seq += 1
            seq = self.seq
            payload["s"] = seq
            payload["t"] = event
            self.history.append(payload)
        if not self.closed:
            self._queue.put_nowait(payload)
        return seq

    def replay(self, payload: JSON) -> None:
        """Queue an already sequenced dispatch again (a RESUME replaying missed events)."""
        if not self.closed:
            self._queue.put_nowait(payload)

    async def flush(self) -> None:
        """Wait until everything queued so far has been written to the socket."""
        await self._queue.join()

    async def _write_loop(self) -> None:
        while True:
            item = await self._queue.get()
            try:
                if item is None:
                    return
                if self.closed:
                    continue
                raw = json.dumps(item, separators=(",", ":"))
                try:
                    if self._compressor is not None:
                        await self.ws.send_bytes(self._compressor.compress(raw.encode()))
                    else:
                        await self.ws.send_str(raw)
                except (ConnectionError, RuntimeError):
                    # The client went away mid-write; drop the rest instead of crashing.
                    self.closed = True
            finally:
                self._queue.task_done()

    async def shutdown(self, *, code: int | None = None, message: str = "") -> None:
        """Stop the writer and optionally close the socket with a gateway close code."""
        if code is not None and not self.ws.closed:
            # Flush first so e.g. a HELLO before a 4004 close still reaches the client.
            await self.flush()
        self.closed = True
        self._queue.put_nowait(None)
        await self._writer
        if code is not None and not self.ws.closed:
            await self.ws.close(code=code, message=message.encode())


C = TypeVar("C", bound="discord.Client")


# --------------------------------------------------------------------------------------------
# The fake
# --------------------------------------------------------------------------------------------


class FakeDiscord:
    """A local Discord: REST API under ``/api/v10``, gateway at ``/gateway``.

    Build the world with ``add_*`` (before or after a client connects; after, the matching
    gateway events are dispatched), drive users with ``send_message``/``send_dm``/
    ``invoke_command``/``click_button``, and inspect what the bot did through the record lists
    and ``wait_for_*`` helpers.
    """

    def __init__(
        self,
        *,
        bot_user_id: int | None = None,
        application_id: int | None = None,
        bot_name: str = "memorybot",
        valid_token: str | None = None,
        enabled_privileged_intents: int = int(PRIVILEGED_INTENTS),
        recommended_shards: int = 1,
        heartbeat_interval_ms: int = 41_250,
        interaction_ack_timeout: float | None = INTERACTION_ACK_TIMEOUT,
        echo_bot_messages: bool = True,
    ) -> None:
        """Configure the fake; nothing listens until :meth:`start`.

        Args:
            bot_user_id: The bot's user ID (generated if omitted).
            application_id: The application ID; for bots Discord uses the bot user ID.
            bot_name: The bot's username.
            valid_token: The only token accepted; any other gives 401 / ``LoginFailure``.
            enabled_privileged_intents: Privileged intents "enabled in the developer portal";
                identifying with others closes the gateway with 4014.
            recommended_shards: ``shards`` returned by ``GET /gateway/bot``.
            heartbeat_interval_ms: Interval announced in HELLO.
            interaction_ack_timeout: Seconds the bot has to answer an interaction (Discord: 3);
                ``None`` disables the check.
            echo_bot_messages: Dispatch MESSAGE_CREATE/UPDATE/DELETE for the bot's own
                non-ephemeral messages, as Discord does.
        """
        self._ids = SnowflakeGenerator()
        self.bot_user = FakeUser(id=bot_user_id or self._ids.next(), name=bot_name, bot=True)
        self.application_id: int = application_id or self.bot_user.id
        self.valid_token: str = valid_token or self._make_token(self.bot_user.id)
        self.enabled_privileged_intents = enabled_privileged_intents
        self.recommended_shards = recommended_shards
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.interaction_ack_timeout = interaction_ack_timeout
        self.interaction_token_lifetime = INTERACTION_TOKEN_LIFETIME
        self.echo_bot_messages = echo_bot_messages

        self.app_owner = FakeUser(id=self._ids.next(), name="app-owner")
        self.users: dict[int, FakeUser] = {
            self.bot_user.id: self.bot_user,
            self.app_owner.id: self.app_owner,
        }
        self.guilds: dict[int, FakeGuild] = {}
        self.channels: dict[int, FakeChannel] = {}
        self.messages: dict[int, JSON] = {}
        """Every message the fake knows (REST-shaped payloads), by ID."""
        self._dm_by_user: dict[int, int] = {}
        self.user_installs: set[int] = set()
        """Users who installed the app to their account (USER_INSTALL)."""
        self._attachments: dict[tuple[int, int], bytes] = {}
        self._interactions: dict[int, _InteractionState] = {}
        self._interactions_by_token: dict[str, _InteractionState] = {}
        # scope (None = global) -> (command type, name) -> stored command: names are unique
        # per type and scope, so a slash command and a message command may share one.
        self._commands: dict[int | None, dict[tuple[int, str], JSON]] = {}
        self._command_ids: dict[tuple[int | None, int, str], int] = {}
        # poll message ID -> answer ID -> IDs of the users who voted for it
        self._poll_votes: dict[int, dict[int, set[int]]] = {}

        # Records ------------------------------------------------------------------------
        self.sent_messages: list[SentMessage] = []
        self.edits: list[MessageEdit] = []
        self.deleted_messages: list[tuple[int, int]] = []
        """``(channel_id, message_id)`` of messages the bot deleted."""
        self.typing: list[TypingEvent] = []
        self.reactions: list[ReactionRecord] = []
        self.interaction_responses: list[InteractionResponse] = []
        self.followups: list[Followup] = []
        self.synced_commands: list[SyncedCommands] = []
        self.unknown_routes: list[UnknownRoute] = []
        self.requests: list[RequestRecord] = []
        self.identifies: list[IdentifyRecord] = []
        self.resumes: list[ResumeRecord] = []
        self.dispatched: list[DispatchRecord] = []
        self.presence_updates: list[JSON] = []
        self.interactions: list[FakeInteraction] = []

        # Failure injection ----------------------------------------------------------------
        self._failures: list[_FailureRule] = []
        self._forbidden_channels: set[int] = set()

        # Server ------------------------------------------------------------------------------
        self._sessions: list[_GatewaySession] = []
        self._session_serial = 0
        # disconnect_bot(): READY / RESUMED wait until wait_for_reconnect() (the bot is away)
        self._hold_gateway = False
        self._held: list[tuple[_GatewaySession, Callable[[], None]]] = []
        self._dropped_shards: set[tuple[int, int]] = set()
        self._drop_serial = 0
        self._waiters: set[asyncio.Future[None]] = set()
        self._runner: web.AppRunner | None = None
        self._port: int | None = None
        self._patch_stack: contextlib.ExitStack | None = None
        self._routes = self._build_routes()

    # ------------------------------------------------------------------ lifecycle & patching

    @staticmethod
    def _make_token(user_id: int) -> str:
        # Same three-part shape as real bot tokens: base64(user id).timestamp.hmac
        head = base64.b64encode(str(user_id).encode()).decode().rstrip("=")
        return f"{head}.{secrets.token_urlsafe(4)}.{secrets.token_urlsafe(27)}"

    @property
    def port(self) -> int:
        """The ephemeral TCP port (only after :meth:`start`)."""
        if self._port is None:
            raise FakeDiscordError("the fake is not running; await fake.start() first")
        return self._port

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:{port}``."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def api_base(self) -> str:
        """Value for ``discord.http.Route.BASE``."""
        return f"{self.base_url}/api/v10"

    @property
    def gateway_url(self) -> str:
        """Value for ``DiscordWebSocket.DEFAULT_GATEWAY`` and ``GET /gateway/bot``."""
        return f"ws://127.0.0.1:{self.port}/gateway/"

    async def start(self) -> None:
        """Start listening on 127.0.0.1 with an ephemeral port (does not patch discord.py)."""
        if self._runner is not None:
            return
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        # A short shutdown timeout: gateway handlers are closed explicitly in stop().
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=2.0)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        self._runner = runner
        self._port = int(runner.addresses[0][1])

    async def stop(self) -> None:
        """Close gateway sessions and stop the server. Close your clients first.

        A client still connected at this point sees its socket closed and will try to
        reconnect to a server that is gone.
        """
        for session in list(self._sessions):
            await session.shutdown(code=4000, message="fake server stopping")
        self._sessions.clear()
        for waiter in self._waiters:
            if not waiter.done():
                waiter.cancel()
        self._waiters.clear()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    @contextlib.contextmanager
    def patch_client(self) -> Iterator[None]:
        """Point discord.py at this fake for the duration of the ``with`` block.

        Sets ``Route.BASE``, ``DiscordWebSocket.DEFAULT_GATEWAY`` and ``Asset.BASE`` and
        restores the previous values afterwards. These are class attributes, so this affects
        every client in the process: run one fake at a time.
        """
        from discord.asset import Asset
        from discord.gateway import DiscordWebSocket
        from discord.http import Route

        saved = (Route.BASE, DiscordWebSocket.DEFAULT_GATEWAY, Asset.BASE)
        Route.BASE = self.api_base
        DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(self.gateway_url)
        Asset.BASE = f"{self.base_url}/cdn"
        try:
            yield
        finally:
            Route.BASE, DiscordWebSocket.DEFAULT_GATEWAY, Asset.BASE = saved

    async def __aenter__(self) -> FakeDiscord:
        """Start the server and patch discord.py; undone by ``__aexit__``."""
        await self.start()
        stack = contextlib.ExitStack()
        stack.enter_context(self.patch_client())
        self._patch_stack = stack
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._patch_stack is not None:
            self._patch_stack.close()
            self._patch_stack = None
        await self.stop()

    @contextlib.asynccontextmanager
    async def running(
        self, client: C, *, token: str | None = None, timeout: float = 10.0
    ) -> AsyncIterator[C]:
        """Run ``client.start(token)`` in the background until ``on_ready``; close on exit.

        Tip: pass ``guild_ready_timeout=0.05`` to the client; discord.py otherwise waits 2 s
        after the last GUILD_CREATE before firing ``on_ready``.
        """
        task = asyncio.create_task(client.start(token or self.valid_token), name="discord-client")
        # One loop iteration lets start() run login()'s synchronous prologue, which creates
        # the client's ready event; wait_until_ready() raises if called before that.
        await asyncio.sleep(0)
        ready = asyncio.create_task(client.wait_until_ready(), name="discord-client-ready")
        body_failed = True  # start-up errors and test failures must not be masked below
        try:
            done, _ = await asyncio.wait(
                {task, ready}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
            )
            if task in done:
                task.result()  # re-raises LoginFailure, PrivilegedIntentsRequired, ...
                raise FakeDiscordError("client.start() returned before the client was ready")
            if ready not in done:
                held = (
                    " (disconnect_bot() holds READY back until wait_for_reconnect())"
                    if self._hold_gateway
                    else ""
                )
                raise FakeDiscordTimeout(
                    f"client not ready after {timeout}s{held}; identifies={self.identifies!r}, "
                    f"unknown_routes={self.unknown_routes!r}"
                )
            yield client
            body_failed = False
        finally:
            ready.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await ready
            await client.close()
            crash: BaseException | None = None
            if not task.done():
                try:
                    await asyncio.wait_for(task, timeout=timeout)
                except Exception as exc:
                    crash = exc
            elif not task.cancelled():
                crash = task.exception()  # also marks the exception as retrieved
            # A client that died while the test ran (e.g. a gateway close code it cannot
            # recover from) is a failure even if the test's own assertions passed.
            if crash is not None and not body_failed:
                raise crash

    # ------------------------------------------------------------------ model builders

    def new_id(self) -> int:
        """A fresh realistic snowflake."""
        return self._ids.next()

    def add_user(
        self, user_id: int | None = None, name: str | None = None, *, bot: bool = False
    ) -> FakeUser:
        """Register a user (idempotent for an existing ID)."""
        if user_id is not None and user_id in self.users:
            return self.users[user_id]
        uid = user_id or self._ids.next()
        user = FakeUser(id=uid, name=name or f"user{len(self.users)}", bot=bot)
        self.users[uid] = user
        return user

    def add_guild(
        self,
        *,
        name: str = "Test Guild",
        guild_id: int | None = None,
        owner_id: int | None = None,
        bot_permissions: int = DEFAULT_BOT_PERMISSIONS,
        everyone_permissions: int = DEFAULT_EVERYONE_PERMISSIONS,
        for_shard: tuple[int, int] | None = None,
    ) -> FakeGuild:
        """Create a guild the bot is in, with ``@everyone``, the bot's managed role and an owner.

        Args:
            name: Guild name.
            guild_id: Explicit ID (otherwise generated).
            owner_id: Owner's user ID; an owner user is created when omitted.
            bot_permissions: Permissions of the bot's managed role.
            everyone_permissions: Permissions of ``@everyone``.
            for_shard: ``(shard_id, shard_count)``: generate an ID owned by that shard.
        """
        gid = guild_id or self._ids.next(shard=for_shard)
        owner = self.add_user(owner_id, None if owner_id else f"owner-of-{name}")
        joined = _now_iso()
        everyone = FakeRole(
            id=gid, guild_id=gid, name="@everyone", permissions=everyone_permissions
        )
        bot_role = FakeRole(
            id=self._ids.next(),
            guild_id=gid,
            name=self.bot_user.name,
            permissions=bot_permissions,
            position=1,
            managed=True,
            bot_id=self.bot_user.id,
        )
        guild = FakeGuild(
            id=gid,
            name=name,
            owner_id=owner.id,
            bot_role_id=bot_role.id,
            roles={everyone.id: everyone, bot_role.id: bot_role},
            members={},
        )
        guild.members[self.bot_user.id] = FakeMember(
            guild_id=gid, user=self.bot_user, role_ids=[bot_role.id], joined_at=joined
        )
        guild.members[owner.id] = FakeMember(
            guild_id=gid, user=owner, role_ids=[], joined_at=joined
        )
        self.guilds[gid] = guild
        for session in self._live_sessions(gid):
            if not session.intents & Intent.GUILDS:
                continue
            session_payload = self._guild_create_payload(guild, session, new_join=True)
            self._send_dispatch(session, "GUILD_CREATE", session_payload)
        return guild

    def withhold_guild(self, guild_id: int) -> None:
        """Sessions that identify from now on get no READY entry and no GUILD_CREATE for this
        guild, while its messages are still dispatched: discord.py never caches the guild and
        its messages arrive on a PartialMessageable with ``message.guild`` None, as when a
        client's guild cache missed it (its guild events were lost or it was evicted)."""
        self.guilds[guild_id].withheld = True

    def add_role(
        self,
        guild_id: int,
        name: str,
        *,
        permissions: int = 0,
        role_id: int | None = None,
        color: int = 0,
    ) -> FakeRole:
        """Add a role to a guild (dispatches GUILD_ROLE_CREATE when connected)."""
        guild = self._guild(guild_id)
        role = FakeRole(
            id=role_id or self._ids.next(),
            guild_id=guild_id,
            name=name,
            permissions=permissions,
            position=len(guild.roles),
            color=color,
        )
        guild.roles[role.id] = role
        self._dispatch(
            "GUILD_ROLE_CREATE",
            {"guild_id": str(guild_id), "role": role.to_payload()},
            guild_id=guild_id,
            intent=Intent.GUILDS,
        )
        return role

    def add_member(
        self,
        guild_id: int,
        user_id: int | None = None,
        name: str | None = None,
        *,
        manage_guild: bool = False,
        roles: Sequence[int] = (),
        nick: str | None = None,
        bot: bool = False,
    ) -> FakeMember:
        """Add a user to a guild.

        Args:
            guild_id: The guild.
            user_id: Existing or new user ID (generated if omitted).
            name: Username for a new user.
            manage_guild: Give the member a "Manager" role with MANAGE_GUILD.
            roles: Extra role IDs (create them with :meth:`add_role`).
            nick: Guild nickname.
            bot: Whether a newly created user is a bot.
        """
        guild = self._guild(guild_id)
        user = self.add_user(user_id, name, bot=bot)
        role_ids = list(roles)
        for rid in role_ids:
            if rid not in guild.roles:
                raise FakeDiscordError(f"role {rid} is not in guild {guild_id}")
        if manage_guild:
            if guild.manager_role_id is None:
                guild.manager_role_id = self.add_role(
                    guild_id, "Manager", permissions=int(Permission.MANAGE_GUILD)
                ).id
            role_ids.append(guild.manager_role_id)
        member = FakeMember(
            guild_id=guild_id, user=user, role_ids=role_ids, joined_at=_now_iso(), nick=nick
        )
        guild.members[user.id] = member
        self._dispatch(
            "GUILD_MEMBER_ADD",
            {**member.to_payload(), "guild_id": str(guild_id)},
            guild_id=guild_id,
            intent=Intent.GUILD_MEMBERS,
        )
        return member

    def _add_guild_channel(
        self,
        guild_id: int,
        name: str,
        channel_type: ChannelType,
        *,
        topic: str | None,
        overwrites: Sequence[PermissionOverwrite],
        channel_id: int | None,
        available_tags: Sequence[FakeForumTag] = (),
    ) -> FakeChannel:
        guild = self._guild(guild_id)
        channel = FakeChannel(
            id=channel_id or self._ids.next(),
            type=channel_type,
            name=name,
            guild_id=guild_id,
            position=len(guild.channel_ids),
            topic=topic,
            overwrites=list(overwrites),
            available_tags=list(available_tags),
        )
        self.channels[channel.id] = channel
        guild.channel_ids.append(channel.id)
        self._dispatch(
            "CHANNEL_CREATE",
            self._channel_payload(channel),
            guild_id=guild_id,
            intent=Intent.GUILDS,
        )
        return channel

    def add_text_channel(
        self,
        guild_id: int,
        name: str,
        *,
        topic: str | None = None,
        overwrites: Sequence[PermissionOverwrite] = (),
        channel_id: int | None = None,
    ) -> FakeChannel:
        """Add a text channel (dispatches CHANNEL_CREATE when connected).

        ``overwrites`` feed both discord.py's ``permissions_for`` and the ``permissions``
        strings the fake puts into interactions.
        """
        return self._add_guild_channel(
            guild_id,
            name,
            ChannelType.GUILD_TEXT,
            topic=topic,
            overwrites=overwrites,
            channel_id=channel_id,
        )

    def add_forum(
        self,
        guild_id: int,
        name: str,
        *,
        topic: str | None = None,
        overwrites: Sequence[PermissionOverwrite] = (),
        channel_id: int | None = None,
        tags: Sequence[str | Mapping[str, Any]] = (),
    ) -> FakeChannel:
        """Add a forum channel (type 15); its posts are threads made with :meth:`add_thread`.

        ``tags`` become its ``available_tags`` (discord.py: ``ForumChannel.available_tags``):
        a name, or a mapping with ``name`` and optionally ``moderated`` (only members who may
        manage threads apply it), ``emoji_name`` (unicode) or ``emoji_id`` (custom), at most
        one of the two. Discord allows 20 tags of up to 20 characters.
        """
        available = [self._forum_tag(spec) for spec in tags]
        if len(available) > MAX_FORUM_TAGS:
            raise FakeDiscordError(f"a forum has at most {MAX_FORUM_TAGS} tags")
        names = [t.name for t in available]
        if len(set(names)) != len(names):
            raise FakeDiscordError(f"forum tag names must be unique: {names}")
        return self._add_guild_channel(
            guild_id,
            name,
            ChannelType.GUILD_FORUM,
            topic=topic,
            overwrites=overwrites,
            channel_id=channel_id,
            available_tags=available,
        )

    def _forum_tag(self, spec: str | Mapping[str, Any]) -> FakeForumTag:
        fields: Mapping[str, Any] = {"name": spec} if isinstance(spec, str) else spec
        if unknown := set(fields) - {"name", "moderated", "emoji_id", "emoji_name"}:
            raise FakeDiscordError(f"unknown forum tag fields {sorted(unknown)}")
        name = str(fields.get("name") or "")
        if not 1 <= len(name) <= MAX_FORUM_TAG_NAME:
            raise FakeDiscordError(f"a forum tag name has 1-{MAX_FORUM_TAG_NAME} characters")
        emoji_id = fields.get("emoji_id")
        emoji_name = fields.get("emoji_name")
        if emoji_id is not None and emoji_name is not None:
            raise FakeDiscordError("at most one of emoji_id and emoji_name may be set")
        return FakeForumTag(
            id=self._ids.next(),
            name=name,
            moderated=bool(fields.get("moderated", False)),
            emoji_id=None if emoji_id is None else int(emoji_id),
            emoji_name=None if emoji_name is None else str(emoji_name),
        )

    def add_thread(
        self,
        parent_id: int,
        name: str,
        *,
        owner_id: int | None = None,
        private: bool = False,
        archived: bool = False,
        thread_id: int | None = None,
        members: Sequence[int] = (),
        applied_tags: Sequence[str | int] = (),
    ) -> FakeChannel:
        """Add a thread under a text channel, or a post under a forum (dispatches THREAD_CREATE).

        ``archived=True`` stands for an old thread that was archived before the test: it is
        not part of GUILD_CREATE, like on Discord, and no THREAD_CREATE announces it, so
        discord.py never caches it (its messages can still be fetched, and message commands
        still run on them). ``members`` (user IDs; the owner always is one) matter for private
        threads: the bot receives their messages only as a member or with Manage Threads.
        ``applied_tags`` (names or IDs of the forum's tags, at most 5) tag a forum post; a
        moderated tag needs an owner who may manage threads.
        """
        parent = self._channel(parent_id)
        if parent.guild_id is None or parent.type not in (
            ChannelType.GUILD_TEXT,
            ChannelType.GUILD_FORUM,
        ):
            raise FakeDiscordError(f"channel {parent_id} cannot have threads")
        if private and parent.type is ChannelType.GUILD_FORUM:
            raise FakeDiscordError("forum posts are always public threads")
        owner = owner_id or self.guilds[parent.guild_id].owner_id
        thread = FakeChannel(
            id=thread_id or self._ids.next(),
            type=ChannelType.PRIVATE_THREAD if private else ChannelType.PUBLIC_THREAD,
            name=name,
            guild_id=parent.guild_id,
            parent_id=parent.id,
            owner_id=owner,
            archived=archived,
            applied_tags=self._resolve_applied_tags(parent, applied_tags, owner),
        )
        thread.member_ids = {*members} if thread.owner_id is None else {thread.owner_id, *members}
        self.channels[thread.id] = thread
        if not archived:
            self._dispatch_thread_create(thread, newly_created=True)
        return thread

    def _resolve_applied_tags(
        self, parent: FakeChannel, wanted: Sequence[str | int], user_id: int
    ) -> list[int]:
        """Tag names or IDs -> IDs of ``parent``'s available tags (only forum posts have
        tags; at most 5; moderated ones only by someone who may manage threads)."""
        if not wanted:
            return []
        if parent.type is not ChannelType.GUILD_FORUM:
            raise FakeDiscordError("only forum posts have tags")
        if len(wanted) > MAX_APPLIED_TAGS:
            raise FakeDiscordError(f"a post has at most {MAX_APPLIED_TAGS} tags")
        by_key: dict[str | int, FakeForumTag] = {}
        for tag in parent.available_tags:
            by_key[tag.id] = by_key[tag.name] = tag
        resolved: list[int] = []
        assert parent.guild_id is not None
        may_moderate = bool(
            self.permissions_for(parent.guild_id, user_id, parent.id) & Permission.MANAGE_THREADS
        )
        for key in wanted:
            found = by_key.get(key)
            if found is None:
                raise FakeDiscordError(
                    f"forum {parent.id} has no tag {key!r}; it has "
                    f"{[t.name for t in parent.available_tags]}"
                )
            if found.moderated and not may_moderate:
                raise FakeDiscordError(f"tag {found.name!r} is moderated: it needs Manage Threads")
            if found.id not in resolved:
                resolved.append(found.id)
        return resolved

    def join_thread(self, thread_id: int, user_id: int) -> None:
        """Make a user (the bot: ``fake.bot_user.id``) a member of a thread.

        The bot being added gets THREAD_CREATE (without ``newly_created``: discord.py's
        ``on_thread_join``) and THREAD_MEMBERS_UPDATE, as Discord sends whenever the current
        user is added to a thread; for a private thread that is when the bot first hears of it.
        """
        thread = self._channel(thread_id)
        if not thread.is_thread:
            raise FakeDiscordError(f"channel {thread_id} is not a thread")
        if user_id in thread.member_ids:
            return
        thread.member_ids.add(user_id)
        if user_id != self.bot_user.id:
            return
        self._dispatch_thread_create(thread, newly_created=False)
        added = {
            "id": str(thread.id),
            "user_id": str(user_id),
            "join_timestamp": _now_iso(),
            "flags": 0,
        }
        self._dispatch(
            "THREAD_MEMBERS_UPDATE",
            {
                "id": str(thread.id),
                "guild_id": str(thread.guild_id),
                "member_count": min(len(thread.member_ids), 50),
                "added_members": [added],
            },
            guild_id=thread.guild_id,
            intent=Intent.GUILDS,
        )

    def _dispatch_thread_create(self, thread: FakeChannel, *, newly_created: bool) -> None:
        """THREAD_CREATE goes only to who may see the thread: View Channel on its parent, and
        for a private thread membership or Manage Threads ("sent when a thread is created,
        relevant to the current user, or when the current user is added to a thread")."""
        if not self._bot_receives_messages_of(thread):
            return
        payload = self._channel_payload(thread)
        if newly_created:
            payload["newly_created"] = True
        self._dispatch("THREAD_CREATE", payload, guild_id=thread.guild_id, intent=Intent.GUILDS)

    async def start_forum_post(
        self,
        forum_id: int,
        name: str,
        *,
        author_id: int,
        content: str,
        applied_tags: Sequence[str | int] = (),
        timeout: float = 5.0,
    ) -> tuple[FakeChannel, JSON]:
        """A member starts a post in a forum: the post (a thread: THREAD_CREATE) and its
        first message, which shares the post's id ("the ID of the thread's first message is
        the same as the thread's ID", Threads: Forums), MESSAGE_CREATE after it."""
        post = self.add_thread(forum_id, name, owner_id=author_id, applied_tags=applied_tags)
        author = self._author_in(post, author_id)
        await self._before_user_event(post, while_away=False, timeout=timeout)
        message = self._new_message(
            channel=post, author=author, content=content, message_id=post.id
        )
        await self._deliver_user_event("MESSAGE_CREATE", message, while_away=False)
        return post, message

    def archive_thread(self, thread_id: int) -> None:
        """A thread (or forum post) is archived (by hand, or by its auto-archive duration):
        THREAD_UPDATE with ``thread_metadata.archived`` true, to who may see it. discord.py
        then drops it from its cache (``parse_thread_update``); its messages stay, and a
        message command can still be used on them."""
        thread = self._channel(thread_id)
        if not thread.is_thread:
            raise FakeDiscordError(f"channel {thread_id} is not a thread")
        thread.archived = True
        if self._bot_receives_messages_of(thread):
            payload = self._channel_payload(thread)
            self._dispatch("THREAD_UPDATE", payload, guild_id=thread.guild_id, intent=Intent.GUILDS)

    def delete_channel(self, channel_id: int) -> None:
        """Someone deletes a guild channel: a text channel, a forum, a thread or a forum post.

        A text channel or forum: CHANNEL_DELETE with the channel object (``on_guild_channel_
        delete``), to every session with the GUILDS intent (bots are told of every channel of a
        guild, GUILD_CREATE lists even those they cannot view). Its threads and posts vanish
        with it, and Discord sends *nothing* for them (no THREAD_DELETE: discord.py drops the
        parent's cached threads itself and fires ``on_thread_delete`` / ``on_raw_thread_delete``
        for each; discord.js and Javacord maintainers confirm the gateway sends none).

        A thread or post: see :meth:`delete_thread`.

        Afterwards the channel and its messages are gone: REST calls on it answer 404
        Unknown Channel (10003).
        """
        channel = self._channel(channel_id)
        if channel.guild_id is None:
            raise FakeDiscordError("only guild channels are deleted (a DM is closed, not deleted)")
        if channel.is_thread:
            self.delete_thread(channel_id)
            return
        guild = self.guilds[channel.guild_id]
        self._dispatch(
            "CHANNEL_DELETE",
            self._channel_payload(channel),
            guild_id=guild.id,
            intent=Intent.GUILDS,
        )
        for thread in [c for c in self.channels.values() if c.parent_id == channel.id]:
            self._forget_channel(thread)
        self._forget_channel(channel)
        guild.channel_ids.remove(channel.id)

    def delete_thread(self, thread_id: int) -> None:
        """Someone deletes a thread or a forum post: THREAD_DELETE with only ``id``,
        ``guild_id``, ``parent_id`` and ``type`` (Gateway Events, Thread Delete), sent only
        where the thread is "relevant": to a bot that may view it (for a private thread: a
        member, or one who may manage threads), like THREAD_CREATE. discord.py fires
        ``on_raw_thread_delete`` always and ``on_thread_delete`` if it had the thread cached
        (it never has an archived one)."""
        thread = self._channel(thread_id)
        if not thread.is_thread:
            raise FakeDiscordError(f"channel {thread_id} is not a thread; use delete_channel()")
        if self._bot_receives_messages_of(thread):
            self._dispatch(
                "THREAD_DELETE",
                {
                    "id": str(thread.id),
                    "guild_id": str(thread.guild_id),
                    "parent_id": str(thread.parent_id),
                    "type": int(thread.type),
                },
                guild_id=thread.guild_id,
                intent=Intent.GUILDS,
            )
        self._forget_channel(thread)

    def _forget_channel(self, channel: FakeChannel) -> None:
        """Drop a deleted channel and every message in it."""
        del self.channels[channel.id]
        self._forbidden_channels.discard(channel.id)
        for mid in [m for m, msg in self.messages.items() if int(msg["channel_id"]) == channel.id]:
            del self.messages[mid]
            self._poll_votes.pop(mid, None)

    def remove_bot_from_guild(self, guild_id: int) -> None:
        """The bot is kicked (or leaves): GUILD_DELETE ``{"id"}`` *without* ``unavailable``,
        which discord.py reads as removal (``on_guild_remove``, the guild leaves its cache).

        The guild goes on without the bot: nothing of it is dispatched any more, a new
        session's READY leaves it out, and the bot's REST calls on its channels and on the
        guild answer 403 Missing Access (50001), as Discord answers for a guild the bot is not
        in (a deleted channel would be 404 Unknown Channel). Its commands are no longer offered
        there through the guild install.
        """
        guild = self._guild(guild_id)
        if not self._bot_in(guild):
            raise FakeDiscordError(f"the bot is not in guild {guild_id}")
        self._dispatch_guild_state("GUILD_DELETE", {"id": str(guild_id)}, guild)
        del guild.members[self.bot_user.id]
        guild.unavailable = False

    def guild_outage(self, guild_id: int) -> None:
        """A Discord outage makes the guild unavailable: GUILD_DELETE ``{"id", "unavailable":
        true}`` (discord.py: ``on_guild_unavailable``; the guild stays cached, marked
        ``unavailable``). Until :meth:`end_guild_outage` nothing of it is dispatched, a new
        session gets that GUILD_DELETE instead of its GUILD_CREATE ("guilds that are
        unavailable due to an outage will send a Guild Delete event"), and users cannot act
        in it (the user-side helpers raise)."""
        guild = self._guild(guild_id)
        if not self._bot_in(guild):
            raise FakeDiscordError(f"the bot is not in guild {guild_id}")
        if guild.unavailable:
            raise FakeDiscordError(f"guild {guild_id} is already unavailable")
        self._dispatch_guild_state(
            "GUILD_DELETE", {"id": str(guild_id), "unavailable": True}, guild
        )
        guild.unavailable = True

    def end_guild_outage(self, guild_id: int) -> None:
        """The outage is over: GUILD_CREATE with the whole guild and ``"unavailable": false``
        (discord.py: ``on_guild_available``)."""
        guild = self._guild(guild_id)
        if not guild.unavailable:
            raise FakeDiscordError(f"guild {guild_id} is not in an outage")
        guild.unavailable = False
        if guild.withheld:
            return
        for session in self._live_sessions(guild.id):
            if session.intents & Intent.GUILDS:
                self._send_dispatch(
                    session, "GUILD_CREATE", self._guild_create_payload(guild, session)
                )

    def _dispatch_guild_state(self, event: str, payload: JSON, guild: FakeGuild) -> None:
        """GUILD_DELETE (removal or outage) reaches the guild's sessions whatever its state."""
        for session in self._live_sessions(guild.id):
            if session.intents & Intent.GUILDS:
                self._send_dispatch(session, event, copy.deepcopy(payload))

    def _bot_in(self, guild: FakeGuild) -> bool:
        return self.bot_user.id in guild.members

    def register_commands(self, commands: Sequence[JSON], *, guild_id: int | None = None) -> None:
        """Set-up: application commands registered before the test, as an earlier sync left
        them (Discord keeps them across restarts). Not recorded in ``synced_commands``.

        Validated as a sync is (e.g. a context menu with a description is refused):
        :class:`FakeDiscordError` with Discord's error body."""
        for command in commands:
            try:
                self._store_command(guild_id, dict(command))
            except _ApiError as exc:
                raise FakeDiscordError(f"Discord would refuse {command!r}: {exc.body}") from None

    def dm_channel_id(self, user_id: int) -> int:
        """The DM channel between the bot and a user (created on first use)."""
        user = self.add_user(user_id)
        existing = self._dm_by_user.get(user.id)
        if existing is not None:
            return existing
        channel = FakeChannel(
            id=self._ids.next(),
            type=ChannelType.DM,
            name=None,
            guild_id=None,
            recipient_ids=[user.id],
        )
        self.channels[channel.id] = channel
        self._dm_by_user[user.id] = channel.id
        return channel.id

    def add_group_dm(self, user_ids: Sequence[int], *, name: str | None = None) -> FakeChannel:
        """A group DM between people (never the bot: bots cannot be in group DMs). Commands
        reach it only from a user-installed app (see :meth:`install_for_user`), in the
        PRIVATE_CHANNEL context."""
        if self.bot_user.id in user_ids:
            raise FakeDiscordError("bots cannot be added to group DMs")
        channel = FakeChannel(
            id=self._ids.next(),
            type=ChannelType.GROUP_DM,
            name=name,
            guild_id=None,
            owner_id=user_ids[0] if user_ids else None,
            recipient_ids=[self.add_user(uid).id for uid in user_ids],
        )
        self.channels[channel.id] = channel
        return channel

    def install_for_user(self, user_id: int) -> None:
        """The user installs the app to their account (USER_INSTALL): its commands whose
        ``integration_types`` include 1 follow them into group DMs and other servers."""
        self.user_installs.add(self.add_user(user_id).id)

    # ------------------------------------------------------------------ failure injection

    def rate_limit_next(
        self,
        route_kind: RouteKind = "messages",
        *,
        count: int = 1,
        retry_after: float = 0.2,
        is_global: bool = False,
    ) -> None:
        """Answer the next ``count`` requests of that kind with HTTP 429.

        The response carries what discord.py needs to wait and retry: a ``Via`` header
        (without it discord.py assumes a Cloudflare ban and raises), ``retry_after`` and
        ``global`` in the JSON body, and the ``X-RateLimit-*`` / ``Retry-After`` headers.
        """
        bucket = self._bucket_hash(route_kind)

        def headers() -> dict[str, str]:
            # Computed per response so X-RateLimit-Reset is relative to when it is sent.
            values = {
                "Retry-After": str(max(1, math.ceil(retry_after))),
                "X-RateLimit-Limit": "5",
                "X-RateLimit-Remaining": "0",
                "X-RateLimit-Reset": f"{time.time() + retry_after:.3f}",
                "X-RateLimit-Reset-After": f"{retry_after:.3f}",
                "X-RateLimit-Bucket": bucket,
                "X-RateLimit-Scope": "global" if is_global else "user",
            }
            if is_global:
                values["X-RateLimit-Global"] = "true"
            return values

        body = {
            "message": "You are being rate limited.",
            "retry_after": retry_after,
            "global": is_global,
        }
        self._failures.append(_FailureRule(route_kind, count, 429, body, headers))

    def fail_next(
        self,
        route_kind: RouteKind = "messages",
        *,
        status: int = 500,
        code: int = 0,
        message: str = "500: Internal Server Error",
        count: int = 1,
    ) -> None:
        """Answer the next ``count`` requests of that kind with an arbitrary error.

        Note that discord.py retries 500/502/504 itself, sleeping 1 s, 3 s, ... in between.
        """
        body = {"message": message, "code": code}
        self._failures.append(_FailureRule(route_kind, count, status, body, dict))

    def forbid_channel(self, channel_id: int) -> None:
        """Make posting, editing, typing and reacting in a channel fail with 403 / 50013."""
        self._forbidden_channels.add(channel_id)

    def allow_channel(self, channel_id: int) -> None:
        """Undo :meth:`forbid_channel`."""
        self._forbidden_channels.discard(channel_id)

    def clear_records(self) -> None:
        """Forget everything recorded so far (the world model is kept)."""
        for records in (
            self.sent_messages,
            self.edits,
            self.deleted_messages,
            self.typing,
            self.reactions,
            self.interaction_responses,
            self.followups,
            self.synced_commands,
            self.unknown_routes,
            self.requests,
            self.dispatched,
            self.presence_updates,
            self.interactions,
        ):
            records.clear()

    # ------------------------------------------------------------------ user-side actions

    async def send_message(
        self,
        *,
        channel_id: int,
        author_id: int,
        content: str = "",
        mentions_bot: bool = False,
        reply_to: int | SentMessage | JSON | None = None,
        attachments: Mapping[str, bytes] | None = None,
        descriptions: Mapping[str, str] | None = None,
        embeds: Sequence[JSON] = (),
        timeout: float = 5.0,
        while_away: bool = False,
    ) -> JSON:
        """A member posts in a guild text channel, thread or forum post (MESSAGE_CREATE).

        Args:
            channel_id: Text channel or thread; use :meth:`send_dm` for DMs.
            author_id: A member of the channel's guild (see :meth:`add_member`).
            content: Message text; user mentions ``<@id>`` in it are resolved.
            mentions_bot: Prefix the content with the bot's mention (if not already there).
            reply_to: Message (ID, record or payload) this one replies to.
            attachments: ``filename -> bytes``; served by the fake so ``Attachment.read()``
                works.
            descriptions: ``filename -> description`` (the alt text people give a file).
            embeds: Raw embed objects.
            timeout: How long to wait for a connected gateway session owning the guild.
            while_away: The message was sent while the bot had no gateway session (see
                :meth:`disconnect_bot`): it is stored (REST history shows it) and never
                dispatched. Refused while a session is connected or resumable.

        Returns:
            The message payload as stored (REST shape, without ``guild_id``/``member``).
        """
        channel = self._channel(channel_id)
        if channel.guild_id is None:
            raise FakeDiscordError("use send_dm() for DM channels")
        author = self._author_in(channel, author_id)
        if mentions_bot and not re.search(rf"<@!?{self.bot_user.id}>", content):
            content = f"<@{self.bot_user.id}> {content}".rstrip()
        await self._before_user_event(channel, while_away=while_away, timeout=timeout)
        message = self._new_message(
            channel=channel,
            author=author,
            content=content,
            embeds=list(embeds),
            attachments=self._user_attachments(channel.id, attachments, descriptions),
            reference=self._reference_for(channel, reply_to),
        )
        await self._deliver_user_event("MESSAGE_CREATE", message, while_away=while_away)
        return message

    def _author_in(self, channel: FakeChannel, author_id: int) -> FakeUser:
        """The author of a user message in ``channel``: a member of its guild (posting in a
        text channel or thread, never in a forum itself), or the person of a DM with the bot."""
        if channel.guild_id is None:
            if channel.type is not ChannelType.DM or channel.recipient_ids != [author_id]:
                raise FakeDiscordError(
                    f"channel {channel.id} is not the bot's DM with user {author_id}; the bot "
                    "only sees its own DMs (fake.dm_channel_id(user_id))"
                )
            return self.users[author_id]
        if channel.type is ChannelType.GUILD_FORUM:
            raise FakeDiscordError("post into a forum thread (add_thread), not the forum itself")
        guild = self.guilds[channel.guild_id]
        if author_id not in guild.members:
            raise FakeDiscordError(
                f"user {author_id} is not a member of guild {guild.id}; "
                f"call fake.add_member({guild.id}, {author_id}) first"
            )
        return self.users[author_id]

    async def _before_user_event(
        self, channel: FakeChannel, *, while_away: bool, timeout: float
    ) -> None:
        """Before a user changes a channel: wait for the session the event goes to, or (for
        a change made while the bot was away) make sure no session could have seen it."""
        if while_away:
            self._check_away(channel.guild_id)
        else:
            await self._await_delivery_target(channel.guild_id, timeout)

    async def _deliver_user_event(self, event: str, message: JSON, *, while_away: bool) -> None:
        if while_away:
            return
        self._dispatch_message(event, message)
        await self._flush_sessions(self.channels[int(message["channel_id"])].guild_id)

    def _check_away(self, guild_id: int | None) -> None:
        """A change "while the bot was away" is only possible while no session of the bot
        could receive it: none connected (a resumable one would have it replayed)."""
        self._require_guild_up(guild_id)
        if guild_id is not None and not self._bot_in(self.guilds[guild_id]):
            return  # nothing of a guild the bot left reaches it anyway
        live = self._live_sessions(guild_id)
        if not live:
            return
        if any(s.detached for s in live):
            raise FakeDiscordError(
                "the bot's session is resumable (disconnect_bot(resumable=True)): Discord "
                "would replay this on RESUME; make the change normally"
            )
        raise FakeDiscordError(
            "a gateway session of the bot is connected, so Discord would dispatch this; "
            "await fake.disconnect_bot() first (or make the change before the bot starts)"
        )

    async def send_dm(
        self,
        *,
        user_id: int,
        content: str,
        attachments: Mapping[str, bytes] | None = None,
        descriptions: Mapping[str, str] | None = None,
        reply_to: int | SentMessage | JSON | None = None,
        timeout: float = 5.0,
        while_away: bool = False,
    ) -> JSON:
        """A user DMs the bot (MESSAGE_CREATE without ``guild_id``, delivered to shard 0).

        discord.py then builds a ``DMChannel`` (``message.guild is None``). ``while_away`` as
        in :meth:`send_message`.
        """
        channel = self._channel(self.dm_channel_id(user_id))
        await self._before_user_event(channel, while_away=while_away, timeout=timeout)
        message = self._new_message(
            channel=channel,
            author=self.users[user_id],
            content=content,
            attachments=self._user_attachments(channel.id, attachments, descriptions),
            reference=self._reference_for(channel, reply_to),
        )
        await self._deliver_user_event("MESSAGE_CREATE", message, while_away=while_away)
        return message

    async def edit_user_message(
        self,
        message: int | SentMessage | JSON,
        *,
        content: str | None = None,
        keep_attachments: Sequence[str] | None = None,
        timeout: float = 5.0,
    ) -> JSON:
        """The message's author edits it (MESSAGE_UPDATE): its text, or which of its files
        stay (people can remove a message's attachments when editing it, not add any).

        Since API v10 the update carries the full message object, with the same extra
        fields as MESSAGE_CREATE (``guild_id``, ``member``) and the same MESSAGE_CONTENT
        rules; ``edited_timestamp`` is the time of the edit, ``timestamp`` stays the send
        time. Only messages people wrote: the bot edits its own through the REST API.

        Args:
            content: The new text (``None``: unchanged).
            keep_attachments: File names of the attachments that stay (``None``: all).

        Returns:
            The message payload as now stored (REST shape).
        """
        stored = self._stored_user_message(message)
        self._check_user_editable(stored)
        channel = self._channel(int(stored["channel_id"]))
        await self._await_delivery_target(channel.guild_id, timeout)
        self._apply_user_edit(stored, content=content, keep_attachments=keep_attachments)
        self._dispatch_message("MESSAGE_UPDATE", stored)
        await self._flush_sessions(channel.guild_id)
        return stored

    def edit_message_quietly(
        self,
        message: int | SentMessage | JSON,
        *,
        content: str | None = None,
        keep_attachments: Sequence[str] | None = None,
    ) -> JSON:
        """The author edits a message while the bot is away (after :meth:`disconnect_bot`,
        or before it ever connected): the stored message changes as in
        :meth:`edit_user_message` (REST history shows the edit) and no MESSAGE_UPDATE is ever
        dispatched. Refused while a session of the bot is connected or resumable."""
        stored = self._stored_user_message(message)
        self._check_away(self._channel(int(stored["channel_id"])).guild_id)
        self._apply_user_edit(stored, content=content, keep_attachments=keep_attachments)
        return stored

    @staticmethod
    def _check_user_editable(stored: JSON) -> None:
        flags = int(stored.get("flags") or 0)
        if flags & IS_VOICE_MESSAGE_FLAG:
            raise FakeDiscordError("voice messages cannot be edited")
        if "poll" in stored:
            raise FakeDiscordError("after creation, a poll message cannot be edited")
        if flags & HAS_SNAPSHOT_FLAG:
            raise FakeDiscordError("a forward has no content of its own to edit")

    def _apply_user_edit(
        self, stored: JSON, *, content: str | None, keep_attachments: Sequence[str] | None
    ) -> None:
        self._check_user_editable(stored)
        if keep_attachments is not None:
            names = {a["filename"] for a in stored["attachments"]}
            if unknown := set(keep_attachments) - names:
                raise FakeDiscordError(f"an edit cannot add attachments: {sorted(unknown)}")
            stored["attachments"] = [
                a for a in stored["attachments"] if a["filename"] in keep_attachments
            ]
            if not stored["content"] and not stored["attachments"] and content is None:
                raise FakeDiscordError("Discord deletes a message whose last file is removed")
        if content is not None:
            stored["content"] = content
            stored["mentions"] = [
                self.users[int(uid)].to_payload()
                for uid in dict.fromkeys(_USER_MENTION.findall(content))
                if int(uid) in self.users
            ]
        stored["edited_timestamp"] = _now_iso()

    async def delete_message(
        self, message: int | SentMessage | JSON, *, timeout: float = 5.0
    ) -> None:
        """Someone deletes a message (its author, or a moderator; the bot's own too):
        MESSAGE_DELETE with ``id``, ``channel_id`` and ``guild_id`` (GUILD_MESSAGES or
        DIRECT_MESSAGES intent; no content, so no MESSAGE_CONTENT rule), to who may view the
        channel."""
        stored = self._stored_message(message)
        channel = self._channel(int(stored["channel_id"]))
        await self._await_delivery_target(channel.guild_id, timeout)
        self._forget_message(channel, stored)
        if channel.guild_id is not None and not self._bot_receives_messages_of(channel):
            return
        data: JSON = {"id": stored["id"], "channel_id": str(channel.id)}
        if channel.guild_id is not None:
            data["guild_id"] = str(channel.guild_id)
        intent = Intent.GUILD_MESSAGES if channel.guild_id else Intent.DIRECT_MESSAGES
        self._dispatch("MESSAGE_DELETE", data, guild_id=channel.guild_id, intent=intent)
        await self._flush_sessions(channel.guild_id)

    def delete_message_quietly(self, message: int | SentMessage | JSON) -> None:
        """A message is deleted while the bot is away (after :meth:`disconnect_bot`, or
        before it ever connected): gone from the store and from REST history, and no
        MESSAGE_DELETE is ever dispatched, so the bot can only notice by reading history.
        Refused while a session of the bot is connected or resumable."""
        stored = self._stored_message(message)
        channel = self._channel(int(stored["channel_id"]))
        self._check_away(channel.guild_id)
        self._forget_message(channel, stored)

    def _stored_message(self, message: int | SentMessage | JSON) -> JSON:
        mid = self._message_id_of(message)
        stored = self.messages.get(mid)
        if stored is None:
            raise FakeDiscordError(f"unknown message {mid} (deleted, or never sent)")
        return stored

    def _forget_message(self, channel: FakeChannel, message: JSON) -> None:
        mid = int(message["id"])
        del self.messages[mid]
        self._poll_votes.pop(mid, None)
        if channel.is_thread and channel.message_count:
            channel.message_count -= 1  # total_message_sent is not decremented

    async def forward_message(
        self,
        *,
        message_id: int | SentMessage | JSON,
        to_channel_id: int,
        author_id: int,
        content: str = "",
        timeout: float = 5.0,
    ) -> JSON:
        """A user forwards a message into a guild channel or into their DM with the bot.

        The forward is a MESSAGE_CREATE of type DEFAULT whose own ``content`` is empty, with
        the HAS_SNAPSHOT flag (1 << 14), ``message_reference`` = ``{"type": 1 (FORWARD),
        "message_id", "channel_id", "guild_id"}`` (the *source's* channel and guild; no
        ``referenced_message``) and ``message_snapshots`` = ``[{"message": {...}}]`` with the
        documented subset of the source (``type``, ``content``, ``embeds``, ``attachments``,
        ``timestamp``, ``edited_timestamp``, ``flags``, ``mentions``, ``mention_roles``,
        ``components``; sticker fields only when it has stickers; never ``author``), frozen
        at this moment. discord.py: ``message.message_snapshots[0].content``.

        Only "basic" messages can be forwarded (types DEFAULT, REPLY, CHAT_INPUT_COMMAND,
        CONTEXT_MENU_COMMAND, without a poll), and only by someone who can view the source.
        A ``content`` is the comment people may add: like Discord's client, the fake sends it
        as a separate, ordinary message right after the forward.

        Returns:
            The forward's payload as stored.
        """
        source = self._stored_message(message_id)
        source_channel = self._channel(int(source["channel_id"]))
        if int(source.get("type") or 0) not in FORWARDABLE_MESSAGE_TYPES or "poll" in source:
            raise FakeDiscordError(
                "only basic messages (DEFAULT, REPLY, CHAT_INPUT_COMMAND, CONTEXT_MENU_COMMAND, "
                "no poll) can be forwarded"
            )
        if int(source.get("flags") or 0) & HAS_SNAPSHOT_FLAG:
            raise FakeDiscordError("snapshots nest one level deep: forward the original message")
        if not self._user_can_view(source_channel, author_id):
            raise FakeDiscordError(
                f"user {author_id} cannot view channel {source_channel.id}, so cannot forward "
                "from it"
            )
        destination = self._channel(to_channel_id)
        author = self._author_in(destination, author_id)
        await self._await_delivery_target(destination.guild_id, timeout)
        snapshot = {k: copy.deepcopy(source[k]) for k in SNAPSHOT_FIELDS if k in source}
        reference: JSON = {
            "type": REFERENCE_FORWARD,
            "message_id": source["id"],
            "channel_id": source["channel_id"],
        }
        if source_channel.guild_id is not None:
            reference["guild_id"] = str(source_channel.guild_id)
        forward = self._new_message(
            channel=destination,
            author=author,
            content="",
            flags=HAS_SNAPSHOT_FLAG,
            reference=reference,
            snapshots=[{"message": snapshot}],
        )
        self._dispatch_message("MESSAGE_CREATE", forward)
        if content:
            comment = self._new_message(channel=destination, author=author, content=content)
            self._dispatch_message("MESSAGE_CREATE", comment)
        await self._flush_sessions(destination.guild_id)
        return forward

    def _user_can_view(self, channel: FakeChannel, user_id: int) -> bool:
        """Whether a person sees a channel: a DM they are in, or a guild channel they may view
        (a private thread only as a member or with Manage Threads)."""
        if channel.guild_id is None:
            return user_id in channel.recipient_ids
        if user_id not in self.guilds[channel.guild_id].members:
            return False
        perms = self.permissions_for(channel.guild_id, user_id, channel.id)
        if not perms & Permission.VIEW_CHANNEL:
            return False
        if channel.type is ChannelType.PRIVATE_THREAD:
            return user_id in channel.member_ids or bool(perms & Permission.MANAGE_THREADS)
        return True

    async def send_poll(
        self,
        *,
        channel_id: int,
        author_id: int,
        question: str,
        answers: Sequence[str],
        duration_hours: int = 24,
        allow_multiselect: bool = False,
        timeout: float = 5.0,
    ) -> JSON:
        """A user posts a poll (MESSAGE_CREATE with empty ``content`` and a ``poll`` object):
        ``question`` ``{"text"}``, ``answers`` ``[{"answer_id": 1.., "poll_media":
        {"text"}}]``, ``expiry`` (creation + ``duration_hours``), ``allow_multiselect``,
        ``layout_type`` 1 and ``results`` not finalized, without votes. Like the rest of a
        message's content, ``poll`` is omitted for a bot without MESSAGE_CONTENT. discord.py:
        ``message.poll``.

        Limits as documented: question 1-300 characters, 1-10 answers of 1-55 characters,
        1 hour to 32 days (the fake refuses more with FakeDiscordError).
        """
        channel = self._channel(channel_id)
        author = self._author_in(channel, author_id)
        poll = self._new_poll(
            question=question,
            answers=answers,
            duration_hours=duration_hours,
            allow_multiselect=allow_multiselect,
            layout_type=1,
        )
        if isinstance(poll, tuple):
            raise FakeDiscordError(f"invalid poll ({'.'.join(map(str, poll[0]))}): {poll[2]}")
        await self._await_delivery_target(channel.guild_id, timeout)
        message = self._new_message(channel=channel, author=author, content="", poll=poll)
        self._dispatch_message("MESSAGE_CREATE", message)
        await self._flush_sessions(channel.guild_id)
        return message

    def _new_poll(
        self,
        *,
        question: Any,
        answers: Sequence[Any],
        duration_hours: Any,
        allow_multiselect: bool,
        layout_type: Any,
    ) -> JSON | tuple[tuple[str | int, ...], str, str]:
        """A poll object from a poll create request, or ``(path, code, message)`` of the
        first documented limit it breaks (the ``expiry`` is filled in by the message)."""
        if not isinstance(question, str) or not question:
            return ("poll", "question", "text"), "BASE_TYPE_REQUIRED", "This field is required"
        if len(question) > MAX_POLL_QUESTION:
            return (
                ("poll", "question", "text"),
                "BASE_TYPE_MAX_LENGTH",
                f"Must be {MAX_POLL_QUESTION} or fewer in length.",
            )
        if not 1 <= len(answers) <= MAX_POLL_ANSWERS:
            return (
                ("poll", "answers"),
                "BASE_TYPE_BAD_LENGTH",
                f"Must be between 1 and {MAX_POLL_ANSWERS} in length.",
            )
        for index, answer in enumerate(answers):
            if not isinstance(answer, str) or not answer:
                return (
                    ("poll", "answers", index, "poll_media", "text"),
                    "BASE_TYPE_REQUIRED",
                    "This field is required",
                )
            if len(answer) > MAX_POLL_ANSWER:
                return (
                    ("poll", "answers", index, "poll_media", "text"),
                    "BASE_TYPE_MAX_LENGTH",
                    f"Must be {MAX_POLL_ANSWER} or fewer in length.",
                )
        if (
            isinstance(duration_hours, bool)
            or not isinstance(duration_hours, int | float)
            or duration_hours != int(duration_hours)
            or not 1 <= duration_hours <= MAX_POLL_HOURS
        ):
            return (
                ("poll", "duration"),
                "NUMBER_TYPE_MAX"
                if isinstance(duration_hours, int | float)
                else "NUMBER_TYPE_COERCE",
                f"Must be a whole number of hours between 1 and {MAX_POLL_HOURS}.",
            )
        if layout_type != 1:
            return ("poll", "layout_type"), "BASE_TYPE_CHOICES", "Value must be one of {1}."
        return {
            "question": {"text": question},
            "answers": [
                {"answer_id": answer_id, "poll_media": {"text": text}}
                for answer_id, text in enumerate(answers, start=1)
            ],
            "expiry": None,
            "allow_multiselect": bool(allow_multiselect),
            "layout_type": 1,
            "results": {"is_finalized": False, "answer_counts": []},
            "_duration_hours": int(duration_hours),
        }

    async def vote_poll(
        self,
        message_id: int | SentMessage | JSON,
        user_id: int,
        answer_id: int,
        *,
        timeout: float = 5.0,
    ) -> None:
        """A user votes: MESSAGE_POLL_VOTE_ADD ``{user_id, channel_id, message_id, guild_id,
        answer_id}`` (intents GUILD_MESSAGE_POLLS / DIRECT_MESSAGE_POLLS), and the stored
        ``results.answer_counts`` grow (Discord sends no MESSAGE_UPDATE for votes; REST shows
        the counts). In a single-choice poll a vote for another answer first takes the old
        vote back (MESSAGE_POLL_VOTE_REMOVE). Bots cannot vote; ended polls take no votes."""
        stored = self._stored_message(message_id)
        poll = stored.get("poll")
        if poll is None:
            raise FakeDiscordError(f"message {stored['id']} has no poll")
        if poll["results"]["is_finalized"]:
            raise FakeDiscordError("the poll has ended")
        voter = self.users.get(user_id)
        if voter is None:
            raise FakeDiscordError(f"unknown user {user_id}")
        if voter.bot:
            raise FakeDiscordError("apps are not allowed to vote on polls")
        channel = self._channel(int(stored["channel_id"]))
        if not self._user_can_view(channel, user_id):
            raise FakeDiscordError(f"user {user_id} cannot see channel {channel.id}")
        answer_ids = [int(a["answer_id"]) for a in poll["answers"]]
        if answer_id not in answer_ids:
            raise FakeDiscordError(f"the poll's answers are {answer_ids}, not {answer_id}")
        votes = self._poll_votes.setdefault(int(stored["id"]), {})
        if user_id in votes.get(answer_id, set()):
            raise FakeDiscordError(f"user {user_id} already voted for answer {answer_id}")
        await self._await_delivery_target(channel.guild_id, timeout)
        if not poll["allow_multiselect"]:
            for previous, voters in votes.items():
                if user_id in voters:
                    voters.discard(user_id)
                    self._dispatch_poll_vote("MESSAGE_POLL_VOTE_REMOVE", stored, user_id, previous)
        votes.setdefault(answer_id, set()).add(user_id)
        poll["results"]["answer_counts"] = self._answer_counts(poll, votes)
        self._dispatch_poll_vote("MESSAGE_POLL_VOTE_ADD", stored, user_id, answer_id)
        await self._flush_sessions(channel.guild_id)

    @staticmethod
    def _answer_counts(poll: JSON, votes: Mapping[int, set[int]]) -> list[JSON]:
        # "If answer_counts does not contain an entry for a particular answer, then there are
        # no votes for that answer"; me_voted is the bot's, and bots cannot vote.
        return [
            {"id": int(a["answer_id"]), "count": len(votes[a["answer_id"]]), "me_voted": False}
            for a in poll["answers"]
            if votes.get(a["answer_id"])
        ]

    def _dispatch_poll_vote(self, event: str, message: JSON, user_id: int, answer_id: int) -> None:
        channel = self._channel(int(message["channel_id"]))
        if channel.guild_id is not None and not self._bot_receives_messages_of(channel):
            return
        data: JSON = {
            "user_id": str(user_id),
            "channel_id": str(channel.id),
            "message_id": message["id"],
            "answer_id": answer_id,
        }
        if channel.guild_id is not None:
            data["guild_id"] = str(channel.guild_id)
        intent = Intent.GUILD_MESSAGE_POLLS if channel.guild_id else Intent.DIRECT_MESSAGE_POLLS
        self._dispatch(event, data, guild_id=channel.guild_id, intent=intent)

    async def end_poll(self, message_id: int | SentMessage | JSON, *, timeout: float = 5.0) -> JSON:
        """The poll ends (its author ends it early, or it expires) and Discord tallies it:

        1. MESSAGE_UPDATE of the poll message, ``poll.results`` = ``{"is_finalized": true,
           "answer_counts": [{"id", "count", "me_voted"}]}`` (answers without votes left out)
           and, when ended early, ``expiry`` moved to now;
        2. the POLL_RESULT system message (type 46): same author as the poll, who is
           mentioned, empty content, ``message_reference`` ``{"message_id", "channel_id"}`` of
           the poll, and one embed of type ``"poll_result"`` whose fields are
           ``poll_question_text``, ``victor_answer_votes``, ``total_votes`` and, when one answer
           won, ``victor_answer_id`` and ``victor_answer_text`` (Message resource, "Poll Result
           Embed Fields"; values are strings). discord.py updates the cached poll from it.

        Returns:
            The POLL_RESULT message as stored.
        """
        stored = self._stored_message(message_id)
        poll = stored.get("poll")
        if poll is None:
            raise FakeDiscordError(f"message {stored['id']} has no poll")
        if poll["results"]["is_finalized"]:
            raise FakeDiscordError("the poll has already ended")
        channel = self._channel(int(stored["channel_id"]))
        await self._await_delivery_target(channel.guild_id, timeout)
        votes = self._poll_votes.get(int(stored["id"]), {})
        counts = self._answer_counts(poll, votes)
        now = datetime.now(tz=UTC)
        if now < datetime.fromisoformat(str(poll["expiry"])):
            poll["expiry"] = now.isoformat()
        poll["results"] = {"is_finalized": True, "answer_counts": counts}
        self._dispatch_any("MESSAGE_UPDATE", stored)
        most = max((c["count"] for c in counts), default=0)
        fields = [
            ("poll_question_text", poll["question"]["text"]),
            ("victor_answer_votes", str(most)),
            ("total_votes", str(sum(c["count"] for c in counts))),
        ]
        winners = [c["id"] for c in counts if c["count"] == most]
        if most and len(winners) == 1:
            [winner] = [a for a in poll["answers"] if a["answer_id"] == winners[0]]
            fields += [
                ("victor_answer_id", str(winner["answer_id"])),
                ("victor_answer_text", winner["poll_media"]["text"]),
            ]
        author = self.users[int(stored["author"]["id"])]
        result = self._new_message(
            channel=channel,
            author=author,
            content="",
            embeds=[
                {
                    "type": "poll_result",
                    "fields": [
                        {"name": name, "value": value, "inline": False} for name, value in fields
                    ],
                }
            ],
            reference={
                "type": REFERENCE_DEFAULT,
                "message_id": stored["id"],
                "channel_id": stored["channel_id"],
            },
            message_type=MESSAGE_POLL_RESULT,
            extra_mentions=[author],
        )
        self._dispatch_any("MESSAGE_CREATE", result)
        await self._flush_sessions(channel.guild_id)
        return result

    def _dispatch_any(self, event: str, message: JSON) -> None:
        """A Discord-made event about a message: echoed like the bot's own if it is one."""
        if int(message["author"]["id"]) == self.bot_user.id:
            self._echo_bot_message(event, message)
        else:
            self._dispatch_message(event, message)

    async def send_voice_message(
        self,
        *,
        channel_id: int,
        author_id: int,
        duration_secs: float,
        audio: bytes | None = None,
        timeout: float = 5.0,
    ) -> JSON:
        """A user records a voice message: MESSAGE_CREATE with the IS_VOICE_MESSAGE flag
        (1 << 13), empty ``content`` and exactly one attachment ``voice-message.ogg``
        (``content_type`` ``audio/ogg``) with ``duration_secs`` and ``waveform`` (base64, one
        byte per 100 ms, at most 256 bytes). discord.py: ``Attachment.duration``,
        ``Attachment.waveform``, ``Attachment.is_voice_message()``. Voice messages cannot be
        edited. ``audio`` is what ``Attachment.read()`` returns (an Ogg page header by default).
        """
        if duration_secs <= 0:
            raise FakeDiscordError("a voice message lasts more than 0 seconds")
        channel = self._channel(channel_id)
        author = self._author_in(channel, author_id)
        await self._await_delivery_target(channel.guild_id, timeout)
        data = audio if audio is not None else b"OggS\x00\x02" + bytes(22)
        points = min(MAX_WAVEFORM_POINTS, max(1, math.ceil(duration_secs * 10)))
        waveform = bytes((37 * i) % 256 for i in range(points))
        [attachment] = self._user_attachments(channel.id, {"voice-message.ogg": data})
        attachment.update(
            content_type="audio/ogg",
            duration_secs=float(duration_secs),
            waveform=base64.b64encode(waveform).decode(),
        )
        message = self._new_message(
            channel=channel,
            author=author,
            content="",
            attachments=[attachment],
            flags=IS_VOICE_MESSAGE_FLAG,
        )
        self._dispatch_message("MESSAGE_CREATE", message)
        await self._flush_sessions(channel.guild_id)
        return message

    async def unfurl_links(
        self, message: int | SentMessage | JSON, *, embeds: Sequence[JSON], timeout: float = 5.0
    ) -> JSON:
        """Discord adds link previews to a message after it was sent: a MESSAGE_UPDATE
        with the new ``embeds`` and the text unchanged (``edited_timestamp`` untouched:
        nobody edited it)."""
        stored = self._stored_user_message(message)
        channel = self._channel(int(stored["channel_id"]))
        await self._wait_for_owner_session(channel.guild_id, timeout)
        stored["embeds"] = [*stored.get("embeds", []), *embeds]
        self._dispatch_message("MESSAGE_UPDATE", stored)
        await self._flush_sessions(channel.guild_id)
        return stored

    def _stored_user_message(self, message: int | SentMessage | JSON) -> JSON:
        mid = self._message_id_of(message)
        stored = self.messages.get(mid)
        if stored is None:
            raise FakeDiscordError(f"unknown message {mid} (deleted, or never sent)")
        if int(stored["author"]["id"]) == self.bot_user.id:
            raise FakeDiscordError("the bot edits its own messages through the REST API")
        return stored

    async def invoke_command(
        self,
        *,
        name: str,
        channel_id: int,
        user_id: int,
        options: Mapping[str, OptionValue] | Sequence[JSON] | None = None,
        guild_command: bool | None = None,
        resolved: JSON | None = None,
        timeout: float = 5.0,
        created_ago: float = 0.0,
    ) -> FakeInteraction:
        """A user runs a slash command (INTERACTION_CREATE type 2).

        Args:
            name: Command path, e.g. ``"memory"``, ``"memory show"`` or
                ``"memory config set"``; the fake builds the SUB_COMMAND_GROUP / SUB_COMMAND
                option tree from it.
            channel_id: Where it is invoked (a DM channel from :meth:`dm_channel_id` works).
            user_id: The invoking user (must be a member for guild channels).
            options: Leaf options, either ``{"name": value}`` (type inferred: str, int, float,
                bool, or FakeUser/FakeMember/FakeChannel/FakeRole with ``resolved`` filled in)
                or raw option objects.
            guild_command: Put ``guild_id`` in ``data`` (a guild-scoped command). Default:
                true if the command was synced to this guild.
            resolved: Extra raw ``resolved`` data.
            timeout: How long to wait for a connected gateway session.
            created_ago: Seconds between Discord creating the interaction and the bot
                receiving it (gateway or event-loop lag): its ID is dated that far back and
                that much of the 3-second window is already gone.
        """
        parts = name.split()
        if not parts:
            raise FakeDiscordError("empty command name")
        channel = self._channel(channel_id)
        leaf_options, leaf_resolved = self._build_options(channel, options)
        merged_resolved = self._merge_resolved(leaf_resolved, resolved or {})
        tree: list[JSON] = leaf_options
        # Build from the leaf upwards: the last path element is a SUB_COMMAND (1), an element
        # in between is a SUB_COMMAND_GROUP (2).
        for depth in range(len(parts) - 1, 0, -1):
            option_type = 1 if depth == len(parts) - 1 else 2
            tree = [{"type": option_type, "name": parts[depth], "options": tree}]
        top = parts[0]
        scope = self._command_scope(top, channel.guild_id, guild_command, CHAT_INPUT)
        self._check_registered(scope, parts, CHAT_INPUT)
        owners = self._check_context(scope, parts, channel, user_id, CHAT_INPUT)
        data: JSON = {
            "id": str(self._command_id(scope, top, CHAT_INPUT)),
            "name": top,
            "type": CHAT_INPUT,
            "options": tree,
        }
        if scope is not None:
            data["guild_id"] = str(scope)
        if merged_resolved:
            data["resolved"] = merged_resolved
        return await self._create_interaction(
            interaction_type=2,
            channel=channel,
            user_id=user_id,
            data=data,
            timeout=timeout,
            created_ago=created_ago,
            owners=owners,
        )

    async def invoke_message_command(
        self,
        *,
        name: str,
        channel_id: int,
        user_id: int,
        message_id: int | SentMessage | JSON,
        guild_command: bool | None = None,
        timeout: float = 5.0,
        created_ago: float = 0.0,
    ) -> FakeInteraction:
        """A user runs a message context-menu command ("Apps" on a message): INTERACTION_CREATE
        type 2 whose ``data`` is ``{"id", "name", "type": 3, "target_id", "resolved":
        {"messages": {target_id: <the message>}}}`` plus ``guild_id`` for a guild-scoped
        command (Application Commands, "Message Commands").

        The resolved message is the full message object as stored (REST shape, content
        included even for a bot without MESSAGE_CONTENT: the docs exempt "the message a message
        context menu command is used on"); discord.py turns it into the ``discord.Message``
        a ``ContextMenu`` callback receives. It also works on an old message in an archived
        thread discord.py never cached: the interaction's ``channel`` then describes the
        thread (``parent_id``, ``thread_metadata``) and discord.py builds a ``Thread`` from it.

        Checks as :meth:`invoke_command`: the command (``name`` as registered, spaces and
        capitals included) must be registered with type 3 and offered in this context; the
        user must be a member and must see the message (View Channel; a private thread only as
        a member or thread manager); the message must be in ``channel_id``.
        """
        channel = self._channel(channel_id)
        target = self._stored_message(message_id)
        if int(target["channel_id"]) != channel.id:
            raise FakeDiscordError(
                f"message {target['id']} is in channel {target['channel_id']}, not {channel.id}"
            )
        if not self._user_can_view(channel, user_id):
            raise FakeDiscordError(f"user {user_id} cannot see channel {channel.id}")
        scope = self._command_scope(name, channel.guild_id, guild_command, MESSAGE_COMMAND)
        self._check_registered(scope, [name], MESSAGE_COMMAND)
        owners = self._check_context(scope, [name], channel, user_id, MESSAGE_COMMAND)
        data: JSON = {
            "id": str(self._command_id(scope, name, MESSAGE_COMMAND)),
            "name": name,
            "type": MESSAGE_COMMAND,
            "target_id": target["id"],
            "resolved": {"messages": {target["id"]: copy.deepcopy(target)}},
        }
        if scope is not None:
            data["guild_id"] = str(scope)
        return await self._create_interaction(
            interaction_type=2,
            channel=channel,
            user_id=user_id,
            data=data,
            timeout=timeout,
            created_ago=created_ago,
            owners=owners,
        )

    async def click_button(
        self,
        *,
        message: int | SentMessage | JSON,
        custom_id: str,
        user_id: int,
        timeout: float = 5.0,
        created_ago: float = 0.0,
    ) -> FakeInteraction:
        """A user clicks a button on a bot message (INTERACTION_CREATE type 3).

        ``message`` may be an ID, a :class:`SentMessage` or a payload; the fake sends the
        message's *current* state (after edits), which is what discord.py's view store needs.
        ``created_ago`` as in :meth:`invoke_command`.
        """
        return await self._component_interaction(
            message=message,
            custom_id=custom_id,
            user_id=user_id,
            component_type=2,
            values=None,
            timeout=timeout,
            created_ago=created_ago,
        )

    async def select_options(
        self,
        *,
        message: int | SentMessage | JSON,
        custom_id: str,
        values: Sequence[str],
        user_id: int,
        component_type: int = 3,
        timeout: float = 5.0,
    ) -> FakeInteraction:
        """A user picks values in a select menu (component type 3 = string select)."""
        return await self._component_interaction(
            message=message,
            custom_id=custom_id,
            user_id=user_id,
            component_type=component_type,
            values=list(values),
            timeout=timeout,
        )

    async def submit_modal(
        self,
        *,
        interaction: FakeInteraction,
        values: Mapping[str, str],
        user_id: int | None = None,
        timeout: float = 5.0,
    ) -> FakeInteraction:
        """Submit the modal the bot opened in response to ``interaction`` (type 5).

        ``values`` maps text-input ``custom_id`` to the typed text.
        """
        state = self._interactions.get(interaction.id)
        if state is None or state.modal is None:
            raise FakeDiscordError(
                f"the bot did not answer interaction {interaction.id} with a modal"
            )
        modal = state.modal
        data: JSON = {
            "custom_id": modal["custom_id"],
            "components": self._modal_submit_components(modal.get("components", []), values),
        }
        channel = self._channel(interaction.channel_id)
        return await self._create_interaction(
            interaction_type=5,
            channel=channel,
            user_id=user_id or interaction.user_id,
            data=data,
            timeout=timeout,
        )

    def age_interaction(self, interaction: FakeInteraction, seconds: float) -> None:
        """Pretend ``seconds`` passed for ``interaction``'s token (past 15 minutes it expires)."""
        self._interactions[interaction.id].token_expires_at -= seconds

    async def dispatch(
        self, event: str, data: JSON, *, guild_id: int | None = None, timeout: float = 5.0
    ) -> None:
        """Send any raw DISPATCH event to the sessions owning ``guild_id`` (escape hatch)."""
        await self._wait_for_owner_session(guild_id, timeout)
        self._dispatch(event, data, guild_id=guild_id, intent=None)
        await self._flush_sessions(guild_id)

    # ------------------------------------------------------------------ waiters

    async def wait_for(
        self, predicate: Callable[[], bool], *, timeout: float = 5.0, what: str = "condition"
    ) -> None:
        """Wait until ``predicate()`` is true; re-checked after every request/event."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not predicate():
            remaining = deadline - loop.time()
            if remaining <= 0:
                sent = [(m.channel_id, m.content) for m in self.sent_messages]
                responses = [(r.type, r.data) for r in self.interaction_responses]
                errors = [r for r in self.requests if r.status >= 400]
                raise FakeDiscordTimeout(
                    f"timed out after {timeout}s waiting for {what}; sent_messages={sent!r} "
                    f"interaction_responses={responses!r} "
                    f"unknown_routes={self.unknown_routes!r} errors={errors!r}"
                )
            waiter: asyncio.Future[None] = loop.create_future()
            self._waiters.add(waiter)
            try:
                await asyncio.wait({waiter}, timeout=remaining)
            finally:
                self._waiters.discard(waiter)

    async def wait_for_messages(
        self, channel_id: int | None = None, count: int = 1, *, timeout: float = 5.0
    ) -> list[SentMessage]:
        """Wait until the bot posted ``count`` messages (in ``channel_id``, if given)."""

        def matching() -> list[SentMessage]:
            return [
                m for m in self.sent_messages if channel_id is None or m.channel_id == channel_id
            ]

        await self.wait_for(
            lambda: len(matching()) >= count,
            timeout=timeout,
            what=f"{count} message(s) in channel {channel_id}",
        )
        return matching()

    async def wait_for_edits(
        self, message_id: int | None = None, count: int = 1, *, timeout: float = 5.0
    ) -> list[MessageEdit]:
        """Wait until ``count`` edits happened (of ``message_id``, if given)."""

        def matching() -> list[MessageEdit]:
            return [e for e in self.edits if message_id is None or e.message_id == message_id]

        await self.wait_for(
            lambda: len(matching()) >= count, timeout=timeout, what=f"{count} edit(s)"
        )
        return matching()

    async def wait_for_typing(
        self, channel_id: int | None = None, count: int = 1, *, timeout: float = 5.0
    ) -> list[TypingEvent]:
        """Wait until the bot triggered typing ``count`` times (in ``channel_id``, if given)."""

        def matching() -> list[TypingEvent]:
            return [t for t in self.typing if channel_id is None or t.channel_id == channel_id]

        await self.wait_for(
            lambda: len(matching()) >= count, timeout=timeout, what=f"{count} typing event(s)"
        )
        return matching()

    async def wait_for_response(
        self, interaction: FakeInteraction | int, *, timeout: float = 5.0
    ) -> InteractionResponse:
        """Wait for the initial response to an interaction."""
        iid = interaction if isinstance(interaction, int) else interaction.id

        def found() -> InteractionResponse | None:
            return next((r for r in self.interaction_responses if r.interaction_id == iid), None)

        await self.wait_for(
            lambda: found() is not None,
            timeout=timeout,
            what=f"a response to interaction {iid}",
        )
        response = found()
        assert response is not None
        return response

    async def wait_for_interaction_responses(
        self, count: int = 1, *, timeout: float = 5.0
    ) -> list[InteractionResponse]:
        """Wait until ``count`` interaction responses were recorded."""
        await self.wait_for(
            lambda: len(self.interaction_responses) >= count,
            timeout=timeout,
            what=f"{count} interaction response(s)",
        )
        return list(self.interaction_responses)

    async def wait_for_followups(
        self,
        interaction: FakeInteraction | int | None = None,
        count: int = 1,
        *,
        timeout: float = 5.0,
    ) -> list[Followup]:
        """Wait until ``count`` follow-ups were sent (for ``interaction``, if given)."""
        iid = interaction.id if isinstance(interaction, FakeInteraction) else interaction

        def matching() -> list[Followup]:
            return [f for f in self.followups if iid is None or f.interaction_id == iid]

        await self.wait_for(
            lambda: len(matching()) >= count, timeout=timeout, what=f"{count} follow-up(s)"
        )
        return matching()

    async def wait_for_synced_commands(
        self, count: int = 1, *, timeout: float = 5.0
    ) -> list[SyncedCommands]:
        """Wait until ``count`` command syncs happened."""
        await self.wait_for(
            lambda: len(self.synced_commands) >= count,
            timeout=timeout,
            what=f"{count} command sync(s)",
        )
        return list(self.synced_commands)

    async def wait_for_sessions(
        self, count: int = 1, *, shard_id: int | None = None, timeout: float = 5.0
    ) -> None:
        """Wait until ``count`` gateway sessions (of ``shard_id``, if given) got READY."""

        def ready() -> int:
            return sum(
                1
                for s in self._sessions
                if s.ready and not s.closed and (shard_id is None or s.shard_id == shard_id)
            )

        await self.wait_for(
            lambda: ready() >= count, timeout=timeout, what=f"{count} ready gateway session(s)"
        )

    def _notify(self) -> None:
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)

    # ------------------------------------------------------------------ payload builders

    def _guild(self, guild_id: int) -> FakeGuild:
        try:
            return self.guilds[guild_id]
        except KeyError:
            raise FakeDiscordError(f"unknown guild {guild_id}") from None

    def _channel(self, channel_id: int) -> FakeChannel:
        try:
            return self.channels[channel_id]
        except KeyError:
            raise FakeDiscordError(f"unknown channel {channel_id}") from None

    def permissions_for(self, guild_id: int, user_id: int, channel_id: int | None = None) -> int:
        """Discord's permission algorithm: base role permissions, then channel overwrites.

        Threads use their parent's overwrites. Without VIEW_CHANNEL a member has nothing.
        """
        guild = self._guild(guild_id)
        if user_id == guild.owner_id:
            return ALL_PERMISSIONS
        member = guild.members.get(user_id)
        if member is None:
            return 0  # not in the guild (e.g. the bot after remove_bot_from_guild)
        role_ids = member.role_ids
        perms = guild.everyone_role.permissions
        for rid in role_ids:
            role = guild.roles.get(rid)
            if role is not None:
                perms |= role.permissions
        if perms & Permission.ADMINISTRATOR:
            return ALL_PERMISSIONS
        if channel_id is None:
            return perms
        channel = self._channel(channel_id)
        if channel.is_thread and channel.parent_id is not None:
            channel = self._channel(channel.parent_id)
        by_target = {(o.type, o.id): o for o in channel.overwrites}
        everyone = by_target.get(("role", guild.id))
        if everyone is not None:
            perms = (perms & ~everyone.deny) | everyone.allow
        allow = deny = 0
        for rid in role_ids:
            overwrite = by_target.get(("role", rid))
            if overwrite is not None:
                allow |= overwrite.allow
                deny |= overwrite.deny
        perms = (perms & ~deny) | allow
        own = by_target.get(("member", user_id))
        if own is not None:
            perms = (perms & ~own.deny) | own.allow
        if not perms & Permission.VIEW_CHANNEL:
            return 0
        return perms

    def _channel_payload(self, channel: FakeChannel) -> JSON:
        if channel.type is ChannelType.DM:
            return {
                "id": str(channel.id),
                "type": int(channel.type),
                "last_message_id": _opt_str(channel.last_message_id),
                "recipients": [self.users[u].to_payload() for u in channel.recipient_ids],
                "flags": 0,
            }
        if channel.type is ChannelType.GROUP_DM:
            return {
                "id": str(channel.id),
                "type": int(channel.type),
                "name": channel.name,
                "icon": None,
                "owner_id": _opt_str(channel.owner_id),
                "last_message_id": _opt_str(channel.last_message_id),
                "recipients": [self.users[u].to_payload() for u in channel.recipient_ids],
                "flags": 0,
            }
        payload: JSON = {
            "id": str(channel.id),
            "type": int(channel.type),
            "guild_id": str(channel.guild_id),
            "name": channel.name,
            "parent_id": _opt_str(channel.parent_id),
            "last_message_id": _opt_str(channel.last_message_id),
            "rate_limit_per_user": 0,
            "flags": 0,
            "nsfw": False,
        }
        if channel.is_thread:
            payload.update(
                owner_id=_opt_str(channel.owner_id),
                message_count=channel.message_count,
                total_message_sent=channel.total_message_sent,
                member_count=1,
                thread_metadata={
                    "archived": channel.archived,
                    "auto_archive_duration": 1440,
                    "archive_timestamp": channel.created_at,
                    "locked": channel.locked,
                    "invitable": True,
                    "create_timestamp": channel.created_at,
                },
            )
            parent = self.channels.get(channel.parent_id) if channel.parent_id else None
            if parent is not None and parent.type is ChannelType.GUILD_FORUM:
                payload["applied_tags"] = [str(t) for t in channel.applied_tags]
            return payload
        payload.update(
            position=channel.position,
            topic=channel.topic,
            permission_overwrites=[o.to_payload() for o in channel.overwrites],
            default_auto_archive_duration=1440,
            default_thread_rate_limit_per_user=0,
        )
        if channel.type is ChannelType.GUILD_FORUM:
            payload.update(
                available_tags=[t.to_payload() for t in channel.available_tags],
                default_reaction_emoji=None,
                default_sort_order=None,
                default_forum_layout=0,
            )
        return payload

    def _guild_payload(self, guild: FakeGuild) -> JSON:
        return {
            "id": str(guild.id),
            "name": guild.name,
            "icon": None,
            "splash": None,
            "discovery_splash": None,
            "banner": None,
            "description": None,
            "owner_id": str(guild.owner_id),
            "afk_channel_id": None,
            "afk_timeout": 300,
            "verification_level": 0,
            "default_message_notifications": 1,
            "explicit_content_filter": 0,
            "mfa_level": 0,
            "nsfw_level": 0,
            "premium_tier": 0,
            "premium_subscription_count": 0,
            "premium_progress_bar_enabled": False,
            "preferred_locale": "en-US",
            "system_channel_id": None,
            "system_channel_flags": 0,
            "rules_channel_id": None,
            "public_updates_channel_id": None,
            "safety_alerts_channel_id": None,
            "vanity_url_code": None,
            "features": [],
            "roles": [r.to_payload() for r in guild.roles.values()],
            "emojis": [],
            "stickers": [],
            "application_id": None,
            "max_members": 500000,
            "max_presences": None,
            "max_video_channel_users": 25,
            "max_stage_video_channel_users": 50,
            "incidents_data": None,
        }

    def _guild_create_payload(
        self, guild: FakeGuild, session: _GatewaySession, *, new_join: bool = False
    ) -> JSON:
        # Without GUILD_PRESENCES Discord only includes the bot itself (and voice members);
        # the rest arrive through member chunking (op 8) when the client asks for it.
        if session.intents & Intent.GUILD_PRESENCES:
            members = list(guild.members.values())
        else:
            members = [guild.members[self.bot_user.id]]
        channels = [self.channels[cid] for cid in guild.channel_ids]
        # "all active threads in the guild that the current user is able to view"
        threads = [
            c
            for c in self.channels.values()
            if c.guild_id == guild.id
            and c.is_thread
            and not c.archived
            and self._bot_receives_messages_of(c)
        ]
        payload: JSON = {
            **self._guild_payload(guild),
            "joined_at": guild.joined_at,
            "large": False,
            "member_count": len(guild.members),
            "members": [m.to_payload() for m in members],
            "channels": [self._channel_payload(c) for c in channels],
            "threads": [self._channel_payload(t) for t in threads],
            "presences": [],
            "voice_states": [],
            "stage_instances": [],
            "guild_scheduled_events": [],
            "soundboard_sounds": [],
        }
        if not new_join:
            # Lazy-loading a guild announced in READY says "unavailable": false; a guild the
            # bot just joined omits the key. discord.py maps these to on_guild_available and
            # on_guild_join respectively.
            payload["unavailable"] = False
        return payload

    def _app_flags(self) -> int:
        # The "*_LIMITED" flags are what a verified-less bot with the intents toggled on has.
        flags = 0
        if self.enabled_privileged_intents & Intent.GUILD_PRESENCES:
            flags |= 1 << 13
        if self.enabled_privileged_intents & Intent.GUILD_MEMBERS:
            flags |= 1 << 15
        if self.enabled_privileged_intents & Intent.MESSAGE_CONTENT:
            flags |= 1 << 19
        return flags

    def _new_message(
        self,
        *,
        channel: FakeChannel,
        author: FakeUser,
        content: str,
        embeds: list[JSON] | None = None,
        components: list[JSON] | None = None,
        flags: int = 0,
        attachments: list[JSON] | None = None,
        reference: JSON | None = None,
        webhook: bool = False,
        interaction_metadata: JSON | None = None,
        message_id: int | None = None,
        snapshots: list[JSON] | None = None,
        poll: JSON | None = None,
        message_type: int | None = None,
        extra_mentions: Sequence[FakeUser] = (),
    ) -> JSON:
        """Create, store and return a message in REST shape.

        The type is REPLY for a reply (a DEFAULT reference), else DEFAULT, unless
        ``message_type`` says otherwise; a reply and the response to a message command carry
        ``referenced_message``.
        """
        mid = message_id or self._ids.next()
        mentioned = [
            self.users[int(uid)]
            for uid in dict.fromkeys(_USER_MENTION.findall(content))
            if int(uid) in self.users
        ]
        mentioned += [u for u in extra_mentions if u not in mentioned]
        if message_type is None:
            is_reply = reference is not None and reference.get("type") == REFERENCE_DEFAULT
            message_type = MESSAGE_REPLY if is_reply else MESSAGE_DEFAULT
        message: JSON = {
            "id": str(mid),
            "channel_id": str(channel.id),
            "author": author.to_payload(),
            "content": content,
            "timestamp": snowflake_time_iso(mid),
            "edited_timestamp": None,
            "tts": False,
            "mention_everyone": False,
            "mentions": [u.to_payload() for u in mentioned],
            "mention_roles": [],
            "attachments": attachments or [],
            "embeds": embeds or [],
            "components": components or [],
            "pinned": False,
            "type": message_type,
            "flags": flags,
        }
        if webhook:
            message["webhook_id"] = str(self.application_id)
            message["application_id"] = str(self.application_id)
        if interaction_metadata is not None:
            message["interaction_metadata"] = interaction_metadata
        if reference is not None:
            message["message_reference"] = reference
        if message_type in (MESSAGE_REPLY, MESSAGE_CONTEXT_MENU_COMMAND) and reference:
            referenced = self.messages.get(int(reference["message_id"]))
            if referenced is not None:
                # Discord nests only one level of referenced_message.
                nested = copy.deepcopy(referenced)
                nested.pop("referenced_message", None)
                message["referenced_message"] = nested
            else:
                message["referenced_message"] = None
        if snapshots is not None:
            message["message_snapshots"] = snapshots
        if poll is not None:
            poll = dict(poll)
            hours = int(poll.pop("_duration_hours"))
            created = datetime.fromisoformat(snowflake_time_iso(mid))
            poll["expiry"] = (created + timedelta(hours=hours)).isoformat()
            message["poll"] = poll
            self._poll_votes[mid] = {}
        self.messages[mid] = message
        channel.last_message_id = mid
        if channel.is_thread:
            channel.message_count += 1
            channel.total_message_sent += 1
        return message

    def _reference_for(
        self, channel: FakeChannel, reply_to: int | SentMessage | JSON | None
    ) -> JSON | None:
        if reply_to is None:
            return None
        target = self._message_id_of(reply_to)
        stored = self.messages.get(target)
        if stored is None:
            raise FakeDiscordError(f"cannot reply to unknown message {target}")
        reference: JSON = {
            "type": 0,
            "message_id": str(target),
            "channel_id": stored["channel_id"],
        }
        if channel.guild_id is not None:
            reference["guild_id"] = str(channel.guild_id)
        return reference

    @staticmethod
    def _message_id_of(message: int | SentMessage | JSON) -> int:
        if isinstance(message, int):
            return message
        if isinstance(message, SentMessage):
            return message.id
        return int(message["id"])

    def _user_attachments(
        self,
        channel_id: int,
        attachments: Mapping[str, bytes] | None,
        descriptions: Mapping[str, str] | None = None,
    ) -> list[JSON]:
        """Attachment objects as Discord's API documents them (``description``, the alt
        text, only when one was given: Discord omits the optional fields)."""
        result: list[JSON] = []
        for filename, data in (attachments or {}).items():
            aid = self._ids.next()
            self._attachments[(aid, channel_id)] = data
            url = f"{self.base_url}/attachments/{channel_id}/{aid}/{filename}"
            attachment: JSON = {
                "id": str(aid),
                "filename": filename,
                "size": len(data),
                "url": url,
                "proxy_url": url,
                "content_type": _guess_content_type(filename),
            }
            if description := (descriptions or {}).get(filename):
                attachment["description"] = description
            result.append(attachment)
        return result

    def _stored_attachments(self, channel_id: int, files: Sequence[UploadedFile]) -> list[JSON]:
        """Attachment objects for files the bot uploaded (also served by the fake)."""
        result: list[JSON] = []
        for upload in files:
            aid = self._ids.next()
            self._attachments[(aid, channel_id)] = upload.data
            url = f"{self.base_url}/attachments/{channel_id}/{aid}/{upload.filename}"
            result.append(
                {
                    "id": str(aid),
                    "filename": upload.filename,
                    "size": len(upload.data),
                    "url": url,
                    "proxy_url": url,
                    "content_type": upload.content_type or _guess_content_type(upload.filename),
                    "description": upload.description,
                }
            )
        return result

    # ------------------------------------------------------------------ gateway dispatch

    def _live_sessions(self, guild_id: int | None) -> list[_GatewaySession]:
        """Sessions events for ``guild_id`` go to: ready ones, and resumable dropped ones
        (which keep sequencing events for the RESUME to replay)."""
        return [
            s
            for s in self._sessions
            if s.ready and (not s.closed or s.detached) and s.owns(guild_id)
        ]

    def _reaches_bot(self, guild_id: int | None) -> bool:
        """Whether the guild's events reach the bot at all: not after it left the guild, and
        not while the guild is unavailable."""
        if guild_id is None:
            return True
        guild = self.guilds.get(guild_id)
        return guild is not None and self._bot_in(guild) and not guild.unavailable

    def _send_dispatch(self, session: _GatewaySession, event: str, data: JSON) -> None:
        seq = session.send(0, data, event)
        self.dispatched.append(DispatchRecord(session.id, session.shard_id, event, data, seq))
        self._notify()

    def _dispatch(
        self, event: str, data: JSON, *, guild_id: int | None, intent: Intent | None
    ) -> None:
        # Interactions reach the app wherever it is installed (a user install works in
        # guilds the bot is not in); everything else only from guilds it is in.
        if event != "INTERACTION_CREATE" and not self._reaches_bot(guild_id):
            return
        for session in self._live_sessions(guild_id):
            if intent is not None and not session.intents & intent:
                continue  # Discord never sends events the client did not subscribe to.
            self._send_dispatch(session, event, copy.deepcopy(data))

    def _dispatch_message(self, event: str, message: JSON) -> None:
        """MESSAGE_CREATE/UPDATE with guild_id, member and MESSAGE_CONTENT filtering."""
        channel = self.channels[int(message["channel_id"])]
        guild_id = channel.guild_id
        intent = Intent.GUILD_MESSAGES if guild_id is not None else Intent.DIRECT_MESSAGES
        author_id = int(message["author"]["id"])
        mentions_bot = any(int(u["id"]) == self.bot_user.id for u in message["mentions"])
        if not self._reaches_bot(guild_id):
            return
        if guild_id is not None and not self._bot_receives_messages_of(channel):
            return
        for session in self._live_sessions(guild_id):
            if not session.intents & intent:
                continue
            data = copy.deepcopy(message)
            if guild_id is not None:
                guild = self.guilds[guild_id]
                data["guild_id"] = str(guild_id)
                member = guild.members.get(author_id)
                if member is not None and "webhook_id" not in data:
                    data["member"] = member.to_payload(with_user=False)
                for mention in data["mentions"]:
                    mentioned = guild.members.get(int(mention["id"]))
                    if mentioned is not None:
                        mention["member"] = mentioned.to_payload(with_user=False)
            # MESSAGE_CONTENT is privileged: without it, guild messages arrive empty unless
            # they mention the bot or are the bot's own (DMs are always readable).
            can_read = (
                session.intents & Intent.MESSAGE_CONTENT
                or guild_id is None
                or mentions_bot
                or author_id == self.bot_user.id
            )
            if not can_read:
                data.update(content="", embeds=[], attachments=[], components=[])
                data.pop("poll", None)
                # a forward's snapshot is the forwarded message's content: emptied alike
                for snapshot in data.get("message_snapshots") or []:
                    snapshot["message"].update(content="", embeds=[], attachments=[], components=[])
            self._send_dispatch(session, event, data)

    def _bot_receives_messages_of(self, channel: FakeChannel) -> bool:
        """The gateway sends a guild channel's messages (and a thread's existence) only to who
        can view it, and a private thread's only to its members and to those who may manage
        threads."""
        assert channel.guild_id is not None
        perms = self.permissions_for(channel.guild_id, self.bot_user.id, channel.id)
        if not perms & Permission.VIEW_CHANNEL:
            return False
        if channel.type == ChannelType.PRIVATE_THREAD:
            return self.bot_user.id in channel.member_ids or bool(perms & Permission.MANAGE_THREADS)
        return True

    def _echo_bot_message(self, event: str, message: JSON) -> None:
        if self.echo_bot_messages and not int(message.get("flags") or 0) & EPHEMERAL_FLAG:
            self._dispatch_message(event, message)

    async def _flush_sessions(self, guild_id: int | None) -> None:
        await asyncio.gather(*(s.flush() for s in self._live_sessions(guild_id)))

    async def _wait_for_owner_session(self, guild_id: int | None, timeout: float) -> None:
        self._require_guild_up(guild_id)
        held = (
            "; the bot is held offline by disconnect_bot(): await fake.wait_for_reconnect()"
            if self._hold_gateway
            else ""
        )
        await self.wait_for(
            lambda: bool(self._live_sessions(guild_id)),
            timeout=timeout,
            what=f"a ready gateway session owning guild {guild_id} (is the client running?{held})",
        )

    async def _await_delivery_target(self, guild_id: int | None, timeout: float) -> None:
        """Before a user event: wait for the session it goes to; nothing goes anywhere from
        a guild the bot left."""
        self._require_guild_up(guild_id)
        if guild_id is not None and not self._bot_in(self.guilds[guild_id]):
            return
        await self._wait_for_owner_session(guild_id, timeout)

    def _require_guild_up(self, guild_id: int | None) -> None:
        if guild_id is not None and self.guilds[guild_id].unavailable:
            raise FakeDiscordError(
                f"guild {guild_id} is unavailable (guild_outage): nobody can use it until "
                "end_guild_outage()"
            )

    # ------------------------------------------------------------------ interactions

    def _build_options(
        self, channel: FakeChannel, options: Mapping[str, OptionValue] | Sequence[JSON] | None
    ) -> tuple[list[JSON], JSON]:
        if options is None:
            return [], {}
        if not isinstance(options, Mapping):
            return [dict(o) for o in options], {}
        built: list[JSON] = []
        resolved: JSON = {}
        for option_name, value in options.items():
            option_type, raw_value = self._option_type_and_value(channel, value, resolved)
            built.append({"type": option_type, "name": option_name, "value": raw_value})
        return built, resolved

    def _option_type_and_value(
        self, channel: FakeChannel, value: OptionValue, resolved: JSON
    ) -> tuple[int, Any]:
        # bool before int: bool is a subclass of int
        if isinstance(value, bool):
            return 5, value
        if isinstance(value, int):
            return 4, value
        if isinstance(value, float):
            return 10, value
        if isinstance(value, str):
            return 3, value
        if isinstance(value, FakeMember | FakeUser):
            user = value.user if isinstance(value, FakeMember) else value
            resolved.setdefault("users", {})[str(user.id)] = user.to_payload()
            member = value if isinstance(value, FakeMember) else None
            if member is None and channel.guild_id is not None:
                member = self.guilds[channel.guild_id].members.get(user.id)
            if member is not None:
                member_payload = member.to_payload(with_user=False)
                member_payload["permissions"] = str(
                    self.permissions_for(member.guild_id, user.id, channel.id)
                )
                resolved.setdefault("members", {})[str(user.id)] = member_payload
            return 6, str(user.id)
        if isinstance(value, FakeChannel):
            chan_payload = self._channel_payload(value)
            if value.guild_id is not None and channel.guild_id is not None:
                # The invoking user's permissions in the referenced channel.
                chan_payload["permissions"] = str(ALL_PERMISSIONS)
            resolved.setdefault("channels", {})[str(value.id)] = chan_payload
            return 7, str(value.id)
        role = value
        resolved.setdefault("roles", {})[str(role.id)] = role.to_payload()
        return 8, str(role.id)

    @staticmethod
    def _merge_resolved(first: JSON, second: JSON) -> JSON:
        merged: JSON = {k: dict(v) for k, v in first.items()}
        for key, values in second.items():
            merged.setdefault(key, {}).update(values)
        return merged

    def _command_scope(
        self, name: str, guild_id: int | None, guild_command: bool | None, command_type: int
    ) -> int | None:
        if guild_command is None:
            registered = self._commands.get(guild_id, {}) if guild_id is not None else {}
            guild_command = (command_type, name) in registered
        if guild_command:
            if guild_id is None:
                raise FakeDiscordError("guild commands cannot be invoked in DMs")
            if not self._bot_in(self.guilds[guild_id]):
                raise FakeDiscordError(
                    f"the app is no longer in guild {guild_id}: its guild commands are gone there"
                )
            return guild_id
        return None

    @staticmethod
    def _command_label(path: Sequence[str], command_type: int) -> str:
        if command_type == CHAT_INPUT:
            return "/" + " ".join(path)
        kind = "message" if command_type == MESSAGE_COMMAND else "user"
        return f"{kind} command {path[0]!r}"

    def _check_registered(self, scope: int | None, path: Sequence[str], command_type: int) -> None:
        """Users can only invoke what the application registered (synced), down to the
        subcommand, with the command's type: anything else is a mistake in the test."""
        node: JSON | None = self._commands.get(scope, {}).get((command_type, path[0]))
        for part in path[1:]:
            if node is None:
                break
            node = next(
                (
                    option
                    for option in node.get("options") or []
                    if option.get("type") in (1, 2) and option.get("name") == part
                ),
                None,
            )
        if node is None:
            where = "globally" if scope is None else f"in guild {scope}"
            raise FakeDiscordError(
                f"{self._command_label(path, command_type)} is not registered {where}: the bot "
                "must sync it (or the test register_commands() it) before a user can invoke it"
            )

    @staticmethod
    def _context_of(channel: FakeChannel) -> int:
        if channel.guild_id is not None:
            return CONTEXT_GUILD
        return CONTEXT_BOT_DM if channel.type is ChannelType.DM else CONTEXT_PRIVATE_CHANNEL

    def _check_context(
        self,
        scope: int | None,
        path: Sequence[str],
        channel: FakeChannel,
        user_id: int,
        command_type: int,
    ) -> JSON:
        """Discord shows a global command only in the interaction contexts its ``contexts``
        allow (all when unset; a ``dm_permission`` of false takes the bot's DM away), and only
        where one of its ``integration_types`` put the app: a guild install serves the server
        and the bot's DM, a user install (of the invoking user) any place, and is the only one
        that reaches a PRIVATE_CHANNEL. Returns ``authorizing_integration_owners``."""
        context = self._context_of(channel)
        if scope is not None:  # guild commands have no contexts: only their guild
            return {str(GUILD_INSTALL): str(scope)}
        command = self._commands.get(scope, {})[(command_type, path[0])]
        contexts = command.get("contexts")
        if contexts is None:
            # Discord's deprecated dm_permission, read when a command sets no contexts.
            no_dm = command.get("dm_permission") is False
            contexts = [c for c in _CONTEXT_NAMES if not (no_dm and c == CONTEXT_BOT_DM)]
        installs = command.get("integration_types")
        installs = [GUILD_INSTALL] if installs is None else [int(i) for i in installs]
        owners: JSON = {}
        # the guild install only serves guilds the bot is (still) in
        installed_here = channel.guild_id is None or self._bot_in(self.guilds[channel.guild_id])
        if GUILD_INSTALL in installs and context != CONTEXT_PRIVATE_CHANNEL and installed_here:
            owners[str(GUILD_INSTALL)] = str(channel.guild_id or 0)
        if USER_INSTALL in installs and user_id in self.user_installs:
            owners[str(USER_INSTALL)] = str(user_id)
        if context not in [int(c) for c in contexts] or not owners:
            raise FakeDiscordError(
                f"{self._command_label(path, command_type)} is not offered in "
                f"{_CONTEXT_NAMES[context]}: its contexts are {contexts} and integration_types "
                f"{installs}"
                + ("" if user_id in self.user_installs else " (the user has not installed the app)")
            )
        return owners

    def _command_id(self, scope: int | None, name: str, command_type: int) -> int:
        key = (scope, command_type, name)
        if key not in self._command_ids:
            self._command_ids[key] = self._ids.next()
        return self._command_ids[key]

    async def _component_interaction(
        self,
        *,
        message: int | SentMessage | JSON,
        custom_id: str,
        user_id: int,
        component_type: int,
        values: list[str] | None,
        timeout: float,
        created_ago: float = 0.0,
    ) -> FakeInteraction:
        mid = self._message_id_of(message)
        stored = self.messages.get(mid)
        if stored is None:
            raise FakeDiscordError(f"unknown message {mid}")
        available = _walk_custom_ids(stored.get("components", []))
        if custom_id not in available:
            raise FakeDiscordError(
                f"message {mid} has no component {custom_id!r}; it has {available!r}"
            )
        data: JSON = {"custom_id": custom_id, "component_type": component_type}
        if values is not None:
            data["values"] = values
        channel = self._channel(int(stored["channel_id"]))
        return await self._create_interaction(
            interaction_type=3,
            channel=channel,
            user_id=user_id,
            data=data,
            message=stored,
            timeout=timeout,
            created_ago=created_ago,
        )

    @staticmethod
    def _modal_submit_components(
        components: Sequence[JSON], values: Mapping[str, str]
    ) -> list[JSON]:
        submitted: list[JSON] = []
        for component in components:
            ctype = component.get("type")
            if ctype == 1:  # action row containing text inputs
                submitted.append(
                    {
                        "type": 1,
                        "components": FakeDiscord._modal_submit_components(
                            component.get("components", []), values
                        ),
                    }
                )
            elif ctype == 18:  # label wrapping one component
                inner = FakeDiscord._modal_submit_components([component["component"]], values)
                submitted.append({"type": 18, "component": inner[0]})
            elif ctype == 4:  # text input
                custom_id = str(component["custom_id"])
                submitted.append(
                    {"type": 4, "custom_id": custom_id, "value": values.get(custom_id, "")}
                )
        return submitted

    async def _create_interaction(
        self,
        *,
        interaction_type: int,
        channel: FakeChannel,
        user_id: int,
        data: JSON,
        timeout: float,
        message: JSON | None = None,
        created_ago: float = 0.0,
        owners: JSON | None = None,
    ) -> FakeInteraction:
        if created_ago < 0:
            raise FakeDiscordError("an interaction cannot be created in the future")
        user = self.add_user(user_id)
        iid = self._ids.back_dated(created_ago) if created_ago else self._ids.next()
        token = f"aW50ZXJhY3Rpb246{iid}:{secrets.token_urlsafe(48)}".replace(":", "_")
        guild_id = channel.guild_id
        channel_payload = self._channel_payload(channel)
        payload: JSON = {
            "id": str(iid),
            "application_id": str(self.application_id),
            "type": interaction_type,
            "data": data,
            "token": token,
            "version": 1,
            "locale": "en-US",
            "entitlements": [],
            "entitlement_sku_ids": [],
            "attachment_size_limit": 10 * 1024 * 1024,
            "channel_id": str(channel.id),
            "channel": channel_payload,
        }
        if guild_id is not None:
            guild = self.guilds[guild_id]
            member = guild.members.get(user.id)
            if member is None:
                raise FakeDiscordError(
                    f"user {user.id} is not a member of guild {guild_id}; add_member() first"
                )
            member_perms = self.permissions_for(guild_id, user.id, channel.id)
            channel_payload["permissions"] = str(member_perms)
            payload.update(
                guild_id=str(guild_id),
                guild={"id": str(guild_id), "locale": "en-US", "features": []},
                guild_locale="en-US",
                member={**member.to_payload(), "permissions": str(member_perms)},
                app_permissions=str(self.permissions_for(guild_id, self.bot_user.id, channel.id)),
                context=CONTEXT_GUILD,
                authorizing_integration_owners=owners or {"0": str(guild_id)},
            )
        else:
            if channel.type is ChannelType.GROUP_DM and user.id not in channel.recipient_ids:
                raise FakeDiscordError(f"user {user.id} is not in group DM {channel.id}")
            payload.update(
                user=user.to_payload(),
                # In a DM with the bot the app has the "DM" permission set Discord computes.
                app_permissions=str(DEFAULT_BOT_PERMISSIONS),
                context=self._context_of(channel),
                authorizing_integration_owners=owners or {"0": "0"},
            )
        if message is not None:
            payload["message"] = copy.deepcopy(message)
        interaction = FakeInteraction(
            id=iid,
            token=token,
            type=interaction_type,
            application_id=self.application_id,
            channel_id=channel.id,
            guild_id=guild_id,
            user_id=user.id,
            payload=payload,
        )
        await self._wait_for_owner_session(guild_id, timeout)
        loop = asyncio.get_running_loop()
        # Discord counts the 3 seconds from the interaction's creation (the time in its ID),
        # not from when the bot happens to read it.
        deadline = (
            None
            if self.interaction_ack_timeout is None
            else loop.time() - created_ago + self.interaction_ack_timeout
        )
        state = _InteractionState(
            interaction=interaction,
            deadline=deadline,
            token_expires_at=loop.time() - created_ago + self.interaction_token_lifetime,
        )
        if message is not None:
            state.component_message_id = int(message["id"])
        self._interactions[iid] = state
        self._interactions_by_token[token] = state
        self.interactions.append(interaction)
        self._dispatch("INTERACTION_CREATE", payload, guild_id=guild_id, intent=None)
        await self._flush_sessions(guild_id)
        return interaction

    def _original_response_shape(self, state: _InteractionState) -> dict[str, Any]:
        """The original response to a message command is a CONTEXT_MENU_COMMAND message
        (type 23) with ``message_reference`` and ``referenced_message`` pointing to the
        message the command ran on (Message resource, interaction metadata
        ``target_message_id``). Other responses keep the fake's plain shape."""
        data = state.interaction.payload.get("data") or {}
        if state.interaction.type != 2 or data.get("type") != MESSAGE_COMMAND:
            return {}
        target = self.messages.get(int(data["target_id"]))
        channel_id = target["channel_id"] if target else str(state.interaction.channel_id)
        reference: JSON = {
            "type": REFERENCE_DEFAULT,
            "message_id": str(data["target_id"]),
            "channel_id": channel_id,
        }
        if state.interaction.guild_id is not None:
            reference["guild_id"] = str(state.interaction.guild_id)
        return {"reference": reference, "message_type": MESSAGE_CONTEXT_MENU_COMMAND}

    def _interaction_metadata(self, state: _InteractionState) -> JSON:
        interaction = state.interaction
        metadata: JSON = {
            "id": str(interaction.id),
            "type": interaction.type,
            "user": self.users[interaction.user_id].to_payload(),
            "authorizing_integration_owners": interaction.payload.get(
                "authorizing_integration_owners", {}
            ),
        }
        if state.component_message_id is not None:
            metadata["interacted_message_id"] = str(state.component_message_id)
        if interaction.type == 2:
            metadata["name"] = interaction.payload["data"].get("name")
            if interaction.payload["data"].get("type") == MESSAGE_COMMAND:
                metadata["target_message_id"] = interaction.payload["data"]["target_id"]
        return metadata

    # ------------------------------------------------------------------ HTTP plumbing

    def _build_routes(self) -> list[_Route]:
        table: list[tuple[str, str, RouteKind, _Handler, bool]] = [
            ("GET", r"/users/@me", "other", self._get_me, True),
            ("GET", r"/users/(?P<user_id>\d+)", "other", self._get_user, True),
            ("POST", r"/users/@me/channels", "other", self._create_dm, True),
            ("GET", r"/oauth2/applications/@me", "other", self._get_application, True),
            ("GET", r"/applications/@me", "other", self._get_application, True),
            ("GET", r"/gateway", "other", self._get_gateway, False),
            ("GET", r"/gateway/bot", "other", self._get_gateway_bot, True),
            ("GET", r"/channels/(?P<channel_id>\d+)", "other", self._get_channel, True),
            ("GET", r"/channels/(?P<channel_id>\d+)/messages", "other", self._list_messages, True),
            (
                "POST",
                r"/channels/(?P<channel_id>\d+)/messages",
                "messages",
                self._create_message,
                True,
            ),
            (
                "GET",
                r"/channels/(?P<channel_id>\d+)/messages/(?P<message_id>\d+)",
                "other",
                self._get_message,
                True,
            ),
            (
                "PATCH",
                r"/channels/(?P<channel_id>\d+)/messages/(?P<message_id>\d+)",
                "edit",
                self._edit_message,
                True,
            ),
            (
                "DELETE",
                r"/channels/(?P<channel_id>\d+)/messages/(?P<message_id>\d+)",
                "delete",
                self._delete_message,
                True,
            ),
            (
                "PUT",
                r"/channels/(?P<channel_id>\d+)/messages/(?P<message_id>\d+)"
                r"/reactions/(?P<emoji>[^/]+)/@me",
                "reactions",
                self._add_reaction,
                True,
            ),
            (
                "DELETE",
                r"/channels/(?P<channel_id>\d+)/messages/(?P<message_id>\d+)"
                r"/reactions/(?P<emoji>[^/]+)/@me",
                "reactions",
                self._remove_reaction,
                True,
            ),
            ("POST", r"/channels/(?P<channel_id>\d+)/typing", "typing", self._typing, True),
            (
                "POST",
                r"/channels/(?P<channel_id>\d+)/threads",
                "threads",
                self._create_thread,
                True,
            ),
            (
                "POST",
                r"/channels/(?P<channel_id>\d+)/messages/(?P<message_id>\d+)/threads",
                "threads",
                self._create_thread,
                True,
            ),
            ("GET", r"/guilds/(?P<guild_id>\d+)", "other", self._get_guild, True),
            ("GET", r"/guilds/(?P<guild_id>\d+)/channels", "other", self._get_guild_channels, True),
            ("GET", r"/guilds/(?P<guild_id>\d+)/roles", "other", self._get_guild_roles, True),
            (
                "GET",
                r"/guilds/(?P<guild_id>\d+)/members/(?P<user_id>\d+)",
                "other",
                self._get_member,
                True,
            ),
            (
                "POST",
                r"/interactions/(?P<interaction_id>\d+)/(?P<token>[^/]+)/callback",
                "interaction_callback",
                self._interaction_callback,
                False,
            ),
            (
                "POST",
                r"/webhooks/(?P<app_id>\d+)/(?P<token>[^/]+)",
                "webhook",
                self._create_followup,
                False,
            ),
            (
                "GET",
                r"/webhooks/(?P<app_id>\d+)/(?P<token>[^/]+)/messages/"
                r"(?P<message_id>@original|\d+)",
                "webhook",
                self._get_webhook_message,
                False,
            ),
            (
                "PATCH",
                r"/webhooks/(?P<app_id>\d+)/(?P<token>[^/]+)/messages/"
                r"(?P<message_id>@original|\d+)",
                "webhook",
                self._edit_webhook_message,
                False,
            ),
            (
                "DELETE",
                r"/webhooks/(?P<app_id>\d+)/(?P<token>[^/]+)/messages/"
                r"(?P<message_id>@original|\d+)",
                "webhook",
                self._delete_webhook_message,
                False,
            ),
            (
                "GET",
                r"/applications/(?P<app_id>\d+)/commands",
                "commands",
                self._get_commands,
                True,
            ),
            (
                "PUT",
                r"/applications/(?P<app_id>\d+)/commands",
                "commands",
                self._put_commands,
                True,
            ),
            (
                "POST",
                r"/applications/(?P<app_id>\d+)/commands",
                "commands",
                self._upsert_command,
                True,
            ),
            (
                "GET",
                r"/applications/(?P<app_id>\d+)/guilds/(?P<guild_id>\d+)/commands",
                "commands",
                self._get_commands,
                True,
            ),
            (
                "PUT",
                r"/applications/(?P<app_id>\d+)/guilds/(?P<guild_id>\d+)/commands",
                "commands",
                self._put_commands,
                True,
            ),
            (
                "POST",
                r"/applications/(?P<app_id>\d+)/guilds/(?P<guild_id>\d+)/commands",
                "commands",
                self._upsert_command,
                True,
            ),
        ]
        return [
            _Route(method, re.compile(pattern), kind, handler, auth)
            for method, pattern, kind, handler, auth in table
        ]

    @staticmethod
    def _bucket_hash(kind: str) -> str:
        return f"{abs(hash(('fake-discord', kind))) & 0xFFFFFFFF:08x}"

    def _json(self, data: Any, *, status: int = 200, kind: str = "other") -> web.Response:
        # discord.py parses a body as JSON only if Content-Type is *exactly*
        # "application/json"; aiohttp's json_response would append "; charset=utf-8".
        headers = {"Content-Type": "application/json", **self._ok_ratelimit_headers(kind)}
        return web.Response(status=status, body=json.dumps(data).encode(), headers=headers)

    def _no_content(self, *, kind: str = "other") -> web.Response:
        return web.Response(status=204, headers=self._ok_ratelimit_headers(kind))

    def _ok_ratelimit_headers(self, kind: str) -> dict[str, str]:
        # Realistic headers with plenty of budget left, so discord.py's bucket tracking runs
        # but never pre-emptively sleeps.
        return {
            "Via": "1.1 google",
            "X-RateLimit-Limit": "50",
            "X-RateLimit-Remaining": "49",
            "X-RateLimit-Reset": f"{time.time() + 1:.3f}",
            "X-RateLimit-Reset-After": "1.000",
            "X-RateLimit-Bucket": self._bucket_hash(kind),
        }

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        if path.rstrip("/") == "/gateway" and request.headers.get("Upgrade", "").lower() == (
            "websocket"
        ):
            return await self._gateway(request)
        if path.startswith("/attachments/"):
            return self._serve_attachment(path)
        match = _API_PATH.match(path)
        if match is None:
            return await self._unknown(request, path)
        sub_path = match.group("rest").rstrip("/") or "/"
        for route in self._routes:
            route_match = route.pattern.fullmatch(sub_path)
            if route.method == request.method and route_match is not None:
                break
        else:
            return await self._unknown(request, sub_path)
        response = await self._run_route(request, route, route_match.groupdict(), sub_path)
        self._notify()
        return response

    async def _run_route(
        self, request: web.Request, route: _Route, params: dict[str, str], sub_path: str
    ) -> web.StreamResponse:
        response: web.StreamResponse
        body_for_record: Any = None
        if route.auth and request.headers.get("Authorization") != f"Bot {self.valid_token}":
            error: JSON = {"message": "401: Unauthorized", "code": 0}
            response = self._json(error, status=401, kind=route.kind)
            body_for_record = error
        elif (rule := self._take_failure(route.kind)) is not None:
            headers = {"Content-Type": "application/json", "Via": "1.1 google", **rule.headers()}
            response = web.Response(
                status=rule.status, body=json.dumps(rule.body).encode(), headers=headers
            )
            body_for_record = rule.body
        else:
            try:
                call = _Call(request, params, await _read_body(request))
                response = await route.handler(call)
            except _ApiError as exc:
                response = self._json(exc.body, status=exc.status, kind=route.kind)
                body_for_record = exc.body
        self.requests.append(
            RequestRecord(request.method, sub_path, route.kind, response.status, body_for_record)
        )
        return response

    def _take_failure(self, kind: RouteKind) -> _FailureRule | None:
        for rule in self._failures:
            if rule.kind in (kind, "any") and rule.remaining > 0:
                rule.remaining -= 1
                if rule.remaining == 0:
                    self._failures.remove(rule)
                return rule
        return None

    async def _unknown(self, request: web.Request, path: str) -> web.Response:
        raw = await request.read()
        self.unknown_routes.append(
            UnknownRoute(
                method=request.method,
                path=path,
                query=dict(request.query),
                body=raw.decode("utf-8", errors="replace"),
            )
        )
        self.requests.append(RequestRecord(request.method, path, "unknown", 404, None))
        self._notify()
        return self._json({"message": "404: Not Found", "code": 0}, status=404)

    def _serve_attachment(self, path: str) -> web.Response:
        parts = path.split("/")
        # /attachments/{channel_id}/{attachment_id}/{filename}
        if len(parts) >= 5 and parts[2].isdigit() and parts[3].isdigit():
            data = self._attachments.get((int(parts[3]), int(parts[2])))
            if data is not None:
                return web.Response(body=data, content_type=_guess_content_type(parts[4]))
        return web.Response(status=404, text="Not Found")

    # ------------------------------------------------------------------ REST handlers

    def _me_payload(self) -> JSON:
        return {
            **self.bot_user.to_payload(),
            "verified": True,
            "mfa_enabled": False,
            "email": None,
            "locale": "en-US",
            "premium_type": 0,
            "bio": "",
        }

    async def _get_me(self, call: _Call) -> web.Response:
        return self._json(self._me_payload())

    async def _get_user(self, call: _Call) -> web.Response:
        user = self.users.get(call.int_param("user_id"))
        if user is None:
            raise _ApiError(404, 10013, "Unknown User")
        return self._json(user.to_payload())

    async def _create_dm(self, call: _Call) -> web.Response:
        recipient = int(call.payload["recipient_id"])
        if recipient not in self.users:
            raise _ApiError(400, 50007, "Cannot send messages to this user")
        channel = self.channels[self.dm_channel_id(recipient)]
        return self._json(self._channel_payload(channel))

    async def _get_application(self, call: _Call) -> web.Response:
        return self._json(
            {
                "id": str(self.application_id),
                "name": self.bot_user.name,
                "icon": None,
                "description": "",
                "summary": "",
                "type": None,
                "hook": True,
                "bot_public": True,
                "bot_require_code_grant": False,
                "verify_key": "0" * 64,
                "flags": self._app_flags(),
                "owner": self.app_owner.to_payload(),
                "team": None,
                "bot": self.bot_user.to_payload(),
                "rpc_origins": [],
                "redirect_uris": [],
                "tags": [],
                "interactions_endpoint_url": None,  # anything else makes discord.py warn
                "role_connections_verification_url": None,
                "approximate_guild_count": sum(1 for g in self.guilds.values() if self._bot_in(g)),
            }
        )

    async def _get_gateway(self, call: _Call) -> web.Response:
        return self._json({"url": self.gateway_url.rstrip("/")})

    async def _get_gateway_bot(self, call: _Call) -> web.Response:
        return self._json(
            {
                "url": self.gateway_url.rstrip("/"),
                "shards": self.recommended_shards,
                "session_start_limit": {
                    "total": 1000,
                    "remaining": 999,
                    "reset_after": 14_400_000,
                    "max_concurrency": 1,
                },
            }
        )

    def _known_channel(self, call: _Call) -> FakeChannel:
        channel = self.channels.get(call.int_param("channel_id"))
        if channel is None:
            raise _ApiError(404, 10003, "Unknown Channel")
        if channel.guild_id is not None and not self._bot_in(self.guilds[channel.guild_id]):
            # the channel exists, in a guild the bot is not (or no longer) in
            raise _ApiError(403, 50001, "Missing Access")
        return channel

    def _require_view(self, channel: FakeChannel) -> int:
        """A guild channel's REST reads need View Channel (403 Missing Access without);
        returns the bot's permissions there (all of them in a DM)."""
        if channel.guild_id is None:
            return ALL_PERMISSIONS
        perms = self.permissions_for(channel.guild_id, self.bot_user.id, channel.id)
        if not perms & Permission.VIEW_CHANNEL:
            raise _ApiError(403, 50001, "Missing Access")
        return perms

    def _check_forbidden(self, channel: FakeChannel, needed: int = 0) -> None:
        """403 for :meth:`forbid_channel`, and - like Discord - when the bot's permissions in
        the channel (roles + overwrites, see :meth:`permissions_for`) lack ``needed``."""
        if channel.id in self._forbidden_channels:
            raise _ApiError(403, 50013, "Missing Permissions")
        if channel.guild_id is None or not needed:
            return
        perms = self.permissions_for(channel.guild_id, self.bot_user.id, channel.id)
        if not perms & Permission.VIEW_CHANNEL:
            raise _ApiError(403, 50001, "Missing Access")
        if perms & needed != needed:
            raise _ApiError(403, 50013, "Missing Permissions")

    @staticmethod
    def _send_permission(channel: FakeChannel) -> int:
        if channel.is_thread:
            return int(Permission.SEND_MESSAGES_IN_THREADS)
        return int(Permission.SEND_MESSAGES)

    async def _get_channel(self, call: _Call) -> web.Response:
        return self._json(self._channel_payload(self._known_channel(call)))

    async def _list_messages(self, call: _Call) -> web.Response:
        """Get Channel Messages, as documented: newest to oldest; ``limit`` 1-100 (default
        50); at most one of ``before`` (the newest messages older than it), ``after`` (the
        oldest messages newer than it: what discord.py pages forward with) and ``around``
        (the message and up to ``limit // 2`` on each side, so an even limit may give
        ``limit + 1``, as discord.py documents); View Channel needed (403 Missing Access);
        without Read Message History "no messages will be returned" (an empty list, not an
        error). Deleted messages are gone; edited ones show their edit."""
        channel = self._known_channel(call)
        perms = self._require_view(channel)
        query = call.request.query
        limit = self._query_int(query, "limit", 50)
        if not 1 <= limit <= 100:
            code = "NUMBER_TYPE_MIN" if limit < 1 else "NUMBER_TYPE_MAX"
            bound = "greater than or equal to 1" if limit < 1 else "less than or equal to 100"
            raise _form_error("limit", code, f"int value should be {bound}.")
        anchors = [key for key in ("around", "before", "after") if key in query]
        if len(anchors) > 1:
            raise _form_error(
                anchors[1], "BASE_TYPE_INVALID", "before, after and around are mutually exclusive"
            )
        if not perms & Permission.READ_MESSAGE_HISTORY:
            return self._json([])
        oldest_first = sorted(
            (m for m in self.messages.values() if int(m["channel_id"]) == channel.id),
            key=lambda m: int(m["id"]),
        )
        if "before" in query:
            before = self._query_int(query, "before", 0)
            found = [m for m in oldest_first if int(m["id"]) < before][-limit:]
        elif "after" in query:
            after = self._query_int(query, "after", 0)
            found = [m for m in oldest_first if int(m["id"]) > after][:limit]
        elif "around" in query:
            around = self._query_int(query, "around", 0)
            half = limit // 2
            older = [m for m in oldest_first if int(m["id"]) < around][-half:] if half else []
            itself = [m for m in oldest_first if int(m["id"]) == around]
            newer = [m for m in oldest_first if int(m["id"]) > around][:half]
            found = older + itself + newer
        else:
            found = oldest_first[-limit:]
        return self._json(list(reversed(found)))  # newest first, like Discord

    @staticmethod
    def _query_int(query: Mapping[str, str], name: str, default: int) -> int:
        raw = query.get(name)
        if raw is None:
            return default
        try:
            return int(raw)
        except ValueError:
            code = "NUMBER_TYPE_COERCE" if name == "limit" else "SNOWFLAKE_TYPE_INVALID"
            raise _form_error(name, code, f'Value "{raw}" is not int.') from None

    def _validate_message_payload(self, payload: JSON, files: Sequence[UploadedFile]) -> None:
        content = payload.get("content")
        if content is not None and len(str(content)) > MAX_CONTENT_LENGTH:
            raise _form_error(
                "content",
                "BASE_TYPE_MAX_LENGTH",
                f"Must be {MAX_CONTENT_LENGTH} or fewer in length.",
            )
        _validate_embeds(payload.get("embeds") or [])

    def _require_non_empty(self, payload: JSON, files: Sequence[UploadedFile]) -> None:
        if not (
            payload.get("content")
            or payload.get("embeds")
            or payload.get("components")
            or payload.get("sticker_ids")
            or payload.get("poll")
            or files
        ):
            raise _ApiError(400, 50006, "Cannot send an empty message")

    async def _create_message(self, call: _Call) -> web.Response:
        channel = self._known_channel(call)
        payload = call.payload
        files = call.body.files
        needed = self._send_permission(channel)
        if files:
            needed |= Permission.ATTACH_FILES
        if payload.get("message_reference"):
            needed |= Permission.READ_MESSAGE_HISTORY  # replying needs to see history
        self._check_forbidden(channel, needed)
        if channel.type is ChannelType.GUILD_FORUM:
            raise _ApiError(400, 50008, "Cannot send messages in a non-text channel")
        self._validate_message_payload(payload, files)
        raw_reference = payload.get("message_reference")
        forwarding = (
            isinstance(raw_reference, dict)
            and int(raw_reference.get("type") or 0) == REFERENCE_FORWARD
        )
        if not forwarding:  # "when forwarding a message, only message_reference is required"
            self._require_non_empty(payload, files)
        snapshots: list[JSON] | None = None
        reference: JSON | None
        flags = int(payload.get("flags") or 0)
        if forwarding:
            assert isinstance(raw_reference, dict)
            reference, snapshot = self._forward_reference(raw_reference)
            snapshots = [snapshot]
            flags |= HAS_SNAPSHOT_FLAG
        else:
            reference = self._validate_reference(channel, raw_reference)
        poll: JSON | None = None
        if payload.get("poll") is not None:
            poll = self._poll_from_request(payload["poll"])
        message = self._new_message(
            channel=channel,
            author=self.bot_user,
            content=str(payload.get("content") or ""),
            embeds=list(payload.get("embeds") or []),
            components=list(payload.get("components") or []),
            flags=flags,
            attachments=self._stored_attachments(channel.id, files),
            reference=reference,
            snapshots=snapshots,
            poll=poll,
        )
        self.sent_messages.append(
            SentMessage(
                id=int(message["id"]),
                channel_id=channel.id,
                guild_id=channel.guild_id,
                content=payload.get("content"),
                embeds=list(payload.get("embeds") or []),
                components=list(payload.get("components") or []),
                flags=int(payload.get("flags") or 0),
                attachments=list(files),
                # Normalised the way Discord returns it (snowflakes as strings).
                message_reference=reference,
                allowed_mentions=payload.get("allowed_mentions"),
                payload=payload,
                at=time.monotonic(),
            )
        )
        self._echo_bot_message("MESSAGE_CREATE", message)
        return self._json(message, kind="messages")

    def _forward_reference(self, raw: JSON) -> tuple[JSON, JSON]:
        """The bot forwards a message: ``message_id`` and ``channel_id`` are required, the bot
        must view the source, and only basic messages can be forwarded. Returns the stored
        reference and the message snapshot."""
        for key in ("message_id", "channel_id"):
            if raw.get(key) is None:
                raise _form_error_at(
                    ("message_reference", key), "BASE_TYPE_REQUIRED", "This field is required"
                )
        source_channel = self.channels.get(int(raw["channel_id"]))
        if source_channel is None:
            raise _form_error(
                "message_reference", "MESSAGE_REFERENCE_UNKNOWN_MESSAGE", "Unknown message"
            )
        self._require_view(source_channel)
        source = self.messages.get(int(raw["message_id"]))
        if source is None or int(source["channel_id"]) != source_channel.id:
            raise _form_error(
                "message_reference", "MESSAGE_REFERENCE_UNKNOWN_MESSAGE", "Unknown message"
            )
        if int(source.get("type") or 0) not in FORWARDABLE_MESSAGE_TYPES or "poll" in source:
            raise _form_error(
                "message_reference",
                "MESSAGE_REFERENCE_INVALID_TYPE",
                "Cannot forward this type of message",
            )
        reference: JSON = {
            "type": REFERENCE_FORWARD,
            "message_id": source["id"],
            "channel_id": source["channel_id"],
        }
        if source_channel.guild_id is not None:
            reference["guild_id"] = str(source_channel.guild_id)
        snapshot = {k: copy.deepcopy(source[k]) for k in SNAPSHOT_FIELDS if k in source}
        return reference, {"message": snapshot}

    def _poll_from_request(self, raw: Any) -> JSON:
        """A poll create request (``question``, ``answers``, ``duration``,
        ``allow_multiselect``, ``layout_type``) -> the poll object, or 50035 at the first
        documented limit it breaks."""
        if not isinstance(raw, dict):
            raise _form_error(
                "poll", "MODEL_TYPE_CONVERT", "Only dictionaries may be used in a ModelType"
            )
        answers = raw.get("answers") or []
        poll = self._new_poll(
            question=(raw.get("question") or {}).get("text"),
            answers=[
                (a.get("poll_media") or {}).get("text") if isinstance(a, dict) else None
                for a in answers
            ],
            duration_hours=raw.get("duration", 24),
            allow_multiselect=bool(raw.get("allow_multiselect", False)),
            layout_type=raw.get("layout_type", 1),
        )
        if isinstance(poll, tuple):
            raise _form_error_at(*poll)
        return poll

    def _validate_reference(self, channel: FakeChannel, raw: Any) -> JSON | None:
        if not isinstance(raw, dict):
            return None
        target = raw.get("message_id")
        stored = self.messages.get(int(target)) if target is not None else None
        if stored is None:
            if raw.get("fail_if_not_exists", True):
                raise _form_error(
                    "message_reference", "MESSAGE_REFERENCE_UNKNOWN_MESSAGE", "Unknown message"
                )
            return None
        reference: JSON = {
            "type": int(raw.get("type") or 0),
            "message_id": str(target),
            "channel_id": stored["channel_id"],
        }
        if channel.guild_id is not None:
            reference["guild_id"] = str(channel.guild_id)
        return reference

    def _known_message(self, channel: FakeChannel, call: _Call) -> JSON:
        message = self.messages.get(call.int_param("message_id"))
        if message is None or int(message["channel_id"]) != channel.id:
            raise _ApiError(404, 10008, "Unknown Message")
        return message

    async def _get_message(self, call: _Call) -> web.Response:
        """Get Channel Message: View Channel (403 Missing Access) and Read Message History
        (403 Missing Permissions) in a guild channel."""
        channel = self._known_channel(call)
        if not self._require_view(channel) & Permission.READ_MESSAGE_HISTORY:
            raise _ApiError(403, 50013, "Missing Permissions")
        return self._json(self._known_message(channel, call))

    def _apply_edit(self, message: JSON, payload: JSON, files: Sequence[UploadedFile]) -> None:
        """Apply a PATCH body to a stored message the way Discord does."""
        for key in ("content", "embeds", "components", "allowed_mentions"):
            if key in payload:
                message[key] = (
                    payload[key] if payload[key] is not None else ("" if key == "content" else [])
                )
        if "flags" in payload and payload["flags"] is not None:
            # Only SUPPRESS_EMBEDS and IS_COMPONENTS_V2 can be changed by an edit; the rest
            # (e.g. EPHEMERAL) is fixed at creation.
            mutable = 4 | (1 << 15)
            current = int(message.get("flags") or 0)
            message["flags"] = (current & ~mutable) | (int(payload["flags"]) & mutable)
        # Editing a deferred ("thinking...") response turns it into a normal message.
        message["flags"] = int(message.get("flags") or 0) & ~LOADING_FLAG
        channel_id = int(message["channel_id"])
        if "attachments" in payload or files:
            kept_ids = {
                str(a.get("id")) for a in (payload.get("attachments") or []) if isinstance(a, dict)
            }
            kept = [a for a in message.get("attachments", []) if a["id"] in kept_ids]
            if "attachments" not in payload:
                kept = list(message.get("attachments", []))
            message["attachments"] = kept + self._stored_attachments(channel_id, files)
        message["edited_timestamp"] = _now_iso()

    async def _edit_message(self, call: _Call) -> web.Response:
        channel = self._known_channel(call)
        self._check_forbidden(channel, int(Permission.VIEW_CHANNEL))
        message = self._known_message(channel, call)
        if int(message["author"]["id"]) != self.bot_user.id:
            raise _ApiError(403, 50005, "Cannot edit a message authored by another user")
        self._validate_message_payload(call.payload, call.body.files)
        self._apply_edit(message, call.payload, call.body.files)
        self.edits.append(
            MessageEdit(
                message_id=int(message["id"]),
                channel_id=channel.id,
                via="channel",
                payload=call.payload,
                attachments=list(call.body.files),
                interaction_id=None,
                at=time.monotonic(),
            )
        )
        self._echo_bot_message("MESSAGE_UPDATE", message)
        return self._json(message, kind="edit")

    def _delete_stored_message(self, channel: FakeChannel, message: JSON) -> None:
        mid = int(message["id"])
        self._forget_message(channel, message)
        self.deleted_messages.append((channel.id, mid))
        if self.echo_bot_messages and not int(message.get("flags") or 0) & EPHEMERAL_FLAG:
            data: JSON = {"id": str(mid), "channel_id": str(channel.id)}
            if channel.guild_id is not None:
                data["guild_id"] = str(channel.guild_id)
            intent = Intent.GUILD_MESSAGES if channel.guild_id else Intent.DIRECT_MESSAGES
            self._dispatch("MESSAGE_DELETE", data, guild_id=channel.guild_id, intent=intent)

    async def _delete_message(self, call: _Call) -> web.Response:
        channel = self._known_channel(call)
        message = self._known_message(channel, call)
        if int(message["author"]["id"]) != self.bot_user.id:
            guild_id = channel.guild_id
            if guild_id is None or not (
                self.permissions_for(guild_id, self.bot_user.id, channel.id)
                & Permission.MANAGE_MESSAGES
            ):
                raise _ApiError(403, 50013, "Missing Permissions")
        self._delete_stored_message(channel, message)
        return self._no_content(kind="delete")

    async def _add_reaction(self, call: _Call) -> web.Response:
        channel = self._known_channel(call)
        self._check_forbidden(
            channel, int(Permission.ADD_REACTIONS | Permission.READ_MESSAGE_HISTORY)
        )
        message = self._known_message(channel, call)
        self.reactions.append(
            ReactionRecord(channel.id, int(message["id"]), call.params["emoji"], added=True)
        )
        return self._no_content(kind="reactions")

    async def _remove_reaction(self, call: _Call) -> web.Response:
        channel = self._known_channel(call)
        message = self._known_message(channel, call)
        self.reactions.append(
            ReactionRecord(channel.id, int(message["id"]), call.params["emoji"], added=False)
        )
        return self._no_content(kind="reactions")

    async def _typing(self, call: _Call) -> web.Response:
        channel = self._known_channel(call)
        self._check_forbidden(channel, self._send_permission(channel))
        self.typing.append(TypingEvent(channel_id=channel.id, at=time.monotonic()))
        return self._no_content(kind="typing")

    async def _create_thread(self, call: _Call) -> web.Response:
        parent = self._known_channel(call)
        payload = call.payload
        if parent.type is ChannelType.GUILD_FORUM:
            self._check_forbidden(parent, int(Permission.SEND_MESSAGES))
        elif int(payload.get("type") or 11) == ChannelType.PRIVATE_THREAD:
            self._check_forbidden(parent, int(Permission.CREATE_PRIVATE_THREADS))
        else:
            self._check_forbidden(parent, int(Permission.CREATE_PUBLIC_THREADS))
        name = str(payload.get("name") or "thread")
        if parent.guild_id is None or parent.type not in (
            ChannelType.GUILD_TEXT,
            ChannelType.GUILD_FORUM,
        ):
            raise _ApiError(400, 50024, "Cannot execute action on this channel type")
        starter_id = call.params.get("message_id")
        if starter_id is not None:
            self._known_message(parent, call)
            thread_id = int(starter_id)  # threads started from a message share its ID
            private = False
        else:
            thread_id = self._ids.next()
            private = int(payload.get("type") or 11) == ChannelType.PRIVATE_THREAD
        thread = FakeChannel(
            id=thread_id,
            type=ChannelType.PRIVATE_THREAD if private else ChannelType.PUBLIC_THREAD,
            name=name,
            guild_id=parent.guild_id,
            parent_id=parent.id,
            owner_id=self.bot_user.id,
            # the creator of a thread is its first member
            member_ids={self.bot_user.id},
            applied_tags=self._requested_tags(parent, payload.get("applied_tags")),
        )
        self.channels[thread.id] = thread
        response = self._channel_payload(thread)
        self._dispatch_thread_create(thread, newly_created=True)
        if parent.type is ChannelType.GUILD_FORUM:
            # A forum post is a thread plus a starter message that shares the thread's ID.
            starter = payload.get("message") or {}
            self._validate_message_payload(starter, call.body.files)
            message = self._new_message(
                channel=thread,
                author=self.bot_user,
                content=str(starter.get("content") or ""),
                embeds=list(starter.get("embeds") or []),
                components=list(starter.get("components") or []),
                attachments=self._stored_attachments(thread.id, call.body.files),
                message_id=thread.id,
            )
            self.sent_messages.append(
                SentMessage(
                    id=thread.id,
                    channel_id=thread.id,
                    guild_id=thread.guild_id,
                    content=starter.get("content"),
                    embeds=list(starter.get("embeds") or []),
                    components=list(starter.get("components") or []),
                    flags=int(starter.get("flags") or 0),
                    attachments=list(call.body.files),
                    message_reference=None,
                    allowed_mentions=starter.get("allowed_mentions"),
                    payload=starter,
                    at=time.monotonic(),
                )
            )
            response["message"] = message
            self._echo_bot_message("MESSAGE_CREATE", message)
        return self._json(response, status=201, kind="threads")

    def _requested_tags(self, parent: FakeChannel, raw: Any) -> list[int]:
        """``applied_tags`` of a forum post the bot creates: at most 5 of the forum's tags
        (moderated ones need Manage Threads); only forum posts have tags."""
        if not raw:
            return []
        if parent.type is not ChannelType.GUILD_FORUM:
            return []  # ignored outside forums
        if len(raw) > MAX_APPLIED_TAGS:
            raise _too_long(("applied_tags",), MAX_APPLIED_TAGS)
        by_id = {tag.id: tag for tag in parent.available_tags}
        assert parent.guild_id is not None
        perms = self.permissions_for(parent.guild_id, self.bot_user.id, parent.id)
        applied: list[int] = []
        for index, raw_id in enumerate(raw):
            tag = by_id.get(int(raw_id))
            if tag is None:
                raise _form_error_at(
                    ("applied_tags", index), "UNKNOWN_TAG", f"Unknown tag {raw_id}"
                )
            if tag.moderated and not perms & Permission.MANAGE_THREADS:
                raise _ApiError(403, 50013, "Missing Permissions")
            if tag.id not in applied:
                applied.append(tag.id)
        return applied

    def _known_guild(self, call: _Call) -> FakeGuild:
        guild = self.guilds.get(call.int_param("guild_id"))
        if guild is None:
            raise _ApiError(404, 10004, "Unknown Guild")
        if not self._bot_in(guild):
            raise _ApiError(403, 50001, "Missing Access")
        return guild

    async def _get_guild(self, call: _Call) -> web.Response:
        guild = self._known_guild(call)
        return self._json(
            {
                **self._guild_payload(guild),
                "approximate_member_count": len(guild.members),
                "approximate_presence_count": 0,
            }
        )

    async def _get_guild_channels(self, call: _Call) -> web.Response:
        guild = self._known_guild(call)
        return self._json([self._channel_payload(self.channels[c]) for c in guild.channel_ids])

    async def _get_guild_roles(self, call: _Call) -> web.Response:
        guild = self._known_guild(call)
        return self._json([r.to_payload() for r in guild.roles.values()])

    async def _get_member(self, call: _Call) -> web.Response:
        guild = self._known_guild(call)
        member = guild.members.get(call.int_param("user_id"))
        if member is None:
            raise _ApiError(404, 10007, "Unknown Member")
        return self._json(member.to_payload())

    # -- interactions ----------------------------------------------------------------------

    def _live_interaction(self, call: _Call) -> _InteractionState:
        state = self._interactions.get(call.int_param("interaction_id"))
        if state is None or state.interaction.token != call.params["token"]:
            raise _ApiError(404, 10062, "Unknown interaction")
        loop = asyncio.get_running_loop()
        if (
            state.response_type is None
            and state.deadline is not None
            and (loop.time() > state.deadline)
        ):
            # Discord forgets unanswered interactions after 3 seconds.
            raise _ApiError(404, 10062, "Unknown interaction")
        if state.response_type is not None:
            raise _ApiError(400, 40060, "Interaction has already been acknowledged.")
        return state

    async def _interaction_callback(self, call: _Call) -> web.Response:
        state = self._live_interaction(call)
        payload = call.payload
        response_type = int(payload.get("type") or 0)
        data: JSON = dict(payload.get("data") or {})
        interaction = state.interaction
        channel = self._interaction_channel(state)
        files = call.body.files
        resource: JSON | None = {"type": response_type}
        message: JSON | None = None

        if response_type in (4, 7):
            self._validate_message_payload(data, files)
        if response_type == 4:  # CHANNEL_MESSAGE_WITH_SOURCE
            self._require_non_empty(data, files)
            message = self._new_message(
                channel=channel,
                author=self.bot_user,
                content=str(data.get("content") or ""),
                embeds=list(data.get("embeds") or []),
                components=list(data.get("components") or []),
                flags=int(data.get("flags") or 0),
                attachments=self._stored_attachments(channel.id, files),
                webhook=True,
                interaction_metadata=self._interaction_metadata(state),
                **self._original_response_shape(state),
            )
            state.original_message_id = int(message["id"])
            self._echo_bot_message("MESSAGE_CREATE", message)
        elif response_type == 5:  # DEFERRED_CHANNEL_MESSAGE_WITH_SOURCE ("thinking...")
            message = self._new_message(
                channel=channel,
                author=self.bot_user,
                content="",
                flags=(int(data.get("flags") or 0) & EPHEMERAL_FLAG) | LOADING_FLAG,
                webhook=True,
                interaction_metadata=self._interaction_metadata(state),
                **self._original_response_shape(state),
            )
            state.original_message_id = int(message["id"])
            self._echo_bot_message("MESSAGE_CREATE", message)
        elif response_type in (6, 7):  # DEFERRED_UPDATE_MESSAGE / UPDATE_MESSAGE
            if state.component_message_id is None:
                raise _ApiError(400, 40004, "Interaction response type requires a message")
            state.original_message_id = state.component_message_id
            if response_type == 7:
                message = self.messages[state.component_message_id]
                self._apply_edit(message, data, files)
                self._echo_bot_message("MESSAGE_UPDATE", message)
            else:
                resource = None
        elif response_type == 9:  # MODAL
            if interaction.type == 5:
                raise _ApiError(400, 40004, "Cannot respond to a modal submit with a modal")
            state.modal = data
            resource = None
        elif response_type not in (1, 8, 12):
            raise _form_error("type", "BASE_TYPE_CHOICES", f"Value {response_type} is invalid")

        state.response_type = response_type
        self.interaction_responses.append(
            InteractionResponse(
                interaction_id=interaction.id,
                token=interaction.token,
                type=response_type,
                data=data,
                attachments=list(files),
                message_id=state.original_message_id,
                at=time.monotonic(),
            )
        )
        if call.request.query.get("with_response") not in ("1", "true", "True"):
            return self._no_content(kind="interaction_callback")
        callback: JSON = {
            "interaction": {
                "id": str(interaction.id),
                "type": interaction.type,
                "response_message_id": _opt_str(state.original_message_id),
                "response_message_loading": response_type == 5,
                "response_message_ephemeral": bool(int(data.get("flags") or 0) & EPHEMERAL_FLAG),
            }
        }
        if resource is not None and message is not None:
            resource["message"] = message
        if resource is not None:
            callback["resource"] = resource
        return self._json(callback, kind="interaction_callback")

    def _interaction_channel(self, state: _InteractionState) -> FakeChannel:
        """The interaction's channel; deleted since, nothing can be posted there."""
        channel = self.channels.get(state.interaction.channel_id)
        if channel is None:
            raise _ApiError(404, 10003, "Unknown Channel")
        return channel

    def _webhook_interaction(self, call: _Call) -> _InteractionState:
        state = self._interactions_by_token.get(call.params["token"])
        if call.int_param("app_id") != self.application_id or state is None:
            raise _ApiError(404, 10015, "Unknown Webhook")
        if asyncio.get_running_loop().time() > state.token_expires_at:
            raise _ApiError(401, 50027, "Invalid Webhook Token")
        if state.response_type is None:
            # Follow-ups and @original only exist once the interaction was acknowledged.
            raise _ApiError(404, 10015, "Unknown Webhook")
        return state

    def _webhook_target(self, call: _Call, state: _InteractionState) -> JSON:
        raw = call.params["message_id"]
        mid = state.original_message_id if raw == "@original" else int(raw)
        message = self.messages.get(mid) if mid is not None else None
        if message is None:
            raise _ApiError(404, 10008, "Unknown Message")
        return message

    async def _create_followup(self, call: _Call) -> web.Response:
        state = self._webhook_interaction(call)
        payload = call.payload
        files = call.body.files
        self._validate_message_payload(payload, files)
        self._require_non_empty(payload, files)
        channel = self._interaction_channel(state)
        loading = self._loading_response(state)
        if loading is not None:
            # The first follow-up after a deferred response is the answer the "thinking..."
            # message waited for: it replaces that message (as Edit Original Interaction
            # Response would), and stays as ephemeral, or as public, as the defer made it.
            message = loading
            self._apply_edit(message, payload, files)
            event = "MESSAGE_UPDATE"
        else:
            metadata = self._interaction_metadata(state)
            if state.original_message_id is not None:
                metadata["original_response_message_id"] = str(state.original_message_id)
            message = self._new_message(
                channel=channel,
                author=self.bot_user,
                content=str(payload.get("content") or ""),
                embeds=list(payload.get("embeds") or []),
                components=list(payload.get("components") or []),
                flags=int(payload.get("flags") or 0),
                attachments=self._stored_attachments(channel.id, files),
                webhook=True,
                interaction_metadata=metadata,
            )
            event = "MESSAGE_CREATE"
        self.followups.append(
            Followup(
                interaction_id=state.interaction.id,
                token=state.interaction.token,
                message_id=int(message["id"]),
                channel_id=channel.id,
                payload=payload,
                attachments=list(files),
                at=time.monotonic(),
                message_flags=int(message.get("flags") or 0),
                replaced_loading=loading is not None,
            )
        )
        self._echo_bot_message(event, message)
        if call.request.query.get("wait") in ("1", "true", "True"):
            return self._json(message, kind="webhook")
        return self._no_content(kind="webhook")

    def _loading_response(self, state: _InteractionState) -> JSON | None:
        """The deferred response's "thinking..." message, while nothing has filled it yet."""
        if state.response_type != 5 or state.original_message_id is None:
            return None
        message = self.messages.get(state.original_message_id)
        if message is None or not int(message.get("flags") or 0) & LOADING_FLAG:
            return None
        return message

    async def _get_webhook_message(self, call: _Call) -> web.Response:
        state = self._webhook_interaction(call)
        return self._json(self._webhook_target(call, state), kind="webhook")

    async def _edit_webhook_message(self, call: _Call) -> web.Response:
        state = self._webhook_interaction(call)
        message = self._webhook_target(call, state)
        self._validate_message_payload(call.payload, call.body.files)
        self._apply_edit(message, call.payload, call.body.files)
        self.edits.append(
            MessageEdit(
                message_id=int(message["id"]),
                channel_id=int(message["channel_id"]),
                via="interaction",
                payload=call.payload,
                attachments=list(call.body.files),
                interaction_id=state.interaction.id,
                at=time.monotonic(),
            )
        )
        self._echo_bot_message("MESSAGE_UPDATE", message)
        return self._json(message, kind="webhook")

    async def _delete_webhook_message(self, call: _Call) -> web.Response:
        state = self._webhook_interaction(call)
        message = self._webhook_target(call, state)
        self._delete_stored_message(self.channels[int(message["channel_id"])], message)
        return self._no_content(kind="webhook")

    # -- application commands -------------------------------------------------------------

    def _command_guild(self, call: _Call) -> int | None:
        if call.int_param("app_id") != self.application_id:
            raise _ApiError(
                403, 20012, "You are not authorized to perform this action on this application"
            )
        guild_id = call.params.get("guild_id")
        if guild_id is None:
            return None
        guild = self.guilds.get(int(guild_id))
        if guild is None or not self._bot_in(guild):
            raise _ApiError(403, 50001, "Missing Access")
        return int(guild_id)

    @staticmethod
    def _validate_command(command: Any, at: Sequence[str | int] = ()) -> tuple[int, str]:
        """Refuse what Discord refuses when registering a command (Application Commands,
        "Application Command Structure" and "Naming"); returns its ``(type, name)`` key.

        CHAT_INPUT (1): a lowercase name matching
        ``^[-_'\\p{L}\\p{N}\\p{sc=Deva}\\p{sc=Thai}]{1,32}$``, a description of 1-100
        characters, at most 25 options. USER (2) and MESSAGE (3) context menus: a name of
        1-32 characters that may have capitals and spaces, no description
        (APPLICATION_COMMAND_CONTEXT_MENU_DESCRIPTION_INVALID; an empty string passes, it is
        what Discord itself returns) and no options
        (APPLICATION_COMMAND_CONTEXT_MENU_OPTIONS_INVALID). Errors are nested under the
        command's index for a bulk overwrite, as Discord nests them.
        """
        if not isinstance(command, dict):
            raise _form_error_at(
                at,
                "MODEL_TYPE_CONVERT",
                "Only dictionaries may be used in a ModelType",
            )
        raw_type = command.get("type", CHAT_INPUT)
        if raw_type not in (CHAT_INPUT, USER_COMMAND, MESSAGE_COMMAND) or isinstance(
            raw_type, bool
        ):
            # PRIMARY_ENTRY_POINT (4) exists only for apps with an Activity.
            raise _form_error_at(
                (*at, "type"), "BASE_TYPE_CHOICES", "Value must be one of {1, 2, 3}."
            )
        command_type = int(raw_type)
        name = command.get("name")
        if not isinstance(name, str) or not 1 <= len(name) <= 32:
            raise _form_error_at(
                (*at, "name"), "APPLICATION_COMMAND_INVALID_NAME", "Command name is invalid"
            )
        description = command.get("description")
        options = command.get("options")
        if command_type == CHAT_INPUT:
            if not _valid_chat_input_name(name):
                raise _form_error_at(
                    (*at, "name"), "APPLICATION_COMMAND_INVALID_NAME", "Command name is invalid"
                )
            if description is None:
                raise _form_error_at(
                    (*at, "description"), "BASE_TYPE_REQUIRED", "This field is required"
                )
            if not isinstance(description, str) or not (
                1 <= len(description) <= MAX_COMMAND_DESCRIPTION
            ):
                raise _form_error_at(
                    (*at, "description"),
                    "BASE_TYPE_BAD_LENGTH",
                    f"Must be between 1 and {MAX_COMMAND_DESCRIPTION} in length.",
                )
            if options is not None and len(options) > MAX_COMMAND_OPTIONS:
                raise _too_long((*at, "options"), MAX_COMMAND_OPTIONS)
        else:
            if description:
                raise _form_error_at(
                    (*at, "description"),
                    "APPLICATION_COMMAND_CONTEXT_MENU_DESCRIPTION_INVALID",
                    "Context menu commands cannot have description",
                )
            if options:
                raise _form_error_at(
                    (*at, "options"),
                    "APPLICATION_COMMAND_CONTEXT_MENU_OPTIONS_INVALID",
                    "Context menu commands cannot have options",
                )
        return command_type, name

    def _store_command(self, scope: int | None, command: JSON) -> tuple[JSON, bool]:
        """Store a validated command; returns it as Discord returns it, and whether it is new."""
        command_type, name = self._validate_command(command)
        defaults: JSON = {
            "type": command_type,
            "description": "",
            "default_member_permissions": None,
            "dm_permission": True,
            "nsfw": False,
        }
        if command_type == CHAT_INPUT:
            defaults["options"] = []
        stored: JSON = {
            **defaults,
            **command,
            "type": command_type,
            "id": str(self._command_id(scope, name, command_type)),
            "application_id": str(self.application_id),
            "version": str(self._ids.next()),
        }
        if command_type != CHAT_INPUT:
            stored["description"] = ""  # "an empty string (instead of null) when fetching"
            stored.pop("options", None)
        if scope is not None:
            stored["guild_id"] = str(scope)
        registered = self._commands.setdefault(scope, {})
        is_new = (command_type, name) not in registered
        registered[(command_type, name)] = stored
        return stored, is_new

    async def _get_commands(self, call: _Call) -> web.Response:
        scope = self._command_guild(call)
        return self._json(list(self._commands.get(scope, {}).values()), kind="commands")

    async def _put_commands(self, call: _Call) -> web.Response:
        scope = self._command_guild(call)
        body = call.body.json
        if not isinstance(body, list):
            raise _form_error("_root", "LIST_TYPE_CONVERT", "Must be an array.")
        keys = [self._validate_command(command, (index,)) for index, command in enumerate(body)]
        if len(set(keys)) != len(keys):
            # names are unique per type within a scope
            raise _form_error_at(
                (),
                "APPLICATION_COMMANDS_DUPLICATE_NAME",
                "Application command names must be unique",
            )
        self._commands[scope] = {}
        stored = [self._store_command(scope, dict(command))[0] for command in body]
        self.synced_commands.append(SyncedCommands(guild_id=scope, commands=list(body)))
        return self._json(stored, kind="commands")

    async def _upsert_command(self, call: _Call) -> web.Response:
        """POST upserts by (type, name): 201 for a new command, 200 when it replaced one."""
        scope = self._command_guild(call)
        stored, is_new = self._store_command(scope, call.payload)
        return self._json(stored, status=201 if is_new else 200, kind="commands")

    # ------------------------------------------------------------------ gateway

    async def _gateway(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(max_msg_size=16 * 1024 * 1024)
        await ws.prepare(request)
        try:
            compressor = _make_compressor(request.query.get("compress"))
        except (FakeDiscordError, ImportError):
            await ws.close(code=4000, message=b"unsupported compression")
            return ws
        self._session_serial += 1
        session = _GatewaySession(
            ws, compressor, request.query.get("compress"), serial=self._session_serial
        )
        self._sessions.append(session)
        try:
            if request.query.get("encoding", "json") != "json":
                await session.shutdown(code=4002, message="Error while decoding payload.")
                return ws
            session.send(10, {"heartbeat_interval": self.heartbeat_interval_ms})
            async for msg in ws:
                if msg.type is WSMsgType.TEXT:
                    close = await self._on_gateway_payload(session, json.loads(msg.data))
                    if close is not None:
                        await session.shutdown(code=close[0], message=close[1])
                        break
                elif msg.type is WSMsgType.BINARY:
                    await session.shutdown(code=4002, message="Error while decoding payload.")
                    break
        finally:
            if not session.closed:
                await session.shutdown()
            # a resumable dropped session outlives its socket until it is resumed
            if session in self._sessions and not session.detached:
                self._sessions.remove(session)
            self._held = [(s, action) for s, action in self._held if s is not session]
            self._notify()
        return ws

    async def _on_gateway_payload(
        self, session: _GatewaySession, payload: JSON
    ) -> tuple[int, str] | None:
        """Handle one client payload; returns a close code and reason to end the session."""
        op = payload.get("op")
        data = payload.get("d")
        if op == 1:  # HEARTBEAT
            session.send(11, None)
        elif op == 2:  # IDENTIFY
            return self._identify(session, data or {})
        elif op == 3:  # PRESENCE_UPDATE
            self.presence_updates.append(dict(data or {}))
            self._notify()
        elif op == 6:  # RESUME
            return self._resume(session, data or {})
        elif op == 8:  # REQUEST_GUILD_MEMBERS
            self._send_member_chunks(session, data or {})
        elif not session.identified and op not in (4,):
            return 4003, "Not authenticated."
        return None

    def _identify(self, session: _GatewaySession, data: JSON) -> tuple[int, str] | None:
        if session.identified:
            return 4005, "Already authenticated."
        token = str(data.get("token") or "")
        if token != self.valid_token:
            return 4004, "Authentication failed."
        if "intents" not in data:
            return 4013, "Invalid intent(s)."
        intents = int(data["intents"])
        shard = data.get("shard") or [0, 1]
        shard_id, shard_count = int(shard[0]), int(shard[1])
        if shard_count < 1 or not 0 <= shard_id < shard_count:
            return 4010, "Invalid shard."
        if intents & PRIVILEGED_INTENTS & ~self.enabled_privileged_intents:
            return 4014, "Disallowed intent(s)."
        session.identified = True
        session.intents = intents
        session.shard_id = shard_id
        session.shard_count = shard_count
        # a fresh session replaces the shard's resumable dropped one, if any
        for stale in [s for s in self._sessions if s.detached and s.shard_id == shard_id]:
            stale.detached = False
            self._sessions.remove(stale)
        self.identifies.append(
            IdentifyRecord(
                session_id=session.id,
                shard_id=shard_id,
                shard_count=shard_count,
                intents=intents,
                token=token,
                properties=dict(data.get("properties") or {}),
                presence=data.get("presence"),
                compression=session.compression,
            )
        )
        if self._hold_gateway:
            self._held.append((session, lambda: self._send_ready(session)))
        else:
            self._send_ready(session)
        return None

    def _send_ready(self, session: _GatewaySession) -> None:
        """READY, then a GUILD_CREATE per guild of the shard (a GUILD_DELETE ``unavailable``
        for a guild in an outage)."""
        shard_id, shard_count, intents = session.shard_id, session.shard_count, session.intents
        owned = [
            g
            for g in self.guilds.values()
            if session.owns(g.id) and not g.withheld and self._bot_in(g)
        ]
        ready: JSON = {
            "v": 10,
            "user": self._me_payload(),
            "guilds": [{"id": str(g.id), "unavailable": True} for g in owned],
            "session_id": session.id,
            "session_type": "normal",
            "resume_gateway_url": self.gateway_url,
            "shard": [shard_id, shard_count],
            "application": {"id": str(self.application_id), "flags": self._app_flags()},
            "private_channels": [],
            "relationships": [],
            "presences": [],
            "user_settings": {},
            "geo_ordered_rtc_regions": ["us-east"],
            "guild_join_requests": [],
            "_trace": ['["fake-discord"]'],
        }
        self._send_dispatch(session, "READY", ready)
        if intents & Intent.GUILDS:
            for guild in owned:
                if guild.unavailable:
                    outage = {"id": str(guild.id), "unavailable": True}
                    self._send_dispatch(session, "GUILD_DELETE", outage)
                    continue
                self._send_dispatch(
                    session, "GUILD_CREATE", self._guild_create_payload(guild, session)
                )
        # Everything dispatched from now on is queued after READY/GUILD_CREATE.
        session.ready = True
        self._notify()

    def _resume(self, session: _GatewaySession, data: JSON) -> tuple[int, str] | None:
        """RESUME succeeds only for a session dropped by ``disconnect_bot(resumable=True)``:
        the events sequenced since the client's ``seq`` are replayed, then RESUMED. Any other
        session is not resumable: op 9 INVALID_SESSION ``false``, and discord.py IDENTIFYs
        again (a fresh READY; what happened in between is never dispatched)."""
        if session.identified:
            return 4005, "Already authenticated."
        if str(data.get("token") or "") != self.valid_token:
            return 4004, "Authentication failed."
        raw_seq = data.get("seq")
        seq = None if raw_seq is None else int(raw_seq)
        dropped = next(
            (s for s in self._sessions if s.detached and s.id == data.get("session_id")), None
        )
        accepted = dropped is not None and seq is not None and seq <= dropped.seq
        self.resumes.append(
            ResumeRecord(session_id=str(data.get("session_id")), seq=seq, accepted=accepted)
        )
        self._notify()
        if dropped is None or seq is None or not accepted:
            session.send(9, False)
            return None
        client_seq: int = seq
        session.identified = True  # a second RESUME or IDENTIFY on this socket is refused

        def finish() -> None:
            session.id = dropped.id
            session.seq = dropped.seq
            session.shard_id, session.shard_count = dropped.shard_id, dropped.shard_count
            session.intents = dropped.intents
            session.history = dropped.history
            dropped.detached = False
            if dropped in self._sessions:
                self._sessions.remove(dropped)
            for payload in dropped.history:
                if int(payload["s"]) > client_seq:
                    session.replay(payload)
            self._send_dispatch(session, "RESUMED", {"_trace": ['["fake-discord"]']})
            session.ready = True
            self._notify()

        if self._hold_gateway:
            self._held.append((session, finish))
        else:
            finish()
        return None

    async def disconnect_bot(
        self,
        *,
        resumable: bool = False,
        code: int = 4000,
        shard_id: int | None = None,
    ) -> None:
        """Drop the bot's gateway connection(s) (every shard, or ``shard_id``): the socket is
        closed with ``code`` (4000 "unknown error" by default, after which discord.py
        reconnects and tries to RESUME; codes it cannot recover from are refused here).

        The bot stays away until :meth:`wait_for_reconnect`: discord.py reconnects at once,
        but the fake holds back the READY (or RESUMED) its IDENTIFY (or RESUME) asks for. In
        between, changes made with ``while_away=True`` / :meth:`delete_message_quietly` /
        :meth:`edit_message_quietly` are what happened while the bot was offline.

        ``resumable=False``: the session is gone, as after a long outage: the RESUME is
        answered with op 9 INVALID_SESSION ``false``, discord.py IDENTIFYs again (its default
        ``before_identify_hook`` sleeps 5 s first) and gets a fresh READY and GUILD_CREATEs
        (``on_ready`` fires again); nothing that happened in between is ever dispatched, so a
        bot notices missed messages, edits and deletions only by reading channel history.

        ``resumable=True``: Discord keeps the session: events keep being sequenced for it and
        the RESUME replays them, then RESUMED (``on_resumed``); no new READY.
        """
        if code in _FATAL_CLOSE_CODES:
            raise FakeDiscordError(f"discord.py does not reconnect after close code {code}")
        dropped = [
            s
            for s in self._sessions
            if s.ready and not s.closed and (shard_id is None or s.shard_id == shard_id)
        ]
        if not dropped:
            raise FakeDiscordError("no connected gateway session of the bot to drop")
        self._hold_gateway = True
        self._dropped_shards = {(s.shard_id, s.shard_count) for s in dropped}
        self._drop_serial = self._session_serial
        for session in dropped:
            session.detached = resumable
            await session.shutdown(code=code, message="fake: connection dropped")
        self._notify()

    async def wait_for_reconnect(self, *, timeout: float = 10.0) -> None:
        """End the absence begun by :meth:`disconnect_bot` and wait until every dropped shard
        has a ready session again: a fresh READY (re-IDENTIFY) or a RESUMED. The default
        timeout allows for the 5 s discord.py sleeps before re-identifying."""
        self._hold_gateway = False
        held, self._held = self._held, []
        for session, action in held:
            if not session.ws.closed:
                action()
        await self.wait_for(
            lambda: all(
                any(
                    s.serial > self._drop_serial
                    and s.ready
                    and not s.closed
                    and (s.shard_id, s.shard_count) == shard
                    for s in self._sessions
                )
                for shard in self._dropped_shards
            ),
            timeout=timeout,
            what="the bot's gateway session(s) to come back (READY or RESUMED)",
        )

    def _send_member_chunks(self, session: _GatewaySession, data: JSON) -> None:
        raw_guilds = data.get("guild_id")
        guild_ids: list[Any] = raw_guilds if isinstance(raw_guilds, list) else [raw_guilds]
        for raw_gid in guild_ids:
            guild = self.guilds.get(int(raw_gid)) if raw_gid is not None else None
            if guild is None:
                continue
            members = list(guild.members.values())
            user_ids = data.get("user_ids")
            if user_ids:
                wanted = {int(u) for u in (user_ids if isinstance(user_ids, list) else [user_ids])}
                members = [m for m in members if m.user.id in wanted]
            query = data.get("query")
            if query:
                members = [m for m in members if m.user.name.startswith(str(query))]
            limit = int(data.get("limit") or 0)
            if limit:
                members = members[:limit]
            chunk: JSON = {
                "guild_id": str(guild.id),
                "members": [m.to_payload() for m in members],
                "chunk_index": 0,
                "chunk_count": 1,
                "not_found": [],
            }
            if data.get("nonce") is not None:
                chunk["nonce"] = data["nonce"]
            self._send_dispatch(session, "GUILD_MEMBERS_CHUNK", chunk)


# --------------------------------------------------------------------------------------------
# Module-level helpers
# --------------------------------------------------------------------------------------------


def _opt_str(value: int | None) -> str | None:
    return None if value is None else str(value)


def _valid_chat_input_name(name: str) -> bool:
    """Discord's CHAT_INPUT naming rule, ``^[-_'\\p{L}\\p{N}\\p{sc=Deva}\\p{sc=Thai}]{1,32}$``
    with the lowercase variant of every letter that has one."""
    if not 1 <= len(name) <= 32:
        return False
    for char in name:
        if char != char.lower():
            return False  # a letter with a lowercase variant must use it
        if char in "-_'":
            continue
        if unicodedata.category(char)[0] in "LN":
            continue
        if "\u0900" <= char <= "\u097f" or "\u0e00" <= char <= "\u0e7f":  # Devanagari, Thai
            continue
        return False
    return True


def _guess_content_type(filename: str) -> str:
    import mimetypes

    return mimetypes.guess_type(filename)[0] or "application/octet-stream"


async def _read_body(request: web.Request) -> _Body:
    """Decode a JSON or multipart (``payload_json`` + ``files[n]``) request body."""
    if request.content_type.startswith("multipart/"):
        form = await request.post()
        payload: Any = {}
        raw_payload = form.get("payload_json")
        if isinstance(raw_payload, str):
            payload = json.loads(raw_payload)
        descriptions: dict[str, str | None] = {}
        if isinstance(payload, dict):
            for attachment in payload.get("attachments") or []:
                if isinstance(attachment, dict):
                    descriptions[str(attachment.get("id"))] = attachment.get("description")
        files: list[UploadedFile] = []
        by_field: dict[str, UploadedFile] = {}
        for name, value in form.items():
            if isinstance(value, web.FileField):
                index = name.removeprefix("files[").removesuffix("]")
                upload = UploadedFile(
                    filename=value.filename,
                    data=value.file.read(),
                    content_type=value.content_type,
                    description=descriptions.get(index),
                )
                files.append(upload)
                by_field[name] = upload
        return _Body(json=payload, files=files, files_by_field=by_field)
    raw = await request.read()
    if not raw:
        return _Body(json=None, files=[], files_by_field={})
    try:
        decoded = json.loads(raw)
    except ValueError:
        raise _ApiError(400, 50109, "The request body contains invalid JSON.") from None
    return _Body(json=decoded, files=[], files_by_field={})
