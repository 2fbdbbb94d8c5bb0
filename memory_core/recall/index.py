"""Recall: finding the past messages a new message is about, so they can go in the prompt.

Redis holds the truth (the scope's raw log and its day records); each process keeps a
search index per scope in memory, built from the log on first use and then synced
incrementally in one round trip per search (new entries since the last one, the scope's
epoch and first entry id, and the newest day record). A forget moves the epoch (and an index
built while a forget was still being carried out is built again once it is done); retention
trimming moves the first id: either rebuilds the index, so nothing forgotten or expired is
ever recalled. Day records are known by their day: a new one is noticed however full the
list is, and one trimmed off the list is retired from the index too. One scope syncs one
search at a time (a lock per scope), so concurrent replies never add an entry twice. The
least recently used scopes are dropped when the cached documents pass a limit.

Ranking: BM25 over message terms (:mod:`memory_core.recall.textsearch`), a boost for messages by a
person the query names, and neighbouring turns added where they carry the context (the
question before a short answer, the answer after a question).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import gc
import logging
import re
import threading
import time
import weakref
from array import array
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, NamedTuple

import numpy as np

from memory_core.calendar import day_start, to_ms, zone
from memory_core.errors import MemorybotError
from memory_core.models import DaySummary, LogEntry
from memory_core.recall.embedding import one_blas_thread
from memory_core.recall.textsearch import BM25, terms
from memory_core.store.redis_errors import translates_redis_errors
from memory_core.store.scripts import run_script

log = logging.getLogger(__name__)

SYNC_BATCH = 2000  # entries per XRANGE: parsing a reply holds the loop, so keep them short
DAY_RECORD, NO_SPEAKER = -2, -1  # speaker codes that are not a person
NEIGHBOUR_GAP_MS = 30 * 60 * 1000  # turns further apart than this are not one exchange
SHORT_TURN = 10  # terms: a turn this short rarely stands on its own
FLOOR = 0.1  # a hit must reach this share of what the query's terms could score
SPEAKER_BOOST = 1.15  # messages by a person the query names
NAME_WEIGHT = 0.3  # a name is a filter more than a topic: it weighs less than other words
DATE_BOOST = 0.3  # of the best score, for messages from a day the query names
# Pseudo-relevance feedback: the top documents' most telling words, added with a low
# weight, find the messages that answer a question in other words ("pets" -> "cat").
PRF_DOCS = 3
PRF_TERMS = 20
PRF_WEIGHT = 0.2


class Doc(NamedTuple):
    """One indexed message or day record. A tuple of strings and numbers: the garbage
    collector stops tracking it, so its full passes do not walk 100k documents (they held
    the event loop for over 100 ms during a big build when Doc was a dataclass)."""

    id: str  # the stream id ("" for a day record)
    ms: int
    author: str
    text: str
    kind: str  # "message" | "day" | "retired" (a day record trimmed off the list)
    n_terms: int
    tokens: int = 0  # of the text (the message's stored count; for a day record, estimated)
    day: str = ""  # a day record's day (its identity: one record per day and scope)


@dataclass(frozen=True, slots=True)
class Hit:
    """A recalled group: one matching document with the neighbours that give it context."""

    docs: tuple[Doc, ...]  # chronological
    score: float

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(d.id for d in self.docs if d.id)


@dataclass
class _ScopeIndex:
    epoch: int = -1
    first_id: str = ""
    last_id: str = ""
    # Built (in part) while a forget was written down but not yet carried out: it may hold
    # what the forget deletes, so it is built again once the forget is done.
    provisional: bool = False
    day_rows: dict[str, int] = field(default_factory=dict)  # day -> its record's document
    retired: list[int] = field(default_factory=list)  # documents of records no longer listed
    newest_record: str = ""  # the newest day record as stored, to notice a new one cheaply
    docs: list[Doc] = field(default_factory=list)
    messages: int = 0  # of the docs, log entries (to tell from XLEN whether any left the log)
    bm25: BM25 = field(default_factory=BM25)
    authors: dict[str, str] = field(default_factory=dict)  # lowercase name -> name
    # Per document, for vector maths in ranking: time, and who said it (or DAY_RECORD).
    ms: array[int] = field(default_factory=lambda: array("q"))
    # Embeddings: one row per document, unit length; zero until known.
    vectors: np.ndarray | None = None  # float16
    sketch: np.ndarray | None = None  # float32, SKETCH_DIMS per row (see _put_row)
    vectors_done: int = 0  # documents before this one have been looked up in Redis
    unembedded: list[int] = field(default_factory=list)  # message rows with no vector anywhere
    speaker: array[int] = field(default_factory=lambda: array("i"))
    speaker_ids: dict[str, int] = field(default_factory=dict)

    def add(self, doc: Doc, doc_terms: list[str]) -> None:
        self.docs.append(doc)
        if doc.kind == "message":
            self.messages += 1
        self.bm25.add(doc_terms)
        self.ms.append(doc.ms)
        if doc.kind != "message":
            self.speaker.append(DAY_RECORD)
        elif doc.author:
            self.authors.setdefault(doc.author.lower(), doc.author)
            self.speaker.append(self.speaker_ids.setdefault(doc.author, len(self.speaker_ids)))
        else:
            self.speaker.append(NO_SPEAKER)


# ``await embedder(texts)``: one vector per text (rows of floats or a 2-d array), in order.
Embedder = Callable[[list[str]], Awaitable[Any]]
EMBED_BATCH = 64  # texts per embeddings request (and per background step)
VECTOR_SCAN_BATCH = 1000  # vectors per HSCAN / HMGET round trip when loading them
# Cosine below this is not a match by meaning alone. (0.25 and 0.3 score alike on LoCoMo's
# development set; 0.25 keeps short Japanese messages, whose "speaker: " prefix weighs more.)
VECTOR_MIN = 0.25
# Fusion, tuned on LoCoMo's five development conversations only: with messages embedded in
# context (_embedding_text), 0.3 / 0.6 / 0.8 / 1.0 / 1.5 gave 84.2% / 85.5% / 85.9% / 85.8% /
# 86.2% evidence recall at 3,000 tokens (bare text: 0.0 / 0.3 / 0.6 / 1.0 gave 81.3% / 83.4% /
# 83.2% / 82.3%); 1.0 sits in the middle of the plateau.
SEM_WEIGHT = 1.0
SEM_BASE = 0.2  # cosine at or below this adds nothing (unrelated sentences score ~0.1-0.2)
# Entries parsed and indexed on the event loop at most; a longer batch (a first build, a
# rebuild) is indexed in a worker thread, so other scopes' replies go on meanwhile.
INLINE_ENTRIES = 256


def _unit(vec: np.ndarray) -> np.ndarray:
    norm = float(np.linalg.norm(vec))
    return vec / norm if norm else vec


def _encode(vec: np.ndarray) -> str:
    return base64.b64encode(vec.astype(np.float16).tobytes()).decode("ascii")


def _decode(blob: str) -> np.ndarray:
    return np.frombuffer(base64.b64decode(blob), dtype=np.float16)


# Ranking by meaning at 100k messages: a full float32 scan reads 200 MB per query (tens of
# ms on a busy machine). Instead every vector also has a 128-dimension sketch (a fixed random
# projection: its dot products estimate the cosines, within about 0.1); the sketch ranks
# every message and the best SKETCH_TOP are scored exactly from the full vectors (float16).
SKETCH_DIMS = 128
SKETCH_TOP = 2000
_PROJECTIONS: dict[int, np.ndarray] = {}


def _projection(dims: int) -> np.ndarray:
    proj = _PROJECTIONS.get(dims)
    if proj is None:
        rng = np.random.default_rng(20_26)  # fixed: every process sketches alike
        proj = (rng.standard_normal((dims, SKETCH_DIMS)) / np.sqrt(SKETCH_DIMS)).astype(np.float32)
        _PROJECTIONS[dims] = proj
    return proj


def _put_row(index: _ScopeIndex, row: int, vec: np.ndarray) -> None:
    _put_rows(index, [row], vec[None, :])


def _put_rows(index: _ScopeIndex, rows: list[int], vecs: np.ndarray) -> None:
    """Store documents' vectors (and their sketches), growing the matrices by doubling."""
    if not rows:
        return
    dims = vecs.shape[1]
    if index.vectors is None or index.vectors.shape[1] != dims:
        _reserve(index, max(1024, len(index.docs)), dims, keep=False)
    assert index.vectors is not None and index.sketch is not None
    if max(rows) >= index.vectors.shape[0]:
        _reserve(index, max(max(rows) + 1, index.vectors.shape[0] * 2), dims, keep=True)
    index.vectors[rows] = vecs
    with one_blas_thread():
        index.sketch[rows] = vecs.astype(np.float32) @ _projection(dims)


