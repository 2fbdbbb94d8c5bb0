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

from bots.cli.common import (
    ScopeOpt,
    argument,
    core_for,
    err,
    fail,
    out,
    run,
    run_input,
    scope_arg,
    settings,
)
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
    if words[0] == "import":  # FILE is a path: its bytes name the file, kept as they are
        _import(s, target, words, replace=replace)
        return
    typed = argument(" ".join(words), "the command")  # "remember caf\xe9": kept, with U+FFFD
    user = argument(user, "--user")
    # Parsed here so that a malformed command is an error on stderr (exit status 1) before
    # any store is opened; run_command would answer it as a result.
    try:
        command = parse_command(typed)
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


EXPECTED = "a memorybot export (the UTF-8 JSON file 'memorybot memory export --out FILE' writes)"


def read_export(source: Path) -> Any:
    """The JSON of an export file, or InputError in one line: which file, what is wrong
    with it, what is expected. Read as bytes, so a binary file (an image, a program) or a
    file that is not UTF-8 is refused by name, not a UnicodeDecodeError. A byte order mark
    (an editor on Windows) is fine."""
    try:
        raw = source.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read {source}: {exc.strerror or exc}") from exc
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):  # saved as "Unicode" by some editors
        raise InputError(f"cannot import {source}: it is UTF-16 text; save it as UTF-8")
    if b"\0" in raw:  # no text file holds a NUL byte; images and programs do
        raise InputError(f"cannot import {source}: it is a binary file, not {EXPECTED}")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise InputError(
            f"cannot import {source}: it is not UTF-8 text (byte 0x{raw[exc.start]:02x} on "
            f"line {line}); save it as UTF-8, or give {EXPECTED}"
        ) from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(
            f"cannot import {source}: not valid JSON ({exc.msg} at line {exc.lineno}, "
            f"column {exc.colno}); give {EXPECTED}"
        ) from exc
    except (ValueError, RecursionError) as exc:  # a 5,000-digit number, nesting too deep
        raise InputError(
            f"cannot import {source}: not valid JSON ({type(exc).__name__}); give {EXPECTED}"
        ) from exc


def _import(s: Settings, target: str, words: list[str], *, replace: bool) -> None:
    if len(words) != 2:
        raise fail("usage: memorybot memory import FILE --scope S [--replace]", 1)
    source = Path(words[1])
    data = run_input(lambda: read_export(source))

    async def do_import() -> int:
        async with core_for(s) as core:
            return await core.admin.import_(target, data, replace=replace)

    count = run(do_import())
    out.print(f"Imported {count} messages into {target}.", markup=False)
