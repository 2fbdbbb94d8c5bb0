"""Per-route rate limits of the fake Discord, as Discord's "Rate Limits" topic documents them: a
route's budget is counted per top-level resource (the channel, guild or webhook in its path);
every answer says where the budget stands (``X-RateLimit-Limit``, ``-Remaining``, ``-Reset``,
``-Reset-After``, ``-Bucket``), and a request over it is refused with HTTP 429 (a JSON body
with ``message``, ``retry_after`` and ``global``, a ``Retry-After`` header,
``X-RateLimit-Scope: user``) and not counted.

The routes a bot answers through have their budgets by default (:data:`DEFAULT_ROUTE_BUDGETS`);
``set_route_budget`` gives a route another one (history reading, in the tests of a learn).
"""

from __future__ import annotations

import json
import math
import re
import time

from aiohttp import web

from .models import FakeDiscordError
from .validation import _Route

# Top-level resources: a route's limits are counted per value of the first of these it has.
MAJOR_PARAMETERS = ("channel_id", "guild_id", "token")
#: (requests, window in seconds) per channel, on by default. Discord publishes no numbers (a
#: bot is to read the headers, which the fake sends); these are the ones it answers bots with:
#: five messages, or five edits, per five seconds in a channel.
DEFAULT_ROUTE_BUDGETS: dict[str, tuple[int, float]] = {
    "POST /channels/{channel_id}/messages": (5, 5.0),
    "PATCH /channels/{channel_id}/messages/{message_id}": (5, 5.0),
    "DELETE /channels/{channel_id}/messages/{message_id}": (5, 1.0),
    "POST /channels/{channel_id}/typing": (5, 5.0),
    "PUT /channels/{channel_id}/messages/{message_id}/reactions/{emoji}/@me": (1, 0.25),
    "DELETE /channels/{channel_id}/messages/{message_id}/reactions/{emoji}/@me": (1, 0.25),
}
_PARAMETER = re.compile(r"\(\?P<(\w+)>[^)]*\)")


def route_template(route: _Route) -> str:
    """``GET /channels/{channel_id}/messages``: how tests name a route."""
    path = _PARAMETER.sub(lambda match: "{" + match.group(1) + "}", route.pattern.pattern)
    return f"{route.method} {path}"


class RouteBudgetsMixin:
    """set_route_budget, and the counting, headers and 429s it brings."""

    def set_route_budget(self, route: str, *, limit: int, window: float) -> None:
        """Allow ``limit`` requests of ``route`` (``"GET /channels/{channel_id}/messages"``)
        per ``window`` seconds for each channel, guild or webhook, as Discord allows a route
        per top-level resource. The window opens at the first request; a request over the
        budget gets 429 with ``retry_after`` = the time left in the window."""
        known = {route_template(r) for r in self._routes}
        if route not in known:
            raise FakeDiscordError(f"no route {route!r}; the fake has {sorted(known)}")
        if limit < 1 or window <= 0:
            raise FakeDiscordError("a budget allows at least one request in a positive window")
        self._route_budgets[route] = (limit, window)

    def _budget_key(self, route: _Route, params: dict[str, str]) -> tuple[str, str] | None:
        template = route_template(route)
        if template not in self._route_budgets:
            return None
        major = next((params[p] for p in MAJOR_PARAMETERS if p in params), "")
        return template, major

    def _over_budget(self, key: tuple[str, str]) -> web.Response | None:
        """Count a request against its budget: None when it may go on, else the 429."""
        limit, window = self._route_budgets[key[0]]
        now = time.time()
        ends, used = self._route_windows.get(key, (0.0, 0))
        if now >= ends:
            ends, used = now + window, 0
        if used >= limit:
            retry_after = round(ends - now, 3)
            body = {"message": "You are being rate limited.", "retry_after": retry_after}
            body["global"] = False
            headers = {
                "Content-Type": "application/json",
                "Via": "1.1 google",
                "Retry-After": str(max(1, math.ceil(retry_after))),
                "X-RateLimit-Scope": "user",
                **self._budget_headers(key, ends, limit, 0),
            }
            return web.Response(status=429, body=json.dumps(body).encode(), headers=headers)
        self._route_windows[key] = (ends, used + 1)
        return None

    def _answer_budget(self, key: tuple[str, str], response: web.StreamResponse) -> None:
        """An answered request's headers: where its budget stands now."""
        limit, _ = self._route_budgets[key[0]]
        ends, used = self._route_windows[key]
        response.headers.update(self._budget_headers(key, ends, limit, limit - used))

    def _budget_headers(
        self, key: tuple[str, str], ends: float, limit: int, remaining: int
    ) -> dict[str, str]:
        return {
            "X-RateLimit-Limit": str(limit),
            "X-RateLimit-Remaining": str(max(0, remaining)),
            "X-RateLimit-Reset": f"{ends:.3f}",
            "X-RateLimit-Reset-After": f"{max(0.0, ends - time.time()):.3f}",
            # a bucket names the route, not the resource ("non-inclusive of top-level
            # resources in the path")
            "X-RateLimit-Bucket": self._bucket_hash(key[0]),
        }
