"""Opening the store: a real Redis at REDIS_URL, or the embedded store in the data directory.

Both are a Redis server reached through the same client code: the embedded store is a
Valkey server that memorybot runs on a Unix socket (:mod:`memory_core.store.embedded`).
Here too: making a forget durable and erased from the files (``Store.persist``), and
``memorybot store compact`` (:func:`compact`)."""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Final

from redis._parsers.commands import AsyncCommandsParser
from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.exceptions import RedisError, ResponseError

from config.redis_url import mask_url, split_userinfo, url_passwords
from config.settings import StoreSettings
from memory_core.errors import StoreError, StoreUnavailable
from memory_core.store.embedded import (
    AOF_FILENAME,
    DUMP_FILENAME,
    WAITAOF_TIMEOUT_MS,
    EmbeddedServer,
    ServerFiles,
)
from memory_core.store.erasure_record import owe_erasure, owed_erasure, settle_erasure
from memory_core.store.keys import KeySchema
from memory_core.store.lane import FastLane
from memory_core.store.packing import packed_connection_class
from memory_core.store.redis_errors import redis_errors_translated
from memory_core.store.scripts import load_scripts
from memory_core.store.server_info import ServerInfo

log = logging.getLogger(__name__)

# Characters that end a URL's host part: written as is in a password, they make a URL
# parser read part of the password as the host or the port.
_HOST_ENDERS = "/?#"
_MIN_SCRUBBED = 4  # shorter passwords cannot be told apart from the words of a message
# How long a forget waits for the rewrite that takes its text out of the embedded store's
# files (a rewrite writes all of memory: seconds for hundreds of MB), and compact for each.
ERASE_TIMEOUT_S: Final = 300.0
COMPACT_TIMEOUT_S: Final = 3600.0
ERASURE_DOC: Final = "docs/erasure.md"
COMPACT_COMMAND: Final = "memorybot store compact"

Ask = Callable[..., Awaitable[Any]]  # runs one command on one server: execute_command


@dataclass(frozen=True)
class Rewrite:
    """A background rewrite of a server's files, and the fields of ``INFO persistence`` that
    follow it. ``count`` (Redis 7+, Valkey) goes up when one starts, success or not."""

    what: str
    command: tuple[str, ...]
    count: str
    running: str
    scheduled: str  # "" when INFO has no such field
    status: str


AOF_REWRITE: Final = Rewrite(
    "append-only file rewrite",
    ("BGREWRITEAOF",),
    "aof_rewrites",
    "aof_rewrite_in_progress",
    "aof_rewrite_scheduled",
    "aof_last_bgrewrite_status",
)
RDB_SNAPSHOT: Final = Rewrite(
    "RDB snapshot",
    ("BGSAVE", "SCHEDULE"),  # SCHEDULE: after a rewrite that runs, instead of an error
    "rdb_saves",
    "rdb_bgsave_in_progress",
    "",
    "rdb_last_bgsave_status",
)


async def rewrite(ask: Ask, kind: Rewrite, *, timeout_s: float) -> float | None:
    """Have the server run ``kind``, and return once one that STARTED AFTER this call has
    completed successfully (the seconds it took); a StoreError when it failed or took longer
    than ``timeout_s``. Concurrent callers, of any process, share one: a rewrite already
    asked for (scheduled) is not asked for again, and one started after the call counts
    whoever asked. One running at the call may hold a copy of memory from before the
    caller's writes: its end is waited for, then another asked for (Valkey refuses
    BGREWRITEAOF while one runs, it does not schedule it). None: a server that does not count
    its rewrites (before Redis 7) was asked, and cannot be waited for."""
    loop = asyncio.get_running_loop()
    began = loop.time()
    info = await ask("INFO", "persistence")
    if kind.count not in info:
        await _ask_for(ask, kind)
        return None
    target = int(info[kind.count]) + 1  # the next to start: after whatever came before the call
    asked, pause = False, 0.002
    while True:
        started, running = int(info[kind.count]), bool(info.get(kind.running))
        if started > target or (started == target and not running):
            # The last to end started at or after ``target``: it is #started, or #started-1
            # when #started runs (one at a time).
            if info.get(kind.status) == "ok":
                return loop.time() - began
            if not running:
                raise StoreError(f"the server's {kind.what} failed ({kind.status}: err)")
        elif not (running or asked or (kind.scheduled and info.get(kind.scheduled))):
            asked = await _ask_for(ask, kind)
        if loop.time() - began > timeout_s:
            raise StoreError(f"the server's {kind.what} took over {timeout_s:.0f} s")
        await asyncio.sleep(pause)
        pause = min(pause * 2, 0.1)
        info = await ask("INFO", "persistence")


