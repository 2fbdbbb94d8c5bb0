"""The documentation's screenshots, taken from real pages over realistic demo memory.

Every run takes them (into the test's temporary directory), so a page that stops rendering
fails here. To refresh docs/img/dashboard-overview.png and docs/img/dashboard-scope.png:

    MEMORYBOT_SCREENSHOTS=1 pytest tests/browser/test_screenshots.py

(the machine needs a Japanese font, e.g. apt-get install fonts-ipafont-gothic, or the
Japanese channel shows boxes in the picture).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import pytest_asyncio
from playwright.async_api import Browser, expect

from bots.dashboard import running_dashboard
from memory_core.bootstrap import build_core
from memory_core.clock import ManualClock
from tests.browser.demo import DEMO_MEMORY, GENERAL, JAPANESE, seed_demo
from tests.browser.support import TOKEN, Served, login
from tests.helpers import make_settings

pytestmark = pytest.mark.asyncio(loop_scope="module")
DOCS_IMG = Path(__file__).resolve().parents[2] / "docs" / "img"
# Read at import: the hermetic_env fixture clears MEMORYBOT_* variables before each test.
WRITE_DOCS = os.environ.get("MEMORYBOT_SCREENSHOTS") == "1"


@pytest_asyncio.fixture(loop_scope="module")
async def demo(clean_redis: str) -> AsyncIterator[Served]:
    settings = make_settings(redis_url=clean_redis, dashboard={"token": TOKEN}, memory=DEMO_MEMORY)
    clock = ManualClock(datetime.now(UTC))
    core = await build_core(settings, clock=clock, background=False)
    try:
        await seed_demo(core, clock)
        await core.metrics.flush()
        async with running_dashboard(core) as server:
            yield Served(core, server, clean_redis)
    finally:
        await core.close()


async def test_screenshots_of_real_pages(demo: Served, browser: Browser, tmp_path: Path) -> None:
    out = DOCS_IMG if WRITE_DOCS else tmp_path
    out.mkdir(parents=True, exist_ok=True)
    context = await browser.new_context(viewport={"width": 1280, "height": 800})
    try:
        page = await context.new_page()
        await login(page, demo.url)
        await expect(page.locator("table.scopes tbody tr")).to_have_count(7)
        await expect(page.locator("table.scopes")).to_contain_text("#開発チーム (東京オフィス)")
        overview = out / "dashboard-overview.png"
        await page.screenshot(path=str(overview), full_page=True)

        await page.goto(f"{demo.url}/scopes/{GENERAL}?open=tier-short")
        await page.evaluate(
            "for (const id of ['tier-overview', 'facts']) document.getElementById(id).open = true"
        )
        await expect(page.locator("#tier-short-text")).not_to_have_value("")
        scope = out / "dashboard-scope.png"
        await page.screenshot(path=str(scope), full_page=True)

        await page.goto(f"{demo.url}/scopes/{JAPANESE}")
        await expect(page.locator("#history")).to_contain_text("スタンドアップ")
        await page.screenshot(path=str(tmp_path / "dashboard-scope-ja.png"), full_page=True)
    finally:
        await context.close()
    for picture in (overview, scope):
        assert picture.stat().st_size > 20_000, picture
