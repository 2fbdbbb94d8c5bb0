"""Admin operations on a scope's memory: show, forget, remember, export, import, pause,
config. The /memory commands of every platform, the CLI and the dashboard all call these;
permission checks happen before, in the front doors, which know who is asking.

Forget means gone: after ``forget_text`` the text is in none of the scope's keys (raw log,
tiers, days, weeks, facts), and the scope's epoch moves so a summary being written from
the old text at that moment is discarded instead of bringing it back.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from config.settings import Settings
from memory_core import calendar
from memory_core.clock import Clock
from memory_core.errors import InputError, InvalidScope
from memory_core.models import FACT_KINDS, DaySummary, Fact, LogEntry, ScopeState, WeekSummary
from memory_core.redact import contains, redact
from memory_core.repo import MemoryRepo, ScopeDump
from memory_core.scopes import check_parent, parse_scope, user_scope

EXPORT_FORMAT = "memorybot-export"
EXPORT_VERSION = 1
MODES = ("mention", "all", "off")
LANGUAGE_SETTINGS = ("auto", "en", "ja")
TIER_FIELDS = ("short", "mid", "long", "overview")
MAX_FACT_CHARS = 500
# State fields an export carries; counters and locks are rebuilt, not copied.
EXPORTED_STATE = (
    "day",
    "short",
    "short_upto",
    "mid",
    "long",
    "overview",
    "tiers_at",
    "msg_count",
    "last_ms",
    "created_ms",
    "paused",
    "mode",
    "tz",
    "lang",
    "parent",
    "refresh_pending",
    "week_pending",
    "fact_seq",
    "day_msgs",
    "last_rollover",
)


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
    interrupts is finished later (a forgotten text stays forgotten)."""

    kind: str  # "text" | "user" | "message"
    text: str = ""
    user_id: str = ""
    names: tuple[str, ...] = ()
    platform_id: str = ""
    needles: tuple[str, ...] = ()  # for "message": the deleted messages' texts

    def drop_entry(self, entry: LogEntry) -> bool:
        if self.kind == "text":
            return contains(entry.text, self.text)
        if self.kind == "message":
            return entry.platform_id == self.platform_id
        if entry.role == "assistant":
            return False
        if self.user_id and entry.author_id:
            return entry.author_id == self.user_id
        return entry.author in self.names

    def drop_fact(self, fact: Fact) -> bool:
        if self.kind == "text":
            return any(contains(t, self.text) for t in (fact.text, fact.subject, *fact.history))
        if self.kind == "message":
            return False
        people = {fact.subject, fact.by}
        return bool(people & set(self.names)) or any(contains(fact.text, n) for n in self.names)

    def redactions(self) -> list[str]:
        return [self.text] if self.kind == "text" else list(self.names or self.needles)

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False)

    @classmethod
    def from_json(cls, raw: str) -> ForgetRequest:
        data = json.loads(raw)
        return cls(
            kind=str(data.get("kind", "text")),
            text=str(data.get("text", "")),
            user_id=str(data.get("user_id", "")),
            names=tuple(str(x) for x in data.get("names", [])),
            platform_id=str(data.get("platform_id", "")),
            needles=tuple(str(x) for x in data.get("needles", [])),
        )


