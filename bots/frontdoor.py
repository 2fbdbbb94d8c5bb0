"""The one ``/memory`` entry point of every front door (Discord, Slack, the console, the
CLI): :func:`run_command` runs a command for an actor, with every refusal or mistake turned
into an answer (never a silent no-op, never an exception reaching the platform).

Messages take one path too, in the core: :mod:`memory_core.service.conversation`.
"""

from __future__ import annotations

import logging

from bots.commands import USAGE, Actor, Command, CommandResult, execute, parse_command
from bots.why import Linker
from config.prompts import load_prompts
from memory_core.bootstrap import Core
from memory_core.errors import InputError, PermissionDenied, StoreError, UsageError

log = logging.getLogger(__name__)


async def run_command(
    core: Core,
    *,
    scope: str,
    command: Command | str,
    actor: Actor,
    language: str | None = None,
    link: Linker | None = None,
) -> CommandResult:
    """Run a /memory command; refusals and mistakes come back as results, not exceptions.

    ``language``: what the platform knows of the user's language ("ja", "en"); otherwise the
    scope's language setting, then the bot's, decide. ``link``: the door's link to one of
    its messages by platform id (``/memory why``).
    """
    if language not in ("en", "ja"):
        try:
            language = (await core.repo.reads.state(scope)).lang or core.settings.memory.language
        except (StoreError, InputError):
            language = core.settings.memory.language
    p = load_prompts(language if language in ("en", "ja") else "en")
    try:
        parsed = parse_command(command) if isinstance(command, str) else command
        return await execute(
            core.admin, scope=scope, command=parsed, actor=actor, language=p.language, link=link
        )
    except UsageError as exc:
        return CommandResult(title=p.say("usage_title"), sections=[("", str(exc))], ok=False)
    except PermissionDenied as exc:
        return CommandResult(title=str(exc), ok=False)
    except InputError as exc:
        return CommandResult(title=str(exc), sections=[("", USAGE)], ok=False)
    except StoreError as exc:
        log.error("/memory %s in %s failed: %s", command, scope, exc)
        return CommandResult(title=f"Memory is unavailable right now: {exc}", ok=False)
