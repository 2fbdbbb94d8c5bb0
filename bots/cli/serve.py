"""``memorybot run``: the bots (with their scheduler), until stopped."""

from __future__ import annotations

from typing import Annotated

import typer

from bots.cli.common import fail, run, settings


def register(app: typer.Typer) -> None:
    app.command("run")(run_bots_command)


def run_bots_command(
    ctx: typer.Context,
    discord: Annotated[
        bool, typer.Option("--discord", help="Serve Discord (DISCORD_TOKEN).")
    ] = False,
    slack: Annotated[bool, typer.Option("--slack", help="Serve Slack (SLACK_* tokens).")] = False,
    sync_commands: Annotated[
        bool,
        typer.Option(
            "--sync-commands",
            help="Register /memory with Discord (globally, or in discord.sync_guild_ids).",
        ),
    ] = False,
    shard_count: Annotated[
        int | None, typer.Option("--shard-count", min=1, help="Discord: shards in the fleet.")
    ] = None,
    shard_ids: Annotated[
        str | None, typer.Option("--shard-ids", help="Discord: this process's shards, e.g. 0,1.")
    ] = None,
    dashboard: Annotated[
        bool, typer.Option("--dashboard", help="Serve the admin dashboard too (DASHBOARD_TOKEN).")
    ] = False,
) -> None:
    """Run the bots (with their scheduler) until stopped."""
    # Imported here: the platform libraries load only for the command that serves them.
    from bots.runner import run_bots

    s = settings(ctx)
    ids: list[int] | None = None
    if shard_ids:
        try:
            ids = [int(x) for x in shard_ids.split(",") if x.strip()]
        except ValueError as exc:
            raise fail(f"--shard-ids {shard_ids!r}: give numbers like 0,1", 1) from exc
        if shard_count is None:
            raise fail("--shard-ids needs --shard-count", 1)
        if any(i < 0 or i >= shard_count for i in ids):
            raise fail(f"--shard-ids must be between 0 and {shard_count - 1}", 1)
    run(
        run_bots(
            s,
            discord=discord,
            slack=slack,
            dashboard=dashboard,
            sync_commands=sync_commands,
            shard_count=shard_count,
            shard_ids=ids,
        )
    )
