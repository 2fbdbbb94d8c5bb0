"""``memorybot console`` and ``memorybot ask``: talking to the memory from the terminal."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from bots.cli.common import (
    ScopeOpt,
    argument,
    core_for,
    out,
    print_json,
    run,
    scope_arg,
    settings,
)
from memory_core.models import IncomingMessage
from memory_core.service.streaming import KeptAnswer


def register(app: typer.Typer) -> None:
    app.command("console")(console)
    app.command("ask")(ask)


def console(
    ctx: typer.Context,
    scope: ScopeOpt = "default",
    user: Annotated[str, typer.Option("--user", "-u", help="Your name in the chat.")] = "you",
) -> None:
    """Chat in the terminal (/memory commands work). Piped stdin: one answer per line."""
    from bots.console import run_console

    s = settings(ctx)
    target = scope_arg(scope)
    user = argument(user, "--user")

    async def go() -> int:
        async with core_for(s, helpers=True) as core:
            return await run_console(core, scope=target, user=user)

    raise typer.Exit(run(go()))


def ask(
    ctx: typer.Context,
    text: Annotated[str, typer.Argument(help="The message to send.")],
    scope: ScopeOpt = "default",
    user: Annotated[str, typer.Option("--user", "-u")] = "you",
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Show the prompt only: no LLM, nothing stored.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object.")] = False,
) -> None:
    """Send one message (or, with --dry-run, show the exact prompt a reply would use)."""
    s = settings(ctx)
    target = scope_arg(scope)
    text, user = argument(text, "TEXT"), argument(user, "--user")
    msg = IncomingMessage(scope=target, text=text, author=user, author_id=user, direct=True)

    async def go() -> dict[str, Any]:
        async with core_for(s, background=False) as core:
            if dry_run:
                prompt = await core.replier.build_prompt(msg)
                core.metrics.keep_to_itself()  # (its recall index was built: not news)
                return {
                    "scope": target,
                    "messages": prompt.messages,
                    "tokens": prompt.tokens,
                    "budget": prompt.budget,
                    "sections": prompt.sections,
                    "window_messages": prompt.window_messages,
                    "language": prompt.language,
                }
            # The path every door takes: stored, answered, the answer remembered once
            # "delivered" (printed below) with what it used, for /memory why.
            turn = await core.conversation.receive(msg)
            assert turn is not None  # direct messages are always answered
            printed = KeptAnswer()  # printed once the command's core is closed
            done = await core.conversation.answer(turn, printed, stream_interval_s=None)
            reply = done.reply
            return {
                "scope": target,
                "reply": printed.text,
                "kind": reply.kind if reply is not None else "apology",
                "tokens": reply.prompt_tokens if reply is not None else 0,
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
