"""An admin fixes memory in a real browser, and the bot's next prompt shows the fix."""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
from pathlib import Path

import pytest
from playwright.async_api import Page, expect

from memory_core.bootstrap import Core
from memory_core.models import IncomingMessage
from tests.browser.support import Served, Watch, login
from tests.helpers import forgotten, scope_values

ROOT = str(Path(__file__).resolve().parents[2])

pytestmark = pytest.mark.asyncio(loop_scope="module")

GENERAL = "discord:100:200"
RANDOM = "discord:100:201"
OPS = "slack:T1:C1"


async def seed(core: Core) -> None:
    chats = {
        GENERAL: (
            "#general (Test Guild)",
            [
                ("Alice", "Morning! The Pinecrest offsite is booked for October."),
                ("Bob", "Great, I'll bring the projector to Pinecrest."),
                ("Carol", "The release train leaves on Thursday."),
                ("Alice", "Standup stays at 10:00."),
            ],
        ),
        RANDOM: ("#random (Test Guild)", [("Dave", "Anyone up for lunch?")]),
        OPS: ("#ops", [("Erin", "Disk usage on db-2 is at 71%.")]),
    }
    for scope, (name, lines) in chats.items():
        for author, text in lines:
            await core.intake.accept(
                IncomingMessage(
                    scope=scope, text=text, author=author, author_id=author, place_name=name
                )
            )
    await core.admin.remember(GENERAL, "Deploys happen on Tuesdays", by="Alice")
    await core.admin.remember(GENERAL, "Lunch budget is 15 EUR", by="Bob")
    await core.admin.remember(GENERAL, "The Pinecrest venue has no wifi", by="Carol")


async def open_section(page: Page, summary: str) -> None:
    section = page.locator("details.section", has=page.locator("summary", has_text=summary))
    if await section.get_attribute("open") is None:
        await section.locator("summary").click()
    await expect(section).to_have_attribute("open", "")


async def ask_dry_run(served: Served, scope: str, text: str, tmp: Path) -> dict[str, object]:
    """``memorybot ask --dry-run --json`` as a user runs it: another process, same Redis."""
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(tmp),
        "XDG_DATA_HOME": str(tmp / "data"),
        "PYTHONIOENCODING": "utf-8",
        "PYTHONPATH": ROOT,
        "REDIS_URL": served.redis_url,
    }
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bots.cli.main",
        "ask",
        "--scope",
        scope,
        "--dry-run",
        "--json",
        text,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=tmp,
        env=env,
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout=90)
    assert proc.returncode == 0, err.decode()
    result: dict[str, object] = json.loads(out.decode())
    return result


async def test_find_a_scope_edit_short_and_see_it_in_the_prompt(
    served: Served, watched: tuple[Page, Watch], tmp_path: Path
) -> None:
    page, watch = watched
    await seed(served.core)
    await login(page, served.url)
    rows = page.locator("table.scopes tbody tr")
    await expect(rows).to_have_count(3)

    await page.fill("input[name=q]", "general")
    await page.get_by_role("button", name="Apply").click()
    await expect(rows).to_have_count(1)
    await expect(page.get_by_text("1 matching of 3 scopes")).to_be_visible()
    await page.get_by_role("link", name="#general (Test Guild)").click()
    await expect(page.locator("h1")).to_have_text("#general (Test Guild)")
    await expect(page.locator("#history")).to_contain_text("The release train leaves on Thursday.")

    new_short = "The team agreed to ship the Kestrel release on 2025-09-01."
    await open_section(page, "Short (today)")
    await page.fill("#tier-short-text", new_short)
    await page.get_by_role("button", name="Save short").click()
    await expect(page.get_by_role("status")).to_have_text("Saved the Short (today) tier.")
    await expect(page.locator("#tier-short-text")).to_have_value(new_short)
    assert (await served.core.repo.reads.state(GENERAL)).short == new_short

    # The prompt the next reply gets, in this process and from the real CLI.
    prompt = await served.core.replier.build_prompt(
        IncomingMessage(scope=GENERAL, text="What did we agree?", author="Alice")
    )
    assert new_short in prompt.messages[0]["content"]
    dry = await ask_dry_run(served, GENERAL, "What did we agree?", tmp_path)
    messages = dry["messages"]
    assert isinstance(messages, list)
    assert new_short in messages[0]["content"]

    # And on the dashboard's own preview of that prompt.
    await page.get_by_role("link", name="Prompt preview").click()
    await page.fill("input[name=text]", "What did we agree?")
    await page.get_by_role("button", name="Preview").click()
    await expect(page.locator("pre.prompt")).to_contain_text(new_short)
    watch.assert_clean()


