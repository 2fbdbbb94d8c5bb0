"""Daily token budgets: which limit holds for a scope, a member and a server, whether one is
reached, and the notice a reply becomes when it is.

Limits come from the settings (``[budget]``) and, for a scope and its members, from the
scope's own ``/memory config daily_tokens | user_daily_tokens`` (kept in its state hash:
"" = the settings' default, "off" = no limit here). A limit is reached when today's spend
is at or over it (spend is known after a call, so one call may overshoot; the next waits
for the reset). Counting is :mod:`memory_core.fleet.spending`.

A budget must never make the bot go silent by accident: when Redis cannot be read for the
check, the reply goes ahead (logged).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from config.prompts import load_prompts
from config.settings import Settings
from memory_core import calendar
from memory_core.clock import Clock
from memory_core.errors import InputError, StoreError
from memory_core.fleet.spending import PURPOSE, Hold, SpendLedger, server_of
from memory_core.llm.usage import SpendTag, tag_calls
from memory_core.models import IncomingMessage, Reply
from memory_core.scopes import Scope

if TYPE_CHECKING:
    from memory_core.fleet.metrics import Metrics

log = logging.getLogger(__name__)

Limit = Literal["scope", "member", "server"]
# A reply's answer is estimated at this share of its cap (llm.reply_max_tokens) when its
# tokens are held before the call.
ANSWER_SHARE = 4


def parse_limit(value: str, *, setting: str) -> str:
    """A ``/memory config`` value for a budget, as stored: digits, "off", or "" (the
    default). Refuses anything else saying what to type."""
    text = value.strip().lower().replace(",", "").replace("_", "")
    if text in ("off", "none", "0"):
        return "off"
    if text in ("default", "reset"):
        return ""
    if text.isdigit() and len(text) <= 12:
        return str(int(text))
    raise InputError(
        f"{setting} takes a number of tokens per day, 'off' (no limit here) or 'default' "
        f"(the bot's setting), e.g. /memory config {setting} 50000 (got {value[:40]!r})"
    )


def _resolve(stored: str | None, default: int) -> int:
    """An override as a limit (0 = none): "" or absent = the default."""
    if not stored:
        return default
    if stored == "off":
        return 0
    try:
        return max(0, int(stored))
    except ValueError:  # a hand edit: the default, not a crash
        return default


@dataclass(frozen=True, slots=True)
class Limits:
    """The limits that hold in a scope. A channel's hold in its threads, over the spend of
    the channel and its threads together; a thread may set its own (Discord lets
    ``/memory config`` run in a thread), over its own spend, besides."""

    scope: int  # the channel's
    member: int  # each member's in the channel
    server: int
    tz: str  # the channel's usable timezone: its days and its reset
    server_name: str | None
    thread: int = 0  # a thread's own, where it sets one
    thread_member: int = 0


@dataclass(frozen=True, slots=True)
class Reached:
    which: Limit
    limit: int
    resets: str  # "00:00 Asia/Tokyo"


@dataclass(frozen=True, slots=True)
class SpendLine:
    which: Limit
    spent: int
    limit: int  # 0: no limit
    resets: str


@dataclass(frozen=True, slots=True)
class SpendReport:
    """``/memory show stats``: today's spend against each limit (the asker's own figure,
    never another member's)."""

    lines: list[SpendLine]
    purposes: dict[str, int] = field(default_factory=dict)


