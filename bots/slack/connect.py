"""How memorybot connects to Slack: the Web API client, start-up checks, Socket Mode and
the HTTP server. Every failure a person can fix is a ConfigError naming the variable."""

from __future__ import annotations

import asyncio
import json
import logging
import math
import random
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Literal

import aiohttp
from aiohttp import web
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncApp
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.http_retry.async_handler import AsyncRetryHandler
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
)
from slack_sdk.http_retry.request import HttpRequest
from slack_sdk.http_retry.response import HttpResponse
from slack_sdk.http_retry.state import RetryState
from slack_sdk.web.async_client import AsyncWebClient

from config.settings import SlackSettings
from memory_core.errors import ConfigError

EVENTS_PATH = "/slack/events"  # events, slash commands and interactivity alike
#: The longest the running door waits out one 429 (a reply, a name, a file): Slack asking
#: for longer fails that request at once (a name stays the user's id; a reply's failure is
#: logged) instead of holding the message it serves for minutes.
DOOR_MAX_WAIT_S = 30.0
log = logging.getLogger(__name__)
_Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


#: A Web API call that failed: Slack's refusal (SlackApiError) or the way there.
SLACK_ERRORS = (SlackClientError, aiohttp.ClientError, TimeoutError, OSError)


def error_code(exc: Exception) -> str:
    """Slack's error code (``not_in_channel``), or the kind of failure on the way there."""
    if isinstance(exc, SlackApiError):
        return str(exc.response.get("error") or exc)
    return type(exc).__name__


def retry_handlers() -> list[AsyncRetryHandler]:
    """Connection hiccups retried; ``ratelimited`` (HTTP 429) waited out per Retry-After, up
    to :data:`DOOR_MAX_WAIT_S` a time."""
    return [
        AsyncConnectionErrorRetryHandler(max_retry_count=2),
        CappedRateLimitRetry(max_retry_count=3),
    ]


class CappedRateLimitRetry(AsyncRateLimitErrorRetryHandler):
    """slack_sdk's 429 retry for the running door, waiting ``Retry-After`` only when it is at
    most ``max_wait_s`` (the SDK's own sleeps whatever Slack asks, and reads a Retry-After
    that is not a whole number as an error)."""

    def __init__(self, *, max_retry_count: int, max_wait_s: float = DOOR_MAX_WAIT_S) -> None:
        super().__init__(max_retry_count=max_retry_count)
        self.max_wait_s = max_wait_s

    async def _can_retry_async(
        self,
        *,
        state: RetryState,
        request: HttpRequest,
        response: HttpResponse | None = None,
        error: Exception | None = None,
    ) -> bool:
        if response is None or response.status_code != 429:
            return False
        wait = retry_after(response.headers)
        if wait > self.max_wait_s:
            log.warning(
                "Slack: %s rate limited for %.0f s, longer than the %.0f s the bot waits; "
                "not retried",
                request.url.rsplit("/", 1)[-1],
                wait,
                self.max_wait_s,
            )
            return False
        return True

    async def prepare_for_next_attempt_async(
        self,
        *,
        state: RetryState,
        request: HttpRequest,
        response: HttpResponse | None = None,
        error: Exception | None = None,
    ) -> None:
        if response is None:  # (never: only a 429's response is retried)
            raise error or RuntimeError("no response to retry")
        state.next_attempt_requested = True
        # (a little jitter, as slack_sdk's: processes limited together do not return at once)
        await asyncio.sleep(retry_after(response.headers) + random.uniform(0, 0.5))
        state.increment_current_attempt()


def retry_after(headers: Mapping[str, Any]) -> float:
    """The seconds a 429 asks to wait (``Retry-After``; a minute when it does not say)."""
    for name, value in headers.items():
        if name.lower() == "retry-after":
            raw = value[0] if isinstance(value, list) and value else value
            try:
                seconds = float(str(raw))
            except ValueError:
                break
            if math.isfinite(seconds) and seconds >= 0:
                return seconds
    return 60.0


def build_client(
    settings: SlackSettings, *, session: aiohttp.ClientSession | None = None
) -> AsyncWebClient:
    """The Web API client: ``slack.api_base_url`` (GovSlack, tests), retries."""
    token = settings.bot_token.get_secret_value() if settings.bot_token else None
    base_url = settings.api_base_url.rstrip("/") + "/"
    return AsyncWebClient(
        token=token, base_url=base_url, session=session, retry_handlers=retry_handlers()
    )


_MISSING = {
    "SLACK_BOT_TOKEN": "SLACK_BOT_TOKEN is not set: give the app's Bot User OAuth Token "
    "(xoxb-..., from OAuth & Permissions); see docs/slack.md",
    "SLACK_APP_TOKEN": "SLACK_APP_TOKEN is not set: Socket Mode needs an app-level token "
    "(xapp-..., with connections:write); or serve HTTP with MEMORYBOT_SLACK__MODE=http "
    "and SLACK_SIGNING_SECRET",
    "SLACK_SIGNING_SECRET": "SLACK_SIGNING_SECRET is not set: HTTP mode verifies every "
    "request with it (Basic Information > App Credentials); or use Socket Mode by setting "
    "SLACK_APP_TOKEN",
}


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise ConfigError(message)


def require_bot_token(settings: SlackSettings) -> str:
    _require(settings.bot_token is not None, _MISSING["SLACK_BOT_TOKEN"])
    assert settings.bot_token is not None
    token = settings.bot_token.get_secret_value()
    _require(
        token.startswith("xoxb-"),
        "SLACK_BOT_TOKEN must be a bot token (xoxb-...), not a user or app-level token",
    )
    return token


