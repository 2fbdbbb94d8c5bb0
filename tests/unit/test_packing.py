"""hiredis packs the same bytes as redis-py's own Python packing, for every kind of
argument the store sends (a script's keys and arguments, numbers, text in any script,
bytes, a command of two words, text that is not UTF-8)."""

from __future__ import annotations

from typing import Any

import pytest
from redis.asyncio.connection import Connection
from redis.exceptions import DataError

from memory_core.store.packing import PackedConnection, packed_connection_class


def packed(cls: type[Connection], *args: Any) -> bytes:
    conn = cls(host="127.0.0.1", port=1, decode_responses=True, encoding_errors="replace")
    return b"".join(bytes(part) for part in conn.pack_command(*args))


@pytest.mark.parametrize(
    "args",
    [
        ("PING",),
        ("EVALSHA", "a" * 40, 2, "mb:{s}:log", "mb:{s}:state", 1_700_000_000_000, "", 20),
        ("SET", "key", "日本語 😀 café"),
        ("SET", b"raw", b"\x00\xff bytes"),
        ("SET", "f", 0.25),
        ("SET", "m", memoryview(b"view")),
        ("SCRIPT LOAD", "return 1"),
        (b"CONFIG GET", "maxmemory"),
        ("SET", "lone", "caf\udce9"),  # not UTF-8: "?" as redis-py's "replace" makes it
        ("SET", "long", "x" * 100_000),
    ],
)
def test_the_same_bytes_as_redis_py(args: tuple[Any, ...]) -> None:
    assert packed(PackedConnection, *args) == packed(Connection, *args)


def test_what_redis_py_refuses_is_refused() -> None:
    with pytest.raises(DataError):
        packed(PackedConnection, "SET", "k", None)


def test_tls_keeps_redis_pys_connection() -> None:
    assert packed_connection_class("redis://127.0.0.1:6379/0")
    assert packed_connection_class("unix:///tmp/valkey.sock")
    assert packed_connection_class("rediss://127.0.0.1:6380/0") == {}
