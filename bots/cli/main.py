"""``memorybot``: the command line. Each command builds the core once, does one job, closes.

Exit status: 0 done; 1 the command failed (bad input, a failed check); 2 memorybot cannot
start (invalid settings, unreachable Redis, an embedded store that cannot start).
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from bots.cli.bench import register as register_bench
from bots.cli.dashboard import register as register_dashboard
from bots.cli.eval import register as register_eval
from bots.cli.store import register as register_store
from bots.commands import Actor, execute, parse_command
from config.settings import Settings, SettingsError, load_settings
from memory_core import calendar
from memory_core.bootstrap import Core, build_core
from memory_core.clock import Clock, ManualClock, SystemClock
from memory_core.errors import (
    ConfigError,
    InputError,
    MemorybotError,
    PermissionDenied,
    StoreError,
    StoreUnavailable,
)
from memory_core.models import IncomingMessage
from memory_core.scopes import parse_scope
from memory_core.text.language import resolve

app = typer.Typer(
    name="memorybot",
    help="A Discord and Slack bot that remembers, per channel.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Help is plain text: "show [overview|tiers|facts|stats]" is not markup.
    rich_markup_mode=None,
)
bench_app = typer.Typer(help="Performance benchmarks.", no_args_is_help=True, rich_markup_mode=None)
app.add_typer(bench_app, name="bench")
register_eval(app)
register_bench(bench_app)
register_dashboard(app)
register_store(app)

# What memorybot prints holds user text (messages, scope names, paths): never markup, never
# emoji codes (":100:" in "discord:100:2" stays as it is).
out = Console(highlight=False, soft_wrap=True, markup=False, emoji=False)
err = Console(stderr=True, highlight=False, soft_wrap=True, markup=False, emoji=False)
T = TypeVar("T")

ScopeOpt = Annotated[
    str, typer.Option("--scope", "-s", help="A scope (discord:G:C, slack:T:C) or a console name.")
]


class State:
    config: Path | None = None
    verbose: bool = False


STATE = State()


@app.callback()
def main_options(
    config: Annotated[
        Path | None, typer.Option("--config", "-c", help="Settings file (TOML).")
    ] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log more.")] = False,
) -> None:
    STATE.config = config
    STATE.verbose = verbose
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )


def print_json(data: Any) -> None:
    """JSON output is plain JSON on stdout, untouched by rich."""
    sys.stdout.write(json.dumps(data, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def fail(message: str, code: int) -> typer.Exit:
    err.print(f"error: {message}", markup=False)
    return typer.Exit(code)


def settings() -> Settings:
    try:
        return load_settings(STATE.config)
    except SettingsError as exc:
        raise fail(str(exc), 2) from exc


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run a command's coroutine; translate memorybot's errors into messages and exit codes."""
    try:
        return asyncio.run(coro)
    except (StoreUnavailable, ConfigError) as exc:
        raise fail(str(exc), 2) from exc
    except StoreError as exc:
        raise fail(str(exc), 2) from exc
    except (InputError, PermissionDenied) as exc:
        raise fail(str(exc), 1) from exc
    except MemorybotError as exc:
        raise fail(str(exc), 1) from exc


@asynccontextmanager
async def core_for(
    s: Settings, *, clock: Clock | None = None, background: bool = True
) -> AsyncIterator[Core]:
    core = await build_core(s, clock=clock, background=background)
    try:
        yield core
    finally:
        await core.close()


