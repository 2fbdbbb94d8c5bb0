"""Retention's time maths, without Redis: what a trim keeps and when one is due."""

from __future__ import annotations

import pytest

from memory_core.models import ScopeState
from memory_core.tiers.retention import DAY_MS, trim_due, trim_target

NOW = 1_700_000_000_000
CUTOFF = NOW - 30 * DAY_MS  # retention of 30 days


@pytest.mark.parametrize(
    ("short_upto", "expected"),
    [
        ("", ("", 0)),  # nothing summarised: nothing may go
        # Summarised past the cutoff: everything older than retention goes.
        (f"{CUTOFF + 5}-0", (str(CUTOFF), CUTOFF)),
        (f"{CUTOFF}-3", (str(CUTOFF), CUTOFF)),
        # Summarised only up to an old message: it and all before it go, never what follows.
        (f"{CUTOFF - DAY_MS}-3", (f"{CUTOFF - DAY_MS}-4", CUTOFF - DAY_MS + 1)),
        (f"{CUTOFF - DAY_MS}", (f"{CUTOFF - DAY_MS}-1", CUTOFF - DAY_MS + 1)),
    ],
)
def test_a_trim_never_reaches_past_the_summary_nor_the_cutoff(
    short_upto: str, expected: tuple[str, int]
) -> None:
    state = ScopeState(short_upto=short_upto)
    assert trim_target(state, now_ms=NOW, retention_days=30) == expected


@pytest.mark.parametrize(
    ("created_ms", "trimmed_ms", "due"),
    [
        (CUTOFF - 10 * DAY_MS, 0, True),  # old messages, never trimmed
        (CUTOFF + DAY_MS, 0, False),  # nothing has outlived retention yet
        (CUTOFF - 10 * DAY_MS, CUTOFF - DAY_MS // 2, False),  # trimmed within the last day
        (CUTOFF - 10 * DAY_MS, CUTOFF - 2 * DAY_MS, True),  # trimmed two days ago
    ],
)
def test_a_trim_is_due_at_most_once_a_day(created_ms: int, trimmed_ms: int, due: bool) -> None:
    state = ScopeState(short_upto=f"{NOW}-0", created_ms=created_ms, trimmed_ms=trimmed_ms)
    assert trim_due(state, now_ms=NOW, retention_days=30) is due
