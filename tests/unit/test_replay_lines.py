from datetime import UTC, datetime
from pathlib import Path

import pytest

from memory_core.errors import ReplayLineError
from memory_core.service.replay import ReplayLine, line_identity, parse_line, read_lines


def test_good_line() -> None:
    line = parse_line(3, '{"ts": "2025-08-13T15:30:00+09:00", "user": "Alice", "text": "hi"}')
    assert line.user == "Alice" and line.role == "user" and line.scope is None
    assert line.ts.utcoffset() is not None


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("not json", "not valid JSON"),
        ("[1, 2]", "expected a JSON object"),
        ('{"user": "a", "text": "b"}', '"ts" is missing'),
        ('{"ts": "yesterday", "user": "a", "text": "b"}', "not an ISO-8601"),
        ('{"ts": "2025-08-13T15:30:00", "user": "a", "text": "b"}', "no UTC offset"),
        ('{"ts": "2025-08-13T15:30:00Z", "user": "", "text": "b"}', '"user" must be'),
        ('{"ts": "2025-08-13T15:30:00Z", "user": "a", "text": "  "}', '"text" is empty'),
        ('{"ts": "2025-08-13T15:30:00Z", "user": "a", "text": "b", "role": "bot"}', '"role"'),
        ('{"ts": "2025-08-13T15:30:00Z", "user": "a", "text": "b", "scope": "a b"}', "scope"),
        ('{"ts": "2025-08-13T15:30:00Z", "user": "a", "text": "b", "extra": 1}', "unknown field"),
    ],
)
def test_bad_lines_say_what_is_wrong(raw: str, reason: str) -> None:
    with pytest.raises(ReplayLineError) as info:
        parse_line(7, raw)
    assert info.value.line_no == 7
    assert str(info.value).startswith("line 7:")
    assert reason in str(info.value)


def test_a_utf8_bom_on_the_first_line_is_accepted() -> None:
    """Windows editors start UTF-8 files with a byte order mark; it is not part of the JSON."""
    line = parse_line(1, '\ufeff{"ts": "2025-08-13T15:30:00Z", "user": "Alice", "text": "hi"}')
    assert line.user == "Alice" and line.text == "hi"


@pytest.mark.parametrize("ts", ["9999-12-31T23:59:59Z", "2025-08-16T00:00:01Z"])
def test_a_time_later_than_a_day_from_now_is_refused(ts: str) -> None:
    """One line dated 9999 would move the scope's day there for good: refused, by number."""
    now = datetime(2025, 8, 14, 23, 59, 59, tzinfo=UTC)
    with pytest.raises(ReplayLineError) as info:
        parse_line(5, f'{{"ts": "{ts}", "user": "a", "text": "b"}}', now=now)
    assert info.value.line_no == 5 and "future" in info.value.reason
    # A day of slack (clock skew, time zones) is fine.
    parse_line(6, '{"ts": "2025-08-15T23:00:00Z", "user": "a", "text": "b"}', now=now)


def test_a_time_before_1970_is_refused() -> None:
    """Redis stream ids count milliseconds since 1970: an earlier time has no place there."""
    with pytest.raises(ReplayLineError, match="1970"):
        parse_line(2, '{"ts": "0001-01-01T00:00:00Z", "user": "a", "text": "b"}')


HUGE = "x" * 3_000_000


@pytest.mark.parametrize(
    "raw",
    [
        f'{{"ts": "{HUGE}", "user": "a", "text": "b"}}',
        f'{{"ts": "2025-08-13T15:30:00Z", "user": "a", "text": "b", "role": "{HUGE}"}}',
        f'{{"ts": "2025-08-13T15:30:00Z", "user": "a", "text": "b", "scope": "{HUGE}"}}',
        f'{{"ts": "2025-08-13T15:30:00Z", "user": "a", "text": "b", "{HUGE}": 1}}',
        f'{{"ts": "2025-08-13T15:30:00Z", "user": "a", "text": "b", "id": "{HUGE}"}}',
        f'{{"ts": "2025-08-13T15:30:00Z", "user": "a", "text": "b", "user_id": "{HUGE}"}}',
    ],
    ids=["ts", "role", "scope", "field-name", "id", "user_id"],
)
def test_a_huge_bad_value_is_not_echoed_whole(raw: str) -> None:
    with pytest.raises(ReplayLineError) as info:
        parse_line(9, raw)
    assert info.value.line_no == 9
    assert len(str(info.value)) < 300, str(info.value)[:400]


def test_id_and_user_id() -> None:
    line = parse_line(
        1,
        '{"ts": "2025-08-13T15:30:00Z", "user": "Alice", "text": "hi", "id": "m-1", '
        '"user_id": "U123"}',
    )
    assert line.id == "m-1" and line.user_id == "U123"
    numbered = parse_line(1, '{"ts": "2025-08-13T15:30:00Z", "user": "A", "text": "b", "id": 42}')
    assert numbered.id == "42"
    plain = parse_line(1, '{"ts": "2025-08-13T15:30:00Z", "user": "A", "text": "b"}')
    assert plain.id == "" and plain.user_id == ""
    for bad in ('"id": ""', '"id": true', '"id": [1]', '"user_id": ""', '"user_id": 5'):
        with pytest.raises(ReplayLineError):
            parse_line(1, f'{{"ts": "2025-08-13T15:30:00Z", "user": "A", "text": "b", {bad}}}')


def test_a_line_is_identified_by_its_id_or_by_scope_time_author_and_text() -> None:
    base = '{"ts": "2025-08-13T15:30:00Z", "user": "Alice", "text": "hi"'
    same_instant = '{"ts": "2025-08-14T00:30:00+09:00", "user": "Alice", "text": "hi"'
    a = line_identity(parse_line(1, base + "}"), "console:r")
    assert a == line_identity(parse_line(9, same_instant + "}"), "console:r")
    assert a != line_identity(parse_line(1, base + "}"), "console:other")
    assert a != line_identity(parse_line(1, base.replace("hi", "ho") + "}"), "console:r")
    assert a != line_identity(parse_line(1, base.replace("Alice", "Bob") + "}"), "console:r")
    assert line_identity(parse_line(1, base + ', "id": "m-7"}'), "console:r") == "m-7"


def test_a_file_that_is_not_utf8_gives_line_numbered_reasons(tmp_path: Path) -> None:
    path = tmp_path / "latin1.jsonl"
    good = '{"ts": "2025-08-13T15:30:00Z", "user": "Alice", "text": "hi"}\n'
    path.write_bytes(
        b"\xef\xbb\xbf"
        + good.encode()
        + '{"ts": "2025-08-13T15:31:00Z", "user": "Zoë", "text": "café"}\n'.encode("latin-1")
        + b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe\n"
    )
    items = list(read_lines(path))
    assert isinstance(items[0], ReplayLine) and items[0].user == "Alice"
    errors = [i for i in items[1:] if isinstance(i, ReplayLineError)]
    assert len(errors) == len(items) - 1
    assert errors[0].line_no == 2 and "not UTF-8" in errors[0].reason
    assert {e.line_no for e in errors} >= {2, 3}