async def test_edit_and_delete_facts(served: Served, watched: tuple[Page, Watch]) -> None:
    page, _ = watched
    await seed(served.core)
    await login(page, served.url)
    await page.goto(f"{served.url}/scopes/{GENERAL}")
    await open_section(page, "Facts (3)")

    await page.fill("#fact-f1-text", "Deploys happen on Wednesdays")
    await page.get_by_role("button", name="Save fact f1").click()
    await expect(page.get_by_role("status")).to_have_text("Saved the fact.")
    facts = {f.id: f for f in await served.core.repo.reads.facts(GENERAL)}
    assert facts["f1"].text == "Deploys happen on Wednesdays"
    assert facts["f1"].history == ["Deploys happen on Tuesdays"]

    await page.get_by_role("button", name="Delete fact f2").click()
    await expect(page.get_by_role("status")).to_have_text("Deleted the fact.")
    await expect(page.locator("#fact-f2")).to_have_count(0)
    await expect(page.locator("#facts > summary")).to_have_text("Facts (2)")
    assert [f.id for f in await served.core.repo.reads.facts(GENERAL)] == ["f1", "f3"]
    prompt = await served.core.replier.build_prompt(
        IncomingMessage(scope=GENERAL, text="lunch?", author="Bob")
    )
    assert "Lunch budget" not in prompt.messages[0]["content"]
    assert "Deploys happen on Wednesdays" in prompt.messages[0]["content"]


async def test_forget_text_is_gone_from_the_page_and_from_redis(
    served: Served, watched: tuple[Page, Watch]
) -> None:
    page, _ = watched
    await seed(served.core)
    await login(page, served.url)
    await page.goto(f"{served.url}/scopes/{GENERAL}")
    await expect(page.locator("#history")).to_contain_text("Pinecrest")

    await open_section(page, "Forget")
    await page.fill("#forget input[name=text]", "Pinecrest")
    await page.get_by_role("button", name="Forget text").click()
    await expect(page.get_by_role("status")).to_have_text(
        "Forgot it: 2 messages, 1 fact and 0 summaries changed."
    )
    assert "Pinecrest" not in await page.content()
    await expect(page.locator("#history")).to_contain_text("The release train leaves")

    entries = await served.core.repo.reads.all_entries(GENERAL)
    assert len(entries) == 2 and all("Pinecrest" not in e.text for e in entries)
    assert all("Pinecrest" not in f.text for f in await served.core.repo.reads.facts(GENERAL))
    assert not [v for v in await scope_values(served.core, GENERAL) if "Pinecrest" in v]


async def test_forget_all_asks_for_confirmation(
    served: Served, watched: tuple[Page, Watch]
) -> None:
    page, _ = watched
    await seed(served.core)
    await login(page, served.url)
    await page.goto(f"{served.url}/scopes/{GENERAL}")
    await page.get_by_role("link", name="Forget all…").first.click()
    await expect(page.locator("h1")).to_contain_text("Forget everything in #general")

    await page.fill("#confirm", "discord:100:999")
    await page.get_by_role("button", name="Forget everything").click()
    await expect(page.get_by_role("alert")).to_contain_text("nothing was deleted")
    assert await served.core.repo.reads.scope_exists(GENERAL)

    await page.fill("#confirm", GENERAL)
    await page.get_by_role("button", name="Forget everything").click()
    await page.wait_for_url(f"{served.url}/?done=forgot-all")
    await expect(page.get_by_role("status")).to_have_text("Forgot everything in that scope.")
    await expect(page.locator("table.scopes tbody tr")).to_have_count(2)
    assert not await served.core.repo.reads.scope_exists(GENERAL)
    assert await forgotten(served.core, GENERAL)
    assert await served.core.repo.reads.scope_exists(RANDOM)  # only that scope went


