"""Opening the store: a real Redis at REDIS_URL, or the embedded store in the data directory.

Both are a Redis server reached through the same client code: the embedded store is a
Valkey server that memorybot runs on a Unix socket (:mod:`memory_core.store.embedded`)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from redis._parsers.commands import AsyncCommandsParser
from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.exceptions import RedisError

from config.redis_url import mask_url, split_userinfo, url_passwords
from config.settings import StoreSettings
from memory_core.errors import StoreError, StoreUnavailable
from memory_core.store.embedded import WAITAOF_TIMEOUT_MS, EmbeddedServer
from memory_core.store.keys import KeySchema
from memory_core.store.legacy_snapshot import IMPORTED_SUFFIX, SNAPSHOT_FILENAME
from memory_core.store.scripts import load_scripts

log = logging.getLogger(__name__)

# Characters that end a URL's host part: written as is in a password, they make a URL
# parser read part of the password as the host or the port.
_HOST_ENDERS = "/?#"
_MIN_SCRUBBED = 4  # shorter passwords cannot be told apart from the words of a message


def _failure_reason(url: str, exc: BaseException) -> str:
    """Why connecting failed, with no password and no piece of one in it."""
    _, userinfo, _ = split_userinfo(url)
    if userinfo is not None and any(c in userinfo for c in _HOST_ENDERS):
        # The library read part of the password as the host or port, and would quote it.
        return (
            "the password holds '/', '?' or '#' as is, which ends the host part of a URL: "
            "percent-encode them (/ as %2F, ? as %3F, # as %23)"
        )
    reason = mask_url((str(exc) or type(exc).__name__).rstrip("."))
    for password in url_passwords(url):
        if len(password) >= _MIN_SCRUBBED:
            reason = reason.replace(password, "***")
    return reason


class _KnownCommands(AsyncCommandsParser):
    """redis-py's cluster client asks its default node for the command table (``COMMAND``)
    on every refresh of its view of the cluster, and the default node is the first primary
    of that view, up or not: once a command has failed on a lost shard that serves slot 0,
    every command, to every shard, fails until it is back. The table does not change while
    we run: asked once, at connection, and kept."""

    async def initialize(self, node: ClusterNode | None = None) -> None:
        if not self.commands:
            await super().initialize(node)


@dataclass
class Store:
    client: Redis
    keys: KeySchema
    description: str  # safe to print: no secrets
    embedded: EmbeddedServer | None = None

    async def persist(self) -> None:
        """Make every change so far durable before the caller reports it done.

        The embedded server is asked to fsync its append-only file now (``WAITAOF``) rather
        than within the second ``appendfsync everysec`` allows. An external Redis does nothing
        here: its durability is its own configuration (``appendonly``/``appendfsync``,
        ``save``), which memorybot neither sets nor forces. Any store added later keeps this
        one meaning.
        """
        if self.embedded is None:
            return
        # WAITAOF waits for the writes of the connection it is sent on; this process's writes
        # went through other connections of the pool, so one write of its own on the same
        # connection comes first: the server applies commands in order, so once that write is
        # on disk, everything written before it is too.
        async with self.client.pipeline(transaction=False) as pipe:
            pipe.incr(self.keys.durability_mark)
            pipe.execute_command("WAITAOF", 1, 0, WAITAOF_TIMEOUT_MS)
            _, (local, _replicas) = await pipe.execute()
        if int(local) < 1:
            raise StoreError(
                f"the embedded store did not write the change to disk within "
                f"{WAITAOF_TIMEOUT_MS // 1000} s (is the disk full? see "
                f"{self.embedded.files.log})"
            )

    async def close(self) -> None:
        await self.client.aclose()
        if self.embedded is not None:
            await self.embedded.close()


async def open_store(settings: StoreSettings) -> Store:
    if settings.redis_url is None:
        return await _open_embedded(settings)
    url = settings.redis_url.get_secret_value()
    client = await _connect(settings, url, cluster=settings.cluster)
    return Store(
        client=client, keys=KeySchema(settings.key_prefix), description=f"Redis at {mask_url(url)}"
    )


async def _open_embedded(settings: StoreSettings) -> Store:
    """The embedded Valkey server of the data directory (started, or joined when another
    memorybot process runs it), with the old JSON snapshot imported on the first start."""
    embedded = await EmbeddedServer.open(settings.data_dir)
    try:
        client = await _connect(settings, embedded.files.url, cluster=False, embedded=True)
    except BaseException:
        await embedded.close()
        raise
    if embedded.imported is not None:  # once, and worth saying wherever it happens
        log.warning(
            "imported %d key(s) of the old embedded store from %s into the embedded Valkey "
            "server; the file is kept as %s%s",
            embedded.imported,
            embedded.files.data_dir / SNAPSHOT_FILENAME,
            SNAPSHOT_FILENAME,
            IMPORTED_SUFFIX,
        )
    return Store(
        client=client,
        keys=KeySchema(settings.key_prefix),
        description=embedded.describe(),
        embedded=embedded,
    )


async def _connect(
    settings: StoreSettings, url: str, *, cluster: bool, embedded: bool = False
) -> Any:
    """A client for the Redis server at ``url``, answering PING, with the scripts loaded."""
    masked = mask_url(url)
    options: dict[str, Any] = {
        "decode_responses": True,
        # Lone surrogates (a JSON "\ud800" escape from a platform or a file) are not UTF-8:
        # stored as "?" rather than failing the write.
        "encoding_errors": "replace",
        "socket_connect_timeout": settings.connect_timeout_s,
        "socket_timeout": max(settings.connect_timeout_s, 10.0),
    }
    client: Any = None
    try:
        if cluster:
            client = RedisCluster.from_url(url, max_connections=settings.max_connections, **options)
            client.commands_parser = _KnownCommands()
        else:
            # A blocking pool: under a burst (a rollover at high concurrency, a flood of
            # messages) a command waits for a connection rather than failing.
            pool = BlockingConnectionPool.from_url(
                url,
                max_connections=settings.max_connections,
                timeout=max(settings.connect_timeout_s, 10.0),
                health_check_interval=30,
                **options,
            )
            client = Redis(connection_pool=pool)
            client.auto_close_connection_pool = True  # aclose() closes the pool too
        await client.ping()
        await load_scripts(client)
    except (RedisError, OSError, ValueError, TypeError) as exc:  # TypeError: ?unknown=1
        if client is not None:
            await client.aclose()
        if embedded:
            raise StoreUnavailable(
                f"cannot reach the embedded Valkey server at {masked}: "
                f"{_failure_reason(url, exc)}. Run memorybot doctor; its log says more."
            ) from exc
        raise StoreUnavailable(
            f"cannot reach Redis at {masked} (REDIS_URL): {_failure_reason(url, exc)}. "
            "Start Redis, fix REDIS_URL, or unset it to use the embedded store."
        ) from exc
    return client


async def delete_matching(client: Any, pattern: str) -> int:
    """Delete every key matching ``pattern`` (SCAN, in batches): throwaway data only."""
    deleted = 0
    batch: list[str] = []
    async for key in client.scan_iter(match=pattern, count=1000):
        batch.append(key)
        if len(batch) >= 500:
            deleted += int(await client.delete(*batch))
            batch.clear()
    if batch:
        deleted += int(await client.delete(*batch))
    return deleted
