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

import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from memory_core.errors import MemorybotError
from memory_core.models import Attachment, Role
from memory_core.scopes import Audience, Scope


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


class CombinedSource:
    """Several sources of one channel read as one (an export's channel and its threads,
    each a file): each in turn, the cursor saying which one and where in it."""

    def __init__(self, sources: Sequence[PastSource]) -> None:
        roots = {_root(source.place) for source in sources}
        if len(roots) != 1:
            raise ValueError(f"sources of one channel are combined, not of {sorted(roots)}")
        self.sources = list(sources)
        self.place = roots.pop()
        self.name = self.sources[0].name

    async def pages(self, since: datetime, cursor: str = "") -> AsyncIterator[PastPage]:
        at, inner = 0, ""
        if cursor:
            try:
                saved = json.loads(cursor)
                at, inner = int(saved["source"]), str(saved["cursor"])
            except (ValueError, KeyError, TypeError) as exc:
                raise LearnRefused(
                    "the learn's saved place is damaged: cancel it and start again"
                ) from exc
        for index in range(at, len(self.sources)):
            async for page in self.sources[index].pages(since, inner if index == at else ""):
                last = index == len(self.sources) - 1 and not page.cursor
                after = (
                    ""
                    if last
                    else json.dumps(
                        {"source": index + 1, "cursor": ""}
                        if not page.cursor
                        else {"source": index, "cursor": page.cursor}
                    )
                )
                yield PastPage(
                    messages=page.messages, cursor=after, skipped=page.skipped, notes=page.notes
                )


def _root(place: str) -> str:
    return Scope.of(place).root.key


def by_place(sources: Sequence[PastSource]) -> list[PastSource]:
    """One source per channel (a learn is a channel's, its threads' too): those of the same
    channel combined, in their order."""
    places: dict[str, list[PastSource]] = {}
    for source in sources:
        places.setdefault(_root(source.place), []).append(source)
    return [group[0] if len(group) == 1 else CombinedSource(group) for group in places.values()]
