"""What every route shares: the dashboard's state on the app, template rendering with the
session's CSRF token, the CSRF check for changes, and redirects after a change."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

import jinja2
from fastapi import HTTPException, Request
from fastapi.responses import RedirectResponse, Response
from fastapi.templating import Jinja2Templates

from bots.dashboard.auth import LoginThrottle, Session, SessionSigner
from bots.dashboard.health import human_bytes
from memory_core.bootstrap import Core

HERE = Path(__file__).parent


@dataclass
class Dashboard:
    core: Core
    signer: SessionSigner
    throttle: LoginThrottle
    templates: Jinja2Templates


def dash(request: Request) -> Dashboard:
    found = request.app.state.dashboard
    assert isinstance(found, Dashboard)
    return found


def session_of(request: Request) -> Session | None:
    found = getattr(request.state, "session", None)
    return found if isinstance(found, Session) else None


# -- templates ---------------------------------------------------------------------------
def scope_url(scope: str, suffix: str = "", **params: Any) -> str:
    """``/scopes/<scope><suffix>?params``; scope ids only hold URL-safe characters and ':'."""
    query = {k: v for k, v in params.items() if v not in (None, "")}
    tail = f"?{urlencode(query)}" if query else ""
    return f"/scopes/{quote(scope, safe=':@')}{suffix}{tail}"


def _when(value: datetime | str | None) -> str:
    if value is None or value == "":
        return "-"
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            return str(value)
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def _ago(value: datetime | None) -> str:
    if value is None:
        return ""
    seconds = (datetime.now(UTC) - value).total_seconds()
    if seconds < 0:
        return "in the future"
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{math.floor(seconds / size)} {unit} ago"
    return "just now"


def _num(value: float | int | None, digits: int = 0) -> str:
    if value is None:
        return "-"
    return f"{value:,.{digits}f}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def make_templates() -> Jinja2Templates:
    # Autoescape everywhere, whatever the file name: chat text may hold HTML and script, and
    # no template marks user data |safe. StrictUndefined turns a typo into an error, not "".
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(when=_when, ago=_ago, num=_num, pct=_pct, bytes=human_bytes)
    env.globals.update(scope_url=scope_url)
    return Jinja2Templates(env=env)


def render(
    request: Request, name: str, context: dict[str, Any] | None = None, *, status: int = 200
) -> Response:
    session = session_of(request)
    full = {"csrf": session.csrf if session else "", "logged_in": session is not None, "nav": ""}
    full.update(context or {})
    return dash(request).templates.TemplateResponse(request, name, full, status_code=status)


def see_other(url: str) -> RedirectResponse:
    """After a change: the browser loads the page again with GET (no resubmission)."""
    return RedirectResponse(url, status_code=303)


# -- changes -----------------------------------------------------------------------------
async def require_csrf(request: Request) -> Session:
    """Every change: a logged-in session, a same-origin request, and the session's CSRF token
    in the form (compared in constant time). Anything else is refused with 403."""
    session = session_of(request)
    if session is None:
        raise HTTPException(401, "log in first")
    origin = request.headers.get("origin")
    if origin is not None and urlsplit(origin).netloc != request.headers.get("host"):
        raise HTTPException(403, "this change came from another site and was refused")
    form = await request.form()
    sent = form.get("csrf")
    if not isinstance(sent, str) or not dash(request).signer.csrf_matches(session, sent):
        raise HTTPException(
            403, "the form's security token is missing or stale: reload the page and try again"
        )
    return session
