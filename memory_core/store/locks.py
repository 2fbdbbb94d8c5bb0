"""Who holds a scope's maintenance lock, written into the lock's value.

A worker that finds a scope locked can then say who has it (host, pid, since when), and
take the lock over at once when that holder is provably gone: a process on this same host,
in this same pid namespace, that no longer runs. Anything less certain (another host, a
value it cannot read) waits for the lock's TTL: taking over a live holder's lock would only
cost duplicate LLM calls (every write is a compare-and-set), but waiting on a dead one
silently skips maintenance.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True, slots=True)
class LockHolder:
    host: str
    pid: int
    since_ms: int  # real time the lock was taken
    pidns: str = ""  # the holder's pid namespace (containers on one host share the hostname)
    token: str = ""  # random: two takes by one process never match

    @classmethod
    def this_process(cls, now_ms: int) -> LockHolder:
        return cls(
            host=socket.gethostname(),
            pid=os.getpid(),
            since_ms=now_ms,
            pidns=_pid_namespace(),
            token=secrets.token_hex(8),
        )

    def value(self) -> str:
        """The lock's value: compared whole by the release, renew and take-over scripts."""
        return json.dumps(asdict(self), separators=(",", ":"), sort_keys=True)

    @classmethod
    def parse(cls, value: str | None) -> LockHolder | None:
        """The holder a lock value names; None for a value that names nobody readable."""
        if not value:
            return None
        try:
            raw = json.loads(value)
            return cls(
                host=str(raw["host"]),
                pid=int(raw["pid"]),
                since_ms=int(raw["since_ms"]),
                pidns=str(raw["pidns"]),
                token=str(raw["token"]),
            )
        except (ValueError, TypeError, KeyError):
            return None

    def provably_gone(self) -> bool:
        """True only when the holder is a process of this host and pid namespace that no
        longer runs; a holder elsewhere is never judged from here."""
        if self.host != socket.gethostname() or self.pidns != _pid_namespace():
            return False
        return not _running(self.pid)

    def as_dict(self) -> dict[str, Any]:
        """For reports: who and since when (not the token)."""
        return {"host": self.host, "pid": self.pid, "since_ms": self.since_ms}


def _pid_namespace() -> str:
    try:
        return str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        return ""  # not Linux: the hostname alone tells hosts apart


def _running(pid: int) -> bool:
    if pid <= 0:
        return True  # not a real pid: assume alive, never take over on a guess
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it exists, under another user
    # Killed but not yet reaped by its parent, a process is a zombie: gone all the same.
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rpartition(")")[2].split()[:1] != ["Z"]
