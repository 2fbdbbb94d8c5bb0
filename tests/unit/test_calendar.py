"""Pure time maths, checked with tables of cases (DST included)."""

from datetime import UTC, datetime

import pytest

from memory_core import calendar
from memory_core.errors import UnknownTimezone


@pytest.mark.parametrize(
    ("instant", "tz", "day"),
    [
        (datetime(2025, 8, 13, 14, 59, tzinfo=UTC), "Asia/Tokyo", "2025-08-13"),
        (datetime(2025, 8, 13, 15, 0, tzinfo=UTC), "Asia/Tokyo", "2025-08-14"),
        (datetime(2025, 8, 13, 3, 59, tzinfo=UTC), "America/New_York", "2025-08-12"),
        (datetime(2025, 8, 13, 4, 0, tzinfo=UTC), "America/New_York", "2025-08-13"),
        (datetime(2025, 12, 31, 23, 59, tzinfo=UTC), "UTC", "2025-12-31"),
    ],
)
def test_local_day(instant: datetime, tz: str, day: str) -> None:
    assert calendar.local_day(instant, tz) == day


@pytest.mark.parametrize(
    ("day", "tz", "hours"),
    [
        ("2025-03-09", "America/New_York", 23),  # spring forward
        ("2025-11-02", "America/New_York", 25),  # fall back
        ("2025-03-30", "Europe/Berlin", 23),
        ("2025-08-13", "Asia/Tokyo", 24),
    ],
)
def test_day_length_across_dst(day: str, tz: str, hours: int) -> None:
    start = calendar.to_ms(calendar.day_start(day, tz))
    assert (calendar.day_end_ms(day, tz) - start) / 3_600_000 == hours


def test_day_end_is_next_local_midnight() -> None:
    end = calendar.from_ms(calendar.day_end_ms("2025-08-13", "Asia/Tokyo"))
    assert end == datetime(2025, 8, 13, 15, 0, tzinfo=UTC)
    now = datetime(2025, 8, 13, 10, 0, tzinfo=UTC)
    assert calendar.next_midnight(now, "Asia/Tokyo") == end


@pytest.mark.parametrize(
    ("day", "start", "week"),
    [
        ("2025-08-13", "monday", "2025-08-11"),
        ("2025-08-11", "monday", "2025-08-11"),
        ("2025-08-17", "monday", "2025-08-11"),
        ("2025-08-17", "sunday", "2025-08-17"),
        ("2025-08-16", "sunday", "2025-08-10"),
        ("2026-01-01", "monday", "2025-12-29"),
    ],
)
def test_week_of(day: str, start: str, week: str) -> None:
    assert calendar.week_of(day, start) == week
    assert calendar.in_week(day, week)


def test_days_between() -> None:
    assert calendar.days_between("2025-12-30", "2026-01-02") == [
        "2025-12-30",
        "2025-12-31",
        "2026-01-01",
    ]
    assert calendar.days_between("2025-01-02", "2025-01-02") == []


@pytest.mark.parametrize("name", ["Mars/Olympus", "", "America", "../etc/passwd", "UTC "])
def test_an_unknown_zone_is_a_clear_error(name: str) -> None:
    with pytest.raises(UnknownTimezone, match="use an IANA name such as Asia/Tokyo"):
        calendar.zone(name)
    with pytest.raises(UnknownTimezone):
        calendar.local_day(datetime(2025, 8, 13, tzinfo=UTC), name)


def test_a_known_zone_or_the_default() -> None:
    assert calendar.known_zone_or("Asia/Tokyo", "UTC") == "Asia/Tokyo"
    assert calendar.known_zone_or("Mars/Olympus", "UTC") == "UTC"


@pytest.mark.parametrize(
    "tz",
    # Clocks that change at midnight (an hour repeated after 00:00, or 00:00 skipped), one
    # minute after it (in 2008-2010: back from 00:01 to 23:01, the day before again), at
    # 02:00, and never.
    [
        "America/Santiago",
        "Asia/Beirut",
        "America/Goose_Bay",
        "America/New_York",
        "Asia/Tokyo",
    ],
)
def test_local_day_of_an_instant_is_the_same_when_remembered(tz: str) -> None:
    """``local_day_ms`` keeps the last day it worked out: every instant, walked in 20-minute
    steps across years of DST changes (forwards, so the kept day is used; then backwards),
    gets the day ``local_day`` gives it."""
    start = calendar.to_ms(datetime(2008, 1, 1, tzinfo=UTC))
    step = 20 * 60 * 1000
    instants = list(range(start, start + 3 * 366 * 86_400_000, step))
    for ms in [*instants, *reversed(instants)]:
        assert calendar.local_day_ms(ms, tz) == calendar.local_day(calendar.from_ms(ms), tz), ms
