"""Forgetting: the admin operations that take memory away (a text, a person, a message
deleted or edited on its platform, a fact, everything), and finishing the ones a crash
interrupted.

Forget means gone: after ``forget_text`` the text is in none of the scope's keys (raw log,
tiers, days, weeks, facts), and the scope's epoch moves so a summary being written from
the old text at that moment is discarded instead of bringing it back.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from config.settings import Settings
from memory_core import calendar
from memory_core.clock import Clock
from memory_core.errors import InputError
from memory_core.fleet.spending import SPEND_TTL_S
from memory_core.models import (
    TIER_FIELDS,
    Attachment,
    LogEntry,
    WeekSummary,
    caption_in,
    stored_text,
    with_captions,
)
from memory_core.scopes import Scope, parse_scope
from memory_core.service.forget_request import ForgetReport, ForgetRequest, redact_day
from memory_core.store.repo import MemoryRepo
from memory_core.text.tokens import TokenCounter
from memory_core.tiers.redact import removed_spans

if TYPE_CHECKING:
    from memory_core.service.budget import Budget

SPEND_DAYS = SPEND_TTL_S // 86400  # how long spend counters are kept, in days
# Finding a message by its platform id: stream ids never go below a message's own time, so
# the log is read from a little before it (clock skew), a bounded window, before a full scan.
LOOKUP_MARGIN_MS = 60_000
LOOKUP_WINDOW = 300


class MemoryForgetting:
    """The forgetting half of :class:`~memory_core.service.admin.MemoryAdmin` (its base
    class): every front door reaches these through the admin."""

    def __init__(
        self,
        *,
        repo: MemoryRepo,
        settings: Settings,
        clock: Clock,
        persist: Callable[..., Awaitable[None]],
        budget: Budget | None = None,
    ) -> None:
        self.repo = repo
        self.budget = budget  # daily token limits: /memory config, show stats, forget me
        self.settings = settings
        self.clock = clock  # (the admin's: notes and exports are dated)
        # Makes what was just done durable (Store.persist): a forget is reported done only
        # once a crash can no longer bring the text back, and (``erase=True``) once no file
        # of the embedded store still holds it.
        self._persist = persist

    # -- forget ------------------------------------------------------------------------
    async def forget_all(self, scope: str, *, keep_settings: bool = True) -> int:
        """Delete everything learned in the scope and, in a channel, in its threads: their
        keys (raw log, tiers, days, weeks, day records, facts, vectors, markers) and the
        facts about people that were learned there. Each place's epoch survives and moves
        on, so a summary being written from the forgotten memory right now is refused; its
        fact counter survives, so no fact id comes back. Its budget limits are set again
        unless ``keep_settings`` is False (the place itself is gone). Returns how many keys
        went."""
        deleted = await self._forget_all(scope, keep_settings=keep_settings)
        await self._persist(erase=True)
        return deleted

    async def _forget_all(self, scope: str, *, keep_settings: bool) -> int:
        places = await self.subtree(parse_scope(scope))
        kept = {place: await self._budget_before_forget(place) for place in places}
        if not keep_settings:
            kept = {}
        request = ForgetRequest(kind="all").to_json()
        await self.repo.begin_forgets([(place, request) for place in places])
        deleted = 0
        for place in places:  # threads first: the channel keeps the list of them till last
            deleted += await self._forget_everything(place)
            if kept.get(place):
                await self.repo.set_fields(place, kept[place])
        return deleted

    async def forget_server(self, server_key: str) -> int:
        """The bot was removed from a server (a Discord guild kicked it, a Slack workspace
        uninstalled it): everything learned there goes, every channel with its threads, the
        Slack DMs, what is known about its people, and the server's own record of its
        places. Returns how many places were forgotten. (A Discord DM belongs to no guild and
        stays: the person still talks to the bot there.)"""
        roots = [root for root, _ in await self.repo.places_of(server_key)]
        people: set[str] = set()
        for root in roots:
            people.update(await self.repo.people_of(root))
            for thread in await self.repo.threads_of(root):
                people.update(await self.repo.people_of(thread))
        for person in sorted(people):  # first: a person scope has no pending-forget sweep
            await self.repo.forget_scope(person)
        forgotten: list[str] = []
        for root in roots:
            forgotten += await self.subtree(root)
            await self._forget_all(root, keep_settings=False)
        # Nothing of the server is left: not the counters a forget keeps (an epoch, a fact
        # counter), not its token spend (member ids among it), not its record of places.
        today = self.clock.now().date()
        days = [(today - timedelta(days=n)).isoformat() for n in range(-1, SPEND_DAYS + 2)]
        await self.repo.purge([*forgotten, *sorted(people)], server_key=server_key, days=days)
        await self._persist(erase=True)  # (one rewrite of the store's files for them all)
        return len(roots)

    async def subtree(self, scope: str) -> list[str]:
        """The places an operation in ``scope`` reaches: a channel's threads, then the
        channel; a thread or any other place alone."""
        return [*await self.repo.threads_of(scope), scope]

    async def _budget_before_forget(self, scope: str) -> dict[str, str | int]:
        """Forgetting a channel's memory must not reset its budget: the spend counters are
        not memory keys (they stay), the members' display names in them go, and the
        channel's own limits are returned to be written back after the forget."""
        if self.budget is None:
            return {}
        await self.budget.ledger.forget_names(scope)
        own = await self.budget.ledger.overrides(scope)
        kept = {"daily_tokens": own.daily, "user_daily_tokens": own.user_daily}
        return {k: v for k, v in kept.items() if v}

    async def _forget_everything(self, scope: str) -> int:
        authors = {e.author_id for e in await self.repo.all_entries(scope)}
        await self._forget_person_facts(
            scope, request=ForgetRequest(kind="all"), removed=set(), authors=authors
        )
        return await self.repo.forget_scope(scope)  # the pending request goes with it

    async def forget_text(self, scope: str, text: str) -> ForgetReport:
        """Forget the messages containing ``text`` (and the facts and summary sentences
        that repeat it) in the scope and, in a channel, in its threads."""
        scope = parse_scope(scope)
        needle = text.strip()
        if len(needle) < 2:
            raise InputError("give the text to forget (at least 2 characters)")
        places = await self.subtree(scope)
        return await self._forget_places(places, ForgetRequest(kind="text", text=needle))

    async def forget_user(self, scope: str, *, user_id: str, name: str = "") -> ForgetReport:
        """Forget one person here (in a channel: and in its threads where they spoke):
        their own messages (by user id; by exact name only where the place has no ids), the
        bot's answers to them, the facts about them or made of their messages, the summary
        sentences that repeat what they said, and what is known about them across the
        guild. Nobody else's memory goes: a name inside someone else's text is not them."""
        scope = parse_scope(scope)
        if not user_id and not name.strip():
            raise InputError("forget me needs a user id or a name")
        places = await self.subtree(scope)
        if user_id:  # where they spoke, by the tree (the place asked in, whatever it says)
            spoken = await self.repo.spoken_in([Scope.of(scope).root.key], user_id)
            reached = {s for found in spoken.values() for s in found} | {scope}
            places = [p for p in places if p in reached]
        return await self._forget_person(places, user_id=user_id, name=name)

    async def forget_user_everywhere(
        self, scope: str, *, user_id: str, name: str = ""
    ) -> ForgetReport:
        """``forget me everywhere``: the person in every place of the scope's server or
        workspace where they spoke (channels, threads, DMs), their DM with the bot, and
        what is known about them across it; as :meth:`forget_user` in each place. Each
        place is listed in the report. Without a server (the console, a Discord DM) it is
        the place itself."""
        scope = parse_scope(scope)
        if not user_id:
            return await self.forget_user(scope, user_id=user_id, name=name)
        places = await self.places_of_member(scope, user_id)
        return await self._forget_person(
            sorted({scope, *places}, key=_threads_first), user_id=user_id, name=name
        )

    async def places_of_member(self, scope: str, user_id: str) -> list[str]:
        """Every place of the scope's server or workspace where ``user_id`` has memory
        (spoke, or pinned a note about themselves), and their DM with the bot: threads
        before their channel."""
        place = Scope.of(scope)
        places: set[str] = set()
        if place.server_key is not None:
            roots = [root for root, _ in await self.repo.places_of(place.server_key)]
            for found in (await self.repo.spoken_in(roots, user_id)).values():
                places.update(found)
        dm = place.dm_scope(user_id)
        if dm is not None and await self.repo.scope_exists(dm.key):
            places.add(dm.key)
        return sorted(places, key=_threads_first)

    async def _forget_person(
        self, places: Sequence[str], *, user_id: str, name: str
    ) -> ForgetReport:
        # A name stands for a person only where lines carry no ids of their own (the
        # console, a replay or import of lines without user_id): on Discord or Slack anyone
        # could take a display name.
        named = not user_id or all(Scope.of(p).server_key is None for p in places)
        request = ForgetRequest(kind="user", user_id=user_id, name=name.strip() if named else "")
        report = await self._forget_places(places, request)
        for place in places:
            if user_id:
                await self.repo.forget_speaker(place, user_id)
            if self.budget is not None:  # their share of the spend is about them too
                await self.budget.ledger.forget_member(place, user_id)
        return report

    async def forget_message(
        self, scope: str, platform_id: str, *, when: datetime | None = None
    ) -> int:
        """A message deleted on its platform: delete it here too, with the facts made of it
        and the summary sentences that repeat it. Returns how many raw messages went.
        ``when``: the message's original send time, so its entry is found without reading
        the whole log."""
        scope = parse_scope(scope)
        if not platform_id:
            return 0
        from_ms = calendar.to_ms(when) if when is not None else 0
        doomed = await self._message_entries(scope, platform_id, from_ms)
        parent = Scope.of(scope).parent
        if not doomed and parent is not None:
            # Posted in a thread, kept in its channel: the bot's answer to a channel message
            # (Slack answers in a thread under the question; memory keeps it by the question).
            scope = parent.key
            doomed = await self._message_entries(scope, platform_id, from_ms)
        if not doomed:
            return 0
        # Its specific words (a number, a name of a thing) too, which a summary or a day's
        # decisions repeat without quoting the message: as an edit removing it all.
        needles = {n: None for e in doomed for n in removed_spans(e.text, "")}
        request = ForgetRequest(
            kind="message",
            platform_id=platform_id,
            entry_ids=tuple(e.id for e in doomed),
            quotes=tuple(e.text for e in doomed),
            needles=tuple(needles),
            ts_ms=min(_stored_ms(e) for e in doomed),  # a resumed forget finds it fast
        )
        return (await self._forget(scope, request, found=doomed)).messages

    async def edit_message(
        self,
        scope: str,
        platform_id: str,
        text: str,
        *,
        when: datetime | None = None,
        attachments: Sequence[Attachment] = (),
    ) -> bool:
        """A message edited on its platform: its new text replaces the stored one (one copy,
        same author and original time), summary sentences with the text the edit removed
        are dropped, and facts drawn from the message go (the next summary of the new text
        learns them again if they still hold). The same text again (platforms send updates
        for embeds and link previews) changes nothing; an edit down to no text is a delete.
        Returns whether memory changed. ``when``: as for :meth:`forget_message`.
        ``attachments``: the message's files, which an edit keeps (rendered as when stored)."""
        scope = parse_scope(scope)
        if not platform_id:
            return False
        cap = self.settings.memory.max_message_chars
        if not stored_text(text, cap, attachments)[0]:
            return bool(await self.forget_message(scope, platform_id, when=when))
        from_ms = calendar.to_ms(when) if when is not None else 0
        stored = await self._message_entries(scope, platform_id, from_ms)
        if not stored:
            return False
        first = stored[0]
        # A file the edit keeps keeps the caption it was given (the platform does not know it).
        kept = [
            replace(a, caption=a.caption or caption_in(first.text, a) or "") for a in attachments
        ]
        new_text, _ = stored_text(text, cap, kept)
        if [e.text for e in stored] == [new_text]:
            return False
        needles = {n: None for e in stored for n in removed_spans(e.text, new_text)}
        request = ForgetRequest(
            kind="edit",
            text=new_text,
            platform_id=platform_id,
            needles=tuple(needles),
            entry_ids=tuple(e.id for e in stored),
            ts_ms=_stored_ms(first),
            author=first.author,
            author_id=first.author_id,
            role=first.role,
            public=first.public,
        )
        await self._forget(scope, request, found=stored)
        return True

    # -- captions (background work: it must not bring back what was forgotten) ---------
    async def uncaptioned(
        self,
        scope: str,
        platform_id: str,
        attachments: Sequence[Attachment],
        *,
        when: datetime | None = None,
    ) -> tuple[list[Attachment], int]:
        """Of a stored message's ``attachments``, those its stored text lists without a
        caption (none when the message is gone or every file has one already: a caption
        is made once), and the scope's epoch, read first: the caption is written only if
        nothing was forgotten since (:meth:`add_captions`)."""
        scope = parse_scope(scope)
        epoch = (await self.repo.state(scope)).epoch  # before the message it decides on
        stored = await self._message_entries(
            scope, platform_id, calendar.to_ms(when) if when is not None else 0
        )
        if not platform_id or not stored:
            return [], epoch
        return [a for a in attachments if caption_in(stored[0].text, a) == ""], epoch

    async def add_captions(
        self,
        scope: str,
        platform_id: str,
        captioned: Sequence[Attachment],
        *,
        epoch: int,
        when: datetime | None = None,
    ) -> bool:
        """Store images' captions in their message's text (as an edit that removes nothing,
        so recall, summaries, the budget, exports and forget see them as the message's
        words). Nothing is written if the message is gone or lost the files meanwhile, or
        anything was forgotten in the scope since ``epoch`` (read by :meth:`uncaptioned`,
        before the model described the images; or a forget is pending): a caption never
        brings back forgotten memory. Whether it was stored."""
        scope = parse_scope(scope)
        if not platform_id:
            return False
        from_ms = calendar.to_ms(when) if when is not None else 0
        stored = await self._message_entries(scope, platform_id, from_ms)
        if len(stored) != 1:
            return False  # gone (forgotten, deleted), or copies an interrupted edit left
        [entry] = stored
        new_text = with_captions(entry.text, captioned, self.settings.memory.max_message_chars)
        if new_text == entry.text:
            return False
        request = ForgetRequest(
            kind="edit",
            text=new_text,
            platform_id=platform_id,
            entry_ids=(entry.id,),
            ts_ms=_stored_ms(entry),
            author=entry.author,
            author_id=entry.author_id,
            role=entry.role,
            public=entry.public,
        )
        if not await self.repo.begin_forget_at(scope, request.to_json(), epoch=epoch):
            return False
        await self._apply_edit(scope, request)
        await self.repo.end_forget(scope, request.to_json())
        await self._persist()
        return True

    async def _forget(
        self, scope: str, request: ForgetRequest, *, found: Sequence[LogEntry] | None = None
    ) -> ForgetReport:
        return await self._forget_places([scope], request, found={scope: found} if found else None)

    async def _forget_places(
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
            doomed = (found or {}).get(place)
            if doomed is None:
                doomed = [e for e in await self.repo.all_entries(place) if request.drop_entry(e)]
                planned.append(
                    (
                        place,
                        replace(
                            request,
                            entry_ids=tuple(e.id for e in doomed),
                            quotes=tuple(e.text for e in doomed) if request.kind == "user" else (),
                        ),
                    )
                )
            else:
                planned.append((place, request))
        await self.repo.begin_forgets([(place, r.to_json()) for place, r in planned])
        report = ForgetReport()
        for place, place_request in planned:
            done = await self._apply_forget(place, place_request)
            await self.repo.end_forget(place, place_request.to_json())
            if len(planned) == 1:
                report = done
            else:
                report.add(place, done)
        await self._persist(erase=True)
        return report

    async def resume_forgets(self, scope: str) -> int:
        """Finish the forgets a crash interrupted (maintenance calls this). Idempotent."""
        pending = await self.repo.pending_forgets(scope)
        for raw in pending:
            request = ForgetRequest.from_json(raw)
            if request.kind == "all":
                await self._forget_everything(scope)
                break
            await self._apply_forget(scope, request)
            await self.repo.end_forget(scope, raw)
        if not pending:
            await self.repo.end_forget(scope, None)
        else:  # the text the crash left in the store's files goes with it now
            await self._persist(erase=True)
        return len(pending)

    async def _apply_forget(self, scope: str, request: ForgetRequest) -> ForgetReport:
        if request.kind == "edit":
            return await self._apply_edit(scope, request)
        report = ForgetReport()
        if request.kind == "message":  # one message: read around its time, not the whole log
            entries = await self._message_entries(scope, request.platform_id, request.ts_ms)
        else:
            entries = await self.repo.all_entries(scope)
        doomed = [e.id for e in entries if request.drop_entry(e)]
        removed = {*request.entry_ids, *doomed}
        report.messages = await self.repo.delete_entries(scope, doomed)
        facts = await self.repo.facts(scope)
        gone = [f.id for f in facts if request.drop_fact(f, removed)]
        report.facts = await self.repo.delete_facts(scope, gone)
        report.facts += await self._forget_person_facts(
            scope, request=request, removed=removed, authors={e.author_id for e in entries}
        )
        own = Scope.of(scope).person_scope(request.user_id) if request.kind == "user" else None
        if own:  # everything known about them across the guild
            report.facts += len(await self.repo.facts(own.key))
            await self.repo.forget_scope(own.key)
        await self._redact(scope, request, report)
        # Counters are triggers only; re-derive them after deleting unsummarised messages.
        await self.repo.resync_counters(scope)
        return report

    async def _forget_person_facts(
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
        people = set(await self.repo.people_of(scope))
        place = Scope.of(scope)
        people.update(p.key for a in authors if (p := place.person_scope(a)))
        count = 0
        for person, person_facts in (await self.repo.facts_of(sorted(people))).items():
            gone = [
                f.id for f in person_facts if f.origin == scope and request.drop_fact(f, removed)
            ]
            count += await self.repo.delete_facts(person, gone)
        return count

    async def _redact(self, scope: str, request: ForgetRequest, report: ForgetReport) -> None:
        """Drop the summary sentences the forget reaches: tiers, days, day records, weeks."""
        if not request.redacts:
            return
        state = await self.repo.state(scope)
        changed: dict[str, str | int] = {}
        for name in TIER_FIELDS:
            before = str(getattr(state, name))
            after = request.redact(before)
            if after != before:
                changed[name] = after
                report.tiers.append(name)
        if changed:
            await self.repo.set_fields(scope, changed)
        days = await self.repo.days(scope)
        new_days = [redact_day(d, request.redact) for d in days]
        report.days = sum(a != b for a, b in zip(days, new_days, strict=True))
        if report.days:
            await self.repo.replace_days(scope, new_days)
        episodes = await self.repo.episodes(scope)
        new_episodes = [redact_day(d, request.redact) for d in episodes]
        if new_episodes != episodes:
            await self.repo.replace_episodes(scope, new_episodes)
        weeks = await self.repo.weeks(scope)
        new_weeks = [
            WeekSummary(w.week, request.redact(w.summary), w.days, w.degraded) for w in weeks
        ]
        report.weeks = sum(a.summary != b.summary for a, b in zip(weeks, new_weeks, strict=True))
        if report.weeks:
            await self.repo.replace_weeks(scope, new_weeks)

    async def _apply_edit(self, scope: str, request: ForgetRequest) -> ForgetReport:
        """Carry out an edit; safe to run again after a crash (the old entries are deleted
        by id, the new text is stored only if no copy of it is there yet)."""
        report = ForgetReport()
        report.messages = await self.repo.delete_entries(scope, request.entry_ids)
        await self._store_edited(scope, request)
        removed = set(request.entry_ids)
        facts = await self.repo.facts(scope)
        gone = [f.id for f in facts if request.drop_fact(f, removed)]
        report.facts = await self.repo.delete_facts(scope, gone)
        report.facts += await self._forget_person_facts(
            scope, request=request, removed=removed, authors=[request.author_id]
        )
        await self._redact(scope, request, report)
        await self.repo.resync_counters(scope)
        return report

    async def _store_edited(self, scope: str, request: ForgetRequest) -> None:
        copies = await self._message_entries(scope, request.platform_id, request.ts_ms)
        if any(e.text == request.text for e in copies):
            return  # stored by an earlier run of this edit
        await self.repo.release_platform_id(scope, request.platform_id)
        await self.repo.ingest(
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

    async def _message_entries(self, scope: str, platform_id: str, from_ms: int) -> list[LogEntry]:
        """The stored entries of one platform message. Its entry's id is never below its
        send time (``from_ms``), so a window of the log from just before then is read first;
        the whole log only when the message is not in it (or no time is known)."""
        if from_ms > 0:
            window = await self.repo.entries_from(
                scope, max(0, from_ms - LOOKUP_MARGIN_MS), limit=LOOKUP_WINDOW
            )
            found = [e for e in window if e.platform_id == platform_id]
            if found:
                return found
        return [e for e in await self.repo.all_entries(scope) if e.platform_id == platform_id]

    async def forget_fact(self, scope: str, fact_id: str) -> bool:
        """Forget one fact by its id, in the scope or, in a channel, in one of its threads
        (a channel's and its threads' facts never share an id)."""
        scope = parse_scope(scope)
        fact_id = fact_id.strip()
        if not fact_id:
            raise InputError("give the id of the fact to forget (see /memory show facts)")
        deleted = False
        for place in reversed(await self.subtree(scope)):  # the place itself first
            if await self.repo.delete_facts(place, [fact_id]):
                # the last answer may have used it (/memory why also checks what is left)
                await self.repo.drop_answer_record(place)
                deleted = True
                break
        if deleted:
            await self._persist(erase=True)
        return deleted


def _threads_first(scope: str) -> tuple[str, bool, str]:
    """Sort key: by subtree, a channel's threads before the channel."""
    place = Scope.of(scope)
    return place.root.key, not place.is_thread, scope


def _stored_ms(entry: LogEntry) -> int:
    """The ms an entry's ``ts`` field holds (rounded: the float round trip can fall short)."""
    return round(entry.ts.timestamp() * 1000)
