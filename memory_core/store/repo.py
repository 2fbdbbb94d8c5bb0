"""Typed access to one scope's memory in Redis. The only class that issues Redis commands
for scope data; key names come from :mod:`memory_core.store.keys`, atomic writes from
:mod:`memory_core.store.scripts`.

:class:`MemoryRepo` holds the parts, one job each, built over one client and key schema;
a caller takes the part it needs:
:class:`~memory_core.store.repo_reads.ScopeReads` reads (a prompt's reads in one round trip),
:class:`~memory_core.store.repo_writes.ScopeWrites` makes the admin writes,
:class:`~memory_core.store.ingest.MessageIngest` stores a message (the hot path), and
:class:`~memory_core.store.tier_steps.TierSteps` is maintenance's protocol: its lock and the
compare-and-set steps that move the tiers on.
"""

from __future__ import annotations

from typing import Any

from memory_core.store.ingest import MessageIngest
from memory_core.store.keys import KeySchema, ScopeKeys
from memory_core.store.lane import FastLane
from memory_core.store.learning import LearningStore
from memory_core.store.ledger import ErasureLedger
from memory_core.store.repo_reads import ScopeReads
from memory_core.store.repo_writes import ScopeWrites
from memory_core.store.thread_starters import StarterStore
from memory_core.store.tier_steps import TierSteps

__all__ = ["MemoryRepo"]


class MemoryRepo:
    def __init__(self, client: Any, keys: KeySchema, *, lane: FastLane | None = None) -> None:
        self.client = client
        self.keys = keys
        self.reads = ScopeReads(client, keys, lane=lane)
        self.writes = ScopeWrites(client, keys, reads=self.reads)
        self.steps = TierSteps(client, keys, reads=self.reads, writes=self.writes)
        # What was forgotten, checked by every writer (memory_core.store.gone).
        self.ledger = ErasureLedger(client, keys)
        self.messages = MessageIngest(client, keys, lane=lane, ledger=self.ledger.read)
        self.learning = LearningStore(client, keys)  # a channel's past being learned
        # Threads' first messages read from the platform when memory lacks them: context.
        self.starters = StarterStore(client, keys)

    @property
    def lane(self) -> FastLane | None:
        """The store's own connection (one server; none on a cluster), the parts' that
        use it: a prompt's reads and storing a message."""
        return self.reads.lane

    @lane.setter
    def lane(self, lane: FastLane | None) -> None:
        self.reads.lane = self.messages.lane = lane

    def k(self, scope: str) -> ScopeKeys:
        return self.keys.scope(scope)
