"""The local model's helper processes, started by the bot beside itself
(:mod:`memory_core.recall.background`), ``python -m memory_core.recall.worker ROLE``:

* ``embedding-worker``: recall's background embedding. Embedding a message is a CPU-bound
  forward pass (1-3.5 ms a text in batches, more with its context). Run in the bot's own
  interpreter it competed with the event loop: storing a message took 4x longer,
  assembling a prompt 9x. Here it runs on CPU time nobody else wants (``SCHED_IDLE``), one
  thread per core; it reads new messages from Redis, embeds them in batches across scopes,
  and stores their vectors there for every process (``store_vectors``: only while the
  message and the one it is embedded with are still stored, so a forget made meanwhile
  wins). The bot's only part is a line on the worker's stdin per message stored: no round
  trip, no model on its loop.
* ``query-embedder``: a reply's question, at normal priority, never behind the worker's
  batches; the questions that arrive together are embedded together.

The embedding worker's lines in (JSON, one per line; the first carries the connection):
    {"connect": {"url": ..., "cluster": ..., "prefix": ..., "timeout_s": ...}}
    {"n": scope, "c": count}   count new messages were stored in scope
    {"r": scope}               look through the whole scope for messages with no vector
    {"sync": token}            answer once everything asked before it is done
Lines out (stdout): {"ready": true}, {"synced": token}, {"status": {...}}. The query
embedder's: {"q": number, "t": text} in, {"q": number, "v": base64 float32} out.

One command at a time: the worker never has more than one command in flight to Redis.
Redis serves its clients' commands in turn; a round that read or stored a hundred scopes
at once (gathered) would put a hundred commands ahead of the bot's next read, and the
reads of a prompt's assembly take 1.6 ms that way against 0.3 (`bench ingest`). One at a
time, the bot's command waits behind one of the worker's at most, and the worker loses
little: its time goes to the model, not to round trips.

The worker leaves when its stdin closes (the bot stopped, or died). What it has not
embedded yet is found again later: a search that meets a message with no vector asks for
a look through its scope. Its backlog and lag are written to Redis every few seconds for
/metrics and the dashboard (a heartbeat, :class:`~memory_core.store.heartbeats.Heartbeats`;
read back by :func:`read_status`).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import os
import socket
import sys
import time
from base64 import b64encode
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

import numpy as np

from memory_core.errors import MemorybotError
from memory_core.models import LogEntry
from memory_core.recall import question_model
from memory_core.recall.documents import Doc, same_exchange
from memory_core.recall.embedding import encode_sync, loaded_model
from memory_core.recall.vectors import embedding_text, encode_vector
from memory_core.store.heartbeats import Heartbeats
from memory_core.store.keys import KeySchema
from memory_core.store.recall_reads import RecallStore

log = logging.getLogger("memorybot.embedding-worker")

# Threads that embed at once: one per core (it only takes CPU time nobody else wants).
THREADS = max(1, min(4, os.cpu_count() or 1))
ROUND = 64 * THREADS  # texts embedded per round at most (then every waiting scope's turn)
READ_BATCH = 2000  # log entries per XRANGE
STATUS_EVERY_S = 2.0
RETRY_S = 2.0  # after a round that failed
KEPT_SCOPES = 20_000
STATUS_TTL_S = 30  # a status older than this is a worker that is gone


@dataclass
class ScopeWork:
    """What the worker knows of one scope: how far it has read its log, the last message
    read (the next one may be embedded with it), and the messages still to embed."""

    last_id: str = ""
    previous: Doc | None = None
    todo: deque[tuple[str, str, str]] = field(default_factory=deque)  # (id, context id, text)
    rescan: bool = True  # read the whole log (first time, or asked to)
    waiting: int = 0  # messages announced but not read yet
    since: float | None = None  # when the oldest message not embedded yet was announced


def message_doc(entry_id: str, fields: dict[str, str]) -> Doc:
    entry = LogEntry.from_stream(entry_id, fields)
    return Doc(
        id=entry.id,
        ms=entry.ms,
        author=entry.author,
        text=entry.text,
        kind="message",
        n_terms=0,
        tokens=entry.tokens,
    )


class EmbeddingWorker:
    def __init__(self, client: Any, keys: KeySchema, out: IO[str]) -> None:
        self.data = RecallStore(client, keys)  # its reads and writes
        self.heartbeats = embedders(client, keys)
        self.out = out
        # What it knows of each scope, least recently announced first (at most KEPT_SCOPES
        # idle ones: one that comes back after that is read whole again).
        self.scopes: OrderedDict[str, ScopeWork] = OrderedDict()
        self.queue: OrderedDict[str, None] = OrderedDict()  # scopes with work, in turn
        self.syncs: list[str] = []
        self.wake = asyncio.Event()
        self.embedded = 0
        self.name = f"{socket.gethostname()}:{os.getpid()}"
        self.stopping = False
        self.failures = 0  # in this round
        self._status_at = 0.0

    # -- what the bot says --------------------------------------------------------------
    def take(self, line: str) -> None:
        try:
            ask = json.loads(line)
        except ValueError:
            log.warning("ignored a line that is not JSON")
            return
        if "n" in ask or "r" in ask:
            scope = str(ask.get("n") or ask.get("r"))
            work = self.scopes.setdefault(scope, ScopeWork())
            self.scopes.move_to_end(scope)
            if "r" in ask:
                work.rescan = True
            work.waiting += int(ask.get("c", 0) or 0)
            if work.since is None:
                work.since = time.time()
            self.queue[scope] = None
        elif "sync" in ask:
            self.syncs.append(str(ask["sync"]))
        self.wake.set()

    def stop(self) -> None:
        """Finish the round in hand, then leave (never cancelled mid-command: a status
        written after :meth:`leave` would outlive the worker)."""
        self.stopping = True
        self.wake.set()

    def say(self, **what: Any) -> None:
        self.out.write(json.dumps(what) + "\n")
        self.out.flush()

    # -- the work -----------------------------------------------------------------------
    async def run(self) -> None:
        """Until :meth:`stop`: every round it is woken for, and a heartbeat when idle."""
        while not self.stopping:
            try:
                await asyncio.wait_for(self.wake.wait(), STATUS_EVERY_S)
            except TimeoutError:  # idle: still here, says the status (a heartbeat)
                await self.share_status(force=True)
                continue
            self.wake.clear()
            while self.queue and not self.stopping:
                await self.round()
            await self.share_status(force=bool(self.syncs))
            for token in self.syncs:
                self.say(synced=token)
            self.syncs.clear()

    async def round(self) -> None:
        """Read what the waiting scopes have new, embed up to ROUND texts taken fairly
        across them, and store the vectors."""
        scopes = list(self.queue)
        self.queue.clear()
        # Read the scopes with news (announced messages, a look asked for); the others
        # are only here for the rest of their to-do list.
        # One scope after another, never gathered (one command at a time: module doc).
        fresh = [s for s in scopes if self.scopes[s].rescan or self.scopes[s].waiting]
        for scope in fresh:
            await self.read(scope)
        picked: list[tuple[str, tuple[str, str, str]]] = []
        share = max(1, ROUND // max(1, len(scopes)))
        for scope in scopes:
            todo = self.scopes[scope].todo
            for _ in range(min(share, len(todo), ROUND - len(picked))):
                picked.append((scope, todo.pop()))  # newest first
        for scope in scopes:
            work = self.scopes[scope]
            if work.todo or work.rescan:
                self.queue[scope] = None
            elif work.waiting == 0:
                work.since = None
        if picked:
            await self.embed(picked)
        await self.share_status()
        if self.failures:  # Redis or the model is away: again in a while, not in a loop
            await asyncio.sleep(RETRY_S)
            self.failures = 0
        self.forget_idle()

    def forget_idle(self) -> None:
        """Keep at most KEPT_SCOPES scopes' read state: the least recently announced idle
        ones go (a few hundred bytes each, and the last message read)."""
        extra = len(self.scopes) - KEPT_SCOPES
        for scope in list(itertools.islice(self.scopes, max(0, extra))):
            work = self.scopes[scope]
            if scope not in self.queue and not work.todo and not work.waiting:
                del self.scopes[scope]

    async def read(self, scope: str) -> None:
        """Bring the scope's to-do list up to date from its log (on failure: a look
        through the whole log next time)."""
        work = self.scopes[scope]
        try:
            if work.rescan:
                work.rescan = False
                stored = await self.data.vector_ids(scope)
                work.todo.clear()
                work.last_id, work.previous = "", None
            else:
                stored = set()
            work.waiting = 0
            while True:
                batch = await self.data.entries_after(scope, work.last_id, count=READ_BATCH)
                for entry_id, fields in batch:
                    doc = message_doc(entry_id, fields)
                    context = work.previous
                    if context is not None and not same_exchange(context, doc):
                        context = None
                    if entry_id not in stored:
                        text = embedding_text(doc, context)
                        work.todo.append((entry_id, context.id if context else "", text))
                    work.last_id, work.previous = entry_id, doc
                if len(batch) < READ_BATCH:
                    break
        except MemorybotError as exc:
            self._failed(f"could not read the messages of {scope}", exc)
            work.rescan = True

    async def embed(self, picked: list[tuple[str, tuple[str, str, str]]]) -> None:
        texts = [text for _, (_, _, text) in picked]
        size = -(-len(texts) // THREADS)
        try:
            parts = await asyncio.gather(
                *(
                    asyncio.to_thread(encode_sync, texts[i : i + size], alone=False)
                    for i in range(0, len(texts), size)
                )
            )
            vectors = np.concatenate(parts)
        except MemorybotError as exc:
            self._failed("the embedder failed (its messages wait for a later look)", exc)
            for scope, _ in picked:
                self.scopes[scope].rescan = True
            return
        by_scope: dict[str, list[str]] = {}
        for (scope, (entry_id, context_id, _)), vector in zip(picked, vectors, strict=True):
            by_scope.setdefault(scope, []).extend([entry_id, context_id, encode_vector(vector)])
        for scope, args in by_scope.items():  # in turn, as the reads
            self.embedded += await self.store(scope, args)

    async def store(self, scope: str, args: list[str]) -> int:
        try:
            await self.data.store_vectors(scope, args)
        except MemorybotError as exc:
            self._failed(f"could not store the vectors of {scope}", exc)
            self.scopes[scope].rescan = True
            self.queue[scope] = None
            return 0
        return len(args) // 3

    def _failed(self, what: str, exc: Exception) -> None:
        """One warning per round that fails (not one per scope: Redis away fails them all)."""
        if not self.failures:
            log.warning("%s (again in %.0f s): %s", what, RETRY_S, exc)
        self.failures += 1

    # -- how far behind -----------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        now = time.time()
        backlog = sum(w.waiting + len(w.todo) for w in self.scopes.values())
        oldest = min((w.since for w in self.scopes.values() if w.since is not None), default=now)
        return {
            "backlog": backlog,
            "lag_s": round(now - oldest, 3) if backlog or self.queue else 0.0,
            "embedded": self.embedded,
            "at": round(now, 3),
        }

    async def share_status(self, *, force: bool = False) -> None:
        """The status on stdout (the bot's own view) and in Redis (the fleet's, for /metrics
        and the dashboard), every few seconds, and whenever the worker goes idle."""
        now = time.monotonic()
        if not force and now - self._status_at < STATUS_EVERY_S:
            return
        self._status_at = now
        status = self.status()
        self.say(status=status)
        with contextlib.suppress(MemorybotError):
            await self.heartbeats.beat(self.name, status)

    async def leave(self) -> None:
        with contextlib.suppress(MemorybotError):
            await self.heartbeats.leave(self.name)


def embedders(client: Any, keys: KeySchema) -> Heartbeats:
    """The embedding workers' statuses."""
    return Heartbeats(client, keys.embedders, ttl_s=STATUS_TTL_S)


