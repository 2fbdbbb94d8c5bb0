"""The bot's side of the local model's work, which runs in two helper processes beside it
(:mod:`memory_core.recall.worker`), so the bot's own interpreter never runs a forward pass:

* the **embedding worker** embeds stored messages in the background, on CPU time nobody
  else wants; the bot tells it which scopes got messages with a line written to a pipe
  (buffered, written once per turn of the event loop): nothing on the message path waits
  for it, and a worker that is slow, starting, or gone never slows or fails a message;
* the **query embedder** embeds a reply's question at normal priority, never behind
  background work, while the bot reads memory for the same reply: the two overlap on two
  cores instead of taking turns for one interpreter. While it is not there (starting,
  restarting), a question is embedded in the bot's own process.

A helper that dies is started again (at most once every ``restart_after_s`` seconds); what
the worker had not embedded is found again by the next search that meets it.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import logging
import os
import secrets
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

RESTART_AFTER_S = 30.0
STOP_WAIT_S = 5.0
RESCAN_EVERY_S = 30.0  # a search asks for a look through a scope at most this often
FLUSH_AFTER_S = 0.005  # the worker hears of stored messages this soon, in one write
QUERY_TIMEOUT_S = 5.0  # a question the query embedder has not answered by then: here


class _Helper:
    """One helper process speaking JSON lines on its stdin and stdout: started, started
    again when it dies, stopped. Its stderr is the bot's (its warnings go to the same log)."""

    def __init__(
        self,
        role: str,
        connect: dict[str, Any],
        on_line: Callable[[dict[str, Any]], None],
        on_exit: Callable[[], None],
        restart_after_s: float,
        on_start: Callable[[], None] = lambda: None,
    ) -> None:
        self.role = role
        self.on_start = on_start
        self.connect = connect
        self.on_line = on_line
        self.on_exit = on_exit
        self.restart_after_s = restart_after_s
        self.process: asyncio.subprocess.Process | None = None
        self.ready = asyncio.Event()
        self.closed = False
        self._reader: asyncio.Task[None] | None = None
        self._started_at = -restart_after_s
        self._starting: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._started_at = time.monotonic()
        self.ready.clear()
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
        self.process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "memory_core.recall.worker",
            self.role,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            env=env,
            # Its own session: a Ctrl+C meant for the console does not reach it; it leaves
            # when its stdin closes, with the bot (or when the bot dies).
            start_new_session=True,
        )
        self.write({"connect": self.connect})
        self._reader = asyncio.create_task(self._read(self.process))
        self.on_start()

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.returncode is None

    def write(self, line: dict[str, Any]) -> bool:
        return self.write_lines([line])

    def write_lines(self, lines: list[dict[str, Any]]) -> bool:
        process = self.process
        if process is None or process.stdin is None or process.stdin.is_closing():
            return False
        # (A StreamWriter buffers what the pipe cannot take now: write never blocks.)
        process.stdin.write(b"".join(json.dumps(line).encode("utf-8") + b"\n" for line in lines))
        return True

    def restart_later(self) -> None:
        if self.closed or (self._starting is not None and not self._starting.done()):
            return
        wait = self._started_at + self.restart_after_s - time.monotonic()
        self._starting = asyncio.create_task(self._restart(max(0.0, wait)))

    async def _restart(self, wait: float) -> None:
        await asyncio.sleep(wait)
        if self.closed or self.alive:
            return
        try:
            await self.start()
        except OSError as exc:
            log.warning("could not start the %s again: %s", self.role, exc)

    async def close(self) -> None:
        self.closed = True
        if self._starting is not None:
            self._starting.cancel()
        process, self.process = self.process, None
        if process is None:
            return
        if process.stdin is not None:
            process.stdin.close()
        try:
            await asyncio.wait_for(process.wait(), STOP_WAIT_S)
        except TimeoutError:
            log.warning("the %s did not stop in %.0f s: killed", self.role, STOP_WAIT_S)
            process.kill()
            await process.wait()
        if self._reader is not None:
            await self._reader

    async def _read(self, process: asyncio.subprocess.Process) -> None:
        assert process.stdout is not None
        while line := await process.stdout.readline():
            try:
                said = json.loads(line)
            except ValueError:
                continue  # (stdout is the helper's own; a stray line is not an answer)
            if said.get("ready"):
                self.ready.set()
            else:
                self.on_line(said)
        code = await process.wait()
        if not self.closed:
            log.warning("the %s stopped (exit code %s); starting it again", self.role, code)
            self.restart_later()
        self.on_exit()