def _reserve(index: _ScopeIndex, rows: int, dims: int, *, keep: bool) -> None:
    """Room for ``rows`` vectors. The memory is written here (np.zeros only maps it, and the
    first writes, scattered over 150 MB at 100k rows, then stall whoever makes them): a
    build calls this in a worker thread."""
    vectors = np.empty((rows, dims), dtype=np.float16)
    vectors.fill(0)
    sketch = np.empty((rows, SKETCH_DIMS), dtype=np.float32)
    sketch.fill(0)
    if keep and index.vectors is not None and index.sketch is not None:
        vectors[: index.vectors.shape[0]] = index.vectors
        sketch[: index.sketch.shape[0]] = index.sketch
    index.vectors, index.sketch = vectors, sketch


def _put_decoded(
    index: _ScopeIndex, rows: dict[str, int], batch: dict[str, str], found: set[int]
) -> None:
    """Stored vectors of indexed messages into the index, one matrix write per batch (a
    vector for an entry newer than the index waits for the next look; one of another
    model's size is ignored: its message is embedded again)."""
    if not batch:
        return
    if index.vectors is None:
        _reserve(
            index, max(1024, len(index.docs)), len(_decode(next(iter(batch.values())))), keep=False
        )
    assert index.vectors is not None
    dims = index.vectors.shape[1]
    picked: list[int] = []
    vecs: list[np.ndarray] = []
    for entry_id, blob in batch.items():
        row = rows.get(entry_id)
        vec = _decode(blob)
        if row is not None and vec.shape[0] == dims:
            picked.append(row)
            vecs.append(vec)
    if picked:
        _put_rows(index, picked, np.stack(vecs))
        found.update(picked)


