"""The vectors of the messages in the cached indexes: the stored ones loaded from Redis (all
of a scope's on its first search, then those of the messages indexed since), and the backlog
of messages with none anywhere, embedded in a background task here or told to the embedding
worker (:mod:`memory_core.recall.background`) when the local model embeds. A message is
embedded once, for every process; a reply never waits for it.
"""

from __future__ import annotations

import asyncio
import logging
import time

import numpy as np

from memory_core.errors import MemorybotError
from memory_core.llm.usage import SpendTag, charge_to
from memory_core.recall.background import BackgroundEmbedding
from memory_core.recall.documents import MessageRows, ScopeIndex
from memory_core.recall.sync import (
    INLINE_ENTRIES,
    VECTOR_SCAN_BATCH,
    IndexSync,
    collector_paused,
    give_back_freed_memory,
)
from memory_core.recall.vectors import (
    EMBED_BATCH,
    Embedder,
    decode_vector,
    embedding_context,
    embedding_text,
    encode_vector,
    put_decoded,
    put_row,
    put_stored,
    reserve_rows,
    unit_vector,
)

log = logging.getLogger(__name__)

BACKLOG_PATIENCE_S = 30.0  # messages with no vector this long: the worker is asked to look


def _without_vectors(rows: MessageRows, found: np.ndarray) -> list[int]:
    """The message rows not ``found`` (a flag per row: a set of a million rows held the
    interpreter ~50 ms to read, and cost ~60 MB while the vectors loaded)."""
    missing: list[int] = rows.rows[~found[rows.rows]].tolist()
    return missing


