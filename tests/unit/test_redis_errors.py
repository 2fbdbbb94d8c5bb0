"""Redis errors become memorybot's at the store boundary, whatever shape the call has."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError

from memory_core.errors import StoreError, StoreUnavailable
from memory_core.store.redis_errors import redis_errors_translated, translates_redis_errors


@translates_redis_errors
class _Unreachable:
    async def read(self) -> str:
        raise RedisConnectionError("Error 111 connecting to 127.0.0.1:1")

    async def refused(self) -> str:
        raise ResponseError("WRONGTYPE Operation against a key holding the wrong kind of value")

    async def batches(self) -> AsyncIterator[list[str]]:
        yield ["first"]
        raise RedisConnectionError("Connection closed by server")


async def test_a_coroutine_method_raises_store_errors() -> None:
    with pytest.raises(StoreUnavailable, match="unreachable") as info:
        await _Unreachable().read()
    assert isinstance(info.value.__cause__, RedisConnectionError)
    with pytest.raises(StoreError, match="refused a command") as refused:
        await _Unreachable().refused()
    assert not isinstance(refused.value, StoreUnavailable)


async def test_an_async_generator_raises_store_errors_after_what_it_yielded() -> None:
    seen: list[list[str]] = []

    async def read_all() -> None:
        async for batch in _Unreachable().batches():
            seen.append(batch)

    with pytest.raises(StoreUnavailable) as info:
        await read_all()
    assert seen == [["first"]]
    assert isinstance(info.value.__cause__, RedisConnectionError)


async def test_a_raw_client_call_inside_the_block_raises_store_errors() -> None:
    async def raw_info() -> None:
        raise OSError(111, "Connection refused")

    with pytest.raises(StoreUnavailable), redis_errors_translated():
        await raw_info()


def test_other_errors_pass_through() -> None:
    with pytest.raises(KeyError), redis_errors_translated():
        raise KeyError("not a store error")
