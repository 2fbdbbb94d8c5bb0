"""``memorybot rollover``: the scheduler's sweep, run now (or as of a given time)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

import typer

from bots.cli.common import (
    core_for,
    err,
    fail,
    out,
    print_json,
    progress_bar,
    run,
    scope_arg,
    settings,
)
from memory_core import calendar
from memory_core.clock import Clock, ManualClock, SystemClock


def register(app: typer.Typer) -> None:
    app.command("rollover")(rollover)


def rollover(
    ctx: typer.Context,
    scope: Annotated[
        str | None, typer.Option("--scope", "-s", help="Only this scope (default: all).")
    ] = None,
    at: Annotated[
        str | None, typer.Option("--at", help="Act as if it were this time (ISO-8601).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Run due rollovers, tier refreshes and compactions now (or as of --at)."""
    s = settings(ctx)
    clock: Clock = SystemClock()
    if at is not None:
        try:
            when = datetime.fromisoformat(at.replace("Z", "+00:00"))
        except ValueError as exc:
            raise fail(f"--at {at!r} is not an ISO-8601 time", 1) from exc
        if when.tzinfo is None:
            when = when.replace(tzinfo=calendar.zone(s.memory.timezone))
        clock = ManualClock(when)
    targets = [scope_arg(scope)] if scope else None

    async def go() -> dict[str, Any]:
        async with core_for(s, clock=clock, background=False) as core:
            # The scheduler's own sweep: one code path for cron, catch-up and this command.
            with progress_bar(quiet=as_json) as progress:
                task = progress.add_task("rollover", total=None)
                report = await core.scheduler.sweep(
                    only=targets,
                    force=True,
                    progress=lambda r: progress.update(task, completed=r.worked, total=r.queued),
                )
            await core.scheduler.record("manual", report)
            return report.as_dict()

    totals = run(go())
    if as_json:
        print_json(totals)
    else:
        left = len(totals["broken"]) + len(totals["held"])
        out.print(
            f"{totals['queued']} scopes due: {totals['days_closed']} days closed, "
            f"{totals['weeks']} weeks, {totals['refreshes']} tier refreshes, "
            f"{totals['compactions']} compactions, {totals['failed']} failed "
            f"(retried later), {left} scope{'' if left == 1 else 's'} skipped, "
            f"in {totals['seconds']:.1f}s.",
            markup=False,
        )
        for line in skipped_lines(totals):
            err.print(line, markup=False, emoji=False)
    if targets is not None and any(b["scope"] in targets for b in totals["broken"]):
        raise typer.Exit(1)  # the one scope asked for cannot be rolled over until fixed


def skipped_lines(totals: dict[str, Any]) -> list[str]:
    """One line per scope the sweep left alone, saying why and what happens next."""
    lines = [f"{b['scope']}: skipped, {b['reason']}" for b in totals["broken"]]
    for held in totals["held"]:
        holder = held["holder"]
        who = "an unknown holder"
        if holder is not None:
            since = calendar.from_ms(holder["since_ms"]).strftime("%H:%M:%S")
            who = f"{holder['host']} pid {holder['pid']} (since {since} UTC)"
        lines.append(
            f"{held['scope']}: skipped, its maintenance lock is held by {who} until "
            f"{held['until'] or 'it is released'}; the next sweep tries again"
        )
    return lines
