"""``memorybot store status|stop|compact``: the store's server, seen, stopped and compacted.

Without ``REDIS_URL`` memorybot runs a Valkey server for its data directory; it starts with
the first memorybot process and stops with the last one. ``status`` says whether it runs, for
whom, and where its files are; ``stop`` stops one left behind (its last memorybot process was
killed), and refuses while a memorybot process uses it. ``compact`` has the store's server
(the embedded one, or the Redis at ``REDIS_URL``) rewrite its files now, so what was forgotten
leaves them too (see ``docs/erasure.md``); on the embedded store that also settles a forget's
rewrite a crash left owed (``status`` and ``doctor`` show one). ``bots/cli/main.py`` adds this
with ``register(app)``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import typer

from bots.cli.common import err, fail, out, settings
from memory_core.errors import StoreError, StoreUnavailable
from memory_core.store import embedded
from memory_core.store.erasure_record import erasure_pending
from memory_core.store.server import compact as compact_store

store_app = typer.Typer(
    help="The store: the embedded Valkey server (when REDIS_URL is unset), and compaction.",
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
    if report.erasure_owed:
        out.print(f"erasure pending: {erasure_pending(report.files)}", markup=False)


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


@store_app.command("compact")
def compact(ctx: typer.Context) -> None:
    """Rewrite the store's files now (BGREWRITEAOF, BGSAVE) so forgotten text leaves them."""
    s = settings(ctx)
    try:
        lines = asyncio.run(compact_store(s.store))
    except StoreUnavailable as exc:
        raise fail(str(exc), 2) from exc
    except StoreError as exc:
        raise fail(str(exc), 1) from exc
    for line in lines:
        out.print(line, markup=False)
    if s.store.redis_url is not None:
        out.print(
            "backups, replicas' own files and copies of older snapshots keep what they hold: "
            "see docs/erasure.md",
            markup=False,
        )