class MemoryAdmin:
    def __init__(self, *, repo: MemoryRepo, settings: Settings, clock: Clock) -> None:
        self.repo = repo
        self.settings = settings
        self.clock = clock

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
        """Delete every key of the scope. Returns how many keys were deleted."""
        return await self.repo.forget_scope(parse_scope(scope))

    async def forget_text(self, scope: str, text: str) -> ForgetReport:
        scope = parse_scope(scope)
        needle = text.strip()
        if len(needle) < 2:
            raise InputError("give the text to forget (at least 2 characters)")
        return await self._forget(scope, ForgetRequest(kind="text", text=needle))

    async def forget_user(
        self, scope: str, *, user_id: str, names: Sequence[str] = ()
    ) -> ForgetReport:
        """Forget one person: their messages, facts about or by them, summary sentences
        that name them, and what is known about them across the guild."""
        scope = parse_scope(scope)
        if not user_id and not names:
            raise InputError("forget me needs a user id or a name")
        names = tuple(n for n in names if len(n.strip()) >= 2)
        return await self._forget(scope, ForgetRequest(kind="user", user_id=user_id, names=names))

    async def _forget(self, scope: str, request: ForgetRequest) -> ForgetReport:
        # Written down first (and the epoch moved, so any summary being computed from the old
        # text is refused): a crash from here on leaves a pending forget, finished later.
        await self.repo.begin_forget(scope, request.to_json())
        report = await self._apply_forget(scope, request)
        await self.repo.end_forget(scope, request.to_json())
        return report

    async def resume_forgets(self, scope: str) -> int:
        """Finish the forgets a crash interrupted (maintenance calls this). Idempotent."""
        pending = await self.repo.pending_forgets(scope)
        for raw in pending:
            request = ForgetRequest.from_json(raw)
            await self._apply_forget(scope, request)
            await self.repo.end_forget(scope, raw)
        if not pending:
            await self.repo.end_forget(scope, None)
        return len(pending)

    async def _apply_forget(self, scope: str, request: ForgetRequest) -> ForgetReport:
        report = ForgetReport()
        entries = await self.repo.all_entries(scope)
        doomed = [e.id for e in entries if request.drop_entry(e)]
        report.messages = await self.repo.delete_entries(scope, doomed)
        facts = await self.repo.facts(scope)
        gone = [f.id for f in facts if request.drop_fact(f)]
        report.facts = await self.repo.delete_facts(scope, gone)
        # Facts about the people who spoke here, learned here, live in their own scopes.
        people = sorted({p for e in entries if (p := user_scope(scope, e.author_id))})
        for person, person_facts in (await self.repo.facts_of(people)).items():
            gone = [f.id for f in person_facts if f.origin == scope and request.drop_fact(f)]
            report.facts += await self.repo.delete_facts(person, gone)
        own = user_scope(scope, request.user_id) if request.kind == "user" else None
        if own:  # everything known about them across the guild
            report.facts += len(await self.repo.facts(own))
            await self.repo.forget_scope(own)
        needles = request.redactions()
        if needles:
            await self._redact(scope, needles, report)
        # Counters are triggers only; re-derive them after deleting unsummarised messages.
        await self._resync_counters(scope)
        return report

    async def _redact(self, scope: str, needles: Sequence[str], report: ForgetReport) -> None:
        """Drop summary sentences that mention any of ``needles``: tiers, days, day records,
        weeks."""
        state = await self.repo.state(scope)
        changed: dict[str, str | int] = {}
        for name in TIER_FIELDS:
            before = str(getattr(state, name))
            after = redact(before, needles)
            if after != before:
                changed[name] = after
                report.tiers.append(name)
        if changed:
            await self.repo.set_fields(scope, changed)
        days = await self.repo.days(scope)
        new_days = [_redact_day(d, needles) for d in days]
        report.days = sum(a != b for a, b in zip(days, new_days, strict=True))
        if report.days:
            await self.repo.replace_days(scope, new_days)
        episodes = await self.repo.episodes(scope)
        new_episodes = [_redact_day(d, needles) for d in episodes]
        if new_episodes != episodes:
            await self.repo.replace_episodes(scope, new_episodes)
        weeks = await self.repo.weeks(scope)
        new_weeks = [
            WeekSummary(w.week, redact(w.summary, needles), w.days, w.degraded) for w in weeks
        ]
        report.weeks = sum(a.summary != b.summary for a, b in zip(weeks, new_weeks, strict=True))
        if report.weeks:
            await self.repo.replace_weeks(scope, new_weeks)

    async def _resync_counters(self, scope: str) -> None:
        state = await self.repo.state(scope)
        if not state.day:
            return
        pending = await self.repo.entries_after(scope, state.short_upto)
        await self.repo.set_fields(
            scope,
            {
                "unsum_tokens": sum(e.tokens for e in pending),
                "unsum_count": len(pending),
                "msg_count": await self.repo.log_length(scope),
            },
        )

    async def forget_message(self, scope: str, platform_id: str) -> int:
        """A message deleted on its platform: delete it here too. Returns how many went."""
        scope = parse_scope(scope)
        if not platform_id:
            return 0
        entries = await self.repo.all_entries(scope)
        doomed = [e for e in entries if e.platform_id == platform_id]
        if not doomed:
            return 0
        needles = tuple(e.text for e in doomed if len(e.text) >= 12)
        request = ForgetRequest(kind="message", platform_id=platform_id, needles=needles)
        return (await self._forget(scope, request)).messages

    async def forget_fact(self, scope: str, fact_id: str) -> bool:
        scope = parse_scope(scope)
        fact_id = fact_id.strip()
        if not fact_id:
            raise InputError("give the id of the fact to forget (see /memory show facts)")
        return bool(await self.repo.delete_facts(scope, [fact_id]))

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
        await self._resync_counters(scope)
        return len(dump.log)


