import pytest

from memory_core.errors import ReplayLineError
from memory_core.replay import parse_line


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