async def _ask_for(ask: Ask, kind: Rewrite) -> bool:
    """Ask for ``kind``; False when one already runs (it may have started before the caller's
    writes: asked again once it ends)."""
    try:
        await ask(*kind.command)
    except ResponseError as exc:
        if "in progress" in str(exc):
            return False
        raise StoreError(f"the server refused {' '.join(kind.command)} ({exc})") from exc
    return True


def _replaced_files(files: ServerFiles) -> list[str]:
    """The server's files in the append-only directory that its manifest no longer lists: a
    rewrite replaced them and the server deletes them (in a background thread, just after).
    Files of other names are not the server's to delete: not waited for."""
    try:
        manifest = (files.aof / f"{AOF_FILENAME}.manifest").read_text("utf-8")
        present = os.listdir(files.aof)
    except OSError:
        return []
    current = set()
    for line in manifest.splitlines():
        words = line.split()  # file appendonly.aof.2.base.rdb seq 2 type b (h: history)
        if words[:1] == ["file"] and words[-1] in ("b", "i"):
            current.add(words[1])
    ours = re.compile(rf"{re.escape(AOF_FILENAME)}\.\d+\.(base\.rdb|base\.aof|incr\.aof)")
    return sorted(n for n in present if n not in current and ours.fullmatch(n))


def _failure_reason(url: str, exc: BaseException) -> str:
    """Why connecting failed, with no password and no piece of one in it."""
    _, userinfo, _ = split_userinfo(url)
    if userinfo is not None and any(c in userinfo for c in _HOST_ENDERS):
        # The library read part of the password as the host or port, and would quote it.
        return (
            "the password holds '/', '?' or '#' as is, which ends the host part of a URL: "
            "percent-encode them (/ as %2F, ? as %3F, # as %23)"
        )
    reason = mask_url((str(exc) or type(exc).__name__).rstrip("."))
    for password in url_passwords(url):
        if len(password) >= _MIN_SCRUBBED:
            reason = reason.replace(password, "***")
    return reason


class _KnownCommands(AsyncCommandsParser):
    """redis-py's cluster client asks its default node for the command table (``COMMAND``)
    on every refresh of its view of the cluster, and the default node is the first primary
    of that view, up or not: once a command has failed on a lost shard that serves slot 0,
    every command, to every shard, fails until it is back. The table does not change while
    we run: asked once, at connection, and kept."""

    async def initialize(self, node: ClusterNode | None = None) -> None:
        if not self.commands:
            await super().initialize(node)


@dataclass
class _Erasure:
    """One rewrite of the embedded store's files, shared by the forgets that join it before it
    is asked for, each with its record of the rewrite being owed (being written to disk)."""

    records: list[asyncio.Future[str]] = field(default_factory=list)
    task: asyncio.Task[None] | None = None