def _redact_day(day: DaySummary, needles: Sequence[str]) -> DaySummary:
    """A day record without the sentences that mention any of ``needles``."""

    def keep(items: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(x for x in (redact(i, needles) for i in items) if x)

    return replace(
        day,
        summary=redact(day.summary, needles),
        topic=redact(day.topic, needles),
        decisions=keep(day.decisions),
        follow_ups=keep(day.follow_ups),
    )


def parse_export(data: object, *, scope: str, max_message_chars: int, now: datetime) -> ScopeDump:
    """Check an export for importing into ``scope`` as live input is checked. Every problem
    is an InputError naming its field (``state.parent``, ``log[3].ts``) and what to fix.
    Nothing in the file is trusted: a parent must pass the live boundary check for
    ``scope``, facts learned in another place now belong to ``scope``."""
    reader = _ExportReader(scope=parse_scope(scope), max_message_chars=max_message_chars, now=now)
    return reader.read(data)


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
_EXPORT_PARTS = (
    "format",
    "version",
    "scope",
    "exported_at",
    "state",
    "log",
    "days",
    "episodes",
    "weeks",
    "facts",
    "done",
)
_LOG_FIELDS = ("id", "ts", "role", "author", "author_id", "text", "tokens", "platform_id")
_DAY_FIELDS = ("day", "summary", "messages", "degraded", "topic", "decisions", "follow_ups")
_WEEK_FIELDS = ("week", "summary", "days", "degraded")
_FACT_FIELDS = (
    "id",
    "kind",
    "text",
    "subject",
    "source",
    "by",
    "ts",
    "message_ids",
    "pinned",
    "history",
    "origin",
)
_ERROR_CHARS = 400  # an error quotes at most this much, whatever the file holds
_SHOWN_CHARS = 40  # of a bad value
_NAME_CHARS = 1000  # authors, ids, fact subjects
_SUMMARY_CHARS = 100_000  # tiers and summaries: model output is far shorter
# Live text over memory.max_message_chars is cut and marked " … [truncated: N more
# characters]", so a stored text may exceed the cap by that mark.
_TRUNCATION_ROOM = 64
_MAX_COUNT = 2**53
_MAX_TOKENS = 1_000_000  # of one message
_FUTURE = timedelta(days=1)  # clocks disagree; a time later than this is a mistake
_STREAM_ID = re.compile(r"([0-9]{1,15})-([0-9]{1,20})")
_DIGITS = re.compile(r"[0-9]{1,16}")
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_DONE_MARKER = re.compile(r"[a-z_]{1,20}:[A-Za-z0-9_.:-]{1,64}")  # day:2025-08-13
_FACT_ID = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_NUMBERED_FACT = re.compile(r"f([0-9]{1,15})")  # what put_fact makes from fact_seq


def _bad(path: str, problem: str) -> InputError:
    """The error for one bad field: its path first, cut to a length a person reads."""
    message = f"{path}: {problem}"
    if len(message) > _ERROR_CHARS:
        message = message[: _ERROR_CHARS - 1] + "…"
    return InputError(message)


def _show(value: object) -> str:
    """A value as an error quotes it: short, whatever its size or type."""
    if isinstance(value, str):
        return repr(value[:_SHOWN_CHARS]) + ("…" if len(value) > _SHOWN_CHARS else "")
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, int):
        return str(value) if abs(value) < 10**18 else "a very large number"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list | tuple):
        return "a list"
    return f"a {type(value).__name__}"


