"""The overview's list of scopes: filtering, sorting and paging over the scopes index.

The index is a sorted set of scope -> last activity, so the default view (newest activity
first, no filter) pages through it directly and costs one page of reads, however many scopes
there are. Everything else is bounded and says so in the UI:

- filtering by platform or by text in the scope id, and sorting by scope id, read the ids of
  up to ``SCAN_LIMIT`` scopes (ids only, in chunks, no per-scope reads);
- matching text in channel names and sorting by messages need each scope's state, so they
  look at the ``STATE_WINDOW`` most recently active scopes only.

Only the rows of the page shown are read in full (tiers, days, weeks, facts).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal, TypeVar

from memory_core.bootstrap import Core
from memory_core.calendar import from_ms
from memory_core.models import Fact, ScopeState
from memory_core.scopes import Scope

PAGE_SIZE = 50
SCAN_LIMIT = 100_000
STATE_WINDOW = 2_000
READ_CONCURRENCY = 16  # parallel reads per request: quick, without hogging the pool
PLATFORMS = ("discord", "slack", "console")
Sort = Literal["activity", "messages", "scope"]
SORTS: tuple[Sort, ...] = ("activity", "messages", "scope")
T = TypeVar("T")


async def gather_bounded(items: Iterable[Awaitable[T]], limit: int = READ_CONCURRENCY) -> list[T]:
    """Await all, at most ``limit`` at a time, results in order."""
    gate = asyncio.Semaphore(limit)

    async def one(item: Awaitable[T]) -> T:
        async with gate:
            return await item

    return list(await asyncio.gather(*(one(i) for i in items)))


@dataclass(frozen=True, slots=True)
class ScopeParts:
    """A scope string taken apart for people: which platform, which server, which place."""

    platform: str
    place: str  # guild / workspace id, "DM" or "console"
    channel: str
    thread: str = ""
    kind: str = "channel"  # channel, thread, dm, person, console


def describe(scope: str) -> ScopeParts:
    place = Scope.of(scope)
    match place.kind:
        case "place":
            return ScopeParts(place.platform, "console", place.local, kind="console")
        case "person":
            return ScopeParts(place.platform, place.server, f"user {place.person}", kind="person")
        case "thread":
            server = place.server or "DM"
            return ScopeParts(place.platform, server, place.channel, place.thread, kind="thread")
    if place.dm_user:
        return ScopeParts(place.platform, "DM", place.dm_user, kind="dm")
    return ScopeParts(place.platform, place.server, place.channel, kind=place.kind)


def memory_tokens(
    core: Core, state: ScopeState, facts: Iterable[Fact], extra: Iterable[str]
) -> int:
    """Tokens the scope's memory holds: tiers (short, mid, long, overview), days and weeks
    lists (``extra``) and facts. The raw log is not counted: it is the history, not memory."""
    texts = [state.short, state.mid, state.long, state.overview, *extra]
    texts += [f.text for f in facts]
    return sum(core.counter.count(t) for t in texts if t)


@dataclass(slots=True)
class ScopeRow:
    scope: str
    parts: ScopeParts
    name: str
    last: datetime | None
    messages: int
    days: int
    weeks: int
    facts: int
    tokens: int
    paused: bool


@dataclass(frozen=True, slots=True)
class ListingQuery:
    q: str = ""
    platform: str = ""
    sort: Sort = "activity"
    page: int = 1

    @classmethod
    def parse(cls, q: str, platform: str, sort: str, page: int) -> ListingQuery:
        chosen: Sort = "activity"
        for option in SORTS:
            if sort == option:
                chosen = option
        return cls(
            q=q.strip()[:200],
            platform=platform if platform in PLATFORMS else "",
            sort=chosen,
            page=max(1, min(page, 1_000_000)),
        )


@dataclass(slots=True)
class Listing:
    rows: list[ScopeRow]
    query: ListingQuery
    total_scopes: int
    matched: int  # scopes matching the query among those looked at
    has_next: bool
    notes: list[str] = field(default_factory=list)

    @property
    def pages(self) -> int:
        return max(1, -(-self.matched // PAGE_SIZE))


async def load_row(core: Core, scope: str, last_ms: int) -> ScopeRow:
    repo = core.repo
    state, days, weeks, facts = await asyncio.gather(
        repo.reads.state(scope),
        repo.reads.days(scope),
        repo.reads.weeks(scope),
        repo.reads.facts(scope),
    )
    extra = [d.summary for d in days] + [w.summary for w in weeks]
    return ScopeRow(
        scope=scope,
        parts=describe(scope),
        name=state.name,
        last=from_ms(last_ms) if last_ms else None,
        messages=state.msg_count,
        days=len(days),
        weeks=len(weeks),
        facts=len(facts),
        tokens=memory_tokens(core, state, facts, extra),
        paused=state.paused,
    )


async def _index(core: Core, limit: int) -> list[tuple[str, int]]:
    """The ``limit`` most recently active scopes."""
    return await core.repo.reads.scopes(offset=0, limit=limit)


async def list_scopes(core: Core, query: ListingQuery) -> Listing:
    total = await core.repo.reads.scope_count()
    start = (query.page - 1) * PAGE_SIZE
    if query.sort == "activity" and not query.q and not query.platform:
        pairs = await core.repo.reads.scopes(offset=start, limit=PAGE_SIZE)
        rows = await gather_bounded(load_row(core, s, ms) for s, ms in pairs)
        return Listing(rows, query, total, total, start + PAGE_SIZE < total)

    notes: list[str] = []
    needs_state = query.sort == "messages" or bool(query.q)
    limit = STATE_WINDOW if query.sort == "messages" else SCAN_LIMIT
    pairs = await _index(core, limit)
    if total > len(pairs):
        if query.sort == "messages":
            notes.append(
                f"Sorted by messages among the {len(pairs):,} most recently active scopes "
                f"(of {total:,})."
            )
        else:
            notes.append(f"Searched the {len(pairs):,} most recently active scopes of {total:,}.")
    if query.platform:
        pairs = [(s, ms) for s, ms in pairs if Scope.of(s).platform == query.platform]
    states: dict[str, ScopeState] = {}
    if needs_state:
        # Names and message counts live in each scope's state: read them for a window only.
        window = pairs[:STATE_WINDOW]
        loaded = await gather_bounded(core.repo.reads.state(s) for s, _ in window)
        states = {s: st for (s, _), st in zip(window, loaded, strict=True)}
        if query.q and len(pairs) > STATE_WINDOW:
            notes.append(
                f"Channel names are matched among the {STATE_WINDOW:,} most recently active "
                "scopes; scope ids among all of them."
            )
    if query.q:
        needle = query.q.casefold()

        def matches(scope: str) -> bool:
            if needle in scope.casefold():
                return True
            state = states.get(scope)
            return state is not None and needle in state.name.casefold()

        pairs = [(s, ms) for s, ms in pairs if matches(s)]
    if query.sort == "messages":
        pairs.sort(key=lambda p: (-states[p[0]].msg_count, -p[1]))
    elif query.sort == "scope":
        pairs.sort(key=lambda p: p[0])
    page = pairs[start : start + PAGE_SIZE]
    rows = await gather_bounded(load_row(core, s, ms) for s, ms in page)
    return Listing(rows, query, total, len(pairs), start + PAGE_SIZE < len(pairs), notes)