@dataclass
class Store:
    client: Redis
    keys: KeySchema
    description: str  # safe to print: no secrets
    embedded: EmbeddedServer | None = None
    # Where the client connects (it may hold a password: never printed), for a helper
    # process of this one (the embedding worker) to connect to the same server.
    url: str = field(default="", repr=False)
    cluster: bool = False
    connect_timeout_s: float = 5.0
    # Storing a message's own connection to a single server (None: a cluster, TLS).
    lane: FastLane | None = None

    _next_erase: _Erasure | None = field(default=None, init=False, repr=False)
    _erase_lock: asyncio.Lock = field(default_factory=asyncio.Lock, init=False, repr=False)
    _erasing: set[asyncio.Task[None]] = field(default_factory=set, init=False, repr=False)

    @property
    def info(self) -> ServerInfo:
        """What the server says about itself (PING, version, memory)."""
        return ServerInfo(self.client)

    async def persist(self, *, erase: bool = False) -> None:
        """Make every change so far durable before the caller reports it done; with
        ``erase`` (a forget), also gone from every file of the data directory.

        The embedded server is asked to fsync its append-only file now (``WAITAOF``) rather
        than within the second ``appendfsync everysec`` allows. An external Redis does nothing
        here: its durability is its own configuration (``appendonly``/``appendfsync``,
        ``save``), which memorybot neither sets nor forces (``memorybot store compact`` and
        ``docs/erasure.md`` are for its files). Any store added later keeps this one meaning.

        ``erase``: the append-only file still holds a forgotten text (the write, the forget
        request quoting it), and so does its base (the RDB preamble of the last rewrite,
        LZF-compressed or not). So the server rewrites its files (``BGREWRITEAOF``) and this
        returns once a rewrite that started after the forget's writes has succeeded and the
        server has deleted the files it replaced (no history is kept: ``aof-disable-auto-gc
        no``); a ``valkey-dump.rdb`` someone made by hand (``SAVE``) is deleted too. Forgets
        arriving while one rewrite runs share the next one. A failed rewrite (a full disk) is
        a StoreError that says what to fix. Before any of it, the rewrite is recorded as owed
        in the data directory (``erase-owed``, fsync'ed), and the record goes once a rewrite
        that started after it has succeeded: after a crash, the next start finishes it
        (:meth:`finish_owed_erasure`). Covered: the files of the data directory as the
        file system shows them. Not covered, out of reach of a process: the operating
        system's page cache, the file system's journal and free blocks (a deleted file's
        bytes stay on the disk until they are overwritten; an SSD remaps them), snapshots of
        the file system and backups (``docs/erasure.md``).
        """
        if self.embedded is None:
            return
        if not erase:
            await self._fsync()
            return
        # Written in a thread (two fsyncs) while the caller joins the next rewrite at once, so
        # forgets at the same moment still share one.
        recorded = asyncio.ensure_future(asyncio.to_thread(owe_erasure, self.embedded.files))
        await self._join_erasure(recorded)

    async def finish_owed_erasure(self) -> None:
        """At start: finish a forget's rewrite of the files that a crash interrupted (the
        record of it is in the data directory), as :meth:`persist` does. One that fails does
        not stop the start: a warning says what to run, and the record stays."""
        assert self.embedded is not None
        files = self.embedded.files
        try:
            if await asyncio.to_thread(owed_erasure, files) is None:
                return
            await self._join_erasure()
        except StoreError as exc:
            todo = "" if COMPACT_COMMAND in str(exc) else f"; then run: {COMPACT_COMMAND}"
            log.warning(
                "the embedded store could not finish a forget's rewrite of its files that was "
                "still owed at start (%s stays; forgotten text may still be in %s): %s%s",
                files.erase_owed,
                files.aof,
                exc,
                todo,
            )
            return
        log.warning(  # a warning: it tells of a crash, and the default level shows it
            "the embedded store finished a forget's rewrite of its files that was still owed "
            "at start (%s: a crash interrupted it, or another memorybot process is at it): "
            "forgotten text is out of %s now",
            files.erase_owed,
            files.aof,
        )

    async def _join_erasure(self, recorded: asyncio.Future[str] | None = None) -> None:
        erasure = self._next_erase
        if erasure is None:  # the next rewrite to ask for: callers join until it is asked for
            erasure = self._next_erase = _Erasure()
            batch = erasure.task = asyncio.create_task(self._erase_batch(erasure))
            self._erasing.add(batch)
            batch.add_done_callback(self._erasing.discard)
            batch.add_done_callback(lambda done: done.cancelled() or done.exception())
        assert erasure.task is not None
        if recorded is not None:
            erasure.records.append(recorded)
            # Not recorded (a full disk): this forget fails before it erases; the others go on.
            await asyncio.shield(recorded)
        await asyncio.shield(erasure.task)  # a caller that gives up does not stop it for others

    async def _fsync(self) -> None:
        # WAITAOF waits for the writes of the connection it is sent on; this process's writes
        # went through other connections of the pool, so one write of its own on the same
        # connection comes first: the server applies commands in order, so once that write is
        # on disk, everything written before it is too.
        assert self.embedded is not None
        with redis_errors_translated():
            async with self.client.pipeline(transaction=False) as pipe:
                pipe.incr(self.keys.durability_mark)
                pipe.execute_command("WAITAOF", 1, 0, WAITAOF_TIMEOUT_MS)
                _, (local, _replicas) = await pipe.execute()
        if int(local) < 1:
            raise StoreError(
                f"the embedded store did not write the change to disk within "
                f"{WAITAOF_TIMEOUT_MS // 1000} s (is the disk full? see "
                f"{self.embedded.files.log})"
            )

    async def _erase_batch(self, erasure: _Erasure) -> None:
        async with self._erase_lock:  # one batch at a time; the next one gathers meanwhile
            if self._next_erase is erasure:
                self._next_erase = None  # closed: later callers' writes may follow its start
            # Its forgets' records on disk before the rewrite is asked for: it then starts
            # after them, and may remove the last of them once it has succeeded.
            await asyncio.gather(*erasure.records, return_exceptions=True)
            await self._erase()

    async def _erase(self) -> None:
        assert self.embedded is not None
        files = self.embedded.files
        # Read before the rewrite is asked for, so the rewrite starts after it was written;
        # one written later (a forget of now, here or in another process) is not ours to drop.
        owed = await asyncio.to_thread(owed_erasure, files)
        # Durable whatever becomes of the rewrite (WAITAOF), at the same time as the rewrite.
        for outcome in await asyncio.gather(
            self._fsync(), self._rewrite_files(files), return_exceptions=True
        ):
            if isinstance(outcome, BaseException):
                raise outcome
        dump = files.data_dir / DUMP_FILENAME
        if dump.exists():  # never read (the append-only file is the persistence)
            dump.unlink(missing_ok=True)
            log.warning("deleted %s, a snapshot made by hand that held forgotten text", dump)
        if owed is not None:
            await asyncio.to_thread(settle_erasure, files, owed)

    async def _rewrite_files(self, files: ServerFiles) -> None:
        """A rewrite that started after the forget's writes, done, and the files it replaced
        deleted; a StoreError that says what to fix."""
        try:
            with redis_errors_translated():
                await rewrite(self.client.execute_command, AOF_REWRITE, timeout_s=ERASE_TIMEOUT_S)
            deadline = asyncio.get_running_loop().time() + ERASE_TIMEOUT_S
            while left := _replaced_files(files):
                if asyncio.get_running_loop().time() > deadline:
                    raise StoreError(f"the server did not delete {', '.join(left)}")
                await asyncio.sleep(0.005)
        except StoreError as exc:
            raise StoreError(
                f"the forget is done in memory, but its text is still in the files of "
                f"{files.aof}: {exc}. Free disk space in {files.data_dir} (a full disk is the "
                f"usual cause; {files.log} says more), then run: memorybot store compact"
            ) from exc

    async def close(self) -> None:
        if self._erasing:  # forgets still being erased finish first
            await asyncio.gather(*self._erasing, return_exceptions=True)
        if self.lane is not None:
            await self.lane.close()
        await self.client.aclose()
        if self.embedded is not None:
            await self.embedded.close()


