"""Scopes: one memory per conversation place, and the tree the places form.

A Discord server or Slack workspace holds channels (and its members' DMs with the bot), a
channel holds threads, and a person speaks in many places of one server. A scope string
names one place, and :class:`Scope` is that string taken apart, once, here (every layer and
front door asks it instead of splitting strings):

============================  ===========================================================
``discord:{guild}:{channel}``           a channel (a forum post's forum, a voice chat...)
``discord:{guild}:{channel}:{thread}``  a thread or forum post, under its parent channel
``discord:dm:{user}``                   a DM with the bot (no server: it is its own boundary)
``slack:{team}:{channel}``              a channel; ``D...`` channels are DMs with the bot
``slack:{team}:{channel}:{thread_ts}``  a thread, under its channel
``{discord|slack}:{server}:user:{id}``  what is known about one person across a server
``console:{name}`` (any other platform) a flat place with no server and no tree
============================  ===========================================================

A thread's scope names its parent, so everything of a channel (the channel and its
threads) is one subtree: :attr:`Scope.root`. Memory never crosses a server boundary, and
nothing learned in a DM leaves it.

Who can see a place is its :class:`Audience`, known to the front door when a message
arrives; it decides what may travel between places.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache

from memory_core.errors import InvalidScope

# No braces (they delimit the Redis hash tag), no whitespace, bounded length.
_SCOPE_RE = re.compile(r"^[a-z][a-z0-9_-]{0,15}:[A-Za-z0-9_.:@-]{1,200}$")
_NAME_RE = re.compile(r"^[A-Za-z0-9_.@-]{1,200}$")
TREE_PLATFORMS = ("discord", "slack")
DISCORD_EPOCH_MS = 1_420_070_400_000  # a snowflake's time counts from 2015-01-01
PERSON = "user"  # the third part of a person scope: {platform}:{server}:user:{id}


class Audience(StrEnum):
    """Who can read a place, as its front door knows when a message arrives."""

    SERVER = "server"  # everyone in the guild or workspace (Discord @everyone, a public channel)
    PRIVATE = "private"  # some of its members (a private channel or thread, a group DM), or unknown
    DM = "dm"  # the person and the bot
    SHARED = "shared"  # also people of another organisation (a Slack Connect channel)

    @property
    def lets_facts_out(self) -> bool:
        """What is learned about a person here may follow them to other places of the
        server: only where the whole server could hear it."""
        return self is Audience.SERVER

    @property
    def lets_facts_in(self) -> bool:
        """Facts that follow a person may be used here: not where another organisation
        reads (what the host's members said elsewhere stays with the host), not in a DM
        (its memory is its own)."""
        return self in (Audience.SERVER, Audience.PRIVATE)

    @classmethod
    def parse(cls, value: str) -> Audience:
        """A stored audience; anything unknown counts as private."""
        try:
            return cls(value)
        except ValueError:
            return cls.PRIVATE


@dataclass(frozen=True, slots=True)
class Scope:
    """One conversation place, taken apart: see the module's table."""

    key: str  # the scope string itself
    platform: str
    server: str = ""  # the guild or workspace id; "" for a Discord DM and flat places
    channel: str = ""  # the channel (a Slack DM's D... channel); "" otherwise
    thread: str = ""  # the thread's id (Discord) or thread_ts (Slack)
    dm_user: str = ""  # a Discord DM: whose
    person: str = ""  # a person scope: whose

    def __str__(self) -> str:
        return self.key

    @property
    def local(self) -> str:
        """The scope without its platform: a console's name, ``1:2`` of ``discord:1:2``."""
        return self.key.split(":", 1)[1]

    # -- parsing -----------------------------------------------------------------------
    @staticmethod
    def of(value: str | Scope) -> Scope:
        """The parsed scope of a scope string (or bare console name); InvalidScope with
        what to type when it is none."""
        return value if isinstance(value, Scope) else _parse(value)

    # -- building (the front doors) ----------------------------------------------------
    @classmethod
    def channel_of(cls, platform: str, server: str, channel: str) -> Scope:
        return cls.of(f"{platform}:{server}:{channel}")

    @classmethod
    def thread_of(cls, platform: str, server: str, channel: str, thread: str) -> Scope:
        return cls.of(f"{platform}:{server}:{channel}:{thread}")

    @classmethod
    def discord_dm(cls, user_id: str) -> Scope:
        return cls.of(f"discord:dm:{user_id}")

    # -- where it sits in the tree ------------------------------------------------------
    @property
    def kind(self) -> str:
        """channel, thread, dm, person or place (a flat one: the console, a replay)."""
        if self.person:
            return "person"
        if self.dm_user or (self.platform == "slack" and self.channel.startswith("D")):
            return "thread" if self.thread else "dm"
        if self.thread:
            return "thread"
        return "channel" if self.channel else "place"

    @property
    def is_dm(self) -> bool:
        """A DM with the bot (Slack: its threads too)."""
        return bool(self.dm_user) or (self.platform == "slack" and self.channel.startswith("D"))

    @property
    def is_thread(self) -> bool:
        return bool(self.thread)

    @property
    def parent(self) -> Scope | None:
        """A thread's channel; None for everything else."""
        if not self.thread:
            return None
        return Scope.channel_of(self.platform, self.server, self.channel)

    @property
    def thread_started_ms(self) -> int | None:
        """When the thread began, as its id says: a Slack thread is named by its first
        message's ts (seconds), a Discord thread by a snowflake (its starter message's, when
        it was started from one). None for anything else, or an id that says no time."""
        if not self.thread:
            return None
        try:
            if self.platform == "slack":
                return int(float(self.thread) * 1000)
            if self.platform == "discord":
                return (int(self.thread) >> 22) + DISCORD_EPOCH_MS
        except ValueError:
            return None
        return None

    @property
    def root(self) -> Scope:
        """The top of this place's subtree: a thread's channel, else the scope itself.
        Every key of a subtree shares the root's hash tag."""
        return self.parent or self

    @property
    def server_key(self) -> str | None:
        """``discord:{guild}`` / ``slack:{team}``: the server this place belongs to (its
        bill, its places); None for a Discord DM and flat places."""
        return f"{self.platform}:{self.server}" if self.server else None

    @property
    def boundary(self) -> str:
        """What memory never crosses: the server, or the DM or flat place itself."""
        return self.server_key or self.key

    def same_boundary(self, other: Scope) -> bool:
        return self.boundary == other.boundary

    def thread_scope(self, thread: str) -> Scope:
        """A thread of this channel."""
        if self.kind not in ("channel", "dm") or self.platform not in TREE_PLATFORMS:
            raise InvalidScope(f"{self.key} has no threads")
        return Scope.thread_of(self.platform, self.server, self.channel, thread)

    def person_scope(self, user_id: str) -> Scope | None:
        """Where facts about ``user_id`` live across this server (``{platform}:{server}:
        user:{id}``); None where they must not travel: DMs (nothing learned in a DM leaves
        it), flat places, person scopes themselves, and the bot."""
        if not user_id or user_id == "bot" or not self.server or self.person or self.is_dm:
            return None
        if not _ID_RE.match(user_id):
            return None
        return Scope.of(f"{self.platform}:{self.server}:{PERSON}:{user_id}")

    def dm_scope(self, user_id: str) -> Scope | None:
        """The DM of ``user_id`` with the bot when its scope follows from the user alone
        (Discord); None on Slack (a DM is its own D... channel, found through the tree)."""
        if self.platform == "discord" and user_id and _ID_RE.match(user_id):
            return Scope.discord_dm(user_id)
        return None


_ID_RE = re.compile(r"^[A-Za-z0-9_.@-]{1,80}$")


@lru_cache(maxsize=65536)
def _parse(text: str) -> Scope:
    value = text.strip()
    if ":" not in value:
        if not _NAME_RE.match(value):
            raise InvalidScope(
                f"invalid scope name {text[:80]!r}: use letters, digits, '_', '.', '-' "
                "(or a full scope such as discord:GUILD:CHANNEL)"
            )
        value = f"console:{value}"
    elif not _SCOPE_RE.match(value) or value.endswith(":") or "::" in value:
        raise InvalidScope(
            f"invalid scope {text[:80]!r}: expected platform:id[:id...] with letters, digits "
            "and '_', '.', '-', '@' (for example console:team or discord:123:456)"
        )
    parts = value.split(":")
    platform = parts[0]
    if platform not in TREE_PLATFORMS:
        return Scope(key=value, platform=platform)
    rest = parts[1:]
    if platform == "discord" and rest[0] == "dm":
        if len(rest) == 2:
            return Scope(key=value, platform=platform, dm_user=rest[1])
    elif len(rest) == 3 and rest[1] == PERSON:
        return Scope(key=value, platform=platform, server=rest[0], person=rest[2])
    elif len(rest) == 2 and rest[1] != PERSON:
        return Scope(key=value, platform=platform, server=rest[0], channel=rest[1])
    elif len(rest) == 3:
        return Scope(key=value, platform=platform, server=rest[0], channel=rest[1], thread=rest[2])
    raise InvalidScope(
        f"invalid {platform} scope {text[:80]!r}: expected {platform}:SERVER:CHANNEL, "
        f"{platform}:SERVER:CHANNEL:THREAD, {platform}:SERVER:user:USER"
        + (" or discord:dm:USER" if platform == "discord" else "")
    )


def server_key(platform: str, server: str) -> str:
    """A server's key (``discord:{guild}``, ``slack:{team}``), as :attr:`Scope.server_key`."""
    return Scope.channel_of(platform, server, "0").server_key or ""


def parse_server(text: str) -> tuple[str, str]:
    """(platform, server id) of a server key such as ``slack:T1``; InvalidScope otherwise."""
    platform, _, server = text.partition(":")
    if platform not in TREE_PLATFORMS:
        raise InvalidScope(f"{text[:80]!r} is no server: expected discord:GUILD or slack:TEAM")
    Scope.channel_of(platform, server, "0")  # the same characters as in a scope
    return platform, server


def parse_scope(text: str) -> str:
    """Validate a full scope string, or turn a bare name into ``console:NAME``."""
    return Scope.of(text).key
