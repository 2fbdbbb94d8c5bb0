"""Model tokens spent, counted in Redis per local day, fleet-wide.

Every successful model call reports its usage figures to :meth:`SpendLedger.record` (the
LLM client's usage hook). Who the call was for is not threaded through every layer: the
reply path, the maintainer and the captioner tag their work (:mod:`memory_core.llm.usage`: a
context variable, so background tasks they start inherit it), and the hook reads the tag.
A call with no tag (a benchmark, the CLI's dry runs) is not charged to anyone.

Three counters per call, one pipelined round trip (each key on its own hash tag, so a
cluster spreads them): the scope's day (tokens, prompt, completion, per purpose, per
member), its server's day (a Discord guild or Slack workspace: tokens, per scope) and the
fleet's day for the dashboard (scope -> tokens, split over the key schema's buckets so no
one key takes every write). Days are the scope's local days (its timezone, else
memory.timezone); a server's and the fleet's days are in memory.timezone. Everything
expires after :data:`SPEND_TTL_S`. This module decides what is charged where and holds what;
:class:`~memory_core.store.spend.SpendStore` reads and writes the keys.
"""

from __future__ import annotations

import logging
import uuid
from collections import Counter
from dataclasses import dataclass, replace
from datetime import date, datetime, timedelta
from typing import Any

from memory_core import calendar
from memory_core.clock import Clock
from memory_core.errors import StoreError
from memory_core.llm.usage import SpendTag, current_tag
from memory_core.scopes import Scope
from memory_core.store.keys import KeySchema
from memory_core.store.records import real_ms
from memory_core.store.spend import MEMBER, NAME, PURPOSE, SCOPE, SPEND_TTL_S, Charge, SpendStore

log = logging.getLogger(__name__)

# The stored field prefixes and the days' lifetime are the store's (they name what is stored).
__all__ = [
    "HOLD_LAPSE_MS",
    "MEMBER",
    "NAME",
    "PURPOSE",
    "SCOPE",
    "SPEND_TTL_S",
    "Hold",
    "MemberSpend",
    "Overrides",
    "SpendLedger",
    "Spent",
    "last_days",
    "server_of",
]
# A hold for a reply in flight lapses after this long in real time (a reply ends within
# llm.reply_deadline_s, 45 s by default): one that a dead process never released stops
# counting then.
HOLD_LAPSE_MS = 180_000


def server_of(scope: str) -> str | None:
    """The Discord guild or Slack workspace (``discord:G``, ``slack:T``) whose bill a scope
    is on; None for a Discord DM and the console, which belong to no server."""
    return Scope.of(scope).server_key


def last_days(now: datetime, tz: str, count: int) -> list[str]:
    """The ``count`` local days up to today in ``tz``, oldest first."""
    today = date.fromisoformat(calendar.local_day(now, tz))
    return [(today - timedelta(days=n)).isoformat() for n in range(count - 1, -1, -1)]


@dataclass(frozen=True, slots=True)
class Spent:
    """Today's tokens of one check: the channel's (its threads' included) and the member's
    there, the server's; in a thread also the thread's own and the member's in it."""

    scope: int = 0
    member: int = 0
    server: int = 0
    thread: int = 0
    thread_member: int = 0


@dataclass(frozen=True, slots=True)
class Overrides:
    """A scope's own ``/memory config`` budget and timezone values ("" = not set), and in a
    thread its channel's (which hold in the thread unless it sets its own)."""

    tz: str = ""
    daily: str = ""
    user_daily: str = ""
    channel_daily: str = ""
    channel_user_daily: str = ""


@dataclass(frozen=True, slots=True)
class Hold:
    """Tokens held for one reply in flight, against a channel's limits and its server's."""

    id: str
    scope: str  # where the reply is (a thread's holds are its channel's)
    member: str
    tokens: int
    server: str | None  # held against this server's limit too

    @property
    def entry(self) -> str:
        place = Scope.of(self.scope)
        return f"{self.id}|{self.member}|{self.tokens}|{place.key if place.is_thread else ''}"