async def open_store(settings: StoreSettings, *, finish_erasure: bool = True) -> Store:
    """The store of ``settings``. The embedded one first finishes a forget's rewrite that a
    crash interrupted (``finish_erasure``: compact, which rewrites anyway, opts out)."""
    if settings.redis_url is None:
        store = await _open_embedded(settings)
        if finish_erasure:
            try:
                await store.finish_owed_erasure()
            except BaseException:
                await store.close()
                raise
        return store
    url = settings.redis_url.get_secret_value()
    client = await _connect(settings, url, cluster=settings.cluster)
    return Store(
        client=client,
        keys=KeySchema(settings.key_prefix),
        description=f"Redis at {mask_url(url)}",
        url=url,
        cluster=settings.cluster,
        connect_timeout_s=settings.connect_timeout_s,
        lane=_lane(settings, url, cluster=settings.cluster),
    )


def _lane(settings: StoreSettings, url: str, *, cluster: bool) -> FastLane | None:
    return FastLane.for_url(
        url,
        cluster=cluster,
        connect_timeout_s=settings.connect_timeout_s,
        timeout_s=_command_timeout_s(settings),
    )


def _command_timeout_s(settings: StoreSettings) -> float:
    return max(settings.connect_timeout_s, 10.0)


async def connect_client(settings: StoreSettings) -> Any:
    """A client for ``settings.redis_url`` (a server another process started, so never the
    embedded one's start-up), answering PING, with the scripts loaded."""
    if settings.redis_url is None:
        raise StoreUnavailable("connect_client needs a Redis URL")
    url = settings.redis_url.get_secret_value()
    return await _connect(settings, url, cluster=settings.cluster)


