"""The fake Slack's data: method scopes and documented limits, event subscriptions, and the records
of what the app did (API calls, messages, uploads, response_url posts, Socket Mode envelopes).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from aiohttp import web

T = TypeVar("T")

EnvelopeType = Literal["events_api", "slash_commands", "interactive"]

#: How Slack rates conversations.history / conversations.replies for this app: "standard"
#: (Marketplace and internal customer-built apps: Tier 3, limit up to 999 / 1000), or
#: "restricted" (commercially distributed outside the Marketplace, since 29 May 2025: one
#: request a minute per method, at most and by default 15 messages a page).
HistoryTier = Literal["standard", "restricted"]

#: A custom Web API method: receives (params, token) and returns the JSON body to send.
MethodHandler = Callable[[dict[str, Any], str | None], dict[str, Any]]

# Methods that only accept an app-level (xapp-) token; every other method wants a bot token.
_APP_TOKEN_METHODS = frozenset({"apps.connections.open"})

# Arguments that slack_sdk may send JSON-encoded inside a form/query string.
_JSON_ARGUMENTS = ("blocks", "attachments", "files", "view", "metadata")

# Slack accepts up to five posts to one response_url, within 30 minutes of the interaction.
_RESPONSE_URL_MAX_USES = 5
_RESPONSE_URL_LIFETIME_S = 30 * 60

# Message limits Slack enforces on what is posted (Block Kit reference, chat.postMessage).
_MESSAGE_TEXT_CHARS = 40_000
_MAX_BLOCKS = 50
_SECTION_TEXT_CHARS = 3000
_SECTION_FIELD_CHARS = 2000
_SECTION_FIELDS = 10
_HEADER_TEXT_CHARS = 150
_CONTEXT_ELEMENTS = 10
_ACTIONS_ELEMENTS = 25
_BLOCK_ID_CHARS = 255
# Block types this fake does not check in detail (accepted as they are).
_UNCHECKED_BLOCK_TYPES = frozenset(
    {"divider", "image", "rich_text", "input", "file", "video", "markdown", "table"}
)

# The bot scope each Web API method needs (Slack's method reference); checked only when the
# fake is given the installed scopes. conversations.info needs the read scope of the
# conversation's type: any one of them passes this first check, the handler then asks for
# the right one.
_METHOD_SCOPES: dict[str, frozenset[str]] = {
    "chat.postMessage": frozenset({"chat:write"}),
    "chat.update": frozenset({"chat:write"}),
    "chat.postEphemeral": frozenset({"chat:write"}),
    "users.info": frozenset({"users:read"}),
    "conversations.info": frozenset({"channels:read", "groups:read", "im:read", "mpim:read"}),
    "conversations.open": frozenset({"im:write"}),
    # Like conversations.info: the history scope of the conversation's type, checked by the
    # handler once it knows the conversation.
    "conversations.history": frozenset(
        {"channels:history", "groups:history", "im:history", "mpim:history"}
    ),
    "conversations.replies": frozenset(
        {"channels:history", "groups:history", "im:history", "mpim:history"}
    ),
    "files.getUploadURLExternal": frozenset({"files:write"}),
    "files.completeUploadExternal": frozenset({"files:write"}),
    # Like conversations.info: the read scope of the conversation's type.
    "conversations.members": frozenset({"channels:read", "groups:read", "im:read", "mpim:read"}),
    # setStatus "accepts either the assistant:write or chat:write scope for the time being"
    # (changelog, 2026-03-05); the others, assistant:write.
    "assistant.threads.setStatus": frozenset({"chat:write", "assistant:write"}),
    "assistant.threads.setSuggestedPrompts": frozenset({"assistant:write"}),
    "assistant.threads.setTitle": frozenset({"assistant:write"}),
    "chat.startStream": frozenset({"chat:write"}),
    "chat.appendStream": frozenset({"chat:write"}),
    "chat.stopStream": frozenset({"chat:write"}),
}

# conversations.history / conversations.replies (method reference, docs.slack.dev): limit
# defaults to 100 (max 999) and to 1000 (max 1000); for "restricted" apps both are 15, and
# each method answers one request a minute.
_HISTORY_LIMITS = {"conversations.history": (100, 999), "conversations.replies": (1000, 1000)}
_RESTRICTED_HISTORY_LIMIT = 15
_RESTRICTED_HISTORY_INTERVAL_S = 60.0
# Slack's rate tiers count requests a minute, per method, app and workspace.
_RATE_WINDOW_S = 60.0
# The tiers of the methods (each method's reference page, "Rate limits"): Tier 1 is 1+ a
# minute, Tier 2 20+, Tier 3 50+, Tier 4 100+. The fake answers exactly that many and no
# burst beyond (limit_rate sets another rate, as Slack grants some apps). Methods of the
# "special" tier (auth.test, chat.getPermalink, assistant.threads.setStatus) have no number
# in the documentation and no limit here, but chat.postMessage (below).
_TIER_PER_MINUTE = {1: 1, 2: 20, 3: 50, 4: 100}
_METHOD_TIERS: dict[str, int] = {
    "chat.update": 3,
    "chat.postEphemeral": 4,
    "chat.startStream": 2,
    "chat.appendStream": 4,
    "chat.stopStream": 2,
    "users.info": 4,
    "users.list": 2,
    "team.info": 3,
    "conversations.info": 3,
    "conversations.open": 3,
    "conversations.members": 4,
    "conversations.history": 3,
    "conversations.replies": 3,
    "files.getUploadURLExternal": 4,
    "files.completeUploadExternal": 4,
    "apps.connections.open": 3,
    "views.open": 4,
    "views.publish": 4,
    "assistant.threads.setSuggestedPrompts": 4,
    "assistant.threads.setTitle": 4,
}
# "In general we allow applications ... to send no more than one message per second" in a
# channel (Rate limits, "Posting messages"): chat.postMessage, and a streamed message started.
_CHANNEL_POSTS_PER_SECOND = 1
_CHANNEL_POSTING_METHODS = frozenset({"chat.postMessage", "chat.startStream"})
# chat.startStream / appendStream / stopStream: markdown_text is at most 12,000 characters.
_STREAM_TEXT_CHARS = 12_000
# Fields of a message event that a stored message (history, replies, payloads) does not have.
_EVENT_ONLY_FIELDS = frozenset({"channel", "event_ts", "channel_type"})

# Home tab views (views.publish, home tab view reference): at most 100 blocks,
# private_metadata up to 3000 characters, callback_id up to 255, the whole view up to 250 kB.
_MAX_VIEW_BLOCKS = 100
_VIEW_PRIVATE_METADATA_CHARS = 3000
_VIEW_CALLBACK_ID_CHARS = 255
_VIEW_MAX_BYTES = 250 * 1024
# Blocks that exist only in messages (Block Kit reference: "Available in surfaces").
_MESSAGE_ONLY_BLOCK_TYPES = frozenset({"file"})

#: The bot scope each Events API subscription needs (each event's reference page; None: no
#: scope). A ``message`` event is delivered under the subscription of its conversation's
#: type (``message.channels``...): see :func:`event_subscription`. Tests can check that the
#: app's manifest subscribes to an event and holds its scope.
EVENT_SCOPES: dict[str, str | None] = {
    "app_mention": "app_mentions:read",
    "message.channels": "channels:history",
    "message.groups": "groups:history",
    "message.im": "im:history",
    "message.mpim": "mpim:history",
    "app_home_opened": None,
    "channel_archive": "channels:read",
    "channel_deleted": "channels:read",
    "group_archive": "groups:read",
    "group_deleted": "groups:read",
    "channel_left": "channels:read",
    "group_left": "groups:read",
    # groups:read too for a private channel's ("you'll only receive member_left_channel events
    # for private channels if your app has the groups:read permission")
    "member_left_channel": "channels:read",
    "app_uninstalled": None,
    "tokens_revoked": None,
    # "No scopes required" (an app with the assistant view: assistant.py).
    "assistant_thread_started": None,
    "assistant_thread_context_changed": None,
}

# Events Slack still sends to an app that is being uninstalled.
_UNINSTALL_EVENTS = frozenset({"app_uninstalled", "tokens_revoked"})

_DEFAULT_TIMEOUT = 5.0


# --------------------------------------------------------------------------------------------
# Records
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ApiCall:
    """One Web API request as the fake saw it (also failed, rate-limited and unknown ones)."""

    method: str
    params: dict[str, Any]
    token: str | None
    http_method: str
    status: int
    response: dict[str, Any]

    @property
    def ok(self) -> bool:
        """True when the fake answered HTTP 200 with ``"ok": true``."""
        return self.status == 200 and bool(self.response.get("ok"))

    @property
    def error(self) -> str | None:
        """The Slack error code of a failed call (``invalid_auth``, ``ratelimited``...)."""
        value = self.response.get("error")
        return str(value) if value is not None else None


@dataclass(frozen=True, slots=True)
class RecordedMessage:
    """A message the app successfully posted, updated or sent ephemerally."""

    method: str
    channel: str
    ts: str
    text: str | None
    blocks: list[dict[str, Any]] | None
    thread_ts: str | None
    #: The recipient of an ephemeral message; ``None`` for normal messages.
    user: str | None
    params: dict[str, Any]


@dataclass(slots=True)
class FileUpload:
    """A file going through the files_upload_v2 flow (mutable: it fills in as steps arrive)."""

    file_id: str
    filename: str
    declared_length: int
    title: str | None = None
    content: bytes | None = None
    completed: bool = False
    channel_id: str | None = None
    channels: list[str] = field(default_factory=list)
    initial_comment: str | None = None
    thread_ts: str | None = None
    #: The token that asked for the upload URL (the user/bot the file belongs to).
    token: str | None = None


@dataclass(frozen=True, slots=True)
class ResponseUrlPost:
    """One POST the app made to a response_url the fake handed out."""

    response_id: str
    body: dict[str, Any]

    @property
    def text(self) -> str | None:
        value = self.body.get("text")
        return str(value) if value is not None else None

    @property
    def blocks(self) -> list[dict[str, Any]] | None:
        value = self.body.get("blocks")
        return value if isinstance(value, list) else None

    @property
    def response_type(self) -> str | None:
        """``"ephemeral"``, ``"in_channel"`` or ``None`` (Slack then treats it as ephemeral)."""
        value = self.body.get("response_type")
        return str(value) if value is not None else None

    @property
    def replace_original(self) -> bool | None:
        value = self.body.get("replace_original")
        return bool(value) if value is not None else None

    @property
    def delete_original(self) -> bool | None:
        value = self.body.get("delete_original")
        return bool(value) if value is not None else None

    @property
    def thread_ts(self) -> str | None:
        value = self.body.get("thread_ts")
        return str(value) if value is not None else None


@dataclass(frozen=True, slots=True)
class SocketEnvelope:
    """An envelope the fake pushed over Socket Mode."""

    envelope_id: str
    type: str
    payload: dict[str, Any]
    accepts_response_payload: bool


@dataclass(frozen=True, slots=True)
class SocketAck:
    """The app's acknowledgement of an envelope: ``{"envelope_id": ..., "payload": ...}``."""

    envelope_id: str
    payload: dict[str, Any] | None
    raw: str


