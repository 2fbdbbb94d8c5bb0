"""The dashboard over HTTP (aiohttp against uvicorn in the test's loop, real Redis): login
and sessions, auth on every route, CSRF on every change, /metrics for scrapers, paging a
large index, and how ``memorybot dashboard`` starts and refuses to start."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import socket
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import itsdangerous.timed
import pytest
from itsdangerous.encoding import base64_encode, int_to_bytes

from bots.dashboard import running_dashboard, serve_dashboard
from bots.dashboard.auth import COOKIE_NAME, LoginThrottle, SessionSigner
from bots.dashboard.server import DashboardServer
from memory_core.bootstrap import Core
from memory_core.errors import ConfigError
from memory_core.models import Fact, IncomingMessage
from memorybot_testkit.converse import converse
from tests.browser.support import TOKEN, change_routes, routes
from tests.dashboard_session import client, log_in_any, parse_prometheus
from tests.fakes.openai_server import FakeOpenAI
from tests.helpers import CoreFactory, spawn_memorybot

SCOPE = "discord:10:20"
MARKER = "Quokka-5512"  # appears only in the scope's memory


@dataclass
class Site:
    core: Core
    server: DashboardServer

    @property
    def url(self) -> str:
        return self.server.url


@pytest.fixture
async def site(make_core: CoreFactory) -> AsyncIterator[Site]:
    core = await make_core(offline=True, dashboard={"token": TOKEN})
    await core.intake.accept(IncomingMessage(scope=SCOPE, text=f"{MARKER} hi", author="Ann"))
    await core.admin.remember(SCOPE, f"{MARKER} is the codename")
    async with running_dashboard(core) as server:
        yield Site(core, server)


async def test_every_route_needs_a_login(site: Site) -> None:
    every = routes(site.server.app, scope=SCOPE)
    async with client() as http:
        for method, path in every:
            async with http.request(
                method, site.url + path, data={"text": "x"}, allow_redirects=False
            ) as r:
                body = await r.text()
                if path == "/login":
                    assert r.status in (200, 401)  # the form, or a wrong token
                elif method == "GET" and path != "/metrics":
                    assert r.status == 303, path
                    assert r.headers["Location"].startswith("/login?next=%2F"), path
                else:
                    assert r.status == 401, (method, path)
                    assert r.headers["WWW-Authenticate"].startswith("Bearer")
                assert MARKER not in body, path
        async with http.get(f"{site.url}/static/style.css") as r:
            assert r.status == 200  # public, and holds no data
        for path in ("/docs", "/openapi.json", "/redoc"):
            async with http.get(site.url + path, allow_redirects=False) as r:
                assert r.status == 303
        await log_in(http, site.url)
        for path in ("/docs", "/openapi.json", "/redoc"):
            async with http.get(site.url + path) as r:
                assert r.status == 404  # no API pages at all
    assert (await site.core.repo.reads.state(SCOPE)).short == ""  # the POSTs changed nothing


async def test_login_cookie_and_security_headers(site: Site) -> None:
    async with client() as http:
        async with http.post(
            f"{site.url}/login", data={"token": "wrong"}, allow_redirects=False
        ) as r:
            assert r.status == 401
            assert "Set-Cookie" not in r.headers
            assert "That is not the dashboard token." in await r.text()
        async with http.post(
            f"{site.url}/login",
            data={"token": TOKEN, "next": "//evil.example/phish"},
            allow_redirects=False,
        ) as r:
            assert r.status == 303 and r.headers["Location"] == "/"  # no open redirect
            cookie = r.headers["Set-Cookie"]
        value = cookie.split(";")[0].removeprefix(f"{COOKIE_NAME}=")
        assert SessionSigner(TOKEN).verify(value) is not None  # itsdangerous-signed
        attributes = {a.strip().split("=")[0].lower() for a in cookie.split(";")[1:]}
        assert {"httponly", "max-age", "path", "samesite"} <= attributes
        assert "samesite=strict" in cookie.lower()
        assert TOKEN not in cookie
        for path in ("/", f"/scopes/{SCOPE}", "/health", f"/scopes/{SCOPE}/forget-all"):
            async with http.get(site.url + path) as r:
                assert r.status == 200, path
                csp = r.headers["Content-Security-Policy"]
                assert "default-src 'self'" in csp and "script-src 'self'" in csp
                assert "frame-ancestors 'none'" in csp
                assert r.headers["X-Frame-Options"] == "DENY"
                assert r.headers["Cache-Control"] == "no-store"
                assert r.headers["X-Content-Type-Options"] == "nosniff"
                page = await r.text()
            # No inline script and no inline style: the CSP would block them anyway.
            assert not re.search(r"<script(?![^>]*\bsrc=)", page), path
            assert " style=" not in page, path
            assert not re.search(r"<[^>]+\son[a-z]+=", page), path  # no event handlers
            assert TOKEN not in page


async def test_metrics_for_scrapers_count_the_fleet(
    make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    core = await make_core(dashboard={"token": TOKEN})
    for i in range(3):
        await converse(
            core, IncomingMessage(scope="console:m", text=f"hello {i}", author="A", direct=True)
        )
    await core.intake.accept(IncomingMessage(scope="discord:1:2", text="hi", author="B"))
    await core.metrics.flush()
    async with running_dashboard(core) as server, client() as http:
        async with http.get(f"{server.url}/metrics") as r:
            assert r.status == 401
        wrong = {"Authorization": f"Bearer {TOKEN}x"}
        async with http.get(f"{server.url}/metrics", headers=wrong) as r:
            assert r.status == 401
        bearer = {"Authorization": f"Bearer {TOKEN}"}
        async with http.get(f"{server.url}/metrics", headers=bearer) as r:
            assert r.status == 200
            assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            text = await r.text()
        # The bearer token opens /metrics only, not the pages.
        async with http.get(f"{server.url}/", headers=bearer, allow_redirects=False) as r:
            assert r.status == 303
        m = parse_prometheus(text)
        assert m["memorybot_messages_total", ()] == 7  # 3 questions, 3 answers, 1 message
        assert m["memorybot_replies_total", (("kind", "llm"),)] == 3
        assert m["memorybot_llm_calls_total", (("purpose", "reply"),)] == 3
        assert m["memorybot_llm_failures_total", (("purpose", "reply"),)] == 0
        prompt = m["memorybot_llm_tokens_total", (("kind", "prompt"), ("purpose", "reply"))]
        assert prompt > 0
        assert m["memorybot_llm_tokens_total", (("kind", "completion"), ("purpose", "reply"))] > 0
        assert ("memorybot_summaries_total", (("by", "fallback"),)) in m
        assert m["memorybot_scopes", ()] == 2
        assert m["memorybot_redis_used_memory_bytes", ()] > 100_000
        assert m["memorybot_window_minutes", ()] == 60
        assert "# HELP memorybot_messages_total Messages stored in the last 60 minutes" in text
        assert "# TYPE memorybot_messages_total gauge" in text
        # Prometheus asks for OpenMetrics first: the same figures, in that format.
        accept = "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"
        async with http.get(f"{server.url}/metrics", headers={**bearer, "Accept": accept}) as r:
            assert r.headers["Content-Type"].startswith("application/openmetrics-text")
            open_metrics = await r.text()
        assert open_metrics.endswith("# EOF\n")
        again = parse_prometheus(open_metrics.removesuffix("# EOF\n"))
        assert again.keys() == m.keys()  # (Redis's memory moves between two scrapes)
        assert again["memorybot_messages_total", ()] == 7

        # A logged-in browser may read it too, and choose the window.
        await log_in_any(http, server.url)
        async with http.get(f"{server.url}/metrics?minutes=5") as r:
            assert r.status == 200
            assert "Messages stored in the last 5 minutes" in await r.text()
        # The health page shows the same figures.
        async with http.get(f"{server.url}/health") as r:
            page = await r.text()
        assert re.search(r'data-stat="messages"><dt>Messages</dt><dd>7</dd>', page)
        assert f'<td class="num">{prompt:,.0f}</td>' in page  # reply prompt tokens


async def test_every_change_needs_the_csrf_token(site: Site) -> None:
    before = await site.core.admin.export(SCOPE)
    async with client() as http, client() as other:
        token = await log_in(http, site.url)
        other_token = await log_in(other, site.url)
        assert other_token != token  # one token per session
        form = {"text": "changed", "tier": "short", "confirm": SCOPE, "paused": "1"}
        for path in change_routes(site.server.app, scope=SCOPE):
            tries = [
                (form, {}),
                ({**form, "csrf": ""}, {}),
                ({**form, "csrf": token[:-2] + "xx"}, {}),
                ({**form, "csrf": other_token}, {}),  # another session's token
                ({**form, "csrf": token}, {"Origin": "http://evil.example"}),
            ]
            for data, headers in tries:
                async with http.post(
                    site.url + path, data=data, headers=headers, allow_redirects=False
                ) as r:
                    assert r.status == 403, (path, data.get("csrf"), headers)
        after = await site.core.admin.export(SCOPE)
        drop = {"exported_at"}
        assert {k: v for k, v in after.items() if k not in drop} == {
            k: v for k, v in before.items() if k not in drop
        }
        # With the token, from the same origin, the change goes through.
        async with http.post(
            f"{site.url}/scopes/{SCOPE}/tier",
            data={"csrf": token, "tier": "short", "text": "fixed by hand"},
            headers={"Origin": site.url},
            allow_redirects=False,
        ) as r:
            assert r.status == 303
        assert (await site.core.repo.reads.state(SCOPE)).short == "fixed by hand"
        # Bad input is explained, not a crash; a missing scope is a 404, never created.
        async with http.post(
            f"{site.url}/scopes/{SCOPE}/tier", data={"csrf": token, "tier": "nope", "text": "x"}
        ) as r:
            assert r.status == 400 and "unknown tier" in await r.text()
        async with http.post(
            f"{site.url}/scopes/discord:10:99/forget", data={"csrf": token, "text": "hi"}
        ) as r:
            assert r.status == 404
        assert not await site.core.repo.reads.scope_exists("discord:10:99")
        async with http.get(f"{site.url}/scopes/not a scope") as r:
            assert r.status == 400 and "invalid scope" in await r.text()


async def test_sessions_expire_and_forgeries_fail(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    signer = SessionSigner(TOKEN)
    cookie, session = signer.issue()
    assert signer.verify(cookie) == session
    assert session.expires - signer.ttl_s <= time.time() < session.expires
    assert signer.verify(cookie, now=session.expires) is None  # expired
    payload, stamp, signature = cookie.split(".")
    later = base64_encode(int_to_bytes(int(time.time()) + 9999)).decode()
    assert signer.verify(f"{payload}.{later}.{signature}") is None  # its time moved
    other = SessionSigner(TOKEN).issue()[0].split(".")[0]
    assert signer.verify(f"{other}.{stamp}.{signature}") is None  # another id, same signature
    assert SessionSigner(TOKEN + "2").verify(cookie) is None  # a new token ends sessions
    assert signer.csrf_matches(session, session.csrf)
    assert not signer.csrf_matches(session, signer.issue()[1].csrf)
    assert not signer.csrf_matches(session, "")

    class Earlier:  # the clock itsdangerous stamps cookies with, set back past the expiry
        @staticmethod
        def time() -> float:
            return time.time() - signer.ttl_s - 5

    with monkeypatch.context() as patched:
        patched.setattr(itsdangerous.timed, "time", Earlier)
        old, _ = signer.issue()
    assert signer.verify(old) is None
    async with client() as http:
        headers = {"Cookie": f"{COOKIE_NAME}={old}"}
        async with http.get(f"{site.url}/", headers=headers, allow_redirects=False) as r:
            assert r.status == 303  # to the login form
        fresh = {"Cookie": f"{COOKIE_NAME}={cookie}"}  # signed with the same token: valid
        async with http.get(f"{site.url}/", headers=fresh) as r:
            assert r.status == 200 and SCOPE in await r.text()


def test_failed_logins_slow_down() -> None:
    throttle = LoginThrottle(free_failures=3, window_s=600, max_delay_s=5)
    delays = []
    for i in range(10):
        delays.append(throttle.delay_for("1.2.3.4", now=i))
        throttle.failed("1.2.3.4", now=i)
    assert delays == [0, 0, 0, 0.25, 0.5, 1, 2, 4, 5, 5]
    assert throttle.delay_for("5.6.7.8", now=10) == 0  # per address
    assert throttle.delay_for("1.2.3.4", now=605) == 1  # the first five aged out
    throttle.succeeded("1.2.3.4")
    assert throttle.delay_for("1.2.3.4", now=11) == 0


async def test_overview_pages_through_a_large_index(site: Site) -> None:
    core = site.core
    # Seed the index directly (fast): 12,000 scopes, as the bot would leave them.
    redis: Any = core.store.client
    entries = {f"slack:T7:C{i:05d}": 1_700_000_000_000 + i for i in range(12_000)}
    pipe = redis.pipeline(transaction=False)
    for scope, ms in entries.items():
        pipe.zadd(core.store.keys.scopes_index_of(scope), {scope: ms})
    await pipe.execute()
    async with client() as http:
        await log_in(http, site.url)
        for query, expect in (
            ("", ["12,001 scopes", "Page 1 of 241"]),
            ("?page=241", ["Page 241 of 241", "slack:T7:C00000"]),
            ("?q=C1199", ["10 matching of 12,001", "slack:T7:C11999"]),
            ("?platform=discord", ["1 matching of 12,001", SCOPE]),
            ("?sort=messages", ["Sorted by messages among the 2,000 most recently active"]),
            ("?q=zzz", ["No scope matches."]),
        ):
            started = time.perf_counter()
            async with http.get(f"{site.url}/{query}") as r:
                page = await r.text()
                assert r.status == 200
            assert time.perf_counter() - started < 5, query
            for text in expect:
                assert text in page, (query, text)
            assert page.count('class="scope-link"') <= 50


async def test_serve_dashboard_runs_until_cancelled(make_core: CoreFactory) -> None:
    with pytest.raises(ConfigError, match="DASHBOARD_TOKEN"):
        await serve_dashboard(await make_core(offline=True))
    port = free_port()
    core = await make_core(offline=True, dashboard={"token": TOKEN, "port": port})
    task = asyncio.create_task(serve_dashboard(core))
    async with client() as http:
        for _ in range(200):
            try:
                async with http.get(f"http://127.0.0.1:{port}/login") as r:
                    assert r.status == 200
                    break
            except aiohttp.ClientConnectionError:
                await asyncio.sleep(0.02)
        else:
            pytest.fail("the dashboard did not start")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    # A port in use is a clear ConfigError, not a crash.
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        busy = await make_core(offline=True, dashboard={"token": TOKEN, "port": port})
        with pytest.raises(ConfigError, match="cannot listen"):
            await serve_dashboard(busy)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def memorybot(tmp: Path, *args: str, **env: str) -> asyncio.subprocess.Process:
    return await spawn_memorybot(tmp, *args, env=env)


async def test_cli_refuses_to_start_without_a_token(tmp_path: Path, clean_redis: str) -> None:
    proc = await memorybot(tmp_path, "dashboard", REDIS_URL=clean_redis)
    _, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert proc.returncode == 2, err.decode()
    assert "set DASHBOARD_TOKEN" in err.decode()

    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = str(taken.getsockname()[1])
        proc = await memorybot(
            tmp_path, "dashboard", "--port", port, REDIS_URL=clean_redis, DASHBOARD_TOKEN=TOKEN
        )
        _, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert proc.returncode == 2 and "cannot listen" in err.decode()


async def test_run_dashboard_refuses_to_start_without_a_token(
    tmp_path: Path, clean_redis: str
) -> None:
    proc = await memorybot(tmp_path, "run", "--dashboard", REDIS_URL=clean_redis)
    _, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert proc.returncode == 2, err.decode()
    assert "DASHBOARD_TOKEN" in err.decode() and "Traceback" not in err.decode()


@pytest.mark.parametrize("command", ["dashboard", "run --dashboard"])
async def test_cli_serves_until_sigterm(tmp_path: Path, clean_redis: str, command: str) -> None:
    """``memorybot dashboard`` on its own, and inside ``memorybot run --dashboard``."""
    port = free_port()
    proc = await memorybot(
        tmp_path,
        *command.split(),
        REDIS_URL=clean_redis,
        DASHBOARD_TOKEN=TOKEN,
        MEMORYBOT_DASHBOARD__PORT=str(port),
    )
    try:
        async with client() as http:
            for _ in range(600):
                try:
                    async with http.get(f"http://127.0.0.1:{port}/") as r:
                        assert r.status == 200 and "Log in" in await r.text()
                        break
                except aiohttp.ClientConnectionError:
                    assert proc.returncode is None
                    await asyncio.sleep(0.05)
            else:
                pytest.fail("memorybot dashboard did not start")
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = await asyncio.wait_for(proc.communicate(), timeout=30)
    assert proc.returncode == 0, err.decode()
    assert f"Dashboard: http://127.0.0.1:{port}/" in err.decode()
    assert TOKEN not in err.decode() + out.decode()


async def test_facts_about_people_are_linked_and_editable(site: Site) -> None:
    core = site.core
    person = "discord:10:user:ann"
    await core.intake.accept(
        IncomingMessage(scope=SCOPE, text="I prefer tea", author="Ann", author_id="ann")
    )
    await core.repo.writes.put_fact(person, Fact(id="", kind="preference", text="Ann prefers tea"))
    async with client() as http:
        token = await log_in(http, site.url)
        async with http.get(f"{site.url}/scopes/{SCOPE}") as r:
            assert f'<a href="/scopes/{person}">Ann</a> (1)' in await r.text()
        async with http.get(f"{site.url}/scopes/{person}") as r:
            assert r.status == 200 and "Ann prefers tea" in await r.text()
        async with http.post(
            f"{site.url}/scopes/{person}/facts/f1/delete", data={"csrf": token}
        ) as r:
            assert r.status == 200 and "Deleted the fact." in await r.text()
    assert await core.repo.reads.facts(person) == []


async def test_the_tree_shows_servers_channels_and_threads_with_their_counts(site: Site) -> None:
    core = site.core
    general, thread = "discord:10:30", "discord:10:30:31"
    for scope, name in ((general, "#general (Lab)"), (thread, "#side-topic (Lab)")):
        for n in range(2 if scope == general else 3):
            await core.intake.accept(
                IncomingMessage(scope=scope, text=f"line {n}", author="Ann", place_name=name)
            )
    await core.admin.remember(thread, "a fact in the thread")
    await core.intake.accept(IncomingMessage(scope="discord:77:1", text="x", author="Eve"))
    async with client() as http:
        await log_in(http, site.url)
        async with http.get(f"{site.url}/tree") as r:
            page = await r.text()
        assert r.status == 200
        assert '<a href="/tree/discord%3A10">Lab</a>' in page
        assert "discord:77" in page
        async with http.get(f"{site.url}/tree/discord:10") as r:
            page = await r.text()
        assert r.status == 200
        channel = page.split(f'data-scope="{general}"', 1)[1]
        assert "#general (Lab)" in channel.split("<ul>", 1)[0]
        assert "2 messages, 0 facts, 1 thread<" in channel
        nested = channel.split("<ul>", 1)[1]
        assert f'data-scope="{thread}"' in nested
        assert "3 messages, 1 facts" in nested
        async with http.get(f"{site.url}/scopes/{general}") as r:
            page = await r.text()
        assert "Threads (1)" in page and f'href="/scopes/{thread}"' in page
        async with http.get(f"{site.url}/scopes/{thread}") as r:
            assert f'thread of <a href="/scopes/{general}">' in await r.text()
        async with http.get(f"{site.url}/tree/nonsense:1") as r:
            assert r.status == 404


async def test_metrics_and_health_show_the_embedding_workers_lag(make_core: CoreFactory) -> None:
    """A running bot with the local model has an embedding worker: /metrics and the health
    page say how many workers report, how many messages wait and how far behind they are;
    a status that stopped coming (a worker that died) is dropped from the figures."""
    core = await make_core(
        offline=True,
        background=True,
        dashboard={"token": TOKEN},
        memory={"recall_embedder": "local"},
    )
    assert core.recall is not None and core.recall.worker is not None
    for i in range(20):
        await core.intake.accept(IncomingMessage(scope="console:e", text=f"note {i}", author="A"))
    await core.drain()
    # Another host's worker, behind, and one that stopped reporting a minute ago.
    now = time.time()
    behind = {"backlog": 42, "lag_s": 3.5, "embedded": 7, "at": now}
    gone = {"backlog": 900, "lag_s": 99.0, "embedded": 1, "at": now - 60}
    redis: Any = core.store.client
    await redis.hset(core.store.keys.embedders, "other:1", json.dumps(behind))
    await redis.hset(core.store.keys.embedders, "dead:2", json.dumps(gone))
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    async with running_dashboard(core) as server, client() as http:
        async with http.get(f"{server.url}/metrics", headers=bearer) as r:
            m = parse_prometheus(await r.text())
        assert m["memorybot_embedding_workers", ()] == 2
        assert m["memorybot_embedding_backlog_messages", ()] == 42  # ours: none left
        assert m["memorybot_embedding_lag_seconds", ()] == 3.5
        await log_in_any(http, server.url)
        async with http.get(f"{server.url}/health") as r:
            page = await r.text()
    assert re.search(
        r'data-stat="embedding"><dt>Embedding lag</dt><dd>3.5 s <small>42 waiting', page
    )
    assert await redis.hget(core.store.keys.embedders, "dead:2") is None


async def log_in(http: aiohttp.ClientSession, url: str) -> str:
    """Log in; returns the CSRF token of the new session, read from a page's form."""
    async with http.post(
        f"{url}/login", data={"token": TOKEN, "next": "/"}, allow_redirects=False
    ) as r:
        assert r.status == 303
    async with http.get(f"{url}/scopes/{SCOPE}") as r:
        assert r.status == 200
        page = await r.text()
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found
    return found.group(1)


