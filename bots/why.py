"""``/memory why``: what the last answer in a scope was based on, as a command result
every front door renders its own way (ephemeral everywhere).

Links come from the door (:data:`Linker`: a platform message id to its URL; the console has
none). A link that cannot be made shows the message without one, never fails the command.
Facts about the person who asked that travelled with them are theirs: shown to them only;
anyone else sees how many there were.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from config.prompts import PromptSet
from memory_core import calendar
from memory_core.service.answer_record import AnswerRecord, UsedFact, UsedMessage

log = logging.getLogger(__name__)

# A platform message id -> its link ("" when there is none); the flag: said in the thread's
# channel rather than in the thread itself. Given by the front door.
Linker = Callable[[str, bool], Awaitable[str]]

SECTION_ORDER = (
    "overview",
    "long",
    "mid",
    "short",
    "parent",
    "also_read",
    "thread_start",
    "facts",
    "recall",
    "window",
)


async def links_for(record: AnswerRecord, link: Linker | None) -> dict[str, str]:
    """The links of the recalled messages, looked up together; a failed one is left out."""
    ids = sorted({(m.platform_id, m.in_parent) for m in record.recalled if m.platform_id})
    if link is None or not ids:
        return {}

    async def one(platform_id: str, in_parent: bool) -> str:
        try:
            return await link(platform_id, in_parent)
        except Exception:  # a link is decoration: the message is listed without it
            log.warning("no link for a recalled message", exc_info=True)
            return ""

    found = await asyncio.gather(*(one(i, parent) for i, parent in ids))
    return {i: url for (i, _), url in zip(ids, found, strict=True) if url}


def _day(ms: int, tz: str) -> str:
    return calendar.from_ms(ms).astimezone(calendar.zone(tz)).strftime("%Y-%m-%d %H:%M")


def _fact_line(fact: UsedFact, p: PromptSet) -> str:
    kind = f"{p.say('why_pinned') if fact.pinned else p.say('why_learned')} {fact.kind}"
    who = f"{fact.subject}: " if fact.subject else ""
    origin = p.say(
        "why_fact_from", origin=fact.origin or "-", who=fact.by or "-", when=fact.ts[:10] or "-"
    )
    return f"- `{fact.id}` [{kind}] {who}{fact.text} ({origin})"


def _message_line(message: UsedMessage, tz: str, links: dict[str, str], p: PromptSet) -> str:
    when = _day(message.ms, tz)
    if message.kind == "day":
        return f"- [{when[:10]}] {p.say('why_day_summary')} {message.snippet}"
    url = links.get(message.platform_id, "")
    link = f" {url}" if url else ""
    return f"- [{when}] {message.author or 'someone'}: {message.snippet}{link}"


def render_why(
    record: AnswerRecord | None,
    *,
    viewer_id: str,
    p: PromptSet,
    ttl_hours: int,
    links: dict[str, str],
) -> tuple[str, list[tuple[str, str]]]:
    """The title and (heading, body) sections of ``/memory why`` for ``viewer_id``."""
    if record is None:
        return p.say("why_none", hours=ttl_hours), []
    when = record.at[:16].replace("T", " ")
    title = p.say("why_title", name=record.asker or "someone", when=when)
    sections: list[tuple[str, str]] = []
    parts = [
        p.say("why_tokens", part=p.say(f"why_part_{name}"), tokens=record.sections[name])
        for name in SECTION_ORDER
        if record.sections.get(name)
    ]
    if parts:
        sections.append((p.say("why_memory"), "\n".join(parts)))
    mine = viewer_id == record.asker_id and bool(viewer_id)
    shown = [f for f in record.facts if mine or not f.personal]
    hidden = len(record.facts) - len(shown)
    lines = [_fact_line(f, p) for f in shown]
    if hidden:
        lines.append(p.say("why_private_facts", count=hidden, name=record.asker or "someone"))
    if lines:
        sections.append((p.say("why_facts"), "\n".join(lines)))
    recalled = sorted(record.recalled, key=lambda m: (m.ms, m.id))
    body = "\n".join(_message_line(m, record.tz, links, p) for m in recalled)
    sections.append((p.say("why_recalled"), body or p.say("why_nothing_recalled")))
    return title, sections