class BackgroundEmbedding:
    def __init__(
        self,
        *,
        url: str,
        cluster: bool,
        prefix: str,
        timeout_s: float,
        restart_after_s: float = RESTART_AFTER_S,
    ) -> None:
        connect = {"url": url, "cluster": cluster, "prefix": prefix, "timeout_s": timeout_s}
        self._worker = _Helper(
            "embedding-worker",
            connect,
            self._heard,
            self._worker_gone,
            restart_after_s,
            on_start=self._schedule_flush,  # what was stored while it was away
        )
        self._queries = _Helper(
            "query-embedder", {}, self._answered, self._queries_gone, restart_after_s
        )
        self._counts: dict[str, int] = {}
        self._rescans: set[str] = set()
        self._rescanned: dict[str, float] = {}
        self._flush_soon = False
        self._syncs: dict[str, asyncio.Future[None]] = {}
        self._asked: dict[int, asyncio.Future[np.ndarray | None]] = {}
        self._ids = itertools.count()
        # The worker's last word on how far behind it is (see worker.EmbeddingWorker.status).
        self.status: dict[str, Any] = {}

    # -- life -----------------------------------------------------------------------------
    async def start(self) -> None:
        """Start both helpers (they load the model meanwhile: :meth:`ready` waits). One
        that cannot start is tried again later; the bot starts all the same."""
        for helper in (self._worker, self._queries):
            try:
                await helper.start()
            except OSError as exc:
                log.warning("could not start the %s (again later): %s", helper.role, exc)
                helper.restart_later()

    async def ready(self, timeout_s: float = 60.0) -> bool:
        """Wait until both helpers have loaded the model (benchmarks measure after that)."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(
                asyncio.gather(self._worker.ready.wait(), self._queries.ready.wait()), timeout_s
            )
        return self._worker.ready.is_set() and self._queries.ready.is_set()

    @property
    def alive(self) -> bool:
        return self._worker.alive

    @property
    def pid(self) -> int | None:
        return self._worker.process.pid if self._worker.process is not None else None

    @property
    def query_pid(self) -> int | None:
        return self._queries.process.pid if self._queries.process is not None else None

    @property
    def restart_after_s(self) -> float:
        return self._worker.restart_after_s

    @restart_after_s.setter
    def restart_after_s(self, seconds: float) -> None:
        self._worker.restart_after_s = self._queries.restart_after_s = seconds

    async def close(self) -> None:
        """Stop both: their stdin closes, they finish what is in hand and leave."""
        await asyncio.gather(self._worker.close(), self._queries.close())

    # -- questions ----------------------------------------------------------------------
    def ask(self, text: str) -> asyncio.Future[np.ndarray | None] | None:
        """Send the question to the query embedder now (the model starts on it while the
        caller goes on) and return its answer to come; None when the query embedder is not
        there (the caller then embeds the question itself)."""
        if not self._queries.ready.is_set() or not self._queries.alive:
            return None
        asked = next(self._ids)
        answer: asyncio.Future[np.ndarray | None] = asyncio.get_running_loop().create_future()
        if not self._queries.write({"q": asked, "t": text}):
            return None
        self._asked[asked] = answer
        answer.add_done_callback(lambda _: self._asked.pop(asked, None))
        return answer

    async def query(self, text: str) -> np.ndarray | None:
        """The question's unit vector from the query embedder; None when it is not there
        or did not answer in time (the caller then embeds it itself)."""
        answer = self.ask(text)
        return await self.answer(answer) if answer is not None else None

    @staticmethod
    async def answer(asked: asyncio.Future[np.ndarray | None]) -> np.ndarray | None:
        """What :meth:`ask` gave, within QUERY_TIMEOUT_S (None after that)."""
        try:
            return await asyncio.wait_for(asked, QUERY_TIMEOUT_S)
        except TimeoutError:
            log.warning("the query embedder did not answer in %.0f s", QUERY_TIMEOUT_S)
            return None

    def _answered(self, said: dict[str, Any]) -> None:
        answer = self._asked.get(int(said.get("q", -1)))
        if answer is None or answer.done():
            return
        blob = said.get("v")
        answer.set_result(np.frombuffer(base64.b64decode(blob), dtype=np.float32) if blob else None)

    def _queries_gone(self) -> None:
        for answer in self._asked.values():  # nobody is left to answer them: asked here
            if not answer.done():
                answer.set_result(None)

    # -- messages -----------------------------------------------------------------------
    def stored(self, scope: str, count: int = 1) -> None:
        """``count`` messages were stored in ``scope``: their vectors, soon."""
        self._counts[scope] = self._counts.get(scope, 0) + count
        self._schedule_flush()

    def look_through(self, scope: str) -> None:
        """A search met messages of ``scope`` with no vector (stored by another process,
        before a restart, or whose context was deleted): ask for a look through the whole
        scope, at most once every RESCAN_EVERY_S seconds."""
        now = time.monotonic()
        if now - self._rescanned.get(scope, -RESCAN_EVERY_S) < RESCAN_EVERY_S:
            return
        self._rescanned[scope] = now
        if len(self._rescanned) > 10_000:  # forget the oldest half
            for old in list(self._rescanned)[:5_000]:
                del self._rescanned[old]
        self._rescans.add(scope)
        self._schedule_flush()

    async def sync(self) -> None:
        """Wait until the worker has done everything asked of it so far (tests, benchmarks
        and a replay's end; not a shutdown, which leaves the rest for later)."""
        if self._worker.closed or not self._worker.alive:
            return  # (nothing to wait for: what it missed is found by a later look)
        token = secrets.token_hex(4)
        waiting: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._syncs[token] = waiting
        self._flush()
        self._worker.write({"sync": token})
        try:
            await waiting
        finally:
            self._syncs.pop(token, None)

    def _schedule_flush(self) -> None:
        """Tell the worker within FLUSH_AFTER_S: the messages stored meanwhile go in one
        write (a write per message, with its JSON, would be a quarter of what storing one costs
        the bot at a few thousand a second; the worker's lag is seconds anyway)."""
        if not self._flush_soon:
            self._flush_soon = True
            asyncio.get_running_loop().call_later(FLUSH_AFTER_S, self._flush)

    def _flush(self) -> None:
        self._flush_soon = False
        if self._worker.closed:
            return
        if not self._worker.alive:
            self._worker.restart_later()
            return  # kept: told once it is back
        lines: list[dict[str, Any]] = [{"r": scope} for scope in self._rescans]
        lines += [{"n": scope, "c": count} for scope, count in self._counts.items()]
        self._rescans.clear()
        self._counts.clear()
        if lines:
            self._worker.write_lines(lines)

    def _heard(self, said: dict[str, Any]) -> None:
        if "synced" in said:
            waiting = self._syncs.get(str(said["synced"]))
            if waiting is not None and not waiting.done():
                waiting.set_result(None)
        elif "status" in said:
            self.status = said["status"]

    def _worker_gone(self) -> None:
        for waiting in self._syncs.values():  # nobody is left to answer them
            if not waiting.done():
                waiting.set_result(None)
