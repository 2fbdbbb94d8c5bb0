"""Typed access to one scope's memory in Redis. The only class that issues Redis commands
for scope data; key names come from :mod:`memory_core.store.keys`, atomic writes from
:mod:`memory_core.store.scripts`.

:class:`MemoryRepo` is a facade over parts, one job each, which it composes and whose
methods it offers as its own (the callers need not know which part does what):
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
        # The parts' methods as the repository's own: bound once, so a call costs nothing
        # more than the part's.
        self._offer_reads(self.reads)
        self._offer_writes(self.writes)
        self._offer_steps(self.steps)
        self.ingest = self.messages.ingest

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

    def _offer_reads(self, reads: ScopeReads) -> None:
        self.prompt_snapshot = reads.prompt_snapshot
        self.facts_of = reads.facts_of
        self.people_of = reads.people_of
        self.state = reads.state
        self.raw_state = reads.raw_state
        self.entries_after = reads.entries_after
        self.day_view = reads.day_view
        self.first_entry_from = reads.first_entry_from
        self.entries_from = reads.entries_from
        self.entries_by_ids = reads.entries_by_ids
        self.all_entries = reads.all_entries
        self.recent = reads.recent
        self.days = reads.days
        self.episodes = reads.episodes
        self.weeks = reads.weeks
        self.facts = reads.facts
        self.log_length = reads.log_length
        self.dump = reads.dump
        self.scopes = reads.scopes
        self.scope_count = reads.scope_count
        self.scope_exists = reads.scope_exists
        self.threads_of = reads.threads_of
        self.places_of = reads.places_of
        self.spoken_in = reads.spoken_in
        self.names_of = reads.names_of
        self.counts_of = reads.counts_of
        self.messages_by = reads.messages_by
        self.thread_parent = reads.thread_parent

    def _offer_writes(self, writes: ScopeWrites) -> None:
        self.apply_person_facts = writes.apply_person_facts
        self.note_person = writes.note_person
        self.set_fields = writes.set_fields
        self.bump_epoch = writes.bump_epoch
        self.begin_forget = writes.begin_forget
        self.begin_forgets = writes.begin_forgets
        self.begin_forget_at = writes.begin_forget_at
        self.end_forget = writes.end_forget
        self.resync_counters = writes.resync_counters
        self.put_answer_record = writes.put_answer_record
        self.answer_record = writes.answer_record
        self.drop_answer_record = writes.drop_answer_record
        self.pending_forgets = writes.pending_forgets
        self.put_fact = writes.put_fact
        self.replace_fact = writes.replace_fact
        self.delete_facts = writes.delete_facts
        self.delete_entries = writes.delete_entries
        self.rewrite_log = writes.rewrite_log
        self.release_platform_id = writes.release_platform_id
        self.trim_log_before = writes.trim_log_before
        self.replace_days = writes.replace_days
        self.replace_episodes = writes.replace_episodes
        self.replace_weeks = writes.replace_weeks
        self.forget_scope = writes.forget_scope
        self.purge = writes.purge
        self.note_speaker = writes.note_speaker
        self.forget_speaker = writes.forget_speaker
        self.restore = writes.restore

    def _offer_steps(self, steps: TierSteps) -> None:
        self.lock_and_state = steps.lock_and_state
        self.advance_short = steps.advance_short
        self.close_day = steps.close_day
        self.apply_refresh = steps.apply_refresh
        self.note_failure = steps.note_failure
        self.try_lock = steps.try_lock
        self.renew_lock = steps.renew_lock
        self.unlock = steps.unlock
