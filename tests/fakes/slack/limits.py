"""Slack's rate limits in the fake, on by default: each method answers as many requests a
minute as its documented tier allows (per method, app and workspace: one workspace's token
here; every request counts), and a channel takes at most one new message a second
(chat.postMessage, a stream started; a post Slack refused is no message and does not
count). A request over a limit gets what Slack answers: HTTP 429, ``ratelimited``, and
``Retry-After`` with the seconds until it would go through; it is not counted.

A test that needs more than a real workspace allows asks for it, as an app Slack granted
more would have it: :meth:`limit_rate` (a method's requests a minute), :meth:`limit_channel_posts`
(messages a second in a channel); or it moves time (``age_rate_windows``) instead of waiting.
"""

from __future__ import annotations

import math
import time
from collections import deque
from typing import Any

from .models import (
    _CHANNEL_POSTING_METHODS,
    _METHOD_TIERS,
    _RATE_WINDOW_S,
    _TIER_PER_MINUTE,
)

_CHANNEL_WINDOW_S = 1.0


class RateLimitsMixin:
    """The method tiers and the channel posting limit (the state lives on the server)."""

    _rates: dict[str, int]
    _rate_windows: dict[str, deque[float]]
    _channel_posts: dict[str, deque[float]]
    _channel_posts_per_second: int

    def limit_rate(self, method: str, *, per_minute: int) -> None:
        """Answer at most ``per_minute`` calls of ``method`` in any minute instead of its
        tier's number (Tier 3: 50, Tier 2: 20...); the next one within the minute gets HTTP
        429 ``ratelimited`` with ``Retry-After``: the seconds until the oldest call of the
        minute leaves it. Refused calls do not count."""
        if per_minute < 1:
            raise ValueError("a rate is at least one request a minute")
        self._rates[method] = per_minute

    def limit_channel_posts(self, *, per_second: int) -> None:
        """Let a channel take ``per_second`` new messages a second instead of one."""
        if per_second < 1:
            raise ValueError("a channel takes at least one message a second")
        self._channel_posts_per_second = per_second

    def method_rate(self, method: str) -> int | None:
        """The requests a minute ``method`` answers (None: no limit the fake knows)."""
        if method in self._rates:
            return self._rates[method]
        tier = _METHOD_TIERS.get(method)
        return _TIER_PER_MINUTE[tier] if tier is not None else None

    def _limits_wait(self, method: str, params: dict[str, Any]) -> int | None:
        """The seconds until this call of ``method`` would go through, or None when it may
        go now (it then counts against its method's tier; a message it posts counts for
        its channel: :meth:`_count_channel_post`)."""
        now = time.monotonic()
        waits: list[float] = []
        per_minute = self.method_rate(method)
        answered = self._rate_windows.setdefault(method, deque())
        if per_minute is not None:
            waits.append(_wait(answered, now, per_minute, _RATE_WINDOW_S))
        channel = params.get("channel")
        if method in _CHANNEL_POSTING_METHODS and isinstance(channel, str) and channel:
            posts = self._channel_posts.setdefault(channel, deque())
            waits.append(_wait(posts, now, self._channel_posts_per_second, _CHANNEL_WINDOW_S))
        wait = max(waits, default=0.0)
        if wait > 0:
            return max(1, math.ceil(wait))
        if per_minute is not None:
            answered.append(now)
        return None

    def _count_channel_post(self, channel: str) -> None:
        """A new message was posted in ``channel`` (a post or a stream started)."""
        self._channel_posts.setdefault(channel, deque()).append(time.monotonic())

    def _age_channel_posts(self, seconds: float) -> None:
        for posts in self._channel_posts.values():
            for index in range(len(posts)):
                posts[index] -= seconds


def _wait(answered: deque[float], now: float, limit: int, window_s: float) -> float:
    """Forget the calls older than the window; the seconds until one more fits (0: now)."""
    while answered and now - answered[0] >= window_s:
        answered.popleft()
    if len(answered) < limit:
        return 0.0
    return window_s - (now - answered[len(answered) - limit])
