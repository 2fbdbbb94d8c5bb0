"""What the repo hands back: the few records that are not plain models (a prompt's
snapshot, a scope's dump, a lock claim), and the decoding of raw Redis replies into models
at the store boundary."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from memory_core.models import DaySummary, Fact, LogEntry, ScopeState, WeekSummary
from memory_core.store.locks import LockHolder


@dataclass(frozen=True, slots=True)
class PromptSnapshot:
    """Everything prompt assembly reads, fetched in one round trip."""

    state: ScopeState
    facts: list[Fact]
    recent: list[LogEntry]  # newest first
    parent_state: ScopeState | None
    user_facts: list[Fact] = field(default_factory=list)  # about the person asking
    # A thread's channel around the moment the thread began: the messages before it
    # (oldest first) and from it on (its first message, the answer to it...), oldest first.
    before_thread: list[LogEntry] = field(default_factory=list)
    from_thread: list[LogEntry] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class ScopeDump:
    state: dict[str, str]
    log: list[LogEntry]
    days: list[DaySummary]
    weeks: list[WeekSummary]
    facts: list[Fact]
    done: list[str]
    episodes: list[DaySummary] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class PlaceCounts:
    """A place's figures for a tree view: its name and counts, no memory."""

    name: str
    messages: int
    facts: int
    threads: int  # a channel's threads with memory (0 for anything else)


@dataclass(frozen=True, slots=True)
class LockClaim:
    """The outcome of trying to take a scope's maintenance lock."""

    token: str | None  # our lock's value; None: someone else holds the lock
    state: ScopeState
    holder: LockHolder | None = None  # who does (None: a value naming nobody readable)
    expires_ms: int = 0  # real time (ms) the holder's lock runs out unless renewed
    taken_from: LockHolder | None = None  # a dead holder whose lock we took over


def real_ms() -> int:
    """Locks live in real time (their TTLs are Redis' clock), whatever the memory clock says."""
    return int(time.time() * 1000)


def log_entries(raw: Iterable[tuple[str, Mapping[str, str]]]) -> list[LogEntry]:
    return [LogEntry.from_stream(entry_id, fields) for entry_id, fields in raw]


def pairs(flat: Sequence[str]) -> dict[str, str]:
    """A flat HGETALL reply from a Lua script as a dict."""
    return {str(flat[i]): str(flat[i + 1]) for i in range(0, len(flat) - 1, 2)}


def cas_reply(reply: Any) -> tuple[int, ScopeState | None, list[str]]:
    """(result, the state after, extra list) from a compare-and-set script's reply."""
    if not isinstance(reply, list):
        return int(reply), None, []
    state = ScopeState.from_hash(pairs(reply[1])) if len(reply) > 1 else None
    extra = [str(x) for x in reply[2]] if len(reply) > 2 else []
    return int(reply[0]), state, extra


def facts_from_hash(raw: Mapping[str, str]) -> list[Fact]:
    out: list[Fact] = []
    for fact_id, blob in raw.items():
        try:
            fact = Fact.from_json(blob)
        except (ValueError, TypeError):
            continue  # a hand-edited, unreadable fact is shown nowhere rather than crashing
        fact.id = fact_id
        out.append(fact)
    out.sort(key=lambda f: (int(f.id[1:]) if f.id[1:].isdigit() else 0, f.id))
    return out
