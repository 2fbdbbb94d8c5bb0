"""The fleet-wide keys split in buckets (memory_core.store.keys): they spread over a
cluster's nodes, a scope's bucketed entries sit with it, and readers merge the buckets in
order."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from redis.crc import REDIS_CLUSTER_HASH_SLOTS, key_slot

from memory_core.fleet.ratelimit import FleetRateLimiter
from memory_core.models import IncomingMessage
from memory_core.store.keys import BUCKETS, KeySchema, bucket_of, bucket_tags
from tests.helpers import CoreFactory


def _node(slot: int, nodes: int) -> int:
    """The node serving ``slot`` when a cluster splits its slots in equal ranges (what
    ``redis-cli --cluster create`` and the tests' cluster do)."""
    return min(slot // (REDIS_CLUSTER_HASH_SLOTS // nodes), nodes - 1)


@pytest.mark.parametrize("nodes", [3, 6, 16])
def test_buckets_spread_evenly_over_the_nodes(nodes: int) -> None:
    served = Counter(_node(key_slot(tag.encode()), nodes) for tag in bucket_tags())
    assert len(served) == nodes
    assert max(served.values()) / (BUCKETS / nodes) <= 1.1


def test_a_scope_and_its_bucket_mostly_share_a_node() -> None:
    keys = KeySchema("mb")
    scopes = [f"discord:{g}:{c}" for g in range(40) for c in range(50)]
    same = sum(
        _node(key_slot(keys.scope(s).log.encode()), 3)
        == _node(key_slot(keys.scopes_index_of(s).encode()), 3)
        for s in scopes
    )
    assert same / len(scopes) > 0.95  # only the buckets that straddle a node boundary differ
    assert {bucket_of(s) for s in scopes} == set(range(BUCKETS))


async def test_scopes_are_listed_newest_first_across_buckets(make_core: CoreFactory) -> None:
    core = await make_core(offline=True)
    redis: Any = core.store.client
    scopes = {f"slack:T1:C{i:04d}": 1_700_000_000_000 + (i * 7919) % 1000 for i in range(700)}
    pipe = redis.pipeline(transaction=False)
    for scope, ms in scopes.items():
        pipe.zadd(core.store.keys.scopes_index_of(scope), {scope: ms})
    await pipe.execute()
    expected = sorted(scopes.items(), key=lambda row: (-row[1], row[0]))
    assert await core.repo.reads.scope_count() == 700
    assert await core.repo.reads.scopes(offset=0, limit=700) == expected
    assert await core.repo.reads.scopes(offset=95, limit=50) == expected[95:145]
    assert await core.repo.reads.scopes(offset=690, limit=50) == expected[690:]


async def test_a_message_writes_its_scopes_bucket_only(make_core: CoreFactory) -> None:
    core = await make_core(offline=True)
    await core.intake.accept(IncomingMessage(scope="discord:5:6", text="hello", author="A"))
    redis: Any = core.store.client
    keys = core.store.keys
    index = keys.scopes_index_of("discord:5:6")
    assert await redis.zscore(index, "discord:5:6") is not None
    others = [k for k in keys.all_scopes_indexes() if k != index]
    assert sum([await redis.zcard(k) for k in others]) == 0
    # and no index outside the buckets: the only key of scopes by activity is the bucket's
    assert [k async for k in redis.scan_iter(match=f"{keys.prefix}:*scopes")] == [index]


@pytest.mark.parametrize("limit", [1, 5, 16, 100, 1001])
def test_rate_shares_add_up_to_the_fleet_limit(limit: int) -> None:
    limiter = FleetRateLimiter(None, KeySchema("mb"), limit=limit, window_s=60)
    assert sum(limiter.shares) == limit
    assert min(limiter.shares) >= 1
    assert len(set(limiter.keys)) == len(limiter.shares)
    assert max(limiter.shares) - min(limiter.shares) <= 1
