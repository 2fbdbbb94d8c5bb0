"""The fake Discord's data: API constants and documented limits, intents, permissions, channel
types, snowflakes, the world's objects (users, roles, members, channels, guilds) and the records
of what the bot did.
"""

from __future__ import annotations

import enum
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias

if TYPE_CHECKING:
    pass


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
IS_COMPONENTS_V2_FLAG: Final = 1 << 15  # set by the app that sends such a message
# Components V2 ("Component Reference"): what a message may hold at its top level, and in a
# Container; a Section holds 1 to 3 Text Displays and an accessory (a Button or Thumbnail).
V2_TOP_LEVEL_TYPES: Final = frozenset({1, 9, 10, 12, 13, 14, 17})
V2_CONTAINER_TYPES: Final = frozenset({1, 9, 10, 12, 13, 14})
MAX_TEXT_DISPLAY: Final = 4000
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
    # when a thread was last archived (its archive_timestamp; until then, its creation)
    archived_at: str | None = None
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
# Module-level helpers
# --------------------------------------------------------------------------------------------


def _opt_str(value: int | None) -> str | None:
    return None if value is None else str(value)
