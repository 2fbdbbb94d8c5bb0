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

What a document is lives in :mod:`memory_core.recall.documents`, the vector maths in
:mod:`memory_core.recall.vectors`, how documents are ranked in
:mod:`memory_core.recall.ranking`, and the reads from Redis in
:mod:`memory_core.store.recall_reads`.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from memory_core.calendar import day_start, to_ms
from memory_core.errors import MemorybotError
from memory_core.llm.usage import SpendTag, charge_to
from memory_core.models import DaySummary, LogEntry
from memory_core.recall.background import BackgroundEmbedding
from memory_core.recall.documents import Doc, Hit, ScopeIndex, day_text, retire_day_record
from memory_core.recall.ranking import rank_words, ranked
from memory_core.recall.textsearch import terms
from memory_core.recall.vectors import (
    Embedder,
    decode_vector,
    embedding_context,
    embedding_text,
    encode_vector,
    put_decoded,
    put_row,
    query_similarity,
    reserve_rows,
    unit_vector,
)
from memory_core.scopes import Scope
from memory_core.store.lane import FastLane
from memory_core.store.recall_reads import RecallStore

# The pipeline, prompt assembly and bootstrap name these from here, beside the index.
__all__ = ["Doc", "Embedder", "Hit", "QueryVector", "RecallIndex"]

# A question's unit vector on its way (None: embedding failed; recall goes by words).
QueryVector = asyncio.Future[np.ndarray | None]

log = logging.getLogger(__name__)

SYNC_BATCH = 2000  # entries per XRANGE: parsing a reply holds the loop, so keep them short
EMBED_BATCH = 64  # texts per embeddings request (and per background step)
VECTOR_SCAN_BATCH = 1000  # vectors per HSCAN / HMGET round trip when loading them
# Entries parsed and indexed on the event loop at most; a longer batch (a first build, a
# rebuild) is indexed in a worker thread, so other scopes' replies go on meanwhile.
INLINE_ENTRIES = 256
BACKLOG_PATIENCE_S = 30.0  # messages with no vector this long: the worker is asked to look


_paused_builds = 0
_paused_lock = threading.Lock()


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """No automatic cyclic garbage collection while a big index is built, and what the
    build made out of the collector's way after it. A document is a NamedTuple, which the
    collector never stops tracking (it untracks exact tuples only), so every full pass
    walked every document of every index: 70-100 ms at 100k, in the middle of whatever
    the bot was doing. So the build collects its young objects slice by slice (see
    ``_append_in_slices``), and after the last concurrent build everything tracked is
    frozen (``gc.freeze()``): full passes skip it from then on. Frozen objects are still
    freed by reference counting (a dropped index goes with its last reference); what the
    freeze keeps for good is cyclic garbage made since the last young collection, a small
    price paid once per big build."""
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


def _release_in_slices(index: ScopeIndex) -> None:
    """In a worker thread: an old index's documents freed a slice at a time (100k freed in
    one go held the interpreter, and so the event loop, for tens of ms)."""
    docs = index.docs
    while docs:
        del docs[-8 * INLINE_ENTRIES :]
        time.sleep(0)


def _message_rows(docs: list[Doc]) -> dict[str, int]:
    return {d.id: i for i, d in enumerate(docs) if d.kind == "message"}


def _stream_id_key(entry_id: str) -> tuple[int, int]:
    ms, _, seq = entry_id.partition("-")
    return int(ms), int(seq or 0)


