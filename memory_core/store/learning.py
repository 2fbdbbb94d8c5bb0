"""Learning a channel's past, in Redis: the learn's job (where its source is, what it
counted), the messages read and not stored yet, what was forgotten in the place (so it is
not learned again), and the writes that put a past before a place's own memory: its raw
messages before the log's first (a rewrite of the log, a slice at a time), its day records
and weeks in their places among the lists.

Everything of a channel's learn is under the channel's hash tag (its threads' keys too), so
each step is one atomic call, on a Redis Cluster as well.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from memory_core.models import DaySummary, LogEntry, WeekSummary
from memory_core.scopes import Scope
from memory_core.store.keys import KeySchema
from memory_core.store.pipelines import atomic_pipeline
from memory_core.store.redis_errors import translates_redis_errors
from memory_core.store.scripts import run_script

SLICE = 1000  # log entries copied per step of a rewrite


@dataclass(frozen=True, slots=True)
class Staged:
    """A message read from the past and kept until it is stored (its JSON as the learner
    wrote it)."""

    member: str  # "<scope> <platform id>"
    ts_ms: int
    data: str


def staged_member(scope: str, platform_id: str) -> str:
    return f"{scope} {platform_id}"


@translates_redis_errors
class LearningStore:
    def __init__(self, client: Any, keys: KeySchema) -> None:
        self.client = client
        self.keys = keys

    # -- the job ------------------------------------------------------------------------
    async def job(self, place: str) -> dict[str, str]:
        found: dict[str, str] = await self.client.hgetall(self.keys.learning(place).job)
        return found

    async def set_job(self, place: str, fields: Mapping[str, str | int]) -> None:
        await self.client.hset(self.keys.learning(place).job, mapping=dict(fields))

    async def begin(self, place: str, fields: Mapping[str, str | int]) -> None:
        """A new learn of ``place``: what an earlier one left is dropped."""
        k = self.keys.learning(place)
        pipe = await atomic_pipeline(self.client)
        pipe.delete(k.job, k.staged, k.texts)
        pipe.hset(k.job, mapping=dict(fields))
        await pipe.execute()

    async def drop(self, place: str) -> None:
        """Drop a learn's job and what it read and did not store (a forget in the place: the
        text read must not outlive it; the next learn reads it again, without what went)."""
        k = self.keys.learning(place)
        await self.client.delete(k.job, k.staged, k.texts)

    async def count(self, place: str, counts: Mapping[str, int]) -> None:
        """Add to the job's counts."""
        k = self.keys.learning(place)
        pipe = await atomic_pipeline(self.client)
        for name, count in counts.items():
            pipe.hincrby(k.job, name, count)
        await pipe.execute()

    async def drop_staged(self, place: str) -> None:
        """The messages kept, gone (all stored); the job stays, to be shown."""
        k = self.keys.learning(place)
        await self.client.delete(k.staged, k.texts)

    async def stage(
        self,
        place: str,
        staged: Sequence[Staged],
        *,
        cursor: str,
        counts: Mapping[str, int],
        ledger_version: str,
    ) -> int:
        """One page read: its messages kept, and the source's cursor after it with the
        counts, in one step (a learn that stops resumes after the last page kept). Only
        while the learn is still reading (0: a forget dropped it, or it was cancelled) and
        the erasure ledger is still at ``ledger_version`` (-1: check the page again).
        Returns 1 when kept."""
        k = self.keys.learning(place)
        flat_counts = [x for name, count in counts.items() for x in (name, count)]
        flat_staged = [x for s in staged for x in (s.member, s.ts_ms, s.data)]
        return int(
            await run_script(
                self.client,
                "stage_page",
                [k.job, k.staged, k.texts, self.keys.scope(Scope.of(place).root).gone],
                [ledger_version, cursor, len(counts), *flat_counts, *flat_staged],
            )
        )

    async def staged(self, place: str, *, count: int) -> list[Staged]:
        """The oldest messages kept and not stored yet."""
        k = self.keys.learning(place)
        members = await self.client.zrange(k.staged, 0, count - 1, withscores=True)
        if not members:
            return []
        texts = await self.client.hmget(k.texts, [m for m, _ in members])
        return [
            Staged(member=m, ts_ms=int(score), data=text)
            for (m, score), text in zip(members, texts, strict=True)
            if text is not None
        ]

    async def staged_count(self, place: str) -> int:
        return int(await self.client.zcard(self.keys.learning(place).staged))

    async def all_staged(self, place: str) -> list[Staged]:
        """Every message kept (the estimate before storing: a learn's few thousand)."""
        out: list[Staged] = []
        k = self.keys.learning(place)
        start = 0
        while batch := await self.client.zrange(k.staged, start, start + 4999, withscores=True):
            texts = await self.client.hmget(k.texts, [m for m, _ in batch])
            out += [
                Staged(member=m, ts_ms=int(score), data=text)
                for (m, score), text in zip(batch, texts, strict=True)
                if text is not None
            ]
            start += len(batch)
        return out

    async def unstage(self, place: str, members: Sequence[str]) -> None:
        if not members:
            return
        k = self.keys.learning(place)
        pipe = await atomic_pipeline(self.client)
        pipe.zrem(k.staged, *members)
        pipe.hdel(k.texts, *members)
        await pipe.execute()

    # -- what is known already, what was forgotten --------------------------------------
    async def stored_already(self, pairs: Sequence[tuple[str, str]]) -> list[bool]:
        """For each (scope, platform id): whether the scope holds that message already."""
        if not pairs:
            return []
        look = self.client.pipeline(transaction=False)
        for scope, platform_id in pairs:
            look.zscore(self.keys.scope(scope).ids, platform_id)
        return [score is not None for score in await look.execute()]

    async def entries_between(self, scope: str, start_ms: int, end_ms: int) -> list[LogEntry]:
        """The log's entries stored at ``start_ms`` and up to (not at) ``end_ms``."""
        found = await self.client.xrange(
            self.keys.scope(scope).log, min=str(start_ms), max=f"({end_ms}"
        )
        return [LogEntry.from_stream(entry_id, fields) for entry_id, fields in found]

    async def first_entry(self, scope: str) -> tuple[str, int] | None:
        """The log's first entry: its id and the time in it (ms), or None."""
        first = await self.client.xrange(self.keys.scope(scope).log, count=1)
        if not first:
            return None
        entry_id, fields = first[0]
        return entry_id, int(fields.get("ts") or entry_id.split("-")[0])

    # -- putting the past in place -------------------------------------------------------
    async def prepend(
        self,
        scope: str,
        entries: Sequence[tuple[int, Mapping[str, str]]],
        *,
        ledger_version: str,
        speakers: Sequence[str] = (),
    ) -> list[str] | None:
        """Put ``entries`` (time in ms, fields; oldest first, all older than the log's first
        entry) before the scope's log, in one rewrite of it; their platform ids are noted as
        stored. Only while the erasure ledger is still at ``ledger_version`` (the entries
        were checked against it): None when it moved (check them again). Returns their ids
        (empty when the log kept changing under the rewrite)."""
        if not entries:
            return []
        k = self.keys.scope(scope)
        # Who spoke, noted first: a forget of one of them that comes while the past is put
        # in place finds it there (a speaker with nothing said yet costs it nothing).
        pipe = await atomic_pipeline(self.client)
        if speakers:
            pipe.zadd(k.speakers, {speaker: 0 for speaker in speakers})
        if Scope.of(scope).is_thread:
            pipe.zadd(k.threads, {scope: entries[-1][0]}, gt=True)
        await pipe.execute()
        ids: list[str] = []
        seq, last_ms = 0, -1
        for ms, _ in entries:
            seq = seq + 1 if ms == last_ms else 0
            last_ms = ms
            ids.append(f"{ms}-{seq}")
        # Each one's platform id and time, noted as stored in the rewrite's last step.
        stored = [str(v) for ms, fields in entries if fields.get("p") for v in (fields["p"], ms)]
        for _ in range(3):
            seed = self.client.pipeline(transaction=False)
            seed.delete(k.log_rewrite)
            for entry_id, (_, fields) in zip(ids, entries, strict=True):
                seed.xadd(k.log_rewrite, dict(fields), id=entry_id)
            await seed.execute()
            last, done = "0-0", False
            while not done:
                last, finished = await run_script(
                    self.client, "rewrite_log_slice", [k.log, k.log_rewrite], [last, SLICE]
                )
                last, done = str(last), bool(int(finished))
            finished = int(
                await run_script(
                    self.client,
                    "prepend_finish",
                    [k.log, k.log_rewrite, k.state, k.ids, k.gone],
                    [
                        last if last != "0-0" else "",
                        len(entries),
                        ids[-1],
                        entries[-1][0],
                        ledger_version,
                        *stored,
                    ],
                )
            )
            if finished < 0:
                return None
            if finished:
                break
        else:
            await self.client.delete(k.log_rewrite)
            return []
        return ids

    async def write_facts(self, scope: str, ops: Sequence[Sequence[str]], *, epoch: int) -> bool:
        """Facts the past's summaries learned about the place (merge_ops' operations), only
        while nothing was forgotten since they were read at ``epoch``."""
        if not ops:
            return True
        k = self.keys.scope(scope)
        payload = json.dumps([list(op) for op in ops], ensure_ascii=False)
        done = await run_script(
            self.client, "write_facts_at", [k.state, k.facts, k.forgets], [payload, epoch]
        )
        return bool(done)

    async def insert_days(
        self,
        scope: str,
        days: Sequence[DaySummary],
        *,
        days_max: int,
        episodes_max: int,
        epoch: int,
    ) -> int | None:
        """Past days' records among the scope's days and day records, in order, only while
        nothing was forgotten since they were read at ``epoch`` (None otherwise)."""
        if not days:
            return 0
        k = self.keys.scope(scope)
        records = [d.to_json() for d in days]
        added = await run_script(
            self.client,
            "insert_records",
            [k.days, k.done, k.state, k.forgets, k.episodes],
            [
                "day",
                "day:",
                "learned-day:",
                days_max,
                epoch,
                "learned-episode:",
                episodes_max,
                *records,
            ],
        )
        return None if int(added) < 0 else int(added)

    async def insert_weeks(
        self, scope: str, weeks: Sequence[WeekSummary], *, weeks_max: int, epoch: int
    ) -> int | None:
        """Past weeks among the scope's, as :meth:`insert_days`."""
        if not weeks:
            return 0
        k = self.keys.scope(scope)
        added = await run_script(
            self.client,
            "insert_records",
            [k.weeks, k.done, k.state, k.forgets],
            [
                "week",
                "week:",
                "learned-week:",
                weeks_max,
                epoch,
                "",
                0,
                *[w.to_json() for w in weeks],
            ],
        )
        return None if int(added) < 0 else int(added)

    async def set_fields_at(
        self, scope: str, fields: Mapping[str, str | int], *, epoch: int
    ) -> bool:
        """State fields made from the past (its long-term tier), only while nothing was
        forgotten since it was read at ``epoch``."""
        k = self.keys.scope(scope)
        flat = [str(x) for name, value in fields.items() for x in (name, value)]
        done = await run_script(self.client, "set_fields_at", [k.state, k.forgets], [epoch, *flat])
        return bool(done)
