"""The export format: what ``/memory export`` writes and ``memory import`` reads back.

An import is checked like live input before anything is written: every field of every part,
its type and range. Each problem names where it is (``state.tz``, ``log[3].ts``) and what
to fix, and never echoes a huge value back.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from memory_core import calendar
from memory_core.errors import InputError, InvalidScope
from memory_core.models import (
    FACT_KINDS,
    LANGUAGE_SETTINGS,
    MAX_FACT_CHARS,
    MODES,
    TIER_FIELDS,
    DaySummary,
    Fact,
    LogEntry,
    WeekSummary,
)
from memory_core.scopes import parse_scope
from memory_core.store.records import ScopeDump

EXPORT_FORMAT = "memorybot-export"
EXPORT_VERSION = 1
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
    "refresh_pending",
    "week_pending",
    "fact_seq",
    "day_msgs",
    "last_rollover",
)


def parse_export(data: object, *, scope: str, max_message_chars: int, now: datetime) -> ScopeDump:
    """Check an export for importing into ``scope`` as live input is checked. Every problem
    is an InputError naming its field (``state.tz``, ``log[3].ts``) and what to fix.
    Nothing in the file is trusted: facts learned in another place now belong to
    ``scope``."""
    reader = _ExportReader(scope=parse_scope(scope), max_message_chars=max_message_chars, now=now)
    return reader.read(data)


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
    "subject_id",
    "shared",
    "seen",
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
        return text

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
        seen = self._text(f"{path}.seen", item.get("seen", ""), limit=_NAME_CHARS)
        if seen:
            self._time(f"{path}.seen", seen)
        self._flag(f"{path}.shared", item.get("shared", False))  # checked, then not kept
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
            subject_id=self._text(
                f"{path}.subject_id", item.get("subject_id", ""), limit=_NAME_CHARS
            ),
            # An import is a place whose visibility memorybot is not told: its facts stay.
            shared=False,
            seen=seen,
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