@dataclass(frozen=True, slots=True)
class HttpLogEntry:
    """Every HTTP request the fake served, for debugging failed tests."""

    verb: str
    path: str
    status: int


@dataclass(slots=True)
class FakeUser:
    """A workspace member as ``users.info`` reports it."""

    id: str
    name: str
    real_name: str
    display_name: str
    team_id: str
    is_admin: bool = False
    is_owner: bool = False
    is_bot: bool = False
    deleted: bool = False
    tz: str = "UTC"

    def to_api(self) -> dict[str, Any]:
        """The ``user`` object of ``users.info``."""
        return {
            "id": self.id,
            "team_id": self.team_id,
            "name": self.name,
            "deleted": self.deleted,
            "real_name": self.real_name,
            "tz": self.tz,
            "tz_label": self.tz,
            "tz_offset": 0,
            "profile": {
                "real_name": self.real_name,
                "real_name_normalized": self.real_name,
                "display_name": self.display_name,
                "display_name_normalized": self.display_name,
                "team": self.team_id,
            },
            "is_admin": self.is_admin,
            "is_owner": self.is_owner,
            "is_primary_owner": self.is_owner,
            "is_restricted": False,
            "is_ultra_restricted": False,
            "is_bot": self.is_bot,
            "is_app_user": False,
            "updated": 1_700_000_000,
        }