def _retire(index: _ScopeIndex, row: int) -> None:
    """Take a day record out of recall without rebuilding the index: its document stays in
    place (rows are positions) but empty, and ranking never scores it."""
    index.docs[row] = index.docs[row]._replace(kind="retired", text="", n_terms=0)
    index.retired.append(row)


_paused_builds = 0
_paused_lock = threading.Lock()


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """No automatic cyclic garbage collection while a big index is built. A build makes no
    cycles (documents are tuples, postings arrays), but its 100k new objects trigger full
    passes, each walking every document, that hold the GIL and so the event loop for
    50-140 ms. Reference counting frees memory as usual; the collector resumes after the
    last concurrent build. (Not gc.freeze(): it would also pin, for good, whatever cyclic
    garbage the rest of the bot made meanwhile, a leak in a long-running process.)"""
    global _paused_builds
    with _paused_lock:
        ours = _paused_builds > 0 or gc.isenabled()  # (off by someone else: left alone)
        if ours:
            _paused_builds += 1
            gc.disable()
    if not ours:
        yield
        return
    try:
        yield
    finally:
        with _paused_lock:
            _paused_builds -= 1
            if _paused_builds == 0:
                gc.enable()


def _day_text(day: DaySummary) -> str:
    return " ".join(x for x in (day.topic, *day.decisions, *day.follow_ups, day.summary) if x)


def _stream_id_key(entry_id: str) -> tuple[int, int]:
    ms, _, seq = entry_id.partition("-")
    return int(ms), int(seq or 0)