def connection_mode(settings: SlackSettings) -> Literal["socket", "http"]:
    """Socket Mode when asked for, or (auto) when an app token is set; HTTP otherwise.
    Raises ConfigError naming the variable that is missing or malformed."""
    require_bot_token(settings)
    mode = settings.mode
    if mode == "auto":
        mode = "socket" if settings.app_token is not None else "http"
    if mode == "socket":
        _require(settings.app_token is not None, _MISSING["SLACK_APP_TOKEN"])
        assert settings.app_token is not None
        _require(
            settings.app_token.get_secret_value().startswith("xapp-"),
            "SLACK_APP_TOKEN must be an app-level token (xapp-...) with connections:write",
        )
        return "socket"
    _require(settings.signing_secret is not None, _MISSING["SLACK_SIGNING_SECRET"])
    return "http"


@dataclass(frozen=True, slots=True)
class SlackIdentity:
    """Who the bot is, from auth.test. (Listeners read the same from Bolt's context, which
    Bolt fills from its own cached auth.test.)"""

    user_id: str  # the bot user: <@user_id> is a mention of the bot
    bot_id: str
    team_id: str
    team: str


async def authenticate(client: AsyncWebClient) -> SlackIdentity:
    """auth.test once at start-up, so a wrong or revoked token stops the bot right away."""
    try:
        response = await client.auth_test()
    except SlackApiError as exc:
        raise ConfigError(
            f"Slack refused SLACK_BOT_TOKEN ({error_code(exc)}): check the token, or "
            "reinstall the app to the workspace (docs/slack.md)"
        ) from exc
    except (aiohttp.ClientError, TimeoutError, OSError) as exc:
        raise ConfigError(
            f"cannot reach the Slack API at {client.base_url} ({exc!r}): check the network "
            "or slack.api_base_url"
        ) from exc
    return SlackIdentity(
        user_id=str(response.get("user_id") or ""),
        bot_id=str(response.get("bot_id") or ""),
        team_id=str(response.get("team_id") or ""),
        team=str(response.get("team") or ""),
    )


async def connect_socket(app: AsyncApp, app_token: str) -> AsyncSocketModeHandler:
    """A connected Socket Mode handler. slack_sdk retries a refused connection forever, so
    the first WebSocket URL is asked for here, where a bad SLACK_APP_TOKEN can fail."""
    handler = AsyncSocketModeHandler(app, app_token)
    try:
        handler.client.wss_uri = await handler.client.issue_new_wss_url()
    except SlackApiError as exc:
        await handler.close_async()  # type: ignore[no-untyped-call]
        raise ConfigError(
            f"Slack refused SLACK_APP_TOKEN ({error_code(exc)}): give an app-level token "
            "(xapp-...) with the connections:write scope, and enable Socket Mode for the app"
        ) from exc
    except (aiohttp.ClientError, TimeoutError, OSError) as exc:
        await handler.close_async()  # type: ignore[no-untyped-call]
        raise ConfigError(
            f"cannot open Socket Mode through {handler.client.web_client.base_url} "
            f"({exc!r}): check the network or slack.api_base_url"
        ) from exc
    await handler.connect_async()  # type: ignore[no-untyped-call]
    return handler


@web.middleware
async def _refuse_malformed(request: web.Request, handler: _Handler) -> web.StreamResponse:
    """Bolt reads a request's body assuming Slack's shapes (its "user" a string or an
    object, ...) before any listener runs; a body it chokes on is answered 400, with one
    log line, instead of escaping into the server as a 500 with a traceback."""
    try:
        response = await handler(request)
    except (TypeError, AttributeError, KeyError, ValueError, RecursionError) as exc:
        log.warning("Slack: refused a malformed request (%s)", type(exc).__name__)
        return web.Response(status=400, text="malformed request")
    # Bolt answers 500 when its own middleware chokes on a signed event_callback whose
    # "event" is not an object; a 500 asks Slack to retry what can never succeed.
    if response.status == 500 and await _event_is_not_an_object(request):
        log.warning("Slack: refused an event_callback whose event is not an object")
        return web.Response(status=400, text="malformed request")
    return response


async def _event_is_not_an_object(request: web.Request) -> bool:
    if request.content_type != "application/json":
        return False
    try:
        payload = json.loads(await request.read())  # aiohttp keeps the body: Bolt read it
    except (ValueError, RecursionError):
        return False
    return (
        isinstance(payload, dict)
        and payload.get("type") == "event_callback"
        and not isinstance(payload.get("event"), dict)
    )


@asynccontextmanager
async def serve_http(app: AsyncApp, *, host: str, port: int) -> AsyncIterator[str]:
    """Bolt's aiohttp app on host:port (port 0: any free port). Yields the events URL."""
    web_app = app.web_app(path=EVENTS_PATH, port=port)
    web_app.middlewares.append(_refuse_malformed)
    runner = web.AppRunner(web_app, access_log=None)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port)
        try:
            await site.start()
        except OSError as exc:
            raise ConfigError(
                f"cannot listen on {host}:{port} ({exc.strerror}): change slack.http_port "
                "(MEMORYBOT_SLACK__HTTP_PORT)"
            ) from exc
        bound_host, bound_port = runner.addresses[0][:2]
        yield f"http://{bound_host}:{bound_port}{EVENTS_PATH}"
    finally:
        await runner.cleanup()
