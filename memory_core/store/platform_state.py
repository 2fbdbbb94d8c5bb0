"""Small shared state the front doors need besides memory: event de-duplication (platforms
retry deliveries) and a cache of lookups (user names). Kept in Redis so every process of a
fleet sees it; key names come from :mod:`memory_core.store.keys`."""

from __future__ import annotations

from typing import Any

from memory_core.store.keys import KeySchema
from memory_core.store.redis_errors import translates_redis_errors


@translates_redis_errors
class PlatformState:
    def __init__(self, client: Any, keys: KeySchema) -> None:
        self.client = client
        self.keys = keys

    async def first_delivery(self, platform: str, event_id: str, *, ttl_s: int = 3600) -> bool:
        """True the first time ``event_id`` is seen (SET NX), False for every retry."""
        if not event_id:
            return True
        return bool(await self.client.set(self.keys.seen(platform, event_id), 1, nx=True, ex=ttl_s))

    async def forget_delivery(self, platform: str, event_id: str) -> None:
        """Undo :meth:`first_delivery` when handling failed, so the platform's retry runs."""
        await self.client.delete(self.keys.seen(platform, event_id))

    async def cached(self, namespace: str, item: str) -> str | None:
        value = await self.client.get(self.keys.cache(namespace, item))
        return str(value) if value is not None else None

    async def cache(self, namespace: str, item: str, value: str, *, ttl_s: int = 86400) -> None:
        await self.client.set(self.keys.cache(namespace, item), value, ex=ttl_s)

    async def forget_cached(self, namespace: str, prefix: str) -> int:
        """Drop every cached lookup of ``namespace`` whose item starts with ``prefix`` (a
        workspace's names, when the app is uninstalled there). Returns how many went."""
        pattern = self.keys.cache(namespace, _glob_escaped(prefix) + "*")
        doomed = [key async for key in self.client.scan_iter(match=pattern, count=500)]
        for start in range(0, len(doomed), 500):
            await self.client.delete(*doomed[start : start + 500])
        return len(doomed)


def _glob_escaped(text: str) -> str:
    for special in ("\\", "*", "?", "[", "]"):
        text = text.replace(special, "\\" + special)
    return text