@translates_redis_errors
class RecallIndex:
    def __init__(
        self,
        client: Any,
        keys: Any,
        *,
        max_cached_docs: int = 2_000_000,
        embedder: Embedder | None = None,
        embed_in_background: bool = True,
    ) -> None:
        self.client = client
        self.keys = keys
        self.max_cached_docs = max_cached_docs
        self.embedder = embedder
        # A search that finds messages with no vector yet starts their embedding in a
        # background task (never awaited by the reply). Off: only embed_backlog() embeds.
        self.embed_in_background = embed_in_background
        self._embedding: dict[str, asyncio.Task[None]] = {}
        self._indexes: OrderedDict[str, _ScopeIndex] = OrderedDict()
        # One sync at a time per scope: a sync reads where the index ends, waits on Redis,
        # then appends; two at once would append the same entries twice. A lock lives while
        # someone holds or awaits it.
        self._locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()

    def _lock(self, scope: str) -> asyncio.Lock:
        lock = self._locks.get(scope)
        if lock is None:
            lock = self._locks[scope] = asyncio.Lock()
        return lock

    # -- keeping the index in step with Redis (callers hold the scope's lock) -------------
    async def _sync(self, scope: str) -> _ScopeIndex:
        k = self.keys.scope(scope)
        index = self._indexes.get(scope) or _ScopeIndex()
        # One atomic snapshot (the scope's keys share a slot): the log's length must be read
        # at the same instant as its new entries to tell whether anything left it.
        pipe = self.client.pipeline(transaction=True)
        pipe.hmget(k.state, ["epoch", "forgets_pending"])
        pipe.xrange(k.log, min="-", max="+", count=1)
        start = f"({index.last_id}" if index.last_id else "-"
        pipe.xrange(k.log, min=start, max="+", count=SYNC_BATCH)
        pipe.lindex(k.episodes, -1)
        pipe.xlen(k.log)
        (epoch_raw, pending_raw), first, fresh, newest_record, log_length = await pipe.execute()
        epoch = int(epoch_raw or 0)
        forget_pending = pending_raw == "1"
        first_id = first[0][0] if first else ""
        moved = index.epoch != epoch
        trimmed = bool(index.first_id) and (
            not first_id or _stream_id_key(first_id) > _stream_id_key(index.first_id)
        )
        settled = index.provisional and not forget_pending
        stale = moved or trimmed or settled
        if stale and index.docs:
            kept_all = (
                not (trimmed or settled or forget_pending)
                and len(fresh) < SYNC_BATCH
                and int(log_length) == index.messages + len(fresh)
            )
            if not kept_all:
                return await self._rebuild(scope, epoch, first_id)
            # The epoch moved but no message left the log (a tier or fact edit, a forget of
            # a fact): the index stands; only day records may have been rewritten.
            await self._sync_days(scope, index, compare_text=True)
        index.epoch, index.first_id = epoch, index.first_id or first_id
        index.provisional = forget_pending or (index.provisional and not stale)
        await self._index_entries(index, fresh)
        if len(fresh) == SYNC_BATCH:  # a build (or a long absence): many entries to come
            with _collector_paused():
                while len(fresh) == SYNC_BATCH:
                    fresh = await self.client.xrange(
                        k.log, min=f"({index.last_id}", max="+", count=SYNC_BATCH
                    )
                    await self._index_entries(index, fresh)
        if (newest_record or "") != index.newest_record:
            await self._sync_days(scope, index)
            index.newest_record = newest_record or ""
        self._remember(scope, index)
        return index

    async def _sync_days(
        self, scope: str, index: _ScopeIndex, *, compare_text: bool = False
    ) -> None:
        """Index the day records not indexed yet, and retire those no longer listed. The list
        is trimmed from its oldest end, so records are known by their day (one record per
        day), never by their place in it. ``compare_text``: also replace a record whose text
        changed (a forget may rewrite any of them)."""
        raw = await self.client.lrange(self.keys.scope(scope).episodes, 0, -1)
        listed = [DaySummary.from_json(blob) for blob in raw]
        for gone in index.day_rows.keys() - {day.day for day in listed}:
            _retire(index, index.day_rows.pop(gone))
        for day in listed:
            row = index.day_rows.get(day.day)
            if row is not None and compare_text and index.docs[row].text != _day_text(day):
                _retire(index, index.day_rows.pop(day.day))
                row = None
            if row is None:
                self._add_day(index, day)

    async def _rebuild(self, scope: str, epoch: int, first_id: str) -> _ScopeIndex:
        self._indexes.pop(scope, None)
        index = _ScopeIndex(epoch=epoch, first_id=first_id)
        self._indexes[scope] = index
        return await self._sync(scope)

    async def _index_entries(
        self, index: _ScopeIndex, raw: Sequence[tuple[str, dict[str, str]]]
    ) -> None:
        """Index new log entries: a few on the loop (the usual sync before a reply), many in
        a worker thread (a build or rebuild: seconds of CPU at 100k messages). The scope's
        lock is held meanwhile, so nothing else reads or grows this index."""
        if len(raw) <= INLINE_ENTRIES:
            self._append_entries(index, raw)
        else:
            await asyncio.to_thread(self._append_in_slices, index, raw)

    @classmethod
    def _append_in_slices(
        cls, index: _ScopeIndex, raw: Sequence[tuple[str, dict[str, str]]]
    ) -> None:
        """In a worker thread: slices of INLINE_ENTRIES, each followed by a yield of the
        GIL, so the event loop gets it back within a slice, not after a switch interval
        lost to a busy machine's scheduler."""
        for start in range(0, len(raw), INLINE_ENTRIES):
            cls._append_entries(index, raw[start : start + INLINE_ENTRIES])
            time.sleep(0)

    @staticmethod
    def _append_entries(index: _ScopeIndex, raw: Sequence[tuple[str, dict[str, str]]]) -> None:
        for entry_id, fields in raw:
            entry = LogEntry.from_stream(entry_id, fields)
            doc_terms = terms(entry.text)
            index.add(
                Doc(
                    id=entry.id,
                    ms=entry.ms,
                    author=entry.author,
                    text=entry.text,
                    kind="message",
                    n_terms=len(doc_terms),
                    tokens=entry.tokens,
                ),
                doc_terms,
            )
            index.last_id = entry.id
            if not index.first_id:
                index.first_id = entry.id

    def _add_day(self, index: _ScopeIndex, day: DaySummary) -> None:
        text = _day_text(day)
        doc_terms = terms(text)
        index.add(
            Doc(
                id="",
                ms=to_ms(day_start(day.day, "UTC"))
                + 12 * 3_600_000,  # midday: the right date anywhere
                author="",
                text=text,
                kind="day",
                n_terms=len(doc_terms),
                tokens=len(text) // 3 + 1,  # an over-estimate: costs are re-measured later
                day=day.day,
            ),
            doc_terms,
        )
        index.day_rows[day.day] = len(index.docs) - 1

    def _remember(self, scope: str, index: _ScopeIndex) -> None:
        self._indexes[scope] = index
        self._indexes.move_to_end(scope)
        total = sum(len(i.docs) for i in self._indexes.values())
        while total > self.max_cached_docs and len(self._indexes) > 1:
            _, dropped = self._indexes.popitem(last=False)
            total -= len(dropped.docs)

    def forget(self, scope: str) -> None:
        self._indexes.pop(scope, None)

    # -- searching ---------------------------------------------------------------------
    async def search(
        self,
        scope: str,
        query: str,
        *,
        exclude_ids: Sequence[str] = (),
        limit: int = 40,
        tz: str = "UTC",
    ) -> list[Hit]:
        """The best groups for ``query``, best first; [] when nothing is relevant. ``tz``:
        the scope's timezone, for questions that name a day. Only the query is embedded
        here; messages are embedded once, in the background, and their vectors loaded."""
        excluded = {x for x in exclude_ids if x}  # "" would exclude every day record
        q_vec = await self._embed_query(scope, query) if self.embedder else None
        async with self._lock(scope):
            index = await self._sync(scope)
            similarity = None
            if self.embedder is not None:
                await self._sync_vectors(scope, index)
                if q_vec is not None:
                    similarity = _similarity(index, q_vec)
            # Ranked under the lock too: no other sync may grow the index meanwhile.
            hits = rank(
                index, query, exclude_ids=excluded, limit=limit, tz=tz, similarity=similarity
            )
            backlog = bool(index.unembedded)
        if backlog and self.embed_in_background:
            self.embed_soon(scope)
        return hits

    async def warm(self, scope: str) -> int:
        async with self._lock(scope):
            return len((await self._sync(scope)).docs)

    # -- embeddings ----------------------------------------------------------------------
    async def _embed_query(self, scope: str, query: str) -> np.ndarray | None:
        """The query's unit vector, or None if embeddings failed (recall then runs on words
        alone: a reply never fails for want of a vector)."""
        assert self.embedder is not None
        try:
            [q] = list(await self.embedder([query]))
        except MemorybotError as exc:
            log.warning("embeddings unavailable for %s, recalling by words only: %s", scope, exc)
            return None
        return _unit(np.asarray(q, dtype=np.float32))

    async def _sync_vectors(self, scope: str, index: _ScopeIndex) -> None:
        """Every vector stored for the index's messages (another process, or this one before
        a restart, made them); the messages with none are noted for the background."""
        key = self.keys.scope(scope).vectors
        if index.vectors_done == 0 and index.docs:
            await self._load_stored_vectors(key, index)
        elif index.vectors_done < len(index.docs):
            await self._fetch_new_vectors(key, index)
        index.vectors_done = len(index.docs)

    async def _load_stored_vectors(self, key: str, index: _ScopeIndex) -> None:
        """All of the scope's stored vectors, in batches (HSCAN: a scope may have 100k)."""
        rows = {d.id: i for i, d in enumerate(index.docs) if d.kind == "message"}
        found: set[int] = set()
        with _collector_paused():
            await self._scan_vectors(key, index, rows, found)
        index.unembedded = sorted(row for row in rows.values() if row not in found)

    async def _scan_vectors(
        self, key: str, index: _ScopeIndex, rows: dict[str, int], found: set[int]
    ) -> None:
        cursor = 0
        while True:
            cursor, batch = await self.client.hscan(key, cursor, count=VECTOR_SCAN_BATCH)
            if batch and index.vectors is None:
                dims = len(_decode(next(iter(batch.values()))))
                room = len(index.docs) + len(index.docs) // 4 + 1024  # and for what comes
                await asyncio.to_thread(_reserve, index, room, dims, keep=False)
            _put_decoded(index, rows, batch, found)
            if not int(cursor):
                break

    async def _fetch_new_vectors(self, key: str, index: _ScopeIndex) -> None:
        """The stored vectors of the messages indexed since the last look."""
        new = [
            i for i in range(index.vectors_done, len(index.docs)) if index.docs[i].kind == "message"
        ]
        for start in range(0, len(new), VECTOR_SCAN_BATCH):
            rows = new[start : start + VECTOR_SCAN_BATCH]
            stored = await self.client.hmget(key, [index.docs[i].id for i in rows])
            for row, blob in zip(rows, stored, strict=True):
                if blob:
                    _put_row(index, row, _decode(blob))
                else:
                    index.unembedded.append(row)

    def embed_soon(self, scope: str) -> None:
        """Embed the scope's messages that have no vector yet, in a background task (one per
        scope at a time)."""
        if self.embedder is None:
            return
        running = self._embedding.get(scope)
        if running is not None and not running.done():
            return
        self._embedding[scope] = asyncio.create_task(self._embed_in_background(scope))

    async def _embed_in_background(self, scope: str) -> None:
        try:
            await self.embed_backlog(scope)
        except MemorybotError as exc:
            log.warning("could not embed new messages of %s (later, then): %s", scope, exc)
        except Exception:  # a background task has no caller to tell: log it, loudly
            log.exception("embedding the messages of %s failed", scope)
        finally:
            if self._embedding.get(scope) is asyncio.current_task():
                del self._embedding[scope]

    async def drain(self) -> None:
        """Wait for the background embedding tasks (shutdown, end of a test)."""
        while self._embedding:
            await asyncio.gather(*list(self._embedding.values()), return_exceptions=True)

    async def embed_backlog(self, scope: str, *, limit: int | None = None) -> int:
        """Embed (up to ``limit``) messages of the scope that have no vector anywhere, newest
        first, store their vectors in Redis for every process, and return how many were
        embedded. The model runs with the scope unlocked: searches go on meanwhile."""
        if self.embedder is None:
            return 0
        key = self.keys.scope(scope)
        done = 0
        while limit is None or done < limit:
            async with self._lock(scope):
                index = await self._sync(scope)
                await self._sync_vectors(scope, index)
                step = EMBED_BATCH if limit is None else min(EMBED_BATCH, limit - done)
                rows = index.unembedded[-step:]
                if not rows:
                    break
                del index.unembedded[-len(rows) :]
                ids = [index.docs[i].id for i in rows]
                contexts = [_embedding_context(index.docs, i) for i in rows]
                texts = [
                    _embedding_text(index.docs[i], c) for i, c in zip(rows, contexts, strict=True)
                ]
            try:
                vecs = await self.embedder(texts)
            except BaseException:
                index.unembedded.extend(rows)  # (this index, or a stale one: harmless)
                raise
            units = [_unit(np.asarray(v, dtype=np.float32)) for v in vecs]
            args: list[str] = []
            for entry_id, context, unit in zip(ids, contexts, units, strict=True):
                args += [entry_id, context.id if context else "", _encode(unit)]
            # Stored only while its message and its context are (a forget may delete them
            # meanwhile).
            kept = await run_script(self.client, "store_vectors", [key.log, key.vectors], args)
            async with self._lock(scope):
                if self._indexes.get(scope) is index:
                    for row, entry_id, unit, stored in zip(rows, ids, units, kept, strict=True):
                        if int(stored) and index.docs[row].id == entry_id:
                            _put_row(index, row, unit)
            done += len(rows)
        return done


