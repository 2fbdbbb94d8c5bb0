"""A local fake of Slack for end-to-end tests: Web API, Socket Mode and response_url.

The real ``slack_bolt.async_app.AsyncApp`` and ``slack_sdk`` clients talk to this server over
HTTP/WebSocket on 127.0.0.1, so the e2e tests exercise the real request encoding, retry
handlers, Socket Mode client and Bolt middleware without reaching the internet.

Pointing Bolt at it::

    fake = FakeSlack(bot_token="xoxb-test", app_token="xapp-test")
    await fake.start()
    client = AsyncWebClient(token=fake.bot_token, base_url=fake.api_url)
    app = AsyncApp(client=client, signing_secret="secret")  # HTTP mode
    # Socket Mode: the handler calls apps.connections.open through app.client, i.e. the fake.
    handler = AsyncSocketModeHandler(app, fake.app_token)
    await handler.connect_async()

What the fake understands of each request mirrors how slack_sdk 3.x encodes it: the token in an
``Authorization: Bearer`` header, arguments as query string (``params=``), JSON body (``json=``,
used for anything carrying blocks) or form body (``data=``); all three are merged.
"""

# The waiters deliberately take ``timeout=`` so tests read ``wait_for_calls(..., timeout=5)``;
# they are implemented with asyncio.timeout, which is what ASYNC109 asks for.
# ruff: noqa: ASYNC109

from __future__ import annotations

import asyncio
import base64
import copy
import hashlib
import itertools
import json
import math
import secrets
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from types import TracebackType
from typing import Any, Literal, Self, TypeVar
from urllib.parse import parse_qs, urlencode, urlsplit

import aiohttp
from aiohttp import WSCloseCode, WSMsgType, web
from slack_sdk.signature import SignatureVerifier

__all__ = [
    "EVENT_SCOPES",
    "ApiCall",
    "FakeChannel",
    "FakeSlack",
    "FakeUser",
    "FileUpload",
    "HistoryTier",
    "HttpLogEntry",
    "MethodHandler",
    "RecordedMessage",
    "ResponseUrlPost",
    "SignedDelivery",
    "SocketAck",
    "SocketEnvelope",
    "event_body",
    "event_subscription",
    "interactive_form_body",
    "send_signed",
    "serve_web_app",
    "signed_headers",
    "slash_command_form_body",
]

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
}

# conversations.history / conversations.replies (method reference, docs.slack.dev): limit
# defaults to 100 (max 999) and to 1000 (max 1000); for "restricted" apps both are 15, and
# each method answers one request a minute.
_HISTORY_LIMITS = {"conversations.history": (100, 999), "conversations.replies": (1000, 1000)}
_RESTRICTED_HISTORY_LIMIT = 15
_RESTRICTED_HISTORY_INTERVAL_S = 60.0
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
    "app_uninstalled": None,
    "tokens_revoked": None,
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


def _text_object_ok(value: Any, *, limit: int, plain_only: bool = False) -> bool:
    if not isinstance(value, dict):
        return False
    kinds = ("plain_text",) if plain_only else ("plain_text", "mrkdwn")
    text = value.get("text")
    return value.get("type") in kinds and isinstance(text, str) and 0 < len(text) <= limit


def _block_ok(block: Any) -> bool:
    """One block against the Block Kit limits the bot's answers can reach."""
    if not isinstance(block, dict):
        return False
    if len(str(block.get("block_id", ""))) > _BLOCK_ID_CHARS:
        return False
    kind = block.get("type")
    if kind == "header":
        return _text_object_ok(block.get("text"), limit=_HEADER_TEXT_CHARS, plain_only=True)
    if kind == "section":
        text, fields = block.get("text"), block.get("fields")
        if text is None and not fields:
            return False
        if text is not None and not _text_object_ok(text, limit=_SECTION_TEXT_CHARS):
            return False
        if fields is None:
            return True
        return (
            isinstance(fields, list)
            and len(fields) <= _SECTION_FIELDS
            and all(_text_object_ok(f, limit=_SECTION_FIELD_CHARS) for f in fields)
        )
    if kind == "context":
        elements = block.get("elements")
        return (
            isinstance(elements, list)
            and 0 < len(elements) <= _CONTEXT_ELEMENTS
            and all(
                _text_object_ok(e, limit=_SECTION_TEXT_CHARS)
                or (isinstance(e, dict) and e.get("type") == "image")
                for e in elements
            )
        )
    if kind == "actions":
        elements = block.get("elements")
        return isinstance(elements, list) and 0 < len(elements) <= _ACTIONS_ELEMENTS
    return kind in _UNCHECKED_BLOCK_TYPES


def message_error(body: dict[str, Any]) -> str | None:
    """Why Slack would refuse to post this message (``no_text``, ``msg_too_long``,
    ``invalid_blocks``), or None."""
    if body.get("delete_original"):
        return None
    text, blocks = body.get("text"), body.get("blocks")
    if not text and not blocks and not body.get("attachments"):
        return "no_text"
    if isinstance(text, str) and len(text) > _MESSAGE_TEXT_CHARS:
        return "msg_too_long"
    if blocks is not None and (
        not isinstance(blocks, list)
        or len(blocks) > _MAX_BLOCKS
        or not all(_block_ok(b) for b in blocks)
    ):
        return "invalid_blocks"
    return None


def event_subscription(event: Mapping[str, Any]) -> str:
    """The Events API subscription under which Slack delivers ``event`` (an inner event):
    its ``type``, but ``message.channels`` / ``message.groups`` / ``message.im`` /
    ``message.mpim`` for a ``message`` event, by its ``channel_type``."""
    kind = str(event.get("type", ""))
    if kind == "message":
        plural = {"channel": "channels", "group": "groups"}
        channel_type = str(event.get("channel_type", "channel"))
        return f"message.{plural.get(channel_type, channel_type)}"
    return kind


