"""The spend ledger's Redis side: per-day hashes of tokens spent (a scope's, a server's, the
fleet's split over the key schema's buckets) and the sorted sets of tokens held for replies
in flight. Who is charged, in which day, against which limit, is
:mod:`memory_core.fleet.spending`'s; this class reads and writes the keys. Each key is on
its own hash tag (a channel and its threads share one), so a cluster spreads them; the hold
scripts touch one hash tag each."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from memory_core.store.keys import KeySchema
from memory_core.store.redis_errors import translates_redis_errors
from memory_core.store.scripts import run_script

SPEND_TTL_S = 40 * 86400  # the dashboard shows 14 days; a month stays for questions
MEMBER = "u:"  # field prefix: a member's tokens
NAME = "n:"  # field prefix: a member's display name (for the dashboard)
PURPOSE = "p:"  # field prefix: tokens of one purpose (reply, compact, refresh, caption...)
SCOPE = "s:"  # field prefix in a server's day: one scope's tokens


@dataclass(frozen=True, slots=True)
class Charge:
    """One model call's tokens and where they are counted: the channel's day (a thread's
    spend is its channel's too), the thread's own day, the server's and the fleet's."""

    channel: str
    thread: str | None  # the thread's scope, when the call was in one
    server: str | None
    day: str  # the channel's local day
    fleet_day: str  # memory.timezone's day (the server's and the fleet's)
    purpose: str
    prompt: int
    completion: int
    member_id: str = ""
    member_name: str = ""


@translates_redis_errors
class SpendStore:
    def __init__(self, client: Any, keys: KeySchema) -> None:
        self.client = client
        self.keys = keys

    async def scope_settings(
        self, scope: str, fields: Sequence[str]
    ) -> tuple[list[str | None], list[str | None]]:
        """``fields`` of the scope's state and of its channel's (one round trip; a channel
        and its threads share a slot)."""
        k = self.keys.scope(scope)
        pipe = self.client.pipeline(transaction=False)
        pipe.hmget(k.state, list(fields))
        pipe.hmget(k.root_state, list(fields))
        own, root = await pipe.execute()
        return list(own), list(root)

    async def channel_tz(self, scope: str) -> str | None:
        """The timezone stored in the scope's channel's state, if any."""
        stored = await self.client.hget(self.keys.scope(scope).root_state, "tz")
        return str(stored) if stored else None

    # -- write -------------------------------------------------------------------------
    async def count(self, charge: Charge) -> None:
        """Add one call's tokens to its counters (one pipelined round trip)."""
        c = charge
        tokens = c.prompt + c.completion
        pipe = self.client.pipeline(transaction=False)
        key = self.keys.spend_scope(c.channel, c.day)
        pipe.hincrby(key, "tokens", tokens)
        pipe.hincrby(key, "prompt", c.prompt)
        pipe.hincrby(key, "completion", c.completion)
        pipe.hincrby(key, PURPOSE + c.purpose, tokens)
        if c.member_id:
            pipe.hincrby(key, MEMBER + c.member_id, tokens)
            if c.member_name:
                pipe.hset(key, NAME + c.member_id, c.member_name[:80])
        pipe.expire(key, SPEND_TTL_S)
        if c.thread is not None:  # the thread's own day: what a limit of its own counts
            own = self.keys.spend_scope(c.thread, c.day)
            pipe.hincrby(own, "tokens", tokens)
            if c.member_id:
                pipe.hincrby(own, MEMBER + c.member_id, tokens)
            pipe.expire(own, SPEND_TTL_S)
        if c.server is not None:
            server_key = self.keys.spend_server(c.server, c.fleet_day)
            pipe.hincrby(server_key, "tokens", tokens)
            pipe.hincrby(server_key, SCOPE + c.channel, tokens)
            pipe.expire(server_key, SPEND_TTL_S)
        day_key = self.keys.spend_day(self.keys.bucket(c.channel), c.fleet_day)
        pipe.hincrby(day_key, c.channel, tokens)
        pipe.expire(day_key, SPEND_TTL_S)
        await pipe.execute()

    async def forget_member(self, scope: str, member_id: str, days: Sequence[str]) -> None:
        """The member's tokens and name leave the scope's ``days``."""
        pipe = self.client.pipeline(transaction=False)
        for day in days:
            pipe.hdel(self.keys.spend_scope(scope, day), MEMBER + member_id, NAME + member_id)
        await pipe.execute()

    async def forget_names(self, scope: str, days: Sequence[str]) -> None:
        """Every member's display name leaves the scope's ``days`` (the counts stay)."""
        keys = [self.keys.spend_scope(scope, day) for day in days]
        pipe = self.client.pipeline(transaction=False)
        for key in keys:
            pipe.hkeys(key)
        fields = await pipe.execute()
        pipe = self.client.pipeline(transaction=False)
        for key, names in zip(keys, fields, strict=True):
            doomed = [f for f in names if f.startswith(NAME)]
            if doomed:
                pipe.hdel(key, *doomed)
        await pipe.execute()

    # -- holds -------------------------------------------------------------------------
    async def hold_in_channel(self, channel: str, scope: str, day: str, args: Sequence[Any]) -> str:
        """The ``hold_scope`` script on the channel's day, ``scope``'s own day and its
        holds (see :mod:`memory_core.store.fleet_scripts` for ``args``): "" or the limit
        reached."""
        reached = await run_script(
            self.client,
            "hold_scope",
            [
                self.keys.spend_scope(channel, day),
                self.keys.spend_scope(scope, day),
                self.keys.spend_holds(scope),
            ],
            list(args),
        )
        return str(reached) if reached else ""

    async def hold_in_server(self, server: str, day: str, args: Sequence[Any]) -> str:
        """The ``hold_server`` script on the server's day and holds: "" or "server"."""
        reached = await run_script(
            self.client,
            "hold_server",
            [self.keys.spend_server(server, day), self.keys.server_holds(server)],
            list(args),
        )
        return str(reached) if reached else ""

    async def release(self, scope: str, entry: str, server: str | None, server_entry: str) -> None:
        """Drop a hold: ``entry`` from ``scope``'s holds, ``server_entry`` from the server's."""
        pipe = self.client.pipeline(transaction=False)
        pipe.zrem(self.keys.spend_holds(scope), entry)
        if server is not None:
            pipe.zrem(self.keys.server_holds(server), server_entry)
        await pipe.execute()

    # -- read --------------------------------------------------------------------------
    async def spent(
        self,
        channel: str,
        scope: str,
        day: str,
        fields: Sequence[str],
        server: str | None,
        server_day: str,
    ) -> tuple[list[str | None], list[str | None], str | None]:
        """``fields`` of the channel's day and of ``scope``'s own, and the server's tokens
        (None without a server), in one round trip."""
        pipe = self.client.pipeline(transaction=False)
        pipe.hmget(self.keys.spend_scope(channel, day), list(fields))
        pipe.hmget(self.keys.spend_scope(scope, day), list(fields))
        if server is not None:
            pipe.hget(self.keys.spend_server(server, server_day), "tokens")
        rows = await pipe.execute()
        return list(rows[0]), list(rows[1]), rows[2] if server is not None else None

    async def scope_day(self, scope: str, day: str) -> dict[str, str]:
        """The scope's counters of one day, as stored."""
        return dict(await self.client.hgetall(self.keys.spend_scope(scope, day)))

    async def fleet_days(self, days: Sequence[str]) -> list[list[str]]:
        """Each day's fleet tokens per scope, every bucket's values together, in order."""
        pipe = self.client.pipeline(transaction=False)
        for day in days:
            for bucket in range(self.keys.buckets):
                pipe.hvals(self.keys.spend_day(bucket, day))
        rows = await pipe.execute()
        n = self.keys.buckets
        return [[v for row in rows[i * n : (i + 1) * n] for v in row] for i in range(len(days))]

    async def fleet_day(self, day: str) -> list[dict[str, str]]:
        """The fleet's tokens per scope on ``day``, one mapping a bucket."""
        pipe = self.client.pipeline(transaction=False)
        for bucket in range(self.keys.buckets):
            pipe.hgetall(self.keys.spend_day(bucket, day))
        return [dict(row) for row in await pipe.execute()]
