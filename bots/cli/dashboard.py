"""``memorybot dashboard``: the admin web UI, on its own.

``bots/cli/main.py`` adds this with one call, ``register(app)``. The command imports the
dashboard only when it runs, so neither FastAPI nor uvicorn loads for other commands.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from typing import Annotated

import typer

from bots.cli.common import fail, run, settings
from config.settings import Settings

MIN_TOKEN_CHARS = 16
LOOPBACK = ("127.0.0.1", "::1", "localhost")


def register(app: typer.Typer) -> None:
    app.command("dashboard")(dashboard)


def dashboard(
    ctx: typer.Context,
    host: Annotated[
        str | None,
        typer.Option("--host", help="Address to bind (default: settings, 127.0.0.1)."),
    ] = None,
    port: Annotated[
        int | None,
        typer.Option("--port", min=0, max=65535, help="Port (default: settings, 8765)."),
    ] = None,
) -> None:
    """The admin dashboard: scopes, their memory, fleet health, Prometheus /metrics.
    Needs DASHBOARD_TOKEN (the login)."""
    s = settings(ctx)
    token = s.dashboard.token
    if token is None or not token.get_secret_value().strip():
        raise fail(
            "the dashboard needs a login token: set DASHBOARD_TOKEN (or [dashboard] token in "
            "the settings file) to a long random secret, e.g. the output of "
            "python -c 'import secrets; print(secrets.token_urlsafe(32))'",
            2,
        )
    updates = {k: v for k, v in (("host", host), ("port", port)) if v is not None}
    if updates:
        s = s.model_copy(update={"dashboard": s.dashboard.model_copy(update=updates)})
    if len(token.get_secret_value()) < MIN_TOKEN_CHARS:
        print(
            f"warning: DASHBOARD_TOKEN is shorter than {MIN_TOKEN_CHARS} characters; "
            "use a long random secret",
            file=sys.stderr,
        )
    if s.dashboard.host not in LOOPBACK:
        print(
            f"warning: the dashboard listens on {s.dashboard.host}, beyond this machine, over "
            "plain HTTP; put a TLS reverse proxy in front of it",
            file=sys.stderr,
        )
    run(_serve(s))


async def _serve(s: Settings) -> None:
    from bots.dashboard.server import serve_dashboard
    from memory_core.bootstrap import build_core

    core = await build_core(s, helpers=False)  # (its few questions: in-process)
    try:
        for line in core.describe():
            print(line, file=sys.stderr)
        task = asyncio.create_task(serve_dashboard(core))
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, task.cancel)
        # wait(), not await: a cancelled task means "stopped by a signal", a clean exit.
        await asyncio.wait([task])
        if not task.cancelled():
            task.result()
    finally:
        await core.close()
