"""What every listener of the Slack door shares, written once: the order of a scope's
messages, the bookkeeping of listeners in flight, and the :func:`listener` boilerplate."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any, Protocol, TypeVar, cast

log = logging.getLogger(__name__)

DRAIN_S = 10.0  # at shutdown, how long listeners in flight may finish


class Listening:
    """A scope's messages are stored in the order they arrived (Slack delivers a channel's
    events in order; a users.info lookup for one must not let the next overtake it): held
    only while storing, answers run concurrently. Bolt runs listeners as loose tasks after
    acking; shutdown (and tests) wait for the ones running through :meth:`drain`."""

    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}
        self._inflight: set[asyncio.Task[Any]] = set()

    @asynccontextmanager
    async def hold(self, scope: str) -> AsyncIterator[None]:
        lock, users = self._locks.get(scope, (asyncio.Lock(), 0))
        self._locks[scope] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[scope]
            if users <= 1:
                del self._locks[scope]
            else:
                self._locks[scope] = (lock, users - 1)

    @contextmanager
    def tracked(self) -> Iterator[None]:
        task = asyncio.current_task()
        if task is not None:
            self._inflight.add(task)
        try:
            yield
        finally:
            if task is not None:
                self._inflight.discard(task)

    async def drain(self, grace_s: float = DRAIN_S) -> None:
        """Wait until every listener that has started has finished (at most ``grace_s``)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace_s
        current = asyncio.current_task()
        while pending := {t for t in self._inflight if t is not current and not t.done()}:
            remaining = deadline - loop.time()
            if remaining <= 0:
                log.warning("Slack: %d handlers still running after %.0fs", len(pending), grace_s)
                return
            await asyncio.wait(pending, timeout=remaining)


class Listeners(Protocol):
    listening: Listening


Handler = TypeVar("Handler", bound=Callable[..., Awaitable[None]])


def listener(handler: Handler) -> Handler:
    """A method of :class:`Listeners` as a Bolt listener: tracked while it runs, and an
    interaction (a command, a click, a shortcut: Bolt passes it ``ack``) acknowledged first,
    as Slack wants within 3 s; the work comes after. Bolt passes the arguments the method
    names (it reads them through ``functools.wraps``)."""

    @functools.wraps(handler)
    async def run(self: Listeners, *args: Any, **kwargs: Any) -> None:
        with self.listening.tracked():
            if (ack := kwargs.get("ack")) is not None:
                await ack()
            await handler(self, *args, **kwargs)

    return cast(Handler, run)