def _view_error(view: Mapping[str, Any]) -> list[str]:
    """What Slack's views.publish refuses in a Home tab view, as the messages of its
    ``invalid_arguments`` answer (``[ERROR] ... [json-pointer:...]``); empty when valid."""
    errors: list[str] = []
    if view.get("type") != "home":
        errors.append("[ERROR] must be `home` [json-pointer:/view/type]")
    blocks = view.get("blocks")
    if not isinstance(blocks, list):
        errors.append("[ERROR] missing required field: blocks [json-pointer:/view]")
    else:
        if len(blocks) > _MAX_VIEW_BLOCKS:
            errors.append("[ERROR] no more than 100 items allowed [json-pointer:/view/blocks]")
        for index, block in enumerate(blocks):
            kind = block.get("type") if isinstance(block, dict) else None
            if not _block_ok(block) or kind in _MESSAGE_ONLY_BLOCK_TYPES:
                errors.append(f"[ERROR] invalid block [json-pointer:/view/blocks/{index}]")
    limits = (
        ("private_metadata", _VIEW_PRIVATE_METADATA_CHARS),
        ("callback_id", _VIEW_CALLBACK_ID_CHARS),
    )
    for key, limit in limits:
        value = view.get(key)
        if value is not None and (not isinstance(value, str) or len(value) > limit):
            errors.append(f"[ERROR] must be at most {limit} characters [json-pointer:/view/{key}]")
    return errors


def _find_element(view: Mapping[str, Any], action_id: str) -> tuple[str, dict[str, Any]] | None:
    """The (block_id, element) of the interactive element ``action_id`` in a view's blocks:
    an actions block's elements, a section's accessory or an input's element."""
    for block in view.get("blocks") or ():
        if not isinstance(block, dict):
            continue
        candidates = list(block.get("elements") or ()) if block.get("type") == "actions" else []
        candidates += [block[key] for key in ("accessory", "element") if key in block]
        for element in candidates:
            if isinstance(element, dict) and element.get("action_id") == action_id:
                return str(block.get("block_id", "")), element
    return None


def _ts_value(value: Any) -> Decimal | None:
    """A message timestamp (``"1700000000.000100"``) as a number, or None if it is not one."""
    try:
        number = Decimal(str(value))
    except InvalidOperation:
        return None
    return number if number.is_finite() and number >= 0 else None


def _flag(value: Any) -> bool:
    """A boolean argument as Slack reads it (``true``/``1``; a query string carries text)."""
    return value is True or str(value).lower() in ("1", "true")


def _encode_cursor(ts: str) -> str:
    # Slack's cursors are opaque base64 (its history cursors decode to "next_ts:...").
    return base64.b64encode(f"next_ts:{ts}".encode()).decode()


def _decode_cursor(cursor: str) -> Decimal | None:
    try:
        decoded = base64.b64decode(cursor.encode(), validate=True).decode()
    except (ValueError, UnicodeDecodeError):
        return None
    prefix, _, ts = decoded.partition(":")
    return _ts_value(ts) if prefix == "next_ts" and ts else None


# --------------------------------------------------------------------------------------------
# HTTP-mode helpers (no server needed)
# --------------------------------------------------------------------------------------------


def signed_headers(
    signing_secret: str,
    body: str | bytes,
    timestamp: int | str | None = None,
    *,
    content_type: str | None = None,
) -> dict[str, str]:
    """Headers Slack would send with ``body`` in HTTP mode, signed with ``signing_secret``.

    Pass an old ``timestamp`` (e.g. ``int(time.time()) - 600``) to build a stale request, or a
    different secret to build a wrong signature. ``content_type`` defaults to JSON for bodies
    starting with ``{`` and to form encoding otherwise (slash commands, interactivity).
    """
    ts = str(int(time.time()) if timestamp is None else timestamp)
    signature = SignatureVerifier(signing_secret).generate_signature(timestamp=ts, body=body)
    if signature is None:  # generate_signature only returns None for a missing timestamp/body
        raise ValueError("could not sign the request body")
    if content_type is None:
        head = body[:1] if isinstance(body, str) else body[:1].decode("latin-1")
        content_type = "application/json" if head == "{" else "application/x-www-form-urlencoded"
    return {
        "Content-Type": content_type,
        "X-Slack-Request-Timestamp": ts,
        "X-Slack-Signature": signature,
    }


def event_body(payload: Mapping[str, Any]) -> str:
    """The HTTP body of an Events API request (JSON)."""
    return json.dumps(payload)


def slash_command_form_body(payload: Mapping[str, str]) -> str:
    """The HTTP body of a slash command request (form fields)."""
    return urlencode(dict(payload))


def interactive_form_body(payload: Mapping[str, Any]) -> str:
    """The HTTP body of an interactivity request: one form field ``payload`` holding JSON."""
    return urlencode({"payload": json.dumps(payload)})


@dataclass(frozen=True, slots=True)
class SignedDelivery:
    """What the app answered to a signed HTTP-mode request."""

    status: int
    text: str
    headers: dict[str, str]


async def send_signed(
    url: str,
    *,
    signing_secret: str,
    body: str,
    timestamp: int | str | None = None,
    timeout: float = _DEFAULT_TIMEOUT,
) -> SignedDelivery:
    """POST ``body`` to an HTTP-mode app the way Slack does, signed with ``signing_secret``."""
    headers = signed_headers(signing_secret, body, timestamp)
    client_timeout = aiohttp.ClientTimeout(total=timeout)
    async with (
        aiohttp.ClientSession(timeout=client_timeout) as session,
        session.post(url, data=body.encode("utf-8"), headers=headers) as response,
    ):
        return SignedDelivery(
            status=response.status, text=await response.text(), headers=dict(response.headers)
        )


@asynccontextmanager
async def serve_web_app(app: web.Application) -> AsyncIterator[str]:
    """Serve an aiohttp application (e.g. Bolt's ``app.web_app()``) on 127.0.0.1:<free port>.

    Yields the base URL ``http://127.0.0.1:PORT``; the server is torn down on exit.
    """
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=2.0)
    await runner.setup()
    try:
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        host, port = runner.addresses[0][:2]
        yield f"http://{host}:{port}"
    finally:
        await runner.cleanup()


# --------------------------------------------------------------------------------------------
# The fake
# --------------------------------------------------------------------------------------------


