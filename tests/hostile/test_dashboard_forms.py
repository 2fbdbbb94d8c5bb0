"""The dashboard's forms and query strings are typed by a logged-in admin, or sent by whatever
holds a session: whatever they carry, the answer is a page that says what to fix (400), a
redirect after a change (303), or not found (404), never a server error, and nothing outside
the scope in the URL changes."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import aiohttp
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from yarl import URL

from bots.dashboard import running_dashboard
from bots.dashboard.server import DashboardServer
from memory_core.bootstrap import Core
from memory_core.models import IncomingMessage
from tests.browser.support import TOKEN, change_routes
from tests.helpers import CoreFactory
from tests.hostile.strategies import NASTY

SCOPE = "discord:10:20"
OTHER = "discord:10:21"  # never in a URL here: it must come out of every test unchanged
OTHER_MARKER = "Wombat-7781"
ANSWERS = {200, 303, 307, 400, 404}  # 307: Starlette adds or drops a trailing slash
FIELDS = ("text", "tier", "mode", "timezone", "language", "paused", "confirm", "next", "q")
# What a browser can send: any text but lone surrogates (a form cannot encode them).
form_text = st.one_of(
    st.sampled_from([t for t in NASTY if not re.search("[\ud800-\udfff]", t)]),
    st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=300),
    st.sampled_from(["short", "mid", "long", "overview", "all", "off", "Asia/Tokyo", "ja", "1"]),
)
path_part = st.one_of(
    st.sampled_from(["f1", "f99", "p1", "", "..", "%2e%2e", "f1/../f2", "{x}", "mb:{a}"]),
    st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=40),
)


@dataclass
class Site:
    core: Core
    server: DashboardServer
    http: aiohttp.ClientSession
    csrf: str
    other_before: str

    async def other_now(self) -> str:
        return json.dumps(await self.core.admin.export(OTHER), sort_keys=True)


@pytest.fixture
async def form_site(make_core: CoreFactory) -> AsyncIterator[Site]:
    core = await make_core(offline=True, dashboard={"token": TOKEN})
    for scope, text in ((SCOPE, "Quokka hi"), (OTHER, f"{OTHER_MARKER} is the codename")):
        await core.intake.accept(IncomingMessage(scope=scope, text=text, author="Ann"))
        await core.admin.remember(scope, f"note about {text}")
    other_before = json.dumps(await core.admin.export(OTHER), sort_keys=True)
    async with (
        running_dashboard(core) as server,
        aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as http,
    ):
        async with http.post(
            f"{server.url}/login", data={"token": TOKEN, "next": "/"}, allow_redirects=False
        ) as r:
            assert r.status == 303
        async with http.get(f"{server.url}/scopes/{SCOPE}") as r:
            found = re.search(r'name="csrf" value="([^"]+)"', await r.text())
        assert found
        yield Site(core, server, http, found.group(1), other_before)


def scope_changes(form_site: Site, *, scope: str = SCOPE, fact_id: str = "f1") -> list[str]:
    """Every POST that changes a scope (logging out is tested on its own)."""
    every = change_routes(form_site.server.app, scope=scope, fact_id=fact_id)
    return [path for path in every if path.startswith("/scopes/")]


async def check(form_site: Site, response: aiohttp.ClientResponse, caplog: Any) -> None:
    """An answer a person can act on, no error logged, the other scope untouched."""
    body = await response.text()
    assert response.status in ANSWERS, (response.status, body[:500])
    if response.status in (400, 404):
        # The error page: a title and a sentence, escaped; never a traceback or raw JSON.
        assert 'role="alert"' in body, body[:500]
        assert "Traceback" not in body and '"detail"' not in body, body[:500]
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == [], [r.getMessage() for r in errors]
    assert await form_site.other_now() == form_site.other_before


@settings(
    max_examples=250,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    route=st.integers(min_value=0, max_value=100),
    fact_id=path_part,
    fields=st.dictionaries(st.sampled_from(FIELDS), form_text, max_size=4),
)
async def test_any_form_on_any_change_route(
    form_site: Site,
    caplog: pytest.LogCaptureFixture,
    route: int,
    fact_id: str,
    fields: dict[str, str],
) -> None:
    """Every POST the dashboard has, with random fields and a random fact id in the path."""
    caplog.clear()
    paths = scope_changes(form_site, fact_id=quote(fact_id, safe=""))
    path = paths[route % len(paths)]
    async with form_site.http.post(
        f"{form_site.server.url}{path}",
        data={**fields, "csrf": form_site.csrf},
        allow_redirects=False,
    ) as r:
        await check(form_site, r, caplog)


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    page=st.sampled_from(["/", "/health", f"/scopes/{SCOPE}", f"/scopes/{SCOPE}/prompt"]),
    query=st.dictionaries(
        st.sampled_from(["q", "platform", "sort", "page", "minutes", "open", "done", "text"]),
        form_text,
        max_size=4,
    ),
)
async def test_any_query_on_any_page(
    form_site: Site, caplog: pytest.LogCaptureFixture, page: str, query: dict[str, str]
) -> None:
    """Filters, sort keys, page numbers and flash codes as anyone could type them in the URL."""
    caplog.clear()
    async with form_site.http.get(f"{form_site.server.url}{page}", params=query) as r:
        await check(form_site, r, caplog)


SCOPE_PATHS = [
    "discord:10:99",
    "nope",
    "..",
    "%2e%2e%2f",
    "mb:{discord:10:20}:state",
    "%00",
    "a" * 3000,
]


@pytest.mark.parametrize("scope", SCOPE_PATHS)
async def test_odd_scopes_in_the_url_are_not_found(
    form_site: Site, caplog: pytest.LogCaptureFixture, scope: str
) -> None:
    """A scope that does not exist, or is not a scope at all: 400 or 404, for every route."""
    for path in scope_changes(form_site, scope=quote(scope, safe="%")):
        async with form_site.http.post(
            URL(f"{form_site.server.url}{path}", encoded=True),  # as typed: no ".." resolved
            data={"text": "x", "csrf": form_site.csrf},
            allow_redirects=False,
        ) as r:
            assert r.status in (400, 404), (path, r.status)
            await check(form_site, r, caplog)
    page = URL(f"{form_site.server.url}/scopes/{quote(scope, safe='%')}", encoded=True)
    async with form_site.http.get(page, allow_redirects=False) as r:
        # 307: "%2e%2e%2f" decodes to "../", and Starlette drops the trailing slash first.
        assert r.status in (307, 400, 404), r.status
        await check(form_site, r, caplog)


RAW_BODIES: dict[str, tuple[str, bytes]] = {
    "not-utf8": ("application/x-www-form-urlencoded", b"text=%ff%fe%fd&csrf="),
    "raw-bytes": ("application/x-www-form-urlencoded", b"text=\xff\xfe&csrf="),
    "json": ("application/json", b'{"text": "x"}'),
    "multipart-garbage": ("multipart/form-data; boundary=zz", b"--zz\r\nnonsense\r\n--zz--"),
    "no-type": ("", b"text=x&csrf="),
    "repeated-fields": (
        "application/x-www-form-urlencoded",
        b"text=a&text=b&tier=short&tier=mid&csrf=",
    ),
    "nested-keys": ("application/x-www-form-urlencoded", b"text[a][b]=1&csrf="),
}


@pytest.mark.parametrize(("content_type", "body"), RAW_BODIES.values(), ids=RAW_BODIES.keys())
async def test_raw_bodies_a_browser_would_not_send(
    form_site: Site, caplog: pytest.LogCaptureFixture, content_type: str, body: bytes
) -> None:
    """Bodies no form makes (broken encodings, JSON, bad multipart) on every change route:
    answered, with the CSRF token where it can be read, and nothing else changes."""
    if body.endswith(b"csrf="):
        body += form_site.csrf.encode()
    headers = {"Content-Type": content_type} if content_type else {}
    for path in scope_changes(form_site):
        async with form_site.http.post(
            f"{form_site.server.url}{path}", data=body, headers=headers, allow_redirects=False
        ) as r:
            assert r.status in ANSWERS | {403}, (path, r.status)
            if r.status != 403:  # 403: no CSRF token could be read from the body
                await check(form_site, r, caplog)
