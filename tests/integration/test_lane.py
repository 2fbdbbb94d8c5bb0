"""The hot path's own connection (memory_core/store/lane.py) against a real Redis: the same
replies as the main client, pipelined callers each get their own, errors of the same
classes, the URL's password and database, and a server that restarts, stalls or is not there.
"""

from __future__ import annotations

import asyncio
import select
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
import redis
from redis.asyncio import Redis
from redis.exceptions import (
    AuthenticationError,
    NoScriptError,
    RedisError,
    ResponseError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from memory_core.bootstrap import build_core
from memory_core.models import IncomingMessage
from memory_core.store import lane as lane_module
from memory_core.store.lane import FastLane
from memorybot_testkit.redis_servers import LocalRedis, free_port
from tests.helpers import make_settings


def make_lane(url: str, *, timeout_s: float = 10.0) -> FastLane:
    return FastLane(url, connect_timeout_s=2.0, timeout_s=timeout_s)


@pytest.fixture
async def lane(clean_redis: str) -> AsyncIterator[FastLane]:
    made = make_lane(clean_redis)
    yield made
    await made.close()


@pytest.fixture
async def client(clean_redis: str) -> AsyncIterator[Redis]:
    made = Redis.from_url(clean_redis, decode_responses=True, encoding_errors="replace")
    yield made
    await made.aclose()


@pytest.fixture
def private_server() -> Iterator[LocalRedis]:
    server = LocalRedis(free_port())
    setup = redis.Redis.from_url(server.url)
    setup.config_set("requirepass", "s3cret/pw")  # once it answers (its start pings)
    setup.close()
    yield server
    server.stop()


async def test_replies_are_the_main_clients(lane: FastLane, client: Redis) -> None:
    await client.execute_command("SET", "bad", b"caf\xe9 \xff")  # not UTF-8
    await lane.call("RPUSH", "list", "日本語 😀", 7, "caf\udce9")  # a lone surrogate
    for command in (
        ("GET", "bad"),
        ("GET", "missing"),
        ("LRANGE", "list", 0, -1),
        ("LLEN", "list"),
        ("EVAL", "return {1, 'two', {3, false}, redis.status_reply('OK')}", 0),
        ("ECHO", "ünïcode"),
    ):
        assert await lane.call(*command) == await client.execute_command(*command), command
    assert await lane.call("LINDEX", "list", 2) == "caf?"  # stored as the main client does
    # The server's reply as it is: none of redis-py's conversions per command.
    assert await lane.call("PING") == "PONG"


async def test_pipelined_callers_each_get_their_own_reply(lane: FastLane) -> None:
    replies = await asyncio.gather(*(lane.call("ECHO", f"n{i}") for i in range(500)))
    assert replies == [f"n{i}" for i in range(500)]


async def test_error_replies_are_redis_pys_classes_and_the_lane_goes_on(
    lane: FastLane, client: Redis
) -> None:
    with pytest.raises(NoScriptError):
        await lane.call("EVALSHA", "0" * 40, 0)
    await client.set("text", "x")
    with pytest.raises(ResponseError, match="WRONGTYPE"):
        await lane.call("LPUSH", "text", "y")
    assert await lane.call("GET", "text") == "x"


def _error_replies() -> list[str]:
    """An error reply for every code redis-py's parser gives a class of its own (its table,
    so a code added in a release is covered at once), and two it does not."""
    replies = ["ERR unknown command 'NOPE'", "MADEUP an error code nobody knows"]
    for code, kind in lane_module.BaseParser.EXCEPTION_CLASSES.items():
        if isinstance(kind, dict):
            replies.extend(f"{code} {message}" for message in kind)
        else:  # (a redirection names the slot and the node)
            message = "3999 127.0.0.1:7001" if code in ("ASK", "MOVED") else "it went wrong"
            replies.append(f"{code} {message}")
    return replies


async def test_every_error_reply_raises_what_redis_pys_client_raises(
    lane: FastLane, client: Redis
) -> None:
    """What the lane borrows from redis-py's private ``redis._parsers`` (pyproject.toml pins
    the range): for each error reply, the class and the message redis-py's own client raises
    (a script sends them, so that one server can). A redis-py without that parser fails at
    the import of memory_core.store.lane, saying what to do."""
    for reply in _error_replies():
        command = ("EVAL", "return redis.error_reply(ARGV[1])", 0, reply)
        with pytest.raises(RedisError) as by_redis_py:
            await client.execute_command(*command)
        with pytest.raises(RedisError) as by_lane:
            await lane.call(*command)
        assert type(by_lane.value) is type(by_redis_py.value), reply
        assert str(by_lane.value) == str(by_redis_py.value), reply
    assert await lane.call("ECHO", "still in step") == "still in step"


def test_a_redis_py_without_the_private_parser_is_refused_saying_why() -> None:
    """If a redis-py release moves ``redis._parsers`` (pyproject.toml's pin was widened, or
    overridden), the store does not half work: importing the lane fails, naming what is
    missing, the installed release and the way out."""
    hide = (  # redis-py loaded whole, then the class taken away, as a release that moved it
        "import redis.asyncio, redis._parsers.base as parsers; del parsers.BaseParser; "
        "import memory_core.store.lane"
    )
    run = subprocess.run([sys.executable, "-c", hide], capture_output=True, text=True, timeout=60)
    assert run.returncode != 0
    assert "needs redis-py's redis._parsers.base.BaseParser" in run.stderr
    assert f"redis {redis.__version__} does not have" in run.stderr
    assert "redis>=5.0,<9" in run.stderr and "tests/integration/test_lane.py" in run.stderr


async def test_a_caller_that_gives_up_does_not_put_the_replies_out_of_step(
    lane: FastLane,
) -> None:
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(lane.call("BLPOP", "never", 0.3), 0.05)
    # The blocked command's reply (nil, after 0.3 s) arrives first and is dropped.
    assert await lane.call("ECHO", "after") == "after"


async def test_password_and_database_from_the_url(private_server: LocalRedis) -> None:
    url = f"redis://:s3cret%2Fpw@127.0.0.1:{private_server.port}/3"
    lane = make_lane(url)
    try:
        await lane.call("SET", "where", "db3")
    finally:
        await lane.close()
    check = redis.Redis.from_url(url, decode_responses=True)
    try:
        assert check.get("where") == "db3"
        check.select(0)
        assert check.get("where") is None
    finally:
        check.close()


async def test_a_wrong_password_is_refused_without_quoting_it(private_server: LocalRedis) -> None:
    lane = make_lane(f"redis://:wrong-one@127.0.0.1:{private_server.port}/0")
    try:
        with pytest.raises(AuthenticationError) as caught:
            await lane.call("PING")
        assert "wrong-one" not in str(caught.value)
        assert isinstance(caught.value, RedisConnectionError)  # unreachable, to its callers
    finally:
        await lane.close()


async def test_nothing_listening_is_a_connection_error() -> None:
    port = free_port()
    lane = make_lane(f"redis://127.0.0.1:{port}/0")
    try:
        with pytest.raises(RedisConnectionError, match=f"127.0.0.1:{port}"):
            await lane.call("PING")
    finally:
        await lane.close()


async def test_a_restarted_server_is_reconnected_to() -> None:
    server = LocalRedis(free_port())
    lane = make_lane(server.url)
    try:
        assert await lane.call("PING") == "PONG"
        assert server.proc is not None
        server.proc.terminate()
        server.proc.wait(10)
        with pytest.raises(RedisConnectionError):
            await lane.call("PING")
        server.start()
        assert await lane.call("PING") == "PONG"
    finally:
        await lane.close()
        server.stop()


async def test_a_server_that_stops_answering_times_out_and_is_left(
    monkeypatch: pytest.MonkeyPatch, lane: FastLane
) -> None:
    """A server that takes the command and never answers (a network that drops the replies):
    the callers get a TimeoutError after ``timeout_s`` and the connection is dropped, so the
    next call opens a new one."""
    monkeypatch.setattr(lane_module, "WATCH_EVERY_S", 0.05)
    received: list[bytes] = []

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        received.append(await reader.read(1000))
        await reader.read()  # until the client leaves
        writer.close()

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    stalled = make_lane(f"redis://127.0.0.1:{port}/0", timeout_s=0.3)
    try:
        started = asyncio.get_running_loop().time()
        with pytest.raises(RedisTimeoutError, match=r"0\.3 s"):
            await stalled.call("PING")
        assert 0.3 <= asyncio.get_running_loop().time() - started < 5
        assert received == [b"*1\r\n$4\r\nPING\r\n"]
        with pytest.raises(RedisTimeoutError):
            await stalled.call("PING")  # on a new connection: the server took it too
        assert len(received) == 2
    finally:
        await stalled.close()
        server.close()
        await server.wait_closed()
    assert await lane.call("PING") == "PONG"  # (the fixture's lane, untouched)


def test_tls_and_clusters_keep_redis_pys_client() -> None:
    options = {"connect_timeout_s": 1.0, "timeout_s": 1.0}
    assert FastLane.for_url("redis://127.0.0.1:6379/0", cluster=False, **options)
    assert FastLane.for_url("unix:///tmp/valkey.sock", cluster=False, **options)
    assert FastLane.for_url("rediss://127.0.0.1:6380/0", cluster=False, **options) is None
    assert FastLane.for_url("redis://127.0.0.1:7000/0", cluster=True, **options) is None


async def test_the_bot_stores_messages_by_its_lane(clean_redis: str) -> None:
    """Through the core, as the front doors store: on one server the message goes by the
    lane, and the main client's reads see it at once."""
    core = await build_core(make_settings(redis_url=clean_redis))
    lane = core.store.lane
    assert lane is not None and core.repo.lane is lane
    sent: list[tuple[str, bool]] = []
    call = lane.call

    async def spied(*args: object, spin: bool = False) -> object:
        sent.append((str(args[0]), spin))
        return await call(*args, spin=spin)

    lane.call = spied  # type: ignore[method-assign]
    try:
        result = await core.intake.accept(
            IncomingMessage(scope="console:lane", text="stored by the lane", author="ann")
        )
        assert result.stored
        assert sent == [("EVALSHA", True)]  # (waiting for its reply on the CPU: below)
        assert [e.text for e in await core.repo.reads.recent("console:lane", 5)] == [
            "stored by the lane"
        ]
    finally:
        await core.discard()


async def test_a_batch_is_one_write_with_replies_in_order(lane: FastLane, client: Redis) -> None:
    """Several commands in one write; an error reply among them raises, once every reply is
    in, and the lane goes on in step."""
    await client.rpush("list", "a", "b")
    assert await lane.batch([("LLEN", "list"), ("ECHO", "x"), ("LINDEX", "list", 1)]) == [
        2,
        "x",
        "b",
    ]
    with pytest.raises(ResponseError):
        await lane.batch([("ECHO", "before"), ("INCR", "list"), ("ECHO", "after")])
    assert await lane.batch([("ECHO", "next")]) == ["next"]


async def test_a_replys_reads_by_the_lane_are_what_redis_py_reads(clean_redis: str) -> None:
    """The prompt's reads go by the lane on one server: the same snapshot as redis-py's
    pipeline reads, for a thread (its channel's settings, the channel around the moment it
    began) and the asker's own facts, and by one batch."""
    core = await build_core(make_settings(redis_url=clean_redis))
    try:
        repo = core.repo
        channel, started = "slack:T1:C1", 1_764_000_000.5
        thread = f"{channel}:{started}"
        person = "slack:T1:user:U1"
        for i, (scope, ts) in enumerate(
            [
                (channel, started - 5),
                (channel, started),
                (thread, started + 1),
                (channel, started + 2),
            ]
        ):
            await core.intake.accept(
                IncomingMessage(
                    scope=scope,
                    text=f"message {i} café",
                    author="ann",
                    author_id="U1",
                    ts=datetime.fromtimestamp(ts, UTC),
                )
            )
        await core.admin.configure(channel, timezone="Asia/Tokyo")
        await core.admin.remember_me(channel, "I like tea", user_id="U1", name="ann")
        sent: list[list[str]] = []
        batch = repo.lane.batch

        async def spied(commands: Any) -> Any:
            sent.append([c[0] for c in commands])
            return await batch(commands)

        repo.lane.batch = spied  # type: ignore[method-assign]
        by_lane = await repo.reads.prompt_snapshot(thread, recent=10, user=person)
        repo.lane = None
        by_redis_py = await repo.reads.prompt_snapshot(thread, recent=10, user=person)
        assert by_lane == by_redis_py
        assert len(sent) == 1 and "XRANGE" in sent[0] and "XREVRANGE" in sent[0]
        assert by_lane.state.tz == "Asia/Tokyo" and by_lane.user_facts
        assert [e.text for e in by_lane.before_thread] == ["message 0 café"]
        assert [e.text for e in by_lane.recent] == ["message 2 café"]
    finally:
        await core.discard()


# -- waiting for a message's reply on the CPU (FastLane.call's ``spin``) ------------------


async def _connected(lane: FastLane) -> lane_module._Connection:
    await lane.call("PING")
    conn = lane._conn
    assert conn is not None
    return conn


def _wait_readable(conn: lane_module._Connection) -> None:
    """Block (the loop too) until the reply is in the socket, unread by the loop."""
    readable, _, _ = select.select([conn.fd], [], [], 10)
    assert readable, "the server answered within 10 s"


async def test_a_spun_call_reads_its_reply_without_the_event_loop(lane: FastLane) -> None:
    """A reply already in the socket is read by the spin itself: the caller's future is
    done before the loop has run once more, with the server's reply."""
    conn = await _connected(lane)
    conn.round_trip_s = 0.0001  # a local server's (set: the machine's timing is not tested)
    future = conn.send(("ECHO", "read while spinning"))
    _wait_readable(conn)
    conn.spin(future)
    assert future.done() and future.result() == "read while spinning"
    assert lane.caught_spinning == 1
    asked: list[object] = []
    spin = conn.spin
    conn.spin = lambda future: asked.append(future) or spin(future)  # type: ignore[method-assign]
    assert await lane.call("ECHO", "and then as usual", spin=True) == "and then as usual"
    assert await lane.call("ECHO", "not spun") == "not spun"
    assert len(asked) == 1  # call() spins when asked to, and only then


async def test_no_spin_for_a_slow_server_nor_beside_other_commands(lane: FastLane) -> None:
    """A server whose replies take longer than a spin on average (across a network), or a
    command that is not alone in flight: the reply is left to the event loop."""
    conn = await _connected(lane)
    conn.round_trip_s = lane_module.SPIN_MAX_S * 2
    slow = conn.send(("ECHO", "slow"))
    _wait_readable(conn)
    conn.spin(slow)
    assert not slow.done() and lane.caught_spinning == 0
    assert await slow == "slow"
    conn.round_trip_s = 0.0001
    first, second = conn.send(("ECHO", "one")), conn.send(("ECHO", "two"))
    _wait_readable(conn)
    conn.spin(second)
    assert not first.done() and not second.done() and lane.caught_spinning == 0
    assert [await first, await second] == ["one", "two"]


async def test_the_round_trip_average_follows_the_replies(lane: FastLane) -> None:
    conn = await _connected(lane)
    assert 0 < conn.round_trip_s <= lane_module.ROUND_TRIP_COUNTED_S
    conn.round_trip_s = 1e-9
    await lane.call("PING")  # one more reply moves it a tenth of the way toward its time
    assert conn.round_trip_s > 1e-9


async def test_a_connection_closed_while_spinning_fails_the_call_clearly(
    lane: FastLane, clean_redis: str
) -> None:
    """The server drops the connection while a spun call waits: the spin stops at the
    connection's end and the call fails as any call on a lost connection does."""
    conn = await _connected(lane)
    me = await lane.call("CLIENT", "ID")
    conn.round_trip_s = 0.0001
    waiting = conn.send(("BLPOP", "nothing-comes", "10"))
    killer = redis.Redis.from_url(clean_redis)  # (blocking: the loop does not see it first)
    assert killer.client_kill_filter(_id=me) == 1
    killer.close()
    _wait_readable(conn)  # (the connection's end)
    conn.spin(waiting)
    assert not waiting.done()  # the spin read the end and left it to the loop
    with pytest.raises(RedisConnectionError, match="lost"):
        await waiting
    assert await lane.call("PING", spin=True) == "PONG"  # opened again on the next call


def test_a_process_on_one_core_never_spins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lane_module.os, "sched_getaffinity", lambda pid: {0})
    assert make_lane("redis://127.0.0.1:6379/0").spins is False
    monkeypatch.setattr(lane_module.os, "sched_getaffinity", lambda pid: {0, 1})
    assert make_lane("redis://127.0.0.1:6379/0").spins is True
