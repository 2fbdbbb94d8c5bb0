"""The record that a forget owes the embedded store a rewrite of its files (``erase-owed``).

A forget is done only once a rewrite that started after it has taken its text out of every
file (``Store.persist``). A crash in between (memorybot or the server killed) would leave the
text in the files with nothing to finish the rewrite; so the rewrite is recorded as owed, on
disk, before a forget starts erasing, and the record goes only once a rewrite that started
after it was written has succeeded. The next start finds a record left behind and finishes
the rewrite (``Store.finish_owed_erasure``).

The record holds a unique line (time, pid, random): a rewrite removes the record only when
it still holds what was read before that rewrite was asked for, so a forget whose record was
written later (here or in another process) keeps it until its own rewrite is done. Every
read, write and removal is made under a ``flock`` of the data directory, so none of them
falls between another's read and removal.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import time
from collections.abc import Iterator
from pathlib import Path

from memory_core.errors import StoreError
from memory_core.store.embedded import ServerFiles


@contextlib.contextmanager
def _data_dir_locked(files: ServerFiles) -> Iterator[int]:
    """The data directory, open and flock'ed: the record of a rewrite owed is written, read
    and removed under it, so no removal takes a record written after it was read. The fd is
    for fsync: a record's name reaches the disk only when its directory is fsync'ed. (fcntl
    is imported here: Windows has none, and no embedded store either.)"""
    import fcntl

    fd = os.open(files.data_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield fd
    finally:
        os.close(fd)  # releases the lock


def _read_record(files: ServerFiles) -> str | None:
    try:
        return files.erase_owed.read_text("utf-8", errors="replace")
    except FileNotFoundError:
        return None


def _record_failed(files: ServerFiles, doing: str, exc: OSError) -> StoreError:
    return StoreError(
        f"cannot {doing} {files.erase_owed} ({exc.strerror or exc}): free disk space in "
        f"{files.data_dir} or make it writable, then run: memorybot store compact"
    )


def owe_erasure(files: ServerFiles) -> str:
    """Record on disk that a rewrite of the files is owed, before a forget starts erasing: a
    crash before a rewrite has taken its text out leaves the record, for the next start to
    finish. Returns the record, unique (time, pid, random), for :func:`settle_erasure`."""
    record = (
        "A forget's text may still be in valkey-aof/ until a rewrite that started after this "
        "was written succeeds (the next start, or: memorybot store compact). "
        f"{time.time_ns()} {os.getpid()} {secrets.token_hex(8)}\n"
    )
    try:
        with _data_dir_locked(files) as dir_fd:
            flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC
            with os.fdopen(os.open(files.erase_owed, flags, 0o600), "w", encoding="utf-8") as out:
                out.write(record)
                out.flush()
                os.fsync(out.fileno())
            os.fsync(dir_fd)
    except OSError as exc:
        raise _record_failed(files, "write", exc) from exc
    return record


def owed_erasure(files: ServerFiles) -> str | None:
    """The record of a rewrite owed (read before asking for the rewrite that settles it);
    None when none is owed."""
    try:
        with _data_dir_locked(files):
            return _read_record(files)
    except OSError as exc:
        raise _record_failed(files, "read", exc) from exc


def settle_erasure(files: ServerFiles, record: str) -> bool:
    """Remove the record of a rewrite owed once a rewrite that started after ``record`` was
    read has succeeded. A record that changed since is kept: a later forget wrote it, and its
    text may be in the files that rewrite copied memory from. Whether it was removed."""
    try:
        with _data_dir_locked(files) as dir_fd:
            if _read_record(files) != record:
                return False
            files.erase_owed.unlink()
            os.fsync(dir_fd)  # else a power cut may bring it back (one needless rewrite)
    except OSError as exc:
        raise _record_failed(files, "remove", exc) from exc
    return True


def erasure_owed(data_dir: Path) -> bool:
    """Whether a rewrite is owed to a forget in ``data_dir`` (doctor, status). Starts nothing."""
    return ServerFiles.of(data_dir).erase_owed.exists()


def erasure_pending(files: ServerFiles) -> str:
    """What an owed rewrite means and what to run, for doctor and status."""
    return (
        f"a forget's rewrite of the files is not done ({files.erase_owed} exists): forgotten "
        f"text may still be in {files.aof}. Run: memorybot store compact (if it fails, free "
        f"disk space first; {files.log} says more)"
    )
