"""Pure time maths: local days, day bounds, weeks. No I/O (one warning aside: a scope's
unknown timezone, :class:`ZoneFallback`), tested with tables of cases.

Days are ISO dates (``2025-08-13``) in a scope's timezone. Bounds are computed with
zoneinfo so a day is 23 or 25 hours long across a DST change.
"""

from __future__ import annotations

import logging
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from memory_core.errors import UnknownTimezone

log = logging.getLogger(__name__)

WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")


def zone(name: str) -> ZoneInfo:
    """The zone called ``name``; :class:`UnknownTimezone` (saying what to use instead) when
    the tz database has none. Every function here that takes a ``tz`` goes through this."""
    try:
        return ZoneInfo(name)
    # ValueError: "" or a path that leaves the database; OSError: a directory ("America").
    except (ZoneInfoNotFoundError, ValueError, OSError) as exc:
        raise UnknownTimezone(
            f"unknown timezone {name[:80]!r}: use an IANA name such as Asia/Tokyo"
        ) from exc


def known_zone_or(name: str, default: str) -> str:
    """``name`` if it is a timezone that exists, else ``default``."""
    try:
        zone(name)
    except UnknownTimezone:
        return default
    return name


class ZoneFallback:
    """The timezone a scope's times are shown in: its stored one, or the default when it has
    none. A stored one that does not exist (an import, a hand edit) falls back to the
    default, with a warning once per name: a bad setting must not cost a reply. (Maintenance
    does not guess: it reports such a scope.)"""

    def __init__(self, default: str) -> None:
        self.default = default
        self._warned: set[str] = set()

    def usable(self, scope: str, stored: str) -> str:
        name = stored or self.default
        usable = known_zone_or(name, self.default)
        if usable != name and name not in self._warned:
            self._warned.add(name)
            log.warning(
                "%s has an unknown timezone %r: replies use the default %s and its rollover "
                "waits until it is fixed (/memory config timezone)",
                scope,
                name[:80],
                self.default,
            )
        return usable


def to_ms(when: datetime) -> int:
    return int(when.timestamp() * 1000)


def from_ms(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def local_day(when: datetime, tz: str) -> str:
    """The local calendar day of an instant."""
    return when.astimezone(zone(tz)).date().isoformat()


# Per timezone, the last local day asked for, as [start, end) in ms: most instants asked
# about (every message stored) fall in the day before them.
_day_spans: dict[str, tuple[int, int, str]] = {}


def local_day_ms(ms: int, tz: str) -> str:
    span = _day_spans.get(tz)
    if span is not None and span[0] <= ms < span[1]:
        return span[2]
    day = local_day(from_ms(ms), tz)
    start, end = to_ms(day_start(day, tz)), day_end_ms(day, tz)
    # Kept only for a day of one UTC offset throughout: clocks that go back across midnight
    # (from 00:01 to 23:01, as Goose Bay's did) give part of the span to the day before.
    where = zone(tz)
    if (
        from_ms(start).astimezone(where).utcoffset()
        == from_ms(end - 1).astimezone(where).utcoffset()
    ):
        if len(_day_spans) >= 1000:
            _day_spans.clear()
        _day_spans[tz] = (start, end, day)
    return day


def day_start(day: str, tz: str) -> datetime:
    """The instant (UTC) when ``day`` begins in ``tz``."""
    return datetime.combine(date.fromisoformat(day), time(0), tzinfo=zone(tz)).astimezone(UTC)


def day_end_ms(day: str, tz: str) -> int:
    """The first millisecond after ``day`` in ``tz`` (exclusive end)."""
    next_day = (date.fromisoformat(day) + timedelta(days=1)).isoformat()
    return to_ms(day_start(next_day, tz))


def next_midnight(now: datetime, tz: str) -> datetime:
    today = local_day(now, tz)
    return from_ms(day_end_ms(today, tz))


def next_local_time(
    now: datetime, tz: str, *, hour: int = 0, weekday: str | None = None
) -> datetime:
    """The first instant after ``now`` when the local clock in ``tz`` shows ``hour``:00 (on
    ``weekday`` if given), in UTC. Walks calendar days, not 24-hour steps, so a 23- or
    25-hour day across a DST change is handled (an hour that does not exist that day is taken
    as the instant the clock jumps past it)."""
    local_now = now.astimezone(zone(tz))
    day = local_now.date()
    for _ in range(9):
        candidate = datetime.combine(day, time(hour), tzinfo=zone(tz)).astimezone(UTC)
        matches = weekday is None or day.weekday() == WEEKDAYS.index(weekday)
        if matches and candidate > now:
            return candidate
        day += timedelta(days=1)
    raise AssertionError("unreachable: a matching day comes within a week")


def week_of(day: str, week_start: str = "monday") -> str:
    """The first day (ISO date) of the week holding ``day``; weeks begin on ``week_start``."""
    d = date.fromisoformat(day)
    offset = (d.weekday() - WEEKDAYS.index(week_start)) % 7
    return (d - timedelta(days=offset)).isoformat()


def in_week(day: str, week: str) -> bool:
    start = date.fromisoformat(week)
    return start <= date.fromisoformat(day) < start + timedelta(days=7)


def days_between(first: str, last: str) -> list[str]:
    """Every day from ``first`` up to, not including, ``last``."""
    out: list[str] = []
    d, end = date.fromisoformat(first), date.fromisoformat(last)
    while d < end:
        out.append(d.isoformat())
        d += timedelta(days=1)
    return out
