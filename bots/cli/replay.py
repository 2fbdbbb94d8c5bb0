"""``memorybot replay``: import a transcript, its timestamps driving the clock."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from bots.cli.common import (
    ScopeOpt,
    core_for,
    err,
    fail,
    out,
    print_json,
    progress_bar,
    run,
    run_input,
    scope_arg,
    settings,
)
from memory_core.clock import ManualClock, SystemClock

if TYPE_CHECKING:
    from memory_core.bootstrap import Core
    from memory_core.service.replay import ReplayReport


def register(app: typer.Typer) -> None:
    app.command("replay")(replay)


def replay(
    ctx: typer.Context,
    file: Annotated[
        Path, typer.Argument(help="JSON lines: {ts, user, text, role?, scope?, id?, user_id?}")
    ],
    scope: ScopeOpt = "replay",
    no_reply: Annotated[
        bool, typer.Option("--no-reply", help="Store only; do not ask the LLM to answer.")
    ] = False,
    strict: Annotated[
        bool, typer.Option("--strict", help="Abort on any bad line, before storing anything.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    outage_wait: Annotated[
        float,
        typer.Option(
            "--outage-wait",
            min=0,
            help="Seconds to wait for Redis if it goes away mid-replay, before giving up.",
        ),
    ] = 60.0,
) -> None:
    """Import a transcript; its timestamps drive the clock, so days and weeks roll over.
    Each line is stored once, however often the file is replayed."""
    from memory_core.service.replay import replay as do_replay

    s = settings(ctx)
    target = scope_arg(scope)
    lines, total = _lines_of(file, strict=strict)

    async def go() -> dict[str, Any]:
        clock = ManualClock()
        async with core_for(s, clock=clock, background=False) as core:
            start_calls = core.llm.stats.calls()
            with progress_bar(quiet=as_json) as progress:
                task = progress.add_task("replaying", total=total)
                report = await do_replay(
                    core,
                    clock,
                    lines,
                    default_scope=target,
                    reply=not no_reply,
                    on_line=lambda r: progress.update(task, completed=r.lines),
                    outage_wait_s=outage_wait,
                )
            return _summary(core, report, start_calls)

    result = run(go())
    if as_json:
        print_json(result)
    else:
        _print_replay(file, target, result)
    if result["skipped"] and not (result["stored"] or result["duplicates"] or result["forgotten"]):
        raise fail(f"no line of {file} could be replayed", 1)


def _lines_of(file: Path, *, strict: bool) -> tuple[Any, int]:
    """The lines to replay and how many there are; ``strict``: every line checked first,
    and nothing replayed when one is bad."""
    from memory_core.service.replay import count_lines, read_lines, validate_all

    if not file.is_file():
        raise fail(f"{file} does not exist", 1)
    now = SystemClock().now()  # lines dated later than a day from now are refused
    if not strict:
        return read_lines(file, now=now), run_input(lambda: count_lines(file))
    good, bad = run_input(lambda: validate_all(file, now=now))
    if bad:
        for problem in bad:
            err.print(f"{file}:{problem}", markup=False)
        raise fail(f"{len(bad)} bad line(s); nothing was stored (--strict)", 1)
    return good, len(good)


def _summary(core: Core, report: ReplayReport, start_calls: int) -> dict[str, Any]:
    """The replay's report, with the days it closed and the model calls it made."""
    stats = core.llm.stats
    reports = core.maintenance.reports
    return {
        "lines": report.lines,
        "stored": report.stored,
        "duplicates": report.duplicates,
        "forgotten": report.forgotten,
        "replies": report.replies,
        "apologies": report.apologies,
        "skipped": [{"line": e.line_no, "reason": e.reason} for e in report.skipped],
        "out_of_order": report.out_of_order,
        "scopes": sorted(report.scopes),
        "days_rolled_over": sum(r.days_closed for r in reports),
        "compactions": sum(r.compactions for r in reports),
        "llm_calls": {
            "total": stats.calls() - start_calls,
            "reply": stats.of("reply").calls,
            "compact": stats.of("compact").calls,
            "refresh": stats.of("refresh").calls,
        },
        "offline": core.llm.offline,
    }


def _print_replay(file: Path, target: str, result: dict[str, Any]) -> None:
    out.print(
        f"Replayed {result['lines']} lines into {', '.join(result['scopes']) or target}: "
        f"{result['stored']} stored, {result['duplicates']} already stored, "
        f"{result['forgotten']} forgotten before, "
        f"{result['replies']} replies, "
        f"{result['days_rolled_over']} days rolled over, "
        f"{result['llm_calls']['total']} LLM calls "
        f"(compaction {result['llm_calls']['compact']}, tiers {result['llm_calls']['refresh']}, "
        f"replies {result['llm_calls']['reply']}).",
        markup=False,
    )
    for item in result["skipped"]:
        err.print(f"skipped {file}:{item['line']}: {item['reason']}", markup=False)
