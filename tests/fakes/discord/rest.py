"""REST handlers of the fake Discord: users, the application, the gateway URL, channels, messages,
reactions, typing, threads, guilds and members.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from aiohttp import web

from .models import (
    ALL_PERMISSIONS,
    EPHEMERAL_FLAG,
    FORWARDABLE_MESSAGE_TYPES,
    HAS_SNAPSHOT_FLAG,
    JSON,
    LOADING_FLAG,
    MAX_APPLIED_TAGS,
    MAX_CONTENT_LENGTH,
    REFERENCE_FORWARD,
    SNAPSHOT_FIELDS,
    ChannelType,
    FakeChannel,
    FakeGuild,
    Intent,
    MessageEdit,
    Permission,
    ReactionRecord,
    SentMessage,
    TypingEvent,
    UploadedFile,
    _now_iso,
)
from .validation import _ApiError, _Call, _form_error, _form_error_at, _too_long, _validate_embeds

if TYPE_CHECKING:
    pass


class RestMixin:
    """REST routes for users, channels, messages, threads and guilds."""

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
        """A guild channel's REST reads need View Channel (403 Missing Access without; a
        private thread's also membership or Manage Threads);
        returns the bot's permissions there (all of them in a DM)."""
        if channel.guild_id is None:
            return ALL_PERMISSIONS
        perms = self.permissions_for(channel.guild_id, self.bot_user.id, channel.id)
        if not perms & Permission.VIEW_CHANNEL:
            raise _ApiError(403, 50001, "Missing Access")
        if (
            channel.type is ChannelType.PRIVATE_THREAD
            and self.bot_user.id not in channel.member_ids
            and not perms & Permission.MANAGE_THREADS
        ):
            # a private thread is seen by its members and by who may manage threads
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
        """Get Channel: a guild channel (or thread) the bot cannot see is 403 Missing
        Access, as any other read of it."""
        channel = self._known_channel(call)
        self._require_view(channel)
        return self._json(self._channel_payload(channel))

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
