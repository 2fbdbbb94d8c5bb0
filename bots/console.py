"""The terminal front door: chat with memorybot, with /memory commands, no tokens needed.

Interactive on a terminal; with piped stdin, one answer per input line (so transcripts and
tests can drive it). The console user is the admin of their console scopes.

Input that is not UTF-8 (a Latin-1 file, random bytes) never stops the console: stdin is
read with ``surrogateescape``, so no byte fails to decode, and each line is repaired
(:func:`memory_core.text.repair.repair`: the bytes that were not UTF-8 become U+FFFD), kept
and said so in one line on stderr; the lines after it are read as usual.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import sys
from collections.abc import AsyncIterator
from typing import TextIO

from rich.console import Console

from bots.commands import Actor, CommandResult
from bots.frontdoor import run_command
from memory_core.bootstrap import Core
from memory_core.errors import MemorybotError
from memory_core.models import IncomingMessage
from memory_core.service.streaming import KeptAnswer
from memory_core.text.language import resolve
from memory_core.text.repair import repair

QUIT = ("/quit", "/exit", "/q")


def tolerate_undecodable(stream: TextIO) -> None:
    """Make ``stream`` decode bytes that are not in its encoding as lone surrogates
    (``surrogateescape``) rather than raise UnicodeDecodeError, which would end the console
    and lose every line after the bad one. ``input()`` decodes with the same handler. Only
    possible before the first read; a stream that cannot be changed is left as it is."""
    if isinstance(stream, io.TextIOWrapper):
        with contextlib.suppress(ValueError, OSError):  # io.UnsupportedOperation is both
            stream.reconfigure(errors="surrogateescape")


async def _lines(stream: TextIO, interactive: bool, prompt: str) -> AsyncIterator[str]:
    while True:
        if interactive:
            try:
                line = await asyncio.to_thread(input, prompt)
            except EOFError:
                return
        else:
            line = await asyncio.to_thread(stream.readline)
            if not line:
                return
        yield line.rstrip("\n")


def not_utf8_note(line_no: int) -> str:
    """The one line that says a line of input was repaired (ASCII: any terminal prints it)."""
    return (
        f"! line {line_no} is not UTF-8 text: it was kept with U+FFFD in place of the bytes "
        "that are not; set your terminal (or the file you pipe in) to UTF-8"
    )


class ConsoleReply(KeptAnswer):
    """The terminal as the core's ``ReplySink``: an answer is printed whole, once it is
    written (the console does not stream, so nothing is ever edited)."""

    def __init__(self, out: Console, *, prefix: str) -> None:
        super().__init__()
        self.out = out
        self.prefix = prefix

    async def post(self, *, text: str) -> int:
        self.out.print(self.prefix + text, markup=False)
        return await super().post(text=text)

    async def source_line(self, *, platform_id: str, label: str, in_parent: bool) -> str:
        return f"({label})"  # a terminal has no message links


def print_result(result: CommandResult, *, out: Console, err: Console) -> None:
    """A refusal or mistake goes where errors go; an answer (and an export's JSON) to out."""
    if not result.ok:
        err.print(f"! {result.text()}", markup=False)
        return
    out.print(result.text(), markup=False)
    if result.file is not None:  # an export: plain JSON, not through rich
        out.file.write(result.file[1].decode() + "\n")
        out.file.flush()


async def run_console(
    core: Core,
    *,
    scope: str,
    user: str,
    stdin: TextIO | None = None,
    out: Console | None = None,
    err: Console | None = None,
) -> int:
    stdin = stdin or sys.stdin
    tolerate_undecodable(stdin)
    interactive = stdin.isatty()
    # What users type is printed as typed: no markup, no emoji codes (":100:" stays).
    out = out or Console(highlight=False, soft_wrap=True, markup=False, emoji=False)
    err = err or Console(stderr=True, highlight=False, soft_wrap=True, markup=False, emoji=False)
    for line in core.describe():
        err.print(line, markup=False)
    err.print(
        f"Scope: {scope} as {user}. Type /memory help for commands"
        + (", /quit to leave." if interactive else "."),
        markup=False,
    )
    actor = Actor(user_id=user, name=user, is_admin=True)
    conversation = core.conversation
    sink = ConsoleReply(out, prefix=f"{core.settings.bot.name}> " if interactive else "")
    line_no = 0
    async for line in _lines(stdin, interactive, f"{user}> "):
        line_no += 1
        repaired = repair(line)
        if repaired is not line:
            err.print(not_utf8_note(line_no), markup=False)
        text = repaired.strip()
        if not text:
            continue
        if text.lower() in QUIT:
            break
        if text.lower().startswith(("/memory", "/m ")):
            command = text if not text.startswith("/m ") else text[3:]
            lang = resolve(core.settings.memory.language, [text])
            result = await run_command(
                core, scope=scope, command=command, actor=actor, language=lang
            )
            print_result(result, out=out, err=err)
            continue
        message = IncomingMessage(scope=scope, text=text, author=user, author_id=user, direct=True)
        try:
            turn = await conversation.receive(message)
            if turn is not None:
                await conversation.answer(turn, sink, stream_interval_s=None, links=sink)
        except MemorybotError as exc:  # bad input, refused, store hiccup: say so, keep going
            err.print(f"! {exc}", markup=False)
    await core.drain()
    await core.store.persist()
    return 0
