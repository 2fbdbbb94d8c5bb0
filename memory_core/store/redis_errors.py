"""Redis errors become memorybot's, once, at the store boundary.

One idiom, two shapes. The classes that talk to Redis (every class of ``memory_core/store``
with a client: the repo, the platform state, the fleet's queue, spend, rate and metrics
stores, recall's reads, the server's facts) are decorated with
:func:`translates_redis_errors`: every coroutine method (and async generator) raises
:class:`~memory_core.errors.StoreUnavailable` when Redis cannot be reached and
:class:`~memory_core.errors.StoreError` when it refuses a command, so callers catch one
tree (``StoreError``) instead of redis-py's beside ours. Inside ``memory_core/store`` only,
a function that is no such method, or a step that says what it was doing, runs its calls
inside :class:`redis_errors_translated`. Nothing outside ``memory_core/store`` imports redis
(``tests/unit/test_layout.py`` checks it), so nothing there catches a Redis error.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from types import TracebackType
from typing import Any, TypeVar

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from memory_core.errors import StoreError, StoreUnavailable

T = TypeVar("T")


def translated(exc: BaseException, doing: str = "") -> StoreError | None:
    """Our error for a Redis (or socket) error, or None for anything else. ``doing``: what
    failed, said first ("could not store the message: ...")."""
    if isinstance(exc, RedisConnectionError | RedisTimeoutError | OSError):
        return StoreUnavailable(f"{doing}: {exc}" if doing else f"Redis is unreachable: {exc}")
    if isinstance(exc, RedisError):
        return StoreError(f"{doing}: {exc}" if doing else f"Redis refused a command: {exc}")
    return None


class redis_errors_translated:
    """Raise our error, from the Redis one, for whatever Redis raises inside the block (a
    class, not a generator: it is on the path of every message stored)."""

    __slots__ = ("doing",)

    def __init__(self, doing: str = "") -> None:
        self.doing = doing

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc is None or not isinstance(exc, RedisError | OSError):
            return
        ours = translated(exc, self.doing)
        assert ours is not None
        raise ours from exc


def _translating(method: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    @functools.wraps(method)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        # As redis_errors_translated, without a context manager's cost on every call.
        try:
            return await method(*args, **kwargs)
        except (RedisError, OSError) as exc:
            ours = translated(exc)
            assert ours is not None
            raise ours from exc

    return wrapper


def _translating_items(
    method: Callable[..., AsyncIterator[Any]],
) -> Callable[..., AsyncIterator[Any]]:
    @functools.wraps(method)
    async def wrapper(*args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        with redis_errors_translated():
            async for item in method(*args, **kwargs):
                yield item

    return wrapper


def translates_redis_errors(cls: type[T]) -> type[T]:
    """Wrap every coroutine method and async generator of ``cls`` (see the module docstring)."""
    for name, member in list(vars(cls).items()):
        if inspect.iscoroutinefunction(member):
            setattr(cls, name, _translating(member))
        elif inspect.isasyncgenfunction(member):
            setattr(cls, name, _translating_items(member))
    return cls
