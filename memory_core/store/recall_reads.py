"""Recall's Redis side: what an in-memory search index is built and kept in step from (a
scope's log, its epoch, its day records) and the message vectors stored beside them. How the
index uses them is :mod:`memory_core.recall.sync`'s and
:mod:`memory_core.recall.message_vectors`'s. A scope's keys share a hash tag, so the
snapshot's transaction runs on one shard of a cluster too."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from memory_core.store.keys import KeySchema
from memory_core.store.lane import FastLane
from memory_core.store.records import pairs
from memory_core.store.redis_errors import translates_redis_errors
from memory_core.store.scripts import run_script, run_script_by

Entries = list[tuple[str, dict[str, str]]]  # (stream id, fields), as XRANGE gives them


@dataclass(frozen=True, slots=True)
class LogSnapshot:
    """One atomic read of a scope for its index: the state's epoch and whether a forget is
    under way, the log's first id, its entries after the index's last, the newest day
    record and the log's length (read at the same instant as the new entries, to tell
    whether anything left it); for a search, the vectors asked for (None: not read)."""

    epoch: int
    forget_pending: bool
    first_id: str
    fresh: Entries
    newest_record: str
    log_length: int
    again: list[str | None]  # the vectors of the ids asked for, in order
    fresh_vectors: list[str | None] | None  # the new entries' vectors, when read


@translates_redis_errors
class RecallStore:
    def __init__(self, client: Any, keys: KeySchema, *, lane: FastLane | None = None) -> None:
        self.client = client
        self.keys = keys
        self.lane = lane  # the store's own connection (one server; none on a cluster)

    async def snapshot(
        self,
        scope: str,
        *,
        after: str,
        count: int,
        vectors_of: Sequence[str] = (),
        fresh_vectors_upto: int = 0,
    ) -> LogSnapshot:
        """The scope as its index needs it, in one script call (one round trip, atomic); up
        to ``count`` entries after the id ``after`` ("" = from the start). With the stored
        vectors of the messages ``vectors_of``, and of the new entries when there are at
        most ``fresh_vectors_upto`` of them (a search's vectors in the same round trip)."""
        k = self.keys.scope(scope)
        args = [after, count, fresh_vectors_upto, *vectors_of]
        reply = await run_script_by(
            self.lane, self.client, "recall_sync", [k.state, k.log, k.episodes, k.vectors], args
        )
        (epoch, pending), first, fresh, newest_record, log_length, again, fresh_vectors = reply
        entries = [(str(entry_id), pairs(fields)) for entry_id, fields in fresh]
        read_fresh = 0 < len(entries) <= fresh_vectors_upto
        return LogSnapshot(
            epoch=int(epoch or 0),
            forget_pending=pending == "1",
            first_id=str(first[0][0]) if first else "",
            fresh=entries,
            newest_record=newest_record or "",
            log_length=int(log_length),
            again=list(again),
            fresh_vectors=list(fresh_vectors) if read_fresh else None,
        )

    async def window_start(self, scope: str, newest: int, *, step: int = 5000) -> tuple[str, int]:
        """Where an index of the log's ``newest`` entries starts: the id just before them and
        how many entries lie before it (("", 0) when the log holds no more than that). Read
        back ``step`` entries a call, only their count and last id coming over the wire."""
        log = self.keys.scope(scope).log
        length = int(await self.client.xlen(log))
        if length <= newest:
            return "", 0
        cursor, left, oldest = "+", newest, ""
        while left > 0:
            walked, oldest = await run_script_by(
                self.lane, self.client, "recall_window", [log], [cursor, min(step, left)]
            )
            if not walked:
                return "", 0  # (the log was trimmed meanwhile: it fits)
            left -= int(walked)
            cursor = f"({oldest}"
        walked, before = await run_script_by(
            self.lane, self.client, "recall_window", [log], [cursor, 1]
        )
        if not walked:
            return "", 0
        return str(before), max(0, length - newest)

    async def log_length(self, scope: str) -> int:
        return int(await self.client.xlen(self.keys.scope(scope).log))

    async def entries_after(self, scope: str, after: str, *, count: int) -> Entries:
        """Up to ``count`` log entries after the id ``after`` ("" = from the start)."""
        entries: Entries = await self.client.xrange(
            self.keys.scope(scope).log, min=f"({after}" if after else "-", max="+", count=count
        )
        return entries

    async def day_records(self, scope: str) -> list[str]:
        """The scope's day records (JSON), oldest first."""
        return list(await self.client.lrange(self.keys.scope(scope).episodes, 0, -1))

    async def scan_vectors(
        self, scope: str, cursor: int, *, count: int
    ) -> tuple[int, dict[str, str]]:
        """One HSCAN step over the scope's stored vectors: (next cursor, id -> vector)."""
        cursor, batch = await self.client.hscan(self.keys.scope(scope).vectors, cursor, count=count)
        return int(cursor), batch

    async def vector_ids(self, scope: str) -> set[str]:
        """The ids of the messages with a stored vector."""
        return set(await self.client.hkeys(self.keys.scope(scope).vectors))

    async def a_vector(self, scope: str) -> str:
        """One of the scope's stored vectors, any ("" when it has none)."""
        picked = await self.client.hrandfield(self.keys.scope(scope).vectors, 1, withvalues=True)
        return str(picked[1]) if picked else ""

    async def vectors(self, scope: str, ids: Sequence[str]) -> list[str | None]:
        """The stored vectors of the messages ``ids`` (None: none stored)."""
        return list(await self.client.hmget(self.keys.scope(scope).vectors, list(ids)))

    async def store_vectors(self, scope: str, triples: Sequence[str]) -> list[int]:
        """Store vectors, ``triples`` of (message id, its context's id or "", vector), each
        only while its message and its context are still in the log (a forget may have
        deleted them meanwhile): 1 for each stored, 0 for each not."""
        k = self.keys.scope(scope)
        kept = await run_script(self.client, "store_vectors", [k.log, k.vectors], list(triples))
        return [int(n) for n in kept]
