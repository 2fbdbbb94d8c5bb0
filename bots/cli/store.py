"""``memorybot store status|stop``: the embedded store's server, seen and stopped by hand.

Without ``REDIS_URL`` memorybot runs a Valkey server for its data directory; it starts with
the first memorybot process and stops with the last one. ``status`` says whether it runs, for
whom, and where its files are; ``stop`` stops one left behind (its last memorybot process was
killed), and refuses while a memorybot process uses it. ``bots/cli/main.py`` adds this with
``register(app)``.
"""

from __future__ import annotations

from pathlib import Path

import typer

from bots.cli.common import err, fail, out, settings
from memory_core.errors import StoreError
from memory_core.store import embedded

store_app = typer.Typer(
    help="The embedded store (a Valkey server memorybot runs when REDIS_URL is unset).",
    no_args_is_help=True,
    rich_markup_mode=None,
)


def register(app: typer.Typer) -> None:
    app.add_typer(store_app, name="store")


def _data_dir(ctx: typer.Context) -> tuple[Path, str | None]:
    s = settings(ctx)
    external = None if s.store.redis_url is None else "REDIS_URL is set: memorybot uses that Redis"
    return s.store.data_dir, external


@store_app.command("status")
def status(ctx: typer.Context) -> None:
    """Whether the embedded server runs, its pid, socket and files. Starts nothing."""
    data_dir, external = _data_dir(ctx)
    if external:
        err.print(f"note: {external}, not the embedded store", markup=False)
    try:
        report = embedded.status(data_dir)
    except StoreError as exc:
        raise fail(str(exc), 2) from exc
    for line in report.lines():
        out.print(line, markup=False)


@store_app.command("stop")
def stop(ctx: typer.Context) -> None:
    """Stop the embedded server (refused while a memorybot process uses it)."""
    data_dir, external = _data_dir(ctx)
    if external:
        err.print(f"note: {external}, not the embedded store", markup=False)
    try:
        pid = embedded.stop(data_dir)
    except StoreError as exc:
        raise fail(str(exc), 1) from exc
    if pid is None:
        out.print("embedded store: not running", markup=False)
    else:
        out.print(
            f"embedded store: stopped valkey-server (pid {pid}); its data stays", markup=False
        )
