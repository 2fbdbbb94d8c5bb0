"""The embedded store: an in-process Redis for when ``REDIS_URL`` is not set.

memorybot keeps all of its memory in Redis. Asking every user to run a Redis server just to
try the bot is a lot, so without ``REDIS_URL`` the bot runs on fakeredis (a Redis
implementation in pure Python, with Lua through lupa) and this module makes that memory
survive a restart: it loads a JSON snapshot at start-up and writes it back periodically and
at shutdown.

Design notes, each one answering "why":

* **One process per data directory.** Two processes on one snapshot would each write their
  own view and the last writer would silently erase the other's memories, so ``open()`` takes
  an exclusive, non-blocking ``flock`` on ``memorybot-store.lock``. The error tells the user to
  set ``REDIS_URL`` when they want several processes to share memory.
* **Never lose the user's data.** A snapshot that cannot be read or parsed stops start-up with
  a ``StoreError`` naming the file; the file is neither moved nor overwritten, because starting
  empty and saving over it would destroy everything it holds. Writes go to a temporary file
  in the same directory, are fsync'ed, and replace the snapshot with ``os.replace``, so a crash
  or a full disk leaves the previous snapshot intact.
* **Portable, inspectable format.** fakeredis' ``DUMP`` is a Python pickle (unsafe to load and
  tied to fakeredis internals), so keys are enumerated with ``SCAN`` and read with the typed
  commands into a versioned JSON document that a person can read and ``jq`` can query.
  A key whose type we do not know makes saving fail loudly instead of being dropped.
* **Binary safety.** memorybot stores text, but a Lua script or a non-decoding client can
  store bytes that are not UTF-8. Each key is therefore written as plain JSON strings when all
  of its bytes (name, values, fields, members, group and consumer names) are valid UTF-8, and
  otherwise with ``"encoding": "base64"``, where every one of those strings is base64. Any
  value round-trips exactly; NUL characters are valid UTF-8 and stay readable text.
* **Cheap idle saves.** Autosave runs every few seconds; rewriting and fsync'ing an unchanged
  file each time would wear disks and wake laptops for nothing, so ``save()`` compares a digest
  of the content with the last one written and skips the write when nothing changed.

Snapshot format (version 1), one key per line so that the file diffs and greps well::

    {"format": "memorybot-embedded", "version": 1, "saved_at": "2025-01-31T12:00:00.000+00:00",
     "keys": [
      {"key": "k", "type": "string", "ttl_ms": null, "value": "text"},
      {"key": "h", "type": "hash", "ttl_ms": 5000, "value": {"field": "value"},
       "field_ttl_ms": {"field": 1200}},                      # only when a field has a TTL
      {"key": "l", "type": "list", "ttl_ms": null, "value": ["a", "b"]},
      {"key": "s", "type": "set", "ttl_ms": null, "value": ["a", "b"]},          # sorted
      {"key": "z", "type": "zset", "ttl_ms": null, "value": [["m", 1.5], ["n", "inf"]]},
      {"key": "x", "type": "stream", "ttl_ms": null, "value": {
         "entries": [{"id": "1700000000000-0", "fields": [["role", "user"], ["text", "hi"]]}],
         "last_id": "1700000000000-0",
         "groups": [{"name": "g", "last_delivered_id": "0-0", "entries_read": 0,
                     "consumers": ["c1"],
                     "pending": [{"id": "…", "consumer": "c1", "deliveries": 1, "idle_ms": 5}]}]}},
      {"key": "AP8=", "type": "string", "ttl_ms": null, "encoding": "base64", "value": "/w=="}
     ]}

``ttl_ms`` is the remaining time to live when the snapshot was written. Time keeps running
while memorybot is stopped (as with Redis' own persistence): on load the time elapsed since
``saved_at`` is subtracted (and added to pending entries' idle times), and keys or hash fields
whose TTL ran out are not restored. Zset
scores are JSON numbers, or the strings ``"inf"`` / ``"-inf"`` (JSON has no infinity). Stream
entries keep their exact IDs, their order and repeated field names; ``last_id`` restores the
stream's last generated ID (so new ``*`` IDs never go backwards) even when it is past the
last entry. Consumer groups keep their last delivered ID, entries-read counter, consumers and
pending entries (with delivery counts and idle times), including pending entries whose
message was deleted. Not reproduced: the statistics ``entries-added`` and
``max-deleted-entry-id`` of ``XINFO STREAM`` (and the ``lag`` derived from them), and consumers'
own idle times. Only database 0 is saved: memorybot never selects another one.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import fcntl
import hashlib
import itertools
import json
import logging
import os
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Annotated, Any, Final, Literal, Self, TypeVar, cast

import fakeredis
import redis.asyncio
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationError
from redis.asyncio.client import Pipeline
from redis.exceptions import RedisError

from memory_core.errors import StoreError

__all__ = ["LOCK_FILENAME", "SNAPSHOT_FILENAME", "EmbeddedStore"]

logger = logging.getLogger(__name__)

SNAPSHOT_FILENAME: Final = "memorybot-store.json"
LOCK_FILENAME: Final = "memorybot-store.lock"
SNAPSHOT_FORMAT: Final = "memorybot-embedded"
SNAPSHOT_VERSION: Final = 1

# Temporary files are hidden, carry the snapshot's name (so a user knows what they are) and
# end in ".tmp"; open() removes leftovers of a crash, which is safe because it holds the lock.
_TMP_PREFIX: Final = ".memorybot-store."
_TMP_SUFFIX: Final = ".tmp"

_SCAN_COUNT: Final = 1000
# Keys are read in transactions of this many keys: big enough to be fast, small enough that
# one transaction does not hold the (single-threaded) fake server for long.
_READ_CHUNK: Final = 256
# Elements per RPUSH/SADD/ZADD/HSET when restoring, to keep each command's size bounded.
_WRITE_CHUNK: Final = 1000
# A key that changes type or shape between the reads of one save is read again; this bounds
# the retries so that a pathological writer makes save() fail instead of loop forever.
_MAX_READ_ROUNDS: Final = 10
# Stream field used for the placeholder entries that restoring adds and deletes again.
_PLACEHOLDER_FIELD: Final = b"memorybot-placeholder"

_INF: Final = float("inf")

_KeyType = Literal["string", "hash", "list", "set", "zset", "stream"]
_KNOWN_TYPES: Final[frozenset[str]] = frozenset({"string", "hash", "list", "set", "zset", "stream"})


# --------------------------------------------------------------------------------------------
# In-memory image of the store, as read from fakeredis (bytes everywhere, absolute times).
#
# The digest that lets save() skip unchanged writes is the sha256 of repr() of these frozen
# dataclasses: repr of bytes, ints, floats and tuples is deterministic, and absolute expiry
# times (PEXPIRETIME) do not drift the way remaining TTLs do. The one drifting value, the
# delivery time of a pending stream entry, is excluded with ``repr=False``: it is approximate
# by nature, and a changed idle time alone is not worth a rewrite.
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _HashValue:
    fields: tuple[tuple[bytes, bytes], ...]  # in HGETALL order
    field_expire_at_ms: tuple[tuple[bytes, int], ...]  # only the fields that have a TTL


@dataclass(frozen=True)
class _ZSetValue:
    members: tuple[tuple[bytes, float], ...]  # in ZRANGE order


@dataclass(frozen=True)
class _PendingValue:
    id: str
    consumer: bytes
    deliveries: int
    delivered_at_ms: int = field(repr=False)


@dataclass(frozen=True)
class _GroupValue:
    name: bytes
    last_delivered_id: str
    entries_read: int | None
    consumers: tuple[bytes, ...]
    pending: tuple[_PendingValue, ...]


@dataclass(frozen=True)
class _StreamValue:
    entries: tuple[tuple[str, tuple[bytes, ...]], ...]  # (id, flat field/value list)
    last_id: str
    groups: tuple[_GroupValue, ...]


# string: bytes; list and set: tuple[bytes, ...] (sets sorted, so the digest is stable).
_Value = bytes | tuple[bytes, ...] | _HashValue | _ZSetValue | _StreamValue


@dataclass(frozen=True)
class _KeyImage:
    name: bytes
    type: _KeyType
    expire_at_ms: int | None
    value: _Value


# --------------------------------------------------------------------------------------------
# Snapshot schema, used to validate a file before restoring anything from it.
# --------------------------------------------------------------------------------------------

_StreamId = Annotated[str, Field(pattern=r"^[0-9]{1,20}-[0-9]{1,20}$")]
_Ttl = Annotated[int, Field(ge=1)]
_Score = float | Literal["inf", "-inf"]


class _Model(BaseModel):
    # strict: a snapshot is machine-written, so anything that needs coercion is corruption;
    # forbid: an unknown field means a format we do not understand, not something to ignore.
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


class _EntryBase(_Model):
    key: str
    ttl_ms: _Ttl | None
    encoding: Literal["utf-8", "base64"] = "utf-8"


class _StringEntry(_EntryBase):
    type: Literal["string"]
    value: str


class _HashEntry(_EntryBase):
    type: Literal["hash"]
    value: dict[str, str] = Field(min_length=1)
    field_ttl_ms: dict[str, _Ttl] = Field(default_factory=dict)


class _ListEntry(_EntryBase):
    type: Literal["list"]
    value: list[str] = Field(min_length=1)


class _SetEntry(_EntryBase):
    type: Literal["set"]
    value: list[str] = Field(min_length=1)


class _ZSetEntry(_EntryBase):
    type: Literal["zset"]
    value: list[tuple[str, _Score]] = Field(min_length=1)


class _PendingModel(_Model):
    id: _StreamId
    consumer: str
    deliveries: int = Field(ge=0)
    idle_ms: int = Field(ge=0)


class _GroupModel(_Model):
    name: str
    last_delivered_id: _StreamId
    entries_read: int | None
    consumers: list[str]
    pending: list[_PendingModel]


class _StreamEntryModel(_Model):
    id: _StreamId
    fields: list[tuple[str, str]] = Field(min_length=1)


class _StreamModel(_Model):
    entries: list[_StreamEntryModel]
    last_id: _StreamId
    groups: list[_GroupModel]


class _StreamEntry(_EntryBase):
    type: Literal["stream"]
    value: _StreamModel


_Entry = Annotated[
    _StringEntry | _HashEntry | _ListEntry | _SetEntry | _ZSetEntry | _StreamEntry,
    Field(discriminator="type"),
]


class _SnapshotModel(_Model):
    format: Literal["memorybot-embedded"]
    version: Literal[1]
    saved_at: AwareDatetime
    keys: list[_Entry]


class _CorruptSnapshot(Exception):
    """Internal: the snapshot's content is wrong; open() turns it into a StoreError."""


