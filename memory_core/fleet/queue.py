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
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import AsyncIterator
from typing import Any

from memory_core.errors import StoreUnavailable
from memory_core.models import ScopeState
from memory_core.store.keys import KeySchema
from memory_core.store.redis_errors import redis_errors_translated, translates_redis_errors
from memory_core.store.scripts import run_script

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


@translates_redis_errors
class FleetQueue:
    def __init__(self, client: Any, keys: KeySchema) -> None:
        self.client = client
        self.keys = keys
        # Where this process's claims start: a random bucket, so processes do not all
        # begin with the same one.
        self._cursor = secrets.randbelow(keys.buckets)
        self._with_work: list[int] = []  # buckets the last look found work in

    # The slot's marker: "enumerating:<worker>" while its enumerator fills the queue, kept
    # alive by that enumerator's heartbeat for a short lease (so a dead one frees the slot in
    # seconds); then "done" for the rest of the slot (so nobody enumerates it twice).
    async def win_sweep(self, slot: str, worker: str, *, lease_ms: int) -> bool:
        """True for exactly one live process per sweep slot: that one enumerates."""
        key = self.keys.fleet_sweep(slot)
        return bool(await self.client.set(key, _enumerating(worker), nx=True, px=lease_ms))

    async def keep_sweep(self, slot: str, worker: str, *, lease_ms: int) -> bool:
        """The enumerator's heartbeat; False if the slot is no longer its own."""
        return bool(
            await run_script(
                self.client,
                "renew_lock",
                [self.keys.fleet_sweep(slot)],
                [_enumerating(worker), lease_ms],
            )
        )

    async def mark_enumerated(self, slot: str, *, ttl_s: int) -> None:
        await self.client.set(self.keys.fleet_sweep(slot), "done", xx=True, ex=ttl_s)

    async def abandon_sweep(self, slot: str, worker: str) -> None:
        """An enumerator that failed frees its slot, so another process enumerates it now."""
        await run_script(
            self.client, "release_lock", [self.keys.fleet_sweep(slot)], [_enumerating(worker)]
        )

    async def sweep_status(self, slot: str) -> str:
        """ "enumerating" (the queue is still being filled: wait), "done", or "open" (nobody
        enumerated the slot, or its enumerator died before it finished)."""
        value = await self.client.get(self.keys.fleet_sweep(slot))
        if not value:
            return "open"
        return "enumerating" if str(value).startswith("enumerating") else "done"

    async def states(self, *, batch: int = 500) -> AsyncIterator[list[tuple[str, ScopeState]]]:
        """Every scope in the index with the state fields a due-check needs, in batches
        (bucket after bucket)."""
        unreachable = 0
        for index_key in self.keys.all_scopes_indexes():
            cursor = 0
            while True:
                try:
                    with redis_errors_translated():
                        cursor, items = await self.client.zscan(index_key, cursor, count=batch)
                except StoreUnavailable as exc:
                    # A cluster shard that is down: its buckets wait for the next sweep,
                    # the others are swept now.
                    log.warning("sweep: skipped %s, unreachable: %s", index_key, exc)
                    unreachable += 1
                    break
                scopes = [str(scope) for scope, _ in items]
                if scopes:
                    pipe = self.client.pipeline(transaction=False)
                    for scope in scopes:
                        k = self.keys.scope(scope)
                        # A thread's day ends at its channel's midnight unless it says.
                        pipe.hmget(k.state, DUE_FIELDS)
                        pipe.hget(k.root_state, "tz")
                    rows = await pipe.execute(raise_on_error=False)
                    yield [
                        (scope, _due_state(row, root_tz))
                        for scope, row, root_tz in zip(scopes, rows[::2], rows[1::2], strict=True)
                        # on a shard that is down
                        if not isinstance(row, Exception) and not isinstance(root_tz, Exception)
                    ]
                if cursor == 0:
                    break
        if unreachable == self.keys.buckets:
            raise StoreUnavailable("no bucket of the scopes index could be read")

    async def enqueue(self, scopes: list[str], *, now_ms: int) -> int:
        """Queue ``scopes``, each in its bucket's queue (one round trip)."""
        if not scopes:
            return 0
        by_bucket: dict[int, list[str]] = {}
        for scope in scopes:
            by_bucket.setdefault(self.keys.bucket(scope), []).append(scope)
        pipe = self.client.pipeline(transaction=False)
        for bucket, members in by_bucket.items():
            pipe.zadd(self.keys.fleet_queue(bucket), dict.fromkeys(members, now_ms), nx=True)
        return sum(int(n) for n in await pipe.execute())

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
            with redis_errors_translated():
                scope = await run_script(
                    self.client,
                    "fleet_claim",
                    [self.keys.fleet_queue(bucket), self.keys.fleet_inflight(bucket)],
                    [now_ms, lease_ms],
                )
        except StoreUnavailable as exc:  # a cluster shard that is down: the others go on
            log.warning("claim: queue bucket %d unreachable: %s", bucket, exc)
            return None
        return str(scope) if scope else None

    async def _buckets_with_work(self, now_ms: int) -> list[int]:
        """The buckets with a scope queued or a lease run out, from after the cursor on."""
        n = self.keys.buckets
        order = [(self._cursor + 1 + step) % n for step in range(n)]
        pipe = self.client.pipeline(transaction=False)
        for bucket in order:
            pipe.zcard(self.keys.fleet_queue(bucket))
            pipe.zcount(self.keys.fleet_inflight(bucket), "-inf", now_ms)
        with redis_errors_translated():
            counts = await pipe.execute(raise_on_error=False)
        down = [c for c in counts if isinstance(c, Exception)]
        if down:  # a cluster shard that is down: the other buckets' work goes on
            log.warning("claim: %d queue buckets unreachable: %s", len(down) // 2, down[0])
        return [
            bucket
            for i, bucket in enumerate(order)
            if not any(isinstance(c, Exception) for c in counts[2 * i : 2 * i + 2])
            and (int(counts[2 * i]) or int(counts[2 * i + 1]))
        ]

    async def finish(self, scope: str) -> None:
        """The scope is done; if its bucket cannot be reached its lease runs out instead."""
        try:
            with redis_errors_translated():
                await self.client.zrem(self.keys.fleet_inflight(self.keys.bucket(scope)), scope)
        except StoreUnavailable as exc:
            log.warning("could not release the lease of %s (it runs out): %s", scope, exc)

    async def record_sweep(self, job: str, entry: str) -> None:
        """The last sweep of ``job`` (a JSON object), for the dashboard."""
        await self.client.hset(self.keys.sweeps, job, entry)

    async def pending(self) -> tuple[int, int]:
        """(queued, in flight), over every bucket."""
        pipe = self.client.pipeline(transaction=False)
        for bucket in range(self.keys.buckets):
            pipe.zcard(self.keys.fleet_queue(bucket))
            pipe.zcard(self.keys.fleet_inflight(bucket))
        counts = [int(n) for n in await pipe.execute()]
        return sum(counts[0::2]), sum(counts[1::2])


def _due_state(row: list[str | None], root_tz: str | None) -> ScopeState:
    fields = {k: v for k, v in zip(DUE_FIELDS, row, strict=True) if v is not None}
    if not fields.get("tz") and root_tz:
        fields["tz"] = root_tz
    return ScopeState.from_hash(fields)
