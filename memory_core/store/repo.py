"""Typed access to one scope's memory in Redis. The only class that issues Redis commands
for scope data; key names come from :mod:`memory_core.store.keys`, atomic writes from
:mod:`memory_core.store.scripts`.

It is built in layers, one module and job each: :class:`~memory_core.store.repo_reads.ScopeReads`
reads, :class:`~memory_core.store.repo_writes.ScopeWrites` adds the admin writes, and
:class:`MemoryRepo` here adds the hot path (storing a message) and maintenance's protocol:
its lock and the compare-and-set steps that move the tiers on.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from redis.asyncio.cluster import RedisCluster
from redis.exceptions import NoScriptError

from memory_core.models import DaySummary, IngestResult, ScopeState, WeekSummary
from memory_core.scopes import Scope
from memory_core.store.keys import KeySchema
from memory_core.store.lane import FastLane
from memory_core.store.locks import LockHolder
from memory_core.store.pipelines import atomic_pipeline
from memory_core.store.records import LockClaim, cas_reply, real_ms
from memory_core.store.redis_errors import redis_errors_translated, translates_redis_errors
from memory_core.store.repo_writes import ScopeWrites
from memory_core.store.scripts import SCRIPTS, SHAS, run_script

log = logging.getLogger(__name__)

# Platform ids remembered per scope to store each message once: the newest this many (a
# sorted set of ~100 bytes an id, so at most ~10 MB for a scope that big; its log is bigger).
PLATFORM_IDS_MAX = 100_000


async def _ingest_round_trip(
    client: Any,
    lane: FastLane | None,
    where: _Where,
    args: list[Any],
    ts_ms: int,
    *,
    side: bool,
    by_source: bool = False,
) -> tuple[Any, list[BaseException]]:
    """The ingest script and its side writes (``side``: the scope's entry in the activity
    index, its place in its server's tree), in one round trip: on one Redis, one script that
    makes them too; on a cluster the commands at once (the side keys' slots may be on other
    shards, and a shard that is down must not fail a message stored on a live one).
    ``lane``: the store's own connection for this (one server; none on a cluster).
    Returns the script's reply and the side writes' errors; the script's own error is
    raised. (A function, not a method: the class's error translation would turn the
    NoScriptError its caller retries on into a StoreError.)"""
    head = ("EVAL", SCRIPTS["ingest"]) if by_source else ("EVALSHA", SHAS["ingest"])
    cluster = lane is None and isinstance(client, RedisCluster)
    if not cluster:
        keys = where.keys + where.side_keys if side else where.keys
        script = (*head, len(keys), *keys, *args, *(where.side_args if side else ()))
        if lane is not None:  # one server, by the hot path's own connection
            return await lane.call(*script), []
        return await client.execute_command(*script), []
    script = (*head, len(where.keys), *where.keys, *args)
    result, *rest = await asyncio.gather(
        client.execute_command(*script),
        *(client.execute_command(*command) for command in (where.commands(ts_ms) if side else [])),
        return_exceptions=True,
    )
    if isinstance(result, BaseException):
        raise result
    return result, [r for r in rest if isinstance(r, BaseException)]


@dataclass(frozen=True, slots=True)
class _Where:
    """What storing a message needs of its scope's name, worked out once per scope: the
    script's keys; where the message is noted as it is stored (the scope in the activity
    index; in a server, its channel among the server's places and a thread's channel)."""

    keys: tuple[str, ...]  # log, state, ids, root state, threads, speakers
    side_keys: tuple[str, ...]  # index[, places[, parents]]
    side_args: tuple[str, str, str]  # scope, channel, thread (as the ingest script takes them)
    thread_key: str  # the scope's name when it is a thread, else ""
    thread: str

    def commands(self, ts_ms: int) -> list[tuple[Any, ...]]:
        """The side writes as commands of their own (a cluster)."""
        scope, root, thread = self.side_args
        out: list[tuple[Any, ...]] = [("ZADD", self.side_keys[0], ts_ms, scope)]
        if len(self.side_keys) > 1:
            out.append(("ZADD", self.side_keys[1], ts_ms, root))
        if len(self.side_keys) > 2:
            out.append(("HSET", self.side_keys[2], thread, root))
        return out


# Scopes whose _Where is kept (a few hundred bytes each); past it, worked out again.
WHERE_CACHED = 20_000


@translates_redis_errors
class MemoryRepo(ScopeWrites):
    def __init__(self, client: Any, keys: KeySchema, *, lane: FastLane | None = None) -> None:
        super().__init__(client, keys, lane=lane)
        self._where: dict[str, _Where] = {}

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
        place_name: str = "",
        replay: bool = False,
        own_day_end_ms: int = 0,
        public: bool = False,
        touch_index: bool = True,
        reply_to: str = "",
        audience: str = "",
        answers: str = "",
    ) -> IngestResult:
        """Store one message, and note where it was said (the activity index; the place in
        its server's tree, the speaker among its subtree's): one round trip. ``replay``: a
        message buffered during an outage, which must not be stored twice. A non-empty
        ``platform_id`` is stored once (``outcome`` "duplicate" the next time).
        ``own_day_end_ms`` (a replayed line): the end of the message's own day; the message
        is refused (``outcome`` "day_closed") rather than counted in a later day.
        ``touch_index=False``: an edited message stored again, which is no new activity.
        ``reply_to``, ``answers``: the bot's answer, to this user id and this platform
        message. ``audience``: the place's."""
        where = self._where.get(scope) or self._where_of(scope)
        speaker = f"{author_id}|{where.thread}" if role == "user" and author_id else ""
        args = [
            ts_ms,
            role,
            author,
            author_id,
            text,
            platform_id,
            tokens,
            day,
            where.thread_key,
            place_name,
            "1" if replay else "",
            own_day_end_ms or "",
            PLATFORM_IDS_MAX,
            "1" if public else "",
            speaker,
            reply_to,
            audience,
            answers,
        ]
        # By the script's hash; when the server does not know it (restarted, failed over),
        # by its source, which also caches it there.
        with redis_errors_translated("could not store the message"):
            try:
                result, side_errors = await _ingest_round_trip(
                    self.client, self.lane, where, args, ts_ms, side=touch_index
                )
            except NoScriptError:
                result, side_errors = await _ingest_round_trip(
                    self.client, self.lane, where, args, ts_ms, side=touch_index, by_source=True
                )
        if side_errors:
            # Stored all the same: the message is not lost (nor stored twice by a retry);
            # the scope's next message writes its index and tree entries.
            log.warning(
                "message stored in %s, but not its entries in the scopes index or its "
                "server's tree: %s",
                scope,
                side_errors[0],
            )
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

    def _where_of(self, scope: str) -> _Where:
        place = Scope.of(scope)
        k = self.k(scope)
        side: tuple[str, ...] = (self.keys.scopes_index_of(place.key),)
        if place.server_key is not None and not place.person:
            server = self.keys.server(place.server_key)
            side += (server.places,)
            if place.is_thread:
                side += (server.parents,)
        where = _Where(
            keys=(k.log, k.state, k.ids, k.root_state, k.threads, k.speakers),
            side_keys=side,
            side_args=(place.key, place.root.key, place.thread),
            thread_key=place.key if place.is_thread else "",
            thread=place.thread,
        )
        if len(self._where) >= WHERE_CACHED:
            self._where.clear()
        self._where[scope] = where
        return where

    async def lock_and_state(self, scope: str, ttl_ms: int) -> LockClaim:
        """Take the maintenance lock and read the state in one round trip. A lock whose
        holder is provably gone (killed on this host) is taken over at once, atomically;
        otherwise the claim says who holds it and when its lock runs out."""
        mine = LockHolder.this_process(real_ms()).value()
        k = self.k(scope)
        pipe = self.client.pipeline(transaction=False)
        pipe.set(k.lock, mine, nx=True, px=ttl_ms)
        pipe.get(k.lock)
        pipe.pttl(k.lock)
        pipe.hgetall(k.state)
        pipe.hgetall(k.root_state)  # a thread's channel: the settings it inherits
        ok, value, pttl, raw, root = await pipe.execute()
        state = ScopeState.from_hash(raw)
        if k.root_state != k.state:
            state = state.inherit(ScopeState.from_hash(root))
        if ok:
            return LockClaim(token=mine, state=state)
        holder = LockHolder.parse(value)
        if holder is not None and holder.provably_gone():
            taken = await run_script(self.client, "take_over_lock", [k.lock], [value, mine, ttl_ms])
            if taken:
                # Read again: the state above was read before the lock was ours.
                return LockClaim(token=mine, state=await self.state(scope), taken_from=holder)
        return LockClaim(
            token=None, state=state, holder=holder, expires_ms=real_ms() + max(int(pttl), 0)
        )

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
            [k.state, k.facts, k.root_state],
            [expected_upto, expected_day, new_upto, short, tokens, count, now_iso, ops, str(epoch)],
        )
        return cas_reply(reply)[1]

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
        result, state, days = cas_reply(reply)
        if result == 1 and trim_before:  # retention trimmed: no bytes of it left behind
            await self.rewrite_log(scope)
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
        result, state, _ = cas_reply(reply)
        return result, state

    async def note_failure(self, scope: str, *, retry_at_ms: int) -> int:
        k = self.k(scope)
        pipe = await atomic_pipeline(self.client)
        pipe.hincrby(k.state, "failures", 1)
        pipe.hset(k.state, "retry_at", retry_at_ms)
        failures, _ = await pipe.execute()
        return int(failures)

    # -- locks -------------------------------------------------------------------------
    async def try_lock(self, scope: str, ttl_ms: int) -> str | None:
        token = LockHolder.this_process(real_ms()).value()
        ok = await self.client.set(self.k(scope).lock, token, nx=True, px=ttl_ms)
        return token if ok else None

    async def renew_lock(self, scope: str, token: str, ttl_ms: int) -> bool:
        """Keep our lock alive; False if it is no longer ours."""
        with redis_errors_translated(f"could not renew the maintenance lock of {scope}"):
            renewed = await run_script(
                self.client, "renew_lock", [self.k(scope).lock], [token, ttl_ms]
            )
        return bool(renewed)

    async def unlock(self, scope: str, token: str) -> None:
        doing = f"could not release the maintenance lock of {scope} (it expires on its own)"
        with redis_errors_translated(doing):
            await run_script(self.client, "release_lock", [self.k(scope).lock], [token])
