"""Sharing rollover work across the processes of a fleet, through Redis.

A sweep has two parts. *Enumerate*: one process per sweep slot (a ``SET NX`` marker) reads
the scopes index and queues the scopes that are due. *Work*: every process claims queued
scopes one at a time (a Lua script moves a scope from the queue into an in-flight set with a
lease) and brings each up to date. The index, the queue and the in-flight set are split in
the key schema's buckets (a scope's bucket holds its entries), so on a Redis Cluster the
work spreads over the shards. A process that dies leaves its claimed scopes in the
in-flight set; their leases run out and the next claim by anyone puts them back in the queue.
An enumerator that dies lets its marker's short lease lapse (its heartbeat stops), and the
next worker to find the queue empty enumerates the slot itself.
Exactly-once is not the queue's job: the maintainer's compare-and-set scripts and markers
guarantee it even if two workers end up on one scope.

This module decides (who enumerates, which bucket to claim from, what a shard that is down
costs); :class:`~memory_core.store.queue.QueueStore` reads and writes the keys.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import AsyncIterator
from typing import Any

from memory_core.errors import StoreUnavailable
from memory_core.models import ScopeState
from memory_core.store.keys import KeySchema
from memory_core.store.queue import QueueStore

log = logging.getLogger(__name__)

# The state fields a due-check needs (not the summaries themselves: those are large).
DUE_FIELDS = (
    "day",
    "tz",
    "refresh_pending",
    "week_pending",
    "unsum_tokens",
    "unsum_count",
    "last_ms",
    "short_upto",
    "trimmed_ms",
    "created_ms",
    "forgets_pending",
)


def _enumerating(worker: str) -> str:
    return f"enumerating:{worker}"


class FleetQueue:
    """Which scopes need maintenance and who does it (the decisions); their Redis side is
    :class:`memory_core.store.queue.QueueStore`'s."""

    def __init__(self, client: Any, keys: KeySchema) -> None:
        self.keys = keys
        self.store = QueueStore(client, keys)
        # Where this process's claims start: a random bucket, so processes do not all
        # begin with the same one.
        self._cursor = secrets.randbelow(keys.buckets)
        self._with_work: list[int] = []  # buckets the last look found work in

    # The slot's marker: "enumerating:<worker>" while its enumerator fills the queue, kept
    # alive by that enumerator's heartbeat for a short lease (so a dead one frees the slot in
    # seconds); then "done" for the rest of the slot (so nobody enumerates it twice).
    async def win_sweep(self, slot: str, worker: str, *, lease_ms: int) -> bool:
        """True for exactly one live process per sweep slot: that one enumerates."""
        return await self.store.take_sweep(slot, _enumerating(worker), lease_ms=lease_ms)

    async def keep_sweep(self, slot: str, worker: str, *, lease_ms: int) -> bool:
        """The enumerator's heartbeat; False if the slot is no longer its own."""
        return await self.store.keep_sweep(slot, _enumerating(worker), lease_ms=lease_ms)

    async def mark_enumerated(self, slot: str, *, ttl_s: int) -> None:
        await self.store.mark_sweep(slot, "done", ttl_s=ttl_s)

    async def abandon_sweep(self, slot: str, worker: str) -> None:
        """An enumerator that failed frees its slot, so another process enumerates it now."""
        await self.store.drop_sweep(slot, _enumerating(worker))

    async def sweep_status(self, slot: str) -> str:
        """ "enumerating" (the queue is still being filled: wait), "done", or "open" (nobody
        enumerated the slot, or its enumerator died before it finished)."""
        value = await self.store.sweep_marker(slot)
        if not value:
            return "open"
        return "enumerating" if value.startswith("enumerating") else "done"

    async def states(self, *, batch: int = 500) -> AsyncIterator[list[tuple[str, ScopeState]]]:
        """Every scope in the index with the state fields a due-check needs, in batches
        (bucket after bucket)."""
        unreachable = 0
        for index_key in self.keys.all_scopes_indexes():
            cursor = 0
            while True:
                try:
                    cursor, scopes = await self.store.scan_index(index_key, cursor, count=batch)
                except StoreUnavailable as exc:
                    # A cluster shard that is down: its buckets wait for the next sweep,
                    # the others are swept now.
                    log.warning("sweep: skipped %s, unreachable: %s", index_key, exc)
                    unreachable += 1
                    break
                if scopes:
                    rows = await self.store.state_fields(scopes, DUE_FIELDS)
                    yield [(scope, _due_state(row, root_tz)) for scope, row, root_tz in rows]
                if cursor == 0:
                    break
        if unreachable == self.keys.buckets:
            raise StoreUnavailable("no bucket of the scopes index could be read")

    async def enqueue(self, scopes: list[str], *, now_ms: int) -> int:
        """Queue ``scopes``, each in its bucket's queue (one round trip)."""
        return await self.store.enqueue(scopes, now_ms=now_ms)

    async def claim(self, *, now_ms: int, lease_ms: int) -> str | None:
        """A queued scope for this worker, or None when every bucket's queue is empty.
        The claim script runs on the bucket this process last found work in, then on the
        others known to have work; only when those are empty does one pipelined look at
        every bucket (queued, or leases run out) find where work is. So a busy sweep costs
        about one command a claim, and workers spread over the buckets."""
        tried: set[int] = set()
        for probe in (False, True):
            if probe:
                self._with_work = await self._buckets_with_work(now_ms)
            for bucket in [self._cursor, *self._with_work]:
                if bucket in tried:
                    continue
                tried.add(bucket)
                scope = await self._claim_in(bucket, now_ms=now_ms, lease_ms=lease_ms)
                if scope:
                    self._cursor = bucket
                    return scope
                if bucket in self._with_work:
                    self._with_work.remove(bucket)
        return None

    async def _claim_in(self, bucket: int, *, now_ms: int, lease_ms: int) -> str | None:
        try:
            return await self.store.claim_in(bucket, now_ms=now_ms, lease_ms=lease_ms)
        except StoreUnavailable as exc:  # a cluster shard that is down: the others go on
            log.warning("claim: queue bucket %d unreachable: %s", bucket, exc)
            return None

    async def _buckets_with_work(self, now_ms: int) -> list[int]:
        """The buckets with a scope queued or a lease run out, from after the cursor on."""
        n = self.keys.buckets
        order = [(self._cursor + 1 + step) % n for step in range(n)]
        counts, down = await self.store.work_in(order, now_ms=now_ms)
        if down:  # a cluster shard that is down: the other buckets' work goes on
            log.warning("claim: %d queue buckets unreachable: %s", len(down) // 2, down[0])
        return [bucket for bucket, c in zip(order, counts, strict=True) if c and (c[0] or c[1])]

    async def finish(self, scope: str) -> None:
        """The scope is done; if its bucket cannot be reached its lease runs out instead."""
        try:
            await self.store.finish(scope)
        except StoreUnavailable as exc:
            log.warning("could not release the lease of %s (it runs out): %s", scope, exc)

    async def record_sweep(self, job: str, entry: str) -> None:
        """The last sweep of ``job`` (a JSON object), for the dashboard."""
        await self.store.record_sweep(job, entry)

    async def sweeps(self) -> dict[str, str]:
        """Each job's last sweep (a JSON object), by job."""
        return await self.store.sweeps()

    async def pending(self) -> tuple[int, int]:
        """(queued, in flight), over every bucket."""
        return await self.store.pending()


def _due_state(row: list[str | None], root_tz: str | None) -> ScopeState:
    fields = {k: v for k, v in zip(DUE_FIELDS, row, strict=True) if v is not None}
    if not fields.get("tz") and root_tz:
        fields["tz"] = root_tz
    return ScopeState.from_hash(fields)
