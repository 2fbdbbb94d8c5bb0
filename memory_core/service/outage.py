"""Messages held in memory while Redis is away, stored in order once it is back.

On one server an outage is one failure: while anything is held, every new message waits
behind it (no round trip to a Redis that is away). A cluster's shards fail one by one: a
scope waits only behind its own held messages, so a lost shard does not stop the others.
Past ``store.outage_buffer`` a message is refused (StoreUnavailable), so the front door does
not acknowledge it as stored.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter, deque
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from memory_core.errors import StoreUnavailable
from memory_core.models import IncomingMessage, IngestResult

if TYPE_CHECKING:
    from memory_core.fleet.metrics import Metrics
    from memory_core.service.prepared import Prepared

log = logging.getLogger(__name__)

HELD_ATTEMPTS = 3  # a held message that fails this many times (not an outage) is given up

Held = tuple["Prepared", IncomingMessage]


class OutageBuffer:
    def __init__(
        self,
        *,
        limit: int,
        cluster: bool,
        store: Callable[[Prepared, IncomingMessage], Awaitable[IngestResult]],
        after: Callable[[IncomingMessage, Prepared, IngestResult], Awaitable[None]],
        metrics: Metrics | None = None,
    ) -> None:
        self.limit = limit
        self.cluster = cluster
        self._store = store  # stores a held message (raises StoreUnavailable while away)
        self._after = after  # what follows a message stored (the work it makes due)
        self.metrics = metrics
        self._buffer: deque[Held] = deque()
        self._held_ids: set[tuple[str, str]] = set()  # (scope, platform id) in the buffer
        self._held_scopes: Counter[str] = Counter()  # held messages per scope
        self._drainer: asyncio.Task[None] | None = None

    def waits_behind(self, scope: str) -> bool:
        """Whether a message for ``scope`` must wait behind held ones. One server is one
        failure: while anything is held, everything waits (no round trip to a Redis that is
        away). A cluster's shards fail one by one: only the scope's own held messages count,
        so a lost shard does not stop the scopes of the others."""
        if self.cluster:
            return self._held_scopes[scope] > 0
        return bool(self._buffer)

    def hold(self, prepared: Prepared, msg: IncomingMessage) -> IngestResult:
        limit = self.limit
        if len(self._buffer) >= limit:
            if self.metrics is not None:
                self.metrics.incr("messages_refused")
            raise StoreUnavailable(
                f"Redis is unreachable and {limit} messages already wait in memory "
                f"(store.outage_buffer): this message in {prepared.scope} was NOT stored"
            )
        if not self._buffer:
            log.error(
                "Redis is unreachable: holding messages in memory (up to %d, "
                "store.outage_buffer) and storing them when it is back",
                limit,
            )
        key = (prepared.scope, msg.platform_id)
        repeat = bool(msg.platform_id) and key in self._held_ids
        if not repeat:  # the same delivery twice (a mention's two events): held once
            self._buffer.append((prepared, msg))
            self._held_scopes[prepared.scope] += 1
            if msg.platform_id:
                self._held_ids.add(key)
        if self._drainer is None or self._drainer.done():
            self._drainer = asyncio.create_task(self._drain())
        return IngestResult(
            stored=False,
            id="",
            state_day="",
            tz="",
            mode="",
            lang="",
            unsum_tokens=0,
            unsum_count=0,
            retry_at=0,
            buffered=True,
            outcome="duplicate" if repeat else "",
        )

    def _release(self, held: Held) -> None:
        """A held message is stored (or given up): out of the buffer. It is the oldest of
        its scope, so near the front (the buffer's head when Redis is one server)."""
        self._buffer.remove(held)
        prepared, msg = held
        self._held_ids.discard((prepared.scope, msg.platform_id))
        self._held_scopes[prepared.scope] -= 1
        if not self._held_scopes[prepared.scope]:
            del self._held_scopes[prepared.scope]

    async def _drain(self) -> None:
        """Store the held messages once Redis answers again, each scope's in order.

        Each pass goes through the buffer oldest first; a scope that cannot be stored keeps
        its later messages back until the next pass. On one server the first failure ends
        the pass (the server is away for every scope); on a cluster the other scopes are
        tried, so a shard that is still away does not hold up the ones that are back."""
        delay = 0.1
        stored = 0
        failures: dict[int, int] = {}  # held message -> unexpected failures in a row
        while self._buffer:
            blocked: set[str] = set()
            for held in list(self._buffer):  # messages held meanwhile: the next pass
                prepared, msg = held
                if prepared.scope in blocked:
                    continue
                try:
                    result = await self._store(prepared, msg)
                except StoreUnavailable:
                    blocked.add(prepared.scope)
                    if not self.cluster:
                        break
                    continue
                except Exception:
                    # Redis refusing the message, or the client failing in an unexpected
                    # way while a connection comes back (redis-py can raise AttributeError
                    # mid-reconnect): tried again in the next passes; only a message that
                    # keeps failing is given up, so that it cannot hold up the rest.
                    failures[id(held)] = failures.get(id(held), 0) + 1
                    if failures[id(held)] < HELD_ATTEMPTS:
                        log.warning("a held message in %s failed; trying again", prepared.scope)
                        blocked.add(prepared.scope)
                        continue
                    log.exception(
                        "a held message in %s could not be stored; dropped", prepared.scope
                    )
                    self._release(held)
                    continue
                self._release(held)
                stored += 1
                await self._after(msg, prepared, result)
            if blocked:
                await asyncio.sleep(delay)
                delay = min(2.0, delay * 2)
            else:
                delay = 0.1
        log.warning("Redis is back: %d held messages stored", stored)

    @property
    def held(self) -> int:
        """Messages waiting in memory for Redis to come back."""
        return len(self._buffer)

    async def wait(self, seconds: float) -> bool:
        """Wait up to ``seconds`` for the held messages to be stored; True when none
        is left. (Replay: its clock must not run past messages that are not stored yet, or
        the days in between would be closed without them.) Re-raises what stopped the
        catching up, e.g. an outage during the maintenance it ran."""
        if not self._buffer:
            return True
        if self._drainer is None or self._drainer.done():  # stopped by an error: go on
            self._drainer = asyncio.create_task(self._drain())
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._drainer), seconds)
        return not self._buffer

    async def settle(self, timeout_s: float) -> None:
        """At shutdown: give the messages held a last chance to be stored."""
        if self._drainer is not None and not self._drainer.done():
            try:
                await asyncio.wait_for(asyncio.shield(self._drainer), timeout=timeout_s)
            except TimeoutError:
                log.error("%d held messages could not be stored before shutdown", self.held)
