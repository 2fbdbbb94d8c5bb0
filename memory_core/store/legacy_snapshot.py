"""Importing the snapshot of memorybot's former embedded store into the Valkey server.

Before the embedded store was a real Valkey server, memorybot kept memory in an in-process
Redis written to ``<data_dir>/memorybot-store.json``. On the first start that finds such a file
and an empty server, :func:`import_snapshot` validates the whole file, recreates every key in
one MULTI/EXEC (atomic in the append-only file too: a crash mid-import leaves nothing half
done), waits for the fsync, and renames the file ``memorybot-store.json.imported``. A file that
cannot be read or parsed stops start-up with a StoreError naming it; it is never changed.

Snapshot format (version 1), as the former store wrote it::

    {"format": "memorybot-embedded", "version": 1, "saved_at": "2025-01-31T12:00:00.000+00:00",
     "keys": [
      {"key": "k", "type": "string", "ttl_ms": null, "value": "text"},
      {"key": "h", "type": "hash", "ttl_ms": 5000, "value": {"field": "value"},
       "field_ttl_ms": {"field": 1200}},                      # only when a field has a TTL
      {"key": "l", "type": "list", "ttl_ms": null, "value": ["a", "b"]},
      {"key": "s", "type": "set", "ttl_ms": null, "value": ["a", "b"]},
      {"key": "z", "type": "zset", "ttl_ms": null, "value": [["m", 1.5], ["n", "inf"]]},
      {"key": "x", "type": "stream", "ttl_ms": null, "value": {
         "entries": [{"id": "1700000000000-0", "fields": [["role", "user"], ["text", "hi"]]}],
         "last_id": "1700000000000-0",
         "groups": [{"name": "g", "last_delivered_id": "0-0", "entries_read": 0,
                     "consumers": ["c1"],
                     "pending": [{"id": "…", "consumer": "c1", "deliveries": 1, "idle_ms": 5}]}]}},
      {"key": "AP8=", "type": "string", "ttl_ms": null, "encoding": "base64", "value": "/w=="}
     ]}

``ttl_ms`` was the remaining time to live when the snapshot was written; the time elapsed since
``saved_at`` is subtracted on import, and keys or hash fields whose TTL ran out are skipped.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import itertools
import json
import os
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Annotated, Any, Final, Literal, TypeVar

import redis
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationError
from redis.client import Pipeline
from redis.exceptions import RedisError

from memory_core.errors import StoreError

SNAPSHOT_FILENAME: Final = "memorybot-store.json"
IMPORTED_SUFFIX: Final = ".imported"
# The former store's lock: held by an old memorybot that still runs on this directory.
LEGACY_LOCK_FILENAME: Final = "memorybot-store.lock"
SNAPSHOT_FORMAT: Final = "memorybot-embedded"
SNAPSHOT_VERSION: Final = 1

# Elements per RPUSH/SADD/ZADD/HSET when restoring, to keep each command's size bounded.
_WRITE_CHUNK: Final = 1000
# Stream field used for the placeholder entries that restoring adds and deletes again.
_PLACEHOLDER_FIELD: Final = b"memorybot-placeholder"
_WAITAOF_TIMEOUT_MS: Final = 10_000

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


_T = TypeVar("_T")


def _chunks(items: Sequence[_T], size: int) -> Iterable[Sequence[_T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


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
        pipe.execute_command("XADD", name, entry_id, *fields)  # type: ignore[no-untyped-call]
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
        pipe.execute_command(*setid)  # type: ignore[no-untyped-call]
    if placeholders:
        pipe.xdel(name, *sorted(placeholders, key=_stream_id))


# --------------------------------------------------------------------------------------------
# The import.
# --------------------------------------------------------------------------------------------


def _legacy_store_in_use(data_dir: Path) -> bool:
    """Whether a memorybot of the former kind still runs on this directory (holds its lock)."""
    import fcntl  # not on Windows; the embedded store does not run there anyway

    path = data_dir / LEGACY_LOCK_FILENAME
    try:
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def _read(path: Path) -> _SnapshotModel:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise StoreError(
            f"cannot read the old embedded store snapshot {path}: {exc.strerror or exc}. "
            "The file was left untouched; fix its permissions, or move it away to start "
            "with an empty memory."
        ) from exc
    try:
        return _parse_snapshot(data)
    except _CorruptSnapshot as exc:
        raise StoreError(
            f"the old embedded store snapshot {path} cannot be imported: {exc}. The file was "
            "left untouched; restore it from a backup, or move it away to start with an empty "
            "memory."
        ) from exc


def _queue_all(pipe: Pipeline, snapshot: _SnapshotModel) -> int:
    """Queue every key of the snapshot; how many keys are imported."""
    elapsed_ms = max(0, _now_ms() - int(snapshot.saved_at.timestamp() * 1000))
    seen: set[bytes] = set()
    imported = 0
    for index, entry in enumerate(snapshot.keys):
        decode = _decode_base64 if entry.encoding == "base64" else _encode_utf8
        try:
            name = decode(entry.key)
            if name in seen:
                raise _CorruptSnapshot(f"key {name!r} appears twice (keys.{index})")
            seen.add(name)
            imported += _queue_restore(pipe, name, entry, decode, elapsed_ms)
        except (UnicodeEncodeError, binascii.Error) as exc:
            raise _CorruptSnapshot(
                f"keys.{index} has a string that is not valid {entry.encoding} ({exc})"
            ) from exc
    return imported


def _imported_name(path: Path) -> Path:
    target = path.with_name(path.name + IMPORTED_SUFFIX)
    if target.exists():  # an earlier import's: keep both
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
        target = path.with_name(f"{path.name}{IMPORTED_SUFFIX}-{stamp}")
    return target


def import_snapshot(data_dir: Path, socket: Path) -> int | None:
    """Import ``data_dir``'s old snapshot into the server on ``socket``, then rename it.

    Returns the number of keys imported, None when there is no snapshot. Called under the
    embedded store's start lock: no other memorybot process can be importing too."""
    path = data_dir / SNAPSHOT_FILENAME
    if not path.exists():
        return None
    if _legacy_store_in_use(data_dir):
        raise StoreError(
            f"an older memorybot still uses {path}: stop it, then start this one, which "
            "imports that memory into the embedded Valkey server"
        )
    snapshot = _read(path)
    # Bytes in and out: a snapshot can hold values that are not UTF-8.
    client = redis.Redis(unix_socket_path=str(socket), socket_timeout=60)
    try:
        if client.dbsize():
            raise StoreError(
                f"{path} was not imported: the embedded Valkey server already holds memory. "
                "Move the file away (its content was imported before, or is older), or move "
                "the server's data away to import it instead"
            )
        pipe = client.pipeline(transaction=True)
        try:
            count = _queue_all(pipe, snapshot)
        except _CorruptSnapshot as exc:
            raise StoreError(
                f"the old embedded store snapshot {path} cannot be imported: {exc}. The file "
                "was left untouched."
            ) from exc
        try:
            if count:
                pipe.execute()
                client.execute_command(  # type: ignore[no-untyped-call]
                    "WAITAOF", 1, 0, _WAITAOF_TIMEOUT_MS
                )
        except RedisError as exc:
            client.flushall()  # it was empty: nothing half imported stays
            raise StoreError(
                f"the old embedded store snapshot {path} cannot be imported: {exc}. The file "
                "was left untouched."
            ) from exc
    finally:
        client.close()
    target = _imported_name(path)
    path.rename(target)
    with contextlib.suppress(OSError):  # make the rename itself durable
        fd = os.open(data_dir, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    return count