async def read_status(client: Any, keys: KeySchema) -> dict[str, float]:
    """The fleet's embedding workers, added up: how many answer, their backlog (messages
    stored but not embedded yet), the longest lag (seconds since the oldest of them was
    stored) and the messages they embedded since they started. A worker that died without
    leaving is dropped."""
    live = await embedders(client, keys).live()
    return {
        "workers": len(live),
        "backlog": sum(float(s.get("backlog", 0)) for s in live),
        "lag_s": max((float(s.get("lag_s", 0)) for s in live), default=0.0),
        "embedded": sum(float(s.get("embedded", 0)) for s in live),
    }


async def _serve(connect: dict[str, Any], lines: asyncio.StreamReader, out: IO[str]) -> None:
    from config.settings import StoreSettings
    from memory_core.store.server import connect_client

    settings = StoreSettings.model_validate(
        {
            "redis_url": connect["url"],
            "cluster": bool(connect.get("cluster")),
            "key_prefix": connect["prefix"],
            "connect_timeout_s": float(connect.get("timeout_s", 5.0)),
            "max_connections": 16,
        }
    )
    client = await connect_client(settings)
    worker = EmbeddingWorker(client, KeySchema(settings.key_prefix), out)
    await asyncio.to_thread(encode_sync, ["warm up"])  # the model, loaded before "ready"
    await worker.share_status(force=True)
    worker.say(ready=True)
    runner = asyncio.create_task(worker.run())
    try:
        while True:  # until stdin closes, or the work stops on an error
            reading = asyncio.ensure_future(lines.readline())
            await asyncio.wait({reading, runner}, return_when=asyncio.FIRST_COMPLETED)
            if runner.done():
                reading.cancel()
                break
            if not (line := reading.result()):
                break
            worker.take(line.decode("utf-8", "replace"))
    finally:
        worker.stop()
        await runner  # (raises what stopped it, if it failed: the bot starts another)
        await worker.leave()
        await client.aclose()


