"""The fleet queue's Redis side: the sweep slots' markers, the scopes index read for a sweep,
the per-bucket queues of scopes to maintain and their in-flight leases, the sweeps' record.
What to queue and when is :mod:`memory_core.fleet.queue`'s; this class only reads and writes.

Every key is one bucket's (a scope's bucket holds its entries), so on a Redis Cluster each
command touches one shard, and a shard that is down fails only its buckets' commands: the
methods that work on one bucket raise :class:`~memory_core.errors.StoreUnavailable` for it,
the ones that look at every bucket skip the unreachable ones and say which failed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memory_core.store.keys import KeySchema
from memory_core.store.redis_errors import translates_redis_errors
from memory_core.store.scripts import run_script


@translates_redis_errors
class QueueStore:
    def __init__(self, client: Any, keys: KeySchema) -> None:
        self.client = client
        self.keys = keys

    # -- a sweep slot's marker ---------------------------------------------------------
    async def take_sweep(self, slot: str, value: str, *, lease_ms: int) -> bool:
        """Set the slot's marker to ``value`` if nobody holds it (SET NX)."""
        return bool(await self.client.set(self.keys.fleet_sweep(slot), value, nx=True, px=lease_ms))

    async def keep_sweep(self, slot: str, value: str, *, lease_ms: int) -> bool:
        """Renew the marker's lease if it still reads ``value``."""
        return bool(
            await run_script(
                self.client, "renew_lock", [self.keys.fleet_sweep(slot)], [value, lease_ms]
            )
        )

    async def mark_sweep(self, slot: str, value: str, *, ttl_s: int) -> None:
        """Overwrite an existing marker (SET XX)."""
        await self.client.set(self.keys.fleet_sweep(slot), value, xx=True, ex=ttl_s)

    async def drop_sweep(self, slot: str, value: str) -> None:
        """Delete the marker if it still reads ``value``."""
        await run_script(self.client, "release_lock", [self.keys.fleet_sweep(slot)], [value])

    async def sweep_marker(self, slot: str) -> str | None:
        value = await self.client.get(self.keys.fleet_sweep(slot))
        return str(value) if value else None

    # -- the scopes index ----------------------------------------------------------------
    async def scan_index(self, index_key: str, cursor: int, *, count: int) -> tuple[int, list[str]]:
        """One ZSCAN step of a bucket of the scopes index: (next cursor, scopes)."""
        cursor, items = await self.client.zscan(index_key, cursor, count=count)
        return int(cursor), [str(scope) for scope, _ in items]

    async def state_fields(
        self, scopes: Sequence[str], fields: Sequence[str]
    ) -> list[tuple[str, list[str | None], str | None]]:
        """``fields`` of each scope's state, and its channel's timezone (a thread's day ends
        at its channel's midnight unless it says), in one round trip: (scope, values,
        channel tz). A scope on a shard that is down is left out."""
        pipe = self.client.pipeline(transaction=False)
        for scope in scopes:
            k = self.keys.scope(scope)
            pipe.hmget(k.state, list(fields))
            pipe.hget(k.root_state, "tz")
        rows = await pipe.execute(raise_on_error=False)
        return [
            (scope, row, root_tz)
            for scope, row, root_tz in zip(scopes, rows[::2], rows[1::2], strict=True)
            # on a shard that is down
            if not isinstance(row, Exception) and not isinstance(root_tz, Exception)
        ]

    # -- the queue and its leases --------------------------------------------------------
    async def enqueue(self, scopes: Sequence[str], *, now_ms: int) -> int:
        """Queue ``scopes``, each in its bucket's queue (one round trip); how many were new."""
        if not scopes:
            return 0
        by_bucket: dict[int, list[str]] = {}
        for scope in scopes:
            by_bucket.setdefault(self.keys.bucket(scope), []).append(scope)
        pipe = self.client.pipeline(transaction=False)
        for bucket, members in by_bucket.items():
            pipe.zadd(self.keys.fleet_queue(bucket), dict.fromkeys(members, now_ms), nx=True)
        return sum(int(n) for n in await pipe.execute())

    async def claim_in(self, bucket: int, *, now_ms: int, lease_ms: int) -> str | None:
        """The oldest scope queued in ``bucket``, moved into its in-flight set with a lease
        (leases run out put back first), or None."""
        scope = await run_script(
            self.client,
            "fleet_claim",
            [self.keys.fleet_queue(bucket), self.keys.fleet_inflight(bucket)],
            [now_ms, lease_ms],
        )
        return str(scope) if scope else None

    async def work_in(
        self, buckets: Sequence[int], *, now_ms: int
    ) -> tuple[list[tuple[int, int] | None], list[str]]:
        """For each bucket, (queued, leases run out by ``now_ms``), or None when its shard
        is down; and the errors of those (one pipelined round trip)."""
        pipe = self.client.pipeline(transaction=False)
        for bucket in buckets:
            pipe.zcard(self.keys.fleet_queue(bucket))
            pipe.zcount(self.keys.fleet_inflight(bucket), "-inf", now_ms)
        counts = await pipe.execute(raise_on_error=False)
        down = [str(c) for c in counts if isinstance(c, Exception)]
        out: list[tuple[int, int] | None] = []
        for i in range(len(buckets)):
            queued, expired = counts[2 * i : 2 * i + 2]
            bad = isinstance(queued, Exception) or isinstance(expired, Exception)
            out.append(None if bad else (int(queued), int(expired)))
        return out, down

    async def finish(self, scope: str) -> None:
        """Drop the scope's lease."""
        await self.client.zrem(self.keys.fleet_inflight(self.keys.bucket(scope)), scope)

    async def pending(self) -> tuple[int, int]:
        """(queued, in flight), over every bucket."""
        pipe = self.client.pipeline(transaction=False)
        for bucket in range(self.keys.buckets):
            pipe.zcard(self.keys.fleet_queue(bucket))
            pipe.zcard(self.keys.fleet_inflight(bucket))
        counts = [int(n) for n in await pipe.execute()]
        return sum(counts[0::2]), sum(counts[1::2])

    async def record_sweep(self, job: str, entry: str) -> None:
        await self.client.hset(self.keys.sweeps, job, entry)

    async def sweeps(self) -> dict[str, str]:
        """Each job's last sweep, as recorded."""
        return dict(await self.client.hgetall(self.keys.sweeps))