# -- run -------------------------------------------------------------------------------
@app.command("run")
def run_command(
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
    from bots.runner import run_bots

    s = settings()
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


# -- console ---------------------------------------------------------------------------
@app.command()
def console(
    scope: ScopeOpt = "default",
    user: Annotated[str, typer.Option("--user", "-u", help="Your name in the chat.")] = "you",
) -> None:
    """Chat in the terminal (/memory commands work). Piped stdin: one answer per line."""
    from bots.console import run_console

    s = settings()
    target = _scope(scope)

    async def go() -> int:
        async with core_for(s) as core:
            return await run_console(core, scope=target, user=user)

    raise typer.Exit(run(go()))


def _scope(text: str) -> str:
    try:
        return parse_scope(text)
    except InputError as exc:
        raise fail(str(exc), 1) from exc


# -- replay ----------------------------------------------------------------------------
@app.command()
def replay(
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
    from memory_core.service.replay import count_lines, read_lines, validate_all
    from memory_core.service.replay import replay as do_replay

    s = settings()
    target = _scope(scope)
    if not file.is_file():
        raise fail(f"{file} does not exist", 1)
    now = SystemClock().now()  # lines dated later than a day from now are refused
    if strict:
        good, bad = run_input(lambda: validate_all(file, now=now))
        if bad:
            for problem in bad:
                err.print(f"{file}:{problem}", markup=False)
            raise fail(f"{len(bad)} bad line(s); nothing was stored (--strict)", 1)
        lines: Any = good
        total = len(good)
    else:
        lines = read_lines(file, now=now)
        total = run_input(lambda: count_lines(file))

    async def go() -> dict[str, Any]:
        clock = ManualClock()
        async with core_for(s, clock=clock, background=False) as core:
            start_calls = core.llm.stats.calls()
            with _progress(quiet=as_json) as progress:
                task = progress.add_task("replaying", total=total)
                report = await do_replay(
                    core.pipeline,
                    clock,
                    lines,
                    default_scope=target,
                    reply=not no_reply,
                    on_line=lambda r: progress.update(task, completed=r.lines),
                    outage_wait_s=outage_wait,
                )
            days = sum(r.days_closed for r in core.pipeline.reports)
            stats = core.llm.stats
            return {
                "lines": report.lines,
                "stored": report.stored,
                "duplicates": report.duplicates,
                "replies": report.replies,
                "apologies": report.apologies,
                "skipped": [{"line": e.line_no, "reason": e.reason} for e in report.skipped],
                "out_of_order": report.out_of_order,
                "scopes": sorted(report.scopes),
                "days_rolled_over": days,
                "compactions": sum(r.compactions for r in core.pipeline.reports),
                "llm_calls": {
                    "total": stats.calls() - start_calls,
                    "reply": stats.of("reply").calls,
                    "compact": stats.of("compact").calls,
                    "refresh": stats.of("refresh").calls,
                },
                "offline": core.llm.offline,
            }

    result = run(go())
    if as_json:
        print_json(result)
    else:
        _print_replay(file, target, result)
    if result["skipped"] and not result["stored"] and not result["duplicates"]:
        raise fail(f"no line of {file} could be replayed", 1)


def run_input(read: Callable[[], T]) -> T:
    """Read an input file; a file that cannot be read is bad input (exit status 1)."""
    try:
        return read()
    except InputError as exc:
        raise fail(str(exc), 1) from exc


def _print_replay(file: Path, target: str, result: dict[str, Any]) -> None:
    out.print(
        f"Replayed {result['lines']} lines into {', '.join(result['scopes']) or target}: "
        f"{result['stored']} stored, {result['duplicates']} already stored, "
        f"{result['replies']} replies, "
        f"{result['days_rolled_over']} days rolled over, "
        f"{result['llm_calls']['total']} LLM calls "
        f"(compaction {result['llm_calls']['compact']}, tiers {result['llm_calls']['refresh']}, "
        f"replies {result['llm_calls']['reply']}).",
        markup=False,
    )
    for item in result["skipped"]:
        err.print(f"skipped {file}:{item['line']}: {item['reason']}", markup=False)


def _progress(*, quiet: bool) -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        disable=quiet or not err.is_terminal,
        transient=True,
    )


# -- ask -------------------------------------------------------------------------------
@app.command()
def ask(
    text: Annotated[str, typer.Argument(help="The message to send.")],
    scope: ScopeOpt = "default",
    user: Annotated[str, typer.Option("--user", "-u")] = "you",
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Show the prompt only: no LLM, nothing stored.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object.")] = False,
) -> None:
    """Send one message (or, with --dry-run, show the exact prompt a reply would use)."""
    s = settings()
    target = _scope(scope)
    msg = IncomingMessage(scope=target, text=text, author=user, author_id=user, direct=True)

    async def go() -> dict[str, Any]:
        async with core_for(s, background=False) as core:
            if dry_run:
                prompt = await core.pipeline.build_prompt(msg)
                return {
                    "scope": target,
                    "messages": prompt.messages,
                    "tokens": prompt.tokens,
                    "budget": prompt.budget,
                    "sections": prompt.sections,
                    "window_messages": prompt.window_messages,
                    "language": prompt.language,
                }
            reply = await core.pipeline.handle(msg)
            assert reply is not None  # direct messages are always answered
            return {
                "scope": target,
                "reply": reply.text,
                "kind": reply.kind,
                "tokens": reply.prompt_tokens,
            }

    result = run(go())
    if as_json:
        print_json(result)
    elif dry_run:
        for message in result["messages"]:
            out.print(f"--- {message['role']}", markup=False)
            out.print(message["content"], markup=False)
        out.print(f"--- {result['tokens']} tokens (budget {result['budget']})", markup=False)
    else:
        out.print(result["reply"], markup=False)


# -- memory ----------------------------------------------------------------------------
@app.command(
    context_settings={"allow_extra_args": False},
    help="Admin operations: show [overview|tiers|facts|stats], forget all confirm | "
    "me | fact ID | TEXT, remember TEXT, export [--out F], import FILE [--replace], "
    "pause, resume, config KEY VALUE.",
)
def memory(
    words: Annotated[list[str], typer.Argument(help="The /memory command words.")],
    scope: ScopeOpt = "default",
    user: Annotated[str, typer.Option("--user", "-u", help="Who 'forget me' means.")] = "you",
    out_file: Annotated[Path | None, typer.Option("--out", "-o", help="export: file")] = None,
    replace: Annotated[bool, typer.Option("--replace", help="import: replace memory")] = False,
) -> None:
    s = settings()
    target = _scope(scope)
    if words[0] == "import":
        if len(words) != 2:
            raise fail("usage: memorybot memory import FILE --scope S [--replace]", 1)
        source = Path(words[1])
        try:
            data = json.loads(source.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise fail(f"cannot read {source}: {exc}", 1) from exc

        async def do_import() -> int:
            async with core_for(s) as core:
                return await core.admin.import_(target, data, replace=replace)

        count = run(do_import())
        out.print(f"Imported {count} messages into {target}.", markup=False)
        return
    try:
        command = parse_command(" ".join(words))
    except InputError as exc:
        raise fail(str(exc), 1) from exc

    async def go() -> Any:
        async with core_for(s) as core:
            return await execute(
                core.admin,
                scope=target,
                command=command,
                actor=Actor(user_id=user, name=user, is_admin=True),
                language=resolve(s.memory.language, []),
            )

    result = run(go())
    if result.file is not None:
        blob = result.file[1]
        if out_file is not None:
            out_file.write_bytes(blob)
            err.print(f"{result.title} -> {out_file}", markup=False)
        else:
            sys.stdout.write(blob.decode() + "\n")
        return
    out.print(result.text(), markup=False)
    if not result.ok:
        raise typer.Exit(1)


# -- rollover --------------------------------------------------------------------------
@app.command()
def rollover(
    scope: Annotated[
        str | None, typer.Option("--scope", "-s", help="Only this scope (default: all).")
    ] = None,
    at: Annotated[
        str | None, typer.Option("--at", help="Act as if it were this time (ISO-8601).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Run due rollovers, tier refreshes and compactions now (or as of --at)."""
    s = settings()
    clock: Clock = SystemClock()
    if at is not None:
        try:
            when = datetime.fromisoformat(at.replace("Z", "+00:00"))
        except ValueError as exc:
            raise fail(f"--at {at!r} is not an ISO-8601 time", 1) from exc
        if when.tzinfo is None:
            when = when.replace(tzinfo=calendar.zone(s.memory.timezone))
        clock = ManualClock(when)
    targets = [_scope(scope)] if scope else None

    async def go() -> dict[str, Any]:
        async with core_for(s, clock=clock, background=False) as core:
            # The scheduler's own sweep: one code path for cron, catch-up and this command.
            with _progress(quiet=as_json) as progress:
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
        for line in _skipped_lines(totals):
            err.print(line, markup=False, emoji=False)
    if targets is not None and any(b["scope"] in targets for b in totals["broken"]):
        raise typer.Exit(1)  # the one scope asked for cannot be rolled over until fixed


def _skipped_lines(totals: dict[str, Any]) -> list[str]:
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


# -- doctor ----------------------------------------------------------------------------
@app.command()
def doctor() -> None:
    """Check settings, the store, the LLM, token counting and platform tokens."""
    from bots.cli.doctor import run_checks

    s = settings()
    rows = asyncio.run(run_checks(s))
    table = Table("check", "status", "detail", show_lines=False)
    for name, status, detail in rows:
        colour = {"ok": "green", "warn": "yellow", "fail": "red"}[status]
        # Text cells: a detail (a path, a URL, an error) is printed as it is.
        table.add_row(Text(name), Text(status, style=colour), Text(detail))
    out.print(table)
    if any(status == "fail" for _, status, _ in rows):
        raise typer.Exit(1)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