@dataclass(frozen=True, slots=True)
class MemberSpend:
    member_id: str
    name: str
    tokens: int


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):  # a hand edit: counts as nothing, never a crash
        return 0


class SpendLedger:
    """The spend counters in Redis: written after each call, read by the budget check,
    ``/memory show stats`` and the dashboard's cost page."""

    def __init__(self, client: Any, keys: KeySchema, *, clock: Clock, default_tz: str) -> None:
        self.store = SpendStore(client, keys)
        self.keys = keys
        self.clock = clock
        self.default_tz = default_tz

    async def overrides(self, scope: str) -> Overrides:
        """The scope's stored budget overrides (``/memory config``), and its channel's (one
        round trip; a channel and its threads share a slot). ``tz``: the channel's, whose
        days every spend of the subtree is counted in."""
        own, root = await self.store.scope_settings(
            scope, ["tz", "daily_tokens", "user_daily_tokens"]
        )
        _, daily, user_daily = (value or "" for value in own)
        tz, channel_daily, channel_user_daily = (value or "" for value in root)
        return Overrides(tz, daily, user_daily, channel_daily, channel_user_daily)

    async def scope_tz(self, scope: str) -> str:
        """The usable timezone of the scope's channel, whose days its spend is counted in
        (a stored one that does not exist: the default)."""
        stored = await self.store.channel_tz(scope)
        return calendar.known_zone_or(stored or self.default_tz, self.default_tz)

    # -- write -------------------------------------------------------------------------
    async def record(self, purpose: str, prompt_tokens: int, completion_tokens: int) -> None:
        """The usage hook: add one call's tokens to its tag's counters. A failure is logged
        and swallowed: counting must never cost a reply."""
        tag = current_tag()
        if tag is None:
            return
        try:
            await self._record(tag, purpose, prompt_tokens, completion_tokens)
        except StoreError as exc:  # Redis away: these tokens are not counted (one line)
            log.warning(
                "could not record %d %s tokens spent in %s: %s",
                prompt_tokens + completion_tokens,
                purpose,
                tag.scope,
                exc,
            )
        except Exception:
            log.exception("could not record %s tokens spent in %s", purpose, tag.scope)

    async def _record(self, tag: SpendTag, purpose: str, prompt: int, completion: int) -> None:
        now = self.clock.now()
        tz = tag.tz or await self.scope_tz(tag.scope)
        place = Scope.of(tag.scope)
        await self.store.count(
            Charge(
                channel=place.root.key,  # a thread's spend is its channel's too
                thread=place.key if place.is_thread else None,
                server=place.server_key,
                day=calendar.local_day(now, tz),
                fleet_day=calendar.local_day(now, self.default_tz),
                purpose=purpose,
                prompt=prompt,
                completion=completion,
                member_id=tag.member_id,
                member_name=tag.member_name,
            )
        )

    async def forget_member(self, scope: str, member_id: str) -> None:
        """``/memory forget me``: the member's tokens and name leave the scope's spend days
        (the scope's own total stays: it is the bill, not about them)."""
        if not member_id:
            return
        tz = await self.scope_tz(scope)
        days = last_days(self.clock.now(), tz, SPEND_TTL_S // 86400 + 1)
        await self.store.forget_member(scope, member_id, days)

    async def forget_names(self, scope: str) -> None:
        """``/memory forget all``: the members' display names go; the counts (the budget)
        stay, so forgetting a channel's memory never resets what it may still spend."""
        tz = await self.scope_tz(scope)
        await self.store.forget_names(
            scope, last_days(self.clock.now(), tz, SPEND_TTL_S // 86400 + 1)
        )

    # -- holds: reserve before a call, settle after --------------------------------------
    async def hold(
        self,
        scope: str,
        *,
        member_id: str,
        tokens: int,
        day: str,
        server: str | None,
        server_day: str,
        limits: tuple[int, int, int, int, int],
    ) -> tuple[Hold | None, str]:
        """Check the limits and hold ``tokens`` against them in one atomic step per hash
        tag (the channel's, then the server's): concurrent replies see each other's holds,
        so a burst cannot all pass a limit. ``limits``: the channel's, a member's there, the
        thread's own, a member's in the thread, the server's (0 = none). (the hold, "") or
        (None, the limit reached: "thread" | "scope" | "thread_member" | "member" |
        "server"). A hold lapses by itself
        after :data:`HOLD_LAPSE_MS` (a process that dies holding one)."""
        place = Scope.of(scope)
        now = real_ms()
        lapse = now + HOLD_LAPSE_MS
        held = Hold(
            uuid.uuid4().hex, scope, member_id, max(1, tokens), server if limits[4] else None
        )
        scope_limit, member_limit, thread_limit, thread_member_limit, server_limit = limits
        reached = await self.store.hold_in_channel(
            place.root.key,
            place.key,
            day,
            [
                now,
                lapse,
                held.id,
                held.tokens,
                member_id,
                place.key if place.is_thread else "",
                scope_limit,
                member_limit if member_id else 0,
                thread_limit,
                thread_member_limit if member_id else 0,
            ],
        )
        if reached:
            return None, reached
        if held.server is not None:
            reached = await self.store.hold_in_server(
                held.server, server_day, [now, lapse, held.id, held.tokens, server_limit]
            )
            if reached:
                await self.release(replace(held, server=None))
                return None, reached
        return held, ""

    async def release(self, held: Hold) -> None:
        """Drop a hold once its call is counted (or failed: nothing is counted then)."""
        await self.store.release(held.scope, held.entry, held.server, f"{held.id}||{held.tokens}|")

    # -- read --------------------------------------------------------------------------
    async def spent(
        self, scope: str, *, day: str, member_id: str, server: str | None, server_day: str
    ) -> Spent:
        """Today's tokens for one check, in one round trip: the channel's (``scope``'s,
        or a thread's channel's), the member's there, in a thread its own, the server's."""
        place = Scope.of(scope)
        fields = ["tokens", MEMBER + (member_id or "-")]
        (channel, channel_member), (own, own_member), in_server = await self.store.spent(
            place.root.key, place.key, day, fields, server, server_day
        )
        return Spent(
            scope=_int(channel),
            member=_int(channel_member) if member_id else 0,
            server=_int(in_server) if server is not None else 0,
            thread=_int(own) if place.is_thread else 0,
            thread_member=_int(own_member) if place.is_thread and member_id else 0,
        )

    async def scope_day(self, scope: str, day: str) -> dict[str, int]:
        """The scope's counters of one day (tokens, prompt, completion, p:*, u:*)."""
        raw = await self.store.scope_day(scope, day)
        return {k: _int(v) for k, v in raw.items() if not k.startswith(NAME)}

    async def fleet_days(self, days: list[str]) -> list[tuple[str, int]]:
        """The fleet's tokens per day (memory.timezone days), in the order given."""
        rows = await self.store.fleet_days(days)
        return [(day, sum(_int(v) for v in row)) for day, row in zip(days, rows, strict=True)]

    async def top_scopes(self, day: str, *, limit: int = 50) -> list[tuple[str, int]]:
        """The scopes that spent most on ``day`` (memory.timezone day), most first."""
        total: Counter[str] = Counter()
        for row in await self.store.fleet_day(day):
            total.update({scope: _int(v) for scope, v in row.items()})
        return sorted(total.items(), key=lambda item: (-item[1], item[0]))[:limit]

    async def members(self, scope: str, day: str) -> list[MemberSpend]:
        """The members of ``scope`` who spent on ``day`` (the scope's local day), most
        first, with the display name last seen."""
        raw = await self.store.scope_day(scope, day)
        out = [
            MemberSpend(
                member_id=k[len(MEMBER) :],
                name=raw.get(NAME + k[len(MEMBER) :], ""),
                tokens=_int(v),
            )
            for k, v in raw.items()
            if k.startswith(MEMBER)
        ]
        return sorted(out, key=lambda m: (-m.tokens, m.member_id))