def _embedding_context(docs: list[Doc], i: int) -> Doc | None:
    """The message a message is embedded with: the one before it in the same exchange."""
    if i > 0 and _same_exchange(docs[i - 1], docs[i]):
        return docs[i - 1]
    return None


def _embedding_text(doc: Doc, context: Doc | None) -> str:
    """What a message's vector is made from: who said it and what, after the turn it answers
    ("Yes, last week" means little alone). Questions name people, so the names help too.
    (On LoCoMo's development set: 83.4% with the bare text, 85.8% with this.)"""
    line = f"{doc.author or 'someone'}: {doc.text}"
    if context is None:
        return line
    return f"{context.author or 'someone'}: {context.text}\n{line}"


def _similarity(index: _ScopeIndex, q_vec: np.ndarray) -> np.ndarray | None:
    """Cosine similarity of the query to every document (zero where no vector is known):
    estimated from the sketches, exact for the SKETCH_TOP best."""
    if index.vectors is None or index.sketch is None or not index.docs:
        return None
    if q_vec.shape[0] != index.vectors.shape[1]:
        return None
    with one_blas_thread():
        return _cosines(index, index.vectors, index.sketch, q_vec)


def _cosines(
    index: _ScopeIndex, vectors: np.ndarray, sketch: np.ndarray, q_vec: np.ndarray
) -> np.ndarray:
    sims = np.zeros(len(index.docs), dtype=np.float32)
    known = min(len(index.docs), vectors.shape[0])
    if known <= SKETCH_TOP:
        sims[:known] = vectors[:known].astype(np.float32) @ q_vec
        return sims
    estimate = sketch[:known] @ (q_vec @ _projection(q_vec.shape[0]))
    top = np.argpartition(-estimate, SKETCH_TOP)[:SKETCH_TOP]
    sims[top] = vectors[top].astype(np.float32) @ q_vec
    return sims


