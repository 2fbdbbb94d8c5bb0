"""Typed access to one scope's memory in Redis. The only module that issues Redis commands
for scope data; key names come from :mod:`memory_core.store.keys`, atomic writes from
:mod:`memory_core.store.scripts`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError, RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from memory_core.errors import StoreError, StoreUnavailable
from memory_core.models import DaySummary, Fact, IngestResult, LogEntry, ScopeState, WeekSummary
from memory_core.store.keys import KeySchema, ScopeKeys
from memory_core.store.locks import LockHolder
from memory_core.store.redis_errors import translates_redis_errors
from memory_core.store.scripts import SCRIPTS, SHAS, run_script


@dataclass(frozen=True, slots=True)
class PromptSnapshot:
    """Everything prompt assembly reads, fetched in one round trip."""

    state: ScopeState
    facts: list[Fact]
    recent: list[LogEntry]  # newest first
    parent_state: ScopeState | None
    user_facts: list[Fact] = field(default_factory=list)  # about the person asking


@dataclass(frozen=True, slots=True)
class ScopeDump:
    state: dict[str, str]
    log: list[LogEntry]
    days: list[DaySummary]
    weeks: list[WeekSummary]
    facts: list[Fact]
    done: list[str]
    episodes: list[DaySummary] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class LockClaim:
    """The outcome of trying to take a scope's maintenance lock."""

    token: str | None  # our lock's value; None: someone else holds the lock
    state: ScopeState
    holder: LockHolder | None = None  # who does (None: a value naming nobody readable)
    expires_ms: int = 0  # real time (ms) the holder's lock runs out unless renewed
    taken_from: LockHolder | None = None  # a dead holder whose lock we took over


def _real_ms() -> int:
    """Locks live in real time (their TTLs are Redis' clock), whatever the memory clock says."""
    return int(time.time() * 1000)


def _entries(raw: Iterable[tuple[str, Mapping[str, str]]]) -> list[LogEntry]:
    return [LogEntry.from_stream(entry_id, fields) for entry_id, fields in raw]


def _pairs(flat: Sequence[str]) -> dict[str, str]:
    """A flat HGETALL reply from a Lua script as a dict."""
    return {str(flat[i]): str(flat[i + 1]) for i in range(0, len(flat) - 1, 2)}


def _cas_reply(reply: Any) -> tuple[int, ScopeState | None, list[str]]:
    """(result, the state after, extra list) from a compare-and-set script's reply."""
    if not isinstance(reply, list):
        return int(reply), None, []
    state = ScopeState.from_hash(_pairs(reply[1])) if len(reply) > 1 else None
    extra = [str(x) for x in reply[2]] if len(reply) > 2 else []
    return int(reply[0]), state, extra


def _facts(raw: Mapping[str, str]) -> list[Fact]:
    out: list[Fact] = []
    for fact_id, blob in raw.items():
        try:
            fact = Fact.from_json(blob)
        except (ValueError, TypeError):
            continue  # a hand-edited, unreadable fact is shown nowhere rather than crashing
        fact.id = fact_id
        out.append(fact)
    out.sort(key=lambda f: (int(f.id[1:]) if f.id[1:].isdigit() else 0, f.id))
    return out


# Platform ids remembered per scope to store each message once: the newest this many (a
# sorted set of ~100 bytes an id, so at most ~10 MB for a scope that big; its log is bigger).
PLATFORM_IDS_MAX = 100_000


