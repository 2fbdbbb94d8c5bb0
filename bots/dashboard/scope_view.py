"""What the scope page shows. Every change on the page calls MemoryAdmin, as /memory does."""

from __future__ import annotations

from dataclasses import dataclass, field

from bots.dashboard.listing import ScopeParts, describe, memory_tokens
from bots.why import render_why
from config.prompts import load_prompts
from memory_core.bootstrap import Core
from memory_core.models import TIER_FIELDS, Fact, IncomingMessage, LogEntry
from memory_core.prompt.assembly import Prompt
from memory_core.scopes import Scope
from memory_core.service.admin import ScopeView
from memory_core.store import PlaceCounts

HISTORY_PAGE = 50
# Pages of raw history read the newest messages (XREVRANGE); deeper pages would re-read
# everything before them, so they stop here and the export has the rest.
HISTORY_MAX = 5_000
TIER_LABELS = {
    "overview": "Overview",
    "short": "Short (today)",
    "mid": "Mid (the past week)",
    "long": "Long term",
}
# The overview first: it is what a reply carries instead of the three below it.
TIER_ORDER = ("overview", *(t for t in TIER_FIELDS if t != "overview"))


@dataclass(frozen=True, slots=True)
class Tier:
    name: str
    label: str
    text: str
    tokens: int


@dataclass(frozen=True, slots=True)
class Person:
    """Someone who spoke here, with the facts about them kept for the whole guild or
    workspace (their own scope, ``discord:G:user:U``)."""

    scope: str
    name: str
    facts: int


@dataclass(slots=True)
class ScopeDetail:
    view: ScopeView
    parts: ScopeParts
    tiers: list[Tier]
    tokens: int  # the whole memory: tiers, days, weeks, facts
    history: list[LogEntry]  # newest first
    history_page: int
    history_pages: int
    history_capped: bool  # older messages exist beyond what pages reach
    people: list[Person]  # authors on this history page with facts about them
    # What the last answer here used (/memory why), as its title and (heading, body)
    # sections; None when no record is kept. Facts that travelled with the asker are
    # counted, not shown: they are theirs, as in /memory why run by anyone else.
    why: tuple[str, list[tuple[str, str]]] | None = None
    threads: list[tuple[str, PlaceCounts]] = field(default_factory=list)  # a channel's

    @property
    def scope(self) -> str:
        return self.view.scope

    @property
    def parent(self) -> str:
        """A thread's channel ("" for everything else)."""
        parent = Scope.of(self.view.scope).parent
        return parent.key if parent else ""


async def scope_detail(core: Core, scope: str, *, page: int = 1) -> ScopeDetail:
    view = await core.admin.show(scope, recent=0)
    reachable = min(view.messages, HISTORY_MAX)
    pages = max(1, -(-reachable // HISTORY_PAGE))
    page = max(1, min(page, pages))
    newest = await core.repo.reads.recent(view.scope, page * HISTORY_PAGE) if view.messages else []
    tiers = [
        Tier(name, TIER_LABELS[name], text, core.counter.count(text) if text else 0)
        for name in TIER_ORDER
        for text in [str(getattr(view.state, name))]
    ]
    extra = [d.summary for d in view.days] + [w.summary for w in view.weeks]
    history = newest[(page - 1) * HISTORY_PAGE :]
    return ScopeDetail(
        view=view,
        parts=describe(view.scope),
        tiers=tiers,
        tokens=memory_tokens(core, view.state, view.facts, extra),
        history=history,
        history_page=page,
        history_pages=pages,
        history_capped=view.messages > HISTORY_MAX,
        people=await _people(core, view.scope, history),
        why=await _why(core, view.scope),
        threads=await _threads(core, view.scope),
    )


async def _threads(core: Core, scope: str) -> list[tuple[str, PlaceCounts]]:
    """A channel's threads with their counts (the 200 most recent)."""
    threads = (await core.repo.reads.threads_of(scope))[:200]
    counts = await core.repo.reads.counts_of(threads)
    return [(thread, counts[thread]) for thread in threads]


async def _why(core: Core, scope: str) -> tuple[str, list[tuple[str, str]]] | None:
    record = await core.admin.why(scope)
    if record is None:
        return None
    p = load_prompts("en")  # the dashboard speaks English
    ttl = core.settings.memory.why_ttl_hours
    return render_why(record, viewer_id="", p=p, ttl_hours=ttl, links={})


async def _people(core: Core, scope: str, entries: list[LogEntry]) -> list[Person]:
    names: dict[str, str] = {}
    for e in entries:
        person = Scope.of(scope).person_scope(e.author_id) if e.role == "user" else None
        if person:
            names.setdefault(person.key, e.author or e.author_id)
    facts = await core.repo.reads.facts_of(sorted(names))
    return [Person(p, names[p], len(f)) for p, f in sorted(facts.items()) if f]


async def edit_fact(core: Core, scope: str, fact_id: str, text: str) -> Fact:
    """Give a fact new text, through the same admin operation as every other change."""
    return await core.admin.edit_fact(scope, fact_id, text, by="dashboard")


async def prompt_preview(
    core: Core, scope: str, *, text: str, author: str, author_id: str = ""
) -> Prompt:
    """The exact prompt a reply to ``text`` would send now (``memorybot ask --dry-run``);
    with ``author_id``, what is known about that person joins it, as in a real reply."""
    return await core.replier.build_prompt(
        IncomingMessage(scope=scope, text=text, author=author, author_id=author_id, direct=True)
    )
