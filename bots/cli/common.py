"""What every ``memorybot`` command shares: the options of the app callback, settings
loading, output, and the translation of memorybot's errors into exit statuses.

Command modules import this one and nothing else of the CLI, so the package has no import
cycle: ``bots/cli/main.py`` builds the app and calls each module's ``register(app)``.

Exit status: 0 done; 1 the command failed (bad input, a failed check); 2 memorybot cannot
start (invalid settings, unreachable Redis, an embedded store that cannot start).
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from config.settings import Settings, SettingsError, load_settings
from memory_core.bootstrap import Core, build_core
from memory_core.clock import Clock
from memory_core.errors import (
    ConfigError,
    InputError,
    MemorybotError,
    StoreError,
)
from memory_core.scopes import parse_scope
from memory_core.text.repair import repair

# What memorybot prints holds user text (messages, scope names, paths): never markup, never
# emoji codes (":100:" in "discord:100:2" stays as it is).
out = Console(highlight=False, soft_wrap=True, markup=False, emoji=False)
err = Console(stderr=True, highlight=False, soft_wrap=True, markup=False, emoji=False)
T = TypeVar("T")

ScopeOpt = Annotated[
    str, typer.Option("--scope", "-s", help="A scope (discord:G:C, slack:T:C) or a console name.")
]


@dataclass(frozen=True, slots=True)
class CliOptions:
    """The app-wide options, kept in typer's context (``ctx.obj``) by the app callback."""

    config: Path | None = None
    verbose: bool = False


def options(ctx: typer.Context) -> CliOptions:
    """The app-wide options; the defaults when a command runs without the app callback (a
    sub-app registered on its own, as tests do)."""
    found = ctx.find_object(CliOptions)
    return found if found is not None else CliOptions()


def print_json(data: Any) -> None:
    """JSON output is plain JSON on stdout, untouched by rich."""
    sys.stdout.write(json.dumps(data, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def say(text: str) -> None:
    out.print(text, markup=False)


def fail(message: str, code: int) -> typer.Exit:
    err.print(f"error: {message}", markup=False)
    return typer.Exit(code)


def settings(ctx: typer.Context) -> Settings:
    try:
        return load_settings(options(ctx).config)
    except SettingsError as exc:
        raise fail(str(exc), 2) from exc


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run a command's coroutine; translate memorybot's errors into messages and exit codes."""
    try:
        return asyncio.run(coro)
    except (StoreError, ConfigError) as exc:  # StoreUnavailable included: cannot start
        raise fail(str(exc), 2) from exc
    except MemorybotError as exc:  # bad input, a refused operation: the command failed
        raise fail(str(exc), 1) from exc


def run_input(read: Callable[[], T]) -> T:
    """Read an input file; a file that cannot be read is bad input (exit status 1)."""
    try:
        return read()
    except InputError as exc:
        raise fail(str(exc), 1) from exc


def argument(value: str, name: str) -> str:
    """A command-line argument as memory can keep it. The shell hands over bytes: those that
    are not UTF-8 reach Python as lone surrogates (``surrogateescape``), which no UTF-8
    encoder takes; they become U+FFFD, the rest is kept, and one line on stderr says so."""
    repaired = repair(value)
    if repaired is not value:
        err.print(
            f"warning: {name} is not UTF-8 text: it was kept with U+FFFD in place of the "
            "bytes that are not; give UTF-8 text (check your terminal's or locale's encoding)",
            markup=False,
        )
    return repaired


def scope_arg(text: str) -> str:
    """A ``--scope`` value, checked; a bad one is bad input (exit status 1)."""
    try:
        return parse_scope(text)
    except InputError as exc:
        raise fail(str(exc), 1) from exc


@asynccontextmanager
async def core_for(
    s: Settings, *, clock: Clock | None = None, background: bool = True, helpers: bool = False
) -> AsyncIterator[Core]:
    """A core for a command; ``helpers``: the embedding helper processes too (the console;
    a one-shot command does without)."""
    core = await build_core(s, clock=clock, background=background, helpers=helpers)
    try:
        yield core
    finally:
        await core.close()


def progress_bar(*, quiet: bool) -> Progress:
    """A progress bar on stderr, shown only on a terminal and never with ``--json``."""
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        disable=quiet or not err.is_terminal,
        transient=True,
    )
