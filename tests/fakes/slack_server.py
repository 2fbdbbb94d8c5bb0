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
import hashlib
import itertools
import json
import secrets
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Literal, Self, TypeVar
from urllib.parse import parse_qs, urlencode, urlsplit

import aiohttp
from aiohttp import WSCloseCode, WSMsgType, web
from slack_sdk.signature import SignatureVerifier

__all__ = [
    "ApiCall",
    "FakeChannel",
    "FakeSlack",
    "FakeUser",
    "FileUpload",
    "HttpLogEntry",
    "MethodHandler",
    "RecordedMessage",
    "ResponseUrlPost",
    "SignedDelivery",
    "SocketAck",
    "SocketEnvelope",
    "event_body",
    "interactive_form_body",
    "send_signed",
    "serve_web_app",
    "signed_headers",
    "slash_command_form_body",
]

T = TypeVar("T")

EnvelopeType = Literal["events_api", "slash_commands", "interactive"]

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
    "files.getUploadURLExternal": frozenset({"files:write"}),
    "files.completeUploadExternal": frozenset({"files:write"}),
}

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

    def to_api(self) -> dict[str, Any]:
        """The ``channel`` object of ``conversations.info``."""
        data: dict[str, Any] = {
            "id": self.id,
            "created": 1_700_000_000,
            "is_archived": False,
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
    ) -> None:
        """``scopes``: the bot token's scopes (the manifest's); a method that needs another
        one fails with ``missing_scope``. None: every method is allowed."""
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
        #: A legacy verification token; Bolt ignores it when a signing secret is set.
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
        self._invalid_tokens: set[str] = set()
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
        """Delete a conversation: calls that name it fail with ``channel_not_found``."""
        self.channels.pop(channel_id, None)
        self.deleted_channels.add(channel_id)

    def invalidate_token(self, token: str) -> None:
        """Make every call with ``token`` fail with ``invalid_auth`` (revoked token).

        Tokens the fake was never told about (anything but ``bot_token`` and ``app_token``)
        are already invalid.
        """
        self._invalid_tokens.add(token)

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
        the event's conversation and author (see :meth:`_learn_from_event`)."""
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
        Replies are those the bot posted in the thread (a message without any is deleted
        with ``message_deleted``)."""
        ts = str(parent["ts"])
        replies = [
            m for m in self.posted_messages if m.thread_ts == ts and m.channel == parent["channel"]
        ]
        if not replies:
            raise ValueError(f"message {ts} has no replies: its deletion is message_deleted")
        thread = {
            "thread_ts": ts,
            "reply_count": len(replies),
            "reply_users_count": 1,
            "latest_reply": replies[-1].ts,
            "reply_users": [self.bot_user_id],
            "is_locked": False,
            "subscribed": False,
        }
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
            # Legacy clients send the token as an argument.
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

        failures = self._failures.get(method)
        if failures:
            return 200, {"ok": False, "error": failures.popleft()}, {}

        custom = self._custom_methods.get(method)
        if custom is not None:
            return 200, custom(params, token), {}
        assert builtin is not None
        return 200, builtin(params, token), {}

    def _check_token(self, method: str, token: str | None) -> str | None:
        if not token:
            return "not_authed"
        if token in self._invalid_tokens or token not in (self.bot_token, self.app_token):
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
        }
        return handlers.get(method)

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
        digest = hashlib.sha1(",".join(sorted(users)).encode()).hexdigest()[:10].upper()
        channel_id = ("D" if len(users) == 1 else "G") + digest
        already_open = channel_id in self.channels
        if not already_open:
            if len(users) == 1:
                self.add_channel(channel_id, channel_id, is_im=True, user_id=users[0])
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
