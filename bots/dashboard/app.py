"""The dashboard's FastAPI app: login, the overview of scopes, fleet health and /metrics.
The scope page and its changes live in :mod:`bots.dashboard.routes_scope`, the cost page
in :mod:`bots.dashboard.cost`.

Every request passes :func:`_guard` first: without a valid session cookie (or, for /metrics,
the token as a bearer token) a page answers with a redirect to the login form and anything
else with 401, before any route runs. Only /login and /static are public.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import quote

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import PlainTextResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException

import bots.dashboard.health as health_mod
from bots.dashboard.auth import COOKIE_NAME, LoginThrottle, Session, SessionSigner, safe_next
from bots.dashboard.cost import register as register_cost_routes
from bots.dashboard.exposition import exposition
from bots.dashboard.listing import PLATFORMS, SORTS, ListingQuery, list_scopes
from bots.dashboard.routes_scope import register as register_scope_routes
from bots.dashboard.tree import register as register_tree_routes
from bots.dashboard.web import (
    HERE,
    Dashboard,
    dash,
    make_templates,
    render,
    require_csrf,
    see_other,
    session_of,
)
from memory_core.bootstrap import Core
from memory_core.errors import ConfigError, InputError, StoreError

MAX_BODY = 1024 * 1024  # forms only: a tier or a fact is a few KB
PUBLIC_PREFIXES = ("/static/",)
PUBLIC_PATHS = ("/login",)
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",  # no-referrer would make Chrome send Origin: null
    "Cross-Origin-Opener-Policy": "same-origin",
}
NEEDS_TOKEN = (
    "the dashboard needs a login token: set DASHBOARD_TOKEN (or [dashboard] token in the "
    "settings file) to a long random secret, e.g. `python -c 'import secrets; "
    "print(secrets.token_urlsafe(32))'`"
)


def create_app(core: Core) -> FastAPI:
    """The dashboard over ``core``. Raises ConfigError when no DASHBOARD_TOKEN is set."""
    token = core.settings.dashboard.token
    if token is None or not token.get_secret_value().strip():
        raise ConfigError(NEEDS_TOKEN)
    # No OpenAPI pages: they would list every route to anyone and load assets from a CDN.
    app = FastAPI(title="memorybot dashboard", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.dashboard = Dashboard(
        core=core,
        signer=SessionSigner(token.get_secret_value()),
        throttle=LoginThrottle(),
        templates=make_templates(),
    )
    app.middleware("http")(_guard)
    app.mount("/static", StaticFiles(directory=HERE / "static"), name="static")
    register_scope_routes(app)
    register_cost_routes(app)
    register_tree_routes(app)
    app.add_api_route("/login", login_form, methods=["GET"])
    app.add_api_route("/login", login, methods=["POST"])
    app.add_api_route("/logout", logout, methods=["POST"])
    app.add_api_route("/", overview, methods=["GET"])
    app.add_api_route("/health", health_page, methods=["GET"])
    app.add_api_route("/metrics", metrics, methods=["GET"])
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(InputError, _input_error)
    app.add_exception_handler(RequestValidationError, _form_error)
    app.add_exception_handler(StoreError, _store_error)
    return app


# -- the guard ---------------------------------------------------------------------------
def _secure(response: Response, path: str) -> Response:
    for name, value in SECURITY_HEADERS.items():
        response.headers.setdefault(name, value)
    if not path.startswith(PUBLIC_PREFIXES):
        response.headers["Cache-Control"] = "no-store"  # pages hold memory: keep no copies
    return response


async def _guard(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
    path = request.url.path
    if request.method == "POST":
        length = request.headers.get("content-length")
        if length is None or not length.isdigit():
            return _secure(PlainTextResponse("411 a Content-Length is required", 411), path)
        if int(length) > MAX_BODY:
            return _secure(PlainTextResponse("413 the form is too large", 413), path)
    d = dash(request)
    session = d.signer.verify(request.cookies.get(COOKIE_NAME))
    request.state.session = session
    public = path in PUBLIC_PATHS or path.startswith(PUBLIC_PREFIXES)
    scraper = path == "/metrics" and d.signer.bearer_matches(request.headers.get("authorization"))
    if session is None and not public and not scraper:
        if request.method in ("GET", "HEAD") and path != "/metrics":
            target = path + (f"?{request.url.query}" if request.url.query else "")
            return _secure(see_other(f"/login?next={quote(target, safe='')}"), path)
        refused = PlainTextResponse(
            "401 log in first (or send Authorization: Bearer <DASHBOARD_TOKEN> to /metrics)",
            401,
            headers={"WWW-Authenticate": 'Bearer realm="memorybot dashboard"'},
        )
        return _secure(refused, path)
    return _secure(await call_next(request), path)


# -- errors ------------------------------------------------------------------------------
MESSAGES = {
    400: "That did not work",
    401: "Log in first",
    403: "Refused",
    404: "Not found",
    405: "Not allowed",
}


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if request.url.path == "/metrics":
        return PlainTextResponse(f"{exc.status_code} {exc.detail}", exc.status_code)
    title = MESSAGES.get(exc.status_code, "Error")
    detail = str(exc.detail) if exc.detail else title
    return render(request, "error.html", {"title": title, "detail": detail}, status=exc.status_code)


async def _input_error(request: Request, exc: Exception) -> Response:
    # The core's messages say what to fix; they are shown as they are (escaped).
    return render(
        request, "error.html", {"title": "That did not work", "detail": str(exc)}, status=400
    )


async def _form_error(request: Request, exc: Exception) -> Response:
    # A form or query a page of ours never sends (a field missing, a value of the wrong
    # type): say which field, as a page, not FastAPI's JSON.
    assert isinstance(exc, RequestValidationError)
    names = sorted({str(e.get("loc", ("", "?"))[-1]) for e in exc.errors()})
    detail = f"The form could not be read (check: {', '.join(names)}); reload the page."
    return render(
        request, "error.html", {"title": "That did not work", "detail": detail}, status=400
    )


async def _store_error(request: Request, exc: Exception) -> Response:
    # Redis errors reach here translated (memory_core/store/redis_errors.py): StoreError only.
    detail = f"The memory store did not answer ({exc}). Is Redis up?"
    return render(
        request, "error.html", {"title": "Store unavailable", "detail": detail}, status=503
    )


# -- login -------------------------------------------------------------------------------
async def login_form(request: Request, next: str = "/") -> Response:
    if session_of(request) is not None:
        return see_other(safe_next(next))
    return render(request, "login.html", {"next": safe_next(next), "error": ""})


async def login(request: Request) -> Response:
    d = dash(request)
    form = await request.form()
    token, target = form.get("token"), form.get("next")
    target = safe_next(target if isinstance(target, str) else "/")
    client = request.client.host if request.client else "?"
    if not isinstance(token, str) or not d.signer.token_matches(token):
        delay = d.throttle.delay_for(client)
        d.throttle.failed(client)
        if delay:
            await asyncio.sleep(delay)  # slows guessing; a typo costs nothing
        return render(
            request,
            "login.html",
            {"next": target, "error": "That is not the dashboard token."},
            status=401,
        )
    d.throttle.succeeded(client)
    cookie, session = d.signer.issue()
    response = see_other(target)
    response.set_cookie(
        COOKIE_NAME,
        cookie,
        max_age=d.signer.ttl_s,
        path="/",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
    request.state.session = session
    return response


async def logout(request: Request, session: Session = Depends(require_csrf)) -> Response:  # noqa: B008
    dash(request).signer.revoke(session)
    response = see_other("/login")
    response.delete_cookie(
        COOKIE_NAME,
        path="/",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
    return response


# -- pages -------------------------------------------------------------------------------
# What the overview says after a change that left a scope with no memory at all.
OVERVIEW_FLASH = {
    "forgot-all": "Forgot everything in that scope.",
    "fact-deleted": "Deleted the fact. That scope holds nothing else.",
}


def _int(value: str | None, default: int) -> int:
    try:
        return int(value) if value is not None else default
    except ValueError:
        return default


async def overview(request: Request) -> Response:
    p = request.query_params
    query = ListingQuery.parse(
        p.get("q", ""), p.get("platform", ""), p.get("sort", "activity"), _int(p.get("page"), 1)
    )
    listing = await list_scopes(dash(request).core, query)
    done = p.get("done", "")
    return render(
        request,
        "overview.html",
        {
            "listing": listing,
            "platforms": PLATFORMS,
            "sorts": SORTS,
            "flash": OVERVIEW_FLASH.get(done, ""),
            "nav": "overview",
        },
    )


async def health_page(request: Request) -> Response:
    minutes = _int(request.query_params.get("minutes"), health_mod.DEFAULT_WINDOW)
    if minutes not in health_mod.WINDOWS:
        minutes = health_mod.DEFAULT_WINDOW
    report = await health_mod.collect(dash(request).core, minutes=minutes)
    context: dict[str, Any] = {
        "report": report,
        "windows": [(w, f"{w} min" if w < 60 else f"{w // 60} h") for w in health_mod.WINDOWS],
        "maintenance": health_mod.MAINTENANCE,
        "chart": _chart(report.per_minute),
        "nav": "health",
    }
    return render(request, "health.html", context)


def _chart(per_minute: list[tuple[str, int]]) -> dict[str, Any]:
    """Bars for an inline SVG (attributes, not inline styles: the CSP forbids those)."""
    width, height = 600, 80
    peak = max((n for _, n in per_minute), default=0) or 1
    step = width / max(1, len(per_minute))
    bars = [
        {
            "x": round(i * step, 2),
            "w": round(max(step - 1, 0.5), 2),
            "h": round(height * n / peak, 2),
            "y": round(height - height * n / peak, 2),
            "label": f"{stamp[8:10]}:{stamp[10:12]} UTC: {n} messages",
        }
        for i, (stamp, n) in enumerate(per_minute)
    ]
    return {"width": width, "height": height, "bars": bars, "peak": peak}


async def metrics(request: Request) -> Response:
    minutes = _int(request.query_params.get("minutes"), health_mod.DEFAULT_WINDOW)
    report = await health_mod.collect(dash(request).core, minutes=minutes)
    body, content_type = exposition(report, request.headers.get("accept"))
    return Response(body, headers={"Content-Type": content_type})
