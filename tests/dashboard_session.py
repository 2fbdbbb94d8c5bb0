"""Talking to the dashboard as a browser would: a session that keeps cookies, logging in (and the
CSRF token), reading the Prometheus metrics.
"""

from __future__ import annotations

import re

import aiohttp

from tests.browser.support import TOKEN


def client() -> aiohttp.ClientSession:
    # unsafe=True: accept cookies from an IP address (127.0.0.1), as browsers do.
    return aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True))


async def log_in_any(http: aiohttp.ClientSession, url: str) -> None:
    async with http.post(f"{url}/login", data={"token": TOKEN}, allow_redirects=False) as r:
        assert r.status == 303


def parse_prometheus(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    samples: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = re.fullmatch(r"([a-z_]+)(?:\{(.*)\})? (\S+)", line)
        assert match, line
        labels = tuple(sorted(re.findall(r'(\w+)="([^"]*)"', match.group(2) or "")))
        samples[match.group(1), labels] = float(match.group(3))
    return samples
