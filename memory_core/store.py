"""Opening the store: a real Redis at REDIS_URL, or the embedded store in the data directory."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import RedisError

from config.redis_url import mask_url, split_userinfo, url_passwords
from config.settings import StoreSettings
from memory_core.embedded import EmbeddedStore
from memory_core.errors import StoreUnavailable
from memory_core.keys import KeySchema
from memory_core.scripts import load_scripts

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


@dataclass
class Store:
    client: Redis
    keys: KeySchema
    description: str  # safe to print: no secrets
    embedded: EmbeddedStore | None = None

    async def persist(self) -> None:
        """Make every change so far durable before the caller reports it done.

        The embedded store writes its snapshot now (fsync'ed, atomic), instead of at the next
        autosave. An external Redis does nothing here: its durability is its own
        configuration (``appendonly``/``appendfsync``, ``save``), which memorybot neither
        sets nor forces. Any store added later keeps this one meaning.
        """
        if self.embedded is not None:
            await self.embedded.save()

    async def close(self) -> None:
        if self.embedded is not None:
            await self.embedded.close()
        else:
            await self.client.aclose()


async def open_store(settings: StoreSettings, *, autosave: bool = True) -> Store:
    keys = KeySchema(settings.key_prefix)
    if settings.redis_url is None:
        embedded = await EmbeddedStore.open(settings.data_dir)
        if autosave:
            embedded.start_autosave(settings.snapshot_interval_s)
        await load_scripts(embedded.client)
        return Store(
            client=embedded.client,
            keys=keys,
            description=f"embedded store (snapshot {embedded.path}; set REDIS_URL for Redis)",
            embedded=embedded,
        )
    url = settings.redis_url.get_secret_value()
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
        if settings.cluster:
            client = RedisCluster.from_url(url, max_connections=settings.max_connections, **options)
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
        raise StoreUnavailable(
            f"cannot reach Redis at {masked} (REDIS_URL): {_failure_reason(url, exc)}. "
            "Start Redis, fix REDIS_URL, or unset it to use the embedded store."
        ) from exc
    return Store(client=client, keys=keys, description=f"Redis at {masked}")


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
