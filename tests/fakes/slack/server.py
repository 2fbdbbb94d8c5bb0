"""FakeSlack: the aiohttp server (Web API under /api/, uploads, response_url, Socket Mode, file
downloads), token and scope checks, dispatch to the methods, and waiting on records; put
together from the mixins of this package.
"""

# The async helpers take a per-call ``timeout=`` on purpose (ASYNC109): tests read better as
# ``await fake.wait_for_messages(cid, 2, timeout=5)`` than wrapped in ``asyncio.timeout``, and
# the timeout also feeds the diagnostic message of the fake's timeout error.
# ruff: noqa: ASYNC109

from __future__ import annotations

import asyncio
import itertools
import json
import math
import secrets
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from contextlib import suppress
from types import TracebackType
from typing import Any, Self

from aiohttp import WSCloseCode, web

from .. import unknown
from .assistant import AssistantMixin, AssistantThread
from .blocks import message_error
from .events import EventsMixin
from .files import FilesMixin
from .limits import RateLimitsMixin
from .methods import WebApiMixin
from .models import (
    _APP_TOKEN_METHODS,
    _CHANNEL_POSTS_PER_SECOND,
    _DEFAULT_TIMEOUT,
    _HISTORY_LIMITS,
    _JSON_ARGUMENTS,
    _METHOD_SCOPES,
    _RESTRICTED_HISTORY_INTERVAL_S,
    ApiCall,
    FakeChannel,
    FakeUser,
    FileUpload,
    HistoryTier,
    HttpLogEntry,
    MethodHandler,
    RecordedMessage,
    ResponseUrlPost,
    SocketAck,
    SocketEnvelope,
    T,
    _ResponseUrl,
    _SocketConnection,
)
from .socket import SocketModeMixin
from .state import WorkspaceMixin
from .streams import FakeStream, StreamsMixin


class FakeSlack(
    WorkspaceMixin,
    EventsMixin,
    SocketModeMixin,
    WebApiMixin,
    FilesMixin,
    RateLimitsMixin,
    StreamsMixin,
    AssistantMixin,
):
    """A fake Slack workspace served on 127.0.0.1 (ephemeral port).

    It knows the conversations a test adds (``add_channel``) and those it sends an event
    from (``event_payload``, Socket Mode pushes): Slack delivers message events only from
    conversations the app is in. Posting anywhere else is ``channel_not_found``. Members are
    those added, plus whoever sends an event, runs a slash command or clicks a button there;
    an ephemeral message to anyone else is ``user_not_in_channel``.

    The messages it knows (events it sent, the bot's posts, ``add_history``: people's, other
    bots' (``bot_message_event``) and Slack's own (``system_message_event``)) are what
    ``conversations.history`` / ``conversations.replies`` read. Slack's rate limits hold by
    default (``limits.py``): a method answers as many requests a minute as its tier allows
    (or ``limit_rate``), a channel takes one new message a second (then HTTP 429 with
    ``Retry-After``), the history methods of a ``history_tier="restricted"`` app one a
    minute. Streamed messages (``streams.py``) start, grow and stop as Slack's do, or are
    refused (``stream_refusal``). Deleting or archiving a
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
        assistant_view: bool = True,
        history_tier: HistoryTier = "standard",
        stream_refusal: str | None = None,
    ) -> None:
        """``scopes``: the bot token's scopes (the manifest's); a method that needs another
        one fails with ``missing_scope``. None: every method is allowed.

        ``bot_events``: the app's event subscriptions (the manifest's ``bot_events``). When
        given, building an event the app is not subscribed to, or whose scope
        (:data:`EVENT_SCOPES`) it lacks, raises: Slack would not deliver it.

        ``home_tab_enabled``: the manifest's ``features.app_home.home_tab_enabled``; without
        it views.publish answers ``not_enabled`` and nobody can open the Home tab.

        ``assistant_view``: the manifest has ``features.assistant_view``; without it nobody
        can open the app's assistant panel (``assistant.py``).

        ``history_tier``: ``"restricted"`` for an app commercially distributed outside the
        Marketplace (see :data:`HistoryTier`).

        ``stream_refusal``: the error chat.startStream answers in a workspace (or plan)
        that does not allow the app to stream (``not_allowed``...); None: it streams."""
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
        self.assistant_view = assistant_view
        #: The assistant threads members opened, by (DM, thread_ts): ``assistant_thread``.
        self.assistant_threads: dict[tuple[str, str], AssistantThread] = {}
        self.history_tier: HistoryTier = history_tier
        self.stream_refusal = stream_refusal
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
        #: Requests a minute each method answers (limit_rate), and when it answered the
        #: ones of the last minute (monotonic).
        self._rates: dict[str, int] = {}
        self._rate_windows: dict[str, deque[float]] = {}
        #: When each channel took its new messages of the last second (monotonic).
        self._channel_posts: dict[str, deque[float]] = {}
        self._channel_posts_per_second = _CHANNEL_POSTS_PER_SECOND
        self._streams: dict[tuple[str, str], FakeStream] = {}
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

    # ---------------------------------------------------------------- HTTP handlers

    @web.middleware
    async def _log_middleware(
        self,
        request: web.Request,
        handler: Callable[[web.Request], Awaitable[web.StreamResponse]],
    ) -> web.StreamResponse:
        if getattr(request.match_info, "http_exception", None) is not None:
            # No route of the fake matches (aiohttp answers 404 or 405): Slack has no such path.
            unknown.record("slack", request.method, request.path)
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
            unknown.record("slack", "Web API method", method)
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
        wait = self._restricted_history_wait(method)
        if wait is None:
            wait = self._limits_wait(method, params)
        if wait is not None:
            return 429, {"ok": False, "error": "ratelimited"}, {"Retry-After": str(wait)}

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
        channel = self._app_channel(str(params.get("channel") or ""))
        if channel is None:  # never heard of, deleted, or a DM between people
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
            "conversations.members": self._conversations_members,
            "assistant.threads.setStatus": self._assistant_set_status,
            "assistant.threads.setSuggestedPrompts": self._assistant_set_suggested_prompts,
            "assistant.threads.setTitle": self._assistant_set_title,
            "chat.startStream": self._chat_start_stream,
            "chat.appendStream": self._chat_append_stream,
            "chat.stopStream": self._chat_stop_stream,
        }
        return handlers.get(method)