def _named_authors(index: _ScopeIndex, query: str) -> set[str]:
    words = set(re.findall(r"[\w']+", query.lower()))
    return {name for low, name in index.authors.items() if low in words}


_MONTHS = (
    "january february march april may june july august september october november december"
).split()
_MONTH_ABBR = [m[:3] for m in _MONTHS]
_MONTH = "(" + "|".join(_MONTH_ABBR) + ")"
_DATE_PATTERNS = (
    # October 13, 2023 / Oct 13 2023 / October 13
    re.compile(r"\b" + _MONTH + r"[a-z]*\.?\s+(\d{1,2})(?:st|nd|rd|th)?(?:,?\s+(\d{4}))?", re.I),
    # 13 October 2023 / 13 Oct
    re.compile(
        r"\b(\d{1,2})(?:st|nd|rd|th)?\s+(?:of\s+)?" + _MONTH + r"[a-z]*\.?(?:,?\s+(\d{4}))?", re.I
    ),
    # 2023-10-13
    re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b"),
    # 2023年10月13日 / 10月13日
    re.compile(r"(?:(\d{4})年)?(\d{1,2})月(\d{1,2})日"),
)


def query_days(query: str) -> set[tuple[int, int]]:
    """(month, day) pairs a query names: "on October 13, 2023", "13 May", "10月13日"."""
    found: set[tuple[int, int]] = set()
    for n, pattern in enumerate(_DATE_PATTERNS):
        for m in pattern.finditer(query):
            try:
                if n == 0:
                    month, day = _MONTH_ABBR.index(m.group(1).lower()[:3]) + 1, int(m.group(2))
                elif n == 1:
                    month, day = _MONTH_ABBR.index(m.group(2).lower()[:3]) + 1, int(m.group(1))
                elif n == 2:
                    month, day = int(m.group(2)), int(m.group(3))
                else:
                    month, day = int(m.group(2)), int(m.group(3))
            except ValueError:
                continue
            if 1 <= month <= 12 and 1 <= day <= 31:
                found.add((month, day))
    return found


