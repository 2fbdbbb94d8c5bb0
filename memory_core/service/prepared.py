"""A message validated and measured once, ready to store and to answer."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Prepared:
    """A validated message, ready to store."""

    scope: str
    text: str
    truncated: bool
    ts_ms: int
    tokens: int
    day: str  # its local day (the default timezone's: the store's day index)
    # When that day ends, for a message refused rather than counted in a later day (a
    # replayed or learned one); 0: counted where it arrives.
    own_day_end_ms: int = 0
