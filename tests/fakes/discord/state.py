"""Building the fake Discord's world: users, guilds, roles, members, channels, forums, threads,
DMs, deletions, outages, command registration, rate limits and injected failures.
"""

# The async helpers take a per-call ``timeout=`` on purpose (ASYNC109): tests read better as
# ``await fake.wait_for_messages(cid, 2, timeout=5)`` than wrapped in ``asyncio.timeout``, and
# the timeout also feeds the diagnostic message of the fake's timeout error.
# ruff: noqa: ASYNC109

from __future__ import annotations

import copy
import math
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from .models import (
    DEFAULT_BOT_PERMISSIONS,
    DEFAULT_EVERYONE_PERMISSIONS,
    JSON,
    MAX_APPLIED_TAGS,
    MAX_FORUM_TAG_NAME,
    MAX_FORUM_TAGS,
    ChannelType,
    FakeChannel,
    FakeDiscordError,
    FakeForumTag,
    FakeGuild,
    FakeMember,
    FakeRole,
    FakeUser,
    Intent,
    Permission,
    PermissionOverwrite,
    RouteKind,
    _now_iso,
)
from .ratelimits import route_template
from .validation import _ApiError, _FailureRule

if TYPE_CHECKING:
    pass


class WorldMixin:
    """Build the world: add_*, delete_*, outages, command registration, failure injection."""

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
            archived_at=self._archive_time() if archived else None,
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
        thread.archived_at = self._archive_time()
        if self._bot_receives_messages_of(thread):
            payload = self._channel_payload(thread)
            self._dispatch("THREAD_UPDATE", payload, guild_id=thread.guild_id, intent=Intent.GUILDS)

    def set_overwrites(self, channel_id: int, overwrites: Sequence[PermissionOverwrite]) -> None:
        """Someone edits a guild channel's permission overwrites (Edit Channel Permissions):
        CHANNEL_UPDATE with the channel object to every session with the GUILDS intent, as
        for a deletion (bots are told of every channel of their guilds, even those they
        cannot view). What the bot may do there follows: take View Channel from it and every
        REST read of the channel and its threads answers 403 Missing Access (50001), its
        messages and its threads' no longer reach it, and a new session's GUILD_CREATE still
        lists the channel but not its threads ("active threads ... the current user is able
        to view"). A thread has no overwrites of its own: it follows its parent's."""
        channel = self._channel(channel_id)
        if channel.guild_id is None or channel.is_thread:
            raise FakeDiscordError(
                f"channel {channel_id} has no overwrites of its own (a DM, or a thread: set its "
                "parent's)"
            )
        channel.overwrites = list(overwrites)
        self._dispatch(
            "CHANNEL_UPDATE",
            self._channel_payload(channel),
            guild_id=channel.guild_id,
            intent=Intent.GUILDS,
        )

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

    def _archive_time(self) -> str:
        """Now, as an archive timestamp: strictly later than the one before, so that the
        archived-thread listings (ordered and paged by it) have one order."""
        now = max(time.time(), self._last_archived_at + 1e-6)
        self._last_archived_at = now
        return datetime.fromtimestamp(now, tz=UTC).isoformat()

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

    def add_dm_between(self, user_id: int, other_id: int) -> FakeChannel:
        """A DM between two people (never the bot's: that is :meth:`dm_channel_id`). The bot
        is not in it and receives nothing from it; commands reach it only from a
        user-installed app (see :meth:`install_for_user`), in the PRIVATE_CHANNEL context."""
        if self.bot_user.id in (user_id, other_id):
            raise FakeDiscordError("the bot's DM with a user is fake.dm_channel_id(user_id)")
        channel = FakeChannel(
            id=self._ids.next(),
            type=ChannelType.DM,
            name=None,
            guild_id=None,
            recipient_ids=[self.add_user(user_id).id, self.add_user(other_id).id],
        )
        self.channels[channel.id] = channel
        return channel

    def is_bot_dm(self, channel: FakeChannel) -> bool:
        """Whether ``channel`` is the bot's DM with a user (not a DM between people)."""
        return channel.type is ChannelType.DM and channel.id in self._dm_by_user.values()

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

    def fail_route(
        self,
        route: str,
        *,
        resource: int | str | None = None,
        status: int = 500,
        code: int = 0,
        message: str = "500: Internal Server Error",
        count: int = 1,
    ) -> None:
        """Answer the next ``count`` requests of one route (named as for
        :meth:`set_route_budget`: ``"GET /channels/{channel_id}"``) with an error; with
        ``resource``, only those for that channel, guild or webhook (the route's top-level
        resource), so that one channel fails while the others answer.

        discord.py retries 500, 502, 504 and 524 itself, sleeping 1 s, 3 s, ... in between;
        a 503 (Discord's "Service Unavailable") it raises at once as ``DiscordServerError``.
        """
        known = {route_template(r) for r in self._routes}
        if route not in known:
            raise FakeDiscordError(f"no route {route!r}; the fake has {sorted(known)}")
        body = {"message": message, "code": code}
        major = None if resource is None else str(resource)
        self._failures.append(
            _FailureRule("any", count, status, body, dict, route=route, resource=major)
        )

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
