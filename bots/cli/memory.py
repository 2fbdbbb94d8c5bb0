"""``memorybot memory ...``: the /memory admin commands, from the shell.

The words go through :func:`bots.frontdoor.run_command`, the one entry point every front
door uses, as an admin actor; only ``import FILE`` (a file on this machine, which no chat
command can read) is the CLI's own.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from bots.cli.common import ScopeOpt, core_for, err, fail, out, run, scope_arg, settings
from bots.commands import Actor, parse_command
from bots.frontdoor import run_command
from config.settings import Settings
from memory_core.errors import InputError
from memory_core.text.language import resolve

HELP = (
    "Admin operations: show [overview|tiers|facts|stats], forget all confirm | "
    "me [everywhere] | fact ID | TEXT, remember TEXT, export [--out F], import FILE "
    "[--replace], pause, resume, config KEY VALUE. In a channel they reach its threads; "
    "'forget me everywhere --user ID' reaches every place of its server."
)


def register(app: typer.Typer) -> None:
    app.command("memory", context_settings={"allow_extra_args": False}, help=HELP)(memory)


def memory(
    ctx: typer.Context,
    words: Annotated[list[str], typer.Argument(help="The /memory command words.")],
    scope: ScopeOpt = "default",
    user: Annotated[str, typer.Option("--user", "-u", help="Who 'forget me' means.")] = "you",
    out_file: Annotated[Path | None, typer.Option("--out", "-o", help="export: file")] = None,
    replace: Annotated[bool, typer.Option("--replace", help="import: replace memory")] = False,
) -> None:
    s = settings(ctx)
    target = scope_arg(scope)
    if words[0] == "import":
        _import(s, target, words, replace=replace)
        return
    # Parsed here so that a malformed command is an error on stderr (exit status 1) before
    # any store is opened; run_command would answer it as a result.
    try:
        command = parse_command(" ".join(words))
    except InputError as exc:
        raise fail(str(exc), 1) from exc

    async def go() -> Any:
        async with core_for(s) as core:
            return await run_command(
                core,
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


def _import(s: Settings, target: str, words: list[str], *, replace: bool) -> None:
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