def _join(path: str, key: object) -> str:
    """``path.key``; a key that is no plain name is quoted (it may hold anything, even a
    lone surrogate, which a terminal cannot print)."""
    plain = isinstance(key, str) and key.isidentifier() and len(key) <= _SHOWN_CHARS
    name = key if plain and isinstance(key, str) else _show(key)
    return f"{path}.{name}" if path else name


@dataclass(frozen=True)
class _ExportReader:
    """Reads one export for one target scope; each method checks one kind of field."""

    scope: str
    max_message_chars: int
    now: datetime

    @property
    def latest(self) -> datetime:
        now = self.now if self.now.tzinfo else self.now.replace(tzinfo=UTC)
        return now + _FUTURE

    def read(self, data: object) -> ScopeDump:
        if not isinstance(data, Mapping) or data.get("format") != EXPORT_FORMAT:
            raise InputError(f'not a memorybot export: expected "format": "{EXPORT_FORMAT}"')
        version = data.get("version")
        if type(version) is not int or version != EXPORT_VERSION:
            raise _bad(
                "version",
                f"unsupported export version {_show(version)} (this reads {EXPORT_VERSION})",
            )
        for key in data:
            if key not in _EXPORT_PARTS:
                raise _bad(_join("", key), "not part of a memorybot export: remove it")
        if data.get("scope") is not None:
            self._scope_name("scope", data["scope"])
        if data.get("exported_at") is not None:
            self._time("exported_at", data["exported_at"])
        state = self._state(data.get("state"))
        log = self._log(data.get("log"))
        days = [self._day(p, raw) for p, raw in self._items("days", data.get("days"))]
        episodes = [self._day(p, raw) for p, raw in self._items("episodes", data.get("episodes"))]
        weeks = [self._week(p, raw) for p, raw in self._items("weeks", data.get("weeks"))]
        facts = self._facts(data.get("facts"))
        done = [self._done(p, raw) for p, raw in self._items("done", data.get("done"))]
        self._agree(state, log, facts)
        return ScopeDump(
            state=state, log=log, days=days, weeks=weeks, facts=facts, done=done, episodes=episodes
        )

    # -- containers ------------------------------------------------------------------------
    def _items(self, path: str, value: object) -> list[tuple[str, object]]:
        if value is None:
            return []
        if not isinstance(value, list):
            raise _bad(path, f"expected a list (got {_show(value)})")
        return [(f"{path}[{i}]", item) for i, item in enumerate(value)]

    def _record(
        self, path: str, value: object, known: Sequence[str], required: Sequence[str]
    ) -> Mapping[str, object]:
        if not isinstance(value, Mapping):
            raise _bad(path, f"expected an object (got {_show(value)})")
        for key in value:
            if key not in known:
                hint = f"unknown field: remove it (known: {', '.join(known)})"
                raise _bad(_join(path, key), hint)
        for key in required:
            if key not in value:
                raise _bad(f"{path}.{key}", "missing: every item needs it")
        return value

    # -- state -----------------------------------------------------------------------------
    def _state(self, value: object) -> dict[str, str]:
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise _bad("state", f"expected an object of state fields (got {_show(value)})")
        state: dict[str, str] = {}
        for key, raw in value.items():
            if key not in EXPORTED_STATE:
                raise _bad(_join("state", key), "not a state field an export carries: remove it")
            checked = self._state_field(f"state.{key}", key, raw)
            if checked is not None:
                state[key] = checked
        return state

    def _state_field(self, path: str, name: str, value: object) -> str | None:
        """The field as the state hash holds it (a string), or None to leave it out."""
        if name in ("msg_count", "fact_seq", "day_msgs"):
            return str(self._number(path, value, text_ok=True))
        if name in ("last_ms", "created_ms"):
            ms = self._number(path, value, text_ok=True)
            if ms > calendar.to_ms(self.latest):
                raise _bad(path, f"{ms} is later than tomorrow: give a time in milliseconds")
            return str(ms)
        if name in ("paused", "refresh_pending"):
            if value in ("0", "1") or (type(value) is int and value in (0, 1)):
                return str(value)
            raise _bad(path, f"expected 0 or 1 (got {_show(value)})")
        text = self._text(path, value, limit=_SUMMARY_CHARS)
        if not text or name in TIER_FIELDS:
            return text
        if name in ("day", "week_pending"):
            return self._date(path, text)
        if name in ("tiers_at", "last_rollover"):
            self._time(path, text)
        elif name == "short_upto":
            self._stream_id(path, text)
        elif name == "mode" and text not in MODES:
            raise _bad(path, f"expected one of {', '.join(MODES)} (got {_show(text)})")
        elif name == "tz":
            self._zone(path, text)
        elif name == "lang":
            if text not in LANGUAGE_SETTINGS:
                choices = ", ".join(LANGUAGE_SETTINGS)
                raise _bad(path, f"expected one of {choices} (got {_show(text)})")
            return "" if text == "auto" else text
        elif name == "parent":
            return self._parent(path, text)
        return text

    def _parent(self, path: str, text: str) -> str | None:
        """A thread's parent channel: the live check, so never another guild or workspace.
        The target itself is no parent (left out)."""
        if len(text) > 300:
            raise _bad(path, f"{_show(text)} is not a scope: {len(text)} characters")
        try:
            return check_parent(self.scope, text)
        except InvalidScope as exc:
            raise _bad(
                path, f"{exc} (remove {path}, or import into a channel of that guild)"
            ) from exc

    def _zone(self, path: str, name: str) -> None:
        """What ``/memory config timezone`` takes: a zone ZoneInfo loads."""
        try:
            known = len(name) <= 100 and ZoneInfo(name) is not None
        except (ZoneInfoNotFoundError, ValueError, OSError):  # OSError: "Asia", a directory
            known = False
        if not known:
            raise _bad(path, f"unknown timezone {_show(name)}: use an IANA name such as Asia/Tokyo")

    def _scope_name(self, path: str, value: object) -> None:
        text = self._text(path, value, limit=300)
        try:
            parse_scope(text)
        except InvalidScope as exc:
            raise _bad(path, f"{_show(text)} is not a scope such as discord:GUILD:CHANNEL") from exc

    def _agree(self, state: dict[str, str], log: list[LogEntry], facts: list[Fact]) -> None:
        """The state's pointers agree with what was imported: a message stored later must
        get an id after the log's last (ingest builds it from last_ms), and a note pinned
        later must not take the id of an imported fact (put_fact counts with fact_seq)."""
        if log:
            last = log[-1].ms
            given = state.get("last_ms")
            if given is None:
                state["last_ms"] = str(last)
            elif int(given) < last:
                raise _bad(
                    "state.last_ms",
                    f"{given} is before the last message ({log[-1].id}): set it to {last} or more",
                )
        numbered = [int(m[1]) for f in facts if (m := _NUMBERED_FACT.fullmatch(f.id))]
        if numbered:
            state["fact_seq"] = str(max(int(state.get("fact_seq") or 0), *numbered))

    # -- log -------------------------------------------------------------------------------
    def _log(self, value: object) -> list[LogEntry]:
        entries: list[LogEntry] = []
        previous: tuple[int, int] = (0, 0)
        for path, raw in self._items("log", value):
            item = self._record(path, raw, _LOG_FIELDS, ("id", "ts", "text"))
            position = self._stream_id(f"{path}.id", item["id"])
            if position <= previous:
                raise _bad(
                    f"{path}.id",
                    f"{_show(item['id'])} is not after the id before it: ids must increase",
                )
            previous = position
            entries.append(self._entry(path, item))
        return entries

    def _entry(self, path: str, item: Mapping[str, object]) -> LogEntry:
        role = item.get("role", "user")
        if role not in ("user", "assistant"):
            raise _bad(f"{path}.role", f"expected user or assistant (got {_show(role)})")
        text, limit = item["text"], self.max_message_chars + _TRUNCATION_ROOM
        if isinstance(text, str) and len(text) > limit:
            raise _bad(
                f"{path}.text",
                f"{len(text)} characters, more than memory.max_message_chars "
                f"({self.max_message_chars}) allows: shorten it or raise the setting",
            )
        text = self._text(f"{path}.text", text, limit=limit, required=True)
        return LogEntry(
            id=str(item["id"]),
            ts=self._time(f"{path}.ts", item["ts"]),
            role="assistant" if role == "assistant" else "user",
            author=self._text(f"{path}.author", item.get("author", ""), limit=_NAME_CHARS),
            author_id=self._text(f"{path}.author_id", item.get("author_id", ""), limit=_NAME_CHARS),
            text=text,
            tokens=self._number(f"{path}.tokens", item.get("tokens", 0), limit=_MAX_TOKENS),
            platform_id=self._text(
                f"{path}.platform_id", item.get("platform_id", ""), limit=_NAME_CHARS
            ),
        )

    # -- summaries and facts -----------------------------------------------------------------
    def _day(self, path: str, value: object) -> DaySummary:
        item = self._record(path, value, _DAY_FIELDS, ("day", "summary"))
        return DaySummary(
            day=self._date(f"{path}.day", item["day"]),
            summary=self._text(f"{path}.summary", item["summary"], limit=_SUMMARY_CHARS),
            messages=self._number(f"{path}.messages", item.get("messages", 0)),
            degraded=self._flag(f"{path}.degraded", item.get("degraded", False)),
            topic=self._text(f"{path}.topic", item.get("topic", ""), limit=_SUMMARY_CHARS),
            decisions=tuple(self._strings(f"{path}.decisions", item.get("decisions", []))),
            follow_ups=tuple(self._strings(f"{path}.follow_ups", item.get("follow_ups", []))),
        )

    def _week(self, path: str, value: object) -> WeekSummary:
        item = self._record(path, value, _WEEK_FIELDS, ("week", "summary"))
        return WeekSummary(
            week=self._date(f"{path}.week", item["week"]),
            summary=self._text(f"{path}.summary", item["summary"], limit=_SUMMARY_CHARS),
            days=self._number(f"{path}.days", item.get("days", 0)),
            degraded=self._flag(f"{path}.degraded", item.get("degraded", False)),
        )

    def _facts(self, value: object) -> list[Fact]:
        facts: list[Fact] = []
        seen: dict[str, str] = {}
        for path, raw in self._items("facts", value):
            fact = self._fact(path, raw)
            if fact.id in seen:
                raise _bad(f"{path}.id", f"{_show(fact.id)} is also the id of {seen[fact.id]}")
            seen[fact.id] = path
            facts.append(fact)
        return facts

    def _fact(self, path: str, value: object) -> Fact:
        item = self._record(path, value, _FACT_FIELDS, ("id", "kind", "text"))
        fact_id = item["id"]
        if not isinstance(fact_id, str) or not _FACT_ID.fullmatch(fact_id):
            raise _bad(f"{path}.id", f"expected a fact id such as f12 (got {_show(fact_id)})")
        kind = item["kind"]
        if not isinstance(kind, str) or kind not in FACT_KINDS:
            raise _bad(
                f"{path}.kind", f"expected one of {', '.join(FACT_KINDS)} (got {_show(kind)})"
            )
        ts = self._text(f"{path}.ts", item.get("ts", ""), limit=_NAME_CHARS)
        if ts:
            self._time(f"{path}.ts", ts)
        ids = self._strings(f"{path}.message_ids", item.get("message_ids", []))
        for i, message_id in enumerate(ids):
            self._stream_id(f"{path}.message_ids[{i}]", message_id)
        origin = self._text(f"{path}.origin", item.get("origin", ""), limit=_NAME_CHARS)
        history = self._strings(f"{path}.history", item.get("history", []), limit=MAX_FACT_CHARS)
        return Fact(
            id=fact_id,
            kind=kind,
            text=self._text(f"{path}.text", item["text"], limit=MAX_FACT_CHARS, required=True),
            subject=self._text(f"{path}.subject", item.get("subject", ""), limit=_NAME_CHARS),
            source=self._text(f"{path}.source", item.get("source", ""), limit=_NAME_CHARS),
            by=self._text(f"{path}.by", item.get("by", ""), limit=_NAME_CHARS),
            ts=ts,
            message_ids=ids,
            pinned=self._flag(f"{path}.pinned", item.get("pinned", False)),
            history=history,
            # Learned in another place: in this one it belongs here (forget follows origin).
            origin=self.scope if origin else "",
        )

    def _done(self, path: str, value: object) -> str:
        if not isinstance(value, str) or not _DONE_MARKER.fullmatch(value):
            raise _bad(path, f"expected a marker such as day:2025-08-13 (got {_show(value)})")
        return value

    # -- values ----------------------------------------------------------------------------
    def _text(self, path: str, value: object, *, limit: int, required: bool = False) -> str:
        if not isinstance(value, str):
            raise _bad(path, f"expected a string (got {_show(value)})")
        if len(value) > limit:
            raise _bad(path, f"{len(value)} characters: at most {limit} fit here")
        if required and not value.strip():
            raise _bad(path, "is empty: give the text")
        return value

    def _strings(self, path: str, value: object, *, limit: int = _SUMMARY_CHARS) -> list[str]:
        return [self._text(p, raw, limit=limit) for p, raw in self._items(path, value)]

    def _number(
        self, path: str, value: object, *, limit: int = _MAX_COUNT, text_ok: bool = False
    ) -> int:
        if type(value) is int:
            number = value
        elif text_ok and isinstance(value, str) and _DIGITS.fullmatch(value):
            number = int(value)
        else:
            raise _bad(path, f"expected a whole number, 0 or more (got {_show(value)})")
        if not 0 <= number <= limit:
            raise _bad(path, f"{_show(number)} is out of range: give 0 to {limit}")
        return number

    def _flag(self, path: str, value: object) -> bool:
        if not isinstance(value, bool):
            raise _bad(path, f"expected true or false (got {_show(value)})")
        return value

    def _date(self, path: str, value: object) -> str:
        if not isinstance(value, str) or not _DATE.fullmatch(value):
            raise _bad(path, f"expected a day as YYYY-MM-DD (got {_show(value)})")
        try:
            day = date.fromisoformat(value)
        except ValueError as exc:
            raise _bad(path, f"{_show(value)} is not a day of the calendar") from exc
        if day > self.latest.date():
            raise _bad(path, f"{value} is later than tomorrow")
        return value

    def _time(self, path: str, value: object) -> datetime:
        example = "such as 2025-08-13T15:30:00+09:00"
        if not isinstance(value, str) or len(value) > 64:
            got = _show(value)
            raise _bad(path, f"expected an ISO time with its offset, {example} (got {got})")
        try:
            when = datetime.fromisoformat(value)
        except ValueError as exc:
            raise _bad(path, f"{_show(value)} is not an ISO time, {example}") from exc
        if when.utcoffset() is None:
            raise _bad(path, f"{_show(value)} has no UTC offset: add one, {example}")
        try:
            when.astimezone(UTC)  # stored as milliseconds since 1970, read back in UTC
        except OverflowError as exc:
            raise _bad(path, f"{_show(value)} is before the year 1 in UTC") from exc
        if when > self.latest:
            raise _bad(path, f"{_show(value)} is later than tomorrow: check the clock")
        return when

    def _stream_id(self, path: str, value: object) -> tuple[int, int]:
        match = _STREAM_ID.fullmatch(value) if isinstance(value, str) else None
        if match is None:
            raise _bad(path, f"expected a stream id such as 1700000000000-0 (got {_show(value)})")
        ms, seq = int(match[1]), int(match[2])
        if (ms, seq) == (0, 0) or seq >= 2**64:
            raise _bad(path, f"{value} is not an id Redis takes: above 0-0, sequence below 2^64")
        if ms > calendar.to_ms(self.latest):
            raise _bad(path, f"{value} is later than tomorrow (its first part is milliseconds)")
        return ms, seq
