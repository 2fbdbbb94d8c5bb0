"""The optional source line (``/memory config sources on``): an answer that used a recalled
message ends with a small "from <date>" line linking to it.

Which recalled message was used is decided without a model call: the one sharing the most
content words with the answer that the question did not bring (an answer that only echoes
the question used nothing), above a threshold; none, no line. The line is decoration: the
answer stored in memory is without it. The link comes from the front door's
:class:`SourceLinks`, handed to :meth:`Conversation.answer` beside the sink, so the core stays
platform-free.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol

from config.prompts import load_prompts
from memory_core import calendar
from memory_core.errors import StoreError
from memory_core.models import Reply
from memory_core.prompt.assembly import Prompt
from memory_core.recall.documents import Doc
from memory_core.recall.textsearch import terms
from memory_core.store.repo import MemoryRepo

log = logging.getLogger(__name__)

MIN_SHARED = 2  # content words shared with the answer, beyond the question's
MIN_SHARE = 0.5  # or one word that is at least half of the message's own new words


class SourceLinks(Protocol):
    """A door's links to its messages, for a source line: the platform's link to a stored
    message (Discord's and Slack's reply sinks are their door's links)."""

    async def source_line(self, *, platform_id: str, label: str, in_parent: bool) -> str:
        """The line (in the Markdown the sink's ``markup`` takes), "" when there is none.
        ``in_parent``: the message was said in the thread's channel, not in the thread."""
        ...


def used_source(
    answer: str, question: str, recalled: Sequence[tuple[str, Doc]]
) -> tuple[str, Doc] | None:
    """The recalled message the answer drew on, with where it was said ("" the scope
    itself), or None."""
    said = set(terms(question))
    new = set(terms(answer)) - said
    best: tuple[float, int, tuple[str, Doc]] | None = None
    for where, doc in recalled:
        if doc.kind != "message":
            continue
        own = set(terms(doc.text)) - said
        shared = len(new & own)
        if not own or not (shared >= MIN_SHARED or (shared and shared / len(own) >= MIN_SHARE)):
            continue
        score = (shared / len(own), shared, (where, doc))
        if best is None or score[:2] > best[:2]:
            best = score
    return best[2] if best else None


async def source_text(
    reply: Reply, question: str, links: SourceLinks | None, *, repo: MemoryRepo, scope: str
) -> str:
    """The answer's text as delivered: with a source line when the scope asks for one, the
    door gave its ``links`` and a recalled message (still in the log) was used."""
    prompt = reply.prompt
    if not isinstance(prompt, Prompt) or reply.kind != "llm" or not prompt.used.sources:
        return reply.text
    if links is None:
        return reply.text
    found = used_source(reply.text, question, prompt.used.recalled_pairs())
    if found is None:
        return reply.text
    where, doc = found
    try:
        entries = await repo.reads.entries_by_ids(where or scope, [doc.id])
    except StoreError as exc:  # decoration: the answer goes out without it
        log.warning("no source line in %s: %s", scope, exc)
        return reply.text
    if not entries:
        return reply.text
    day = calendar.from_ms(doc.ms).astimezone(calendar.zone(prompt.used.tz)).date().isoformat()
    label = load_prompts(prompt.language).say("source_from", date=day)
    line = await links.source_line(
        platform_id=entries[0].platform_id, label=label, in_parent=bool(where)
    )
    return f"{reply.text}\n{line}" if line else reply.text
