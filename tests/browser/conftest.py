"""A real Chromium (Debian's, never a downloaded one) driving the dashboard, served by uvicorn
in the test's event loop over the test Redis.

One browser per test module: the browser fixture and every async fixture here run on the
module's event loop (``loop_scope="module"``), and so must the tests
(``pytestmark = pytest.mark.asyncio(loop_scope="module")``). Each test gets a fresh Redis,
core, dashboard and browser context (so no cookie leaks from one test to the next).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from playwright.async_api import Browser, BrowserContext, Dialog, Page, async_playwright

from bots.dashboard import running_dashboard
from memory_core.bootstrap import build_core
from tests.browser.support import TOKEN, Served, Watch
from tests.helpers import make_settings

CHROMIUM = os.environ.get("MEMORYBOT_TEST_CHROMIUM", "/usr/bin/chromium")
HAVE_CHROMIUM = Path(CHROMIUM).is_file()
CHROMIUM_ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def browser() -> AsyncIterator[Browser]:
    if not HAVE_CHROMIUM:
        pytest.skip(f"no Chromium at {CHROMIUM}: apt-get install chromium (.ci/run does)")
    playwright = await async_playwright().start()
    try:
        launched = await playwright.chromium.launch(
            executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True, timeout=60_000
        )
        yield launched
        await launched.close()
    finally:
        await playwright.stop()


@pytest_asyncio.fixture(loop_scope="module")
async def served(clean_redis: str) -> AsyncIterator[Served]:
    settings = make_settings(redis_url=clean_redis, dashboard={"token": TOKEN})
    core = await build_core(settings, background=False)
    try:
        async with running_dashboard(core) as server:
            yield Served(core, server, clean_redis)
    finally:
        await core.close()


@pytest_asyncio.fixture(loop_scope="module")
async def context(browser: Browser) -> AsyncIterator[BrowserContext]:
    ctx = await browser.new_context(
        viewport={"width": 1280, "height": 900}, accept_downloads=True, locale="en-GB"
    )
    ctx.set_default_timeout(15_000)
    try:
        yield ctx
    finally:
        await ctx.close()


@pytest_asyncio.fixture(loop_scope="module")
async def watched(context: BrowserContext) -> AsyncIterator[tuple[Page, Watch]]:
    page = await context.new_page()
    watch = Watch()

    async def on_dialog(dialog: Dialog) -> None:
        watch.dialogs.append(f"{dialog.type}: {dialog.message}")
        await dialog.dismiss()

    page.on("dialog", on_dialog)
    page.on("pageerror", lambda exc: watch.errors.append(str(exc)))
    page.on(
        "console",
        lambda msg: watch.csp.append(msg.text) if "Content Security Policy" in msg.text else None,
    )
    yield page, watch
    await asyncio.sleep(0.05)  # let late events arrive before the last check
    watch.assert_clean()
