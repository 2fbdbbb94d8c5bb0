"""``memorybot learn``: a channel's past, from its platform or from an export file.

Each learn reads first (nothing is learned, no model is called), shows what it found and
what summarising it will take, asks (``--yes`` does not), then stores it. A learn stopped
half-way (Ctrl-C, a rate limit past ``learn.max_wait_s``, a restart) goes on where it
stopped when run again; what memory holds already is never stored twice, and what was
forgotten is never learned again.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from bots.cli.common import (
    core_for,
    fail,
    out,
    print_json,
    progress_bar,
    run,
    scope_arg,
    settings,
)
from memory_core.bootstrap import Core
from memory_core.service.learning import LearnProgress
from memory_core.service.past import PastSource, by_place

learn_app = typer.Typer(
    help="Learn a channel's past: from Slack or Discord, or from an export file.",
    no_args_is_help=True,
    rich_markup_mode=None,
)

YesOpt = Annotated[
    bool, typer.Option("--yes", "-y", help="Do not ask before summarising what was read.")
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the outcome as JSON.")]
PlaceOpt = Annotated[
    str,
    typer.Option(
        "--scope", help="The channel: discord:<guild>:<channel> or slack:<team>:<channel>."
    ),
]


DaysOpt = Annotated[
    int | None,
    typer.Option("--days", min=1, help="How many days back (default: learn.default_days)."),
]


def register(app: typer.Typer) -> None:
    app.add_typer(learn_app, name="learn")
    learn_app.command("slack")(slack_history)
    learn_app.command("discord")(discord_history)
    learn_app.command("slack-export")(slack_export)
    learn_app.command("discord-export")(discord_export)
    learn_app.command("status")(status)
    learn_app.command("cancel")(cancel)


# -- the commands ----------------------------------------------------------------------
def slack_history(
    ctx: typer.Context,
    channel: Annotated[str, typer.Option("--channel", help="The channel's id (C..., G..., D...).")],
    days: DaysOpt = None,
    yes: YesOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Learn a Slack channel's past (and its threads) with the bot's token."""
    from bots.learn.slack_history import slack_past
    from bots.slack.bot import SlackBot
    from bots.slack.connect import build_client

    s = settings(ctx)
    if s.slack.bot_token is None:
        raise fail("set SLACK_BOT_TOKEN (the bot token, xoxb-...) to read Slack's history", 2)
    wanted = _days(s, days)

    async def go() -> None:
        async with core_for(s, background=False) as core:
            bot = SlackBot(core)
            client = build_client(s.slack)
            try:
                who = await client.auth_test()
            except Exception as exc:
                raise fail(f"Slack refused the bot token: {exc}", 2) from exc
            learn = s.learn
            source = slack_past(
                bot,
                client,
                team_id=str(who["team_id"]),
                channel_id=channel,
                bot_user_id=str(who["user_id"]),
                bot_id=str(who.get("bot_id") or ""),
                restricted=learn.slack_requests_per_minute <= 1,
                requests_per_minute=learn.slack_requests_per_minute,
                max_wait_s=learn.max_wait_s,
            )
            await _learn_in(core, [source], days=wanted, yes=yes, as_json=as_json)

    run(go())