async def _open_embedded(settings: StoreSettings) -> Store:
    """The embedded Valkey server of the data directory (started, or joined when another
    memorybot process runs it)."""
    embedded = await EmbeddedServer.open(settings.data_dir)
    try:
        client = await _connect(settings, embedded.files.url, cluster=False, embedded=True)
    except BaseException:
        await embedded.close()
        raise
    return Store(
        client=client,
        keys=KeySchema(settings.key_prefix),
        description=embedded.describe(),
        embedded=embedded,
        url=embedded.files.url,
        connect_timeout_s=settings.connect_timeout_s,
        lane=_lane(settings, embedded.files.url, cluster=False),
    )


async def _connect(
    settings: StoreSettings, url: str, *, cluster: bool, embedded: bool = False
) -> Any:
    """A client for the Redis server at ``url``, answering PING, with the scripts loaded."""
    masked = mask_url(url)
    options: dict[str, Any] = {
        "decode_responses": True,
        # Lone surrogates (a JSON "\ud800" escape from a platform or a file) are not UTF-8:
        # stored as "?" rather than failing the write.
        "encoding_errors": "replace",
        "socket_connect_timeout": settings.connect_timeout_s,
        "socket_timeout": _command_timeout_s(settings),
    }
    client: Any = None
    try:
        if cluster:
            client = RedisCluster.from_url(url, max_connections=settings.max_connections, **options)
            client.commands_parser = _KnownCommands()
        else:
            # A blocking pool: under a burst (a rollover at high concurrency, a flood of
            # messages) a command waits for a connection rather than failing.
            pool = BlockingConnectionPool.from_url(
                url,
                max_connections=settings.max_connections,
                timeout=_command_timeout_s(settings),
                health_check_interval=30,
                **options,
                **packed_connection_class(url),
            )
            client = Redis(connection_pool=pool)
            client.auto_close_connection_pool = True  # aclose() closes the pool too
        await client.ping()
        await load_scripts(client)
    except (RedisError, OSError, ValueError, TypeError) as exc:  # TypeError: ?unknown=1
        if client is not None:
            await client.aclose()
        if embedded:
            raise StoreUnavailable(
                f"cannot reach the embedded Valkey server at {masked}: "
                f"{_failure_reason(url, exc)}. Run memorybot doctor; its log says more."
            ) from exc
        raise StoreUnavailable(
            f"cannot reach Redis at {masked} (REDIS_URL): {_failure_reason(url, exc)}. "
            "Start Redis, fix REDIS_URL, or unset it to use the embedded store."
        ) from exc
    return client