def _answer_queries(fd: int, out: IO[str]) -> None:
    """The query embedder: each question's unit vector, at once, in the order asked; the
    questions that arrived together are embedded as one batch. A plain blocking read: a
    question wakes it from one system call (no event loop's poll before the read)."""
    rest = b""
    while b"\n" not in rest:  # the first line carries the connection: not needed here
        if not (chunk := os.read(fd, 2**16)):
            return
        rest += chunk
    rest = rest.split(b"\n", 1)[1]
    encode = _question_encoder()
    encode(["warm up"])  # the model, loaded before "ready"
    out.write(json.dumps({"ready": True}) + "\n")
    out.flush()
    while True:
        if b"\n" not in rest:
            if not (chunk := os.read(fd, 2**16)):
                return  # stdin closed: the bot stopped
            rest += chunk
            continue
        *whole, rest = rest.split(b"\n")
        asked = []
        for line in whole:
            with contextlib.suppress(ValueError, KeyError, TypeError):
                ask = json.loads(line)
                asked.append((int(ask["q"]), str(ask["t"])))
        if not asked:
            continue
        try:
            vectors = encode([text for _, text in asked])
        except MemorybotError as exc:
            log.warning("could not embed a question (the bot embeds it itself): %s", exc)
            vectors = None
        for i, (number, _) in enumerate(asked):
            blob = (
                b64encode(vectors[i].astype(np.float32).tobytes()).decode()
                if vectors is not None
                else ""
            )
            out.write(json.dumps({"q": number, "v": blob}) + "\n")
        out.flush()


