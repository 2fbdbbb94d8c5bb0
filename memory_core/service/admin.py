"""Admin operations on a scope's memory: show, forget, remember, export, import, pause,
config. The /memory commands of every platform, the CLI and the dashboard all call these;
permission checks happen before, in the front doors, which know who is asking.

The operations that forget are small classes of their own, one per job, which the admin
composes and delegates to: :mod:`memory_core.service.forgetting` (a text, a fact, a person, a
place), :mod:`memory_core.service.message_changes` (a platform's deletes and edits, captions)
and :mod:`memory_core.service.forget_requests` (carrying out the requests, finishing those a
crash interrupted); what a forget removes is
:class:`~memory_core.service.forget_request.ForgetRequest`.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from config.settings import Settings
from memory_core import calendar
from memory_core.clock import Clock
from memory_core.errors import InputError, StoreError
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
)
from memory_core.scopes import Audience, Scope, parse_scope
from memory_core.service.answer_record import AnswerRecord, read_record
from memory_core.service.budget import Budget, SpendReport, parse_limit
from memory_core.service.exports import EXPORT_FORMAT, EXPORT_VERSION, EXPORTED_STATE, parse_export
from memory_core.service.forget_requests import ForgetRequests
from memory_core.service.forgetting import PersonForgetting, PlaceForgetting, TextForgetting
from memory_core.service.import_check import without_forgotten
from memory_core.service.learning import LearnProgress
from memory_core.service.message_changes import MessageChanges
from memory_core.store.repo import MemoryRepo

log = logging.getLogger(__name__)

IMPORT_TRIES = 5  # an import that meets a forget while it writes is written again


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
    thread_facts: list[tuple[str, Fact]] = field(default_factory=list)  # (thread, fact)
    spend: SpendReport | None = None  # today's tokens against the limits (show stats)
    learn: LearnProgress | None = None  # where a learn of its channel is (show stats)


@dataclass(frozen=True, slots=True)
class MemberPlace:
    """One place where a member has memory, as their own view shows it."""

    scope: str
    name: str  # as the platform last gave it ("" unknown)
    messages: int  # their messages kept there
    facts: int  # facts about them kept there


@dataclass
class MemberView:
    """What memory keeps about one member across a server or workspace (the App Home):
    their places, each with its counts, and the facts that follow them."""

    places: list[MemberPlace]
    facts: list[Fact]  # about them across the server (their person scope)


class MemoryAdmin:
    """Every admin operation on a scope: those that show, pin, edit, configure, export and
    import are here; those that forget are its parts', one per job, which callers take
    directly: ``text`` (a text, a fact), ``person``, ``place``, ``messages`` (a platform's
    edits and deletes, and captions) and ``requests`` (every forget carried out, and those a
    crash interrupted finished)."""

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
        self.clock = clock  # notes and exports are dated
        self.requests = ForgetRequests(repo=repo, settings=settings, persist=persist, clock=clock)
        self.text = TextForgetting(self.requests)
        self.person = PersonForgetting(self.requests, clock=clock, budget=budget)
        self.place = PlaceForgetting(self.requests, clock=clock, budget=budget)
        self.messages = MessageChanges(self.requests)

    def _now_iso(self) -> str:
        return self.clock.now().isoformat(timespec="seconds")

    # -- read --------------------------------------------------------------------------
    async def show(
        self, scope: str, *, recent: int = 10, user_id: str = "", spend: bool = False
    ) -> ScopeView:
        """The scope's memory; with ``user_id``, also what is known about that person across
        the guild or workspace (shown only to them: /memory answers are private). With
        ``spend``, today's tokens: the scope's, that person's own, the server's."""
        scope = parse_scope(scope)
        state = await self.repo.reads.state(scope)
        person = self._person_here(scope, state, user_id)
        entries = await self.repo.reads.recent(scope, recent) if recent else []
        memory = self.settings.memory
        return ScopeView(
            scope=scope,
            state=state,
            days=await self.repo.reads.days(scope),
            weeks=await self.repo.reads.weeks(scope),
            facts=await self.repo.reads.facts(scope),
            recent=list(reversed(entries)),
            messages=await self.repo.reads.log_length(scope),
            mode=state.mode or memory.default_mode,
            timezone=state.tz or memory.timezone,
            language=state.lang or memory.language,
            about_you=await self.repo.reads.facts(person) if person else [],
            thread_facts=await self._thread_facts(scope),
            spend=await self.budget.report(scope, member_id=user_id)
            if spend and self.budget is not None
            else None,
            learn=LearnProgress.from_job(
                Scope.of(scope).root.key,
                await self.repo.learning.job(Scope.of(scope).root.key),
            )
            if spend
            else None,
        )

    @staticmethod
    def _person_here(scope: str, state: ScopeState, user_id: str) -> str | None:
        """The person scope of ``user_id`` where it may be shown and pinned to: the place
        has a server, is no DM, and its audience lets facts in (not a channel shared with
        another organisation)."""
        person = Scope.of(scope).person_scope(user_id)
        if person is None or not Audience.parse(state.aud or "private").lets_facts_in:
            return None
        return person.key

    async def _thread_facts(self, scope: str) -> list[tuple[str, Fact]]:
        """A channel's threads' facts (with their thread), shown and forgotten from the
        channel: on Slack no command runs in a thread."""
        threads = await self.repo.reads.threads_of(scope)
        found = await self.repo.reads.facts_of(threads)
        return [(thread, fact) for thread in threads for fact in found.get(thread, [])]

    async def member_view(self, scope: str, user_id: str, *, limit: int = 50) -> MemberView:
        """What is kept about ``user_id`` across the server of ``scope`` (at most ``limit``
        places, most recent first), for them alone to see."""
        scope = parse_scope(scope)
        places = (await self.person.places_of_member(scope, user_id))[:limit]
        names = await self.repo.reads.names_of(places)
        counts = await self.repo.reads.messages_by(places, user_id)
        facts = await self.repo.reads.facts_of(places)
        person = Scope.of(scope).person_scope(user_id)
        return MemberView(
            places=[
                MemberPlace(
                    scope=place,
                    name=names.get(place, ""),
                    messages=counts.get(place, 0),
                    facts=sum(f.subject_id == user_id for f in facts.get(place, [])),
                )
                for place in places
            ],
            facts=await self.repo.reads.facts(person.key) if person else [],
        )

    async def place_names(self, scopes: list[str]) -> dict[str, str]:
        """The names people know the places by ("#general (My Server)"; "" unknown)."""
        return await self.repo.reads.names_of(scopes)

    async def why(self, scope: str) -> AnswerRecord | None:
        """What the last answer in the scope used (``/memory why``), while it is kept."""
        return await read_record(self.repo, parse_scope(scope))

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
        return await self.repo.writes.put_fact(scope, fact)

    async def remember_me(self, scope: str, text: str, *, user_id: str, name: str) -> Fact:
        """A person pins something about themselves. Their choice, so it follows them across
        the guild or workspace (their person scope); in a DM, the console or a channel shared
        with another organisation it stays there (``shared`` False)."""
        scope = parse_scope(scope)
        text = _fact_text(
            text, "give the text to remember, e.g. /memory remember me I am vegetarian"
        )
        if not user_id:
            raise InputError("remember me needs to know who you are (a user id)")
        person = self._person_here(scope, await self.repo.reads.state(scope), user_id)
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
        if person is None:  # a DM, the console, a place shared with another organisation
            fact.shared = False  # it stays here, and "forget me everywhere" finds it here
            await self.repo.writes.note_speaker(scope, user_id)
            return await self.repo.writes.put_fact(scope, fact)
        await self.repo.writes.note_person(scope, person)
        return await self.repo.writes.put_fact(person, fact)

    async def edit_tier(self, scope: str, tier: str, text: str) -> None:
        """An admin's own words for a tier. The epoch moves first, so a summary being written
        from the old tier at that moment is refused instead of overwriting the edit."""
        if tier not in TIER_FIELDS:
            raise InputError(f"unknown tier {tier!r}: choose one of {', '.join(TIER_FIELDS)}")
        scope = parse_scope(scope)
        await self.repo.writes.bump_epoch(scope)
        await self.repo.writes.set_fields(scope, {tier: text.strip()})

    async def edit_fact(self, scope: str, fact_id: str, text: str, *, by: str = "") -> Fact:
        """New text for a fact; the old text joins its history (provenance stays honest, and
        forget <text> still reaches it). The epoch moves first, as for a tier edit."""
        scope = parse_scope(scope)
        text = _fact_text(text, "a fact needs some text (to remove it, forget it)")
        for fact in await self.repo.reads.facts(scope):
            if fact.id == fact_id:
                if fact.text != text:
                    await self.repo.writes.bump_epoch(scope)
                    fact.history = [*fact.history, fact.text][-5:]
                    fact.text = text
                    fact.ts = self._now_iso()
                    fact.by = by or fact.by
                    await self.repo.writes.replace_fact(scope, fact)
                    # The last answer's record (/memory why) quotes the old text: it goes.
                    await self.repo.writes.drop_answer_record(scope)
                return fact
        raise InputError(f"there is no fact {fact_id!r} in {scope} (see /memory show facts)")

    # -- pause / config ----------------------------------------------------------------
    async def set_paused(self, scope: str, paused: bool) -> None:
        await self.repo.writes.set_fields(parse_scope(scope), {"paused": 1 if paused else 0})

    async def configure(
        self,
        scope: str,
        *,
        mode: str | None = None,
        timezone: str | None = None,
        language: str | None = None,
        daily_tokens: str | None = None,
        user_daily_tokens: str | None = None,
        sources: str | None = None,
    ) -> dict[str, str]:
        """Change the scope's settings. The budgets take a number of tokens, "off" (no
        limit here, whatever the settings say) or "default" (the settings' limit)."""
        scope = parse_scope(scope)
        changes = _config_changes(
            mode=mode,
            timezone=timezone,
            language=language,
            daily_tokens=daily_tokens,
            user_daily_tokens=user_daily_tokens,
            sources=sources,
        )
        await self.repo.writes.set_fields(scope, changes)
        shown = {k: str(v) for k, v in changes.items()}
        if sources is not None:
            shown["sources"] = sources  # as it was asked: on | off
        return shown

    # -- export / import ---------------------------------------------------------------
    async def export(self, scope: str) -> dict[str, Any]:
        scope = parse_scope(scope)
        dump = await self.repo.reads.dump(scope)
        return {
            "format": EXPORT_FORMAT,
            "version": EXPORT_VERSION,
            "scope": scope,
            "exported_at": self._now_iso(),
            "state": {k: dump.state[k] for k in sorted(dump.state) if k in EXPORTED_STATE},
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
            await self.repo.writes.forget_scope(scope)
        last_ms = int(dump.state.get("last_ms") or 0) or calendar.to_ms(self.clock.now())
        ledger = self.repo.ledger
        await ledger.adopt_server(scope)  # (the people forgotten across its server)
        for _ in range(IMPORT_TRIES):
            # Nothing forgotten comes back: checked against the ledger as it is, and written
            # again (the scope was empty) if it moved while the export was being written.
            known = await ledger.read(scope)
            kept, dropped = without_forgotten(dump, known, scope=scope)
            await self.repo.writes.restore(scope, kept, last_activity_ms=last_ms)
            if await ledger.version(scope) == known.version:
                break
            await self.repo.writes.forget_scope(scope)
        else:
            raise StoreError(f"{scope} kept forgetting while the export was loaded: load it again")
        if dropped:
            log.info("left %d forgotten messages of the export to %s out", dropped, scope)
        await self.repo.writes.resync_counters(scope)
        return len(kept.log)


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


def _config_changes(
    *,
    mode: str | None,
    timezone: str | None,
    language: str | None,
    daily_tokens: str | None,
    user_daily_tokens: str | None,
    sources: str | None,
) -> dict[str, str | int]:
    """The state fields a /memory config sets, each value checked (InputError if bad)."""
    changes: dict[str, str | int] = {}
    for name, value in (
        ("daily_tokens", daily_tokens),
        ("user_daily_tokens", user_daily_tokens),
    ):
        if value is not None:
            changes[name] = parse_limit(value, setting=name)
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
    if sources is not None:  # the "from <date>" line under answers that used recall
        if sources not in ("on", "off"):
            raise InputError(f"sources must be on or off (got {sources[:20]!r})")
        changes["sources"] = 1 if sources == "on" else 0
    if not changes:
        raise InputError(
            "nothing to change: give mode, timezone, language, daily_tokens, "
            "user_daily_tokens or sources"
        )
    return changes