async def test_metrics_and_health_show_the_recall_indexes_memory(make_core: CoreFactory) -> None:
    """Each bot process reports what its recall indexes hold (bytes, scopes cached, its
    limit) and counts their builds and evictions: /metrics and the health page add them
    up; a process that stopped reporting is dropped from the figures."""
    core = await make_core(offline=True, dashboard={"token": TOKEN}, memory={"recall_cache_mb": 1})
    recall = core.recall
    assert recall is not None
    redis: Any = core.store.client
    scopes = [f"console:r{n}" for n in range(3)]
    for n, scope in enumerate(scopes):
        pipe = redis.pipeline(transaction=False)
        for i in range(5000):  # ~0.5 MB of index each: a 1 MB cache holds one or two
            text = f"scope{n} says word{i % 500} and word{i % 77}"
            pipe.xadd(core.store.keys.scope(scope).log, {"r": "user", "a": "A", "t": text})
        await pipe.execute()
        assert await recall.search(scope, f"scope{n} word7")
    stats = recall.cache_stats
    assert stats.builds == 3 and stats.evictions >= 1 and 0 < stats.bytes <= 2**20
    await core.metrics.flush()
    gone = {"bytes": 5 * 2**30, "scopes": 900, "limit_bytes": 2**30, "at": time.time() - 120}
    await redis.hset(core.store.keys.recall_caches, "stopped", json.dumps(gone))
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    async with running_dashboard(core) as server, client() as http:
        async with http.get(f"{server.url}/metrics", headers=bearer) as r:
            m = parse_prometheus(await r.text())
        assert m["memorybot_recall_index_processes", ()] >= 1
        assert m["memorybot_recall_index_bytes", ()] >= stats.bytes
        assert m["memorybot_recall_index_bytes", ()] < 2**30  # not the stopped process's
        assert m["memorybot_recall_index_scopes", ()] >= stats.scopes
        assert m["memorybot_recall_index_limit_bytes", ()] >= 2**20
        assert m["memorybot_recall_index_evictions_total", ()] == stats.evictions
        assert m["memorybot_recall_index_builds_total", ()] == 3
        assert m["memorybot_recall_index_build_seconds_total", ()] > 0
        await log_in_any(http, server.url)
        async with http.get(f"{server.url}/health") as r:
            page = await r.text()
    assert re.search(r'data-stat="recall-memory"><dt>Recall index memory</dt><dd>[\d.]+ KiB', page)
    evictions = rf"{stats.evictions} evictions?"
    assert re.search(rf"Recall index builds</dt><dd>3 <small>{evictions} · [\d.]+ s each", page)
    assert await redis.hget(core.store.keys.recall_caches, "stopped") is None
