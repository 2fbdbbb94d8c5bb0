"""``memorybot``: the command line. Each command builds the core once, does one job, closes.

Exit status: 0 done; 1 the command failed (bad input, a failed check); 2 memorybot cannot
start (invalid settings, unreachable Redis, an embedded store that cannot start).

This module only builds the app: the app-wide options go into typer's context (see
:class:`bots.cli.common.CliOptions`), and each command module adds its commands with
``register``. Command modules import :mod:`bots.cli.common`, never this module.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Annotated

import typer

from bots.cli import bench, chat, dashboard, doctor, learn, memory, replay, rollover, serve, store
from bots.cli import eval as locomo_eval
from bots.cli.common import CliOptions

app = typer.Typer(
    name="memorybot",
    help="A Discord and Slack bot that remembers, per channel.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Help is plain text: "show [overview|tiers|facts|stats]" is not markup.
    rich_markup_mode=None,
)


@app.callback()
def main_options(
    ctx: typer.Context,
    config: Annotated[
        Path | None, typer.Option("--config", "-c", help="Settings file (TOML).")
    ] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log more.")] = False,
) -> None:
    ctx.obj = CliOptions(config=config, verbose=verbose)
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )


bench_app = typer.Typer(help="Performance benchmarks.", no_args_is_help=True, rich_markup_mode=None)
app.add_typer(bench_app, name="bench")
# The order of --help: the commands in the order registered, then the groups.
dashboard.register(app)
serve.register(app)
chat.register(app)
replay.register(app)
learn.register(app)
memory.register(app)
rollover.register(app)
doctor.register(app)
bench.register(bench_app)
locomo_eval.register(app)
store.register(app)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
