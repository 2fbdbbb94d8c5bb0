"""Redis errors become memorybot's, once, at the store boundary.

The classes that talk to Redis (the repo, the platform state, the recall index) are
decorated with :func:`translates_redis_errors`: every coroutine method (and async generator,
such as the fleet queue's scan of every scope) raises
:class:`~memory_core.errors.StoreUnavailable` when Redis cannot be reached and
:class:`~memory_core.errors.StoreError` when it refuses a command, so callers catch one
tree (``StoreError``) instead of redis-py's beside ours. The few raw client calls outside
those classes (the dashboard's server figures) run inside :func:`redis_errors_translated`.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any, TypeVar

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from memory_core.errors import StoreError, StoreUnavailable

T = TypeVar("T")


def translated(exc: BaseException) -> StoreError | None:
    """Our error for a Redis (or socket) error, or None for anything else."""
    if isinstance(exc, RedisConnectionError | RedisTimeoutError | OSError):
        return StoreUnavailable(f"Redis is unreachable: {exc}")
    if isinstance(exc, RedisError):
        return StoreError(f"Redis refused a command: {exc}")
    return None


@contextlib.contextmanager
def redis_errors_translated() -> Iterator[None]:
    """Raise our error, from the Redis one, for whatever Redis raises inside the block."""
    try:
        yield
    except (RedisError, OSError) as exc:
        ours = translated(exc)
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
