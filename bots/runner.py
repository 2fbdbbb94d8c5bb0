"""``memorybot run``: one process serving the chosen front doors over one core."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys

from config.settings import Settings
from memory_core.bootstrap import Core, build_core
from memory_core.errors import ConfigError

log = logging.getLogger(__name__)


async def run_bots(
    settings: Settings,
    *,
    discord: bool,
    slack: bool,
    dashboard: bool = False,
    sync_commands: bool = False,
    shard_count: int | None = None,
    shard_ids: list[int] | None = None,
) -> None:
    """Serve until SIGINT/SIGTERM. Each front door runs as a task; when one fails, the others
    are stopped and the error is raised (a bad token is a ConfigError: exit status 2)."""
    if not (discord or slack or dashboard):
        raise ConfigError("nothing to run: choose --discord, --slack and/or --dashboard")
    core = await build_core(settings)
    for line in core.describe():
        print(line, file=sys.stderr)
    core.metrics.start()
    if settings.scheduler.enabled:
        core.scheduler.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    try:
        await _serve(
            core,
            discord=discord,
            slack=slack,
            dashboard=dashboard,
            stop=stop,
            sync_commands=sync_commands,
            shard_count=shard_count,
            shard_ids=shard_ids,
        )
    finally:
        await core.close()


async def _serve(
    core: Core,
    *,
    discord: bool,
    slack: bool,
    dashboard: bool,
    stop: asyncio.Event,
    sync_commands: bool,
    shard_count: int | None,
    shard_ids: list[int] | None,
) -> None:
    try:
        async with asyncio.TaskGroup() as group:
            tasks = []
            if discord:
                from bots.discord.bot import run_discord

                tasks.append(
                    group.create_task(
                        run_discord(
                            core,
                            sync_commands=sync_commands,
                            shard_count=shard_count,
                            shard_ids=shard_ids,
                        )
                    )
                )
            if slack:
                from bots.slack.bot import run_slack

                tasks.append(group.create_task(run_slack(core)))
            if dashboard:
                from bots.dashboard.server import serve_dashboard

                tasks.append(group.create_task(serve_dashboard(core)))
            waiter = group.create_task(stop.wait())
            await waiter
            log.warning("stopping")
            for task in tasks:
                task.cancel()
    except ExceptionGroup as failed:
        # A front door that cannot start (a bad token is a ConfigError) stops the others;
        # raise its own error so the CLI reports it plainly and exits with its status.
        raise failed.exceptions[0] from None
