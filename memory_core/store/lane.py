"""The hot path's own connection: storing a message in one round trip that costs what the
round trip costs.

redis-py's asyncio client spends 60-70 µs of Python on each command it sends (the pool's
checkout and release, its health check, its reader's buffers and the command's own
bookkeeping): a third of what storing a message costs, and half of what a PING does. A
message is stored by one script call, so here is one connection that only sends commands
and reads their replies: packed and parsed by hiredis, in C; pipelined (commands go out as
they come, their replies come back in order, each to its caller); opened on first use and
again after it is lost.

It speaks to one server, over TCP (``redis://``) or a Unix socket (``unix://``), with the
URL's user, password and database. A TLS URL (``rediss://``) or a cluster keeps redis-py's
client (:meth:`FastLane.for_url` says None), which handles them.

Errors are redis-py's classes, so callers handle one family: a lost or refused connection is
a ``ConnectionError``, a command left unanswered for ``timeout_s`` a ``TimeoutError`` (the
connection is dropped: its other replies can no longer be matched), an error reply the class
redis-py gives it (``NoScriptError`` for ``NOSCRIPT``). Replies are the server's, without
redis-py's conversions per command (PING is "PONG", not True). Text comes back decoded as
UTF-8, bytes that are not UTF-8 replaced, as the main client's ``decode_responses`` and
``encoding_errors="replace"``; text sent that is not UTF-8 (a lone surrogate) is stored with
"?" in its place, as the main client stores it.

Why not redis-py's own pieces: its asyncio ``Connection`` is the per-command Python this
avoids, and it has no pipelining of independent callers on one connection. What the lane
borrows from redis-py is its URL parsing (public) and, to raise the same class for an error
reply, its parser's ``parse_error`` in the private ``redis._parsers`` (there since redis 5.0).
pyproject.toml pins redis and hiredis to the ranges this is tested on, and
tests/integration/test_lane.py checks, reply by reply, that the lane answers and fails as
redis-py's client does; a redis-py that moved the parser fails at import with what to do.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections import deque
from collections.abc import Sequence
from typing import Any

import hiredis
import redis
from redis.asyncio.connection import parse_url
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

try:  # redis-py's private parser: the exception its client raises for an error reply
    from redis._parsers.base import BaseParser
except ImportError as exc:  # (pyproject.toml pins the range where it is)
    raise ImportError(
        f"memory_core/store/lane.py needs redis-py's redis._parsers.base.BaseParser, which "
        f"redis {redis.__version__} does not have: install the range pyproject.toml pins "
        "(redis>=5.0,<9), or port lane.py's error replies to this release and run "
        "tests/integration/test_lane.py"
    ) from exc

# How often an open connection checks that its oldest command has been answered in time.
WATCH_EVERY_S = 1.0

# Waiting for a message's reply on the CPU (FastLane.call's ``spin``): at most this long,
# and only while the server's recent replies took less on average (a server on this
# machine, not one across a network).
SPIN_MAX_S = 0.0003
ROUND_TRIP_WEIGHT = 0.1  # of the newest reply in the moving average of reply times
# A slower reply counts as this much: one stall does not make a local server a remote one.
ROUND_TRIP_COUNTED_S = 2 * SPIN_MAX_S


def _packed(args: Any) -> bytes:
    try:
        packed: bytes = hiredis.pack_command(args)
    except UnicodeEncodeError:  # a lone surrogate: "?" for it, as redis-py's "replace"
        words: Any = tuple(a.encode("utf-8", "replace") if isinstance(a, str) else a for a in args)
        packed = hiredis.pack_command(words)
    return packed


class _Connection(asyncio.Protocol):
    """One connection: commands written as they come, replies handed out in order."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self.reader = hiredis.Reader(encoding="utf-8", errors="replace")
        self.waiting: deque[tuple[asyncio.Future[Any], float]] = deque()
        self.transport: asyncio.Transport | None = None
        self.lost = False
        self.why_lost: Exception = RedisConnectionError("the connection to Redis is closed")
        self.watch: asyncio.TimerHandle | None = None
        self.fd = -1
        self.round_trip_s = 0.0  # the moving average of its replies' times (0: none yet)
        self.caught_spinning = 0  # replies read while their caller waited on the CPU

    # -- asyncio.Protocol --------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        sock = transport.get_extra_info("socket")
        self.fd = sock.fileno() if sock is not None else -1
        self.watch = asyncio.get_running_loop().call_later(WATCH_EVERY_S, self._check)

    def data_received(self, data: bytes) -> None:
        self.reader.feed(data)
        now = time.monotonic()
        try:
            while (reply := self.reader.gets()) is not False:
                future, sent = self.waiting.popleft()
                took = min(now - sent, ROUND_TRIP_COUNTED_S)
                average = self.round_trip_s
                self.round_trip_s = (
                    average + ROUND_TRIP_WEIGHT * (took - average) if average else took
                )
                if future.done():  # its caller gave up (cancelled): the reply is dropped
                    continue
                if isinstance(reply, hiredis.ReplyError):
                    error = BaseParser.parse_error(str(reply))  # type: ignore[no-untyped-call]
                    future.set_exception(error)
                else:
                    future.set_result(reply)
        except (hiredis.ProtocolError, IndexError) as exc:  # not Redis, or out of step
            self._drop(RedisConnectionError(f"Redis sent what is not a reply: {exc}"))

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.lost:
            reason = f": {exc}" if exc else ""
            self._fail(RedisConnectionError(f"the connection to Redis was lost{reason}"))

    # -- use -------------------------------------------------------------------------
    def send(self, args: tuple[Any, ...]) -> asyncio.Future[Any]:
        if self.lost or self.transport is None:
            raise self.why_lost
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.waiting.append((future, time.monotonic()))
        self.transport.write(_packed(args))
        return future

    def spin(self, future: asyncio.Future[Any]) -> None:
        """Read the replies here, on this CPU and without the event loop, until ``future``
        has its own or SPIN_MAX_S has passed (it is then awaited as any other). Only when it
        is the one command in flight, written whole, to a server whose replies take less
        than that on average (see :meth:`FastLane.call`)."""
        transport = self.transport
        if (
            not 0 < self.round_trip_s < SPIN_MAX_S
            or self.fd < 0
            or len(self.waiting) != 1
            or transport is None
            or transport.get_write_buffer_size()
        ):
            return
        deadline = time.monotonic() + SPIN_MAX_S
        while True:  # (one read at least: a reply already there is taken however late)
            try:
                data = os.read(self.fd, 65536)
            except (BlockingIOError, InterruptedError):
                data = None
            except OSError:
                return  # (the transport's own read meets it, and says what it was)
            if data == b"":
                return  # the server closed the connection: likewise
            if data:
                self.data_received(data)
            if future.done() or time.monotonic() >= deadline:
                break
        if future.done():
            self.caught_spinning += 1

    def send_many(self, commands: Sequence[tuple[Any, ...]]) -> list[asyncio.Future[Any]]:
        """Several commands in one write (one round trip); their replies' futures, in order."""
        if self.lost or self.transport is None:
            raise self.why_lost
        loop, now = asyncio.get_running_loop(), time.monotonic()
        futures: list[asyncio.Future[Any]] = []
        for _ in commands:
            future: asyncio.Future[Any] = loop.create_future()
            self.waiting.append((future, now))
            futures.append(future)
        self.transport.write(b"".join(_packed(args) for args in commands))
        return futures

    def close(self) -> None:
        self._drop(RedisConnectionError("the connection to Redis is closed"))

    # -- failures ----------------------------------------------------------------------
    def _check(self) -> None:
        if self.lost:
            return
        if self.waiting and time.monotonic() - self.waiting[0][1] > self.timeout_s:
            self._drop(RedisTimeoutError(f"Redis did not answer within {self.timeout_s:g} s"))
            return
        self.watch = asyncio.get_running_loop().call_later(WATCH_EVERY_S, self._check)

    def _drop(self, why: Exception) -> None:
        self._fail(why)
        if self.transport is not None:
            self.transport.abort()

    def _fail(self, why: Exception) -> None:
        self.lost, self.why_lost = True, why
        if self.watch is not None:
            self.watch.cancel()
        while self.waiting:
            future, _ = self.waiting.popleft()
            if not future.done():
                future.set_exception(why)