@dataclass(slots=True)
class FakeChannel:
    """A conversation as ``conversations.info`` reports it."""

    id: str
    name: str
    is_im: bool = False
    is_mpim: bool = False
    is_private: bool = False
    #: The other member of a DM.
    user: str | None = None
    #: Whether the bot is a member (without chat:write.public it posts only where it is).
    bot_is_member: bool = True
    #: The people in it: chat.postEphemeral reaches only them (``user_not_in_channel``).
    members: set[str] = field(default_factory=set)
    #: Slack Connect: the other organisations' workspaces it is shared with. Such a channel
    #: says ``is_shared`` and ``is_ext_shared`` in ``conversations.info``, its events come
    #: with ``is_ext_shared_channel`` true, and its messages carry their author's team
    #: (``user_team``, ``source_team``).
    shared_with: tuple[str, ...] = ()
    #: Archived: it still exists (its history is readable), but nothing can be posted to it
    #: (``is_archived``).
    is_archived: bool = False

    @property
    def hidden_from_app(self) -> bool:
        """A DM between two people (``is_im``, the bot not in it): the Web API shows an app
        only its own DMs, so every method naming it answers ``channel_not_found`` and no
        event comes from it; a message shortcut (or a slash command) still reaches the
        app from there."""
        return self.is_im and not self.bot_is_member

    def to_api(self) -> dict[str, Any]:
        """The ``channel`` object of ``conversations.info``."""
        data: dict[str, Any] = {
            "id": self.id,
            "created": 1_700_000_000,
            "is_archived": self.is_archived,
            "is_im": self.is_im,
            "is_mpim": self.is_mpim,
            "is_private": self.is_private or self.is_im or self.is_mpim,
            "is_shared": bool(self.shared_with),
            "is_ext_shared": bool(self.shared_with),
            "is_org_shared": False,
            "is_pending_ext_shared": False,
        }
        if self.is_im:
            data["user"] = self.user
            data["is_open"] = True
        else:
            data.update(
                {
                    "name": self.name,
                    "name_normalized": self.name,
                    "is_channel": not self.is_private and not self.is_mpim,
                    "is_group": self.is_private,
                    "is_general": False,
                    "is_member": True,
                }
            )
        return data


@dataclass(slots=True)
class _SocketConnection:
    number: int
    ws: web.WebSocketResponse
    closed: bool = False


@dataclass(slots=True)
class _ResponseUrl:
    uses_left: int = _RESPONSE_URL_MAX_USES
    issued_at: float = field(default_factory=time.monotonic)
