"""Keeping each scope's recall index in step with Redis, and the cache of those indexes.

Redis holds the truth (the scope's raw log and its day records); each process keeps a
search index per scope in memory, built from the log on first use and then synced
incrementally in one round trip per search (new entries since the last one, the scope's
epoch and first entry id, and the newest day record). A forget moves the epoch (and an index
built while a forget was still being carried out is built again once it is done); retention
trimming moves the first id: either rebuilds the index, so nothing forgotten or expired is
ever recalled. Day records are known by their day: a new one is noticed however full the
list is, and one trimmed off the list is retired from the index too. One scope syncs one
search at a time (a lock per scope), so concurrent replies never add an entry twice. The
least recently used scopes are dropped when the cached indexes' bytes pass a limit
(``memory.recall_cache_mb``); a dropped scope is built again, off the event loop, by its
next search. A scope too big for the whole limit is indexed over its newest messages only
(its older days recalled through their day records); retention trimming messages older
than that window (a big channel's nightly trim) leaves it as it is, only a trim that reaches
the window's first message builds it again.

A search's sync also brings vectors when the index's are in step: those of the new entries
and of the newest messages that had none at the last look, in the same round trip.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import gc
import sys
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from memory_core.models import DaySummary
from memory_core.recall.documents import (
    ScopeIndex,
    add_day_record,
    add_entries,
    day_text,
    retire_day_record,
)
from memory_core.recall.vectors import (
    decode_vector,
    put_stored,
    reserve_rows,
    room_to_grow,
    vector_row_bytes,
)
from memory_core.store.recall_reads import Entries, LogSnapshot, RecallStore

SYNC_BATCH = 2000  # entries per XRANGE: parsing a reply holds the loop, so keep them short
VECTOR_SCAN_BATCH = 1000  # vectors per HSCAN / HMGET round trip when loading them
# Entries parsed and indexed on the event loop at most; a longer batch (a first build, a
# rebuild) is indexed in a worker thread, so other scopes' replies go on meanwhile.
INLINE_ENTRIES = 256
# A scope whose index would not fit in the whole cache indexes its newest messages only: as
# many as fill this share of the cache (the rest is room to grow before the next window), at
# the bytes a message took in the scope's last build; before any, estimated: its text,
# postings and columns (~250 bytes for a chat message) and its vector's row (the stored
# vectors' dimensions, plus the sketch). An index found bigger is built again at what it
# measured.
WINDOW_SHARE = 0.75
MESSAGE_BYTES_BUT_VECTOR = 250


_paused_builds = 0
_paused_lock = threading.Lock()


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """No automatic cyclic garbage collection while a big index is built, and what the
    build made out of the collector's way after it. An index keeps no object per message
    (:class:`~memory_core.recall.documents.DocTable`), but a build parses a scope's whole
    log, batch by batch, into short-lived objects, and the collector's passes over them
    held the loop in the middle of whatever the bot was doing (70-100 ms at 100k when
    documents were tuples it kept tracking). So the build collects its young objects
    slice by slice (see ``_append_in_slices``), and after the last concurrent build
    everything tracked is frozen (``gc.freeze()``): full passes skip it from then on.
    Frozen objects are still freed by reference counting; what the freeze keeps for good
    is cyclic garbage made since the last young collection, a small price paid once per
    big build."""
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
                gc.freeze()
                gc.enable()


def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim`` (None elsewhere)."""
    if sys.platform != "linux":
        return None
    try:
        trim: Callable[[int], int] = ctypes.CDLL(ctypes.util.find_library("c")).malloc_trim
    except (OSError, AttributeError):  # (musl has none)
        return None
    return trim


_TRIM = _malloc_trim()


def give_back_freed_memory() -> None:
    """In a worker thread, after a big build: hand the heap the build freed (the Redis
    replies it parsed, its postings before compaction) back to the system. glibc keeps it
    otherwise: at 100k messages the process stayed ~50 MB above its indexes' bytes."""
    if _TRIM is not None:
        _TRIM(0)


def _append_in_slices(index: ScopeIndex, raw: Sequence[tuple[str, dict[str, str]]]) -> None:
    """In a worker thread: slices of INLINE_ENTRIES, each followed by a yield of the
    GIL, so the event loop gets it back within a slice, not after a switch interval
    lost to a busy machine's scheduler. While the collector is paused for the build,
    each slice's young objects are collected here, a few hundred at a time, instead of
    all at the first collection after the build."""
    for start in range(0, len(raw), INLINE_ENTRIES):
        add_entries(index, raw[start : start + INLINE_ENTRIES])
        if not gc.isenabled():
            gc.collect(0)
        time.sleep(0)


