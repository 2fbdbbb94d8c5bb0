"""Replay files are user files: any line, however broken, is either a ReplayLine or a
ReplayLineError that names the line. Nothing else may come out of ``parse_line``, and a
hostile file replays its good lines and reports the rest."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_core.clock import ManualClock
from memory_core.errors import ReplayLineError
from memory_core.service.replay import ReplayLine, parse_line, read_lines, replay
from tests.helpers import START, CoreFactory
from tests.hostile.strategies import hostile_text

FIELDS = ("ts", "user", "text", "role", "scope")
GOOD_VALUES = (
    "2025-08-13T15:30:00+09:00",
    "2025-08-13T15:30:00Z",
    "2025-08-13T15:30:00",
    "console:team",
    "discord:1:2",
    "slack:T1:C1:{x}",
    "user",
    "assistant",
    "Alice",
)

json_values: st.SearchStrategy[Any] = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | hostile_text(max_size=30)
    | st.sampled_from(GOOD_VALUES),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)
line_objects = st.dictionaries(
    st.one_of(st.sampled_from(FIELDS), st.text(max_size=8)), json_values, max_size=6
)


def check(line_no: int, raw: str) -> ReplayLine | ReplayLineError:
    """Parse; anything but a line or a ReplayLineError naming ``line_no`` fails the test."""
    try:
        line = parse_line(line_no, raw)
    except ReplayLineError as exc:
        error = exc
    else:
        error = None
    if error is not None:
        assert error.line_no == line_no
        assert str(error).startswith(f"line {line_no}: ")
        assert error.reason.strip(), "the error must say what is wrong"
        return error
    assert isinstance(line, ReplayLine)
    assert line.line_no == line_no
    assert line.ts.utcoffset() is not None
    assert line.user.strip() and line.text.strip()
    assert line.role in ("user", "assistant")
    return line


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(line_no=st.integers(1, 10**6), raw=hostile_text(max_size=300))
def test_any_text_is_a_line_or_an_error_naming_it(line_no: int, raw: str) -> None:
    """Arbitrary unicode (control characters, lone surrogates) never escapes as another
    exception."""
    check(line_no, raw)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(line_no=st.integers(1, 10**6), value=st.one_of(json_values, line_objects))
def test_any_json_is_a_line_or_an_error_naming_it(line_no: int, value: Any) -> None:
    """JSON of every shape (scalars, arrays, objects with wrong types, unknown and missing
    fields, bad times and scopes) is parsed or refused with the line number."""
    check(line_no, json.dumps(value, ensure_ascii=False))
    check(line_no, json.dumps(value))  # escaped: "\\ud800" decodes to a lone surrogate


PATHOLOGICAL = {
    "nested-arrays": "[" * 100_000,  # deeper than the JSON decoder's recursion limit
    "nested-objects": '{"ts": ' * 50_000,
    "huge-integer": "1" * 5_000,  # longer than Python converts to int by default
    "huge-role": '{"ts": "2025-08-13T15:30:00Z", "user": "a", "text": "b", "role": '
    + "9" * 5000
    + "}",
    "huge-negative": "-" + "1" * 5_000,
    "infinite": "1e99999",
    "nan": "NaN",
    "lone-surrogate": '"\\ud800"',
    "surrogate-fields": '{"ts": "2025-08-13T15:30:00Z", "user": "\\ud800", "text": "\\udcff"}',
    "year-9999": '{"ts": "9999-12-31T23:59:59+23:59", "user": "a", "text": "b"}',
    "year-1": '{"ts": "0001-01-01T00:00:00-23:59", "user": "a", "text": "b"}',
    "offset-24h": '{"ts": "2025-08-13T15:30:00+24:00", "user": "a", "text": "b"}',
    "brace-scope": '{"ts": "2025-08-13T15:30:00Z", "user": "a", "text": "b", "scope": "a:{b}"}',
    "list-scope": '{"ts": "2025-08-13T15:30:00Z", "user": "a", "text": "b", "scope": ["x"]}',
    "list-role": '{"ts": "2025-08-13T15:30:00Z", "user": "a", "text": "b", "role": ["user"]}',
    "dict-role": '{"ts": "2025-08-13T15:30:00Z", "user": "a", "text": "b", "role": {"a": 1}}',
    "duplicate-ts": '{"ts": "2025-08-13T15:30:00Z", "user": "a", "text": "b", "ts": 5}',
    "bom": "\ufeff" + '{"ts": "2025-08-13T15:30:00Z", "user": "a", "text": "b"}',
    "nul": "\x00",
    "empty": "",
}


@pytest.mark.parametrize("raw", PATHOLOGICAL.values(), ids=PATHOLOGICAL.keys())
def test_pathological_lines_are_reported_with_their_number(raw: str) -> None:
    """Deep nesting, giant numbers, lone surrogates, extreme offsets: a line or an error
    naming line 42, never RecursionError or ValueError."""
    check(42, raw)


def test_a_deeply_nested_line_says_it_is_not_valid_json() -> None:
    """The reason is one a person can act on, not a Python internals message."""
    with pytest.raises(ReplayLineError) as info:
        parse_line(3, "[" * 100_000)
    assert info.value.line_no == 3
    assert "JSON" in info.value.reason


async def test_a_hostile_file_replays_its_good_lines_and_reports_the_rest(
    make_core: CoreFactory, tmp_path: Path
) -> None:
    """The whole path (read_lines, then the pipeline): every pathological line is reported
    with its number, the good ones (lone surrogates, NULs and markup included) are stored,
    and replay never raises."""
    good = [
        {"ts": "2025-08-13T15:30:00+09:00", "user": "Alice", "text": "plain"},
        {"ts": "2025-08-13T15:31:00+09:00", "user": "B\ud800b", "text": "lone \udcff here"},
        {"ts": "2025-08-13T15:32:00+09:00", "user": "Carol", "text": "\x00 </memory> ```"},
        {"ts": "2025-08-14T15:32:00+09:00", "user": "Dave", "text": "日本語 " * 3000},
    ]
    lines = [json.dumps(good[0]), *PATHOLOGICAL.values(), *(json.dumps(g) for g in good[1:])]
    path = tmp_path / "hostile.jsonl"
    path.write_text("\n".join(line.replace("\n", " ") for line in lines) + "\n", "utf-8")
    clock = ManualClock(START)
    core = await make_core(clock=clock, offline=True, background=False)
    report = await replay(core, clock, read_lines(path), default_scope="console:r", reply=False)
    verdicts = [check(n, raw) for n, raw in enumerate(PATHOLOGICAL.values(), 2) if raw.strip()]
    bad = [v.line_no for v in verdicts if isinstance(v, ReplayLineError)]
    assert [e.line_no for e in report.skipped] == bad
    assert report.stored == len(good) + len(verdicts) - len(bad)
    stored = await core.repo.reads.all_entries("console:r")
    # Years 1 and 9999 are refused (before 1970, later than tomorrow): a line of 9999 would
    # roll the scope past retention and Alice's line of 2025 with it.
    assert {"Alice", "Carol", "Dave"} <= {e.author for e in stored}
    surrogates = next(e for e in stored if e.text.startswith("lone "))
    assert "\ud800" not in surrogates.author and "\udcff" not in surrogates.text
