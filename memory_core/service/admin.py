"""Admin operations on a scope's memory: show, forget, remember, export, import, pause,
config. The /memory commands of every platform, the CLI and the dashboard all call these;
permission checks happen before, in the front doors, which know who is asking.

Forget means gone: after ``forget_text`` the text is in none of the scope's keys (raw log,
tiers, days, weeks, facts), and the scope's epoch moves so a summary being written from
the old text at that moment is discarded instead of bringing it back.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from config.settings import Settings
from memory_core import calendar
from memory_core.clock import Clock
from memory_core.errors import InputError
from memory_core.models import (
    LANGUAGE_SETTINGS,
    MAX_FACT_CHARS,
    MODES,
    TIER_FIELDS,
    DaySummary,
    Fact,
    LogEntry,
    ScopeState,
    WeekSummary,
    stored_text,
)
from memory_core.scopes import parse_scope, user_scope
from memory_core.service.exports import EXPORT_FORMAT, EXPORT_VERSION, EXPORTED_STATE, parse_export
from memory_core.store.repo import MemoryRepo
from memory_core.text.tokens import TokenCounter
from memory_core.tiers.redact import contains, redact, redact_quotes, removed_spans

# Finding a message by its platform id: stream ids never go below a message's own time, so
# the log is read from a little before it (clock skew), a bounded window, before a full scan.
LOOKUP_MARGIN_MS = 60_000
LOOKUP_WINDOW = 300


@dataclass
class ScopeView:
    scope: str
    state: ScopeState
    days: list[DaySummary]
    weeks: list[WeekSummary]
    facts: list[Fact]
    recent: list[LogEntry]  # newest last
    messages: int
    mode: str
    timezone: str
    language: str
    about_you: list[Fact] = field(default_factory=list)


@dataclass
class ForgetReport:
    messages: int = 0
    facts: int = 0
    tiers: list[str] = field(default_factory=list)
    days: int = 0
    weeks: int = 0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class ForgetRequest:
    """What to forget, written down before any of it is done, so a forget that a crash
    interrupts is finished later (a forgotten text stays forgotten).

    Forgetting a person or a message never matches a name inside text: it goes by platform
    user id (or, where a place has no ids, such as the console or a replay without
    ``user_id``, by the exact author name), and it reaches summaries and facts through what
    was said (``quotes``) and where facts came from (``entry_ids``)."""

    kind: str  # "text" | "user" | "message" | "edit" | "all"
    text: str = ""  # "edit": the message's new text
    user_id: str = ""
    name: str = ""  # "user" in a place without user ids: the author, exactly
    platform_id: str = ""
    entry_ids: tuple[str, ...] = ()  # the raw messages it removes, found before removing any
    quotes: tuple[str, ...] = ()  # their texts: summary sentences that repeat them go too
    # "message": the deleted text's specific words; "edit": what the edit took out. Summary
    # sentences and facts that contain one go (a day's decisions repeat a number unquoted).
    needles: tuple[str, ...] = ()
    ts_ms: int = 0  # "message", "edit": the message's original send time (to find it fast)
    # "edit": who wrote the message (its new text is stored as theirs)
    author: str = ""
    author_id: str = ""
    role: str = "user"

    def drop_entry(self, entry: LogEntry) -> bool:
        if entry.id in self.entry_ids or self.kind == "all":
            return True
        if self.kind == "text":
            return contains(entry.text, self.text)
        if self.kind in ("message", "edit"):
            return bool(self.platform_id) and entry.platform_id == self.platform_id
        if self.kind != "user" or entry.role == "assistant":
            return False
        if self.user_id:
            return entry.author_id == self.user_id
        return not entry.author_id and entry.author == self.name

    def drop_fact(self, fact: Fact, removed: set[str]) -> bool:
        if self.kind == "all" or removed.intersection(fact.message_ids):
            return True  # made from a removed message
        if self.kind == "text":
            return any(contains(t, self.text) for t in (fact.text, fact.subject, *fact.history))
        if self.kind == "user":
            if self.user_id:
                return fact.subject_id == self.user_id
            return not fact.subject_id and fact.subject.casefold() == self.name.casefold()
        # "message", "edit": drawn from it (above), or repeating what went; an edited fact
        # that still holds is learned again from the new text.
        return any(contains(t, n) for n in self.needles for t in (fact.text, *fact.history))

    def redact(self, text: str) -> str:
        """A summary without what this forget removes."""
        if self.kind == "text":
            return redact(text, [self.text])
        if self.kind == "edit":  # what stayed in the message may stay in the summaries
            return redact(text, self.needles)
        return redact(redact_quotes(text, self.quotes), self.needles)

    @property
    def redacts(self) -> bool:
        return bool(self.text if self.kind == "text" else self.quotes or self.needles)

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False)

    @classmethod
    def from_json(cls, raw: str) -> ForgetRequest:
        data = json.loads(raw)
        names = data.get("names") or [""]  # written by an older version
        return cls(
            kind=str(data.get("kind", "text")),
            text=str(data.get("text", "")),
            user_id=str(data.get("user_id", "")),
            name=str(data.get("name", names[0])),
            platform_id=str(data.get("platform_id", "")),
            entry_ids=tuple(str(x) for x in data.get("entry_ids", [])),
            quotes=tuple(str(x) for x in data.get("quotes", [])),
            needles=tuple(str(x) for x in data.get("needles", [])),
            ts_ms=int(data.get("ts_ms", 0)),
            author=str(data.get("author", "")),
            author_id=str(data.get("author_id", "")),
            role="assistant" if data.get("role") == "assistant" else "user",
        )


class MemoryAdmin:
    def __init__(
        self,
        *,
        repo: MemoryRepo,
        settings: Settings,
        clock: Clock,
        persist: Callable[[], Awaitable[None]],
    ) -> None:
        self.repo = repo
        self.settings = settings
        self.clock = clock
        # Makes what was just done durable (Store.persist): a forget is reported done only
        # once a crash can no longer bring the text back.
        self._persist = persist

    def _now_iso(self) -> str:
        return self.clock.now().isoformat(timespec="seconds")

    # -- read --------------------------------------------------------------------------
    async def show(self, scope: str, *, recent: int = 10, user_id: str = "") -> ScopeView:
        """The scope's memory; with ``user_id``, also what is known about that person across
        the guild or workspace (shown only to them: /memory answers are private)."""
        scope = parse_scope(scope)
        person = user_scope(scope, user_id)
        state = await self.repo.state(scope)
        entries = await self.repo.recent(scope, recent) if recent else []
        m = self.settings.memory
        return ScopeView(
            scope=scope,
            state=state,
            days=await self.repo.days(scope),
            weeks=await self.repo.weeks(scope),
            facts=await self.repo.facts(scope),
            recent=list(reversed(entries)),
            messages=await self.repo.log_length(scope),
            mode=state.mode or m.default_mode,
            timezone=state.tz or m.timezone,
            language=state.lang or m.language,
            about_you=await self.repo.facts(person) if person else [],
        )

    # -- forget ------------------------------------------------------------------------
    async def forget_all(self, scope: str) -> int:
        """Delete everything learned in the scope: its keys (raw log, tiers, days, weeks, day
        records, facts, vectors, markers) and the facts about people that were learned here.
        The epoch survives and moves on, so a summary being written from the forgotten
        memory right now is refused. Returns how many keys were deleted."""
        scope = parse_scope(scope)
        request = ForgetRequest(kind="all")
        await self.repo.begin_forget(scope, request.to_json())
        deleted = await self._forget_everything(scope)
        await self._persist()
        return deleted

    async def _forget_everything(self, scope: str) -> int:
        authors = {e.author_id for e in await self.repo.all_entries(scope)}
        await self._forget_person_facts(
            scope, request=ForgetRequest(kind="all"), removed=set(), authors=authors
        )
        return await self.repo.forget_scope(scope)  # the pending request goes with it

    async def forget_text(self, scope: str, text: str) -> ForgetReport:
        scope = parse_scope(scope)
        needle = text.strip()
        if len(needle) < 2:
            raise InputError("give the text to forget (at least 2 characters)")
        return await self._forget(scope, ForgetRequest(kind="text", text=needle))

    async def forget_user(self, scope: str, *, user_id: str, name: str = "") -> ForgetReport:
        """Forget one person here: their own messages (by user id; by exact name only where
        the place has no ids), the facts about them or made of their messages, the summary
        sentences that repeat what they said, and what is known about them across the guild.
        Nobody else's memory goes: a name inside someone else's text is not them."""
        scope = parse_scope(scope)
        if not user_id and not name.strip():
            raise InputError("forget me needs a user id or a name")
        return await self._forget(
            scope, ForgetRequest(kind="user", user_id=user_id, name="" if user_id else name)
        )

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
        self, scope: str, platform_id: str, text: str, *, when: datetime | None = None
    ) -> bool:
        """A message edited on its platform: its new text replaces the stored one (one copy,
        same author and original time), summary sentences with the text the edit removed
        are dropped, and facts drawn from the message go (the next summary of the new text
        learns them again if they still hold). The same text again (platforms send updates
        for embeds and link previews) changes nothing; an edit down to no text is a delete.
        Returns whether memory changed. ``when``: as for :meth:`forget_message`."""
        scope = parse_scope(scope)
        if not platform_id:
            return False
        new_text, _ = stored_text(text, self.settings.memory.max_message_chars)
        if not new_text:
            return bool(await self.forget_message(scope, platform_id, when=when))
        from_ms = calendar.to_ms(when) if when is not None else 0
        stored = await self._message_entries(scope, platform_id, from_ms)
        if not stored or [e.text for e in stored] == [new_text]:
            return False
        first = stored[0]
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
        )
        await self._forget(scope, request, found=stored)
        return True

    async def _forget(
        self, scope: str, request: ForgetRequest, *, found: Sequence[LogEntry] | None = None
    ) -> ForgetReport:
        # What goes is found first and written down with the request (and the epoch moved, so
        # a summary being computed from the old text is refused): a crash from here on leaves
        # a pending forget that maintenance finishes, even once the messages are gone.
        if found is None:
            found = [e for e in await self.repo.all_entries(scope) if request.drop_entry(e)]
            request = replace(
                request,
                entry_ids=tuple(e.id for e in found),
                quotes=tuple(e.text for e in found) if request.kind == "user" else (),
            )
        await self.repo.begin_forget(scope, request.to_json())
        report = await self._apply_forget(scope, request)
        await self.repo.end_forget(scope, request.to_json())
        await self._persist()  # reported done only once it is durable
        return report

    async def resume_forgets(self, scope: str) -> int:
        """Finish the forgets a crash interrupted (maintenance calls this). Idempotent."""
        pending = await self.repo.pending_forgets(scope)
        for raw in pending:
            request = ForgetRequest.from_json(raw)
            if request.kind == "all":
                await self._forget_everything(scope)
                return len(pending)
            await self._apply_forget(scope, request)
            await self.repo.end_forget(scope, raw)
        if not pending:
            await self.repo.end_forget(scope, None)
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
        own = user_scope(scope, request.user_id) if request.kind == "user" else None
        if own:  # everything known about them across the guild
            report.facts += len(await self.repo.facts(own))
            await self.repo.forget_scope(own)
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
        people.update(p for a in authors if (p := user_scope(scope, a)))
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
        new_days = [_redact_day(d, request.redact) for d in days]
        report.days = sum(a != b for a, b in zip(days, new_days, strict=True))
        if report.days:
            await self.repo.replace_days(scope, new_days)
        episodes = await self.repo.episodes(scope)
        new_episodes = [_redact_day(d, request.redact) for d in episodes]
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
            parent="",
            touch_index=False,
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
        scope = parse_scope(scope)
        fact_id = fact_id.strip()
        if not fact_id:
            raise InputError("give the id of the fact to forget (see /memory show facts)")
        deleted = bool(await self.repo.delete_facts(scope, [fact_id]))
        await self._persist()
        return deleted

    # -- remember ----------------------------------------------------------------------
    async def remember(self, scope: str, text: str, *, by: str = "") -> Fact:
        scope = parse_scope(scope)
        text = _fact_text(
            text, "give the text to remember, e.g. /memory remember standup is at 10:00"
        )
        fact = Fact(
            id="",
            kind="note",
            text=text,
            source="remember",
            by=by,
            ts=self._now_iso(),
            pinned=True,
        )
        return await self.repo.put_fact(scope, fact)

    async def remember_me(self, scope: str, text: str, *, user_id: str, name: str) -> Fact:
        """A person pins something about themselves. Their choice, so it follows them across
        the guild or workspace (their person scope); in a DM or the console it stays there."""
        scope = parse_scope(scope)
        text = _fact_text(
            text, "give the text to remember, e.g. /memory remember me I am vegetarian"
        )
        if not user_id:
            raise InputError("remember me needs to know who you are (a user id)")
        fact = Fact(
            id="",
            kind="profile",
            text=text,
            subject=name,
            source="remember",
            by=name,
            ts=self._now_iso(),
            pinned=True,
            origin=scope,
            subject_id=user_id,
            shared=True,
        )
        person = user_scope(scope, user_id)
        if person is None:
            return await self.repo.put_fact(scope, fact)
        await self.repo.note_person(scope, person)
        return await self.repo.put_fact(person, fact)

    async def edit_tier(self, scope: str, tier: str, text: str) -> None:
        """An admin's own words for a tier. The epoch moves first, so a summary being written
        from the old tier at that moment is refused instead of overwriting the edit."""
        if tier not in TIER_FIELDS:
            raise InputError(f"unknown tier {tier!r}: choose one of {', '.join(TIER_FIELDS)}")
        scope = parse_scope(scope)
        await self.repo.bump_epoch(scope)
        await self.repo.set_fields(scope, {tier: text.strip()})

    async def edit_fact(self, scope: str, fact_id: str, text: str, *, by: str = "") -> Fact:
        """New text for a fact; the old text joins its history (provenance stays honest, and
        forget <text> still reaches it). The epoch moves first, as for a tier edit."""
        scope = parse_scope(scope)
        text = _fact_text(text, "a fact needs some text (to remove it, forget it)")
        for fact in await self.repo.facts(scope):
            if fact.id == fact_id:
                if fact.text != text:
                    await self.repo.bump_epoch(scope)
                    fact.history = [*fact.history, fact.text][-5:]
                    fact.text = text
                    fact.ts = self._now_iso()
                    fact.by = by or fact.by
                    await self.repo.replace_fact(scope, fact)
                return fact
        raise InputError(f"there is no fact {fact_id!r} in {scope} (see /memory show facts)")

    # -- pause / config ----------------------------------------------------------------
    async def set_paused(self, scope: str, paused: bool) -> None:
        await self.repo.set_fields(parse_scope(scope), {"paused": 1 if paused else 0})

    async def configure(
        self,
        scope: str,
        *,
        mode: str | None = None,
        timezone: str | None = None,
        language: str | None = None,
    ) -> dict[str, str]:
        scope = parse_scope(scope)
        changes: dict[str, str | int] = {}
        if mode is not None:
            if mode not in MODES:
                raise InputError(f"mode must be one of {', '.join(MODES)} (got {mode!r})")
            changes["mode"] = mode
        if timezone is not None:
            try:
                ZoneInfo(timezone)
            except (ZoneInfoNotFoundError, ValueError, OSError) as exc:  # OSError: "Asia"
                raise InputError(
                    f"unknown timezone {timezone[:80]!r}: use an IANA name such as Asia/Tokyo"
                ) from exc
            changes["tz"] = timezone
        if language is not None:
            if language not in LANGUAGE_SETTINGS:
                raise InputError(
                    f"language must be one of {', '.join(LANGUAGE_SETTINGS)} (got {language!r})"
                )
            changes["lang"] = "" if language == "auto" else language
        if not changes:
            raise InputError("nothing to change: give mode, timezone or language")
        await self.repo.set_fields(scope, changes)
        return {k: str(v) for k, v in changes.items()}

    # -- export / import ---------------------------------------------------------------
    async def export(self, scope: str) -> dict[str, Any]:
        scope = parse_scope(scope)
        dump = await self.repo.dump(scope)
        return {
            "format": EXPORT_FORMAT,
            "version": EXPORT_VERSION,
            "scope": scope,
            "exported_at": self._now_iso(),
            "state": {k: v for k, v in dump.state.items() if k in EXPORTED_STATE},
            "log": [
                {
                    "id": e.id,
                    "ts": e.ts.isoformat(),
                    "role": e.role,
                    "author": e.author,
                    "author_id": e.author_id,
                    "text": e.text,
                    "tokens": e.tokens,
                    "platform_id": e.platform_id,
                }
                for e in dump.log
            ],
            "days": [asdict(d) for d in dump.days],
            "episodes": [asdict(d) for d in dump.episodes],
            "weeks": [asdict(w) for w in dump.weeks],
            "facts": [asdict(f) for f in dump.facts],
            "done": dump.done,
        }

    async def import_(self, scope: str, data: object, *, replace: bool = False) -> int:
        """Load an export into ``scope``. Refuses a non-empty scope unless ``replace``. The
        whole file is checked first, like live input: nothing is written if any of it is bad."""
        scope = parse_scope(scope)
        dump = parse_export(
            data,
            scope=scope,
            max_message_chars=self.settings.memory.max_message_chars,
            now=self.clock.now(),
        )
        if replace:
            await self.repo.forget_scope(scope)
        last_ms = int(dump.state.get("last_ms") or 0) or calendar.to_ms(self.clock.now())
        await self.repo.restore(scope, dump, last_activity_ms=last_ms)
        await self.repo.resync_counters(scope)
        return len(dump.log)


def _stored_ms(entry: LogEntry) -> int:
    """The ms an entry's ``ts`` field holds (rounded: the float round trip can fall short)."""
    return round(entry.ts.timestamp() * 1000)


def _redact_day(day: DaySummary, redact_text: Callable[[str], str]) -> DaySummary:
    """A day record without the sentences a forget reaches."""

    def keep(items: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(x for x in (redact_text(i) for i in items) if x)

    return replace(
        day,
        summary=redact_text(day.summary),
        topic=redact_text(day.topic),
        decisions=keep(day.decisions),
        follow_ups=keep(day.follow_ups),
    )


def _fact_text(text: str, if_empty: str) -> str:
    """A note's or fact's text on one line, refused when empty or over 500 characters."""
    text = " ".join(text.split())
    if not text:
        raise InputError(if_empty)
    if len(text) > MAX_FACT_CHARS:
        raise InputError(
            f"a note holds at most {MAX_FACT_CHARS} characters (this one has {len(text)})"
        )
    return text


# -- import checks ---------------------------------------------------------------------
# An export is a file a person can edit: every field is checked as live input would be.