async def _grow_vectors(index: ScopeIndex) -> None:
    """Room for the next vectors, made ahead: a big index's in a worker thread."""
    rows = room_to_grow(index)
    if not rows or index.vectors is None:
        return
    dims = index.vectors.shape[1]
    if rows > 8 * INLINE_ENTRIES:
        await asyncio.to_thread(reserve_rows, index, rows, dims, keep=True)
    else:
        reserve_rows(index, rows, dims, keep=True)


def _stream_id_key(entry_id: str) -> tuple[int, int]:
    milliseconds, _, sequence = entry_id.partition("-")
    return int(milliseconds), int(sequence or 0)


@dataclass
class CacheStats:
    """What the cache has done since the process started (for /metrics and the health
    page)."""

    bytes: int = 0  # the cached indexes' memory
    scopes: int = 0
    evictions: int = 0
    builds: int = 0  # indexes built whole (first search, after an eviction, a rebuild)
    rebuilds_after_eviction: int = 0
    build_seconds: float = 0.0  # all builds together
    last_build_seconds: float = 0.0


class IndexCache:
    """The scopes' indexes in this process, least recently used first, and their bound: the
    least recently used go when the cached indexes' bytes (:meth:`ScopeIndex.nbytes`) pass
    ``max_bytes`` (the newest always stays: one too big on its own is built again over its
    newest messages, see :meth:`IndexSync._fresh`)."""

    EVICTED_KEPT = 10_000  # evicted scopes remembered, to count their rebuilds

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.indexes: OrderedDict[str, ScopeIndex] = OrderedDict()
        self._counted: dict[str, int] = {}  # each cached index's bytes when last counted
        self._cached_bytes = 0
        self._evicted: OrderedDict[str, None] = OrderedDict()
        self.stats = CacheStats()

    @property
    def cached_bytes(self) -> int:
        return self._cached_bytes

    def get(self, scope: str) -> ScopeIndex | None:
        return self.indexes.get(scope)

    def remember(self, scope: str, index: ScopeIndex) -> None:
        """The scope's index, counted again and made the most recently used; the least
        recently used others go while the bound is passed."""
        self.indexes[scope] = index
        self.indexes.move_to_end(scope)
        # Counted as each scope is remembered (a sum over every cached scope on each search
        # cost a reply 0.1-0.2 ms at a thousand scopes); a count is a few getsizeofs.
        size = index.nbytes()
        self._cached_bytes += size - self._counted.get(scope, 0)
        self._counted[scope] = size
        while self._cached_bytes > self.max_bytes and len(self.indexes) > 1:
            dropped, _ = self.indexes.popitem(last=False)
            self._cached_bytes -= self._counted.pop(dropped, 0)
            self.stats.evictions += 1
            self._evicted[dropped] = None
            if len(self._evicted) > self.EVICTED_KEPT:
                self._evicted.popitem(last=False)
        self.stats.bytes, self.stats.scopes = self._cached_bytes, len(self.indexes)

    def built(self, scope: str, seconds: float) -> None:
        """A scope's index was built whole in ``seconds``."""
        self.stats.builds += 1
        self.stats.build_seconds += seconds
        self.stats.last_build_seconds = seconds
        if scope in self._evicted:
            del self._evicted[scope]
            self.stats.rebuilds_after_eviction += 1

    def outgrown(self, scope: str) -> bool:
        """The scope's index alone is past the bound (it is kept while it is searched, then
        built again over its newest messages)."""
        return self._counted.get(scope, 0) > self.max_bytes

    def drop(self, scope: str) -> ScopeIndex | None:
        self._cached_bytes -= self._counted.pop(scope, 0)
        dropped = self.indexes.pop(scope, None)
        self.stats.bytes, self.stats.scopes = self._cached_bytes, len(self.indexes)
        return dropped