def rank(
    index: _ScopeIndex,
    query: str,
    *,
    exclude_ids: set[str],
    limit: int,
    tz: str = "UTC",
    similarity: np.ndarray | None = None,
) -> list[Hit]:
    """Score every document against ``query`` and group the best with their context."""
    q_terms = terms(query)
    if (not q_terms and similarity is None) or not index.docs:
        return []
    named = _named_authors(index, query)
    weights = {t: NAME_WEIGHT for t in (n.lower() for n in named)}
    bm25 = index.bm25
    scores = bm25.score_array(q_terms, weights=weights)
    _drop_retired(index, scores)
    if not scores.any() and (similarity is None or float(similarity.max()) < VECTOR_MIN):
        return []
    _expand(index, scores, q_terms, weights)
    best = float(scores.max())
    days = query_days(query)
    if days:
        # A question about a day is about the messages of that day, matching words or not.
        on_day = _on_days(index, days, tz)
        scores[on_day] += DATE_BOOST * best
    # A day record stands in for messages that have expired; while a day's own messages are
    # still here, they are the better memory and the record would only take their room.
    speakers = np.frombuffer(index.speaker, dtype=np.int32)
    times = np.frombuffer(index.ms, dtype=np.int64)
    records = speakers == DAY_RECORD
    if (~records).any():
        oldest = int(times[~records].min())
        scores[records & (times >= oldest - 86_400_000)] = 0.0
    _drop_retired(index, scores)  # (again: the expansion and the date boost may score them)
    if named:
        ids = [index.speaker_ids[n] for n in named if n in index.speaker_ids]
        by_named = np.isin(np.frombuffer(index.speaker, dtype=np.int32), ids)
        scores[by_named] *= SPEAKER_BOOST
    reachable = sum(bm25.idf(t) * weights.get(t, 1.0) for t in set(q_terms))
    floor = max(FLOOR * reachable, 0.5)
    candidates = np.nonzero(scores >= floor)[0]
    # Best first; among equals the newer message first.
    order = candidates[np.lexsort((-candidates, -scores[candidates]))]
    if similarity is not None:
        order, scores = _fuse(scores, floor, similarity, records)
    docs = index.docs
    hits: list[Hit] = []
    used: set[int] = set()
    for doc_i in order.tolist():
        if len(hits) >= limit:
            break
        if doc_i in used or docs[doc_i].id in exclude_ids:
            continue
        group = [g for g in _with_neighbours(docs, doc_i, exclude_ids) if g not in used]
        if not group:
            continue
        used.update(group)
        hits.append(Hit(docs=tuple(docs[g] for g in sorted(group)), score=float(scores[doc_i])))
    return hits


