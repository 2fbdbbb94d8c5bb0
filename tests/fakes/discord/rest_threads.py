"""REST handlers of the fake Discord that list threads: a guild's active threads and a channel's
archived public and private ones, all or those the bot joined (a forum's posts are its
threads), as Discord's API documents them.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime

from aiohttp import web

from .models import JSON, ChannelType, FakeChannel, Permission
from .validation import _ApiError, _Call, _form_error

# List Public / Private Archived Threads: ``limit`` (Discord answers a limit under 2 with
# 50035, as discord.py's "the API doesn't let you request less than 2 threads" says; over 100
# too); 50 when absent.
ARCHIVED_LIMIT_MIN, ARCHIVED_LIMIT_MAX, ARCHIVED_LIMIT_DEFAULT = 2, 100, 50


class ThreadListingMixin:
    """GET /guilds/{id}/threads/active, /channels/{id}/threads/archived/public and /private,
    /channels/{id}/users/@me/threads/archived/private."""

    def _thread_member_payload(self, thread: FakeChannel) -> JSON:
        """The bot's thread member object in a thread it joined."""
        return {
            "id": str(thread.id),
            "user_id": str(self.bot_user.id),
            "join_timestamp": thread.created_at,
            "flags": 0,
        }

    def _listing(self, threads: list[FakeChannel], *, has_more: bool | None = None) -> JSON:
        body: JSON = {
            "threads": [self._channel_payload(t) for t in threads],
            # "a thread member object for each returned thread the current user has joined"
            "members": [
                self._thread_member_payload(t) for t in threads if self.bot_user.id in t.member_ids
            ],
        }
        if has_more is not None:
            body["has_more"] = has_more
        return body

    async def _active_threads(self, call: _Call) -> web.Response:
        """List Active Guild Threads: "all active threads in the guild, including public and
        private threads", ordered by id, newest first; only those the bot can see (View
        Channel on the parent; a private thread as a member or with Manage Threads), as
        GUILD_CREATE's ``threads``."""
        guild = self._known_guild(call)
        active = sorted(
            (
                c
                for c in self.channels.values()
                if c.guild_id == guild.id
                and c.is_thread
                and not c.archived
                and self._bot_receives_messages_of(c)
            ),
            key=lambda c: c.id,
            reverse=True,
        )
        return self._json(self._listing(active))

    async def _public_archived_threads(self, call: _Call) -> web.Response:
        """List Public Archived Threads: a text channel's archived public threads, a forum's
        archived posts; newest ``archive_timestamp`` first, those before ``before`` (an
        ISO8601 timestamp) only; Read Message History needed (403 50013; without View
        Channel 403 50001 Missing Access)."""
        channel = self._thread_parent(call)
        self._check_forbidden(channel, int(Permission.READ_MESSAGE_HISTORY))
        return self._archived(call, channel, ChannelType.PUBLIC_THREAD)

    async def _private_archived_threads(self, call: _Call) -> web.Response:
        """List Private Archived Threads: a channel's archived private threads, all of them
        (joined or not); Read Message History and Manage Threads needed (403 50013)."""
        channel = self._thread_parent(call)
        self._check_forbidden(
            channel, int(Permission.READ_MESSAGE_HISTORY | Permission.MANAGE_THREADS)
        )
        return self._archived(call, channel, ChannelType.PRIVATE_THREAD)

    async def _joined_private_archived_threads(self, call: _Call) -> web.Response:
        """List Joined Private Archived Threads: the channel's archived private threads the
        bot is a member of, newest id first, those before ``before`` (a thread id) only;
        Read Message History needed (403 50013)."""
        channel = self._thread_parent(call)
        self._check_forbidden(channel, int(Permission.READ_MESSAGE_HISTORY))
        query = call.request.query
        limit = self._archived_limit(query)
        before = self._query_int(query, "before", 0) if "before" in query else None
        joined = sorted(
            (
                c
                for c in self.channels.values()
                if c.parent_id == channel.id
                and c.type is ChannelType.PRIVATE_THREAD
                and c.archived
                and self.bot_user.id in c.member_ids
                and (before is None or c.id < before)
            ),
            key=lambda c: c.id,
            reverse=True,
        )
        return self._json(self._listing(joined[:limit], has_more=len(joined) > limit))

    def _thread_parent(self, call: _Call) -> FakeChannel:
        channel = self._known_channel(call)
        if channel.guild_id is None or channel.type not in (
            ChannelType.GUILD_TEXT,
            ChannelType.GUILD_FORUM,
        ):
            raise _ApiError(400, 50024, "Cannot execute action on this channel type")
        return channel

    def _archived(self, call: _Call, channel: FakeChannel, kind: ChannelType) -> web.Response:
        query = call.request.query
        limit = self._archived_limit(query)
        before = self._archived_before(query)
        archived = sorted(
            (
                c
                for c in self.channels.values()
                if c.parent_id == channel.id and c.type is kind and c.archived
            ),
            key=_archived_at,
            reverse=True,
        )
        if before is not None:
            archived = [c for c in archived if _archived_at(c) < before]
        return self._json(self._listing(archived[:limit], has_more=len(archived) > limit))

    @staticmethod
    def _archived_limit(query: Mapping[str, str]) -> int:
        raw = query.get("limit")
        if raw is None:
            return ARCHIVED_LIMIT_DEFAULT
        try:
            limit = int(raw)
        except ValueError:
            raise _form_error("limit", "NUMBER_TYPE_COERCE", f'Value "{raw}" is not int.') from None
        if limit < ARCHIVED_LIMIT_MIN:
            raise _form_error(
                "limit",
                "NUMBER_TYPE_MIN",
                f"int value should be greater than or equal to {ARCHIVED_LIMIT_MIN}.",
            )
        if limit > ARCHIVED_LIMIT_MAX:
            raise _form_error(
                "limit",
                "NUMBER_TYPE_MAX",
                f"int value should be less than or equal to {ARCHIVED_LIMIT_MAX}.",
            )
        return limit

    @staticmethod
    def _archived_before(query: Mapping[str, str]) -> datetime | None:
        raw = query.get("before")
        if raw is None:
            return None
        try:
            before = datetime.fromisoformat(raw)
        except ValueError:
            raise _form_error(
                "before", "DATE_TIME_TYPE_PARSE", f'Could not parse "{raw}". Should be ISO8601.'
            ) from None
        return before if before.tzinfo is not None else before.replace(tzinfo=UTC)


def _archived_at(thread: FakeChannel) -> datetime:
    return datetime.fromisoformat(thread.archived_at or thread.created_at)
