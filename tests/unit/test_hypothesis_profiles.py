"""CI runs Hypothesis deterministically: a red run is a real failure that the next run, and
anyone's machine, reproduces. The ``explore`` profile (HYPOTHESIS_PROFILE=explore) is for
hunting by hand."""

from __future__ import annotations

import os

from hypothesis import settings

from tests.hostile.strategies import HYPOTHESIS as SETTINGS_GARBAGE


def test_the_default_profile_is_deterministic() -> None:
    if os.environ.get("HYPOTHESIS_PROFILE", "ci") != "ci":
        return  # exploring by hand: randomness is the point
    for where, chosen in {
        "the loaded profile": settings.default,
        "settings() in a test": settings(max_examples=5),
        "tests/hostile/test_settings_garbage.py": SETTINGS_GARBAGE,
    }.items():
        assert chosen.derandomize, where
        assert chosen.database is None, where
        assert chosen.deadline is None, where  # no failure that depends on machine load
        assert chosen.print_blob, where


def test_the_explore_profile_is_random_with_more_examples() -> None:
    explore = settings.get_profile("explore")
    assert not explore.derandomize
    assert explore.database is not None
    assert explore.max_examples > settings.get_profile("ci").max_examples
