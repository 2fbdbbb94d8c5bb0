"""Maintenance's protocol on a scope: its lock (taken with the state in one round trip),
the compare-and-set steps that move the tiers on (Lua), and the back-off after a failed
summary. A part of :class:`~memory_core.store.repo.MemoryRepo`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from memory_core.models import DaySummary, ScopeState, WeekSummary
from memory_core.store.keys import KeySchema, ScopeKeys
from memory_core.store.locks import LockHolder
from memory_core.store.pipelines import atomic_pipeline
from memory_core.store.records import LockClaim, cas_reply, real_ms
from memory_core.store.redis_errors import redis_errors_translated, translates_redis_errors
from memory_core.store.repo_reads import ScopeReads
from memory_core.store.repo_writes import ScopeWrites
from memory_core.store.scripts import run_script


@translates_redis_errors
class TierSteps:
    def __init__(
        self, client: Any, keys: KeySchema, *, reads: ScopeReads, writes: ScopeWrites
    ) -> None:
        self.client = client
        self.keys = keys
        self.reads = reads  # the state read again after a lock is taken over
        self.writes = writes  # the log rewritten after retention trimmed it

    def k(self, scope: str) -> ScopeKeys:
        return self.keys.scope(scope)

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
                return LockClaim(token=mine, state=await self.reads.state(scope), taken_from=holder)
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
            await self.writes.rewrite_log(scope)
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
