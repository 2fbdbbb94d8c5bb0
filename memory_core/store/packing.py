"""Commands packed by hiredis: redis-py's asyncio connection packs each command in Python
(its synchronous one uses hiredis), which cost an ingest's 29-argument script call 30-50 µs
of its ~0.4 ms. The same bytes on the wire, packed in C."""

from __future__ import annotations

from typing import Any

import hiredis
from redis.asyncio.connection import Connection, UnixDomainSocketConnection


def _pack(conn: Any, args: tuple[Any, ...]) -> list[bytes]:
    # As redis-py: a first argument with a space is several words ("SCRIPT LOAD").
    first = args[0]
    if (isinstance(first, str) and " " in first) or (isinstance(first, bytes) and b" " in first):
        args = tuple(first.split()) + args[1:]
    encode = conn.encoder.encode  # (its errors for None, bools and the like; "replace")
    words: Any = tuple(bytes(a) if isinstance(a, memoryview) else a for a in map(encode, args))
    return [hiredis.pack_command(words)]


class PackedConnection(Connection):
    def pack_command(self, *args: Any) -> list[bytes]:
        return _pack(self, args)


class PackedUnixConnection(UnixDomainSocketConnection):
    def pack_command(self, *args: Any) -> list[bytes]:
        return _pack(self, args)


def packed_connection_class(url: str) -> dict[str, Any]:
    """The pool's ``connection_class`` for ``url`` (TLS keeps redis-py's own)."""
    scheme = url.split("://", 1)[0].lower()
    if scheme == "redis":
        return {"connection_class": PackedConnection}
    if scheme == "unix":
        return {"connection_class": PackedUnixConnection}
    return {}