def discord_history(
    ctx: typer.Context,
    channel: Annotated[int, typer.Option("--channel", help="The channel's id.")],
    days: DaysOpt = None,
    yes: YesOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Learn a Discord channel's past (its threads too, or a forum's posts) as the bot."""
    s = settings(ctx)
    if s.discord.token is None:
        raise fail("set DISCORD_TOKEN (the bot's token) to read Discord's history", 2)
    wanted = _days(s, days)
    token = s.discord.token.get_secret_value()

    async def go() -> None:
        import discord

        from bots.discord.bot import bot_intents, discord_endpoints
        from bots.learn.discord_history import discord_past

        async with core_for(s, background=False) as core:
            with discord_endpoints(s.discord):
                client = discord.Client(intents=bot_intents())
                started = asyncio.create_task(client.start(token))
                try:
                    await _ready(client, started)
                    source = await discord_past(
                        client, channel, bot_name=s.bot.name, max_wait=s.learn.max_wait_s
                    )
                    await _learn_in(core, [source], days=wanted, yes=yes, as_json=as_json)
                finally:
                    await client.close()
                    with contextlib.suppress(asyncio.CancelledError, discord.DiscordException):
                        await started

    run(go())


def slack_export(
    ctx: typer.Context,
    file: Annotated[Path, typer.Argument(help="The workspace export (.zip).")],
    team: Annotated[str, typer.Option("--team", help="The workspace's id (T...).")],
    include_private: Annotated[
        bool,
        typer.Option(
            "--include-private",
            help="Also private channels, DMs and group DMs (a full export), each to its own place.",
        ),
    ] = False,
    yes: YesOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Import a Slack workspace export: each channel to its place, threads rebuilt."""
    from bots.learn.slack_export import slack_export_sources

    s = settings(ctx)
    if not file.is_file():
        raise fail(f"{file} does not exist", 1)
    sources = _sources(lambda: slack_export_sources(file, team, include_private=include_private))
    run(_learn(s, sources, days=None, yes=yes, as_json=as_json))