def _question_encoder() -> Callable[[Sequence[str]], np.ndarray]:
    """The model's pass for one question at a time (:mod:`memory_core.recall.question_model`)
    where the installed model is the one it was written for, else the model's own."""
    try:
        model = question_model.load(loaded_model())
    except MemorybotError:
        return encode_sync  # (it says why, on each question)
    return model.encode if model is not None else encode_sync


async def _main() -> None:
    """The embedding worker: its lines on stdin, read by the event loop beside its work."""
    loop = asyncio.get_running_loop()
    lines = asyncio.StreamReader(limit=2**20)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(lines), sys.stdin)
    first = json.loads((await lines.readline()).decode("utf-8"))
    await _serve(first["connect"], lines, _protocol_out())


def _protocol_out() -> IO[str]:
    """stdout carries the protocol: anything a library prints goes to stderr instead."""
    out = sys.stdout
    sys.stdout = sys.stderr
    return out


def _step_aside() -> None:
    """Run only on CPU time nobody else wants (SCHED_IDLE: any bot or Redis thread that
    wakes takes the core at once; a nice level still made them wait up to a scheduler
    slice, which tripled a PING on a busy 2-core machine). Where that policy is not to be
    had, the lowest nice level."""
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    except (AttributeError, OSError):
        with contextlib.suppress(OSError):
            os.nice(19)


def main() -> None:
    """``python -m memory_core.recall.worker [embedding-worker | query-embedder]``: started
    by the bot (:mod:`memory_core.recall.background`), never by hand."""
    role = sys.argv[1] if len(sys.argv) > 1 else "embedding-worker"
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format=f"{role}: %(message)s")
    if role == "embedding-worker":
        _step_aside()  # (the query embedder answers a waiting reply: normal priority)
    try:
        if role == "query-embedder":
            _answer_queries(sys.stdin.fileno(), _protocol_out())
        else:
            asyncio.run(_main())
    except MemorybotError as exc:
        log.error("%s", exc)
        sys.exit(1)


if __name__ == "__main__":
    main()
