"""The fake Slack's workspace: users, channels, members, history, installs and uninstalls, tokens,
rate limits and injected failures, and the record views.
"""

from __future__ import annotations

import copy
import time
import uuid
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .blocks import _ts_value
from .models import (
    _EVENT_ONLY_FIELDS,
    ApiCall,
    FakeChannel,
    FakeUser,
    FileUpload,
    MethodHandler,
    RecordedMessage,
    ResponseUrlPost,
    _ResponseUrl,
)


class WorkspaceMixin:
    """Users, channels, history, installs, failure injection and record views."""

    # ---------------------------------------------------------------- workspace setup

    def add_user(
        self,
        user_id: str,
        name: str,
        *,
        real_name: str | None = None,
        display_name: str | None = None,
        is_admin: bool = False,
        is_owner: bool = False,
        is_bot: bool = False,
        deleted: bool = False,
        team_id: str | None = None,
        tz: str = "UTC",
    ) -> FakeUser:
        """Add (or replace) a member that ``users.info`` knows."""
        user = FakeUser(
            id=user_id,
            name=name,
            real_name=real_name if real_name is not None else name.title(),
            display_name=display_name if display_name is not None else name,
            team_id=team_id or self.team_id,
            is_admin=is_admin,
            is_owner=is_owner,
            is_bot=is_bot,
            deleted=deleted,
            tz=tz,
        )
        self.users[user_id] = user
        return user

    def add_channel(
        self,
        channel_id: str,
        name: str,
        *,
        is_im: bool = False,
        is_private: bool = False,
        user_id: str | None = None,
        members: Iterable[str] = (),
        shared_with: Iterable[str] = (),
    ) -> FakeChannel:
        """Add (or replace) a conversation that ``conversations.info`` knows and the chat.*
        methods post to (any other is ``channel_not_found``, as in Slack).

        ``user_id`` is the other member of a DM (``is_im=True``); ``members``, the people in
        a channel (more join by sending an event, a slash command or a click there);
        ``shared_with``, the other organisations' team ids of a Slack Connect channel.
        """
        channel = FakeChannel(
            id=channel_id,
            name=name,
            is_im=is_im,
            is_private=is_private,
            user=user_id,
            members=set(members) | ({user_id, self.bot_user_id} if is_im and user_id else set()),
            shared_with=tuple(shared_with),
        )
        self.channels[channel_id] = channel
        return channel

    def add_dm_between(self, channel_id: str, user_id: str, other_id: str) -> FakeChannel:
        """A DM between two people, which the app is not in and never can be (Slack shows
        it only its own DMs: ``channel_not_found``; see :attr:`FakeChannel.hidden_from_app`).
        Its messages are what :meth:`add_history` seeds, for a shortcut to run on."""
        channel = FakeChannel(
            id=channel_id,
            name=channel_id,
            is_im=True,
            bot_is_member=False,
            members={user_id, other_id},
        )
        self.channels[channel_id] = channel
        return channel

    def _app_channel(self, channel_id: Any) -> FakeChannel | None:
        """The conversation as the app's token sees it: None for one it cannot (unknown,
        deleted, or a DM between people)."""
        channel = self.channels.get(channel_id) if isinstance(channel_id, str) else None
        return None if channel is None or channel.hidden_from_app else channel

    def add_member(self, channel_id: str, user_id: str) -> None:
        """``user_id`` joins a conversation the fake knows."""
        self.channels[channel_id].members.add(user_id)

    def remove_member(self, channel_id: str, user_id: str) -> None:
        """``user_id`` leaves (or is removed from) a conversation."""
        self.channels[channel_id].members.discard(user_id)

    def _learn_from_event(self, event: Any) -> None:
        """What an event the fake sends proves: Slack delivers message events (and mentions)
        only from conversations the app is in, so the conversation exists with the bot in
        it, and its author is a member. Its kind comes from ``channel_type`` or, for an
        app_mention (which has none), from the id: D is a DM, G a private channel."""
        if not isinstance(event, Mapping):
            return
        if self._learn_from_lifecycle_event(event):
            return
        channel_id, user_id = event.get("channel"), event.get("user")
        if not isinstance(channel_id, str) or not channel_id:
            return
        if channel_id not in self.channels and channel_id not in self.deleted_channels:
            kind = event.get("channel_type") or {"D": "im", "G": "group"}.get(channel_id[:1])
            author = user_id if isinstance(user_id, str) else None
            if kind == "mpim":
                self.channels[channel_id] = FakeChannel(
                    id=channel_id, name=f"mpdm-{channel_id.lower()}", is_mpim=True
                )
            else:
                self.add_channel(
                    channel_id,
                    channel_id.lower(),
                    is_im=kind == "im",
                    is_private=kind == "group",
                    user_id=author if kind == "im" else None,
                )
        self._learn_member(channel_id, user_id)
        self._learn_message(channel_id, event)

    def _learn_from_lifecycle_event(self, event: Mapping[str, Any]) -> bool:
        """What an event about a place or the app itself means (True if it is one): a
        deleted conversation is gone (``channel_not_found``), an archived one takes no more
        posts (``is_archived``), revoked tokens stop working, an uninstalled app gets
        nothing more, a member who left is no longer in it (the bot: its history is closed
        to it)."""
        kind, channel_id = event.get("type"), str(event.get("channel", ""))
        if kind in ("channel_deleted", "group_deleted"):
            self.delete_channel(channel_id)
        elif kind in ("channel_left", "group_left"):
            self.leave_channel(channel_id, self.bot_user_id)
        elif kind == "member_left_channel":
            self.leave_channel(channel_id, str(event.get("user", "")))
        elif kind in ("channel_archive", "group_archive"):
            self.archive_channel(channel_id)
        elif kind == "tokens_revoked":
            tokens = event.get("tokens")
            bots = tokens.get("bot") if isinstance(tokens, Mapping) else None
            if isinstance(bots, Sequence) and self.bot_user_id in bots:
                self._revoke_bot_token()
        elif kind == "app_uninstalled":
            # "An app is not uninstalled until its final user and bot tokens are revoked."
            self._revoke_bot_token()
            self.installed = False
        else:
            return False
        return True

    def _revoke_bot_token(self) -> None:
        # For a bot token whose bot user is gone Slack documents account_inactive
        # ("Authentication token is for a deleted user or workspace when using a bot
        # token"); token_revoked is the user-token counterpart.
        self._invalid_tokens[self.bot_token] = "account_inactive"

    def _require_installed(self, what: str) -> None:
        if not self.installed:
            raise ValueError(f"the app was uninstalled: Slack sends it no {what}")

    def _learn_message(self, channel_id: str, event: Mapping[str, Any]) -> None:
        """A message event the fake sends is a message that now exists in Slack (an edit
        changes it, a delete removes it): chat.getPermalink finds it."""
        subtype = event.get("subtype")
        if event.get("type") not in ("message", "app_mention"):
            return
        if subtype in (None, "file_share", "thread_broadcast") and isinstance(event.get("ts"), str):
            self._said.setdefault((channel_id, event["ts"]), dict(event))
        elif subtype == "message_deleted":
            self._said.pop((channel_id, str(event.get("deleted_ts", ""))), None)
        elif subtype == "message_changed" and isinstance(event.get("message"), Mapping):
            key = (channel_id, str(event["message"].get("ts", "")))
            if key in self._said:
                self._said[key] = {**event["message"], "channel": channel_id}

    def _learn_member(self, channel_id: Any, user_id: Any) -> None:
        """Someone who speaks, runs a command or clicks in a known conversation is in it
        (Slack shows the composer only to members). A command alone does not make a
        conversation known: slash commands work also where the bot is not."""
        channel = self.channels.get(channel_id) if isinstance(channel_id, str) else None
        if channel is not None and isinstance(user_id, str) and user_id:
            channel.members.add(user_id)

    def delete_channel(self, channel_id: str) -> None:
        """Delete a conversation: calls that name it fail with ``channel_not_found``, its
        history with it. (Sending a ``channel_deleted`` / ``group_deleted`` event through
        ``event_payload`` does the same.)"""
        self.channels.pop(channel_id, None)
        self.deleted_channels.add(channel_id)

    def leave_channel(self, channel_id: str, user_id: str) -> None:
        """``user_id`` is no longer in a conversation; the bot user: it no longer reads its
        history (``not_in_channel``, or ``channel_not_found`` for a private one) nor posts
        there. (A ``channel_left`` / ``group_left`` event, or a ``member_left_channel``
        naming them, sent through ``event_payload`` does the same.)"""
        channel = self.channels.get(channel_id)
        if channel is None:
            return
        channel.members.discard(user_id)
        if user_id == self.bot_user_id:
            channel.bot_is_member = False

    def archive_channel(self, channel_id: str) -> None:
        """Archive a conversation: it still exists and its history can be read, but posts to
        it fail with ``is_archived``. (A ``channel_archive`` / ``group_archive`` event sent
        through ``event_payload`` does the same.)"""
        channel = self.channels.get(channel_id)
        if channel is not None:
            channel.is_archived = True

    def invalidate_token(self, token: str, *, error: str = "invalid_auth") -> None:
        """Make every call with ``token`` fail with ``error`` (default ``invalid_auth``).

        Tokens the fake was never told about (anything but ``bot_token`` and ``app_token``)
        are already invalid.
        """
        self._invalid_tokens[token] = error

    def uninstall(self) -> list[dict[str, Any]]:
        """Someone removes the app from the workspace: its bot token stops working
        (``account_inactive``, what Slack documents for a bot token whose bot is gone) and
        Slack sends it nothing more but the two events returned here, ready to deliver
        (``tokens_revoked`` for the bot user, then ``app_uninstalled``; Slack does not
        guarantee their order). The app-level token (Socket Mode) belongs to the app, not to
        the installation, and keeps working."""
        events = [self.tokens_revoked_event(), self.app_uninstalled_event()]
        for event in events:
            self._learn_from_lifecycle_event(event)
        # Slack sends only what the app subscribes to.
        return [
            self.event_payload(event=event)
            for event in events
            if self.bot_events is None or event["type"] in self.bot_events
        ]

    def add_history(self, channel_id: str, messages: Iterable[Mapping[str, Any]]) -> None:
        """Seed the past of a conversation the fake knows: messages posted before the app
        was there (or while it was away), which only ``conversations.history`` /
        ``conversations.replies`` (and permalinks) can show. Each one is a message as
        ``message_event`` builds it (or any dict with ``ts``, ``user`` or ``bot_id``, and
        ``text``); thread replies carry their parent's ``thread_ts``. Messages of this bot
        (its ``bot_id``) can then be edited with chat.update, as in Slack."""
        if channel_id not in self.channels:
            raise ValueError(f"add the conversation {channel_id} first (add_channel)")
        for message in messages:
            ts = message.get("ts")
            if not isinstance(ts, str) or _ts_value(ts) is None:
                raise ValueError(f"a history message needs a message timestamp: {message!r}")
            stored = {k: v for k, v in message.items() if k not in _EVENT_ONLY_FIELDS}
            stored["type"] = "message"
            if message.get("bot_id") == self.bot_id:
                self._messages[(channel_id, ts)] = stored
            else:
                self._said[(channel_id, ts)] = {**stored, "channel": channel_id}
            # Keep new timestamps after everything already said.
            self._last_ts = max(self._last_ts, float(ts))

    def delete_quietly(self, original: Mapping[str, Any]) -> dict[str, Any]:
        """Its author deletes ``original`` (a message the fake knows) while the app is away:
        Slack changes what the Web API shows (gone; a thread parent with replies becomes a
        ``tombstone``) and the event never reaches the app. Returns the event Slack would
        have sent (``message_deleted``, or the ``message_changed`` to a tombstone)."""
        channel_id, ts = str(original["channel"]), str(original["ts"])
        if self._known_message(channel_id, ts) is None:
            raise ValueError(f"no message {ts} in {channel_id} to delete")
        if self._replies_of(channel_id, ts):
            event = self.tombstone_event(parent=original)
        else:
            event = self.message_deleted_event(original=original)
        self._learn_message(channel_id, event)
        return event

    def edit_quietly(self, original: Mapping[str, Any], *, text: str) -> dict[str, Any]:
        """Its author edits ``original`` while the app is away: the Web API shows the new text
        with an ``edited`` stamp; no event reaches the app. Returns the ``message_changed``
        event Slack would have sent."""
        channel_id, ts = str(original["channel"]), str(original["ts"])
        if self._known_message(channel_id, ts) is None:
            raise ValueError(f"no message {ts} in {channel_id} to edit")
        event = self.message_changed_event(original=original, text=text)
        self._learn_message(channel_id, event)
        return event

    def rate_limit_next(self, *, method: str, count: int = 1, retry_after: int = 1) -> None:
        """Answer the next ``count`` calls of ``method`` with HTTP 429 and ``Retry-After``.

        slack_sdk's ``AsyncRateLimitErrorRetryHandler`` sleeps ``retry_after`` plus up to one
        second of jitter before retrying; without it the client raises ``SlackApiError``
        (``ratelimited``).
        """
        queue = self._rate_limits.setdefault(method, deque())
        queue.extend([retry_after] * count)

    def fail_next(self, *, method: str, error: str, count: int = 1) -> None:
        """Answer the next ``count`` calls of ``method`` with ``{"ok": false, "error": error}``."""
        queue = self._failures.setdefault(method, deque())
        queue.extend([error] * count)

    def register_method(self, method: str, handler: MethodHandler) -> None:
        """Serve an extra Web API method (or override a built-in one) with ``handler``.

        The handler gets the merged params and the token (already authenticated as a bot
        token) and returns the JSON body.
        """
        self._custom_methods[method] = handler

    def reject_next_response(self, *, error: str = "invalid_blocks", count: int = 1) -> None:
        """Refuse the next ``count`` valid response_url posts with HTTP 400 and ``error``, for
        the rejections this fake does not model (Slack's checks are wider than its own)."""
        self._response_rejections.extend([error] * count)

    def age_rate_windows(self, seconds: float) -> None:
        """Move every rate window (the "restricted" history tier's one request a minute,
        the methods' tiers, the channels' messages a second) ``seconds`` into the past,
        without waiting."""
        for method in self._history_calls:
            self._history_calls[method] -= seconds
        for answered in self._rate_windows.values():
            for index in range(len(answered)):
                answered[index] -= seconds
        self._age_channel_posts(seconds)

    def home_view(self, user_id: str) -> dict[str, Any] | None:
        """The Home tab view last published for ``user_id`` (as views.publish answered it,
        with its ``id``, ``hash``...), or None."""
        view = self._home_views.get(user_id)
        return copy.deepcopy(view) if view is not None else None

    def age_response_urls(self, seconds: float) -> None:
        """Make every response_url issued so far ``seconds`` older (Slack's expire after 30
        minutes), without waiting."""
        for registration in self._response_urls.values():
            registration.issued_at -= seconds

    def new_response_url(self) -> str:
        """Issue a response_url that points at the fake (usable five times, like Slack's)."""
        response_id = uuid.uuid4().hex
        self._response_urls[response_id] = _ResponseUrl()
        return f"{self.base_url}/response/{response_id}"

    def next_ts(self) -> str:
        """A fresh message timestamp, strictly increasing (``"1700000000.000100"`` style)."""
        self._last_ts = max(time.time(), self._last_ts + 0.000001)
        return f"{self._last_ts:.6f}"

    # ---------------------------------------------------------------- recorded views

    @property
    def posted_messages(self) -> list[RecordedMessage]:
        """Successful ``chat.postMessage`` calls, oldest first."""
        return self._messages_of("chat.postMessage")

    @property
    def updates(self) -> list[RecordedMessage]:
        """Successful ``chat.update`` calls, oldest first."""
        return self._messages_of("chat.update")

    @property
    def ephemerals(self) -> list[RecordedMessage]:
        """Successful ``chat.postEphemeral`` calls, oldest first."""
        return self._messages_of("chat.postEphemeral")

    @property
    def uploads(self) -> list[FileUpload]:
        """Every file whose upload URL was issued; check ``completed`` and ``content``."""
        return list(self._uploads.values())

    @property
    def responses(self) -> list[ResponseUrlPost]:
        """POSTs to response URLs, oldest first."""
        return list(self._responses)

    @property
    def unknown_methods(self) -> list[ApiCall]:
        """Calls of Web API methods the fake does not implement."""
        return [call for call in self.calls if call.error == "unknown_method"]

    def calls_of(self, method: str, *, ok_only: bool = False) -> list[ApiCall]:
        """The recorded calls of one Web API method."""
        return [c for c in self.calls if c.method == method and (c.ok or not ok_only)]

    def _messages_of(self, method: str) -> list[RecordedMessage]:
        messages: list[RecordedMessage] = []
        for call in self.calls_of(method, ok_only=True):
            params = call.params
            blocks = params.get("blocks")
            messages.append(
                RecordedMessage(
                    method=method,
                    channel=str(call.response.get("channel", params.get("channel", ""))),
                    ts=str(call.response.get("ts", call.response.get("message_ts", ""))),
                    text=params.get("text", params.get("markdown_text")),
                    blocks=blocks if isinstance(blocks, list) else None,
                    thread_ts=params.get("thread_ts"),
                    user=params.get("user") if method == "chat.postEphemeral" else None,
                    params=params,
                )
            )
        return messages