class IndexSync:
    """Each scope's index in step with its log and day records, one sync at a time per
    scope (callers hold :meth:`lock`). ``worker_embeds``: an embedding worker stores the
    vectors of new messages, so a search's sync also looks again for those that had none."""

    def __init__(self, store: RecallStore, *, cache_bytes: int, worker_embeds: bool) -> None:
        self.store = store
        self.cache = IndexCache(cache_bytes)
        self.worker_embeds = worker_embeds
        # One sync at a time per scope: a sync reads where the index ends, waits on Redis,
        # then appends; two at once would append the same entries twice. A lock lives while
        # someone holds or awaits it.
        self._locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()
        self._message_bytes: dict[str, int] = {}  # what a message took in a scope's last build
        self.with_vectors = False  # searches load the messages' vectors (set by the index)

    def lock(self, scope: str) -> asyncio.Lock:
        lock = self._locks.get(scope)
        if lock is None:
            lock = self._locks[scope] = asyncio.Lock()
        return lock

    def forget(self, scope: str) -> None:
        self.cache.drop(scope)

    async def sync(self, scope: str, *, vectors: bool = False) -> ScopeIndex:
        """The scope's index in step with its log (the caller holds the scope's lock).
        ``vectors`` (a search): when the index's vectors are in step, the new entries'
        vectors and those of the newest messages that had none at the last look come in the
        same round trip (``index.synced_vectors``)."""
        cached = self.cache.get(scope)
        if cached is not None and self.cache.outgrown(scope):
            # Grown past the whole cache: built again over the newest messages that fit, at
            # what a message takes in it, vectors included.
            self._note_message_bytes(scope, cached)
            return await self._rebuild(scope, cached.epoch)
        if cached is not None:
            return await self._sync(scope, cached, vectors=vectors)
        started = time.perf_counter()
        index = await self._sync(scope, await self._fresh(scope), vectors=vectors)
        self._built(scope, index, time.perf_counter() - started)
        return index

    async def _fresh(self, scope: str, epoch: int = -1) -> ScopeIndex:
        """An empty index for a build: over the whole log, or, when the log would not fit
        in the cache, over its newest messages (from just after ``last_id``)."""
        index = ScopeIndex(epoch=epoch)  # (its first id: from its first sync's snapshot)
        per_message = self._message_bytes.get(scope, 0)
        if not per_message:
            per_message = MESSAGE_BYTES_BUT_VECTOR
            stored = await self.store.a_vector(scope) if self.with_vectors else ""
            if stored:
                per_message += vector_row_bytes(len(decode_vector(stored)))
        if await self.store.log_length(scope) * per_message <= self.cache.max_bytes:
            return index
        fits = max(1, int(self.cache.max_bytes * WINDOW_SHARE) // per_message)
        before, skipped = await self.store.window_start(scope, fits)
        if before:
            index.last_id, index.skipped = before, skipped
        return index

    def _built(self, scope: str, index: ScopeIndex, seconds: float) -> None:
        self.cache.built(scope, seconds)
        if index.vectors is not None or not self.with_vectors:
            self._note_message_bytes(scope, index)
        # (Else its vectors come after the build: measured when they are in, see sync.)

    def _note_message_bytes(self, scope: str, index: ScopeIndex) -> None:
        if index.docs:
            self._message_bytes[scope] = index.nbytes() // len(index.docs)
            if len(self._message_bytes) > IndexCache.EVICTED_KEPT:
                del self._message_bytes[next(iter(self._message_bytes))]

    async def _sync(self, scope: str, index: ScopeIndex, *, vectors: bool) -> ScopeIndex:
        index.synced_vectors = False
        in_step = vectors and bool(index.docs) and index.vectors_done == len(index.docs)
        again = index.unembedded[-VECTOR_SCAN_BATCH:] if in_step and self.worker_embeds else []
        # One atomic snapshot (the scope's keys share a slot): the log's length must be read
        # at the same instant as its new entries to tell whether anything left it.
        snapshot = await self.store.snapshot(
            scope,
            after=index.last_id,
            count=SYNC_BATCH,
            vectors_of=[index.docs.id(row) for row in again],
            fresh_vectors_upto=INLINE_ENTRIES if in_step else 0,
        )
        stale, kept_all = self._staleness(index, snapshot)
        if stale and index.docs:
            if not kept_all:
                return await self._rebuild(scope, snapshot.epoch)
            # The epoch moved but no message left the log (a tier or fact edit, a forget of
            # a fact): the index stands; only day records may have been rewritten.
            await self._sync_days(scope, index, compare_text=True)
        if not stale and index.skipped and len(snapshot.fresh) < SYNC_BATCH:
            # Retention may have trimmed messages before the window (none of its own): the
            # log's length says how many are left before it.
            index.skipped = snapshot.log_length - index.messages - len(snapshot.fresh)
        index.epoch = snapshot.epoch
        if not index.skipped:  # (a window's first is its own first message, set as indexed)
            index.first_id = index.first_id or snapshot.first_id
        index.provisional = snapshot.forget_pending or (index.provisional and not stale)
        first_new = len(index.docs)
        await self._index_all_after(scope, index, snapshot.fresh)
        if snapshot.newest_record != index.newest_record:
            await self._sync_days(scope, index)
            index.newest_record = snapshot.newest_record
        await _grow_vectors(index)
        if in_step and (not snapshot.fresh or snapshot.fresh_vectors is not None):
            # (Read with the entries: they were few, all in the snapshot's one batch.)
            new_rows = list(range(first_new, first_new + len(snapshot.fresh)))
            if again:
                del index.unembedded[-len(again) :]
            put_stored(index, again + new_rows, snapshot.again + (snapshot.fresh_vectors or []))
            index.vectors_done = len(index.docs)
            index.synced_vectors = True
        if index.bm25.needs_compaction():
            # The postings added since the last compaction merged into the flat arrays (once
            # after a build): copies of all the index's postings, off the loop for a big one.
            if len(index.docs) > 8 * INLINE_ENTRIES:
                await asyncio.to_thread(index.bm25.compact)
            else:
                index.bm25.compact()
        if len(index.docs) - first_new > 8 * INLINE_ENTRIES:
            await asyncio.to_thread(give_back_freed_memory)
        self.cache.remember(scope, index)
        return index

    @staticmethod
    def _staleness(index: ScopeIndex, snapshot: LogSnapshot) -> tuple[bool, bool]:
        """Whether the index may hold what left the log (the epoch moved: a forget, an edit;
        the log was trimmed at its start; a forget it was built during is done), and whether
        every message it holds is still there all the same (only the epoch moved, and the
        log is as long as what is indexed and what is new)."""
        moved = index.epoch != snapshot.epoch
        if not index.first_id:
            trimmed = False
        elif not snapshot.first_id:
            trimmed = True
        elif index.skipped:
            # A window over the newest messages: trimmed only when retention reached its
            # first message or the one before (the first's vector was made with it as
            # context, and goes with it).
            trimmed = _stream_id_key(snapshot.first_id) >= _stream_id_key(index.first_id)
        else:
            trimmed = _stream_id_key(snapshot.first_id) > _stream_id_key(index.first_id)
        settled = index.provisional and not snapshot.forget_pending
        kept_all = (
            not (trimmed or settled or snapshot.forget_pending)
            and len(snapshot.fresh) < SYNC_BATCH
            and snapshot.log_length == index.skipped + index.messages + len(snapshot.fresh)
        )
        return moved or trimmed or settled, kept_all

    async def _index_all_after(self, scope: str, index: ScopeIndex, fresh: Entries) -> None:
        """The snapshot's new entries, and when they filled a batch (a build, a long
        absence) every one after them, read a batch at a time."""
        await self._index_entries(index, fresh)
        if len(fresh) < SYNC_BATCH:
            return
        with collector_paused():
            while len(fresh) == SYNC_BATCH:
                fresh = await self.store.entries_after(scope, index.last_id, count=SYNC_BATCH)
                await self._index_entries(index, fresh)

    async def _sync_days(
        self, scope: str, index: ScopeIndex, *, compare_text: bool = False
    ) -> None:
        """Index the day records not indexed yet, and retire those no longer listed. The list
        is trimmed from its oldest end, so records are known by their day (one record per
        day), never by their place in it. ``compare_text``: also replace a record whose text
        changed (a forget may rewrite any of them)."""
        raw = await self.store.day_records(scope)
        listed = [DaySummary.from_json(blob) for blob in raw]
        for gone in index.day_rows.keys() - {day.day for day in listed}:
            retire_day_record(index, index.day_rows.pop(gone))
        for day in listed:
            row = index.day_rows.get(day.day)
            if row is not None and compare_text and index.docs.text(row) != day_text(day):
                retire_day_record(index, index.day_rows.pop(day.day))
                row = None
            if row is None:
                add_day_record(index, day)

    async def _rebuild(self, scope: str, epoch: int) -> ScopeIndex:
        # (The old index is a few dozen arrays: freed at once, it holds nobody up. Its
        # caller still refers to it: emptied, it is not held beside the new one.)
        old = self.cache.drop(scope)
        if old is not None:
            await asyncio.to_thread(old.release)  # (freeing 1 GB of arrays is an munmap)
        started = time.perf_counter()
        index = await self._fresh(scope, epoch)
        index = await self._sync(scope, index, vectors=False)
        self._built(scope, index, time.perf_counter() - started)
        return index

    @staticmethod
    async def _index_entries(index: ScopeIndex, raw: Sequence[tuple[str, dict[str, str]]]) -> None:
        """Index new log entries: a few on the loop (the usual sync before a reply), many in
        a worker thread (a build or rebuild: seconds of CPU at 100k messages). The scope's
        lock is held meanwhile, so nothing else reads or grows this index."""
        if len(raw) <= INLINE_ENTRIES:
            add_entries(index, raw)
        else:
            await asyncio.to_thread(_append_in_slices, index, raw)
