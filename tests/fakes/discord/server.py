"""FakeDiscord: the aiohttp server (REST under /api/v10, gateway at /gateway), discord.py patching,
the route table and request handling, put together from the mixins of this package.
"""

# The async helpers take a per-call ``timeout=`` on purpose (ASYNC109): tests read better as
# ``await fake.wait_for_messages(cid, 2, timeout=5)`` than wrapped in ``asyncio.timeout``, and
# the timeout also feeds the diagnostic message of the fake's timeout error.
# ruff: noqa: ASYNC109

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import re
import secrets
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

import yarl
from aiohttp import web

from .. import unknown
from .gateway import GatewayMixin, _GatewaySession
from .interactions import InteractionsMixin
from .models import (
    _API_PATH,
    INTERACTION_ACK_TIMEOUT,
    INTERACTION_TOKEN_LIFETIME,
    JSON,
    PRIVILEGED_INTENTS,
    DispatchRecord,
    FakeChannel,
    FakeDiscordError,
    FakeDiscordTimeout,
    FakeGuild,
    FakeInteraction,
    FakeUser,
    Followup,
    IdentifyRecord,
    InteractionResponse,
    MessageEdit,
    ReactionRecord,
    RequestRecord,
    ResumeRecord,
    RouteKind,
    SentMessage,
    SnowflakeGenerator,
    SyncedCommands,
    TypingEvent,
    UnknownRoute,
)
from .payloads import PayloadsMixin
from .people import PeopleMixin
from .ratelimits import (
    DEFAULT_ROUTE_BUDGETS,
    MAJOR_PARAMETERS,
    RouteBudgetsMixin,
    route_template,
)
from .rest import RestMixin
from .rest_interactions import InteractionRoutesMixin
from .rest_threads import ThreadListingMixin
from .state import WorldMixin
from .validation import (
    _ApiError,
    _Call,
    _FailureRule,
    _guess_content_type,
    _Handler,
    _InteractionState,
    _read_body,
    _Route,
)
from .waits import WaitsMixin

if TYPE_CHECKING:
    import discord


C = TypeVar("C", bound="discord.Client")