class MessageVectors:
    """Loads the stored vectors of an index's messages and sees that those with none get
    one. ``embed_in_background``: a search that finds messages with no vector starts their
    embedding (never awaited by the reply); off, only :meth:`embed_backlog` embeds.
    ``worker``: the embedding worker process, when the embedder is the local model (messages
    are embedded there, off this interpreter)."""

    def __init__(
        self,
        sync: IndexSync,
        *,
        embedder: Embedder | None,
        worker: BackgroundEmbedding | None,
        embed_in_background: bool,
    ) -> None:
        self.sync = sync
        self.store = sync.store
        self.embedder = embedder
        self.worker = worker
        self.embed_in_background = embed_in_background
        self._embedding: dict[str, asyncio.Task[None]] = {}

    # -- loading (callers hold the scope's lock) ---------------------------------------------
    async def load(self, scope: str, index: ScopeIndex) -> None:
        """Every vector stored for the index's messages (another process, or this one before
        a restart, made them); the messages with none are noted for the background. (Not
        again when the sync that came just before brought them.)"""
        if index.synced_vectors:
            return
        if index.vectors_done == 0 and index.docs:
            if index.skipped:  # the scope's newest messages only: theirs by id, not all
                await self._fetch_new_vectors(scope, index)
            else:
                await self._load_stored_vectors(scope, index)
            index.loaded_backlog = bool(index.unembedded)
        elif index.vectors_done < len(index.docs) or (self.worker and index.unembedded):
            await self._fetch_new_vectors(scope, index)
        index.vectors_done = len(index.docs)

    async def _load_stored_vectors(self, scope: str, index: ScopeIndex) -> None:
        """All of the scope's stored vectors, in batches (HSCAN: a scope may have 100k)."""
        if len(index.docs) > INLINE_ENTRIES:
            rows = await asyncio.to_thread(index.docs.message_rows)
        else:  # (a thread's wake-up costs more than a few hundred rows on a busy machine)
            rows = index.docs.message_rows()
        found = np.zeros(len(index.docs), dtype=bool)
        with collector_paused():
            await self._scan_vectors(scope, index, rows, found)
        index.unembedded = _without_vectors(rows, found)
        if len(rows.rows) > INLINE_ENTRIES:
            await asyncio.to_thread(give_back_freed_memory)  # (the decoded batches)

    async def _scan_vectors(
        self, scope: str, index: ScopeIndex, rows: MessageRows, found: np.ndarray
    ) -> None:
        cursor = 0
        while True:
            cursor, batch = await self.store.scan_vectors(scope, cursor, count=VECTOR_SCAN_BATCH)
            if batch and index.vectors is None:
                dims = len(decode_vector(next(iter(batch.values()))))
                room = len(index.docs) + len(index.docs) // 64 + 16  # then grows by 1/8
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
            row for row in range(index.vectors_done, len(index.docs)) if index.docs.is_message(row)
        ]
        again: list[int] = []
        if self.worker is not None and index.unembedded:
            again = index.unembedded[-VECTOR_SCAN_BATCH:]
            del index.unembedded[-len(again) :]
        looked = again + new
        for start in range(0, len(looked), VECTOR_SCAN_BATCH):
            rows = looked[start : start + VECTOR_SCAN_BATCH]
            stored = await self.store.vectors(scope, [index.docs.id(row) for row in rows])
            if len(rows) > INLINE_ENTRIES:  # (a window's vectors, a long absence: off the loop)
                await asyncio.to_thread(put_stored, index, rows, stored)
            else:
                put_stored(index, rows, stored)

    # -- the backlog ---------------------------------------------------------------------------
    def backlog_waits(self, index: ScopeIndex) -> bool:
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

    def ask_for_backlog(self, scope: str) -> None:
        """A search met a backlog worth asking about: the worker looks through the scope,
        or a background task here embeds it (when background work is on)."""
        if not self.embed_in_background:
            return
        if self.worker is not None:
            self.worker.look_through(scope)
        else:
            self.embed_soon(scope)

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
            step = EMBED_BATCH if limit is None else min(EMBED_BATCH, limit - done)
            async with self.sync.lock(scope):
                index, rows = await self._take_backlog(scope, step)
            if not rows:
                break
            await self._embed_rows(scope, index, rows)
            done += len(rows)
        return done

    async def _take_backlog(self, scope: str, step: int) -> tuple[ScopeIndex, list[int]]:
        """Up to ``step`` of the newest message rows with no vector, taken off the backlog
        (the caller holds the scope's lock)."""
        index = await self.sync.sync(scope)
        await self.load(scope, index)
        rows = index.unembedded[-step:]
        if rows:
            del index.unembedded[-len(rows) :]
        return index, rows

    async def _embed_rows(self, scope: str, index: ScopeIndex, rows: list[int]) -> None:
        """Embed the messages of ``rows`` (the scope unlocked), store their vectors, and put
        them in the index if it is still the scope's. (Their texts are read before anything
        is awaited: nothing can change the index between the lock let go and that.)"""
        assert self.embedder is not None
        ids = [index.docs[row].id for row in rows]
        contexts = [embedding_context(index.docs, row) for row in rows]
        texts = [
            embedding_text(index.docs[row], context)
            for row, context in zip(rows, contexts, strict=True)
        ]
        try:
            # On the scope's bill, never on the member whose task happened to start this.
            with charge_to(SpendTag(scope)):
                embedded = await self.embedder(texts)
        except BaseException:
            index.unembedded.extend(rows)  # (this index, or a stale one: harmless)
            raise
        units = [unit_vector(np.asarray(vector, dtype=np.float32)) for vector in embedded]
        args: list[str] = []
        for entry_id, context, unit in zip(ids, contexts, units, strict=True):
            args += [entry_id, context.id if context else "", encode_vector(unit)]
        # Stored only while its message and its context are (a forget may delete them
        # meanwhile).
        kept = await self.store.store_vectors(scope, args)
        async with self.sync.lock(scope):
            if self.sync.cache.get(scope) is index:
                for row, entry_id, unit, stored in zip(rows, ids, units, kept, strict=True):
                    if stored and index.docs.id(row) == entry_id:
                        put_row(index, row, unit)
