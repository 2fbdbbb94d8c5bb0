"""Slack's Web API as a reader of history meets it: requests spaced per method, an HTTP
429's ``Retry-After`` waited out up to a cap, a client that leaves the waiting to this
module, and Slack's refusals as a learn's (:class:`SlackRefused`, with Slack's code).

Slack rates each Web API method per app and workspace in tiers (requests a minute): Tier 3
(50+) is what conversations.history and conversations.replies allow internal and Marketplace
apps; apps commercially distributed outside the Marketplace get one request a minute (and 15
messages a page) for those two since 29 May 2025.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.web.async_slack_response import AsyncSlackResponse

from bots.slack.connect import retry_after
from memory_core.service.past import LearnRefused

log = logging.getLogger(__name__)

#: Slack's Tier 3 (internal and Marketplace apps), and the limit of conversations.history /
#: .replies for apps commercially distributed outside the Marketplace.
TIER3_PER_MINUTE = 50.0
RESTRICTED_PER_MINUTE = 1.0
MAX_WAIT_S = 120.0
#: 429s in a row on one request before giving up (each waited out within the cap).
MAX_RATE_LIMITED = 5
#: Slack refusing the token: nothing more can be read.
AUTH_ERRORS = frozenset(
    {"not_authed", "invalid_auth", "account_inactive", "token_revoked", "token_expired"}
)
NETWORK_ERRORS = (aiohttp.ClientError, TimeoutError, OSError)

Sleep = Callable[[float], Awaitable[None]]
Clock = Callable[[], float]


class SlackRefused(LearnRefused):
    """Slack refused a read (``code``: its error, ``channel_not_found``, ``missing_scope``...)."""

    def __init__(self, message: str, *, code: str) -> None:
        super().__init__(message)
        self.code = code


class Pacer:
    """Spaces the requests of each method ``60 / requests_per_minute`` seconds apart, and
    waits out a 429's ``Retry-After`` (at most ``max_wait_s`` each time)."""

    def __init__(
        self,
        *,
        requests_per_minute: float,
        max_wait_s: float,
        sleep: Sleep = asyncio.sleep,
        clock: Clock = time.monotonic,
    ) -> None:
        if requests_per_minute <= 0:
            raise ValueError("requests_per_minute must be over 0")
        self.interval_s = 60.0 / requests_per_minute
        self.max_wait_s = max_wait_s
        self._sleep = sleep
        self._clock = clock
        self._last: dict[str, float] = {}

    async def call(
        self, method: str, request: Callable[[], Awaitable[AsyncSlackResponse]]
    ) -> AsyncSlackResponse:
        for _ in range(MAX_RATE_LIMITED):
            await self._pace(method)
            try:
                return await request()
            except SlackApiError as exc:
                if exc.response.status_code != 429:
                    raise
                wait = retry_after(exc.response.headers)
            if wait > self.max_wait_s:
                raise LearnRefused(
                    f"Slack asks to wait {wait:.0f} s before the next {method} (rate "
                    f"limited), longer than the {self.max_wait_s:.0f} s a learn waits at "
                    "most; run learn again later: it goes on where it stopped"
                )
            log.info("Slack: %s rate limited, waiting %.0f s", method, wait)
            await self._sleep(wait)
        raise LearnRefused(
            f"Slack kept answering {method} with 'rate limited' ({MAX_RATE_LIMITED} times in "
            "a row); run learn again later: it goes on where it stopped"
        )

    async def _pace(self, method: str) -> None:
        last = self._last.get(method)
        if last is not None:
            wait = last + self.interval_s - self._clock()
            if wait > 0:
                await self._sleep(wait)
        self._last[method] = self._clock()


def without_rate_retries(client: AsyncWebClient) -> AsyncWebClient:
    """The door's client without its 429 retry (a learn's :class:`Pacer` does the waiting):
    same token, base URL, session and connection retries."""
    headers = {k: v for k, v in client.headers.items() if k.lower() != "user-agent"}
    reader = AsyncWebClient(
        token=client.token,
        base_url=client.base_url,
        timeout=client.timeout,
        ssl=client.ssl,
        proxy=client.proxy,
        session=client.session,
        headers=headers,
        retry_handlers=[
            handler
            for handler in client.retry_handlers
            if not isinstance(handler, AsyncRateLimitErrorRetryHandler)
        ],
    )
    reader.default_params = dict(client.default_params)  # an org-wide install's team_id
    return reader
