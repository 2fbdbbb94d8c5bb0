"""The scope page and every change an admin can make to one scope's memory.

Changes are POSTs that carry the session's CSRF token (checked by ``require_csrf`` before
the handler runs), go through MemoryAdmin as /memory does, and answer with a redirect back
to the page (so reloading never repeats a change). Each change is logged without its text:
an audit trail that does not copy what someone asked to forget.
"""

from __future__ import annotations

import json
import logging
from typing import Annotated

from fastapi import Depends, FastAPI, Form, Request
from fastapi.responses import Response
from starlette.exceptions import HTTPException

from bots.dashboard.scope_view import (
    HISTORY_MAX,
    HISTORY_PAGE,
    TIER_LABELS,
    edit_fact,
    prompt_preview,
    scope_detail,
)
from bots.dashboard.web import dash, render, require_csrf, scope_url, see_other
from memory_core.errors import InputError
from memory_core.models import LANGUAGE_SETTINGS, MODES, TIER_FIELDS
from memory_core.scopes import parse_scope

log = logging.getLogger(__name__)
PREFIX = "/scopes/{scope}"
SECTIONS = (
    "settings",
    "history",
    *(f"tier-{t}" for t in TIER_FIELDS),
    "days",
    "weeks",
    "facts",
    "forget",
)
TextField = Annotated[str, Form()]


async def _existing(request: Request, scope: str) -> str:
    """The scope, validated, if it has memory (404 otherwise: changes never create one)."""
    scope = parse_scope(scope)
    if not await dash(request).core.repo.reads.scope_exists(scope):
        raise HTTPException(404, f"There is no memory for {scope} (forgotten, or never used).")
    return scope


def _count(request: Request, name: str) -> int:
    value = request.query_params.get(name, "0")
    return int(value) if value.isdigit() else 0


def _n(count: int, one: str, many: str = "") -> str:
    return f"{count} {one if count == 1 else many or one + 's'}"


def _flash(request: Request) -> str:
    """The message after a change. Only fixed texts and numbers come from the URL, so a
    crafted link cannot put words on the page."""
    done = request.query_params.get("done", "")
    if done.startswith("tier-") and done[5:] in TIER_LABELS:
        return f"Saved the {TIER_LABELS[done[5:]]} tier."
    if done == "forgot":
        m, f, t = _count(request, "m"), _count(request, "f"), _count(request, "t")
        return (
            f"Forgot it: {_n(m, 'message')}, {_n(f, 'fact')} and {_n(t, 'summary', 'summaries')}"
            " changed."
        )
    return {
        "fact-saved": "Saved the fact.",
        "fact-deleted": "Deleted the fact.",
        "fact-missing": "That fact was already gone.",
        "remembered": "Remembered the note.",
        "settings": "Saved the settings.",
        "paused": "Paused: new messages in this scope are not stored.",
        "resumed": "Resumed: new messages are stored again.",
    }.get(done, "")


async def scope_page(request: Request, scope: str) -> Response:
    scope = await _existing(request, scope)
    page_arg = request.query_params.get("page", "1")
    page = int(page_arg) if page_arg.isdigit() else 1
    detail = await scope_detail(dash(request).core, scope, page=page)
    opened = request.query_params.get("open", "")
    return render(
        request,
        "scope.html",
        {
            "d": detail,
            "v": detail.view,
            "flash": _flash(request),
            "opened": opened if opened in SECTIONS else "",
            "modes": MODES,
            "languages": LANGUAGE_SETTINGS,
            "history_page_size": HISTORY_PAGE,
            "history_max": HISTORY_MAX,
            "nav": "overview",
        },
    )


async def prompt_page(request: Request, scope: str) -> Response:
    scope = await _existing(request, scope)
    p = request.query_params
    text, author, user_id = p.get("text", ""), p.get("author", "admin"), p.get("user_id", "")
    prompt = None
    if text.strip():
        prompt = await prompt_preview(
            dash(request).core, scope, text=text, author=author or "admin", author_id=user_id
        )
    context = {"scope": scope, "text": text, "author": author, "user_id": user_id}
    return render(request, "prompt.html", {**context, "prompt": prompt, "nav": "overview"})


async def export(request: Request, scope: str) -> Response:
    scope = await _existing(request, scope)
    data = await dash(request).core.admin.export(scope)
    log.info("dashboard: exported %s", scope)
    filename = "memory-" + scope.replace(":", "_") + ".json"  # scope ids are filename-safe
    return Response(
        json.dumps(data, ensure_ascii=False, indent=2),
        media_type="application/json; charset=utf-8",
        headers={"Content-Disposition": f'attachment; filename="{filename}"'},
    )


