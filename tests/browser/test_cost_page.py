"""The cost page in a real browser: after some spend, an admin logs in, opens Cost from the
menu, sees the day's plot and the scope that spent, and follows it to its members."""

from __future__ import annotations

import pytest
from playwright.async_api import Page, expect

from memory_core.llm.usage import SpendTag, charge_to
from tests.browser.support import Served, Watch, login

pytestmark = pytest.mark.asyncio(loop_scope="module")

SCOPE = "discord:100:200"


async def test_the_cost_page_plots_the_days_and_lists_the_spenders(
    served: Served, watched: tuple[Page, Watch]
) -> None:
    page, watch = watched
    ledger = served.core.budget.ledger
    # Spend as the model client's usage hook reports it after a call.
    with charge_to(SpendTag(SCOPE, "42", "Alice <b>")):
        await ledger.record("reply", 1200, 34)
    with charge_to(SpendTag("slack:T1:C1")):
        await ledger.record("compact", 300, 0)
    await login(page, served.url)
    await page.get_by_role("link", name="Cost").click()
    await page.wait_for_url(f"{served.url}/cost")
    plot = page.get_by_role("img", name="Tokens per day, peak 1,534")
    await expect(plot).to_be_visible()
    assert await plot.locator("rect").count() == 14
    scopes = page.locator("[data-section=scopes]")
    await expect(scopes.get_by_role("row", name=f"{SCOPE} 1,234")).to_be_visible()
    await expect(scopes.get_by_role("row", name="slack:T1:C1 300")).to_be_visible()
    await scopes.get_by_role("row", name=SCOPE).get_by_role("link", name="members").click()
    members = page.locator("[data-section=members]")
    await expect(members.get_by_role("row", name="Alice <b> 42 1,234")).to_be_visible()
    watch.assert_clean()
