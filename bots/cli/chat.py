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
from memory_core.service.answer_record import remember_basis


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
            ttl = s.memory.why_ttl_hours  # printed below: delivered, so /memory why explains it
            await remember_basis(core.repo, msg, reply, now=core.clock.now(), ttl_hours=ttl)
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