class RecallIndex:
    def __init__(
        self,
        client: Any,
        keys: Any,
        *,
        max_cached_docs: int = 2_000_000,
        embedder: Embedder | None = None,
        embed_in_background: bool = True,
        worker: BackgroundEmbedding | None = None,
        lane: FastLane | None = None,
    ) -> None:
        self.store = RecallStore(client, keys, lane=lane)
        self.max_cached_docs = max_cached_docs
        self.embedder = embedder
        # A search that finds messages with no vector yet starts their embedding in a
        # background task (never awaited by the reply). Off: only embed_backlog() embeds.
        self.embed_in_background = embed_in_background
        # The embedding worker process, when the embedder is the local model: messages are
        # embedded there, off this interpreter; this process embeds only its queries.
        self.worker = worker
        self._embedding: dict[str, asyncio.Task[None]] = {}
        self._indexes: OrderedDict[str, ScopeIndex] = OrderedDict()
        self._counted: dict[str, int] = {}  # each cached index's documents when last counted
        self._cached_docs = 0
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
    async def _sync(self, scope: str, *, vectors: bool = False) -> ScopeIndex:
        """The scope's index in step with its log. ``vectors`` (a search): when the index's
        vectors are in step, the new entries' vectors and those of the newest messages that
        had none at the last look come in the same round trip (``index.synced_vectors``)."""
        index = self._indexes.get(scope) or ScopeIndex()
        index.synced_vectors = False
        in_step = vectors and bool(index.docs) and index.vectors_done == len(index.docs)
        again = index.unembedded[-VECTOR_SCAN_BATCH:] if in_step and self.worker else []
        # One atomic snapshot (the scope's keys share a slot): the log's length must be read
        # at the same instant as its new entries to tell whether anything left it.
        snap = await self.store.snapshot(
            scope,
            after=index.last_id,
            count=SYNC_BATCH,
            vectors_of=[index.docs[row].id for row in again],
            fresh_vectors_upto=INLINE_ENTRIES if in_step else 0,
        )
        epoch, forget_pending, first_id = snap.epoch, snap.forget_pending, snap.first_id
        fresh, newest_record, log_length = snap.fresh, snap.newest_record, snap.log_length
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
                and log_length == index.messages + len(fresh)
            )
            if not kept_all:
                return await self._rebuild(scope, epoch, first_id)
            # The epoch moved but no message left the log (a tier or fact edit, a forget of
            # a fact): the index stands; only day records may have been rewritten.
            await self._sync_days(scope, index, compare_text=True)
        index.epoch, index.first_id = epoch, index.first_id or first_id
        index.provisional = forget_pending or (index.provisional and not stale)
        first_new = len(index.docs)
        await self._index_entries(index, fresh)
        if len(fresh) == SYNC_BATCH:  # a build (or a long absence): many entries to come
            with _collector_paused():
                while len(fresh) == SYNC_BATCH:
                    fresh = await self.store.entries_after(scope, index.last_id, count=SYNC_BATCH)
                    await self._index_entries(index, fresh)
        if newest_record != index.newest_record:
            await self._sync_days(scope, index)
            index.newest_record = newest_record
        if in_step and (not fresh or snap.fresh_vectors is not None):
            new_rows = list(range(first_new, first_new + len(fresh)))
            if again:
                del index.unembedded[-len(again) :]
            self._put_vectors(index, again + new_rows, snap.again + (snap.fresh_vectors or []))
            index.vectors_done = len(index.docs)
            index.synced_vectors = True
        self._remember(scope, index)
        return index

    @staticmethod
    def _put_vectors(index: ScopeIndex, rows: list[int], stored: Sequence[str | None]) -> None:
        """The stored vectors of the message ``rows``; the rows with none are noted."""
        missing: list[int] = []
        for row, blob in zip(rows, stored, strict=True):
            if blob:
                put_row(index, row, decode_vector(blob))
            else:
                missing.append(row)
        index.unembedded.extend(missing)

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
            if row is not None and compare_text and index.docs[row].text != day_text(day):
                retire_day_record(index, index.day_rows.pop(day.day))
                row = None
            if row is None:
                self._add_day(index, day)

    async def _rebuild(self, scope: str, epoch: int, first_id: str) -> ScopeIndex:
        old = self._indexes.pop(scope, None)
        self._cached_docs -= self._counted.pop(scope, 0)
        if old is not None and len(old.docs) > INLINE_ENTRIES:
            await asyncio.to_thread(_release_in_slices, old)
        index = ScopeIndex(epoch=epoch, first_id=first_id)
        self._indexes[scope] = index
        return await self._sync(scope)

    async def _index_entries(
        self, index: ScopeIndex, raw: Sequence[tuple[str, dict[str, str]]]
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
        cls, index: ScopeIndex, raw: Sequence[tuple[str, dict[str, str]]]
    ) -> None:
        """In a worker thread: slices of INLINE_ENTRIES, each followed by a yield of the
        GIL, so the event loop gets it back within a slice, not after a switch interval
        lost to a busy machine's scheduler. While the collector is paused for the build,
        each slice's young objects are collected here, a few hundred at a time: the
        documents stop being tracked as they are met, instead of all 100k at the first
        collection after the build (one pass that held the loop 80-140 ms)."""
        for start in range(0, len(raw), INLINE_ENTRIES):
            cls._append_entries(index, raw[start : start + INLINE_ENTRIES])
            if not gc.isenabled():
                gc.collect(0)
            time.sleep(0)

    @staticmethod
    def _append_entries(index: ScopeIndex, raw: Sequence[tuple[str, dict[str, str]]]) -> None:
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

    def _add_day(self, index: ScopeIndex, day: DaySummary) -> None:
        text = day_text(day)
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

    def _remember(self, scope: str, index: ScopeIndex) -> None:
        self._indexes[scope] = index
        self._indexes.move_to_end(scope)
        # The cached documents, counted as each scope is remembered (a sum over every cached
        # scope on each search would cost a reply 0.1-0.2 ms at a thousand scopes).
        self._cached_docs += len(index.docs) - self._counted.get(scope, 0)
        self._counted[scope] = len(index.docs)
        while self._cached_docs > self.max_cached_docs and len(self._indexes) > 1:
            dropped, _ = self._indexes.popitem(last=False)
            self._cached_docs -= self._counted.pop(dropped, 0)

    def forget(self, scope: str) -> None:
        self._indexes.pop(scope, None)
        self._cached_docs -= self._counted.pop(scope, 0)

    # -- searching ---------------------------------------------------------------------
    async def search(
        self,
        scope: str,
        query: str,
        *,
        exclude_ids: Sequence[str] = (),
        limit: int = 40,
        tz: str = "UTC",
        meaning: QueryVector | None = None,
    ) -> list[Hit]:
        """The best groups for ``query``, best first; [] when nothing is relevant. ``tz``:
        the scope's timezone, for questions that name a day. Only the query is embedded
        here (``meaning``: already on its way, from :meth:`embed_query`), while the index
        is brought up to date; messages are embedded once, in the background, and their
        vectors loaded."""
        excluded = {x for x in exclude_ids if x}  # "" would exclude every day record
        if meaning is None:
            meaning = self.embed_query(scope, query)
        try:
            async with self._lock(scope):
                index = await self._sync(scope, vectors=self.embedder is not None)
                similarity = None
                if self.embedder is not None:
                    await self._sync_vectors(scope, index)
                # Ranked under the lock too: no other sync may grow the index meanwhile. By
                # words first, while the question's vector is still on its way.
                words = rank_words(index, query, tz=tz)
                if self.embedder is not None:
                    q_vec = await meaning if meaning is not None else None
                    if q_vec is not None:
                        similarity = query_similarity(index, q_vec)
                hits = ranked(
                    index, words, exclude_ids=excluded, limit=limit, tz=tz, similarity=similarity
                )
                backlog = self._backlog_waits(index)
        finally:
            if meaning is not None and not meaning.done():
                meaning.cancel()  # (the search failed: its question is not needed)
        if backlog and self.embed_in_background:
            if self.worker is not None:
                self.worker.look_through(scope)
            else:
                self.embed_soon(scope)
        return hits

    def _backlog_waits(self, index: ScopeIndex) -> bool:
        """Whether the index has messages with no vector worth asking about. With a worker,
        only those it seems to have missed: met on the first load (stored before a restart
        or by another process), or still there after BACKLOG_PATIENCE_S (a forget deleted
        their context, a worker was restarted); a message stored a moment ago is simply on
        its way."""
        if not index.unembedded:
            index.backlog_since = None
            return False
        if self.worker is None:
            return True
        now = time.monotonic()
        if index.backlog_since is None:
            index.backlog_since = now
            return index.loaded_backlog
        return now - index.backlog_since >= BACKLOG_PATIENCE_S

    async def for_reply(
        self, scope: str, text: str, *, exclude_id: str, tz: str, meaning: QueryVector | None
    ) -> list[Hit]:
        """The best recalled groups for a reply's ``text``: a thread's own and, read-only,
        its channel's (the conversation it continues), best first; one question vector
        for both."""
        own = self.search(scope, text, exclude_ids=[exclude_id], limit=200, tz=tz, meaning=meaning)
        parent = Scope.of(scope).parent
        if parent is None:
            return await own
        mine, channel = await asyncio.gather(
            own, self.search(parent.key, text, limit=200, tz=tz, meaning=meaning)
        )
        merged = [*mine, *(replace(hit, scope=parent.key) for hit in channel)]
        return sorted(merged, key=lambda hit: -hit.score)[:200]

    async def warm(self, scope: str) -> int:
        async with self._lock(scope):
            return len((await self._sync(scope)).docs)

    # -- embeddings ----------------------------------------------------------------------
    def embed_query(self, scope: str, query: str) -> QueryVector | None:
        """Start embedding a question (None without an embedder): the reply's other reads
        go on meanwhile, and a thread's search and its channel's share it. The query
        embedder gets the question at once, before this returns."""
        if self.embedder is None:
            return None
        asked = self.worker.ask(query) if self.worker is not None else None
        return asyncio.ensure_future(self._embed_query(scope, query, asked))

    async def _embed_query(
        self, scope: str, query: str, asked: asyncio.Future[np.ndarray | None] | None
    ) -> np.ndarray | None:
        """The query's unit vector (from the query embedder, when it was ``asked``), or None
        if embeddings failed (recall then runs on words alone: a reply never fails for want
        of a vector)."""
        assert self.embedder is not None
        if asked is not None:
            vector = await BackgroundEmbedding.answer(asked)
            if vector is not None:
                return unit_vector(vector)
        try:
            with charge_to(SpendTag(scope)):  # memory's work: on the scope's bill
                [q] = list(await self.embedder([query]))
        except MemorybotError as exc:
            log.warning("embeddings unavailable for %s, recalling by words only: %s", scope, exc)
            return None
        return unit_vector(np.asarray(q, dtype=np.float32))

    async def _sync_vectors(self, scope: str, index: ScopeIndex) -> None:
        """Every vector stored for the index's messages (another process, or this one before
        a restart, made them); the messages with none are noted for the background. (Not
        again when the sync that came just before brought them.)"""
        if index.synced_vectors:
            return
        if index.vectors_done == 0 and index.docs:
            await self._load_stored_vectors(scope, index)
            index.loaded_backlog = bool(index.unembedded)
        elif index.vectors_done < len(index.docs) or (self.worker and index.unembedded):
            await self._fetch_new_vectors(scope, index)
        index.vectors_done = len(index.docs)

    async def _load_stored_vectors(self, scope: str, index: ScopeIndex) -> None:
        """All of the scope's stored vectors, in batches (HSCAN: a scope may have 100k)."""
        rows = await asyncio.to_thread(_message_rows, index.docs)  # (100k: 40 ms of Python)
        found: set[int] = set()
        with _collector_paused():
            await self._scan_vectors(scope, index, rows, found)
        index.unembedded = sorted(row for row in rows.values() if row not in found)

    async def _scan_vectors(
        self, scope: str, index: ScopeIndex, rows: dict[str, int], found: set[int]
    ) -> None:
        cursor = 0
        while True:
            cursor, batch = await self.store.scan_vectors(scope, cursor, count=VECTOR_SCAN_BATCH)
            if batch and index.vectors is None:
                dims = len(decode_vector(next(iter(batch.values()))))
                room = len(index.docs) + len(index.docs) // 4 + 1024  # and for what comes
                await asyncio.to_thread(reserve_rows, index, room, dims, keep=False)
            if len(batch) > INLINE_ENTRIES:
                # Decoding and sketching a thousand vectors is milliseconds of numpy: off
                # the loop (the scope's lock keeps everyone else off this index meanwhile).
                await asyncio.to_thread(put_decoded, index, rows, batch, found)
            else:
                put_decoded(index, rows, batch, found)
            if not cursor:
                break

    async def _fetch_new_vectors(self, scope: str, index: ScopeIndex) -> None:
        """The stored vectors of the messages indexed since the last look, and, when a
        worker embeds them, of the newest that had none at the last look (made since)."""
        new = [
            i for i in range(index.vectors_done, len(index.docs)) if index.docs[i].kind == "message"
        ]
        again: list[int] = []
        if self.worker is not None and index.unembedded:
            again = index.unembedded[-VECTOR_SCAN_BATCH:]
            del index.unembedded[-len(again) :]
        looked = again + new
        for start in range(0, len(looked), VECTOR_SCAN_BATCH):
            rows = looked[start : start + VECTOR_SCAN_BATCH]
            self._put_vectors(
                index, rows, await self.store.vectors(scope, [index.docs[i].id for i in rows])
            )

    def embed_soon(self, scope: str) -> None:
        """Embed the scope's messages that have no vector yet: told to the worker, or in a
        background task (one per scope at a time)."""
        if self.embedder is None:
            return
        if self.worker is not None:
            self.worker.stored(scope)
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
        """Wait for the background embedding (the end of a replay, a test, a benchmark):
        the tasks, or everything told to the worker so far."""
        if self.worker is not None:
            await self.worker.sync()
        while self._embedding:
            await asyncio.gather(*list(self._embedding.values()), return_exceptions=True)

    async def close(self) -> None:
        """Stop the embedding worker (at shutdown: what it has not embedded yet waits for
        the next start's searches)."""
        if self.worker is not None:
            await self.worker.close()

    async def embed_backlog(self, scope: str, *, limit: int | None = None) -> int:
        """Embed (up to ``limit``) messages of the scope that have no vector anywhere, newest
        first, store their vectors in Redis for every process, and return how many were
        embedded. The model runs with the scope unlocked: searches go on meanwhile."""
        if self.embedder is None:
            return 0
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
                contexts = [embedding_context(index.docs, i) for i in rows]
                texts = [
                    embedding_text(index.docs[i], c) for i, c in zip(rows, contexts, strict=True)
                ]
            try:
                # On the scope's bill, never on the member whose task happened to start this.
                with charge_to(SpendTag(scope)):
                    vecs = await self.embedder(texts)
            except BaseException:
                index.unembedded.extend(rows)  # (this index, or a stale one: harmless)
                raise
            units = [unit_vector(np.asarray(v, dtype=np.float32)) for v in vecs]
            args: list[str] = []
            for entry_id, context, unit in zip(ids, contexts, units, strict=True):
                args += [entry_id, context.id if context else "", encode_vector(unit)]
            # Stored only while its message and its context are (a forget may delete them
            # meanwhile).
            kept = await self.store.store_vectors(scope, args)
            async with self._lock(scope):
                if self._indexes.get(scope) is index:
                    for row, entry_id, unit, stored in zip(rows, ids, units, kept, strict=True):
                        if stored and index.docs[row].id == entry_id:
                            put_row(index, row, unit)
            done += len(rows)
        return done
