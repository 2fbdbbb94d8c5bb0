"""A MULTI/EXEC pipeline that is safe on redis-py's asyncio Redis Cluster client.

redis-py 8's cluster client, when it must refresh its view of the cluster (after a shard
failed), does so for a transaction pipeline from a thread with an event loop of its own
(``TransactionStrategy.execute_command``: ``asyncio.run`` in a thread). That binds the
client's initialisation lock to the other loop, and every later refresh on ours fails with
"bound to a different event loop": after one lost shard the whole client is broken.
Refreshing first, on our loop (``RedisCluster.initialize`` does nothing when the view is
fresh), leaves the pipeline nothing to refresh.
"""

from __future__ import annotations

from typing import Any

from redis.asyncio.cluster import RedisCluster


async def atomic_pipeline(client: Any) -> Any:
    """``client.pipeline(transaction=True)``, the cluster client's view refreshed first.
    Queue its commands at once (no await in between)."""
    if isinstance(client, RedisCluster):
        await client.initialize()
    return client.pipeline(transaction=True)
