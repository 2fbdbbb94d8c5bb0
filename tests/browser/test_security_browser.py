"""The dashboard in a real browser, attacked: script in chat text, pages without a login,
changes without the CSRF token, and logging out."""

from __future__ import annotations

import pytest
from playwright.async_api import Browser, Page, expect

from memory_core.models import IncomingMessage
from tests.browser.support import TOKEN, Served, Watch, change_routes, login, routes

pytestmark = pytest.mark.asyncio(loop_scope="module")

SCOPE = "discord:300:400"
MARKER = "Zanzibar-7731"  # a word that appears only in the scope's memory
ATTACKS = (
    "<img src=x onerror=alert(1)>",
    "<script>alert(1)</script>",
    '"><svg onload=alert(2)>',
    "</textarea><script>alert(3)</script>",
    "{{ 7*7 }} {% raw %}",
)


async def seed_hostile(served: Served) -> None:
    core = served.core
    for i, attack in enumerate(ATTACKS):
        await core.intake.accept(
            IncomingMessage(
                scope=SCOPE,
                text=f"{attack} {MARKER}",
                author=f"<b>Mallory{i}</b><script>alert('name')</script>",
                author_id=f"m{i}",
                place_name="<script>alert('place')</script>#general",
            )
        )
        await core.admin.remember(SCOPE, f"{attack} note {i}", by="<i>Mallory</i>")
    await core.admin.edit_tier(SCOPE, "short", f"{ATTACKS[0]} {ATTACKS[3]} {MARKER}")
    await core.admin.edit_tier(SCOPE, "overview", ATTACKS[1])


async def open_everything(page: Page) -> None:
    await page.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")


async def assert_inert(page: Page) -> None:
    """Chat text is text: no element it describes exists, no script but ours."""
    assert await page.locator("img[src='x']").count() == 0
    assert await page.locator("main svg[onload]").count() == 0
    scripts = await page.locator("script").evaluate_all("els => els.map(e => e.src)")
    assert [s.rsplit("/", 2)[-2:] for s in scripts] == [["static", "dashboard.js"]]


async def test_chat_html_renders_as_text_and_no_dialog_fires(
    served: Served, watched: tuple[Page, Watch]
) -> None:
    page, watch = watched
    await seed_hostile(served)
    await login(page, served.url)

    await expect(page.locator("table.scopes")).to_contain_text(
        "<script>alert('place')</script>#general"
    )
    await assert_inert(page)

    await page.goto(f"{served.url}/scopes/{SCOPE}")
    await open_everything(page)
    history = page.locator("#history")
    for attack in ATTACKS:
        await expect(history).to_contain_text(f"{attack} {MARKER}")
    await expect(history).to_contain_text("<b>Mallory0</b><script>alert('name')</script>")
    await expect(history).not_to_contain_text("49 {% raw %}")  # no template evaluation
    await expect(page.locator("#tier-short-text")).to_have_value(
        f"{ATTACKS[0]} {ATTACKS[3]} {MARKER}"
    )
    await expect(page.locator("#fact-f2-text")).to_have_value(f"{ATTACKS[1]} note 1")
    await assert_inert(page)

    # A textarea holding "</textarea><script>" still saves exactly what it shows.
    await page.get_by_role("button", name="Save short").click()
    await expect(page.get_by_role("status")).to_have_text("Saved the Short (today) tier.")
    assert (
        await served.core.repo.reads.state(SCOPE)
    ).short == f"{ATTACKS[0]} {ATTACKS[3]} {MARKER}"

    await page.goto(f"{served.url}/scopes/{SCOPE}/prompt")
    await page.fill("input[name=text]", ATTACKS[2])
    await page.get_by_role("button", name="Preview").click()
    await expect(page.locator("pre.prompt")).to_contain_text(ATTACKS[0])
    await expect(page.locator("table.conversation")).to_contain_text(ATTACKS[2])
    await assert_inert(page)

    # An error message that quotes the input quotes it as text too.
    await page.goto(f"{served.url}/scopes/{SCOPE}")
    await page.locator("#settings > summary").click()
    await page.fill("#settings input[name=timezone]", "<script>alert(5)</script>")
    await page.get_by_role("button", name="Save settings").click()
    await expect(page.get_by_role("alert")).to_contain_text(
        "unknown timezone '<script>alert(5)</script>'"
    )
    await page.goto(f"{served.url}/scopes/{SCOPE}/forget-all")
    await assert_inert(page)
    await page.goto(f"{served.url}/health")
    watch.assert_clean()