# --------------------------------------------------------------------------------------------
# Small helpers.
# --------------------------------------------------------------------------------------------


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _stream_id(text: str) -> tuple[int, int]:
    ms, _, seq = text.partition("-")
    return int(ms), int(seq)


def _text(value: Any) -> str:
    """Decode an ASCII reply (a type name, a stream ID) that redis-py left as bytes."""
    if isinstance(value, bytes):
        return value.decode("ascii")
    if isinstance(value, str):
        return value
    raise TypeError(f"expected a string reply, got {value!r}")


def _bytes(value: Any) -> bytes:
    if isinstance(value, bytes):
        return value
    raise TypeError(f"expected a bytes reply, got {value!r}")


_T = TypeVar("_T")


def _chunks(items: Sequence[_T], size: int) -> Iterable[Sequence[_T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _decode_utf8(data: bytes) -> str:
    return data.decode("utf-8")  # strict: raises on anything that is not valid UTF-8


def _encode_base64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _encode_utf8(text: str) -> bytes:
    return text.encode("utf-8")  # strict: a lone surrogate from "\\ud800" in JSON is corrupt


def _decode_base64(text: str) -> bytes:
    return base64.b64decode(text, validate=True)


def _format_validation_error(exc: ValidationError, limit: int = 3) -> str:
    parts = []
    for error in exc.errors()[:limit]:
        location = ".".join(str(part) for part in error["loc"])
        parts.append(f"{location}: {error['msg']}")
    more = exc.error_count() - limit
    if more > 0:
        parts.append(f"and {more} more problem(s)")
    return "; ".join(parts)


# --------------------------------------------------------------------------------------------
# Rendering the image as JSON.
# --------------------------------------------------------------------------------------------


def _score_json(score: float) -> float | str:
    """JSON has no infinity; ZADD accepts "inf" and "-inf", so those are written as strings."""
    if score == _INF:
        return "inf"
    if score == -_INF:
        return "-inf"
    return score


def _render_key(key: _KeyImage, codec: Callable[[bytes], str], now_ms: int) -> dict[str, Any]:
    ttl = None if key.expire_at_ms is None else max(1, key.expire_at_ms - now_ms)
    entry: dict[str, Any] = {"key": codec(key.name), "type": key.type, "ttl_ms": ttl}
    if codec is _encode_base64:
        entry["encoding"] = "base64"
    value = key.value
    if isinstance(value, bytes):
        entry["value"] = codec(value)
    elif isinstance(value, tuple):
        entry["value"] = [codec(item) for item in value]
    elif isinstance(value, _HashValue):
        entry["value"] = {codec(f): codec(v) for f, v in value.fields}
        if value.field_expire_at_ms:
            entry["field_ttl_ms"] = {
                codec(f): max(1, at - now_ms) for f, at in value.field_expire_at_ms
            }
    elif isinstance(value, _ZSetValue):
        entry["value"] = [[codec(member), _score_json(score)] for member, score in value.members]
    else:
        entry["value"] = {
            "entries": [
                {
                    "id": entry_id,
                    "fields": [
                        [codec(flat[i]), codec(flat[i + 1])] for i in range(0, len(flat), 2)
                    ],
                }
                for entry_id, flat in value.entries
            ],
            "last_id": value.last_id,
            "groups": [
                {
                    "name": codec(group.name),
                    "last_delivered_id": group.last_delivered_id,
                    "entries_read": group.entries_read,
                    "consumers": [codec(c) for c in group.consumers],
                    "pending": [
                        {
                            "id": p.id,
                            "consumer": codec(p.consumer),
                            "deliveries": p.deliveries,
                            "idle_ms": max(0, now_ms - p.delivered_at_ms),
                        }
                        for p in group.pending
                    ],
                }
                for group in value.groups
            ],
        }
    return entry


def _render_snapshot(keys: Sequence[_KeyImage], now_ms: int) -> str:
    lines = []
    for key in keys:
        try:
            entry = _render_key(key, _decode_utf8, now_ms)
        except UnicodeDecodeError:
            entry = _render_key(key, _encode_base64, now_ms)
        # allow_nan=False: the output must be standard JSON (infinities were mapped above).
        lines.append(json.dumps(entry, ensure_ascii=False, allow_nan=False))
    saved_at = datetime.fromtimestamp(now_ms / 1000, UTC).isoformat(timespec="milliseconds")
    header = (
        f'{{"format": {json.dumps(SNAPSHOT_FORMAT)}, "version": {SNAPSHOT_VERSION}, '
        f'"saved_at": {json.dumps(saved_at)}, "keys": ['
    )
    if not lines:
        return header + "]}\n"
    return header + "\n" + ",\n".join(lines) + "\n]}\n"


def _digest(keys: Sequence[_KeyImage]) -> str:
    return hashlib.sha256(repr(keys).encode("utf-8")).hexdigest()


# --------------------------------------------------------------------------------------------
# Parsing a snapshot file.
# --------------------------------------------------------------------------------------------


def _parse_snapshot(data: bytes) -> _SnapshotModel:
    """Validate a snapshot completely before anything is restored from it."""
    try:
        # Decode explicitly: json.loads(bytes) would also accept UTF-16 and UTF-32.
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _CorruptSnapshot(f"it is not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _CorruptSnapshot(
            f"it is not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})"
        ) from exc
    # Check the header first so that a file from elsewhere or from a newer memorybot gets a
    # message about that rather than a list of schema errors.
    if not isinstance(document, dict) or document.get("format") != SNAPSHOT_FORMAT:
        raise _CorruptSnapshot(f'it is not a memorybot snapshot (no "format": "{SNAPSHOT_FORMAT}")')
    version = document.get("version")
    if version != SNAPSHOT_VERSION:
        raise _CorruptSnapshot(
            f"it has format version {version!r} but this memorybot reads version "
            f"{SNAPSHOT_VERSION} (was it written by a newer memorybot?)"
        )
    try:
        return _SnapshotModel.model_validate_json(text)
    except ValidationError as exc:
        raise _CorruptSnapshot(_format_validation_error(exc)) from exc


# --------------------------------------------------------------------------------------------
# The lock.
# --------------------------------------------------------------------------------------------


def _acquire_lock(lock_path: Path, snapshot_path: Path) -> int:
    """Take the exclusive lock and return its file descriptor (closing it releases the lock)."""
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise StoreError(
            f"cannot create the embedded store lock file {lock_path}: {exc.strerror or exc}; "
            "check that the data directory is writable"
        ) from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError as exc:
        holder = _read_lock_holder(fd)
        os.close(fd)
        raise StoreError(
            f"another memorybot process{holder} is using the embedded store at {snapshot_path}; "
            "only one process can use it at a time. Stop the other process, point this one at "
            "another data directory, or set REDIS_URL so that several processes share one "
            "memory in Redis."
        ) from exc
    except OSError as exc:
        os.close(fd)
        raise StoreError(
            f"cannot lock the embedded store lock file {lock_path}: {exc.strerror or exc} "
            "(is the data directory on a file system without flock support?)"
        ) from exc
    # The PID is only informational (for the message above); the flock is what protects.
    with contextlib.suppress(OSError):
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
    return fd


def _read_lock_holder(fd: int) -> str:
    with contextlib.suppress(OSError, ValueError):
        pid = int(os.pread(fd, 32, 0).decode("ascii").strip())
        return f" (pid {pid})"
    return ""


def _release_lock(fd: int) -> None:
    with contextlib.suppress(OSError):
        fcntl.flock(fd, fcntl.LOCK_UN)
    with contextlib.suppress(OSError):
        os.close(fd)


# --------------------------------------------------------------------------------------------
# The store.
# --------------------------------------------------------------------------------------------


class EmbeddedStore:
    """An in-process Redis (fakeredis with Lua) persisted to ``<data_dir>/memorybot-store.json``.

    Create it with :meth:`open`, use :attr:`client` like any ``redis.asyncio.Redis`` with
    ``decode_responses=True``, and :meth:`close` it at shutdown. It also works as an async
    context manager.
    """

    client: redis.asyncio.Redis
    path: Path

    def __init__(self, path: Path, server: fakeredis.FakeServer, lock_fd: int) -> None:
        """Use :meth:`open`; this constructor neither locks nor loads anything."""
        self.path = path
        self.client = fakeredis.FakeAsyncRedis(
            server=server, decode_responses=True, encoding_errors="replace"
        )
        # A second client on the same server that reads and writes bytes: the snapshot must
        # handle values that are not UTF-8, which the decoding client cannot even read.
        self._raw: redis.asyncio.Redis = fakeredis.FakeAsyncRedis(server=server)
        # redis-py parses XRANGE entries into dicts, which would merge repeated field names;
        # keep the raw [id, [field, value, ...]] replies instead.
        self._raw.set_response_callback("XRANGE", lambda response, **_: response)
        self._lock_fd: int | None = lock_fd
        self._save_lock = asyncio.Lock()
        self._close_lock = asyncio.Lock()
        self._closed = False
        self._autosave_task: asyncio.Task[None] | None = None
        # The write of a cancelled save() keeps running in its thread; the next save waits
        # for it, so that an older snapshot can never replace a newer one.
        self._inflight_write: asyncio.Future[os.stat_result] | None = None
        # What is on disk: the digest of its content and the identity of the file, so that a
        # snapshot deleted or replaced behind our back is written again.
        self._saved_digest: str | None = None
        self._saved_file: tuple[int, int, int] | None = None

    # ---- lifecycle ---------------------------------------------------------------------------

    @classmethod
    async def open(cls, data_dir: Path) -> EmbeddedStore:
        """Lock ``data_dir``, load its snapshot if there is one, and return the open store.

        Raises :class:`StoreError` if another process holds the lock, or if the snapshot
        cannot be read or is corrupt (the file is then left exactly as it was).
        """
        data_dir = Path(data_dir)
        path = data_dir / SNAPSHOT_FILENAME
        try:
            # 0o700: the memory of private conversations should not be readable by others.
            data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(
                f"cannot create the data directory {data_dir}: {exc.strerror or exc}"
            ) from exc
        lock_fd = _acquire_lock(data_dir / LOCK_FILENAME, path)
        store = cls(path, fakeredis.FakeServer(), lock_fd)
        try:
            _remove_stale_temp_files(data_dir)
            await store._load()
        except BaseException:
            await store._release()
            raise
        return store

    async def close(self) -> None:
        """Stop autosave, save a last time, close the clients and release the lock.

        Idempotent. If the final save fails, everything is still released and the
        :class:`StoreError` is raised so that the caller knows recent changes were not saved.
        """
        async with self._close_lock:
            if self._closed:
                return
            try:
                await self._stop_autosave()
                await self.save()
            finally:
                await self._release()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    def start_autosave(self, interval_s: float) -> None:
        """Save every ``interval_s`` seconds in a background task until :meth:`close`.

        Calling it again replaces the running autosave with one at the new interval. Failures
        are logged and retried at the next tick: a full disk must not stop the bot.
        """
        if not interval_s > 0:
            raise ValueError(f"autosave interval must be a positive number, got {interval_s!r}")
        self._ensure_open()
        if self._autosave_task is not None:
            # Cancelling is safe even mid-save: the write itself is shielded (see save()).
            self._autosave_task.cancel()
        self._autosave_task = asyncio.get_running_loop().create_task(
            self._autosave_loop(interval_s), name=f"memorybot autosave {self.path}"
        )

    async def _autosave_loop(self, interval_s: float) -> None:
        while True:
            await asyncio.sleep(interval_s)
            try:
                await self.save()
            except StoreError as exc:
                logger.warning("embedded store autosave failed, will retry: %s", exc)
            except Exception:
                # A bug must not silently end autosave (the next crash would lose everything
                # since the last save), so log it loudly and keep going.
                logger.exception("embedded store autosave failed unexpectedly, will retry")

    async def _stop_autosave(self) -> None:
        task, self._autosave_task = self._autosave_task, None
        if task is None:
            return
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    async def _release(self) -> None:
        self._closed = True
        with contextlib.suppress(RedisError, OSError):
            await self.client.aclose()
        with contextlib.suppress(RedisError, OSError):
            await self._raw.aclose()
        if self._lock_fd is not None:
            _release_lock(self._lock_fd)
            self._lock_fd = None

    def _ensure_open(self) -> None:
        if self._closed:
            raise StoreError(f"the embedded store at {self.path} is closed")

    # ---- saving ------------------------------------------------------------------------------

    async def save(self) -> int:
        """Write the snapshot atomically and return the number of keys it holds.

        When nothing changed since the last save (and the file is still the one we wrote),
        the write is skipped and the same count is returned.
        """
        async with self._save_lock:
            self._ensure_open()
            await self._wait_inflight_write()
            try:
                keys = await self._read_keys()
            except RedisError as exc:
                raise StoreError(f"cannot read the embedded store to save it: {exc}") from exc
            digest = _digest(keys)
            if digest == self._saved_digest and self._file_identity() == self._saved_file:
                return len(keys)
            now_ms = _now_ms()
            write = asyncio.ensure_future(asyncio.to_thread(self._write_snapshot, keys, now_ms))
            self._inflight_write = write
            # shield: if save() is cancelled (autosave stopping), the thread still finishes
            # its write, and the next save() waits for it before writing its own. On
            # cancellation the digest is not recorded, so that next save writes again.
            try:
                stat = await asyncio.shield(write)
            except OSError as exc:
                self._inflight_write = None
                raise StoreError(
                    f"cannot write the embedded store snapshot {self.path}: "
                    f"{exc.strerror or exc}; the previous snapshot was left intact"
                ) from exc
            self._inflight_write = None
            self._saved_digest = digest
            self._saved_file = (stat.st_ino, stat.st_size, stat.st_mtime_ns)
            return len(keys)

    async def _wait_inflight_write(self) -> None:
        write, self._inflight_write = self._inflight_write, None
        if write is None:
            return
        await asyncio.wait([write])
        if not write.cancelled():
            # Mark a failure as retrieved so asyncio does not log "exception never retrieved":
            # its digest was never recorded, so this save simply writes again.
            write.exception()

    def _write_snapshot(self, keys: Sequence[_KeyImage], now_ms: int) -> os.stat_result:
        """Render and write the snapshot atomically (runs in a thread: it blocks on fsync)."""
        text = _render_snapshot(keys, now_ms)
        directory = self.path.parent
        fd, tmp_name = tempfile.mkstemp(prefix=_TMP_PREFIX, suffix=_TMP_SUFFIX, dir=directory)
        try:
            with os.fdopen(fd, "wb") as tmp:
                tmp.write(text.encode("utf-8"))
                tmp.flush()
                os.fsync(tmp.fileno())
                # The renamed file keeps this inode, size and mtime: no stat after the rename.
                stat = os.fstat(tmp.fileno())
            os.replace(tmp_name, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp_name)
            raise
        # Make the rename itself durable; without it a power cut can bring the old name back.
        with contextlib.suppress(OSError):
            dir_fd = os.open(directory, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
        return stat

    def _file_identity(self) -> tuple[int, int, int] | None:
        try:
            stat = self.path.stat()
        except OSError:
            return None
        return (stat.st_ino, stat.st_size, stat.st_mtime_ns)

    # ---- reading the store -------------------------------------------------------------------

    async def _read_keys(self) -> list[_KeyImage]:
        """Read every key of database 0 into an image, sorted by key name.

        Each key is read inside a MULTI/EXEC transaction together with its TYPE and expiry,
        so its value, type and TTL are consistent with each other; keys are read a chunk
        per transaction, so a chunk is a consistent point in time.
        """
        names: set[bytes] = set()
        cursor = 0
        while True:
            # SCAN, not KEYS: the same code must be polite on a big store. SCAN may return a
            # key twice; the set takes care of it.
            cursor, batch = await self._raw.scan(cursor, count=_SCAN_COUNT)
            names.update(_bytes(name) for name in batch)
            if int(cursor) == 0:
                break
        images: dict[bytes, _KeyImage] = {}
        todo = sorted(names)
        retry: dict[bytes, str] = {}
        for _ in range(_MAX_READ_ROUNDS):
            retry = {}
            for chunk in _chunks(todo, _READ_CHUNK):
                retry.update(await self._read_chunk(chunk, images))
            todo = sorted(retry)
            if not todo:
                break
        if retry:
            shown = "; ".join(f"{name!r}: {why}" for name, why in list(retry.items())[:3])
            raise StoreError(
                "cannot save the embedded store: some keys could not be read consistently "
                f"after {_MAX_READ_ROUNDS} attempts ({shown})"
            )
        return [images[name] for name in sorted(images)]

    async def _read_chunk(
        self, names: Sequence[bytes], images: dict[bytes, _KeyImage]
    ) -> dict[bytes, str]:
        """Read one chunk of keys into ``images``; return the keys to read again, and why.

        A key is read again when it changed type or shape between two transactions; a key
        that disappeared is simply not saved (it no longer exists).
        """
        types = [_text(t) for t in await self._transaction(lambda p: [p.type(n) for n in names])]
        for name, key_type in zip(names, types, strict=True):
            if key_type != "none" and key_type not in _KNOWN_TYPES:
                raise StoreError(
                    f"cannot save the embedded store: key {name!r} has type {key_type!r}, "
                    "which the snapshot format does not support (nothing was written)"
                )
        # The check above makes every remaining type one of _KNOWN_TYPES.
        live = [(n, cast(_KeyType, t)) for n, t in zip(names, types, strict=True) if t != "none"]
        retry: dict[bytes, str] = {}

        # Phase 1: simple types in full; for hashes and streams, their shape (field names,
        # group names), which the commands of phase 2 need as arguments.
        def phase1(pipe: Pipeline) -> None:
            for name, key_type in live:
                pipe.type(name)
                # redis-py annotates this key as str, but like every key it accepts bytes.
                pipe.pexpiretime(name)  # type: ignore[arg-type]
                if key_type == "string":
                    pipe.get(name)
                elif key_type == "list":
                    pipe.lrange(name, 0, -1)
                elif key_type == "set":
                    pipe.smembers(name)
                elif key_type == "zset":
                    pipe.zrange(name, 0, -1, withscores=True)
                elif key_type == "hash":
                    pipe.hkeys(name)
                else:
                    pipe.xinfo_groups(name)

        replies = iter(await self._transaction(phase1))
        shapes: list[tuple[bytes, _KeyType, Any]] = []
        for name, key_type in live:
            now_type, expire, reply = (next(replies) for _ in range(3))
            if _text(now_type) == "none":
                continue
            if _text(now_type) != key_type or isinstance(reply, Exception):
                retry[name] = f"type changed from {key_type} to {_text(now_type)}, or {reply}"
                continue
            if key_type in ("hash", "stream"):
                shapes.append((name, key_type, reply))
                continue
            images[name] = _KeyImage(
                name, key_type, _expire(expire), _simple_value(key_type, reply)
            )

        if not shapes:
            return retry

        # Phase 2: hashes and streams, read in one transaction with the shape from phase 1 and
        # checked against it (if the shape changed in between, the key is read again).
        def phase2(pipe: Pipeline) -> None:
            for name, key_type, shape in shapes:
                pipe.type(name)
                # redis-py annotates this key as str, but like every key it accepts bytes.
                pipe.pexpiretime(name)  # type: ignore[arg-type]
                if key_type == "hash":
                    pipe.hgetall(name)
                    pipe.hpexpiretime(name, *shape)
                else:
                    pipe.xrange(name, "-", "+")
                    pipe.xinfo_stream(name)
                    pipe.xinfo_groups(name)
                    for group in shape:
                        pipe.xinfo_consumers(name, group["name"])
                        pipe.xpending_range(name, group["name"], "-", "+", max(1, group["pending"]))

        replies = iter(await self._transaction(phase2))
        for name, key_type, shape in shapes:
            count = 4 if key_type == "hash" else 5 + 2 * len(shape)
            now_type, expire, *rest = (next(replies) for _ in range(count))
            if _text(now_type) == "none":
                continue
            errors = [str(r) for r in rest if isinstance(r, Exception)]
            if _text(now_type) != key_type or errors:
                # Typically a consumer group destroyed between the two transactions.
                retry[name] = f"type changed from {key_type} to {_text(now_type)}, or {errors}"
                continue
            value: _Value | None
            if key_type == "hash":
                value = _hash_value(shape, rest[0], rest[1])
            else:
                value = _stream_value(shape, rest)
            if value is None:
                retry[name] = "its fields or consumer groups changed while being read"
            else:
                images[name] = _KeyImage(name, key_type, _expire(expire), value)
        return retry

    async def _transaction(self, build: Callable[[Pipeline], object]) -> list[Any]:
        async with self._raw.pipeline(transaction=True) as pipe:
            build(pipe)
            # Errors are returned in place so that a key that changed under us can be retried.
            return await pipe.execute(raise_on_error=False)

    # ---- loading -----------------------------------------------------------------------------

    async def _load(self) -> None:
        try:
            data = await asyncio.to_thread(self.path.read_bytes)
        except FileNotFoundError:
            data = None
        except OSError as exc:
            raise StoreError(
                f"cannot read the embedded store snapshot {self.path}: {exc.strerror or exc}. "
                "The file was left untouched; fix its permissions, or move it away to start "
                "with an empty memory."
            ) from exc
        if data is not None:
            try:
                snapshot = await asyncio.to_thread(_parse_snapshot, data)
                await self._restore(snapshot)
            except _CorruptSnapshot as exc:
                raise StoreError(
                    f"the embedded store snapshot {self.path} cannot be loaded: {exc}. "
                    "The file was left untouched; restore it from a backup, or move it away "
                    "to start with an empty memory."
                ) from exc
        # What is on disk now matches memory: closing without changes writes nothing.
        try:
            self._saved_digest = _digest(await self._read_keys())
        except RedisError as exc:
            raise StoreError(f"cannot read the embedded store after loading it: {exc}") from exc
        self._saved_file = self._file_identity()

    async def _restore(self, snapshot: _SnapshotModel) -> None:
        elapsed_ms = max(0, _now_ms() - int(snapshot.saved_at.timestamp() * 1000))
        seen: set[bytes] = set()
        for index, entry in enumerate(snapshot.keys):
            decode = _decode_base64 if entry.encoding == "base64" else _encode_utf8
            try:
                name = decode(entry.key)
                if name in seen:
                    raise _CorruptSnapshot(f"key {name!r} appears twice (keys.{index})")
                seen.add(name)
                pipe = self._raw.pipeline(transaction=False)
                if _queue_restore(pipe, name, entry, decode, elapsed_ms):
                    await pipe.execute()
            except (UnicodeEncodeError, binascii.Error) as exc:
                raise _CorruptSnapshot(
                    f"keys.{index} has a string that is not valid {entry.encoding} ({exc})"
                ) from exc
            except RedisError as exc:
                raise _CorruptSnapshot(
                    f"keys.{index} ({entry.key!r}) cannot be restored: {exc}"
                ) from exc


# --------------------------------------------------------------------------------------------
# Reply parsing (module level: pure functions of the replies).
# --------------------------------------------------------------------------------------------


def _expire(reply: Any) -> int | None:
    """PEXPIRETIME: absolute unix time in ms, or -1 without TTL (-2 cannot happen: TYPE matched)."""
    value = int(reply)
    return value if value >= 0 else None


def _simple_value(key_type: str, reply: Any) -> _Value:
    if key_type == "string":
        return _bytes(reply)
    if key_type == "list":
        return tuple(_bytes(item) for item in reply)
    if key_type == "set":
        return tuple(sorted(_bytes(item) for item in reply))
    return _ZSetValue(tuple((_bytes(member), float(score)) for member, score in reply))


def _hash_value(shape: Any, fields_reply: Any, expiry_reply: Any) -> _HashValue | None:
    fields = tuple((_bytes(f), _bytes(v)) for f, v in fields_reply.items())
    field_names = [_bytes(f) for f in shape]
    if sorted(f for f, _ in fields) != sorted(field_names) or len(expiry_reply) != len(field_names):
        return None  # fields were added or removed between the two reads
    expiring = tuple(
        (f, int(at)) for f, at in zip(field_names, expiry_reply, strict=True) if int(at) >= 0
    )
    order = {f: i for i, (f, _) in enumerate(fields)}
    return _HashValue(fields, tuple(sorted(expiring, key=lambda item: order[item[0]])))


def _stream_value(shape: Any, replies: list[Any]) -> _StreamValue | None:
    entries_reply, info, groups_reply, *per_group = replies
    if [_group_key(g) for g in groups_reply] != [_group_key(g) for g in shape]:
        return None  # groups changed between the two reads
    entries = tuple(
        (_text(entry_id), tuple(_bytes(item) for item in flat)) for entry_id, flat in entries_reply
    )
    now_ms = _now_ms()
    groups = []
    for index, group in enumerate(groups_reply):
        consumers_reply, pending_reply = per_group[2 * index], per_group[2 * index + 1]
        entries_read = group.get("entries-read")
        groups.append(
            _GroupValue(
                name=_bytes(group["name"]),
                last_delivered_id=_text(group["last-delivered-id"]),
                entries_read=None if entries_read is None else int(entries_read),
                consumers=tuple(sorted(_bytes(c["name"]) for c in consumers_reply)),
                pending=tuple(
                    _PendingValue(
                        id=_text(p["message_id"]),
                        consumer=_bytes(p["consumer"]),
                        deliveries=int(p["times_delivered"]),
                        delivered_at_ms=now_ms - int(p["time_since_delivered"]),
                    )
                    for p in pending_reply
                ),
            )
        )
    return _StreamValue(entries, _text(info["last-generated-id"]), tuple(groups))


def _group_key(group: Any) -> tuple[bytes, str, int, int | None]:
    return (
        _bytes(group["name"]),
        _text(group["last-delivered-id"]),
        int(group["pending"]),
        group.get("entries-read"),
    )


# --------------------------------------------------------------------------------------------
# Restoring one key.
# --------------------------------------------------------------------------------------------


def _remaining(ttl_ms: int | None, elapsed_ms: int) -> int | None:
    """Remaining TTL now, or None without TTL; <= 0 means it expired while we were stopped."""
    return None if ttl_ms is None else ttl_ms - elapsed_ms


def _queue_restore(
    pipe: Pipeline,
    name: bytes,
    entry: _StringEntry | _HashEntry | _ListEntry | _SetEntry | _ZSetEntry | _StreamEntry,
    decode: Callable[[str], bytes],
    elapsed_ms: int,
) -> bool:
    """Queue the commands that recreate one key; False if there is nothing to restore."""
    ttl = _remaining(entry.ttl_ms, elapsed_ms)
    if ttl is not None and ttl <= 0:
        return False
    if isinstance(entry, _StringEntry):
        pipe.set(name, decode(entry.value))
    elif isinstance(entry, _ListEntry):
        for items in _chunks(entry.value, _WRITE_CHUNK):
            pipe.rpush(name, *(decode(item) for item in items))
    elif isinstance(entry, _SetEntry):
        for members in _chunks(entry.value, _WRITE_CHUNK):
            pipe.sadd(name, *(decode(member) for member in members))
    elif isinstance(entry, _ZSetEntry):
        for scored in _chunks(entry.value, _WRITE_CHUNK):
            pipe.zadd(name, {decode(member): float(score) for member, score in scored})
    elif isinstance(entry, _HashEntry):
        if not _queue_hash(pipe, name, entry, decode, elapsed_ms):
            return False
    else:
        _queue_stream(pipe, name, entry.value, decode, elapsed_ms)
    if ttl is not None:
        pipe.pexpire(name, ttl)
    return True


def _queue_hash(
    pipe: Pipeline,
    name: bytes,
    entry: _HashEntry,
    decode: Callable[[str], bytes],
    elapsed_ms: int,
) -> bool:
    unknown = set(entry.field_ttl_ms) - set(entry.value)
    if unknown:
        raise _CorruptSnapshot(
            f"hash {name!r} has field_ttl_ms for missing field(s) {sorted(unknown)}"
        )
    ttls = {f: _remaining(ttl, elapsed_ms) for f, ttl in entry.field_ttl_ms.items()}
    # Fields whose own TTL ran out while memorybot was stopped are not restored.
    items = [(f, v) for f, v in entry.value.items() if (ttl := ttls.get(f)) is None or ttl > 0]
    if not items:
        return False
    for part in _chunks(items, _WRITE_CHUNK):
        pipe.hset(name, mapping={decode(f): decode(v) for f, v in part})
    for f, _ in items:
        ttl = ttls.get(f)
        if ttl is not None:
            pipe.hpexpire(name, ttl, decode(f))
    return True


def _queue_stream(
    pipe: Pipeline,
    name: bytes,
    stream: _StreamModel,
    decode: Callable[[str], bytes],
    elapsed_ms: int,
) -> None:
    """Recreate a stream with its exact IDs, last ID and consumer groups.

    Redis has no command to set a pending entry or the last ID directly on a new stream, so:
    entries are added with XADD in ID order; pending entries whose message was deleted, and
    a last ID past the last entry, get placeholder entries; pending entries are recreated with
    XCLAIM ... FORCE JUSTID (which takes the idle time and delivery count as arguments); the
    placeholders are then deleted, which leaves the PEL and the last ID as they were.
    """
    entry_ids = [_stream_id(entry.id) for entry in stream.entries]
    # A stream is ordered by ID; a file that says otherwise was edited or damaged, and
    # guessing the intended order would be silently changing the user's data.
    if any(a >= b for a, b in itertools.pairwise(entry_ids)):
        raise _CorruptSnapshot(f"stream {name!r} has entries that are not in increasing ID order")
    if entry_ids and _stream_id(stream.last_id) < entry_ids[-1]:
        raise _CorruptSnapshot(f"stream {name!r} has a last_id before its last entry")
    ids = {entry.id for entry in stream.entries}
    placeholders = {p.id for group in stream.groups for p in group.pending} - ids
    last = _stream_id(stream.last_id)
    newest = max((_stream_id(i) for i in ids | placeholders), default=(0, 0))
    if last > newest:
        placeholders.add(stream.last_id)
    additions: list[tuple[tuple[int, int], str, list[bytes] | None]] = [
        (_stream_id(e.id), e.id, [decode(part) for pair in e.fields for part in pair])
        for e in stream.entries
    ]
    additions += [(_stream_id(i), i, None) for i in placeholders]
    additions.sort(key=lambda item: item[0])
    for _, entry_id, flat in additions:
        fields = [_PLACEHOLDER_FIELD, b""] if flat is None else flat
        pipe.execute_command("XADD", name, entry_id, *fields)
    if not additions:
        # An empty stream whose last ID is 0-0 (e.g. made by XGROUP CREATE ... MKSTREAM):
        # MKSTREAM is the only way to create it; the temporary group goes away at once.
        pipe.xgroup_create(name, "memorybot-restore", "$", mkstream=True)
        pipe.xgroup_destroy(name, "memorybot-restore")
    for group in stream.groups:
        group_name = decode(group.name)
        pipe.xgroup_create(name, group_name, "0")
        for consumer in group.consumers:
            pipe.xgroup_createconsumer(name, group_name, decode(consumer))
        for pending in group.pending:
            pipe.xclaim(
                name,
                group_name,
                decode(pending.consumer),
                0,
                [pending.id],
                # Idle time, like a TTL, keeps running while memorybot is stopped, so that a
                # message stuck with a dead consumer can be claimed by the usual XAUTOCLAIM.
                idle=pending.idle_ms + elapsed_ms,
                retrycount=pending.deliveries,
                force=True,
                justid=True,
            )
        setid: list[Any] = ["XGROUP", "SETID", name, group_name, group.last_delivered_id]
        if group.entries_read is not None:
            setid += ["ENTRIESREAD", group.entries_read]
        pipe.execute_command(*setid)
    if placeholders:
        pipe.xdel(name, *sorted(placeholders, key=_stream_id))


def _remove_stale_temp_files(data_dir: Path) -> None:
    """Delete temporary files left by a save that crashed (we hold the lock: none is live)."""
    for leftover in data_dir.glob(f"{_TMP_PREFIX}*{_TMP_SUFFIX}"):
        with contextlib.suppress(OSError):
            leftover.unlink()
