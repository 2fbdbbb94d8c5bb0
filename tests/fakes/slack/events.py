"""Events and payloads the fake Slack sends an app: messages, mentions, edits, deletes, Home,
channel lifecycle, uninstalls, slash commands and interactive payloads.
"""

from __future__ import annotations

import copy
import secrets
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from .blocks import (
    _as_changed_message,
    _changed_event,
    _find_element,
    _rich_text_blocks,
    event_subscription,
)
from .models import _UNINSTALL_EVENTS, EVENT_SCOPES, RecordedMessage


class EventsMixin:
    """Build the events and payloads Slack sends."""

    def event_payload(
        self,
        *,
        event: Mapping[str, Any],
        team_id: str | None = None,
        event_id: str | None = None,
        event_time: int | None = None,
    ) -> dict[str, Any]:
        """The full Events API ``event_callback`` body wrapping ``event``. The fake now knows
        the event's conversation and author (see :meth:`_learn_from_event`); an event about
        a deleted or archived conversation, revoked tokens or the app's removal changes the
        workspace accordingly.

        Raises ValueError for an event Slack would not deliver: any but ``tokens_revoked``
        / ``app_uninstalled`` once the app is uninstalled and, when the fake knows the
        app's ``bot_events``, one it does not subscribe to or lacks the scope of."""
        self._check_delivery(event)
        self._learn_from_event(event)
        team = team_id or self.team_id
        return {
            "token": self.verification_token,
            "team_id": team,
            "context_team_id": team,
            "context_enterprise_id": self.enterprise_id,
            "api_app_id": self.api_app_id,
            "event": dict(event),
            "type": "event_callback",
            "event_id": event_id or self._new_event_id(),
            "event_time": event_time if event_time is not None else int(time.time()),
            "authorizations": [
                {
                    "enterprise_id": self.enterprise_id,
                    "team_id": team,
                    "user_id": self.bot_user_id,
                    "is_bot": True,
                    "is_enterprise_install": False,
                }
            ],
            "is_ext_shared_channel": self._shared(event.get("channel")),
            "event_context": "4-" + secrets.token_urlsafe(24),
        }

    def _check_delivery(self, event: Mapping[str, Any]) -> None:
        if event.get("type") not in _UNINSTALL_EVENTS:
            self._require_installed("events")
        channel = self.channels.get(str(event.get("channel", "")))
        if channel is not None and channel.hidden_from_app:
            raise ValueError(f"{channel.id} is a DM between people: no event reaches the app")
        if self.bot_events is None:
            return
        subscription = event_subscription(event)
        if subscription not in self.bot_events:
            raise ValueError(f"the app does not subscribe to {subscription}")
        scope = EVENT_SCOPES.get(subscription)
        if subscription == "member_left_channel" and self._private_channel(event.get("channel")):
            scope = "groups:read"
        if scope is not None and self.scopes is not None and scope not in self.scopes:
            raise ValueError(f"{subscription} needs the {scope} scope, which the app lacks")

    def _private_channel(self, channel_id: Any) -> bool:
        channel = self.channels.get(channel_id) if isinstance(channel_id, str) else None
        if channel is None:
            return isinstance(channel_id, str) and channel_id.startswith("G")
        return channel.is_private

    def _shared(self, channel_id: Any) -> bool:
        channel = self.channels.get(channel_id) if isinstance(channel_id, str) else None
        return channel is not None and bool(channel.shared_with)

    def _author_teams(self, event: dict[str, Any]) -> None:
        """In a Slack Connect channel a message says its author's team (the author may be of
        another organisation): ``team``, ``user_team`` and ``source_team``."""
        user = self.users.get(str(event.get("user", "")))
        if self._shared(event.get("channel")) and user is not None:
            event.update(team=user.team_id, user_team=user.team_id, source_team=user.team_id)

    def message_event(
        self,
        *,
        text: str,
        user_id: str,
        channel_id: str,
        ts: str | None = None,
        thread_ts: str | None = None,
        channel_type: Literal["channel", "group", "im", "mpim"] = "channel",
        team_id: str | None = None,
        bot_id: str | None = None,
        subtype: str | None = None,
        files: Sequence[Mapping[str, Any]] = (),
    ) -> dict[str, Any]:
        """A ``message`` event (the inner ``event`` object; wrap it with ``event_payload``).
        ``files`` (see :meth:`file_object`): a ``file_share`` message, as Slack sends a
        message with uploaded files (its text may be empty)."""
        message_ts = ts or self.next_ts()
        event: dict[str, Any] = {
            "type": "message",
            "user": user_id,
            "text": text,
            "ts": message_ts,
            "event_ts": message_ts,
            "channel": channel_id,
            "channel_type": channel_type,
            "team": team_id or self.team_id,
            "blocks": _rich_text_blocks(text),
        }
        if bot_id is None:
            # Only messages typed by humans carry a client_msg_id.
            event["client_msg_id"] = str(uuid.uuid4())
        else:
            event["bot_id"] = bot_id
            event["app_id"] = self.api_app_id
        if thread_ts is not None:
            event["thread_ts"] = thread_ts
        if subtype is not None:
            event["subtype"] = subtype
        if files:
            event["subtype"] = subtype or "file_share"
            event["files"] = [dict(f) for f in files]
            event["upload"] = False
            event["display_as_bot"] = False
        self._author_teams(event)
        return event

    def bot_message_event(
        self,
        *,
        text: str,
        bot_id: str,
        channel_id: str,
        user_id: str | None = None,
        username: str = "bot",
        ts: str | None = None,
        thread_ts: str | None = None,
        channel_type: Literal["channel", "group", "im", "mpim"] = "channel",
    ) -> dict[str, Any]:
        """A message of another bot: an app's bot user (``user_id``: its user, ``bot_id``,
        ``app_id`` and ``bot_profile``, no subtype), or without ``user_id`` a legacy
        integration or webhook (subtype ``bot_message``, a ``username``, no ``user``)."""
        message_ts = ts or self.next_ts()
        event: dict[str, Any] = {
            "type": "message",
            "text": text,
            "ts": message_ts,
            "event_ts": message_ts,
            "channel": channel_id,
            "channel_type": channel_type,
            "bot_id": bot_id,
        }
        if user_id is None:
            event.update(subtype="bot_message", username=username)
        else:
            event.update(
                user=user_id,
                app_id="A" + bot_id[1:],
                team=self.team_id,
                bot_profile={"id": bot_id, "name": username, "team_id": self.team_id},
                blocks=_rich_text_blocks(text),
            )
        if thread_ts is not None:
            event["thread_ts"] = thread_ts
        return event

    def system_message_event(
        self,
        *,
        subtype: str,
        user_id: str,
        channel_id: str,
        ts: str | None = None,
        value: str = "",
        channel_type: Literal["channel", "group", "im", "mpim"] = "channel",
    ) -> dict[str, Any]:
        """A message Slack itself writes about the conversation, by the person who caused it:
        ``channel_join`` / ``channel_leave`` (also ``group_*``), ``channel_topic`` /
        ``channel_purpose`` / ``channel_name`` (``value``: the new topic, purpose or name),
        ``pinned_item``. Its text is Slack's sentence about it."""
        sentences = {
            "channel_join": "has joined the channel",
            "group_join": "has joined the group",
            "channel_leave": "has left the channel",
            "group_leave": "has left the group",
            "channel_topic": f"set the channel topic: {value}",
            "channel_purpose": f"set the channel purpose: {value}",
            "channel_name": f"has renamed the channel to {value}",
            "pinned_item": "pinned a message to this channel.",
        }
        if subtype not in sentences:
            raise ValueError(f"not a system message subtype this fake writes: {subtype}")
        message_ts = ts or self.next_ts()
        event: dict[str, Any] = {
            "type": "message",
            "subtype": subtype,
            "user": user_id,
            "text": f"<@{user_id}> {sentences[subtype]}",
            "ts": message_ts,
            "event_ts": message_ts,
            "channel": channel_id,
            "channel_type": channel_type,
        }
        if subtype in ("channel_topic", "channel_purpose"):
            event[subtype.removeprefix("channel_")] = value
        elif subtype == "channel_name":
            event["name"] = value
        return event

    def file_object(
        self,
        *,
        name: str,
        user_id: str,
        title: str | None = None,
        mimetype: str = "application/pdf",
        filetype: str = "pdf",
        pretty_type: str = "PDF",
        size: int = 1024,
        data: bytes | None = None,
    ) -> dict[str, Any]:
        """A file as a ``file_share`` message event carries it (Slack's file object: the
        fields apps with the history scopes receive; ``title`` defaults to the name).
        ``data``: the file's bytes, served by the fake at its ``url_private`` (then on this
        server, and ``size`` is their length) as Slack serves it: only with the bot token in
        an Authorization header and, when the fake knows the scopes, ``files:read``."""
        file_id = "F" + secrets.token_hex(5).upper()
        base = f"https://{self.team_domain}.slack.com"
        private = f"https://files.slack.com/files-pri/{self.team_id}-{file_id}/{name}"
        if data is not None:
            self._shared_files[file_id] = (data, mimetype)
            private = f"{self.base_url}/files-pri/{self.team_id}-{file_id}/{name}"
            size = len(data)
        return {
            "id": file_id,
            "created": int(time.time()),
            "timestamp": int(time.time()),
            "name": name,
            "title": name if title is None else title,
            "mimetype": mimetype,
            "filetype": filetype,
            "pretty_type": pretty_type,
            "user": user_id,
            "user_team": self.team_id,
            "editable": False,
            "size": size,
            "mode": "hosted",
            "is_external": False,
            "external_type": "",
            "is_public": True,
            "public_url_shared": False,
            "display_as_bot": False,
            "username": "",
            "url_private": private,
            "url_private_download": f"{private}?download=1",
            "permalink": f"{base}/files/{user_id}/{file_id}/{name}",
            "permalink_public": f"https://slack-files.com/{self.team_id}-{file_id}-0a1b2c3d4e",
            "has_rich_preview": False,
            "file_access": "visible",
        }

    def app_mention_event(
        self,
        *,
        text: str,
        user_id: str,
        channel_id: str,
        ts: str | None = None,
        thread_ts: str | None = None,
        team_id: str | None = None,
    ) -> dict[str, Any]:
        """An ``app_mention`` event; ``<@BOT>`` is prepended to ``text`` unless present."""
        mention = f"<@{self.bot_user_id}>"
        full_text = text if mention in text else f"{mention} {text}"
        message_ts = ts or self.next_ts()
        event: dict[str, Any] = {
            "type": "app_mention",
            "client_msg_id": str(uuid.uuid4()),
            "user": user_id,
            "text": full_text,
            "ts": message_ts,
            "event_ts": message_ts,
            "channel": channel_id,
            "team": team_id or self.team_id,
            "blocks": _rich_text_blocks(full_text),
        }
        if thread_ts is not None:
            event["thread_ts"] = thread_ts
        self._author_teams(event)
        return event

    def message_changed_event(
        self, *, original: Mapping[str, Any], text: str, edited_ts: str | None = None
    ) -> dict[str, Any]:
        """Its author edits ``original`` (a ``message_event``): a hidden ``message`` event,
        subtype ``message_changed``, with the whole new message (same ``ts``, an ``edited``
        stamp) in ``message`` and the old one in ``previous_message``. The event's own
        ``ts``/``event_ts`` are the time of the edit."""
        if original.get("bot_id") or original.get("subtype") not in (None, "file_share"):
            raise ValueError("people edit their own plain messages; the bot uses chat.update")
        edit_ts = edited_ts or self.next_ts()
        previous = _as_changed_message(original)
        message = previous | {
            "text": text,
            "blocks": _rich_text_blocks(text),
            "edited": {"user": original["user"], "ts": edit_ts},
        }
        return _changed_event(original, message, previous, edit_ts)

    def tombstone_event(self, *, parent: Mapping[str, Any]) -> dict[str, Any]:
        """Its author deletes ``parent``, a message with thread replies: Slack keeps a
        ``tombstone`` in its place ("This message was deleted.", by USLACKBOT) so the thread
        stays readable, and says so with ``message_changed``, not ``message_deleted``.
        Replies are those the fake knows in the thread: the bot's and people's (a message
        without any is deleted with ``message_deleted``: :meth:`message_deleted_event`)."""
        ts = str(parent["ts"])
        replies = self._replies_of(str(parent["channel"]), ts)
        if not replies:
            raise ValueError(f"message {ts} has no replies: its deletion is message_deleted")
        thread = self._thread_fields(ts, replies)
        tombstone = {
            "type": "message",
            "subtype": "tombstone",
            "text": "This message was deleted.",
            "user": "USLACKBOT",
            "hidden": True,
            "ts": ts,
            "parent_user_id": "USLACKBOT",
            **thread,
        }
        previous = _as_changed_message(parent) | thread
        return _changed_event(parent, tombstone, previous, self.next_ts())

    def message_deleted_event(self, *, original: Mapping[str, Any]) -> dict[str, Any]:
        """Its author deletes ``original`` (a message event the fake sent, without thread
        replies): a hidden ``message`` event, subtype ``message_deleted``, with the deleted
        ``ts`` and the message as it was. Afterwards it is gone from history and permalinks.
        A message with replies leaves a tombstone instead (:meth:`tombstone_event`)."""
        channel_id, ts = str(original["channel"]), str(original["ts"])
        if self._replies_of(channel_id, ts):
            raise ValueError(f"message {ts} has replies: Slack leaves a tombstone_event")
        event_ts = self.next_ts()
        return {
            "type": "message",
            "subtype": "message_deleted",
            "hidden": True,
            "deleted_ts": ts,
            "channel": channel_id,
            "channel_type": original.get("channel_type", "channel"),
            "previous_message": _as_changed_message(original),
            "ts": event_ts,
            "event_ts": event_ts,
        }

    def app_home_opened_event(
        self, *, user_id: str, tab: Literal["home", "messages"] = "home"
    ) -> dict[str, Any]:
        """``user_id`` opens the app's App Home (``app_home_opened``): ``channel`` is the
        app's DM with them (the one conversations.open gives), ``tab`` the tab they opened
        and, on the Home tab, ``view`` the view last published for them (absent if none
        ever was). Slack shows no Home tab when it is not enabled (``home_tab_enabled``)."""
        if tab == "home" and not self.home_tab_enabled:
            raise ValueError("the Home tab is not enabled: nobody can open it")
        event: dict[str, Any] = {
            "type": "app_home_opened",
            "user": user_id,
            "channel": self._dm_with(user_id).id,
            "tab": tab,
            "event_ts": self.next_ts(),
        }
        view = self._home_views.get(user_id)
        if tab == "home" and view is not None:
            event["view"] = copy.deepcopy(view)
        return event

    def channel_deleted_event(self, *, channel_id: str, user_id: str) -> dict[str, Any]:
        """``user_id`` deletes a channel: ``channel_deleted`` ({type, channel}) for a public
        one, ``group_deleted`` ({type, channel, date_deleted, actor_id, event_ts}) for a
        private one. Sent through ``event_payload``, the channel is then gone
        (``channel_not_found`` everywhere). Needs channels:read / groups:read
        (:data:`EVENT_SCOPES`)."""
        if self._is_private(channel_id):
            return {
                "type": "group_deleted",
                "channel": channel_id,
                "date_deleted": int(time.time()),
                "actor_id": user_id,
                "event_ts": self.next_ts(),
            }
        return {"type": "channel_deleted", "channel": channel_id}

    def bot_removed_events(self, *, channel_id: str, user_id: str) -> list[dict[str, Any]]:
        """``user_id`` removes the bot from a channel (``/kick @bot``, or the channel's
        member list): the events Slack sends the app, each one alone enough to say it,
        since Slack "sometimes withholds" the first. ``channel_left`` ({type, channel,
        actor_id, event_ts}) for a public channel, ``group_left`` (the same) for a private
        one; then ``member_left_channel`` ({type, user, channel, channel_type, team, event_ts}
        naming the bot user; ``channel_type`` "C", or "G" for a private channel named G...).
        Sent through ``event_payload``, the bot is no longer in it: its history answers
        ``not_in_channel`` (public) or ``channel_not_found`` (private). Needs channels:read,
        groups:read for a private channel (:data:`EVENT_SCOPES`)."""
        private = self._is_private(channel_id)
        left = {
            "type": "group_left" if private else "channel_left",
            "channel": channel_id,
            "actor_id": user_id,
            "event_ts": self.next_ts(),
        }
        member_left = {
            "type": "member_left_channel",
            "user": self.bot_user_id,
            "channel": channel_id,
            "channel_type": "G" if channel_id.startswith("G") else "C",
            "team": self.team_id,
            "event_ts": self.next_ts(),
        }
        return [left, member_left]

    def member_left_event(self, *, channel_id: str, user_id: str) -> dict[str, Any]:
        """``user_id`` (a person) leaves a channel: ``member_left_channel`` naming them. Sent
        through ``event_payload``, they are no longer among its members."""
        return {
            "type": "member_left_channel",
            "user": user_id,
            "channel": channel_id,
            "channel_type": "G" if channel_id.startswith("G") else "C",
            "team": self.team_id,
            "event_ts": self.next_ts(),
        }

    def channel_archive_event(self, *, channel_id: str, user_id: str) -> dict[str, Any]:
        """``user_id`` archives a channel: ``channel_archive`` (public) or ``group_archive``
        (private), {type, channel, user, event_ts}. Unlike a deletion the channel stays,
        with its history; sent through ``event_payload``, posts to it then fail with
        ``is_archived``."""
        kind = "group_archive" if self._is_private(channel_id) else "channel_archive"
        return {"type": kind, "channel": channel_id, "user": user_id, "event_ts": self.next_ts()}

    def _is_private(self, channel_id: str) -> bool:
        channel = self.channels.get(channel_id)
        if channel is not None and (channel.is_im or channel.is_mpim):
            raise ValueError(f"{channel_id} is a DM: it cannot be archived or deleted")
        return channel.is_private if channel is not None else channel_id.startswith("G")

    def tokens_revoked_event(
        self, *, bot_user_ids: Sequence[str] | None = None, oauth_user_ids: Sequence[str] = ()
    ) -> dict[str, Any]:
        """``tokens_revoked``: ``tokens`` maps each kind of revoked token (``bot``, ``oauth``
        for user tokens) to the ids of the users they belonged to, never the tokens
        themselves. Default: the bot's token. Through ``event_payload``, a revoked bot token
        fails with ``account_inactive``."""
        tokens: dict[str, list[str]] = {}
        if oauth_user_ids:
            tokens["oauth"] = list(oauth_user_ids)
        bots = [self.bot_user_id] if bot_user_ids is None else list(bot_user_ids)
        if bots:
            tokens["bot"] = bots
        return {"type": "tokens_revoked", "tokens": tokens}

    def app_uninstalled_event(self) -> dict[str, Any]:
        """``app_uninstalled`` ({type} only; the wrapper's team_id says where). Through
        ``event_payload`` the app is uninstalled (see :meth:`uninstall`)."""
        return {"type": "app_uninstalled"}

    def slash_command_payload(
        self,
        *,
        command: str = "/memory",
        text: str = "",
        user_id: str,
        channel_id: str,
        team_id: str | None = None,
        user_name: str | None = None,
        channel_name: str | None = None,
        response_url: str | None = None,
    ) -> dict[str, str]:
        """The form fields of a slash command, with a fresh trigger_id and response_url.
        The user is then a member of the channel, if the fake knows it."""
        self._require_installed("slash commands")
        self._learn_member(channel_id, user_id)
        user = self.users.get(user_id)
        channel = self.channels.get(channel_id)
        return {
            "token": self.verification_token,
            "team_id": team_id or self.team_id,
            "team_domain": self.team_domain,
            "channel_id": channel_id,
            "channel_name": channel_name
            or (channel.name if channel is not None else "directmessage"),
            "user_id": user_id,
            "user_name": user_name or (user.name if user is not None else user_id.lower()),
            "command": command,
            "text": text,
            "api_app_id": self.api_app_id,
            "is_enterprise_install": "false",
            "response_url": response_url or self.new_response_url(),
            "trigger_id": self._new_trigger_id(),
        }

    def block_action_payload(
        self,
        *,
        action_id: str,
        value: str | None = None,
        user_id: str,
        channel_id: str,
        block_id: str | None = None,
        message_ts: str | None = None,
        message_text: str = "",
        response_url: str | None = None,
        team_id: str | None = None,
        action_type: str = "button",
        ephemeral: bool = False,
    ) -> dict[str, Any]:
        """A ``block_actions`` payload for a click on a message the bot posted.

        ``ephemeral``: the message was ephemeral (a response_url or chat.postEphemeral
        answer); Slack then marks the container ``is_ephemeral`` and sends no ``message``
        (there is no stored message to update: answer through ``response_url``)."""
        self._require_installed("interactions")
        self._learn_member(channel_id, user_id)
        team = team_id or self.team_id
        ts = message_ts or self.next_ts()
        block = block_id or secrets.token_hex(3)
        user = self.users.get(user_id)
        user_name = user.name if user is not None else user_id.lower()
        action: dict[str, Any] = {
            "action_id": action_id,
            "block_id": block,
            "type": action_type,
            "action_ts": self.next_ts(),
        }
        if action_type == "button":
            action["text"] = {"type": "plain_text", "text": action_id, "emoji": True}
        if value is not None:
            action["value"] = value
        channel = self.channels.get(channel_id)
        payload: dict[str, Any] = {
            "type": "block_actions",
            "user": {"id": user_id, "username": user_name, "name": user_name, "team_id": team},
            "api_app_id": self.api_app_id,
            "token": self.verification_token,
            "container": {
                "type": "message",
                "message_ts": ts,
                "channel_id": channel_id,
                "is_ephemeral": ephemeral,
            },
            "trigger_id": self._new_trigger_id(),
            "team": {"id": team, "domain": self.team_domain},
            "enterprise": None,
            "is_enterprise_install": False,
            "channel": {
                "id": channel_id,
                "name": channel.name if channel is not None else "directmessage",
            },
            "message": {
                "type": "message",
                "user": self.bot_user_id,
                "bot_id": self.bot_id,
                "text": message_text,
                "ts": ts,
                "team": team,
                "blocks": [],
            },
            "state": {"values": {}},
            "response_url": response_url or self.new_response_url(),
            "actions": [action],
        }
        if ephemeral:
            del payload["message"]
        return payload

    def message_action_payload(
        self,
        *,
        callback_id: str,
        user_id: str,
        channel_id: str,
        message: Mapping[str, Any] | RecordedMessage,
        team_id: str | None = None,
    ) -> dict[str, Any]:
        """A ``message_action`` payload: ``user_id`` runs the message shortcut
        ``callback_id`` from the menu of ``message`` (a message event the fake sent, one of
        the bot's posts or a seeded history message), in ``channel_id``.

        Deliver it like any interaction (``interactive_form_body`` + ``send_signed``, or
        ``socket_send_interactive``); Bolt routes it to ``app.shortcut(callback_id)`` /
        ``app.message_shortcut(callback_id)``. It carries the message as it is now (edits
        applied; ``thread_ts``/``parent_user_id`` for a thread reply, ``bot_id`` for a
        bot's message), a trigger_id and a response_url that takes the answer (ephemeral
        unless it says ``in_channel``). Shortcuts exist only on messages that exist:
        ValueError for a message the fake does not know."""
        self._require_installed("interactions")
        ts = message.ts if isinstance(message, RecordedMessage) else str(message.get("ts", ""))
        current = self._known_message(channel_id, ts)
        if current is None or channel_id not in self.channels:
            raise ValueError(f"no message {ts} in {channel_id}: nothing to run a shortcut on")
        self._learn_member(channel_id, user_id)
        team = team_id or self.team_id
        channel = self.channels[channel_id]
        channel_name = "directmessage" if channel.is_im else channel.name
        return {
            "type": "message_action",
            "token": self.verification_token,
            "action_ts": self.next_ts(),
            "team": {"id": team, "domain": self.team_domain},
            "user": self._payload_user(user_id, team),
            "channel": {"id": channel_id, "name": channel_name},
            "is_enterprise_install": False,
            "enterprise": None,
            "callback_id": callback_id,
            "trigger_id": self._new_trigger_id(),
            "response_url": self.new_response_url(),
            "message_ts": ts,
            "message": self._history_message(channel_id, current),
        }

    def home_block_action_payload(
        self,
        *,
        user_id: str,
        action_id: str,
        value: str | None = None,
        view: Mapping[str, Any] | None = None,
        team_id: str | None = None,
    ) -> dict[str, Any]:
        """A ``block_actions`` payload for a click in ``user_id``'s Home tab: ``view`` (by
        default the one last published for them) must hold an interactive element
        ``action_id``. As Slack sends it from a view: ``container`` is
        ``{"type": "view", "view_id": ...}``, ``view`` the whole view (its ``hash`` and
        ``state``), and there is no ``channel``, no ``message``, no ``response_url``:
        the app answers by publishing the tab again (views.publish)."""
        self._require_installed("interactions")
        shown = self._home_views.get(user_id) if view is None else view
        if shown is None:
            raise ValueError(f"no Home tab was published for {user_id}: nothing to click")
        found = _find_element(shown, action_id)
        if found is None:
            raise ValueError(f"the Home tab of {user_id} has no element {action_id}")
        block_id, element = found
        team = team_id or self.team_id
        action: dict[str, Any] = {
            "action_id": action_id,
            "block_id": block_id,
            "type": element.get("type", "button"),
            "action_ts": self.next_ts(),
        }
        if isinstance(element.get("text"), dict):
            action["text"] = dict(element["text"])
        chosen = value if value is not None else element.get("value")
        if chosen is not None:
            action["value"] = chosen
        return {
            "type": "block_actions",
            "user": self._payload_user(user_id, team),
            "api_app_id": self.api_app_id,
            "token": self.verification_token,
            "container": {"type": "view", "view_id": shown.get("id")},
            "trigger_id": self._new_trigger_id(),
            "team": {"id": team, "domain": self.team_domain},
            "enterprise": None,
            "is_enterprise_install": False,
            "view": copy.deepcopy(dict(shown)),
            "actions": [action],
        }

    def _payload_user(self, user_id: str, team: str) -> dict[str, Any]:
        """The ``user`` of an interaction payload: ``team_id`` is the user's own team (in a
        Slack Connect channel, another organisation's)."""
        user = self.users.get(user_id)
        name = user.name if user is not None else user_id.lower()
        own_team = user.team_id if user is not None else team
        return {"id": user_id, "username": name, "name": name, "team_id": own_team}