def discord_export(
    ctx: typer.Context,
    files: Annotated[
        list[Path], typer.Argument(help="DiscordChatExporter JSON files (a thread is a file).")
    ],
    public: Annotated[
        bool,
        typer.Option(
            "--public",
            help="The channels were readable by the whole server (an export does not say).",
        ),
    ] = False,
    bot_user_id: Annotated[
        str, typer.Option("--bot-user-id", help="The bot's own user id: its messages are kept.")
    ] = "",
    yes: YesOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Import DiscordChatExporter JSON exports: each channel to its place."""
    from bots.learn.discord_export import discord_export_sources

    s = settings(ctx)
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise fail(f"{', '.join(missing)} does not exist", 1)
    sources = _sources(
        lambda: discord_export_sources(files, public=public, bot_user_id=bot_user_id)
    )
    run(_learn(s, sources, days=None, yes=yes, as_json=as_json))


def status(ctx: typer.Context, scope: PlaceOpt, as_json: JsonOpt = False) -> None:
    """Where the learn of a channel is."""
    s = settings(ctx)
    target = scope_arg(scope)

    async def go() -> LearnProgress:
        async with core_for(s, background=False) as core:
            return await core.learner.status(target)

    progress = run(go())
    if as_json:
        print_json(progress_json(progress))
    else:
        out.print(describe(progress), markup=False)


def cancel(ctx: typer.Context, scope: PlaceOpt) -> None:
    """Stop the learn of a channel; what it read and did not store is dropped."""
    s = settings(ctx)
    target = scope_arg(scope)

    async def go() -> bool:
        async with core_for(s, background=False) as core:
            return await core.learner.cancel(target)

    if run(go()):
        out.print(f"The learn of {target} is cancelled.", markup=False)
    else:
        raise fail(f"no learn of {target} is running", 1)


# -- shared ---------------------------------------------------------------------------
def _sources(make: Callable[[], Sequence[PastSource]]) -> list[PastSource]:
    from memory_core.service.past import LearnRefused

    try:
        found = by_place(make())  # (an export's thread is its own file: one learn a channel)
    except LearnRefused as exc:
        raise fail(str(exc), 1) from exc
    if not found:
        raise fail("nothing to learn: the export holds no conversation memorybot keeps", 1)
    return found


def _days(s: Any, days: int | None) -> int:
    wanted = days or s.learn.default_days
    if wanted > s.learn.max_days:
        raise fail(f"at most {s.learn.max_days} days (learn.max_days)", 1)
    return int(wanted)


async def _ready(client: Any, started: asyncio.Task[None]) -> None:
    """The Discord client connected, or why not (a bad token: exit status 2)."""
    await asyncio.sleep(0)  # (start() creates the ready event first)
    ready = asyncio.ensure_future(client.wait_until_ready())
    done, _ = await asyncio.wait({ready, started}, timeout=60, return_when=asyncio.FIRST_COMPLETED)
    if started in done:
        ready.cancel()
        error = started.exception()
        raise fail(f"Discord refused the bot: {error or 'the connection closed'}", 2)
    if ready not in done:
        ready.cancel()
        raise fail("Discord did not answer within 60 s", 2)


async def _learn(
    s: Any, sources: Sequence[PastSource], *, days: int | None, yes: bool, as_json: bool
) -> None:
    async with core_for(s, background=False) as core:
        await _learn_in(core, sources, days=days, yes=yes, as_json=as_json)


async def _learn_in(
    core: Core, sources: Sequence[PastSource], *, days: int | None, yes: bool, as_json: bool
) -> None:
    """Read every source, show what was found, ask, store."""
    read = [await _read(core, source, days, quiet=as_json) for source in sources]
    found = [r for r in read if r.new]
    if not as_json:
        for progress in read:
            out.print(describe(progress), markup=False)
    if found and not yes and not as_json:
        tokens = sum(r.estimate_tokens for r in found)
        if not typer.confirm(
            f"Learn {sum(r.new for r in found)} messages"
            f" (about {tokens:,} tokens of summaries{_budget_note(core)})?",
            default=True,
        ):
            raise fail("nothing learned (run the same command again to go on)", 1)
    stored = [await _store(core, r.place, quiet=as_json) for r in found]
    await core.drain()
    if as_json:
        print_json(
            {"read": [progress_json(r) for r in read], "stored": [progress_json(r) for r in stored]}
        )
    else:
        for progress in stored:
            out.print(describe(progress), markup=False)


async def _read(core: Core, source: PastSource, days: int | None, *, quiet: bool) -> LearnProgress:
    with progress_bar(quiet=quiet) as bar:
        task = bar.add_task(f"reading {source.place}", total=None)
        return await core.learner.read(
            source, days=days, progress=lambda p: bar.update(task, completed=p.read)
        )


async def _store(core: Core, place: str, *, quiet: bool) -> LearnProgress:
    with progress_bar(quiet=quiet) as bar:
        new = (await core.learner.status(place)).new
        task = bar.add_task(f"learning {place}", total=new)
        return await core.learner.store_read(
            place, progress=lambda p: bar.update(task, completed=p.stored + p.not_stored)
        )


def _budget_note(core: Core) -> str:
    budget = core.settings.budget
    if budget.daily_tokens or budget.server_daily_tokens:
        return "; past a daily budget, summaries are made without the model"
    return ""


def describe(progress: LearnProgress) -> str:
    """One paragraph on a learn, for a person."""
    if not progress.status:
        return f"{progress.place}: no learn yet."
    when = ""
    if progress.first_ms:
        first = datetime.fromtimestamp(progress.first_ms / 1000, UTC).date()
        last = datetime.fromtimestamp(progress.last_ms / 1000, UTC).date()
        when = f" from {first} to {last} ({progress.span_days} days)"
    lines = [
        f"{progress.place} ({progress.source}): {progress.status}.",
        f"  read {progress.read} messages: {progress.new} new{when}, "
        f"{progress.known} already remembered, {progress.forgotten} forgotten here "
        f"(never learned again), {progress.skipped} from bots or the system.",
    ]
    if progress.status in ("read", "storing") and progress.new:
        lines.append(f"  summarising them takes about {progress.estimate_tokens:,} tokens.")
    if progress.stored or progress.not_stored or progress.status == "done":
        lines.append(
            f"  learned {progress.stored}, {progress.day_records} day records, "
            f"{progress.weeks} weeks"
            + (
                f"; {progress.not_stored} not stored (said on days already closed here)"
                if progress.not_stored
                else ""
            )
            + "."
        )
    lines += [f"  note: {note}" for note in progress.notes]
    return "\n".join(lines)


def progress_json(progress: LearnProgress) -> dict[str, Any]:
    return asdict(progress)
