"""Recall: finding the past messages a new message is about, so they can go in the prompt.

:class:`RecallIndex` is recall's face to the intake, the replier, bootstrap and benchmarks: it
searches, and composes the parts that each own one job:

* :mod:`memory_core.recall.sync`: each scope's index in memory kept in step with Redis (the
  log, the day records, forgets and trimming), one sync at a time per scope, and the cache
  of indexes and its bound;
* :mod:`memory_core.recall.message_vectors`: the messages' vectors, loaded from Redis, and
  the backlog of those with none, embedded here or by the embedding worker.

What a document is lives in :mod:`memory_core.recall.documents`, the vector maths in
:mod:`memory_core.recall.vectors`, how documents are ranked in
:mod:`memory_core.recall.ranking`, and the reads from Redis in
:mod:`memory_core.store.recall_reads`.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Coroutine, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from memory_core.errors import MemorybotError
from memory_core.llm.usage import SpendTag, charge_to
from memory_core.recall.background import BackgroundEmbedding
from memory_core.recall.documents import Doc, Hit, ScopeIndex
from memory_core.recall.message_vectors import MessageVectors
from memory_core.recall.ranking import rank_words, ranked
from memory_core.recall.sync import CacheStats, IndexSync
from memory_core.recall.vectors import Embedder, query_similarity, unit_vector
from memory_core.scopes import Scope
from memory_core.store.lane import FastLane
from memory_core.store.recall_reads import RecallStore

# The replier, prompt assembly and bootstrap name these from here, beside the index.
__all__ = ["Doc", "Embedder", "Hit", "QueryVector", "RecallIndex"]

# A question's unit vector on its way (None: embedding failed; recall goes by words).
QueryVector = asyncio.Future[np.ndarray | None]

log = logging.getLogger(__name__)


class RecallIndex:
    """Searches each scope's index, kept in step by :attr:`sync`, with the vectors of
    :attr:`message_vectors`. ``embed_in_background``: a search that finds messages with no
    vector yet starts their embedding (off: only :meth:`embed_backlog` embeds). ``worker``:
    the embedding worker process, when the embedder is the local model: messages are
    embedded there, off this interpreter; this process embeds only its queries.
    ``cache_bytes``: the most the cached indexes may hold (``memory.recall_cache_mb``); the
    least recently searched scopes are dropped past it."""

    def __init__(
        self,
        client: Any,
        keys: Any,
        *,
        cache_bytes: int = 256 * 2**20,
        embedder: Embedder | None = None,
        embed_in_background: bool = True,
        worker: BackgroundEmbedding | None = None,
        lane: FastLane | None = None,
    ) -> None:
        self.store = RecallStore(client, keys, lane=lane)
        self.worker = worker
        self.sync = IndexSync(self.store, cache_bytes=cache_bytes, worker_embeds=worker is not None)
        self.message_vectors = MessageVectors(
            self.sync, embedder=embedder, worker=worker, embed_in_background=embed_in_background
        )
        self.sync.with_vectors = embedder is not None
        self._late: set[asyncio.Task[list[Hit]]] = set()  # a reply's searches it left behind

    @property
    def embedder(self) -> Embedder | None:
        """What embeds messages and questions (None: recall goes by words alone)."""
        return self.message_vectors.embedder

    @embedder.setter
    def embedder(self, embedder: Embedder | None) -> None:
        self.message_vectors.embedder = embedder
        self.sync.with_vectors = embedder is not None

    @property
    def _indexes(self) -> OrderedDict[str, ScopeIndex]:
        """The cached indexes by scope (the tests look into them)."""
        return self.sync.cache.indexes

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
        excluded = {entry_id for entry_id in exclude_ids if entry_id}  # "" is every day record
        if meaning is None:
            meaning = self.embed_query(scope, query)
        try:
            async with self.sync.lock(scope):
                index = await self.sync.sync(scope, vectors=self.embedder is not None)
                similarity = None
                if self.embedder is not None:
                    await self.message_vectors.load(scope, index)
                # Ranked under the lock too: no other sync may grow the index meanwhile. By
                # words first, while the question's vector is still on its way.
                words = rank_words(index, query, tz=tz)
                if self.embedder is not None:
                    query_vector = await meaning if meaning is not None else None
                    if query_vector is not None:
                        similarity = query_similarity(index, query_vector)
                hits = ranked(
                    index, words, exclude_ids=excluded, limit=limit, tz=tz, similarity=similarity
                )
                backlog = self.message_vectors.backlog_waits(index)
                # Counted again: loading vectors and ranking (its cached lengths) grew it.
                self.sync.cache.remember(scope, index)
        finally:
            if meaning is not None and not meaning.done():
                meaning.cancel()  # (the search failed: its question is not needed)
        if backlog:
            self.message_vectors.ask_for_backlog(scope)
        return hits

    async def for_reply(
        self,
        scope: str,
        text: str,
        *,
        exclude_id: str,
        tz: str,
        meaning: QueryVector | None,
        wait_s: float | None = None,
        also: Sequence[str] = (),
    ) -> list[Hit]:
        """The best recalled groups for a reply's ``text``: a thread's own and, read-only,
        its channel's (the conversation it continues) and those of ``also`` (other places
        the asker may read: ``IncomingMessage.also_reads``), best first; one question vector
        for all. ``wait_s``: the longest to wait (a live reply's, ``memory.recall_wait_s``).
        An index still being built then (a channel's first question since the start, a
        rebuild after a forget: seconds for a big one) goes on being built in the background
        for the next question, and this reply has none of its groups (a thread's own still
        come when its channel's index is the one being built)."""
        searches = {
            scope: self.search(
                scope, text, exclude_ids=[exclude_id], limit=200, tz=tz, meaning=meaning
            )
        }
        parent = Scope.of(scope).parent
        others = [parent.key] if parent is not None else []
        others += [place for place in also if place != scope and place not in others]
        for other in others:
            searches[other] = self.search(other, text, limit=200, tz=tz, meaning=meaning)
        if wait_s is None and not others:
            return await searches[scope]  # (the usual dry run: no task made for it)
        if wait_s is None:
            found = dict(zip(searches, await asyncio.gather(*searches.values()), strict=True))
        else:
            found = await self._within(searches, wait_s)
        if not others:
            return found[scope]
        merged = [*found[scope]]
        merged += [replace(hit, scope=other) for other in others for hit in found[other]]
        return sorted(merged, key=lambda hit: -hit.score)[:200]

    async def _within(
        self, searches: dict[str, Coroutine[Any, Any, list[Hit]]], wait_s: float
    ) -> dict[str, list[Hit]]:
        """Each scope's hits, those found within ``wait_s`` (the others: none, and their
        searches go on, awaited by :meth:`drain`). A search that failed raises its error."""
        tasks = {key: asyncio.ensure_future(search) for key, search in searches.items()}
        try:
            await asyncio.wait(tasks.values(), timeout=wait_s)
        finally:
            for task in tasks.values():
                if not task.done():  # (built on for the next question)
                    self._late.add(task)
                    task.add_done_callback(self._late_done)
        found: dict[str, list[Hit]] = {}
        for key, task in tasks.items():
            if task.done():
                found[key] = task.result()
            else:
                log.info(
                    "recall in %s: its index is still being built after %.1f s; this reply "
                    "goes without what it would recall",
                    key,
                    wait_s,
                )
                found[key] = []
        return found

    def _late_done(self, search: asyncio.Task[list[Hit]]) -> None:
        self._late.discard(search)
        if search.cancelled():  # (its reply had gone: the question's vector with it)
            return
        exc = search.exception()
        if exc is not None:
            log.warning("recall's background build failed: %s", exc)

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
        embedder = self.embedder
        assert embedder is not None
        if asked is not None:
            vector = await BackgroundEmbedding.answer(asked)
            if vector is not None:
                return unit_vector(vector)
        try:
            with charge_to(SpendTag(scope)):  # memory's work: on the scope's bill
                [embedded] = list(await embedder([query]))
        except MemorybotError as exc:
            log.warning("embeddings unavailable for %s, recalling by words only: %s", scope, exc)
            return None
        return unit_vector(np.asarray(embedded, dtype=np.float32))

    # -- the parts' work, for the intake, bootstrap and benchmarks ---------------------
    @property
    def cache_stats(self) -> CacheStats:
        """The cached indexes' bytes and scopes, evictions and builds (for /metrics)."""
        return self.sync.cache.stats

    async def warm(self, scope: str) -> int:
        """The scope's index built (or brought up to date) ahead of a search, its stored
        vectors loaded: its documents."""
        async with self.sync.lock(scope):
            index = await self.sync.sync(scope)
            if self.embedder is not None:
                await self.message_vectors.load(scope, index)
            self.sync.cache.remember(scope, index)
            return len(index.docs)

    def forget(self, scope: str) -> None:
        """The scope's index dropped from this process (built again by the next search)."""
        self.sync.forget(scope)

    def embed_soon(self, scope: str) -> None:
        self.message_vectors.embed_soon(scope)

    async def embed_backlog(self, scope: str, *, limit: int | None = None) -> int:
        return await self.message_vectors.embed_backlog(scope, limit=limit)

    async def drain(self) -> None:
        """Wait for the background work: builds a reply did not wait for, embeddings."""
        if self._late:
            await asyncio.gather(*self._late, return_exceptions=True)
        await self.message_vectors.drain()

    async def close(self) -> None:
        for search in list(self._late):
            search.cancel()
        if self._late:
            await asyncio.gather(*self._late, return_exceptions=True)
        await self.message_vectors.close()