async def delete_matching(client: Any, pattern: str) -> int:
    """Delete every key matching ``pattern`` (SCAN, in batches): throwaway data only."""
    deleted = 0
    batch: list[str] = []
    async for key in client.scan_iter(match=pattern, count=1000):
        batch.append(key)
        if len(batch) >= 500:
            deleted += int(await client.delete(*batch))
            batch.clear()
    if batch:
        deleted += int(await client.delete(*batch))
    return deleted


async def compact(settings: StoreSettings) -> list[str]:
    """``memorybot store compact``: have the store's servers rewrite their files now, so what
    was deleted from memory leaves them too; one line per server says what was done.

    The embedded store: the rewrite a forget makes (``Store.persist(erase=True)``). A Redis at
    REDIS_URL, whose persistence memorybot does not manage: ``BGREWRITEAOF`` when it keeps an
    append-only file, ``BGSAVE`` when it takes RDB snapshots (``CONFIG GET appendonly`` /
    ``save``), on each node of a cluster; waited for. Its backups, replicas' files and older
    snapshots are its operator's: ``docs/erasure.md``."""
    store = await open_store(settings, finish_erasure=False)  # its own rewrite does that
    try:
        if store.embedded is not None:
            began = asyncio.get_running_loop().time()
            owed = await asyncio.to_thread(owed_erasure, store.embedded.files)
            await store.persist(erase=True)
            took = asyncio.get_running_loop().time() - began
            done = [
                f"embedded store: append-only file rewritten ({took:.1f} s); the files it "
                f"replaced in {store.embedded.files.aof} are deleted"
            ]
            if owed is not None:
                done.append("embedded store: the forget's rewrite that was pending is done")
            return done
        client: Any = store.client
        if isinstance(client, RedisCluster):
            return [
                await _compact(
                    f"node {node.host}:{node.port}",
                    functools.partial(client.execute_command, target_nodes=node),
                )
                for node in client.get_nodes()
            ]
        return [await _compact(store.description, client.execute_command)]
    finally:
        await store.close()


async def _compact(name: str, ask: Ask) -> str:
    with redis_errors_translated():
        try:
            config = {**await ask("CONFIG GET", "appendonly"), **await ask("CONFIG GET", "save")}
            gc = await ask("CONFIG GET", "aof-disable-auto-gc")
        except ResponseError as exc:
            raise StoreError(
                f"{name} refuses CONFIG GET ({exc}), so memorybot cannot tell how it persists; "
                f"a managed Redis rewrites and snapshots on its own schedule: see {ERASURE_DOC}"
            ) from exc
        done: list[str] = []
        for kind, on in (
            (AOF_REWRITE, config.get("appendonly") == "yes"),
            (RDB_SNAPSHOT, bool(str(config.get("save") or "").strip())),
        ):
            if not on:
                continue
            try:
                took = await rewrite(ask, kind, timeout_s=COMPACT_TIMEOUT_S)
            except StoreError as exc:
                raise StoreError(f"{name}: {exc}; see {ERASURE_DOC}") from exc
            if took is None:
                done.append(f"{kind.command[0]} asked for (INFO persistence says when it ends)")
            else:
                done.append(f"{kind.what} done ({kind.command[0]}, {took:.1f} s)")
    if not done:
        return f'{name}: no persistence (appendonly no, save ""): nothing on its disk to compact'
    if gc.get("aof-disable-auto-gc") == "yes":
        done.append("aof-disable-auto-gc is yes: it keeps the replaced files; delete them")
    return f"{name}: " + "; ".join(done)
