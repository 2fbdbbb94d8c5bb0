"""What a thread continues: how it began in its channel.

A Slack thread hangs under the channel message that started it (the bot's answer to a
question goes there), a Discord thread started from a message carries that message's id.
Both scopes name their thread by that id, so the message, the bot's answer to it and the
channel's messages just before are found in the channel's log around the thread's start,
read live (a forget or an edit in the channel reaches the thread's prompt at once)."""

from __future__ import annotations

from collections.abc import Sequence

from memory_core.models import LogEntry
from memory_core.scopes import Scope


def thread_start(
    scope: str, before: Sequence[LogEntry], after: Sequence[LogEntry]
) -> list[LogEntry]:
    """How the thread ``scope`` began, oldest first: the channel's messages before it
    (``before``), then its first message and the bot's answer to that message when they
    are among ``after`` (the channel's messages from the thread's start on). Empty for a
    scope that is no thread."""
    place = Scope.of(scope)
    if not place.is_thread:
        return []
    starter = next((entry for entry in after if entry.platform_id == place.thread), None)
    if starter is None:  # a thread started from no message: what the channel said before
        return list(before)
    answer = next(
        (entry for entry in after if entry.role == "assistant" and entry.answers == place.thread),
        None,
    )
    return [*before, starter, *([answer] if answer else [])]
