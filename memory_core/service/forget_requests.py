"""Forget requests and their completion: what goes is found first and written down in
every place with its request (the scope's epoch moves, so a summary written from the old text
meanwhile is refused), then carried out, and reported done once durable; maintenance finishes
the requests a crash interrupted (:meth:`ForgetRequests.resume`).

The forgetting operations (:mod:`memory_core.service.forgetting`, and the platform's deletes,
edits and captions in :mod:`memory_core.service.message_changes`) build requests and hand them
here; what a request removes is :class:`~memory_core.service.forget_request.ForgetRequest`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import replace

from config.settings import Settings
from memory_core import calendar
from memory_core.clock import Clock
from memory_core.models import TIER_FIELDS, LogEntry, WeekSummary
from memory_core.scopes import Scope
from memory_core.service.forget_request import ForgetReport, ForgetRequest, redact_day
from memory_core.store.repo import MemoryRepo
from memory_core.text.tokens import TokenCounter

# Finding a message by its platform id: stream ids never go below a message's own time, so
# the log is read from a little before it (clock skew), a bounded window, before a full scan.
LOOKUP_MARGIN_MS = 60_000
LOOKUP_WINDOW = 300


class ForgetRequests:
    """Carries out forget requests in one place or several, and finishes interrupted ones."""

    def __init__(
        self,
        *,
        repo: MemoryRepo,
        settings: Settings,
        persist: Callable[..., Awaitable[None]],
        clock: Clock,
    ) -> None:
        self.repo = repo
        self.ledger = repo.ledger  # tombstones first: what goes never comes back
        self.settings = settings
        self.clock = clock
        # Makes what was just done durable (Store.persist): a forget is reported done only
        # once a crash can no longer bring the text back, and (``erase=True``) once no file
        # of the embedded store still holds it.
        self.persist = persist

    def now_ms(self) -> int:
        """When a forget happens (its tombstones cover what was said before)."""
        return calendar.to_ms(self.clock.now())

    async def subtree(self, scope: str) -> list[str]:
        """The places an operation in ``scope`` reaches: a channel's threads, then the
        channel; a thread or any other place alone."""
        return [*await self.repo.reads.threads_of(scope), scope]

    async def forget_everything(self, scope: str) -> int:
        """Every key of one place's memory, and the facts about people learned there (a
        forget of everything, or one a crash interrupted). Returns how many keys went."""
        await self.repo.learning.drop(scope)  # what a learn read here, not stored yet
        authors = {e.author_id for e in await self.repo.reads.all_entries(scope)}
        await self.forget_person_facts(
            scope, request=ForgetRequest(kind="all"), removed=set(), authors=authors
        )
        return await self.repo.writes.forget_scope(scope)  # the pending request goes with it

    async def forget_one(
        self, scope: str, request: ForgetRequest, *, found: Sequence[LogEntry] | None = None
    ) -> ForgetReport:
        return await self.forget_in([scope], request, found={scope: found} if found else None)

    async def forget_in(
        self,
        places: Sequence[str],
        request: ForgetRequest,
        *,
        found: Mapping[str, Sequence[LogEntry] | None] | None = None,
    ) -> ForgetReport:
        """Carry out one forget in several places; the report lists each.

        What goes is found first and written down in every place with its request (and
        each place's epoch moved, so a summary being computed from the old text is
        refused), before any of it is carried out: a crash from here on leaves a pending
        forget in each place not yet done, which its maintenance finishes, even once the
        messages are gone. Reported done only once durable."""
        planned: list[tuple[str, ForgetRequest]] = []
        for place in places:
            # What a learn of the place read and did not store yet goes: its next learn
            # reads the past again, without what is forgotten now.
            await self.repo.learning.drop(place)
            doomed = (found or {}).get(place)
            if doomed is None:
                doomed = [
                    e for e in await self.repo.reads.all_entries(place) if request.drop_entry(e)
                ]
                # A summary sentence that quotes a removed message goes, even when it cut
                # the text short; so does one quoting a message being edited right now (an
                # edit or a caption takes it out of the log a moment before it stores it).
                quoted = [e.text for e in doomed]
                editing = await self.edits_under_way(place)
                quoted += [e.text for e in editing if request.drop_entry(e)]
                planned.append(
                    (
                        place,
                        replace(
                            request,
                            entry_ids=tuple(e.id for e in doomed),
                            quotes=tuple(quoted) if request.kind in ("user", "text") else (),
                        ),
                    )
                )
            else:
                planned.append((place, request))
        await self.repo.writes.begin_forgets([(place, r.to_json()) for place, r in planned])
        report = ForgetReport()
        for place, place_request in planned:
            done = await self._apply_forget(place, place_request)
            await self.repo.writes.end_forget(place, place_request.to_json())
            if len(planned) == 1:
                report = done
            else:
                report.add(place, done)
        await self.persist(erase=True)
        return report

    async def edits_under_way(self, scope: str) -> list[LogEntry]:
        """The messages an edit written down and not finished is storing again, as they
        will be stored (their new text)."""
        edits = [
            ForgetRequest.from_json(raw) for raw in await self.repo.writes.pending_forgets(scope)
        ]
        return [
            LogEntry(
                id="",
                ts=calendar.from_ms(edit.ts_ms),
                role="assistant" if edit.role == "assistant" else "user",
                author=edit.author,
                author_id=edit.author_id,
                text=edit.text,
                tokens=0,
                platform_id=edit.platform_id,
            )
            for edit in edits
            if edit.kind == "edit"
        ]

    async def resume(self, scope: str) -> int:
        """Finish the forgets a crash interrupted (maintenance calls this). Idempotent."""
        pending = await self.repo.writes.pending_forgets(scope)
        for raw in pending:
            request = ForgetRequest.from_json(raw)
            if request.kind == "all":
                await self.forget_everything(scope)
                break
            await self._apply_forget(scope, request)
            await self.repo.writes.end_forget(scope, raw)
        if not pending:
            await self.repo.writes.end_forget(scope, None)
        else:  # the text the crash left in the store's files goes with it now
            await self.persist(erase=True)
        return len(pending)

    async def _apply_forget(self, scope: str, request: ForgetRequest) -> ForgetReport:
        if request.kind == "edit":
            return await self.apply_edit(scope, request)
        report = ForgetReport()
        if request.kind == "message":  # one message: read around its time, not the whole log
            entries = await self.message_entries(scope, request.platform_id, request.ts_ms)
        else:
            entries = await self.repo.reads.all_entries(scope)
        doomed = [e.id for e in entries if request.drop_entry(e)]
        removed = {*request.entry_ids, *doomed}
        report.messages = await self.repo.writes.delete_entries(scope, doomed)
        facts = await self.repo.reads.facts(scope)
        gone = [f.id for f in facts if request.drop_fact(f, removed)]
        report.facts = await self.repo.writes.delete_facts(scope, gone)
        report.facts += await self.forget_person_facts(
            scope, request=request, removed=removed, authors={e.author_id for e in entries}
        )
        own = Scope.of(scope).person_scope(request.user_id) if request.kind == "user" else None
        if own:  # everything known about them across the guild
            report.facts += len(await self.repo.reads.facts(own.key))
            await self.repo.writes.forget_scope(own.key)
        await self._redact(scope, request, report)
        # Counters are triggers only; re-derive them after deleting unsummarised messages.
        await self.repo.writes.resync_counters(scope)
        return report

    async def forget_person_facts(
        self,
        scope: str,
        *,
        request: ForgetRequest,
        removed: set[str],
        authors: Iterable[str] = (),
    ) -> int:
        """Facts about people learned in ``scope`` live in their own scopes: found through the
        scope's record of them (and, for facts written before that record existed, through
        ``authors``, the user ids of the people who spoke here)."""
        people = set(await self.repo.reads.people_of(scope))
        place = Scope.of(scope)
        people.update(p.key for a in authors if (p := place.person_scope(a)))
        count = 0
        for person, person_facts in (await self.repo.reads.facts_of(sorted(people))).items():
            gone = [
                f.id for f in person_facts if f.origin == scope and request.drop_fact(f, removed)
            ]
            count += await self.repo.writes.delete_facts(person, gone)
        return count

    async def _redact(self, scope: str, request: ForgetRequest, report: ForgetReport) -> None:
        """Drop the summary sentences the forget reaches: tiers, days, day records, weeks."""
        if not request.redacts:
            return
        state = await self.repo.reads.state(scope)
        changed: dict[str, str | int] = {}
        for name in TIER_FIELDS:
            before = str(getattr(state, name))
            after = request.redact(before)
            if after != before:
                changed[name] = after
                report.tiers.append(name)
        if changed:
            await self.repo.writes.set_fields(scope, changed)
        days = await self.repo.reads.days(scope)
        new_days = [redact_day(d, request.redact) for d in days]
        report.days = sum(a != b for a, b in zip(days, new_days, strict=True))
        if report.days:
            await self.repo.writes.replace_days(scope, new_days)
        episodes = await self.repo.reads.episodes(scope)
        new_episodes = [redact_day(d, request.redact) for d in episodes]
        if new_episodes != episodes:
            await self.repo.writes.replace_episodes(scope, new_episodes)
        weeks = await self.repo.reads.weeks(scope)
        new_weeks = [
            WeekSummary(w.week, request.redact(w.summary), w.days, w.degraded) for w in weeks
        ]
        report.weeks = sum(a.summary != b.summary for a, b in zip(weeks, new_weeks, strict=True))
        if report.weeks:
            await self.repo.writes.replace_weeks(scope, new_weeks)

    async def apply_edit(self, scope: str, request: ForgetRequest) -> ForgetReport:
        """Carry out an edit; safe to run again after a crash (the old entries are deleted
        by id, the new text is stored only if no copy of it is there yet)."""
        report = ForgetReport()
        # (no tombstone: the message stays, with its new text, under its id)
        report.messages = await self.repo.writes.delete_entries(
            scope, request.entry_ids, tombstone=False
        )
        await self._store_edited(scope, request)
        removed = set(request.entry_ids)
        facts = await self.repo.reads.facts(scope)
        gone = [f.id for f in facts if request.drop_fact(f, removed)]
        report.facts = await self.repo.writes.delete_facts(scope, gone)
        report.facts += await self.forget_person_facts(
            scope, request=request, removed=removed, authors=[request.author_id]
        )
        await self._redact(scope, request, report)
        await self.repo.writes.resync_counters(scope)
        return report

    async def _store_edited(self, scope: str, request: ForgetRequest) -> None:
        copies = await self.message_entries(scope, request.platform_id, request.ts_ms)
        if any(e.text == request.text for e in copies):
            return  # stored by an earlier run of this edit
        await self.repo.writes.release_platform_id(scope, request.platform_id)
        await self.repo.messages.ingest(
            scope,
            ts_ms=request.ts_ms,
            role=request.role,
            author=request.author,
            author_id=request.author_id,
            text=request.text,
            platform_id=request.platform_id,
            tokens=TokenCounter().count(request.text),
            day=calendar.local_day_ms(request.ts_ms, self.settings.memory.timezone),
            touch_index=False,
            public=request.public,
        )

    async def message_entries(self, scope: str, platform_id: str, from_ms: int) -> list[LogEntry]:
        """The stored entries of one platform message. Its entry's id is never below its
        send time (``from_ms``), so a window of the log from just before then is read first;
        the whole log only when the message is not in it (or no time is known)."""
        if from_ms > 0:
            window = await self.repo.reads.entries_from(
                scope, max(0, from_ms - LOOKUP_MARGIN_MS), limit=LOOKUP_WINDOW
            )
            found = [e for e in window if platform_id in e.platform_ids]
            if found:
                return found
        return [
            e for e in await self.repo.reads.all_entries(scope) if platform_id in e.platform_ids
        ]


def threads_first(scope: str) -> tuple[str, bool, str]:
    """Sort key: by subtree, a channel's threads before the channel."""
    place = Scope.of(scope)
    return place.root.key, not place.is_thread, scope


def stored_ms(entry: LogEntry) -> int:
    """The ms an entry's ``ts`` field holds (rounded: the float round trip can fall short)."""
    return round(entry.ts.timestamp() * 1000)