class Budget:
    def __init__(
        self,
        *,
        settings: Settings,
        ledger: SpendLedger,
        clock: Clock,
        metrics: Metrics | None = None,
    ) -> None:
        self.settings = settings
        self.ledger = ledger
        self.clock = clock
        self.metrics = metrics

    @property
    def _default_tz(self) -> str:
        return self.settings.memory.timezone

    def _resets(self, tz: str) -> str:
        return f"00:00 {tz}"

    async def limits(self, scope: str) -> Limits:
        """The limits that hold in ``scope`` now, with its timezone (one read)."""
        b = self.settings.budget
        o = await self.ledger.overrides(scope)
        server = server_of(scope)
        thread = Scope.of(scope).is_thread
        channel_daily, channel_user = (
            (o.channel_daily, o.channel_user_daily) if thread else (o.daily, o.user_daily)
        )
        return Limits(
            scope=_resolve(channel_daily, b.daily_tokens),
            member=_resolve(channel_user, b.user_daily_tokens),
            server=b.servers.get(server, b.server_daily_tokens) if server else 0,
            tz=calendar.known_zone_or(o.tz or self._default_tz, self._default_tz),
            server_name=server,
            thread=_resolve(o.daily, 0) if thread else 0,
            thread_member=_resolve(o.user_daily, 0) if thread else 0,
        )

    async def reached(self, scope: str, *, member_id: str = "") -> tuple[Limits, Reached | None]:
        """The limits of ``scope`` and the first one reached today (None: within budget)."""
        limits = await self.limits(scope)
        members = (limits.member or limits.thread_member) and member_id
        if not (limits.scope or limits.server or limits.thread or members):
            return limits, None
        now = self.clock.now()
        spent = await self.ledger.spent(
            scope,
            day=calendar.local_day(now, limits.tz),
            member_id=member_id,
            server=limits.server_name if limits.server else None,
            server_day=calendar.local_day(now, self._default_tz),
        )
        checks: list[tuple[Limit, int, int, str]] = [
            ("scope", limits.thread, spent.thread, limits.tz),
            ("scope", limits.scope, spent.scope, limits.tz),
            ("member", limits.thread_member if member_id else 0, spent.thread_member, limits.tz),
            ("member", limits.member if member_id else 0, spent.member, limits.tz),
            ("server", limits.server, spent.server, self._default_tz),
        ]
        for which, limit, used, tz in checks:
            if limit and used >= limit:
                return limits, Reached(which=which, limit=limit, resets=self._resets(tz))
        return limits, None

    async def admit(
        self, msg: IncomingMessage, *, prompt_tokens: int, language: str
    ) -> tuple[Reply | None, Hold | None]:
        """Before a reply's model call: (the notice, None) when a limit is reached (no call
        then), else (None, the tokens held for the call), and the call that follows is
        charged to the scope and the member. The estimate (the prompt and a share of the
        answer's cap) is held against the limits in the step that checks them, so that a
        burst of questions cannot all pass; :meth:`settle` drops the hold once the call's
        real tokens are counted."""
        try:
            limits = await self.limits(msg.scope)
            hold, which = await self._hold(msg, limits, prompt_tokens)
        except StoreError as exc:  # Redis away: answer anyway, a budget never silences
            log.warning("budget of %s not checked, answering anyway: %s", msg.scope, exc)
            tag_calls(SpendTag(msg.scope, msg.author_id, msg.author))
            return None, None
        tag_calls(SpendTag(msg.scope, msg.author_id, msg.author, tz=limits.tz))
        if not which:
            return None, hold
        reached = self._reached(which, limits)
        if self.metrics is not None:
            self.metrics.incr(f"budget_refusals:{reached.which}")
        prompts = load_prompts(language)
        text = prompts.say(
            "budget_reached",
            which=prompts.say(f"budget_{reached.which}"),
            limit=f"{reached.limit:,}",
            resets=reached.resets,
        )
        return Reply(text=text, kind="budget"), None

    async def _hold(
        self, msg: IncomingMessage, limits: Limits, prompt_tokens: int
    ) -> tuple[Hold | None, str]:
        member = msg.author_id
        if not (
            limits.scope
            or limits.server
            or limits.thread
            or ((limits.member or limits.thread_member) and member)
        ):
            return None, ""
        now = self.clock.now()
        estimate = prompt_tokens + self.settings.llm.reply_max_tokens // ANSWER_SHARE
        return await self.ledger.hold(
            msg.scope,
            member_id=member,
            tokens=estimate,
            day=calendar.local_day(now, limits.tz),
            server=limits.server_name,
            server_day=calendar.local_day(now, self._default_tz),
            limits=(
                limits.scope,
                limits.member,
                limits.thread,
                limits.thread_member,
                limits.server,
            ),
        )

    def _reached(self, which: str, limits: Limits) -> Reached:
        sizes = {
            "thread": ("scope", limits.thread, limits.tz),
            "scope": ("scope", limits.scope, limits.tz),
            "thread_member": ("member", limits.thread_member, limits.tz),
            "member": ("member", limits.member, limits.tz),
            "server": ("server", limits.server, self._default_tz),
        }
        kind, limit, tz = sizes[which]
        return Reached(which=kind, limit=limit, resets=self._resets(tz))  # type: ignore[arg-type]

    async def settle(self, hold: Hold | None) -> None:
        """After the call (its real tokens are counted by then, or it failed and counts
        nothing): the hold goes. A store failure leaves it to lapse on its own."""
        if hold is None:
            return
        try:
            await self.ledger.release(hold)
        except StoreError as exc:
            log.warning("a budget hold in %s lapses on its own: %s", hold.scope, exc)

    async def over(self, scope: str, *, member_id: str = "") -> bool:
        """Whether the scope's or its server's budget is reached today (maintenance then
        summarises extractively, captions wait), or, with ``member_id``, that member's (a
        caption is on the bill of who shared the image). Redis away: not over (the model
        call that follows fails on its own if it must)."""
        try:
            _, reached = await self.reached(scope, member_id=member_id)
        except StoreError as exc:
            log.warning("budget of %s not checked: %s", scope, exc)
            return False
        return reached is not None

    async def report(self, scope: str, *, member_id: str) -> SpendReport:
        """Today's spend in ``scope`` for ``/memory show stats``."""
        limits = await self.limits(scope)
        now = self.clock.now()
        day = calendar.local_day(now, limits.tz)
        counters = await self.ledger.scope_day(Scope.of(scope).root.key, day)
        spent = await self.ledger.spent(
            scope,
            day=day,
            member_id=member_id,
            server=limits.server_name,
            server_day=calendar.local_day(now, self._default_tz),
        )
        local = self._resets(limits.tz)
        lines = [SpendLine("scope", spent.scope, limits.scope, local)]
        if member_id:
            lines.append(SpendLine("member", spent.member, limits.member, local))
        if limits.server_name:
            lines.append(
                SpendLine("server", spent.server, limits.server, self._resets(self._default_tz))
            )
        purposes = {
            k[len(PURPOSE) :]: v for k, v in sorted(counters.items()) if k.startswith(PURPOSE)
        }
        return SpendReport(lines=lines, purposes=purposes)