class FakeDiscord(
    WorldMixin,
    PeopleMixin,
    InteractionsMixin,
    WaitsMixin,
    PayloadsMixin,
    GatewayMixin,
    RestMixin,
    ThreadListingMixin,
    InteractionRoutesMixin,
    RouteBudgetsMixin,
):
    """A local Discord: REST API under ``/api/v10``, gateway at ``/gateway``.

    Build the world with ``add_*`` (before or after a client connects; after, the matching
    gateway events are dispatched), drive users with ``send_message``/``send_dm``/
    ``invoke_command``/``click_button``, and inspect what the bot did through the record lists
    and ``wait_for_*`` helpers.
    """

    def __init__(
        self,
        *,
        bot_user_id: int | None = None,
        application_id: int | None = None,
        bot_name: str = "memorybot",
        valid_token: str | None = None,
        enabled_privileged_intents: int = int(PRIVILEGED_INTENTS),
        recommended_shards: int = 1,
        heartbeat_interval_ms: int = 41_250,
        interaction_ack_timeout: float | None = INTERACTION_ACK_TIMEOUT,
        echo_bot_messages: bool = True,
    ) -> None:
        """Configure the fake; nothing listens until :meth:`start`.

        Args:
            bot_user_id: The bot's user ID (generated if omitted).
            application_id: The application ID; for bots Discord uses the bot user ID.
            bot_name: The bot's username.
            valid_token: The only token accepted; any other gives 401 / ``LoginFailure``.
            enabled_privileged_intents: Privileged intents "enabled in the developer portal";
                identifying with others closes the gateway with 4014.
            recommended_shards: ``shards`` returned by ``GET /gateway/bot``.
            heartbeat_interval_ms: Interval announced in HELLO.
            interaction_ack_timeout: Seconds the bot has to answer an interaction (Discord: 3);
                ``None`` disables the check.
            echo_bot_messages: Dispatch MESSAGE_CREATE/UPDATE/DELETE for the bot's own
                non-ephemeral messages, as Discord does.
        """
        self._ids = SnowflakeGenerator()
        self.bot_user = FakeUser(id=bot_user_id or self._ids.next(), name=bot_name, bot=True)
        self.application_id: int = application_id or self.bot_user.id
        self.valid_token: str = valid_token or self._make_token(self.bot_user.id)
        self.enabled_privileged_intents = enabled_privileged_intents
        self.recommended_shards = recommended_shards
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.interaction_ack_timeout = interaction_ack_timeout
        self.interaction_token_lifetime = INTERACTION_TOKEN_LIFETIME
        self.echo_bot_messages = echo_bot_messages

        self.app_owner = FakeUser(id=self._ids.next(), name="app-owner")
        self.users: dict[int, FakeUser] = {
            self.bot_user.id: self.bot_user,
            self.app_owner.id: self.app_owner,
        }
        self.guilds: dict[int, FakeGuild] = {}
        self.channels: dict[int, FakeChannel] = {}
        self.messages: dict[int, JSON] = {}
        """Every message the fake knows (REST-shaped payloads), by ID."""
        self._dm_by_user: dict[int, int] = {}
        self.user_installs: set[int] = set()
        """Users who installed the app to their account (USER_INSTALL)."""
        self._attachments: dict[tuple[int, int], bytes] = {}
        self._interactions: dict[int, _InteractionState] = {}
        self._interactions_by_token: dict[str, _InteractionState] = {}
        # scope (None = global) -> (command type, name) -> stored command: names are unique
        # per type and scope, so a slash command and a message command may share one.
        self._commands: dict[int | None, dict[tuple[int, str], JSON]] = {}
        self._command_ids: dict[tuple[int | None, int, str], int] = {}
        # poll message ID -> answer ID -> IDs of the users who voted for it
        self._poll_votes: dict[int, dict[int, set[int]]] = {}

        # Records ------------------------------------------------------------------------
        self.sent_messages: list[SentMessage] = []
        self.edits: list[MessageEdit] = []
        self.deleted_messages: list[tuple[int, int]] = []
        """``(channel_id, message_id)`` of messages the bot deleted."""
        self.typing: list[TypingEvent] = []
        self.reactions: list[ReactionRecord] = []
        self.interaction_responses: list[InteractionResponse] = []
        self.followups: list[Followup] = []
        self.synced_commands: list[SyncedCommands] = []
        self.unknown_routes: list[UnknownRoute] = []
        self.requests: list[RequestRecord] = []
        self.identifies: list[IdentifyRecord] = []
        self.resumes: list[ResumeRecord] = []
        self.dispatched: list[DispatchRecord] = []
        self.presence_updates: list[JSON] = []
        self.interactions: list[FakeInteraction] = []

        # Failure injection ----------------------------------------------------------------
        self._failures: list[_FailureRule] = []
        self._forbidden_channels: set[int] = set()
        # route template -> (requests allowed, window in seconds): see set_route_budget
        self._route_budgets: dict[str, tuple[int, float]] = dict(DEFAULT_ROUTE_BUDGETS)
        # (route template, major parameter) -> (window end, requests used in it)
        self._route_windows: dict[tuple[str, str], tuple[float, int]] = {}
        self._last_archived_at = 0.0

        # Server ------------------------------------------------------------------------------
        self._sessions: list[_GatewaySession] = []
        self._session_serial = 0
        # disconnect_bot(): READY / RESUMED wait until wait_for_reconnect() (the bot is away)
        self._hold_gateway = False
        self._held: list[tuple[_GatewaySession, Callable[[], None]]] = []
        self._dropped_shards: set[tuple[int, int]] = set()
        self._drop_serial = 0
        self._waiters: set[asyncio.Future[None]] = set()
        self._runner: web.AppRunner | None = None
        self._port: int | None = None
        self._patch_stack: contextlib.ExitStack | None = None
        self._routes = self._build_routes()

    # ------------------------------------------------------------------ lifecycle & patching

    @staticmethod
    def _make_token(user_id: int) -> str:
        # Same three-part shape as real bot tokens: base64(user id).timestamp.hmac
        head = base64.b64encode(str(user_id).encode()).decode().rstrip("=")
        return f"{head}.{secrets.token_urlsafe(4)}.{secrets.token_urlsafe(27)}"

    @property
    def port(self) -> int:
        """The ephemeral TCP port (only after :meth:`start`)."""
        if self._port is None:
            raise FakeDiscordError("the fake is not running; await fake.start() first")
        return self._port

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:{port}``."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def api_base(self) -> str:
        """Value for ``discord.http.Route.BASE``."""
        return f"{self.base_url}/api/v10"

    @property
    def gateway_url(self) -> str:
        """Value for ``DiscordWebSocket.DEFAULT_GATEWAY`` and ``GET /gateway/bot``."""
        return f"ws://127.0.0.1:{self.port}/gateway/"

    async def start(self) -> None:
        """Start listening on 127.0.0.1 with an ephemeral port (does not patch discord.py)."""
        if self._runner is not None:
            return
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        # A short shutdown timeout: gateway handlers are closed explicitly in stop().
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=2.0)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        self._runner = runner
        self._port = int(runner.addresses[0][1])

    async def stop(self) -> None:
        """Close gateway sessions and stop the server. Close your clients first.

        A client still connected at this point sees its socket closed and will try to
        reconnect to a server that is gone.
        """
        for session in list(self._sessions):
            await session.shutdown(code=4000, message="fake server stopping")
        self._sessions.clear()
        for waiter in self._waiters:
            if not waiter.done():
                waiter.cancel()
        self._waiters.clear()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    @contextlib.contextmanager
    def patch_client(self) -> Iterator[None]:
        """Point discord.py at this fake for the duration of the ``with`` block.

        Sets ``Route.BASE``, ``DiscordWebSocket.DEFAULT_GATEWAY`` and ``Asset.BASE`` and
        restores the previous values afterwards. These are class attributes, so this affects
        every client in the process: run one fake at a time.
        """
        from discord.asset import Asset
        from discord.gateway import DiscordWebSocket
        from discord.http import Route

        saved = (Route.BASE, DiscordWebSocket.DEFAULT_GATEWAY, Asset.BASE)
        Route.BASE = self.api_base
        DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(self.gateway_url)
        Asset.BASE = f"{self.base_url}/cdn"
        try:
            yield
        finally:
            Route.BASE, DiscordWebSocket.DEFAULT_GATEWAY, Asset.BASE = saved

    async def __aenter__(self) -> FakeDiscord:
        """Start the server and patch discord.py; undone by ``__aexit__``."""
        await self.start()
        stack = contextlib.ExitStack()
        stack.enter_context(self.patch_client())
        self._patch_stack = stack
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._patch_stack is not None:
            self._patch_stack.close()
            self._patch_stack = None
        await self.stop()

    @contextlib.asynccontextmanager
    async def running(
        self, client: C, *, token: str | None = None, timeout: float = 10.0
    ) -> AsyncIterator[C]:
        """Run ``client.start(token)`` in the background until ``on_ready``; close on exit.

        Tip: pass ``guild_ready_timeout=0.05`` to the client; discord.py otherwise waits 2 s
        after the last GUILD_CREATE before firing ``on_ready``.
        """
        task = asyncio.create_task(client.start(token or self.valid_token), name="discord-client")
        # One loop iteration lets start() run login()'s synchronous prologue, which creates
        # the client's ready event; wait_until_ready() raises if called before that.
        await asyncio.sleep(0)
        ready = asyncio.create_task(client.wait_until_ready(), name="discord-client-ready")
        body_failed = True  # start-up errors and test failures must not be masked below
        try:
            done, _ = await asyncio.wait(
                {task, ready}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
            )
            if task in done:
                task.result()  # re-raises LoginFailure, PrivilegedIntentsRequired, ...
                raise FakeDiscordError("client.start() returned before the client was ready")
            if ready not in done:
                held = (
                    " (disconnect_bot() holds READY back until wait_for_reconnect())"
                    if self._hold_gateway
                    else ""
                )
                raise FakeDiscordTimeout(
                    f"client not ready after {timeout}s{held}; identifies={self.identifies!r}, "
                    f"unknown_routes={self.unknown_routes!r}"
                )
            yield client
            body_failed = False
        finally:
            ready.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await ready
            await client.close()
            crash: BaseException | None = None
            if not task.done():
                try:
                    await asyncio.wait_for(task, timeout=timeout)
                except Exception as exc:
                    crash = exc
            elif not task.cancelled():
                crash = task.exception()  # also marks the exception as retrieved
            # A client that died while the test ran (e.g. a gateway close code it cannot
            # recover from) is a failure even if the test's own assertions passed.
            if crash is not None and not body_failed:
                raise crash

    def _notify(self) -> None:
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)

    # ------------------------------------------------------------------ HTTP plumbing

    def _build_routes(self) -> list[_Route]:
        table: list[tuple[str, str, RouteKind, _Handler, bool]] = [
            ("GET", r"/users/@me", "other", self._get_me, True),
            ("GET", r"/users/(?P<user_id>\d+)", "other", self._get_user, True),
            ("POST", r"/users/@me/channels", "other", self._create_dm, True),
            ("GET", r"/oauth2/applications/@me", "other", self._get_application, True),
            ("GET", r"/applications/@me", "other", self._get_application, True),
            ("GET", r"/gateway", "other", self._get_gateway, False),
            ("GET", r"/gateway/bot", "other", self._get_gateway_bot, True),
            ("GET", r"/channels/(?P<channel_id>\d+)", "other", self._get_channel, True),
            ("GET", r"/channels/(?P<channel_id>\d+)/messages", "other", self._list_messages, True),
            (
                "POST",
                r"/channels/(?P<channel_id>\d+)/messages",
                "messages",
                self._create_message,
                True,
            ),
            (
                "GET",
                r"/channels/(?P<channel_id>\d+)/messages/(?P<message_id>\d+)",
                "other",
                self._get_message,
                True,
            ),
            (
                "PATCH",
                r"/channels/(?P<channel_id>\d+)/messages/(?P<message_id>\d+)",
                "edit",
                self._edit_message,
                True,
            ),
            (
                "DELETE",
                r"/channels/(?P<channel_id>\d+)/messages/(?P<message_id>\d+)",
                "delete",
                self._delete_message,
                True,
            ),
            (
                "PUT",
                r"/channels/(?P<channel_id>\d+)/messages/(?P<message_id>\d+)"
                r"/reactions/(?P<emoji>[^/]+)/@me",
                "reactions",
                self._add_reaction,
                True,
            ),
            (
                "DELETE",
                r"/channels/(?P<channel_id>\d+)/messages/(?P<message_id>\d+)"
                r"/reactions/(?P<emoji>[^/]+)/@me",
                "reactions",
                self._remove_reaction,
                True,
            ),
            ("POST", r"/channels/(?P<channel_id>\d+)/typing", "typing", self._typing, True),
            (
                "POST",
                r"/channels/(?P<channel_id>\d+)/threads",
                "threads",
                self._create_thread,
                True,
            ),
            (
                "POST",
                r"/channels/(?P<channel_id>\d+)/messages/(?P<message_id>\d+)/threads",
                "threads",
                self._create_thread,
                True,
            ),
            ("GET", r"/guilds/(?P<guild_id>\d+)", "other", self._get_guild, True),
            ("GET", r"/guilds/(?P<guild_id>\d+)/channels", "other", self._get_guild_channels, True),
            ("GET", r"/guilds/(?P<guild_id>\d+)/roles", "other", self._get_guild_roles, True),
            (
                "GET",
                r"/guilds/(?P<guild_id>\d+)/threads/active",
                "other",
                self._active_threads,
                True,
            ),
            (
                "GET",
                r"/channels/(?P<channel_id>\d+)/threads/archived/public",
                "other",
                self._public_archived_threads,
                True,
            ),
            (
                "GET",
                r"/channels/(?P<channel_id>\d+)/threads/archived/private",
                "other",
                self._private_archived_threads,
                True,
            ),
            (
                "GET",
                r"/channels/(?P<channel_id>\d+)/users/@me/threads/archived/private",
                "other",
                self._joined_private_archived_threads,
                True,
            ),
            (
                "GET",
                r"/guilds/(?P<guild_id>\d+)/members/(?P<user_id>\d+)",
                "other",
                self._get_member,
                True,
            ),
            (
                "POST",
                r"/interactions/(?P<interaction_id>\d+)/(?P<token>[^/]+)/callback",
                "interaction_callback",
                self._interaction_callback,
                False,
            ),
            (
                "POST",
                r"/webhooks/(?P<app_id>\d+)/(?P<token>[^/]+)",
                "webhook",
                self._create_followup,
                False,
            ),
            (
                "GET",
                r"/webhooks/(?P<app_id>\d+)/(?P<token>[^/]+)/messages/"
                r"(?P<message_id>@original|\d+)",
                "webhook",
                self._get_webhook_message,
                False,
            ),
            (
                "PATCH",
                r"/webhooks/(?P<app_id>\d+)/(?P<token>[^/]+)/messages/"
                r"(?P<message_id>@original|\d+)",
                "webhook",
                self._edit_webhook_message,
                False,
            ),
            (
                "DELETE",
                r"/webhooks/(?P<app_id>\d+)/(?P<token>[^/]+)/messages/"
                r"(?P<message_id>@original|\d+)",
                "webhook",
                self._delete_webhook_message,
                False,
            ),
            (
                "GET",
                r"/applications/(?P<app_id>\d+)/commands",
                "commands",
                self._get_commands,
                True,
            ),
            (
                "PUT",
                r"/applications/(?P<app_id>\d+)/commands",
                "commands",
                self._put_commands,
                True,
            ),
            (
                "POST",
                r"/applications/(?P<app_id>\d+)/commands",
                "commands",
                self._upsert_command,
                True,
            ),
            (
                "GET",
                r"/applications/(?P<app_id>\d+)/guilds/(?P<guild_id>\d+)/commands",
                "commands",
                self._get_commands,
                True,
            ),
            (
                "PUT",
                r"/applications/(?P<app_id>\d+)/guilds/(?P<guild_id>\d+)/commands",
                "commands",
                self._put_commands,
                True,
            ),
            (
                "POST",
                r"/applications/(?P<app_id>\d+)/guilds/(?P<guild_id>\d+)/commands",
                "commands",
                self._upsert_command,
                True,
            ),
        ]
        return [
            _Route(method, re.compile(pattern), kind, handler, auth)
            for method, pattern, kind, handler, auth in table
        ]

    @staticmethod
    def _bucket_hash(kind: str) -> str:
        return f"{abs(hash(('fake-discord', kind))) & 0xFFFFFFFF:08x}"

    def _json(self, data: Any, *, status: int = 200, kind: str = "other") -> web.Response:
        # discord.py parses a body as JSON only if Content-Type is *exactly*
        # "application/json"; aiohttp's json_response would append "; charset=utf-8".
        headers = {"Content-Type": "application/json", **self._ok_ratelimit_headers(kind)}
        return web.Response(status=status, body=json.dumps(data).encode(), headers=headers)

    def _no_content(self, *, kind: str = "other") -> web.Response:
        return web.Response(status=204, headers=self._ok_ratelimit_headers(kind))

    def _ok_ratelimit_headers(self, kind: str) -> dict[str, str]:
        # Realistic headers with plenty of budget left, so discord.py's bucket tracking runs
        # but never pre-emptively sleeps.
        return {
            "Via": "1.1 google",
            "X-RateLimit-Limit": "50",
            "X-RateLimit-Remaining": "49",
            "X-RateLimit-Reset": f"{time.time() + 1:.3f}",
            "X-RateLimit-Reset-After": "1.000",
            "X-RateLimit-Bucket": self._bucket_hash(kind),
        }

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        if path.rstrip("/") == "/gateway" and request.headers.get("Upgrade", "").lower() == (
            "websocket"
        ):
            return await self._gateway(request)
        if path.startswith("/attachments/"):
            return self._serve_attachment(path)
        match = _API_PATH.match(path)
        if match is None:
            return await self._unknown(request, path)
        sub_path = match.group("rest").rstrip("/") or "/"
        for route in self._routes:
            route_match = route.pattern.fullmatch(sub_path)
            if route.method == request.method and route_match is not None:
                break
        else:
            return await self._unknown(request, sub_path)
        response = await self._run_route(request, route, route_match.groupdict(), sub_path)
        self._notify()
        return response

    async def _run_route(
        self, request: web.Request, route: _Route, params: dict[str, str], sub_path: str
    ) -> web.StreamResponse:
        response: web.StreamResponse
        body_for_record: Any = None
        budget: tuple[str, str] | None = None
        if route.auth and request.headers.get("Authorization") != f"Bot {self.valid_token}":
            error: JSON = {"message": "401: Unauthorized", "code": 0}
            response = self._json(error, status=401, kind=route.kind)
            body_for_record = error
        elif (budget := self._budget_key(route, params)) is not None and (
            limited := self._over_budget(budget)
        ) is not None:
            response = limited
            body_for_record = json.loads(limited.text or "{}")
        elif (rule := self._take_failure(route, params)) is not None:
            headers = {"Content-Type": "application/json", "Via": "1.1 google", **rule.headers()}
            response = web.Response(
                status=rule.status, body=json.dumps(rule.body).encode(), headers=headers
            )
            body_for_record = rule.body
        else:
            try:
                call = _Call(request, params, await _read_body(request))
                response = await route.handler(call)
            except _ApiError as exc:
                response = self._json(exc.body, status=exc.status, kind=route.kind)
                body_for_record = exc.body
        if budget is not None and response.status != 429:
            self._answer_budget(budget, response)
        self.requests.append(
            RequestRecord(request.method, sub_path, route.kind, response.status, body_for_record)
        )
        return response

    def _take_failure(self, route: _Route, params: dict[str, str]) -> _FailureRule | None:
        template = route_template(route)
        resource = next((params[p] for p in MAJOR_PARAMETERS if p in params), "")
        for rule in self._failures:
            if rule.matches(route.kind, template, resource) and rule.remaining > 0:
                rule.remaining -= 1
                if rule.remaining == 0:
                    self._failures.remove(rule)
                return rule
        return None

    async def _unknown(self, request: web.Request, path: str) -> web.Response:
        raw = await request.read()
        self.unknown_routes.append(
            UnknownRoute(
                method=request.method,
                path=path,
                query=dict(request.query),
                body=raw.decode("utf-8", errors="replace"),
            )
        )
        self.requests.append(RequestRecord(request.method, path, "unknown", 404, None))
        unknown.record("discord", request.method, path)
        self._notify()
        return self._json({"message": "404: Not Found", "code": 0}, status=404)

    def _serve_attachment(self, path: str) -> web.Response:
        parts = path.split("/")
        # /attachments/{channel_id}/{attachment_id}/{filename}
        if len(parts) >= 5 and parts[2].isdigit() and parts[3].isdigit():
            data = self._attachments.get((int(parts[3]), int(parts[2])))
            if data is not None:
                return web.Response(body=data, content_type=_guess_content_type(parts[4]))
        return web.Response(status=404, text="Not Found")
