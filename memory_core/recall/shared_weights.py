"""The local model's weights, one copy for every process on the machine that uses them.

The bot's two helper processes (the embedding worker and the query embedder,
:mod:`memory_core.recall.background`) each loaded the model into memory of their own: its
78 MB twice, and the same bytes twice in the CPU's caches, where they pushed each other
out. Once a process has loaded the model, its big arrays are swapped here for read-only
views of files, one per array, mapped from a directory of this user's: every process that
maps them shares the same physical pages. The embedding worker, which streams the weights
all day, then keeps them warm in the last-level cache for the query embedder, whose answer
a reply waits for (``bench ingest``'s prompt assembly; docs/benchmarks.md has the figures).

The files are written once per model version (under a lock, each to a temporary name and
then renamed over), and compared with the weights just loaded before they are used: a
file that differs is written again. A directory that is not this user's (another user
made it first, in a shared temporary directory) or that cannot be written is not used: the
process keeps its own copy, and says why at info level. Sharing is a saving, never a
condition.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger("memorybot.recall")

MIN_BYTES = 64 * 1024  # smaller arrays stay the process's own (a page table's worth)


def weights_dir() -> Path:
    """This user's directory of shared weights: in the system's temporary directory (not
    the data directory: a process that only embeds may not know it, and one copy serves
    every bot of the user on the machine)."""
    return Path(tempfile.gettempdir()) / f"memorybot-{os.getuid()}" / "weights"


def share(backend: Any, *, name: str, directory: Path | None = None) -> int:
    """Swap the big numpy arrays among ``backend``'s attributes (and in its lists of arrays)
    for read-only views of files in ``directory``/``name`` shared with other processes; the
    bytes now shared (0: none, and why is logged)."""
    if not hasattr(os, "getuid"):  # (Windows: no owner to check the directory by)
        log.info("the model's weights stay this process's own (not shared) on this system")
        return 0
    root = directory or weights_dir()
    place = root / name
    try:
        _private_dir(root.parent)
        _private_dir(root)
        _private_dir(place)
        with _locked(place / ".lock"):
            swaps, shared = _mapped_attributes(backend, place)
            _drop_other_versions(root, keep=name)
    except OSError as exc:
        log.info("the model's weights stay this process's own (not shared): %s", exc)
        return 0
    for attribute, value in swaps.items():
        setattr(backend, attribute, value)
    return shared


def _mapped_attributes(backend: Any, place: Path) -> tuple[dict[str, Any], int]:
    swaps: dict[str, Any] = {}
    shared = 0
    for attribute, value in vars(backend).items():
        if isinstance(value, np.ndarray) and value.nbytes >= MIN_BYTES:
            swaps[attribute] = _mapped(place / f"{attribute}.npy", value)
            shared += value.nbytes
        elif isinstance(value, list) and value and all(isinstance(v, np.ndarray) for v in value):
            if not any(v.nbytes >= MIN_BYTES for v in value):
                continue
            swaps[attribute] = [
                _mapped(place / f"{attribute}.{i}.npy", v) if v.nbytes >= MIN_BYTES else v
                for i, v in enumerate(value)
            ]
            shared += sum(v.nbytes for v in value if v.nbytes >= MIN_BYTES)
    return swaps, shared


def _mapped(path: Path, array: np.ndarray) -> np.ndarray:
    """A read-only view of ``path``'s array, which is ``array``'s (written if not)."""
    found = _load(path)
    if found is None or not _same(found, array):
        temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            with open(temporary, "wb") as out:
                np.save(out, np.ascontiguousarray(array), allow_pickle=False)
            os.replace(temporary, path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                temporary.unlink()
        found = _load(path)
        if found is None or not _same(found, array):
            raise OSError(f"{path} does not read back as written")
    return found


def _load(path: Path) -> np.ndarray | None:
    try:
        mapped = np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError):
        return None
    view: np.ndarray = mapped.view(np.ndarray)  # (a plain array over the mapping)
    return view


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    as_bytes = np.ascontiguousarray(b).reshape(-1).view(np.uint8)
    return bool(np.array_equal(a.reshape(-1).view(np.uint8), as_bytes))


def _private_dir(path: Path) -> None:
    """``path``, a directory of this user's that only they can write (made if missing)."""
    with contextlib.suppress(FileExistsError):
        path.mkdir(mode=0o700)
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode):
        raise OSError(f"{path} is not a directory")
    if info.st_uid != os.getuid():
        raise OSError(f"{path} belongs to another user")
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise OSError(f"{path} can be written by other users")


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """One process at a time writes or checks the files (an flock; none on Windows)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        try:
            import fcntl
        except ImportError:  # (Windows: renames alone keep a reader from a half file)
            yield
            return
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _drop_other_versions(root: Path, *, keep: str) -> None:
    """Another version's files, left by an earlier install (a process still mapping them
    keeps its pages until it exits)."""
    for other in root.iterdir():
        if other.name != keep and other.is_dir() and not other.is_symlink():
            shutil.rmtree(other, ignore_errors=True)