class FakeSlack:
    """A fake Slack workspace served on 127.0.0.1 (ephemeral port).

    It knows the conversations a test adds (``add_channel``) and those it sends an event
    from (``event_payload``, Socket Mode pushes): Slack delivers message events only from
    conversations the app is in. Posting anywhere else is ``channel_not_found``. Members are
    those added, plus whoever sends an event, runs a slash command or clicks a button there;
    an ephemeral message to anyone else is ``user_not_in_channel``.

    The messages it knows (events it sent, the bot's posts, ``add_history``) are what
    ``conversations.history`` / ``conversations.replies`` read. Deleting or archiving a
    conversation, and uninstalling the app, change what the Web API answers as in Slack
    (``channel_not_found``, ``is_archived``, ``account_inactive``); Home tabs published with
    ``views.publish`` are kept per user (``home_view``).

    Use ``async with FakeSlack(...) as fake:`` or ``await fake.start()`` / ``await fake.stop()``.
    It must run on the event loop of the test that uses it. Stop Socket Mode clients *before*
    the fake: a client whose socket is closed by the server reconnects, and would then retry
    against a server that is gone.
    """

    def __init__(
        self,
        *,
        bot_token: str = "xoxb-fake-bot-token",
        app_token: str = "xapp-1-fake-app-token",
        team_id: str = "T0FAKE",
        team_name: str = "Fake Team",
        team_domain: str = "fake-team",
        bot_user_id: str = "UBOT",
        bot_id: str = "BBOT",
        bot_name: str = "memorybot",
        api_app_id: str = "AFAKEAPP",
        enterprise_id: str | None = None,
        scopes: Iterable[str] | None = None,
        bot_events: Iterable[str] | None = None,
        home_tab_enabled: bool = True,
        history_tier: HistoryTier = "standard",
    ) -> None:
        """``scopes``: the bot token's scopes (the manifest's); a method that needs another
        one fails with ``missing_scope``. None: every method is allowed.

        ``bot_events``: the app's event subscriptions (the manifest's ``bot_events``). When
        given, building an event the app is not subscribed to, or whose scope
        (:data:`EVENT_SCOPES`) it lacks, raises: Slack would not deliver it.

        ``home_tab_enabled``: the manifest's ``features.app_home.home_tab_enabled``; without
        it views.publish answers ``not_enabled`` and nobody can open the Home tab.

        ``history_tier``: ``"restricted"`` for an app commercially distributed outside the
        Marketplace (see :data:`HistoryTier`)."""
        self.bot_token = bot_token
        self.app_token = app_token
        self.team_id = team_id
        self.team_name = team_name
        self.team_domain = team_domain
        self.bot_user_id = bot_user_id
        self.bot_id = bot_id
        self.bot_name = bot_name
        self.api_app_id = api_app_id
        self.enterprise_id = enterprise_id
        self.scopes = frozenset(scopes) if scopes is not None else None
        self.bot_events = frozenset(bot_events) if bot_events is not None else None
        self.home_tab_enabled = home_tab_enabled
        self.history_tier: HistoryTier = history_tier
        #: False once the app was uninstalled (:meth:`uninstall`, or an app_uninstalled event).
        self.installed = True
        #: The verification token (Slack calls it legacy: signing secrets replace it); Bolt
        #: ignores it when a signing secret is set.
        self.verification_token = "fake-verification-token"

        self.calls: list[ApiCall] = []
        self.socket_envelopes: list[SocketEnvelope] = []
        self.socket_acks: list[SocketAck] = []
        self.http_log: list[HttpLogEntry] = []
        self._uploads: dict[str, FileUpload] = {}
        #: Bytes of the files people shared (file_object(data=...)), by file id: what
        #: url_private serves. Every download of one, allowed or not: (file id, served).
        self._shared_files: dict[str, tuple[bytes, str]] = {}
        self.file_downloads: list[tuple[str, bool]] = []
        self._responses: list[ResponseUrlPost] = []
        #: response_url posts Slack would refuse: (post, error), oldest first.
        self.rejected_responses: list[tuple[ResponseUrlPost, str]] = []
        self._response_rejections: deque[str] = deque()
        self._messages: dict[tuple[str, str], dict[str, Any]] = {}
        #: Messages people posted, as the events the fake sent (kept up to date by the edit
        #: and delete events it sends): what chat.getPermalink knows besides the bot's own.
        self._said: dict[tuple[str, str], dict[str, Any]] = {}

        self.users: dict[str, FakeUser] = {}
        self.channels: dict[str, FakeChannel] = {}
        #: Channels that were deleted: every call naming one fails with channel_not_found.
        self.deleted_channels: set[str] = set()
        #: Tokens that no longer work, and the error Slack answers them with.
        self._invalid_tokens: dict[str, str] = {}
        #: The Home tab each user was last published (views.publish), by user id.
        self._home_views: dict[str, dict[str, Any]] = {}
        #: When the bot edited its messages with chat.update: (channel, ts) -> edit ts.
        self._edited: dict[tuple[str, str], str] = {}
        #: Restricted history tier: when each history method last answered (monotonic).
        self._history_calls: dict[str, float] = {}
        self._rate_limits: dict[str, deque[int]] = {}
        self._failures: dict[str, deque[str]] = {}
        self._custom_methods: dict[str, MethodHandler] = {}
        self._response_urls: dict[str, _ResponseUrl] = {}
        self._tickets: set[str] = set()
        self._sockets: list[_SocketConnection] = []
        self._socket_numbers = itertools.count(1)
        self.socket_connections_opened = 0
        self._last_ts = 0.0

        self._runner: web.AppRunner | None = None
        self._base_url: str | None = None
        self._changed: asyncio.Event | None = None

        self.add_user(bot_user_id, bot_name, is_bot=True)

    # ---------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        """Bind 127.0.0.1 on a free port and start serving."""
        if self._runner is not None:
            raise RuntimeError("FakeSlack is already running")
        self._changed = asyncio.Event()
        app = web.Application(middlewares=[self._log_middleware])
        app.add_routes(
            [
                web.route("*", "/api/{method}", self._handle_api),
                web.post("/upload/v1/{file_id}", self._handle_upload),
                web.post("/response/{response_id}", self._handle_response_url),
                web.get("/socket-mode/link/", self._handle_socket),
                web.get("/files-pri/{team_file}/{name}", self._handle_file_download),
            ]
        )
        # A short shutdown timeout: the only long-lived connections are WebSockets, which
        # stop() closes explicitly.
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=2.0)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        host, port = runner.addresses[0][:2]
        self._runner = runner
        self._base_url = f"http://{host}:{port}"

    async def stop(self) -> None:
        """Close the Socket Mode connections and stop the server."""
        for connection in list(self._sockets):
            with suppress(Exception):
                await connection.ws.close(code=WSCloseCode.GOING_AWAY, message=b"server stopping")
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT`` (only while running)."""
        if self._base_url is None:
            raise RuntimeError("FakeSlack is not running; call start() first")
        return self._base_url

    @property
    def api_url(self) -> str:
        """The Web API base URL to give ``AsyncWebClient(base_url=...)``."""
        return f"{self.base_url}/api/"

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
        nothing more."""
        kind, channel_id = event.get("type"), str(event.get("channel", ""))
        if kind in ("channel_deleted", "group_deleted"):
            self.delete_channel(channel_id)
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
        """Move the "restricted" history tier's one-request-a-minute windows ``seconds``
        into the past, without waiting."""
        for method in self._history_calls:
            self._history_calls[method] -= seconds

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
                    text=params.get("text"),
                    blocks=blocks if isinstance(blocks, list) else None,
                    thread_ts=params.get("thread_ts"),
                    user=params.get("user") if method == "chat.postEphemeral" else None,
                    params=params,
                )
            )
        return messages

    # ---------------------------------------------------------------- waiters

    async def wait_for(
        self,
        predicate: Callable[[], T | None],
        *,
        timeout: float = _DEFAULT_TIMEOUT,
        description: str = "condition",
    ) -> T:
        """Wait until ``predicate()`` returns something other than ``None``.

        The predicate is re-checked whenever the fake records anything, so tests never sleep.
        """
        try:
            async with asyncio.timeout(timeout):
                while True:
                    result = predicate()
                    if result is not None:
                        return result
                    await self._event().wait()
        except TimeoutError:
            seen = ", ".join(f"{c.method}({c.status})" for c in self.calls) or "none"
            raise TimeoutError(
                f"FakeSlack: timed out after {timeout}s waiting for {description}; "
                f"Web API calls so far: {seen}"
            ) from None

    async def wait_for_calls(
        self,
        method: str,
        *,
        count: int = 1,
        ok_only: bool = False,
        timeout: float = _DEFAULT_TIMEOUT,
    ) -> list[ApiCall]:
        """Wait until ``method`` was called at least ``count`` times; return those calls."""

        def ready() -> list[ApiCall] | None:
            found = self.calls_of(method, ok_only=ok_only)
            return found if len(found) >= count else None

        return await self.wait_for(ready, timeout=timeout, description=f"{count}x {method}")

    async def wait_for_messages(
        self, *, count: int = 1, timeout: float = _DEFAULT_TIMEOUT
    ) -> list[RecordedMessage]:
        """Wait until ``count`` messages were posted successfully; return all of them."""

        def ready() -> list[RecordedMessage] | None:
            found = self.posted_messages
            return found if len(found) >= count else None

        return await self.wait_for(ready, timeout=timeout, description=f"{count} posted messages")

    async def wait_for_responses(
        self, *, count: int = 1, timeout: float = _DEFAULT_TIMEOUT
    ) -> list[ResponseUrlPost]:
        """Wait until ``count`` response_url posts arrived; return all of them."""

        def ready() -> list[ResponseUrlPost] | None:
            return self.responses if len(self._responses) >= count else None

        return await self.wait_for(ready, timeout=timeout, description=f"{count} responses")

    async def wait_for_uploads(
        self, *, count: int = 1, timeout: float = _DEFAULT_TIMEOUT
    ) -> list[FileUpload]:
        """Wait until ``count`` uploads were completed; return the completed ones."""

        def ready() -> list[FileUpload] | None:
            done = [u for u in self._uploads.values() if u.completed]
            return done if len(done) >= count else None

        return await self.wait_for(ready, timeout=timeout, description=f"{count} uploads")

    async def wait_for_socket_connections(
        self, *, count: int = 1, timeout: float = _DEFAULT_TIMEOUT
    ) -> int:
        """Wait until ``count`` Socket Mode connections were opened in total."""

        def ready() -> int | None:
            opened = self.socket_connections_opened
            return opened if opened >= count else None

        return await self.wait_for(
            ready, timeout=timeout, description=f"{count} socket connections"
        )

    async def wait_for_ack(
        self, envelope_id: str, *, timeout: float = _DEFAULT_TIMEOUT
    ) -> SocketAck:
        """Wait for the app's ack of one envelope."""

        def ready() -> SocketAck | None:
            return next((a for a in self.socket_acks if a.envelope_id == envelope_id), None)

        return await self.wait_for(ready, timeout=timeout, description=f"ack of {envelope_id}")

    async def wait_for_home(
        self,
        user_id: str,
        predicate: Callable[[dict[str, Any]], bool] | None = None,
        *,
        timeout: float = _DEFAULT_TIMEOUT,
    ) -> dict[str, Any]:
        """Wait until a Home tab view was published for ``user_id`` (and ``predicate`` of it
        holds); return that view."""

        def ready() -> dict[str, Any] | None:
            view = self.home_view(user_id)
            return view if view is not None and (predicate is None or predicate(view)) else None

        return await self.wait_for(ready, timeout=timeout, description=f"a Home tab of {user_id}")

    def _event(self) -> asyncio.Event:
        if self._changed is None:
            raise RuntimeError("FakeSlack is not running; call start() first")
        return self._changed

    def _notify(self) -> None:
        # Wake every waiter, then hand out a fresh event so the next wait blocks again.
        event = self._event()
        self._changed = asyncio.Event()
        event.set()

    # ---------------------------------------------------------------- payload builders

    def _new_event_id(self) -> str:
        return "Ev" + secrets.token_hex(5).upper()

    def _new_trigger_id(self) -> str:
        return f"{secrets.randbelow(10**13)}.{secrets.randbelow(10**13)}.{secrets.token_hex(16)}"

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
        if self.bot_events is None:
            return
        subscription = event_subscription(event)
        if subscription not in self.bot_events:
            raise ValueError(f"the app does not subscribe to {subscription}")
        scope = EVENT_SCOPES.get(subscription)
        if scope is not None and self.scopes is not None and scope not in self.scopes:
            raise ValueError(f"{subscription} needs the {scope} scope, which the app lacks")

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
        user = self.users.get(user_id)
        name = user.name if user is not None else user_id.lower()
        return {"id": user_id, "username": name, "name": name, "team_id": team}

    # ---------------------------------------------------------------- Socket Mode pushes

    async def socket_push(
        self,
        *,
        envelope_type: EnvelopeType,
        payload: Mapping[str, Any],
        accepts_response_payload: bool | None = None,
        retry_attempt: int | None = None,
        retry_reason: str | None = None,
        timeout: float = _DEFAULT_TIMEOUT,
    ) -> str:
        """Push one envelope to the newest open connection; return its ``envelope_id``.

        Waits up to ``timeout`` for a connection. Use ``wait_for_ack`` for the ack.
        """
        connection = await self.wait_for(
            self._newest_socket, timeout=timeout, description="an open Socket Mode connection"
        )
        if accepts_response_payload is None:
            # Slack lets the app answer in the ack for slash commands and for the interactive
            # payloads that expect a synchronous answer (modal submissions, option loads).
            accepts_response_payload = envelope_type == "slash_commands" or (
                envelope_type == "interactive"
                and payload.get("type") in {"view_submission", "block_suggestion"}
            )
        if envelope_type == "events_api":
            self._learn_from_event(payload.get("event"))
        envelope_id = str(uuid.uuid4())
        message: dict[str, Any] = {
            "envelope_id": envelope_id,
            "payload": dict(payload),
            "type": envelope_type,
            "accepts_response_payload": accepts_response_payload,
        }
        if envelope_type == "events_api":
            message["retry_attempt"] = retry_attempt or 0
            message["retry_reason"] = retry_reason or ""
        self.socket_envelopes.append(
            SocketEnvelope(
                envelope_id=envelope_id,
                type=envelope_type,
                payload=dict(payload),
                accepts_response_payload=accepts_response_payload,
            )
        )
        await connection.ws.send_str(json.dumps(message))
        return envelope_id

    async def socket_send_event(
        self,
        *,
        event: Mapping[str, Any],
        team_id: str | None = None,
        event_id: str | None = None,
        retry_attempt: int = 0,
        retry_reason: str = "",
        timeout: float = _DEFAULT_TIMEOUT,
    ) -> SocketAck:
        """Push an Events API envelope and wait for its ack.

        ``event`` is either a bare event (wrapped with ``event_payload``) or a complete
        ``event_callback`` body.
        """
        payload = (
            dict(event)
            if event.get("type") == "event_callback"
            else self.event_payload(event=event, team_id=team_id, event_id=event_id)
        )
        envelope_id = await self.socket_push(
            envelope_type="events_api",
            payload=payload,
            retry_attempt=retry_attempt,
            retry_reason=retry_reason,
            timeout=timeout,
        )
        return await self.wait_for_ack(envelope_id, timeout=timeout)

    async def socket_send_slash_command(
        self, *, payload: Mapping[str, str], timeout: float = _DEFAULT_TIMEOUT
    ) -> SocketAck:
        """Push a slash command (``slash_command_payload``) and wait for its ack."""
        envelope_id = await self.socket_push(
            envelope_type="slash_commands", payload=payload, timeout=timeout
        )
        return await self.wait_for_ack(envelope_id, timeout=timeout)

    async def socket_send_interactive(
        self, *, payload: Mapping[str, Any], timeout: float = _DEFAULT_TIMEOUT
    ) -> SocketAck:
        """Push an interactivity payload (e.g. ``block_action_payload``) and wait for its ack."""
        envelope_id = await self.socket_push(
            envelope_type="interactive", payload=payload, timeout=timeout
        )
        return await self.wait_for_ack(envelope_id, timeout=timeout)

    async def socket_request_reconnect(
        self, *, reason: str = "refresh_requested", timeout: float = _DEFAULT_TIMEOUT
    ) -> None:
        """Send Slack's ``disconnect`` message and wait until the client reconnected.

        slack_sdk answers it by calling ``apps.connections.open`` again and opening a new
        socket (Slack itself sends this a few hours into a connection).
        """
        connection = await self.wait_for(
            self._newest_socket, timeout=timeout, description="an open Socket Mode connection"
        )
        opened_before = self.socket_connections_opened
        await connection.ws.send_str(
            json.dumps(
                {"type": "disconnect", "reason": reason, "debug_info": {"host": "fake-slack"}}
            )
        )
        await self.wait_for_socket_connections(count=opened_before + 1, timeout=timeout)

    def _newest_socket(self) -> _SocketConnection | None:
        open_sockets = [s for s in self._sockets if not s.closed and not s.ws.closed]
        return open_sockets[-1] if open_sockets else None

    @property
    def open_socket_count(self) -> int:
        """How many Socket Mode connections are open right now."""
        return sum(1 for s in self._sockets if not s.closed and not s.ws.closed)

    # ---------------------------------------------------------------- HTTP handlers

    @web.middleware
    async def _log_middleware(
        self,
        request: web.Request,
        handler: Callable[[web.Request], Awaitable[web.StreamResponse]],
    ) -> web.StreamResponse:
        response = await handler(request)
        self.http_log.append(HttpLogEntry(request.method, request.path, response.status))
        return response

    async def _read_params(self, request: web.Request) -> dict[str, Any]:
        params: dict[str, Any] = dict(request.query)
        if request.can_read_body:
            if request.content_type == "application/json":
                body = await request.json()
                if isinstance(body, dict):
                    params.update(body)
            elif request.content_type in (
                "application/x-www-form-urlencoded",
                "multipart/form-data",
            ):
                form = await request.post()
                for key, item in form.items():
                    params[key] = item.file.read() if isinstance(item, web.FileField) else item
        for key in _JSON_ARGUMENTS:
            value = params.get(key)
            if isinstance(value, str) and value[:1] in ("[", "{"):
                with suppress(ValueError):
                    params[key] = json.loads(value)
        return params

    async def _handle_api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        params = await self._read_params(request)
        token: str | None = None
        authorization = request.headers.get("Authorization", "")
        if authorization.startswith("Bearer "):
            token = authorization.removeprefix("Bearer ").strip()
        elif "token" in params:
            # Slack also takes the token as a form argument (clients that do not send the
            # Authorization header).
            token = str(params.pop("token"))

        status, body, headers = self._dispatch(method, params, token)
        self.calls.append(
            ApiCall(
                method=method,
                params=params,
                token=token,
                http_method=request.method,
                status=status,
                response=body,
            )
        )
        self._notify()
        return web.json_response(body, status=status, headers=headers)

    def _dispatch(
        self, method: str, params: dict[str, Any], token: str | None
    ) -> tuple[int, dict[str, Any], dict[str, str]]:
        builtin = self._builtin_handler(method)
        if builtin is None and method not in self._custom_methods:
            return 200, {"ok": False, "error": "unknown_method", "req_method": method}, {}

        rate_limits = self._rate_limits.get(method)
        if rate_limits:
            retry_after = rate_limits.popleft()
            return 429, {"ok": False, "error": "ratelimited"}, {"Retry-After": str(retry_after)}

        auth_error = self._check_token(method, token)
        if auth_error is not None:
            return 200, {"ok": False, "error": auth_error}, {}
        scope_error = self._check_scope(method, token)
        if scope_error is not None:
            return 200, scope_error, {}
        retry_after = self._restricted_history_wait(method)
        if retry_after is not None:
            return 429, {"ok": False, "error": "ratelimited"}, {"Retry-After": str(retry_after)}

        failures = self._failures.get(method)
        if failures:
            return 200, {"ok": False, "error": failures.popleft()}, {}

        custom = self._custom_methods.get(method)
        if custom is not None:
            return 200, custom(params, token), {}
        assert builtin is not None
        return 200, builtin(params, token), {}

    def _restricted_history_wait(self, method: str) -> int | None:
        """For a "restricted" app, the seconds until conversations.history / .replies may be
        called again (one request a minute each), or None when this call may go through
        (it then opens the next minute)."""
        if self.history_tier != "restricted" or method not in _HISTORY_LIMITS:
            return None
        now = time.monotonic()
        last = self._history_calls.get(method)
        if last is not None and now - last < _RESTRICTED_HISTORY_INTERVAL_S:
            return max(1, math.ceil(_RESTRICTED_HISTORY_INTERVAL_S - (now - last)))
        self._history_calls[method] = now
        return None

    def _check_token(self, method: str, token: str | None) -> str | None:
        if not token:
            return "not_authed"
        if token in self._invalid_tokens:
            return self._invalid_tokens[token]
        if token not in (self.bot_token, self.app_token):
            return "invalid_auth"
        wants_app_token = method in _APP_TOKEN_METHODS
        if wants_app_token != (token == self.app_token):
            return "not_allowed_token_type"
        return None

    def _check_scope(self, method: str, token: str | None) -> dict[str, Any] | None:
        needed = _METHOD_SCOPES.get(method)
        if self.scopes is None or token != self.bot_token or not needed:
            return None
        if needed & self.scopes:
            return None
        return self._missing_scope(needed)

    def _missing_scope(self, needed: Iterable[str]) -> dict[str, Any]:
        # Slack names what the method needs and what the token has.
        return {
            "ok": False,
            "error": "missing_scope",
            "needed": ",".join(sorted(needed)),
            "provided": ",".join(sorted(self.scopes or ())),
        }

    def _post_error(
        self,
        params: dict[str, Any],
        *,
        needs_content: bool = True,
        recipient: str | None = None,
    ) -> str | None:
        """Why Slack would refuse a chat.* post to ``params["channel"]`` (for an ephemeral
        one, seen by ``recipient``), or None."""
        channel = self.channels.get(str(params.get("channel") or ""))
        if channel is None:  # never heard of, or deleted
            return "channel_not_found"
        if channel.is_archived:
            return "is_archived"
        if not channel.bot_is_member and not channel.is_im:
            return "not_in_channel"
        if recipient is not None and recipient not in channel.members:
            return "user_not_in_channel"
        error = message_error(params)
        if error == "no_text" and not needs_content:
            return None
        return error

    def _builtin_handler(self, method: str) -> MethodHandler | None:
        handlers: dict[str, MethodHandler] = {
            "auth.test": self._auth_test,
            "chat.postMessage": self._chat_post_message,
            "chat.update": self._chat_update,
            "chat.postEphemeral": self._chat_post_ephemeral,
            "chat.getPermalink": self._chat_get_permalink,
            "users.info": self._users_info,
            "conversations.info": self._conversations_info,
            "conversations.open": self._conversations_open,
            "files.getUploadURLExternal": self._files_get_upload_url,
            "files.completeUploadExternal": self._files_complete_upload,
            "apps.connections.open": self._apps_connections_open,
            "views.open": self._views_open,
            "views.publish": self._views_publish,
            "conversations.history": self._conversations_history,
            "conversations.replies": self._conversations_replies,
        }
        return handlers.get(method)

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
    ) -> dict[str, Any]:
        """A stored message as conversations.history/replies (and interaction payloads)
        show it: no event fields, a thread parent with its reply fields, a reply with its
        parent's author, the bot's edited messages with ``edited``. ``threads``: the
        conversation's (:meth:`_threads`), when the caller has them already."""
        shown = {k: copy.deepcopy(v) for k, v in message.items() if k not in _EVENT_ONLY_FIELDS}
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
            "text": params.get("text", ""),
            "ts": ts,
            "team": self.team_id,
        }
        if params.get("blocks") is not None:
            message["blocks"] = params["blocks"]
        if params.get("thread_ts") is not None:
            message["thread_ts"] = params["thread_ts"]
        return message

    def _chat_post_message(self, params: dict[str, Any], token: str | None) -> dict[str, Any]:
        channel = params.get("channel")
        error = self._post_error(params)
        if error is not None:
            return {"ok": False, "error": error}
        ts = self.next_ts()
        message = self._message_object(params, ts)
        self._messages[(str(channel), ts)] = message
        return {"ok": True, "channel": channel, "ts": ts, "message": message}

    def _chat_update(self, params: dict[str, Any], token: str | None) -> dict[str, Any]:
        channel = str(params.get("channel", ""))
        ts = str(params.get("ts", ""))
        # chat.update may change only part of a message (the text, or the blocks).
        error = self._post_error(params, needs_content=False)
        if error is not None:
            return {"ok": False, "error": error}
        message = self._messages.get((channel, ts))
        if message is None:
            # The bot can only edit messages it posted (through this fake).
            return {"ok": False, "error": "message_not_found"}
        if "text" in params:
            message["text"] = params["text"]
        if params.get("blocks") is not None:
            message["blocks"] = params["blocks"]
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
        if channel_id not in self.channels:
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
        channel = self.channels.get(str(params.get("channel", "")))
        if channel is None:
            return {"ok": False, "error": "channel_not_found"}
        if channel.is_im:
            needed = "im:read"
        elif channel.is_mpim:
            needed = "mpim:read"
        else:
            needed = "groups:read" if channel.is_private else "channels:read"
        if self.scopes is not None and token == self.bot_token and needed not in self.scopes:
            return self._missing_scope([needed])
        return {"ok": True, "channel": channel.to_api()}

    def _conversations_open(self, params: dict[str, Any], token: str | None) -> dict[str, Any]:
        existing = params.get("channel")
        if existing:
            channel = self.channels.get(str(existing))
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

    def _files_get_upload_url(self, params: dict[str, Any], token: str | None) -> dict[str, Any]:
        filename = params.get("filename")
        length = params.get("length")
        if not filename or length is None:
            return {"ok": False, "error": "invalid_arguments"}
        file_id = "F" + secrets.token_hex(5).upper()
        self._uploads[file_id] = FileUpload(
            file_id=file_id, filename=str(filename), declared_length=int(length), token=token
        )
        return {
            "ok": True,
            "upload_url": f"{self.base_url}/upload/v1/{file_id}",
            "file_id": file_id,
        }

    def _files_complete_upload(self, params: dict[str, Any], token: str | None) -> dict[str, Any]:
        files = params.get("files")
        if not isinstance(files, list) or not files:
            return {"ok": False, "error": "invalid_arguments"}
        uploads: list[FileUpload] = []
        for item in files:
            upload = self._uploads.get(str(item.get("id", ""))) if isinstance(item, dict) else None
            if upload is None or upload.content is None:
                # Slack refuses to complete files whose bytes never arrived.
                return {"ok": False, "error": "file_not_found"}
            upload.title = item.get("title") or upload.filename
            uploads.append(upload)
        channels = [c for c in str(params.get("channels", "")).split(",") if c]
        channel_id = params.get("channel_id")
        shared_to = [str(channel_id)] if channel_id else channels
        if any(c not in self.channels for c in shared_to):
            return {"ok": False, "error": "invalid_channel"}
        for upload in uploads:
            upload.completed = True
            upload.channel_id = str(channel_id) if channel_id else None
            upload.channels = channels
            upload.initial_comment = params.get("initial_comment")
            upload.thread_ts = params.get("thread_ts")
        return {
            "ok": True,
            "files": [
                {
                    "id": u.file_id,
                    "name": u.filename,
                    "title": u.title,
                    "size": len(u.content or b""),
                    "user": self.bot_user_id,
                    "channels": shared_to,
                    "url_private": f"{self.base_url}/files/{u.file_id}/{u.filename}",
                }
                for u in uploads
            ],
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
        channel = self.channels.get(str(params.get("channel") or ""))
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
            "messages": [self._history_message(channel.id, m, threads) for m in page],
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
        replies, ``thread_not_found`` if there is no such message. ``limit`` defaults to
        1000 (at most 1000; 15 and 15 for a "restricted" app); ``oldest``/``latest``/
        ``inclusive``/``cursor`` as for conversations.history."""
        channel, error = self._history_access(params, token)
        window, window_error = self._history_window("conversations.replies", params)
        if error is not None or window_error is not None or channel is None or window is None:
            return error or window_error or {"ok": False, "error": "channel_not_found"}
        if not params.get("ts"):
            return _invalid_arguments("missing required field: ts")
        limit, oldest, latest, inclusive, position = window
        message = self._known_message(channel.id, str(params["ts"]))
        if message is not None and message.get("thread_ts") not in (None, message["ts"]):
            message = self._known_message(channel.id, str(message["thread_ts"]))
        if message is None:
            return {"ok": False, "error": "thread_not_found"}
        threads = self._threads(channel.id)
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
            "messages": [self._history_message(channel.id, m, threads) for m in page],
            "has_more": bool(rest),
            "response_metadata": {"next_cursor": _encode_cursor(rest[0]["ts"]) if rest else ""},
        }

    # ---------------------------------------------------------------- other endpoints

    async def _handle_file_download(self, request: web.Request) -> web.Response:
        """``url_private``: the file's bytes for a bot token with ``files:read``; for
        anything else Slack answers with its sign-in page (HTML, status 200), not an error
        the client could tell from the status alone."""
        _, _, file_id = request.match_info["team_file"].partition("-")
        shared = self._shared_files.get(file_id)
        if shared is None:
            return web.Response(status=404, text="file_not_found")
        authorization = request.headers.get("Authorization", "")
        token = authorization.removeprefix("Bearer ").strip() if authorization else ""
        allowed = token == self.bot_token and token not in self._invalid_tokens
        if allowed and self.scopes is not None:
            allowed = "files:read" in self.scopes
        self.file_downloads.append((file_id, allowed))
        self._notify()
        if not allowed:
            page = "<!DOCTYPE html><html><title>Slack</title><body>Sign in</body></html>"
            return web.Response(text=page, content_type="text/html")
        data, mimetype = shared
        return web.Response(body=data, content_type=mimetype)

    async def _handle_upload(self, request: web.Request) -> web.Response:
        upload = self._uploads.get(request.match_info["file_id"])
        if upload is None:
            return web.Response(status=404, text="file_not_found")
        if request.content_type == "multipart/form-data":
            form = await request.post()
            field_value = next(iter(form.values()), b"")
            if isinstance(field_value, web.FileField):
                content = field_value.file.read()
            elif isinstance(field_value, str):
                content = field_value.encode()
            else:
                content = bytes(field_value)
        else:
            # slack_sdk's async client POSTs the raw bytes.
            content = await request.read()
        upload.content = content
        self._notify()
        # Slack's upload endpoint answers in plain text; slack_sdk only checks the status.
        return web.Response(text=f"OK - {len(content)}", content_type="text/plain")

    async def _handle_response_url(self, request: web.Request) -> web.Response:
        response_id = request.match_info["response_id"]
        registration = self._response_urls.get(response_id)
        if registration is None:
            return web.Response(status=404, text="no_service")
        if time.monotonic() - registration.issued_at > _RESPONSE_URL_LIFETIME_S:
            return web.Response(status=404, text="expired_url")
        if registration.uses_left <= 0:
            return web.Response(status=404, text="used_url")
        registration.uses_left -= 1
        body: Any
        if request.content_type == "application/json":
            body = await request.json()
        else:
            form = await request.post()
            raw = form.get("payload")
            body = json.loads(raw) if isinstance(raw, str) else {}
        if not isinstance(body, dict):
            return web.Response(status=400, text="invalid_payload")
        post = ResponseUrlPost(response_id=response_id, body=body)
        error = message_error(body)
        if error is None and self._response_rejections:
            error = self._response_rejections.popleft()
        if error is not None:
            # Like Slack: HTTP 400 with the error as plain text, nothing posted.
            self.rejected_responses.append((post, error))
            self._notify()
            return web.Response(status=400, text=error, content_type="text/plain")
        self._responses.append(post)
        self._notify()
        return web.Response(text="ok", content_type="text/plain")

    async def _handle_socket(self, request: web.Request) -> web.StreamResponse:
        ticket = request.query.get("ticket", "")
        if ticket not in self._tickets:
            # A ticket is single-use and only comes from apps.connections.open.
            return web.Response(status=401, text="invalid_ticket")
        self._tickets.discard(ticket)
        # autoping answers the client's "sdk-ping-pong" pings, which it uses to detect stale
        # connections.
        ws = web.WebSocketResponse(autoping=True, timeout=2.0)
        await ws.prepare(request)
        connection = _SocketConnection(number=next(self._socket_numbers), ws=ws)
        await ws.send_str(
            json.dumps(
                {
                    "type": "hello",
                    "num_connections": self.open_socket_count + 1,
                    "debug_info": {
                        "host": "fake-slack",
                        "build_number": 1,
                        "approximate_connection_time": 18060,
                    },
                    "connection_info": {"app_id": self.api_app_id},
                }
            )
        )
        # Register only after hello so no envelope can overtake it.
        self._sockets.append(connection)
        self.socket_connections_opened += 1
        self._notify()
        try:
            async for message in ws:
                if message.type == WSMsgType.TEXT:
                    self._record_ack(str(message.data))
        finally:
            connection.closed = True
            self._sockets.remove(connection)
            self._notify()
        return ws

    def _record_ack(self, raw: str) -> None:
        try:
            data = json.loads(raw)
        except ValueError:
            return
        if not isinstance(data, dict) or "envelope_id" not in data:
            return
        payload = data.get("payload")
        self.socket_acks.append(
            SocketAck(
                envelope_id=str(data["envelope_id"]),
                payload=payload if isinstance(payload, dict) else None,
                raw=raw,
            )
        )
        self._notify()


def _invalid_arguments(*messages: str) -> dict[str, Any]:
    # Slack's answer to arguments it cannot use, with what is wrong in response_metadata.
    return {
        "ok": False,
        "error": "invalid_arguments",
        "response_metadata": {"messages": list(messages)},
    }


def _in_window(
    message: Mapping[str, Any], *, oldest: Decimal, latest: Decimal, inclusive: bool
) -> bool:
    """Whether a message is between ``oldest`` and ``latest`` (the bounds themselves only
    when ``inclusive``)."""
    ts = _ts_value(message.get("ts"))
    if ts is None:
        return False
    if inclusive:
        return oldest <= ts <= latest
    return oldest < ts < latest


def _conversation_id(users: Sequence[str]) -> str:
    """The id of the DM (one user) or group DM (several) with ``users``: stable, so the
    same people always get the same conversation."""
    digest = hashlib.sha1(",".join(sorted(users)).encode()).hexdigest()[:10].upper()
    return ("D" if len(users) == 1 else "G") + digest


def _as_changed_message(event: Mapping[str, Any]) -> dict[str, Any]:
    """A message event as a message_changed event nests it: no channel, no event_ts."""
    keep = (
        "type",
        "subtype",
        "user",
        "text",
        "ts",
        "team",
        "client_msg_id",
        "blocks",
        "thread_ts",
        "files",
        "upload",
        "display_as_bot",
    )
    return {k: event[k] for k in keep if k in event}


def _changed_event(
    original: Mapping[str, Any],
    message: Mapping[str, Any],
    previous: Mapping[str, Any],
    event_ts: str,
) -> dict[str, Any]:
    return {
        "type": "message",
        "subtype": "message_changed",
        "hidden": True,
        "message": dict(message),
        "previous_message": dict(previous),
        "channel": original["channel"],
        "channel_type": original.get("channel_type", "channel"),
        "ts": event_ts,
        "event_ts": event_ts,
    }


def _rich_text_blocks(text: str) -> list[dict[str, Any]]:
    # Real message events carry the text as a rich_text block too; apps that read blocks
    # instead of text should see the same content.
    return [
        {
            "type": "rich_text",
            "block_id": secrets.token_hex(3),
            "elements": [
                {"type": "rich_text_section", "elements": [{"type": "text", "text": text}]}
            ],
        }
    ]
