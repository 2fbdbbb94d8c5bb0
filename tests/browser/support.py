"""Shared by the browser tests and the dashboard's HTTP tests: every route of the app, with
sample path parameters, so a route added later is covered by the auth and CSRF tests
without anyone remembering to list it."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from fastapi import FastAPI
from fastapi.routing import APIRoute
from playwright.async_api import Page

from bots.dashboard.server import DashboardServer
from memory_core.bootstrap import Core

TOKEN = "dashboard-test-token-4f1c9e2a7b"
PUBLIC = {"/login"}


def routes(
    app: FastAPI, *, scope: str, fact_id: str = "f1", server: str = "discord:10"
) -> list[tuple[str, str]]:
    """(method, path) of every API route, path parameters filled in."""
    found: list[tuple[str, str]] = []
    for route in app.routes:
        if not isinstance(route, APIRoute):
            continue
        path = route.path.replace("{scope}", scope).replace("{fact_id}", fact_id)
        path = path.replace("{server}", server)
        assert not re.search(r"{\w+}", path), f"no sample value for a parameter of {route.path}"
        found += [(method, path) for method in sorted(route.methods or ()) if method != "HEAD"]
    return found


def change_routes(app: FastAPI, *, scope: str, fact_id: str = "f1") -> list[str]:
    """Every POST route that changes something (all but the login form)."""
    return [
        path
        for method, path in routes(app, scope=scope, fact_id=fact_id)
        if method == "POST" and path not in PUBLIC
    ]


@dataclass
class Served:
    core: Core
    server: DashboardServer
    redis_url: str

    @property
    def url(self) -> str:
        return self.server.url


@dataclass
class Watch:
    """What a page did that it must not: dialogs (alert from injected script), script
    errors, Content-Security-Policy violations."""

    dialogs: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    csp: list[str] = field(default_factory=list)

    def assert_clean(self) -> None:
        assert not self.dialogs, f"a dialog fired: {self.dialogs}"
        assert not self.errors, f"script errors: {self.errors}"
        assert not self.csp, f"CSP violations: {self.csp}"


async def login(page: Page, url: str, token: str = TOKEN) -> None:
    await page.goto(f"{url}/")
    assert page.url.startswith(f"{url}/login"), page.url
    await page.fill("#token", token)
    await page.get_by_role("button", name="Log in").click()
    await page.wait_for_url(f"{url}/")
