"""A channel's past as the sources of learning hand it over: the platform's history
(Discord, Slack) or an export file (a Slack workspace export, DiscordChatExporter's JSON).

A source reads a place and its threads and yields :class:`PastPage` s; the learner
(:mod:`memory_core.service.learning`) keeps each page's messages, the page's cursor with them,
and stores them oldest first once everything is read. A source never stores anything
itself, and never decides what was forgotten (the learner does).

What a source must do:

* Yield every message of the place and of its threads said at or after ``since``, each as a
  :class:`PastMessage` with the scope it belongs to (a thread's reply to the thread's scope,
  a thread's first message to the thread too when the platform starts a thread from it as
  Slack does: a Slack parent is the channel's message; its replies are the thread's), its
  platform id (the same id the live door uses, so a message stored live is recognised), and
  its text as it is now (an edited message as edited; a deleted one not at all).
* Leave out what memory does not keep live either: other bots' messages, joins, leaves,
  pins, topic changes and other system messages (counted in ``PastPage.skipped``). The
  bot's own messages are kept, as ``role="assistant"``.
* Give a cursor with each page: the opaque text (JSON is fine) that, handed back to
  :meth:`PastSource.pages`, goes on after that page. "" after the last page. A page is
  handed over only when it is complete, so resuming from its cursor never repeats a page
  nor skips one.
* Wait out the platform's rate limits (honouring ``Retry-After``), each wait capped; a wait
  over the cap, a missing permission or a missing scope raises :class:`LearnRefused` with
  what to fix.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from memory_core.errors import MemorybotError
from memory_core.models import Attachment, Role
from memory_core.scopes import Audience


class LearnRefused(MemorybotError):
    """A source cannot read the past: a missing permission or scope, a rate limit whose wait
    is past the cap, a bad export file. The message says what to fix."""


@dataclass(frozen=True, slots=True)
class PastMessage:
    scope: str  # where it was said: the channel's scope, or its thread's
    platform_id: str  # as the live door stores it (Discord: the message id; Slack: its ts)
    ts: datetime  # when it was said (timezone-aware)
    text: str
    author: str  # the name shown for its author
    author_id: str = ""  # the author's platform user id
    role: Role = "user"  # "assistant": the bot's own message
    audience: Audience = Audience.PRIVATE  # who can read the place (as the live door says)
    place_name: str = ""  # "#general (My Server)", if known
    attachments: tuple[Attachment, ...] = ()


@dataclass(frozen=True, slots=True)
class PastPage:
    messages: list[PastMessage] = field(default_factory=list)
    cursor: str = ""  # where to go on after this page; "" = this was the last page
    skipped: int = 0  # messages left out: other bots, system messages
    # What the source wants an admin to know ("no access to 2 private threads"), once.
    notes: tuple[str, ...] = ()


class PastSource(Protocol):
    """The past of one place and its threads (see the module's text)."""

    name: str  # "discord", "slack", "slack-export", "discord-export"
    place: str  # the root scope it reads: the channel's (a Slack DM's, a Discord DM's)

    def pages(self, since: datetime, cursor: str = "") -> AsyncIterator[PastPage]:
        """The pages from ``cursor`` ("" = the beginning) on, messages at or after
        ``since``."""
        ...
