"""Reading one scope's memory from Redis, and the list of scopes: a part of
:class:`~memory_core.store.repo.MemoryRepo`. Key names come from
:mod:`memory_core.store.keys`; replies are decoded into models here.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from typing import Any

from redis.asyncio import Redis

from memory_core.models import DaySummary, Fact, LogEntry, ScopeState, WeekSummary
from memory_core.scopes import Scope
from memory_core.store.keys import KeySchema, ScopeKeys
from memory_core.store.lane import FastLane
from memory_core.store.records import (
    PlaceCounts,
    PromptSnapshot,
    ScopeDump,
    facts_from_hash,
    log_entries,
    pairs,
)
from memory_core.store.redis_errors import translates_redis_errors
from memory_core.store.scripts import run_script

# A thread's prompt reads this many of its channel's messages before it began, and from
# then on (its first message and the answer to it are among the first of those).
THREAD_CONTEXT = 20


def _as_client_reply(command: str, reply: Any) -> Any:
    """A raw reply as redis-py's client converts it: a hash as a dict, stream entries as
    (id, fields) pairs."""
    if command == "HGETALL":
        return pairs(reply)
    if command in ("XRANGE", "XREVRANGE"):
        return [(entry_id, pairs(fields)) for entry_id, fields in reply]
    return reply


# What a scope's state keeps when its memory is forgotten (see the forget_scope script).
KEPT_BY_FORGET = frozenset({"epoch", "fact_seq", "forgets_pending"})


@translates_redis_errors
class ScopeReads:
    def __init__(self, client: Redis, keys: KeySchema, *, lane: FastLane | None = None) -> None:
        # redis-py's annotations do not model decode_responses=True (every reply typed as
        # bytes | str), so the client is used untyped here and replies are decoded into the
        # typed models at this boundary.
        self.client: Any = client
        self.keys = keys
        self.lane = lane  # the store's own connection (one server; none on a cluster)

    def k(self, scope: str) -> ScopeKeys:
        return self.keys.scope(scope)

    async def prompt_snapshot(
        self, scope: str, *, recent: int, user: str | None = None
    ) -> PromptSnapshot:
        """Everything a prompt reads, in one round trip; a thread's settings it does not set
        itself are its channel's, whose state comes along (``parent_state``)."""
        k = self.k(scope)
        place = Scope.of(scope)
        started = place.thread_started_ms
        commands: list[tuple[Any, ...]] = [
            ("HGETALL", k.state),
            ("HGETALL", k.facts),
            ("XREVRANGE", k.log, "+", "-", "COUNT", recent),
        ]
        if place.parent:
            commands.append(("HGETALL", k.root_state))
        if started is not None:  # the channel where the thread began, around that moment
            channel_log = self.k(place.root.key).log
            commands.append(
                ("XREVRANGE", channel_log, str(max(0, started - 1)), "-", "COUNT", THREAD_CONTEXT)
            )
            commands.append(("XRANGE", channel_log, str(started), "+", "COUNT", THREAD_CONTEXT))
        if user:
            commands.append(("HGETALL", self.k(user).facts))
        replies = await self._read_together(commands)
        state, facts, log, rest = replies[0], replies[1], replies[2], replies[3:]
        parent_state = ScopeState.from_hash(rest.pop(0)) if place.parent else None
        before = log_entries(reversed(rest.pop(0))) if started is not None else []
        after = log_entries(rest.pop(0)) if started is not None else []
        return PromptSnapshot(
            state=ScopeState.from_hash(state).inherit(parent_state),
            facts=facts_from_hash(facts),
            recent=log_entries(log),
            parent_state=parent_state,
            user_facts=facts_from_hash(rest.pop(0)) if user else [],
            before_thread=before,
            from_thread=after,
        )

    async def _read_together(self, commands: Sequence[tuple[Any, ...]]) -> list[Any]:
        """Read commands (HGETALL, XRANGE, XREVRANGE) sent together, replies as redis-py
        gives them: by the store's own connection where it has one (a reply's reads, where
        redis-py's Python per command cost more than the round trip), else a pipeline."""
        if self.lane is not None:
            return [
                _as_client_reply(c[0], r)
                for c, r in zip(commands, await self.lane.batch(commands), strict=True)
            ]
        pipe = self.client.pipeline(transaction=False)
        for command in commands:
            pipe.execute_command(*command)
        replies: list[Any] = await pipe.execute()
        return replies

    async def facts_of(self, scopes: Sequence[str]) -> dict[str, list[Fact]]:
        """The facts of several scopes (people's fact scopes) in one round trip."""
        if not scopes:
            return {}
        pipe = self.client.pipeline(transaction=False)
        for scope in scopes:
            pipe.hgetall(self.k(scope).facts)
        rows = await pipe.execute()
        return {scope: facts_from_hash(row) for scope, row in zip(scopes, rows, strict=True)}

    async def people_of(self, scope: str) -> list[str]:
        """The person scopes holding facts learned in ``scope``."""
        return sorted(str(p) for p in await self.client.smembers(self.k(scope).people))

    # -- reads -------------------------------------------------------------------------
    async def state(self, scope: str) -> ScopeState:
        """The scope's state; a thread's with the settings it does not set itself taken
        from its channel's (read in the same round trip)."""
        k = self.k(scope)
        if k.root_state == k.state:
            return ScopeState.from_hash(await self.client.hgetall(k.state))
        pipe = self.client.pipeline(transaction=False)
        pipe.hgetall(k.state)
        pipe.hgetall(k.root_state)
        own, root = await pipe.execute()
        return ScopeState.from_hash(own).inherit(ScopeState.from_hash(root))

    async def raw_state(self, scope: str) -> dict[str, str]:
        return dict(await self.client.hgetall(self.k(scope).state))

    async def entries_after(
        self, scope: str, after_id: str, *, before_ms: int | None = None, limit: int | None = None
    ) -> list[LogEntry]:
        """Entries with id > after_id ("" = from the start) and time < before_ms."""
        start = f"({after_id}" if after_id else "-"
        end = f"{before_ms - 1}" if before_ms is not None else "+"
        if before_ms is not None and before_ms <= 0:
            return []
        raw = await self.client.xrange(self.k(scope).log, min=start, max=end, count=limit)
        return log_entries(raw)

    async def day_view(
        self, scope: str, *, after_id: str, end_ms: int, limit: int
    ) -> tuple[list[LogEntry], LogEntry | None]:
        """In one round trip: the unsummarised entries of a day (id > after_id, time < end_ms)
        and the first entry after the day."""
        log = self.k(scope).log
        pipe = self.client.pipeline(transaction=False)
        pipe.xrange(log, min=f"({after_id}" if after_id else "-", max=str(end_ms - 1), count=limit)
        pipe.xrange(log, min=str(end_ms), max="+", count=1)
        day, after = await pipe.execute()
        following = log_entries(after)
        return log_entries(day), (following[0] if following else None)

    async def first_entry_from(self, scope: str, ms: int) -> LogEntry | None:
        raw = await self.client.xrange(self.k(scope).log, min=str(ms), max="+", count=1)
        entries = log_entries(raw)
        return entries[0] if entries else None

    async def entries_from(self, scope: str, from_ms: int, *, limit: int) -> list[LogEntry]:
        """At most ``limit`` entries with an id time of ``from_ms`` or later, oldest first."""
        raw = await self.client.xrange(self.k(scope).log, min=str(from_ms), max="+", count=limit)
        return log_entries(raw)

    async def entries_by_ids(self, scope: str, ids: Sequence[str]) -> list[LogEntry]:
        """The log entries with these stream ids that are still there, in one round trip."""
        if not ids:
            return []
        pipe = self.client.pipeline(transaction=False)
        for entry_id in ids:
            pipe.xrange(self.k(scope).log, min=entry_id, max=entry_id, count=1)
        return [e for raw in await pipe.execute() for e in log_entries(raw)]

    async def all_entries(self, scope: str) -> list[LogEntry]:
        return log_entries(await self.client.xrange(self.k(scope).log))

    async def recent(self, scope: str, count: int) -> list[LogEntry]:
        return log_entries(await self.client.xrevrange(self.k(scope).log, count=count))

    async def days(self, scope: str) -> list[DaySummary]:
        return [
            DaySummary.from_json(x) for x in await self.client.lrange(self.k(scope).days, 0, -1)
        ]

    async def episodes(self, scope: str) -> list[DaySummary]:
        raw = await self.client.lrange(self.k(scope).episodes, 0, -1)
        return [DaySummary.from_json(x) for x in raw]

    async def weeks(self, scope: str) -> list[WeekSummary]:
        raw = await self.client.lrange(self.k(scope).weeks, 0, -1)
        return [WeekSummary.from_json(x) for x in raw]

    async def facts(self, scope: str) -> list[Fact]:
        return facts_from_hash(await self.client.hgetall(self.k(scope).facts))

    async def log_length(self, scope: str) -> int:
        return int(await self.client.xlen(self.k(scope).log))

    async def dump(self, scope: str) -> ScopeDump:
        k = self.k(scope)
        pipe = self.client.pipeline(transaction=False)
        pipe.hgetall(k.state)
        pipe.xrange(k.log)
        pipe.lrange(k.days, 0, -1)
        pipe.lrange(k.weeks, 0, -1)
        pipe.hgetall(k.facts)
        pipe.smembers(k.done)
        pipe.lrange(k.episodes, 0, -1)
        state, log, days, weeks, facts, done, episodes = await pipe.execute()
        return ScopeDump(
            state=dict(state),
            log=log_entries(log),
            days=[DaySummary.from_json(x) for x in days],
            weeks=[WeekSummary.from_json(x) for x in weeks],
            facts=facts_from_hash(facts),
            done=sorted(done),
            episodes=[DaySummary.from_json(x) for x in episodes],
        )

    async def scopes(self, *, offset: int = 0, limit: int = 100) -> list[tuple[str, int]]:
        """Scopes by last activity, newest first (ties by name): the buckets merged, each
        read in chunks as the merge reaches its end."""
        want = offset + limit
        if limit <= 0:
            return []
        keys = self.keys.all_scopes_indexes()
        chunk = -(-want // len(keys)) + 16  # a bucket's share of the page, and some slack
        buffers: list[list[tuple[str, int]]] = [[] for _ in keys]
        read = [0] * len(keys)
        done = [False] * len(keys)

        async def refill(indexes: list[int]) -> None:
            pipe = self.client.pipeline(transaction=False)
            for i in indexes:
                pipe.zrevrange(keys[i], read[i], read[i] + chunk - 1, withscores=True)
            for i, rows in zip(indexes, await pipe.execute(), strict=True):
                buffers[i] = [(str(s), int(score)) for s, score in rows][::-1]  # pop() = next
                read[i] += len(rows)
                done[i] = len(rows) < chunk

        await refill(list(range(len(keys))))
        heap = [(-buf[-1][1], buf[-1][0], i) for i, buf in enumerate(buffers) if buf]
        heapq.heapify(heap)
        out: list[tuple[str, int]] = []
        while heap and len(out) < want:
            _, _, i = heapq.heappop(heap)
            out.append(buffers[i].pop())
            if not buffers[i] and not done[i]:
                await refill([i])
            if buffers[i]:
                scope, score = buffers[i][-1]
                heapq.heappush(heap, (-score, scope, i))
        return out[offset:]

    async def scope_count(self) -> int:
        pipe = self.client.pipeline(transaction=False)
        for key in self.keys.all_scopes_indexes():
            pipe.zcard(key)
        return sum(int(n) for n in await pipe.execute())

    async def scope_exists(self, scope: str) -> bool:
        """Whether the scope holds any memory (a forgotten scope keeps only its epoch)."""
        k = self.k(scope)
        pipe = self.client.pipeline(transaction=False)
        pipe.exists(*(key for key in k.all() if key != k.state))
        pipe.hkeys(k.state)
        others, fields = await pipe.execute()
        return bool(others) or any(f not in KEPT_BY_FORGET for f in fields)

    # -- the tree ----------------------------------------------------------------------
    async def threads_of(self, scope: str) -> list[str]:
        """The threads of a channel that hold (or held) memory, most recently active first."""
        place = Scope.of(scope)
        if place.is_thread:
            return []
        return [str(t) for t in await self.client.zrevrange(self.k(scope).threads, 0, -1)]

    async def places_of(self, server_key: str) -> list[tuple[str, int]]:
        """The channels (and Slack DMs) of a server that hold memory, with their last
        activity (ms), most recent first."""
        rows = await self.client.zrevrange(
            self.keys.server(server_key).places, 0, -1, withscores=True
        )
        return [(str(place), int(score)) for place, score in rows]

    async def spoken_in(self, roots: Sequence[str], user_id: str) -> dict[str, list[str]]:
        """Of each subtree (a channel and its threads), the places where ``user_id`` spoke:
        root -> the scopes (the channel, its threads), in one round trip."""
        if not roots or not user_id:
            return {}
        pipe = self.client.pipeline(transaction=False)
        for root in roots:
            pipe.zrangebylex(self.k(root).speakers, f"[{user_id}|", f"({user_id}}}")
        found: dict[str, list[str]] = {}
        for root, members in zip(roots, await pipe.execute(), strict=True):
            place = Scope.of(root)
            scopes = [
                place.thread_scope(thread).key if thread else place.key
                for thread in (str(m).split("|", 1)[1] for m in members)
            ]
            if scopes:
                found[root] = sorted(set(scopes))
        return found

    async def names_of(self, scopes: Sequence[str]) -> dict[str, str]:
        """The places' names as their platforms last gave them ("" unknown), one round trip."""
        if not scopes:
            return {}
        pipe = self.client.pipeline(transaction=False)
        for scope in scopes:
            pipe.hget(self.k(scope).state, "name")
        rows = await pipe.execute()
        return {scope: str(name or "") for scope, name in zip(scopes, rows, strict=True)}

    async def counts_of(self, scopes: Sequence[str]) -> dict[str, PlaceCounts]:
        """Each place's name, message and fact counts and (a channel's) threads, in one
        round trip: what a tree of places shows beside each node."""
        if not scopes:
            return {}
        pipe = self.client.pipeline(transaction=False)
        for scope in scopes:
            k = self.k(scope)
            pipe.hmget(k.state, ["name", "msg_count"])
            pipe.hlen(k.facts)
            pipe.zcard(k.threads)  # a thread's are its channel's: not counted below
        rows = await pipe.execute()
        out: dict[str, PlaceCounts] = {}
        for i, scope in enumerate(scopes):
            (name, messages), facts, threads = rows[3 * i : 3 * i + 3]
            out[scope] = PlaceCounts(
                name=str(name or ""),
                messages=int(messages or 0),
                facts=int(facts),
                threads=0 if Scope.of(scope).is_thread else int(threads),
            )
        return out

    async def messages_by(self, scopes: Sequence[str], user_id: str) -> dict[str, int]:
        """How many messages ``user_id`` wrote in each scope (counted in Redis)."""
        return {
            scope: int(await run_script(self.client, "count_by", [self.k(scope).log], [user_id]))
            for scope in scopes
        }

    async def thread_parent(self, server_key: str, thread_id: str) -> str | None:
        """The channel scope of a thread, as the tree recorded it (a thread the platform
        no longer describes: not cached, archived, deleted)."""
        found = await self.client.hget(self.keys.server(server_key).parents, thread_id)
        return str(found) if found else None