async def save_tier(
    request: Request, scope: str, tier: TextField, text: TextField = ""
) -> Response:
    scope = await _existing(request, scope)
    await dash(request).core.admin.edit_tier(scope, tier, text)
    log.info("dashboard: edited the %s tier of %s", tier, scope)
    return see_other(scope_url(scope, done=f"tier-{tier}", open=f"tier-{tier}") + f"#tier-{tier}")


async def save_fact(request: Request, scope: str, fact_id: str, text: TextField = "") -> Response:
    scope = await _existing(request, scope)
    await edit_fact(dash(request).core, scope, fact_id, text)
    log.info("dashboard: edited fact %s of %s", fact_id, scope)
    return see_other(scope_url(scope, done="fact-saved", open="facts") + "#facts")


async def delete_fact(request: Request, scope: str, fact_id: str) -> Response:
    scope = await _existing(request, scope)
    core = dash(request).core
    gone = await core.admin.text.forget_fact(scope, fact_id)
    log.info("dashboard: deleted fact %s of %s", fact_id, scope)
    if gone and not await core.repo.reads.scope_exists(scope):  # its last fact (a person's)
        return see_other("/?done=fact-deleted")
    done = "fact-deleted" if gone else "fact-missing"
    return see_other(scope_url(scope, done=done, open="facts") + "#facts")


async def remember(request: Request, scope: str, text: TextField = "") -> Response:
    scope = await _existing(request, scope)
    await dash(request).core.admin.remember(scope, text, by="dashboard")
    log.info("dashboard: added a note to %s", scope)
    return see_other(scope_url(scope, done="remembered", open="facts") + "#facts")


async def forget_text(request: Request, scope: str, text: TextField = "") -> Response:
    scope = await _existing(request, scope)
    report = await dash(request).core.admin.text.forget_text(scope, text)
    log.info("dashboard: forgot text in %s (%d messages)", scope, report.messages)
    changed = len(report.tiers) + report.days + report.weeks
    url = scope_url(scope, done="forgot", m=report.messages, f=report.facts, t=changed)
    return see_other(url + "&open=forget#forget")


async def confirm_forget_all(request: Request, scope: str) -> Response:
    scope = await _existing(request, scope)
    detail = await scope_detail(dash(request).core, scope)
    return render(request, "forget_all.html", {"d": detail, "error": "", "nav": "overview"})


async def forget_all(request: Request, scope: str, confirm: TextField = "") -> Response:
    scope = await _existing(request, scope)
    core = dash(request).core
    if confirm.strip() != scope:
        detail = await scope_detail(core, scope)
        error = "Type the scope id exactly to confirm; nothing was deleted."
        return render(
            request, "forget_all.html", {"d": detail, "error": error, "nav": "overview"}, status=400
        )
    await core.admin.place.forget_all(scope)
    log.info("dashboard: forgot everything in %s", scope)
    return see_other("/?done=forgot-all")


async def save_settings(
    request: Request,
    scope: str,
    mode: TextField = "",
    timezone: TextField = "",
    language: TextField = "",
) -> Response:
    scope = await _existing(request, scope)
    if not (mode or timezone.strip() or language):
        raise InputError("nothing to change: choose a mode, a timezone or a language")
    await dash(request).core.admin.configure(
        scope, mode=mode or None, timezone=timezone.strip() or None, language=language or None
    )
    log.info("dashboard: changed the settings of %s", scope)
    return see_other(scope_url(scope, done="settings", open="settings") + "#settings")


async def pause(request: Request, scope: str, paused: TextField = "") -> Response:
    scope = await _existing(request, scope)
    on = paused == "1"
    await dash(request).core.admin.set_paused(scope, on)
    log.info("dashboard: %s %s", "paused" if on else "resumed", scope)
    done = "paused" if on else "resumed"
    return see_other(scope_url(scope, done=done, open="settings") + "#settings")


# (method, path under /scopes/{scope}, handler). Added to the app route by route (not as an
# included router), so the app's own route list names every one: the tests walk it to
# check that each GET needs a login and each POST a CSRF token.
ROUTES = (
    ("GET", "", scope_page),
    ("GET", "/prompt", prompt_page),
    ("GET", "/export", export),
    ("GET", "/forget-all", confirm_forget_all),
    ("POST", "/tier", save_tier),
    ("POST", "/facts/{fact_id}", save_fact),
    ("POST", "/facts/{fact_id}/delete", delete_fact),
    ("POST", "/remember", remember),
    ("POST", "/forget", forget_text),
    ("POST", "/forget-all", forget_all),
    ("POST", "/settings", save_settings),
    ("POST", "/pause", pause),
)


def register(app: FastAPI) -> None:
    for method, path, handler in ROUTES:
        # Every change checks the CSRF token before its handler runs.
        change = [Depends(require_csrf)] if method == "POST" else None
        app.add_api_route(PREFIX + path, handler, methods=[method], dependencies=change)