@translates_redis_errors
class MemoryRepo:
    def __init__(self, client: Redis, keys: KeySchema) -> None:
        # redis-py's annotations do not model decode_responses=True (every reply typed as
        # bytes | str), so the client is used untyped here and replies are decoded into the
        # typed models at this boundary.
        self.client: Any = client
        self.keys = keys

    def k(self, scope: str) -> ScopeKeys:
        return self.keys.scope(scope)

    # -- the hot path ------------------------------------------------------------------
    async def ingest(
        self,
        scope: str,
        *,
        ts_ms: int,
        role: str,
        author: str,
        author_id: str,
        text: str,
        platform_id: str,
        tokens: int,
        day: str,
        parent: str,
        place_name: str = "",
        replay: bool = False,
        own_day_end_ms: int = 0,
        public: bool = False,
        touch_index: bool = True,
    ) -> IngestResult:
        """Store one message and touch the scope index: one round trip. ``replay``: a message
        buffered during an outage, which must not be stored twice. A non-empty
        ``platform_id`` is stored once (``outcome`` "duplicate" the next time).
        ``own_day_end_ms`` (a replayed line): the end of the message's own day; the message
        is refused (``outcome`` "day_closed") rather than counted in a later day.
        ``touch_index=False``: an edited message stored again, which is no new activity."""
        k = self.k(scope)
        args = [
            ts_ms,
            role,
            author,
            author_id,
            text,
            platform_id,
            tokens,
            day,
            parent,
            place_name,
            "1" if replay else "",
            own_day_end_ms or "",
            PLATFORM_IDS_MAX,
            "1" if public else "",
        ]
        for attempt in (0, 1):
            pipe = self.client.pipeline(transaction=False)
            # execute_command, not evalsha(): redis-py refuses the latter in cluster pipelines.
            pipe.execute_command("EVALSHA", SHAS["ingest"], 3, k.log, k.state, k.ids, *args)
            if touch_index:
                pipe.zadd(self.keys.scopes_index, {scope: ts_ms})
            try:
                result, *_ = await pipe.execute()
            except NoScriptError:
                if attempt:
                    raise
                await self.client.script_load(SCRIPTS["ingest"])
                continue
            except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
                raise StoreUnavailable(
                    f"could not reach Redis to store the message: {exc}"
                ) from exc
            except RedisError as exc:
                raise StoreError(f"Redis refused the message: {exc}") from exc
            break
        entry_id, ut, un, day_now, tz, mode, lang, retry_at, paused = result[:9]
        outcome = str(result[9]) if len(result) > 9 else ""
        return IngestResult(
            stored=not int(paused) and outcome != "day_closed",
            id=str(entry_id),
            state_day=str(day_now),
            tz=str(tz),
            mode=str(mode),
            lang=str(lang),
            unsum_tokens=int(ut),
            unsum_count=int(un),
            retry_at=int(retry_at),
            outcome=outcome,
        )

    async def prompt_snapshot(
        self, scope: str, *, recent: int, parent: str | None, user: str | None = None
    ) -> PromptSnapshot:
        k = self.k(scope)
        pipe = self.client.pipeline(transaction=False)
        pipe.hgetall(k.state)
        pipe.hgetall(k.facts)
        pipe.xrevrange(k.log, count=recent)
        if parent:
            pipe.hgetall(self.k(parent).state)
        if user:
            pipe.hgetall(self.k(user).facts)
        results = await pipe.execute()
        state, facts, log, rest = results[0], results[1], results[2], results[3:]
        parent_state = ScopeState.from_hash(rest.pop(0)) if parent else None
        return PromptSnapshot(
            state=ScopeState.from_hash(state),
            facts=_facts(facts),
            recent=_entries(log),
            parent_state=parent_state,
            user_facts=_facts(rest.pop(0)) if user else [],
        )

    async def facts_of(self, scopes: Sequence[str]) -> dict[str, list[Fact]]:
        """The facts of several scopes (people's fact scopes) in one round trip."""
        if not scopes:
            return {}
        pipe = self.client.pipeline(transaction=False)
        for scope in scopes:
            pipe.hgetall(self.k(scope).facts)
        rows = await pipe.execute()
        return {scope: _facts(row) for scope, row in zip(scopes, rows, strict=True)}

    async def apply_person_facts(
        self,
        person: str,
        ops: Sequence[Sequence[str]],
        *,
        before: Sequence[Fact],
        origin: str,
        epoch: int,
    ) -> None:
        """Facts about a person learned in ``origin``, written to their own scope.

        The origin records the person first, so that forgetting in it finds these facts. The
        person's scope is another hash slot, so this cannot be one atomic step with the
        summary that made the facts: if a forget moved the origin's epoch meanwhile (it may
        have swept the person's facts before these landed), they are taken back."""
        if not ops:
            return
        await self.note_person(origin, person)
        k = self.k(person)
        payload = json.dumps([list(op) for op in ops], ensure_ascii=False)
        made = await run_script(self.client, "write_facts", [k.state, k.facts], [payload])
        if int(await self.client.hget(self.k(origin).state, "epoch") or 0) == epoch:
            return
        old = {f.id: f for f in before}
        undo = [["del", str(fact_id), ""] for fact_id in made or []]
        undo += [
            ["upd", op[1], old[op[1]].to_json()] for op in ops if op[0] == "upd" and op[1] in old
        ]
        payload = json.dumps(undo, ensure_ascii=False)
        await run_script(self.client, "write_facts", [k.state, k.facts], [payload])

    async def note_person(self, origin: str, person: str) -> None:
        """Record that ``person``'s scope holds facts learned in ``origin``."""
        await self.client.sadd(self.k(origin).people, person)

    async def people_of(self, scope: str) -> list[str]:
        """The person scopes holding facts learned in ``scope``."""
        return sorted(str(p) for p in await self.client.smembers(self.k(scope).people))

    # -- reads -------------------------------------------------------------------------
    async def state(self, scope: str) -> ScopeState:
        return ScopeState.from_hash(await self.client.hgetall(self.k(scope).state))

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
        return _entries(raw)

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
        following = _entries(after)
        return _entries(day), (following[0] if following else None)

    async def lock_and_state(self, scope: str, ttl_ms: int) -> LockClaim:
        """Take the maintenance lock and read the state in one round trip. A lock whose
        holder is provably gone (killed on this host) is taken over at once, atomically;
        otherwise the claim says who holds it and when its lock runs out."""
        mine = LockHolder.this_process(_real_ms()).value()
        k = self.k(scope)
        pipe = self.client.pipeline(transaction=False)
        pipe.set(k.lock, mine, nx=True, px=ttl_ms)
        pipe.get(k.lock)
        pipe.pttl(k.lock)
        pipe.hgetall(k.state)
        ok, value, pttl, raw = await pipe.execute()
        state = ScopeState.from_hash(raw)
        if ok:
            return LockClaim(token=mine, state=state)
        holder = LockHolder.parse(value)
        if holder is not None and holder.provably_gone():
            taken = await run_script(self.client, "take_over_lock", [k.lock], [value, mine, ttl_ms])
            if taken:
                # Read again: the state above was read before the lock was ours.
                return LockClaim(token=mine, state=await self.state(scope), taken_from=holder)
        return LockClaim(
            token=None, state=state, holder=holder, expires_ms=_real_ms() + max(int(pttl), 0)
        )

    async def first_entry_from(self, scope: str, ms: int) -> LogEntry | None:
        raw = await self.client.xrange(self.k(scope).log, min=str(ms), max="+", count=1)
        entries = _entries(raw)
        return entries[0] if entries else None

    async def entries_from(self, scope: str, from_ms: int, *, limit: int) -> list[LogEntry]:
        """At most ``limit`` entries with an id time of ``from_ms`` or later, oldest first."""
        raw = await self.client.xrange(self.k(scope).log, min=str(from_ms), max="+", count=limit)
        return _entries(raw)

    async def all_entries(self, scope: str) -> list[LogEntry]:
        return _entries(await self.client.xrange(self.k(scope).log))

    async def recent(self, scope: str, count: int) -> list[LogEntry]:
        return _entries(await self.client.xrevrange(self.k(scope).log, count=count))

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
        return _facts(await self.client.hgetall(self.k(scope).facts))

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
            log=_entries(log),
            days=[DaySummary.from_json(x) for x in days],
            weeks=[WeekSummary.from_json(x) for x in weeks],
            facts=_facts(facts),
            done=sorted(done),
            episodes=[DaySummary.from_json(x) for x in episodes],
        )

    async def scopes(self, *, offset: int = 0, limit: int = 100) -> list[tuple[str, int]]:
        raw = await self.client.zrevrange(
            self.keys.scopes_index, offset, offset + limit - 1, withscores=True
        )
        return [(str(scope), int(score)) for scope, score in raw]

    async def scope_count(self) -> int:
        return int(await self.client.zcard(self.keys.scopes_index))

    async def scope_exists(self, scope: str) -> bool:
        """Whether the scope holds any memory (a forgotten scope keeps only its epoch)."""
        k = self.k(scope)
        pipe = self.client.pipeline(transaction=False)
        pipe.exists(*(key for key in k.all() if key != k.state))
        pipe.hkeys(k.state)
        others, fields = await pipe.execute()
        return bool(others) or any(f != "epoch" for f in fields)

    # -- atomic transitions (Lua) -----------------------------------------------------
    async def advance_short(
        self,
        scope: str,
        *,
        expected_upto: str,
        expected_day: str,
        new_upto: str,
        short: str,
        tokens: int,
        count: int,
        now_iso: str,
        epoch: int,
        fact_ops: Sequence[Sequence[str]] = (),
    ) -> ScopeState | None:
        """The state after, or None when someone else moved the scope on meanwhile."""
        k = self.k(scope)
        ops = json.dumps([list(op) for op in fact_ops], ensure_ascii=False) if fact_ops else ""
        reply = await run_script(
            self.client,
            "advance_short",
            [k.state, k.facts],
            [expected_upto, expected_day, new_upto, short, tokens, count, now_iso, ops, str(epoch)],
        )
        return _cas_reply(reply)[1]

    async def close_day(
        self,
        scope: str,
        *,
        day: str,
        next_day: str,
        summary: DaySummary | None,
        expected_upto: str,
        new_upto: str,
        tokens: int,
        count: int,
        days_max: int,
        week: str,
        now_iso: str,
        epoch: int,
        trim_before: str = "",
        trimmed_ms: int = 0,
        episodes_max: int = 366,
    ) -> tuple[int, ScopeState | None, list[DaySummary]]:
        """(1, state, days): closed now; (0, None, []): already closed or moved on;
        (-1, state, []): a week refresh must run first. ``trim_before``: retention, the
        XTRIM MINID applied in the same step ("" for none), the trimmed messages' vectors
        with them."""
        k = self.k(scope)
        reply = await run_script(
            self.client,
            "close_day",
            [k.state, k.days, k.done, k.log, k.episodes, k.vectors, k.ids],
            [
                day,
                next_day,
                summary.to_json() if summary else "",
                new_upto,
                tokens,
                count,
                days_max,
                week,
                now_iso,
                expected_upto,
                str(epoch),
                trim_before,
                episodes_max,
                trimmed_ms,
            ],
        )
        result, state, days = _cas_reply(reply)
        return result, state, [DaySummary.from_json(d) for d in days]

    async def apply_refresh(
        self,
        scope: str,
        *,
        refresh_seq: int,
        mid: str,
        overview: str,
        week: str,
        week_summary: WeekSummary | None,
        long: str,
        weeks_max: int,
        now_iso: str,
        epoch: int,
    ) -> tuple[int, ScopeState | None]:
        """(1, state): applied; 0: nothing pending; -1: the days list changed, recompute."""
        k = self.k(scope)
        reply = await run_script(
            self.client,
            "apply_refresh",
            [k.state, k.weeks, k.done],
            [
                str(refresh_seq),
                mid,
                overview,
                week,
                week_summary.to_json() if week_summary else "",
                long,
                weeks_max,
                now_iso,
                str(epoch),
            ],
        )
        result, state, _ = _cas_reply(reply)
        return result, state

    async def note_failure(self, scope: str, *, retry_at_ms: int) -> int:
        k = self.k(scope)
        pipe = self.client.pipeline(transaction=True)
        pipe.hincrby(k.state, "failures", 1)
        pipe.hset(k.state, "retry_at", retry_at_ms)
        failures, _ = await pipe.execute()
        return int(failures)

    # -- locks -------------------------------------------------------------------------
    async def try_lock(self, scope: str, ttl_ms: int) -> str | None:
        token = LockHolder.this_process(_real_ms()).value()
        ok = await self.client.set(self.k(scope).lock, token, nx=True, px=ttl_ms)
        return token if ok else None

    async def renew_lock(self, scope: str, token: str, ttl_ms: int) -> bool:
        """Keep our lock alive; False if it is no longer ours."""
        try:
            renewed = await run_script(
                self.client, "renew_lock", [self.k(scope).lock], [token, ttl_ms]
            )
        except RedisError as exc:
            raise StoreError(f"could not renew the maintenance lock of {scope}: {exc}") from exc
        return bool(renewed)

    async def unlock(self, scope: str, token: str) -> None:
        try:
            await run_script(self.client, "release_lock", [self.k(scope).lock], [token])
        except RedisError as exc:
            raise StoreError(
                f"could not release the maintenance lock of {scope} (it expires on its own): {exc}"
            ) from exc

    # -- admin writes ------------------------------------------------------------------
    async def set_fields(self, scope: str, values: Mapping[str, str | int]) -> None:
        await self.client.hset(self.k(scope).state, mapping=dict(values))

    async def bump_epoch(self, scope: str) -> int:
        return int(await self.client.hincrby(self.k(scope).state, "epoch", 1))

    async def begin_forget(self, scope: str, request: str) -> None:
        """Write a forget down (and move the epoch) before doing any of it."""
        k = self.k(scope)
        pipe = self.client.pipeline(transaction=True)
        pipe.rpush(k.forgets, request)
        pipe.hincrby(k.state, "epoch", 1)
        pipe.hset(k.state, "forgets_pending", 1)
        await pipe.execute()

    async def end_forget(self, scope: str, request: str | None) -> None:
        """Cross a finished forget off (``None``: just settle the flag with the list)."""
        k = self.k(scope)
        await run_script(self.client, "end_forget", [k.forgets, k.state], [request or ""])

    async def resync_counters(self, scope: str) -> None:
        """Re-derive the unsummarised counters and the message count from the log (after
        deleting messages), atomically with any message stored meanwhile."""
        k = self.k(scope)
        await run_script(self.client, "resync_counters", [k.state, k.log], [])

    async def pending_forgets(self, scope: str) -> list[str]:
        return [str(x) for x in await self.client.lrange(self.k(scope).forgets, 0, -1)]

    async def put_fact(self, scope: str, fact: Fact) -> Fact:
        """Store a new fact under a fresh id (ids come from the scope's own counter)."""
        k = self.k(scope)
        seq = await self.client.hincrby(k.state, "fact_seq", 1)
        fact.id = f"f{seq}"
        await self.client.hset(k.facts, fact.id, fact.to_json())
        return fact

    async def replace_fact(self, scope: str, fact: Fact) -> None:
        await self.client.hset(self.k(scope).facts, fact.id, fact.to_json())

    async def delete_facts(self, scope: str, ids: Sequence[str]) -> int:
        if not ids:
            return 0
        return int(await self.client.hdel(self.k(scope).facts, *ids))

    async def delete_entries(self, scope: str, ids: Sequence[str]) -> int:
        """Delete raw messages, and their embeddings with them, and those of the messages
        right after them (embedded with a deleted one as context: made again without it)."""
        if not ids:
            return 0
        k = self.k(scope)
        look = self.client.pipeline(transaction=False)
        for entry_id in ids:
            look.xrange(k.log, min=f"({entry_id}", max="+", count=1)
        following = [found[0][0] for found in await look.execute() if found]
        pipe = self.client.pipeline(transaction=True)
        pipe.xdel(k.log, *ids)
        pipe.hdel(k.vectors, *ids, *following)
        deleted, _ = await pipe.execute()
        return int(deleted)

    async def release_platform_id(self, scope: str, platform_id: str) -> None:
        """Let a platform message be stored again (its edited text replaces the old entry)."""
        await self.client.zrem(self.k(scope).ids, platform_id)

    async def trim_log_before(self, scope: str, minid: str) -> int:
        """Drop raw messages with ids below ``minid`` (retention), and their vectors with
        them in the same atomic step."""
        if not minid:
            return 0
        k = self.k(scope)
        keys = [k.log, k.vectors, k.ids]
        return int(await run_script(self.client, "trim_log", keys, [minid]))

    async def replace_days(self, scope: str, days: Sequence[DaySummary]) -> None:
        await self._replace_list(self.k(scope).days, [d.to_json() for d in days])

    async def replace_episodes(self, scope: str, episodes: Sequence[DaySummary]) -> None:
        await self._replace_list(self.k(scope).episodes, [d.to_json() for d in episodes])

    async def replace_weeks(self, scope: str, weeks: Sequence[WeekSummary]) -> None:
        await self._replace_list(self.k(scope).weeks, [w.to_json() for w in weeks])

    async def _replace_list(self, key: str, values: Sequence[str]) -> None:
        pipe = self.client.pipeline(transaction=True)
        pipe.delete(key)
        if values:
            pipe.rpush(key, *values)
        await pipe.execute()

    async def forget_scope(self, scope: str) -> int:
        """Delete every key of the scope and its index entry; the epoch moves on (it is the
        only thing left), so nothing computed from the old memory can be written back."""
        k = self.k(scope)
        keys = [k.state, *(key for key in k.all() if key != k.state)]
        deleted = await run_script(self.client, "forget_scope", keys, [])
        await self.client.zrem(self.keys.scopes_index, scope)
        return int(deleted)

    async def restore(self, scope: str, dump: ScopeDump, *, last_activity_ms: int) -> None:
        """Write a dump into an empty scope (import)."""
        k = self.k(scope)
        if await self.scope_exists(scope):
            raise StoreError(
                f"scope {scope} already has memory; forget it first or import elsewhere"
            )
        pipe = self.client.pipeline(transaction=True)
        if dump.state:
            pipe.hset(k.state, mapping=dump.state)
        for entry in dump.log:
            fields: dict[Any, Any] = {
                "r": entry.role,
                "a": entry.author,
                "u": entry.author_id,
                "t": entry.text,
                "ts": str(int(entry.ts.timestamp() * 1000)),
                "p": entry.platform_id,
                "k": str(entry.tokens),
            }
            pipe.xadd(k.log, fields, id=entry.id)
        if dump.days:
            pipe.rpush(k.days, *[d.to_json() for d in dump.days])
        if dump.weeks:
            pipe.rpush(k.weeks, *[w.to_json() for w in dump.weeks])
        if dump.episodes:
            pipe.rpush(k.episodes, *[d.to_json() for d in dump.episodes])
        for fact in dump.facts:
            pipe.hset(k.facts, fact.id, fact.to_json())
        if dump.done:
            pipe.sadd(k.done, *dump.done)
        await pipe.execute()
        # The index lives in another hash slot: outside the scope's transaction.
        await self.client.zadd(self.keys.scopes_index, {scope: last_activity_ms})