async def test_no_page_without_login(served: Served, watched: tuple[Page, Watch]) -> None:
    page, _ = watched
    await served.core.intake.accept(IncomingMessage(scope=SCOPE, text=MARKER, author="A"))
    await served.core.admin.remember(SCOPE, f"{MARKER} fact")
    every = routes(served.server.app, scope=SCOPE)
    assert len(every) >= 14
    for method, path in every:
        url = served.url + path
        if method == "GET" and path not in ("/login", "/metrics"):
            await page.goto(url)
            assert page.url.startswith(f"{served.url}/login?next="), (path, page.url)
            await expect(page.locator("#token")).to_be_visible()
        elif method == "GET":
            shown = await page.goto(url)
            assert shown is not None
            if path == "/metrics":
                assert shown.status == 401
        else:
            answer = await page.request.fetch(url, method=method, form={"text": "x"})
            assert answer.status == 401, (path, answer.status)  # /login: a wrong token
        assert MARKER not in await page.content(), path
    # Unknown paths and the OpenAPI pages hold nothing either.
    for path in ("/docs", "/openapi.json", "/scopes", "/api"):
        await page.goto(served.url + path)
        assert page.url.startswith(f"{served.url}/login"), path
    # A forged cookie is no session.
    await page.context.add_cookies(
        [{"name": "mb_session", "value": "v1.9999999999.abc.forged", "url": served.url}]
    )
    await page.goto(f"{served.url}/scopes/{SCOPE}")
    assert page.url.startswith(f"{served.url}/login")
    assert (await served.core.repo.reads.state(SCOPE)).short == ""  # the POSTs changed nothing
    assert len(await served.core.repo.reads.facts(SCOPE)) == 1


async def test_wrong_token_is_refused(served: Served, watched: tuple[Page, Watch]) -> None:
    page, _ = watched
    await page.goto(f"{served.url}/login")
    await page.fill("#token", TOKEN + "x")
    async with page.expect_response(f"{served.url}/login") as answer:
        await page.get_by_role("button", name="Log in").click()
    assert (await answer.value).status == 401
    await expect(page.get_by_role("alert")).to_have_text("That is not the dashboard token.")
    assert [c for c in await page.context.cookies() if c["name"] == "mb_session"] == []


async def test_changes_without_the_csrf_token_are_refused(
    served: Served, watched: tuple[Page, Watch]
) -> None:
    page, _ = watched
    await served.core.intake.accept(IncomingMessage(scope=SCOPE, text=MARKER, author="A"))
    await served.core.admin.remember(SCOPE, "keep me")
    before = await served.core.admin.export(SCOPE)
    await login(page, served.url)

    # Straight at every change route, with the session cookie but no token, or a wrong one.
    for path in change_routes(served.server.app, scope=SCOPE):
        form: dict[str, str | float | bool] = {
            "text": "changed",
            "tier": "short",
            "confirm": SCOPE,
            "paused": "1",
        }
        for csrf in (None, "forged-token"):
            sent = form if csrf is None else {**form, "csrf": csrf}
            response = await page.request.post(served.url + path, form=sent)
            assert response.status == 403, (path, csrf, response.status)

    # Through the page: the form's hidden token removed before submitting.
    await page.goto(f"{served.url}/scopes/{SCOPE}?open=tier-short")
    await page.fill("#tier-short-text", "should not be saved")
    await page.evaluate("document.querySelector('#tier-short form input[name=csrf]').remove()")
    async with page.expect_response(lambda r: r.request.method == "POST") as answer:
        await page.get_by_role("button", name="Save short").click()
    assert (await answer.value).status == 403
    await expect(page.get_by_role("alert")).to_contain_text("security token")

    after = await served.core.admin.export(SCOPE)
    assert {k: v for k, v in after.items() if k != "exported_at"} == {
        k: v for k, v in before.items() if k != "exported_at"
    }
    # The session still works: the same change with the token goes through.
    await page.goto(f"{served.url}/scopes/{SCOPE}?open=tier-short")
    await page.fill("#tier-short-text", "saved with the token")
    await page.get_by_role("button", name="Save short").click()
    await expect(page.get_by_role("status")).to_have_text("Saved the Short (today) tier.")


async def test_logout_ends_the_session(
    served: Served, watched: tuple[Page, Watch], browser: Browser
) -> None:
    page, _ = watched
    await served.core.intake.accept(IncomingMessage(scope=SCOPE, text=MARKER, author="A"))
    await login(page, served.url)
    [cookie] = [c for c in await page.context.cookies() if c["name"] == "mb_session"]
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    assert "mb_session" not in await page.evaluate("document.cookie")  # HttpOnly

    await page.get_by_role("button", name="Log out").click()
    await page.wait_for_url(f"{served.url}/login")
    assert [c for c in await page.context.cookies() if c["name"] == "mb_session"] == []
    await page.goto(f"{served.url}/scopes/{SCOPE}")
    assert page.url.startswith(f"{served.url}/login")

    # The old cookie, copied before logging out, is revoked too.
    other = await browser.new_context()
    try:
        await other.add_cookies(
            [{"name": "mb_session", "value": cookie["value"], "url": served.url}]
        )
        stale = await other.new_page()
        await stale.goto(f"{served.url}/scopes/{SCOPE}")
        assert stale.url.startswith(f"{served.url}/login")
        assert MARKER not in await stale.content()
    finally:
        await other.close()