async def test_settings_pause_note_and_export(served: Served, watched: tuple[Page, Watch]) -> None:
    page, _ = watched
    await seed(served.core)
    await login(page, served.url)
    await page.goto(f"{served.url}/scopes/{OPS}")

    await open_section(page, "Settings")
    await page.select_option("#settings select[name=mode]", "all")
    await page.fill("#settings input[name=timezone]", "Asia/Tokyo")
    await page.select_option("#settings select[name=language]", "ja")
    await page.get_by_role("button", name="Save settings").click()
    await expect(page.get_by_role("status")).to_have_text("Saved the settings.")
    state = await served.core.repo.reads.state(OPS)
    assert (state.mode, state.tz, state.lang) == ("all", "Asia/Tokyo", "ja")

    await page.get_by_role("button", name="Pause").click()
    await expect(page.get_by_role("status")).to_contain_text("Paused")
    assert (await served.core.repo.reads.state(OPS)).paused

    await open_section(page, "Facts (0)")
    await page.fill("#facts input[name=text]", "Pager rotation changes on Mondays")
    await page.get_by_role("button", name="Remember").click()
    await expect(page.get_by_role("status")).to_have_text("Remembered the note.")
    [note] = await served.core.repo.reads.facts(OPS)
    assert note.text == "Pager rotation changes on Mondays" and note.by == "dashboard"

    async with page.expect_download() as download_info:
        await page.get_by_role("link", name="Export JSON").click()
    download = await download_info.value
    assert download.suggested_filename == "memory-slack_T1_C1.json"
    saved = Path(await download.path())
    data = json.loads(await asyncio.to_thread(saved.read_text, encoding="utf-8"))
    assert data["format"] == "memorybot-export" and data["scope"] == OPS
    assert [e["text"] for e in data["log"]] == ["Disk usage on db-2 is at 71%."]

    await page.goto(f"{served.url}/?platform=slack")
    await expect(page.locator("table.scopes tbody tr .badge.warn")).to_have_text("paused")


async def test_history_pages_newest_first_and_japanese(
    served: Served, watched: tuple[Page, Watch]
) -> None:
    page, _ = watched
    scope = "slack:T9:C9"
    for i in range(120):
        await served.core.intake.accept(
            IncomingMessage(
                scope=scope, text=f"メッセージ {i} です。明日の会議は10時から。", author="佐藤"
            )
        )
    await login(page, served.url)
    await page.goto(f"{served.url}/scopes/{scope}")
    rows = page.locator("table.history tbody tr")
    await expect(rows).to_have_count(50)
    await expect(rows.first).to_contain_text("メッセージ 119 です。")
    await expect(page.locator("#history .pager")).to_contain_text("Page 1 of 3")
    await page.get_by_role("link", name="Older →").click()
    await expect(rows.first).to_contain_text("メッセージ 69 です。")
    await page.get_by_role("link", name="Older →").click()
    await expect(rows).to_have_count(20)
    await expect(rows.last).to_contain_text("メッセージ 0 です。")
    await expect(rows.last.locator("td").nth(1)).to_have_text("佐藤")


async def test_health_and_metrics_after_activity(
    served: Served, watched: tuple[Page, Watch]
) -> None:
    page, _ = watched
    await seed(served.core)
    recall = served.core.recall
    assert recall is not None
    assert await recall.search(GENERAL, "When is the Pinecrest offsite?")  # its index built
    await served.core.metrics.flush()
    await login(page, served.url)
    await page.get_by_role("link", name="Health").click()
    await expect(page.locator("[data-stat=messages] dd")).to_have_text("6")
    memory = page.locator("[data-stat=recall-memory] dd")
    await expect(memory).to_contain_text("of 256.0 MiB · 1 scope cached · 1 process")
    await expect(memory).to_contain_text(re.compile(r"^\d+(\.\d)? (B|KiB) of"))
    await expect(page.locator("[data-stat=recall-builds] dd")).to_contain_text("1 0 evictions")
    await expect(page.locator("[data-stat=scopes] dd")).to_have_text("3")
    await expect(page.locator("[data-stat=redis] dd")).to_contain_text("MiB")
    await expect(page.get_by_text("DASHBOARD_TOKEN")).to_be_visible()
    assert "dashboard-test-token" not in await page.content()  # "set", never the value
    await page.get_by_role("link", name="Prometheus /metrics").click()
    await expect(page.locator("body")).to_contain_text("memorybot_messages_total 6")
