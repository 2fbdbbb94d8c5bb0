"""What a thread continues: how it began in its channel.

A Slack thread hangs under the channel message that started it (the bot's answer to a
question goes there), a Discord thread started from a message carries that message's id.
Both scopes name their thread by that id, so the message, the bot's answer to it and the
channel's messages just before are found in the channel's log around the thread's start,
read live (a forget or an edit in the channel reaches the thread's prompt at once). A first
message memory lacks (posted before the bot was there) is given as the platform shows it,
when the front door can read it (:class:`~memory_core.models.StarterSource`): context, never
stored as said."""

from __future__ import annotations

from collections.abc import Sequence

from memory_core.models import LogEntry
from memory_core.scopes import Scope


def lacks_starter(scope: str, after: Sequence[LogEntry]) -> bool:
    """Whether ``scope`` is a thread whose first message is not among ``after`` (the
    channel's messages from the thread's start on, as memory holds them)."""
    place = Scope.of(scope)
    return place.is_thread and all(entry.platform_id != place.thread for entry in after)


def thread_start(
    scope: str,
    before: Sequence[LogEntry],
    after: Sequence[LogEntry],
    *,
    starter: LogEntry | None = None,
) -> list[LogEntry]:
    """How the thread ``scope`` began, oldest first: the channel's messages before it
    (``before``), then its first message and the bot's answer to that message when they
    are among ``after`` (the channel's messages from the thread's start on). ``starter``:
    its first message as the platform shows it, for when memory lacks it. Empty for a
    scope that is no thread."""
    place = Scope.of(scope)
    if not place.is_thread:
        return []
    found = next((entry for entry in after if entry.platform_id == place.thread), None)
    starter = found or starter
    if starter is None:  # a thread started from no message: what the channel said before
        return list(before)
    answer = next(
        (entry for entry in after if entry.role == "assistant" and entry.answers == place.thread),
        None,
    )
    return [*before, starter, *([answer] if answer else [])]
