"""API payloads of the fake Discord: channels, guilds, GUILD_CREATE, messages with references and
attachments, and permission computation.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from .gateway import _GatewaySession
from .models import (
    _USER_MENTION,
    ALL_PERMISSIONS,
    JSON,
    MESSAGE_CONTEXT_MENU_COMMAND,
    MESSAGE_DEFAULT,
    MESSAGE_REPLY,
    REFERENCE_DEFAULT,
    ChannelType,
    FakeChannel,
    FakeDiscordError,
    FakeGuild,
    FakeUser,
    Intent,
    Permission,
    SentMessage,
    UploadedFile,
    _opt_str,
    snowflake_time_iso,
)
from .validation import _guess_content_type

if TYPE_CHECKING:
    pass


class PayloadsMixin:
    """Payloads sent to discord.py and permission checks."""

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
                    "archive_timestamp": channel.archived_at or channel.created_at,
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
