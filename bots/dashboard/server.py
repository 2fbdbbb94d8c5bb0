"""Serving the dashboard with uvicorn inside the caller's event loop, next to the bots.

The dashboard binds its socket itself before uvicorn starts, so a port already in use is a
plain ConfigError (uvicorn would call sys.exit inside a task). uvicorn's own signal handling
is off: the host process (``memorybot dashboard``, ``memorybot run --dashboard``) owns
SIGINT/SIGTERM and stops the dashboard by cancelling it, which shuts it down gracefully.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import sys
from collections.abc import AsyncIterator, Iterator

import uvicorn
from fastapi import FastAPI

from bots.dashboard.app import create_app
from memory_core.bootstrap import Core
from memory_core.errors import ConfigError

STOP_GRACE_S = 5


class _HostedServer(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield  # the host process handles signals


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        return socket.create_server((host, port), family=family)
    except OSError as exc:
        raise ConfigError(
            f"the dashboard cannot listen on {host}:{port}: {exc.strerror or exc}; choose "
            "another port with MEMORYBOT_DASHBOARD__PORT (or [dashboard] port)"
        ) from exc


class DashboardServer:
    """One dashboard on one socket: ``await start()``, then ``url``, then ``await stop()``."""

    def __init__(self, core: Core, *, host: str | None = None, port: int | None = None) -> None:
        settings = core.settings.dashboard
        app = create_app(core)  # refuses to exist without DASHBOARD_TOKEN
        self._sock = _bind(host or settings.host, settings.port if port is None else port)
        config = uvicorn.Config(
            app,
            log_config=None,  # the host process configured logging already
            log_level="warning",
            access_log=False,
            lifespan="off",
            ws="none",
            server_header=False,
            timeout_graceful_shutdown=STOP_GRACE_S,
        )
        self._server = _HostedServer(config)
        self._task: asyncio.Task[None] | None = None
        self.app: FastAPI = app

    @property
    def url(self) -> str:
        host, port = self._sock.getsockname()[:2]
        return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"

    async def start(self) -> None:
        self._task = asyncio.create_task(self._server.serve(sockets=[self._sock]))
        while not self._server.started:
            if self._task.done():
                self._sock.close()
                await self._task  # it failed to start: raise why
                raise ConfigError("the dashboard stopped while starting")
            await asyncio.sleep(0.01)

    async def stop(self) -> None:
        if self._task is None:
            self._sock.close()
            return
        self._server.should_exit = True
        await self._task
        self._task = None

    async def run(self) -> None:
        """Serve until cancelled; then stop accepting, finish answering, and return."""
        await self.start()
        assert self._task is not None
        try:
            await asyncio.shield(self._task)
        except asyncio.CancelledError:
            await self.stop()
            raise


async def serve_dashboard(core: Core) -> None:
    """Serve the dashboard on settings.dashboard.host/port in the current event loop until
    cancelled. Raises ConfigError when DASHBOARD_TOKEN is unset or the port is taken."""
    server = DashboardServer(core)  # the socket is bound here: the URL is known
    print(f"Dashboard: {server.url}/ (log in with DASHBOARD_TOKEN)", file=sys.stderr)
    await server.run()


@contextlib.asynccontextmanager
async def running_dashboard(
    core: Core, *, host: str = "127.0.0.1", port: int = 0
) -> AsyncIterator[DashboardServer]:
    """A dashboard served for the duration of a block (port 0: any free port), e.g. in tests."""
    server = DashboardServer(core, host=host, port=port)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()