class FastLane:
    """A pipelined connection to the server at a URL (see the module docstring)."""

    def __init__(self, url: str, *, connect_timeout_s: float, timeout_s: float) -> None:
        options = parse_url(url)
        self._path: str | None = options.get("path")
        self._host = str(options.get("host") or "localhost")
        self._port = int(options.get("port") or 6379)
        self._hello: list[tuple[Any, ...]] = []
        if options.get("password") is not None:
            user = options.get("username")
            self._hello.append(
                ("AUTH", user, options["password"]) if user else ("AUTH", options["password"])
            )
        if int(options.get("db") or 0):
            self._hello.append(("SELECT", int(options["db"])))
        self._connect_timeout_s = connect_timeout_s
        self._timeout_s = timeout_s
        self._conn: _Connection | None = None
        self._opening = asyncio.Lock()
        self._closed = False
        self.spins = _cores() > 1  # (FastLane.call's ``spin``)

    @classmethod
    def for_url(
        cls, url: str, *, cluster: bool, connect_timeout_s: float, timeout_s: float
    ) -> FastLane | None:
        """A lane to the server at ``url``; None for a cluster or TLS (redis-py's client)."""
        scheme = url.split("://", 1)[0].lower()
        if cluster or scheme not in ("redis", "unix"):
            return None
        return cls(url, connect_timeout_s=connect_timeout_s, timeout_s=timeout_s)

    @property
    def where(self) -> str:
        """Where it connects, with no secret in it."""
        return self._path or f"{self._host}:{self._port}"

    async def call(self, *args: Any, spin: bool = False) -> Any:
        """Send one command and return its reply (see the module docstring for errors).

        ``spin`` (storing a message): wait for the reply on this CPU rather than in the
        event loop, for 0.3 ms at most, when nothing else is in flight on the connection
        and the server's replies take less than that on average (it is on this machine).
        Sleeping until the reply wakes the process costs more than the round trip itself
        on a virtual machine (a message between cores each way), and the core left idle
        meanwhile goes to the background embedding, which evicts the bot's caches: `bench
        ingest` stores a message in 0.15-0.18 ms instead of 0.21-0.23 (docs/benchmarks.md).
        The loop is held that long at most; a process that may run on one core only never
        spins (it would only keep the server from answering)."""
        conn = self._conn
        if conn is None or conn.lost:
            conn = await self._open()
        future = conn.send(args)
        if spin and self.spins:
            conn.spin(future)
        return await future

    @property
    def caught_spinning(self) -> int:
        """Replies read while their caller waited on the CPU (on this connection)."""
        return self._conn.caught_spinning if self._conn is not None else 0

    async def batch(self, commands: Sequence[tuple[Any, ...]]) -> list[Any]:
        """Several commands sent together and their replies in order: one round trip, as a
        redis-py pipeline without a transaction (an error reply raises, once every reply
        is in, as the pipeline's ``execute`` does)."""
        conn = self._conn
        if conn is None or conn.lost:
            conn = await self._open()
        replies = await asyncio.gather(*conn.send_many(commands), return_exceptions=True)
        for reply in replies:
            if isinstance(reply, BaseException):
                raise reply
        return replies

    async def close(self) -> None:
        self._closed = True
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    async def _open(self) -> _Connection:
        async with self._opening:  # callers arriving meanwhile share one connection
            if self._conn is not None and not self._conn.lost:
                return self._conn
            if self._closed:
                raise RedisConnectionError("the store is closed")
            loop = asyncio.get_running_loop()
            conn = _Connection(self._timeout_s)
            try:
                async with asyncio.timeout(self._connect_timeout_s):
                    if self._path is not None:
                        await loop.create_unix_connection(lambda: conn, self._path)
                    else:
                        await loop.create_connection(lambda: conn, self._host, self._port)
                    for command in self._hello:
                        await conn.send(command)
            except TimeoutError as exc:
                conn.close()
                raise RedisConnectionError(
                    f"could not connect to {self.where} within {self._connect_timeout_s:g} s"
                ) from exc
            except OSError as exc:
                conn.close()
                raise RedisConnectionError(f"could not connect to {self.where}: {exc}") from exc
            except BaseException:
                conn.close()
                raise
            self._conn = conn
            return conn


def _cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # (not Linux)
        return os.cpu_count() or 1
