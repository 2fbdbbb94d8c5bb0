"""Web API methods of the fake Slack: auth, chat.*, users.info, conversations.*,
apps.connections.open and views.*.
"""

from __future__ import annotations

import copy
import json
import secrets
import time
import uuid
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any
from urllib.parse import parse_qs, urlsplit

from .assistant import metadata_error
from .blocks import (
    _conversation_id,
    _decode_cursor,
    _encode_cursor,
    _flag,
    _in_window,
    _invalid_arguments,
    _ts_value,
    _view_error,
)
from .models import (
    _EVENT_ONLY_FIELDS,
    _HISTORY_LIMITS,
    _RESTRICTED_HISTORY_LIMIT,
    _VIEW_MAX_BYTES,
    FakeChannel,
)


class WebApiMixin:
    """The built-in Web API methods."""

    # ---------------------------------------------------------------- conversation contents

    def _dm_with(self, user_id: str) -> FakeChannel:
        """The app's DM with ``user_id``: the existing one, or a new one with the id
        conversations.open gives it."""
        for channel in self.channels.values():
            if channel.is_im and channel.user == user_id:
                return channel
        channel_id = _conversation_id([user_id])
        return self.add_channel(channel_id, channel_id, is_im=True, user_id=user_id)

    def _channel_messages(self, channel_id: str) -> dict[str, dict[str, Any]]:
        """Every message that exists in a conversation, by ts: the bot's posts and what
        people said (events sent, seeded history), as they are now."""
        found = {ts: m for (c, ts), m in self._messages.items() if c == channel_id}
        found.update({ts: m for (c, ts), m in self._said.items() if c == channel_id})
        return found

    def _known_message(self, channel_id: str, ts: str) -> dict[str, Any] | None:
        return self._said.get((channel_id, ts)) or self._messages.get((channel_id, ts))

    def _threads(self, channel_id: str) -> dict[str, list[dict[str, Any]]]:
        """The replies of every thread in a conversation, by parent ts, oldest first."""
        threads: dict[str, list[dict[str, Any]]] = {}
        for message in self._channel_messages(channel_id).values():
            thread_ts = message.get("thread_ts")
            if thread_ts is not None and thread_ts != message.get("ts"):
                threads.setdefault(str(thread_ts), []).append(message)
        for replies in threads.values():
            replies.sort(key=lambda m: _ts_value(m["ts"]) or 0)
        return threads

    def _replies_of(self, channel_id: str, ts: str) -> list[dict[str, Any]]:
        """The replies in the thread of ``ts``, oldest first."""
        return self._threads(channel_id).get(ts, [])

    def _thread_fields(self, ts: str, replies: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """What a thread's parent carries about its replies."""
        users = list(dict.fromkeys(str(r.get("user") or r.get("bot_id")) for r in replies))
        return {
            "thread_ts": ts,
            "reply_count": len(replies),
            "reply_users_count": len(users),
            "latest_reply": str(replies[-1]["ts"]),
            "reply_users": users,
            "is_locked": False,
            "subscribed": False,
        }

    def _history_message(
        self,
        channel_id: str,
        message: Mapping[str, Any],
        threads: Mapping[str, list[dict[str, Any]]] | None = None,
        *,
        with_metadata: bool = False,
    ) -> dict[str, Any]:
        """A stored message as conversations.history/replies (and interaction payloads)
        show it: no event fields, a thread parent with its reply fields, a reply with its
        parent's author, the bot's edited messages with ``edited``. ``threads``: the
        conversation's (:meth:`_threads`), when the caller has them already. Its
        ``metadata`` only ``with_metadata`` (the history methods' ``include_all_metadata``)."""
        shown = {k: copy.deepcopy(v) for k, v in message.items() if k not in _EVENT_ONLY_FIELDS}
        if not with_metadata:
            shown.pop("metadata", None)
        shown["type"] = "message"
        ts = str(shown.get("ts", ""))
        thread_ts = shown.get("thread_ts")
        if threads is None:
            threads = self._threads(channel_id)
        replies = threads.get(ts, []) if thread_ts in (None, ts) else []
        if replies:
            shown.update(self._thread_fields(ts, replies))
        elif thread_ts not in (None, ts):
            parent = self._known_message(channel_id, str(thread_ts))
            if parent is not None:
                shown["parent_user_id"] = parent.get("user") or parent.get("bot_id")
        edited = self._edited.get((channel_id, ts))
        if edited is not None:
            shown["edited"] = {"user": self.bot_user_id, "ts": edited}
        return shown

    # ---------------------------------------------------------------- Web API methods

    def _auth_test(self, params: dict[str, Any], token: str | None) -> dict[str, Any]:
        return {
            "ok": True,
            "url": f"https://{self.team_domain}.slack.com/",
            "team": self.team_name,
            "user": self.bot_name,
            "team_id": self.team_id,
            "user_id": self.bot_user_id,
            "bot_id": self.bot_id,
            "is_enterprise_install": False,
        }

    def _message_object(self, params: dict[str, Any], ts: str) -> dict[str, Any]:
        message: dict[str, Any] = {
            "type": "message",
            "user": self.bot_user_id,
            "bot_id": self.bot_id,
            "app_id": self.api_app_id,
            "text": params.get("text", params.get("markdown_text", "")),
            "ts": ts,
            "team": self.team_id,
        }
        if params.get("blocks") is not None:
            message["blocks"] = params["blocks"]
        if params.get("thread_ts") is not None:
            message["thread_ts"] = params["thread_ts"]
        if params.get("metadata") is not None:
            message["metadata"] = params["metadata"]
        return message

    def _chat_post_message(self, params: dict[str, Any], token: str | None) -> dict[str, Any]:
        channel = params.get("channel")
        error = self._post_error(params) or metadata_error(params)
        if error is not None:
            return {"ok": False, "error": error}
        ts = self.next_ts()
        message = self._message_object(params, ts)
        self._messages[(str(channel), ts)] = message
        self._count_channel_post(str(channel))
        self._assistant_replied(str(channel), params.get("thread_ts"))
        return {"ok": True, "channel": channel, "ts": ts, "message": message}

    def _chat_update(self, params: dict[str, Any], token: str | None) -> dict[str, Any]:
        channel = str(params.get("channel", ""))
        ts = str(params.get("ts", ""))
        # chat.update may change only part of a message (the text, or the blocks).
        error = self._post_error(params, needs_content=False) or metadata_error(params)
        if error is not None:
            return {"ok": False, "error": error}
        message = self._messages.get((channel, ts))
        if message is None:
            # The bot can only edit messages it posted (through this fake).
            return {"ok": False, "error": "message_not_found"}
        if "text" in params or "markdown_text" in params:
            message["text"] = params.get("text", params.get("markdown_text"))
        if params.get("blocks") is not None:
            message["blocks"] = params["blocks"]
        if params.get("metadata") is not None:
            message["metadata"] = params["metadata"]
        # Its history shows it edited (the response's message does not say so).
        self._edited[(channel, ts)] = self.next_ts()
        return {
            "ok": True,
            "channel": channel,
            "ts": ts,
            "text": message.get("text", ""),
            "message": message,
        }

    def _chat_post_ephemeral(self, params: dict[str, Any], token: str | None) -> dict[str, Any]:
        if not params.get("user"):
            return {"ok": False, "error": "user_not_found"}
        error = self._post_error(params, recipient=str(params["user"]))
        if error is not None:
            return {"ok": False, "error": error}
        return {"ok": True, "message_ts": self.next_ts()}

    def _chat_get_permalink(self, params: dict[str, Any], token: str | None) -> dict[str, Any]:
        """chat.getPermalink (no scope needed): ``channel`` and ``message_ts`` are required;
        ``channel_not_found`` for a conversation the fake does not know (or deleted),
        ``message_not_found`` for a ts that is no message in it. A thread reply's permalink
        carries ``thread_ts`` and ``cid``, as Slack's do."""
        channel_id, ts = str(params.get("channel") or ""), str(params.get("message_ts") or "")
        if not channel_id or not ts:
            return {"ok": False, "error": "invalid_arguments"}
        if self._app_channel(channel_id) is None:
            return {"ok": False, "error": "channel_not_found"}
        message = self._said.get((channel_id, ts)) or self._messages.get((channel_id, ts))
        if message is None:
            return {"ok": False, "error": "message_not_found"}
        url = f"https://{self.team_domain}.slack.com/archives/{channel_id}/p{ts.replace('.', '')}"
        thread_ts = message.get("thread_ts")
        if thread_ts and thread_ts != ts:
            url += f"?thread_ts={thread_ts}&cid={channel_id}"
        return {"ok": True, "channel": channel_id, "permalink": url}

    def resolve_permalink(self, url: str) -> dict[str, Any] | None:
        """The message a permalink of this workspace opens (as Slack's client would find
        it), or None: its channel, its ts (the digits after ``p``, six of them after the
        dot) and, for a thread reply, the thread it is in."""
        parsed = urlsplit(url)
        parts = parsed.path.split("/")
        if parsed.scheme != "https" or parsed.netloc != f"{self.team_domain}.slack.com":
            return None
        if len(parts) != 4 or parts[1] != "archives" or not parts[3].startswith("p"):
            return None
        channel_id, digits = parts[2], parts[3][1:]
        if not digits.isdigit() or len(digits) <= 6:
            return None
        ts = f"{digits[:-6]}.{digits[-6:]}"
        message = self._said.get((channel_id, ts)) or self._messages.get((channel_id, ts))
        if message is None:
            return None
        query = parse_qs(parsed.query)
        thread_ts = message.get("thread_ts")
        if thread_ts and thread_ts != ts and query.get("thread_ts") != [thread_ts]:
            return None
        return {**message, "channel": channel_id}

    def _users_info(self, params: dict[str, Any], token: str | None) -> dict[str, Any]:
        user = self.users.get(str(params.get("user", "")))
        if user is None:
            return {"ok": False, "error": "user_not_found"}
        return {"ok": True, "user": user.to_api()}

    def _conversations_info(self, params: dict[str, Any], token: str | None) -> dict[str, Any]:
        channel = self._app_channel(str(params.get("channel", "")))
        if channel is None:  # (a DM between people too: the app sees only its own)
            return {"ok": False, "error": "channel_not_found"}
        needed = _read_scope(channel)
        if self.scopes is not None and token == self.bot_token and needed not in self.scopes:
            return self._missing_scope([needed])
        return {"ok": True, "channel": channel.to_api()}

    def _conversations_members(self, params: dict[str, Any], token: str | None) -> dict[str, Any]:
        """conversations.members: the ids of the conversation's members (the bot's among
        them when it is in it), ``limit`` (default 100, at most 1000) a page, and
        ``response_metadata.next_cursor`` to the next. ``channel_not_found`` for one the
        app cannot see (unknown, deleted, a DM between people, a private channel it is not
        in), ``missing_scope`` without the read scope of its type (as conversations.info),
        ``invalid_limit``, ``invalid_cursor``."""
        channel = self._app_channel(str(params.get("channel") or ""))
        if channel is None or (channel.is_private and not channel.bot_is_member):
            return {"ok": False, "error": "channel_not_found"}
        needed = _read_scope(channel)
        if self.scopes is not None and token == self.bot_token and needed not in self.scopes:
            return self._missing_scope([needed])
        try:
            limit = int(str(params.get("limit") or 100))
            offset = int(str(params.get("cursor") or "members:0").removeprefix("members:"))
        except ValueError:
            error = "invalid_limit" if params.get("cursor") in (None, "") else "invalid_cursor"
            return {"ok": False, "error": error}
        if not 1 <= limit <= 1000:
            return {"ok": False, "error": "invalid_limit"}
        members = sorted(channel.members | ({self.bot_user_id} if channel.bot_is_member else set()))
        page, more = members[offset : offset + limit], offset + limit < len(members)
        cursor = f"members:{offset + limit}" if more else ""
        return {"ok": True, "members": page, "response_metadata": {"next_cursor": cursor}}

    def _conversations_open(self, params: dict[str, Any], token: str | None) -> dict[str, Any]:
        existing = params.get("channel")
        if existing:
            channel = self._app_channel(str(existing))
            if channel is None:
                return {"ok": False, "error": "channel_not_found"}
            return {"ok": True, "no_op": True, "already_open": True, "channel": channel.to_api()}
        users = [u for u in str(params.get("users", "")).split(",") if u]
        if not users:
            return {"ok": False, "error": "users_list_not_supplied"}
        unknown = [u for u in users if u not in self.users]
        if unknown:
            return {"ok": False, "error": "user_not_found"}
        channel_id = _conversation_id(users)
        if len(users) == 1:
            # The DM with one person is the one there is, whatever its id.
            channel_id = next(
                (c.id for c in self.channels.values() if c.is_im and c.user == users[0]),
                channel_id,
            )
        already_open = channel_id in self.channels
        if not already_open:
            if len(users) == 1:
                self._dm_with(users[0])
            else:
                self.channels[channel_id] = FakeChannel(
                    id=channel_id,
                    name="mpdm-" + "--".join(users),
                    is_mpim=True,
                    members={*users, self.bot_user_id},
                )
        channel = self.channels[channel_id]
        wants_full = str(params.get("return_im", "")).lower() in ("1", "true")
        return {
            "ok": True,
            "no_op": already_open,
            "already_open": already_open,
            "channel": channel.to_api() if wants_full else {"id": channel_id},
        }

    def _apps_connections_open(self, params: dict[str, Any], token: str | None) -> dict[str, Any]:
        ticket = uuid.uuid4().hex
        self._tickets.add(ticket)
        ws_base = self.base_url.replace("http://", "ws://", 1)
        return {
            "ok": True,
            "url": f"{ws_base}/socket-mode/link/?ticket={ticket}&app_id={self.api_app_id}",
        }

    def _views_open(self, params: dict[str, Any], token: str | None) -> dict[str, Any]:
        view = params.get("view")
        if not params.get("trigger_id") and not params.get("interactivity_pointer"):
            return {"ok": False, "error": "invalid_trigger"}
        if not isinstance(view, dict):
            return {"ok": False, "error": "invalid_arguments"}
        return {
            "ok": True,
            "view": {**view, "id": "V" + secrets.token_hex(5).upper(), "team_id": self.team_id},
        }

    def _views_publish(self, params: dict[str, Any], token: str | None) -> dict[str, Any]:
        """views.publish (no scope needed; a bot token): ``user_id`` and ``view`` (a JSON
        string or object) are required, ``hash`` optional. The view must be a valid Home
        tab view (type ``home``, at most 100 valid blocks...): otherwise
        ``invalid_arguments`` with Slack's ``response_metadata.messages``; an unknown user is
        ``invalid_arguments`` ("invalid `user_id`"), a view over 250 kB ``view_too_large``,
        a Home tab the app has not enabled ``not_enabled``, a ``hash`` other than the
        current view's ``hash_conflict``, an ``external_id`` another view uses
        ``duplicate_external_id``. The published view gets Slack's fields (``id``, a new
        ``hash``, ``team_id``, ``app_id``, ``bot_id``...) and replaces the user's tab."""
        user_id = str(params.get("user_id") or "")
        if user_id not in self.users:
            return _invalid_arguments("invalid `user_id`")
        view = params.get("view")
        if isinstance(view, str):
            try:
                view = json.loads(view)
            except ValueError:
                return _invalid_arguments("[ERROR] invalid JSON [json-pointer:/view]")
        if not isinstance(view, dict):
            return _invalid_arguments("[ERROR] missing required field: view")
        if len(json.dumps(view).encode()) > _VIEW_MAX_BYTES:
            return {"ok": False, "error": "view_too_large"}
        errors = _view_error(view)
        if errors:
            return _invalid_arguments(*errors)
        if not self.home_tab_enabled:
            return {"ok": False, "error": "not_enabled"}
        current = self._home_views.get(user_id)
        wanted_hash = params.get("hash")
        if wanted_hash and (current is None or current["hash"] != wanted_hash):
            return {"ok": False, "error": "hash_conflict"}
        external_id = str(view.get("external_id") or "")
        if external_id and any(
            v.get("external_id") == external_id
            for user, v in self._home_views.items()
            if user != user_id
        ):
            return {"ok": False, "error": "duplicate_external_id"}
        view_id = current["id"] if current is not None else "V" + secrets.token_hex(5).upper()
        blocks = [
            {**block, "block_id": block.get("block_id") or secrets.token_hex(3)}
            for block in view["blocks"]
        ]
        published = {
            "id": view_id,
            "team_id": self.team_id,
            "type": "home",
            "close": None,
            "submit": None,
            "blocks": blocks,
            "private_metadata": view.get("private_metadata", ""),
            "callback_id": view.get("callback_id", ""),
            "state": {"values": {}},
            "hash": f"{int(time.time())}.{secrets.randbelow(10**8):08d}",
            "clear_on_close": False,
            "notify_on_close": False,
            "root_view_id": view_id,
            "previous_view_id": None,
            "app_id": self.api_app_id,
            "external_id": external_id,
            "app_installed_team_id": self.team_id,
            "bot_id": self.bot_id,
        }
        self._home_views[user_id] = published
        return {"ok": True, "view": copy.deepcopy(published)}

    def _history_access(
        self, params: dict[str, Any], token: str | None
    ) -> tuple[FakeChannel | None, dict[str, Any] | None]:
        """The conversation conversations.history/replies read, or the error: unknown or
        deleted (``channel_not_found``), the history scope of its type missing
        (``missing_scope``), the bot not in it (``not_in_channel`` for a public channel;
        a private one the bot is not in is ``channel_not_found``: it cannot see it)."""
        channel = self._app_channel(str(params.get("channel") or ""))
        if channel is None:
            return None, {"ok": False, "error": "channel_not_found"}
        if channel.is_im:
            needed = "im:history"
        elif channel.is_mpim:
            needed = "mpim:history"
        else:
            needed = "groups:history" if channel.is_private else "channels:history"
        if self.scopes is not None and token == self.bot_token and needed not in self.scopes:
            return None, self._missing_scope([needed])
        if not channel.bot_is_member and not channel.is_im:
            error = "not_in_channel" if needed == "channels:history" else "channel_not_found"
            return None, {"ok": False, "error": error}
        return channel, None

    def _history_window(
        self, method: str, params: dict[str, Any]
    ) -> tuple[tuple[int, Decimal, Decimal, bool, Decimal | None] | None, dict[str, Any] | None]:
        """The arguments both history methods share, checked: (limit, oldest, latest,
        inclusive, cursor position), or the error (``invalid_ts_oldest``,
        ``invalid_ts_latest``, ``invalid_cursor``, ``invalid_arguments`` for a limit that is
        no positive number). A limit over the maximum is cut to it, as Slack does ("fewer
        than the requested number of items may be returned")."""
        default, maximum = _HISTORY_LIMITS[method]
        if self.history_tier == "restricted":
            default = maximum = _RESTRICTED_HISTORY_LIMIT
        raw_limit = params.get("limit")
        limit = default
        if raw_limit not in (None, ""):
            try:
                limit = int(str(raw_limit))
            except ValueError:
                return None, _invalid_arguments("invalid `limit`")
            if limit < 1:
                return None, _invalid_arguments("invalid `limit`")
        oldest = _ts_value(params.get("oldest") or "0")
        if oldest is None:
            return None, {"ok": False, "error": "invalid_ts_oldest"}
        # No latest: up to now, i.e. everything there is.
        latest = _ts_value(params["latest"]) if params.get("latest") else Decimal("Infinity")
        if latest is None:
            return None, {"ok": False, "error": "invalid_ts_latest"}
        position: Decimal | None = None
        if params.get("cursor"):
            position = _decode_cursor(str(params["cursor"]))
            if position is None:
                return None, {"ok": False, "error": "invalid_cursor"}
        inclusive = _flag(params.get("inclusive"))
        return (min(limit, maximum), oldest, latest, inclusive, position), None

    def _conversations_history(self, params: dict[str, Any], token: str | None) -> dict[str, Any]:
        """conversations.history: the conversation's messages, newest first (thread
        replies only through conversations.replies, unless also sent to the channel);
        ``oldest``/``latest`` bound them (exclusive unless ``inclusive``), ``limit``
        (default 100, at most 999; 15 and 15 for a "restricted" app) sizes a page and
        ``response_metadata.next_cursor`` leads to the next one while ``has_more``. A
        thread parent carries ``reply_count``, ``latest_reply``...; deleted messages are
        gone, a deleted parent with replies shows as a ``tombstone``."""
        channel, error = self._history_access(params, token)
        window, window_error = self._history_window("conversations.history", params)
        if error is not None or window_error is not None or channel is None or window is None:
            return error or window_error or {"ok": False, "error": "channel_not_found"}
        limit, oldest, latest, inclusive, position = window
        metadata = _flag(params.get("include_all_metadata"))
        threads = self._threads(channel.id)
        messages = []
        for message in self._channel_messages(channel.id).values():
            ts = str(message.get("ts", ""))
            thread_ts = message.get("thread_ts")
            is_reply = thread_ts not in (None, ts) and message.get("subtype") != "thread_broadcast"
            # A tombstone stays only while its thread has replies.
            orphan = message.get("subtype") == "tombstone" and not threads.get(ts)
            if not is_reply and not orphan:
                messages.append(message)
        messages.sort(key=lambda m: _ts_value(m["ts"]) or 0, reverse=True)
        in_window = [
            m for m in messages if _in_window(m, oldest=oldest, latest=latest, inclusive=inclusive)
        ]
        if position is not None:
            in_window = [m for m in in_window if (_ts_value(m["ts"]) or 0) <= position]
        page, rest = in_window[:limit], in_window[limit:]
        body: dict[str, Any] = {
            "ok": True,
            "messages": [
                self._history_message(channel.id, m, threads, with_metadata=metadata) for m in page
            ],
            "has_more": bool(rest),
            "pin_count": 0,
            "channel_actions_ts": None,
            "channel_actions_count": 0,
            "response_metadata": {"next_cursor": _encode_cursor(rest[0]["ts"]) if rest else ""},
        }
        for key in ("oldest", "latest"):
            if params.get(key):
                body[key] = str(params[key])
        return body

    def _conversations_replies(self, params: dict[str, Any], token: str | None) -> dict[str, Any]:
        """conversations.replies: the thread of ``ts`` (its parent or any reply), oldest
        first with the parent first (on the first page); just the message if it has no
        replies, ``thread_not_found`` if there is no such message (or only the tombstone of a
        deleted parent whose replies are all deleted too). ``limit`` defaults to
        1000 (at most 1000; 15 and 15 for a "restricted" app); ``oldest``/``latest``/
        ``inclusive``/``cursor`` as for conversations.history."""
        channel, error = self._history_access(params, token)
        window, window_error = self._history_window("conversations.replies", params)
        if error is not None or window_error is not None or channel is None or window is None:
            return error or window_error or {"ok": False, "error": "channel_not_found"}
        if not params.get("ts"):
            return _invalid_arguments("missing required field: ts")
        limit, oldest, latest, inclusive, position = window
        metadata = _flag(params.get("include_all_metadata"))
        message = self._known_message(channel.id, str(params["ts"]))
        if message is not None and message.get("thread_ts") not in (None, message["ts"]):
            message = self._known_message(channel.id, str(message["thread_ts"]))
        threads = self._threads(channel.id)
        if message is not None and message.get("subtype") == "tombstone":
            # A deleted parent stays only while its thread has replies.
            message = message if threads.get(str(message["ts"])) else None
        if message is None:
            return {"ok": False, "error": "thread_not_found"}
        replies = [
            r
            for r in threads.get(str(message["ts"]), [])
            if _in_window(r, oldest=oldest, latest=latest, inclusive=inclusive)
        ]
        if position is None:
            thread = [message, *replies]
        else:
            thread = [r for r in replies if (_ts_value(r["ts"]) or 0) >= position]
        page, rest = thread[:limit], thread[limit:]
        return {
            "ok": True,
            "messages": [
                self._history_message(channel.id, m, threads, with_metadata=metadata) for m in page
            ],
            "has_more": bool(rest),
            "response_metadata": {"next_cursor": _encode_cursor(rest[0]["ts"]) if rest else ""},
        }


def _read_scope(channel: Any) -> str:
    """The scope that reading a conversation of this kind needs (conversations.info,
    .members): im:read, mpim:read, groups:read or channels:read."""
    if channel.is_im:
        return "im:read"
    if channel.is_mpim:
        return "mpim:read"
    return "groups:read" if channel.is_private else "channels:read"