def _drop_retired(index: _ScopeIndex, scores: np.ndarray) -> None:
    """Day records trimmed off the records list are recalled no more."""
    if index.retired:
        scores[index.retired] = 0.0


def _fuse(
    scores: np.ndarray, floor: float, similarity: np.ndarray, records: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The word score (its boosts for dates and names included) as a share of the best, plus
    SEM_WEIGHT times how far the meaning is above SEM_BASE: a message found either way can
    be recalled; found both ways, it comes first. (Reciprocal rank fusion threw the word
    score's boosts away: 78.8% against 81.3% for words alone on the development set.)"""
    best = float(scores.max()) or 1.0
    lexical = np.where(scores >= floor, scores / best, 0.0)
    sims = similarity.copy()
    sims[records[: len(sims)]] = 0.0  # day records are ranked by words only
    meaning = np.clip((sims - SEM_BASE) / (1 - SEM_BASE), 0.0, None)
    fused = (lexical + SEM_WEIGHT * meaning).astype(np.float32)
    fused[(lexical == 0) & (sims < VECTOR_MIN)] = 0.0
    candidates = np.nonzero(fused)[0]
    return candidates[np.lexsort((-candidates, -fused[candidates]))], fused


def _on_days(index: _ScopeIndex, days: set[tuple[int, int]], tz: str) -> np.ndarray:
    """Which documents were written on one of ``days`` (month, day) in ``tz``, any year."""
    ms = np.frombuffer(index.ms, dtype=np.int64)
    mask = np.zeros(len(ms), dtype=bool)
    first = datetime.fromtimestamp(int(ms.min()) / 1000, tz=zone(tz)).year
    last = datetime.fromtimestamp(int(ms.max()) / 1000, tz=zone(tz)).year
    for year in range(first, last + 1):
        for month, day in days:
            try:
                start = datetime(year, month, day, tzinfo=zone(tz))
            except ValueError:
                continue  # February 30th
            begin = int(start.timestamp() * 1000)
            end = int((start + timedelta(days=1)).timestamp() * 1000)
            mask |= (ms >= begin) & (ms < end)
    return mask


def _expand(
    index: _ScopeIndex, scores: np.ndarray, q_terms: list[str], weights: dict[str, float]
) -> None:
    """Pseudo-relevance feedback: add the top documents' rarest words to the query."""
    bm25 = index.bm25
    top = np.argsort(-scores, kind="stable")[:PRF_DOCS]
    pool: dict[str, float] = {}
    for d in top.tolist():
        if scores[d] <= 0:
            break
        for t in terms(index.docs[d].text):
            if t not in weights and t not in q_terms:
                pool[t] = pool.get(t, 0.0) + bm25.idf(t)
    expansion = sorted(pool, key=lambda t: (-pool[t], t))[:PRF_TERMS]
    if expansion:
        scores += bm25.score_array(expansion, weights=dict.fromkeys(expansion, PRF_WEIGHT))


def _with_neighbours(docs: list[Doc], i: int, exclude: set[str]) -> list[int]:
    """The hit, plus the turn before it when the hit is a short answer, and the turn after
    it when the hit is a question or that next turn is short (an answer)."""
    group = [i]
    hit = docs[i]
    if hit.kind != "message":
        return group
    prev_i, next_i = i - 1, i + 1
    if prev_i >= 0 and _same_exchange(docs[prev_i], hit):
        prev = docs[prev_i]
        if hit.n_terms < SHORT_TURN or prev.text.rstrip().endswith("?"):
            group.insert(0, prev_i)
    if next_i < len(docs) and _same_exchange(hit, docs[next_i]):
        nxt = docs[next_i]
        if hit.text.rstrip().endswith("?") or nxt.n_terms < SHORT_TURN:
            group.append(next_i)
    return [g for g in group if docs[g].id not in exclude or g == i]


def _same_exchange(a: Doc, b: Doc) -> bool:
    return a.kind == b.kind == "message" and 0 <= b.ms - a.ms <= NEIGHBOUR_GAP_MS
