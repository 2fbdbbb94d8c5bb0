"""Fleet health from the per-minute metric buckets in Redis, for the health page and for
Prometheus (:mod:`bots.dashboard.exposition`). Both read the same :class:`HealthReport`, so
they always show the same figures.

The buckets hold what every process counted during each minute, so the figures here are
sums over a window of recent minutes, not counters since start-up: a Prometheus series is
a gauge ("messages in the last 60 minutes"), and HELP says which window.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from memory_core.bootstrap import Core
from memory_core.errors import StoreError
from memory_core.fleet.metrics import read_minutes, read_recall_caches, totals
from memory_core.recall.worker import read_status

WINDOWS = (15, 60, 360, 1440)
DEFAULT_WINDOW = 60
PURPOSES = ("reply", "compact", "refresh", "embed")
SUMMARY_PURPOSES = ("compact", "refresh")  # the LLM calls that write summaries
REPLY_KINDS = ("llm", "offline", "apology", "budget")  # budget: a limit reached, no call
BUDGET_LIMITS = ("scope", "member", "server")
SUMMARY_KINDS = ("llm", "fallback", "offline")
MAINTENANCE = (
    ("compactions", "Compactions of today's messages into the short tier"),
    ("days_closed", "Days closed at rollover"),
    ("weeks", "Weeks consolidated"),
    ("refreshes", "Tier refreshes (mid, overview)"),
    ("summary_failures", "Summary attempts that failed (retried later)"),
)


@dataclass(frozen=True, slots=True)
class LLMUse:
    purpose: str
    calls: int
    failures: int
    prompt_tokens: int
    completion_tokens: int
    ms: int

    @property
    def mean_ms(self) -> float | None:
        return self.ms / self.calls if self.calls else None


@dataclass(frozen=True, slots=True)
class Sweep:
    job: str
    at: str
    worker: str
    figures: dict[str, Any]


@dataclass(slots=True)
class HealthReport:
    minutes: int
    now: datetime
    per_minute: list[tuple[str, int]]  # (YYYYmmddHHMM, messages), oldest first
    sums: Counter[str]
    llm: list[LLMUse]
    sweeps: list[Sweep]
    scopes: int
    redis_used_bytes: int | None
    redis_peak_bytes: int | None
    redis_max_bytes: int | None
    checks: list[tuple[str, str]] = field(default_factory=list)  # (what, "set"/"not set"/...)
    # The embedding workers, now: how many, messages not embedded yet, seconds behind.
    embedding: dict[str, float] = field(default_factory=dict)
    # The bot processes' recall indexes, now: how many processes, bytes, scopes, limits.
    recall: dict[str, float] = field(default_factory=dict)

    @property
    def recall_build_mean_s(self) -> float | None:
        """The mean time an index build took in the window (a scope's first search, after an
        eviction or a forget)."""
        builds = self.sums["recall_builds"]
        return self.sums["recall_build_ms"] / 1000 / builds if builds else None

    @property
    def messages(self) -> int:
        return self.sums["messages"]

    @property
    def messages_per_minute(self) -> float:
        return self.messages / self.minutes if self.minutes else 0.0

    @property
    def peak_per_minute(self) -> int:
        return max((n for _, n in self.per_minute), default=0)

    @property
    def summaries_by_model(self) -> int:
        return self.sums["summaries_llm"]

    @property
    def summary_success_rate(self) -> float | None:
        """Share of summaries the model wrote among those it was asked for (offline summaries,
        written by design without a model, are not failures and are left out)."""
        asked = self.sums["summaries_llm"] + self.sums["summaries_fallback"]
        return self.sums["summaries_llm"] / asked if asked else None

    @property
    def summary_mean_ms(self) -> float | None:
        calls = sum(u.calls for u in self.llm if u.purpose in SUMMARY_PURPOSES)
        ms = sum(u.ms for u in self.llm if u.purpose in SUMMARY_PURPOSES)
        return ms / calls if calls else None

    @property
    def llm_failures(self) -> int:
        return sum(u.failures for u in self.llm)

    @property
    def errors(self) -> list[tuple[str, int]]:
        return [
            ("LLM calls that failed", self.llm_failures),
            ("Replies that were an apology (the model failed)", self.sums["replies_apology"]),
            ("Summary attempts that failed", self.sums["summary_failures"]),
            ("Summaries written by the extractive stand-in", self.sums["summaries_fallback"]),
        ]


def _llm_use(sums: Counter[str]) -> list[LLMUse]:
    seen = {k.split(":")[1] for k in sums if k.startswith("llm:") and k.count(":") == 2}
    purposes = [*PURPOSES, *sorted(seen - set(PURPOSES))]
    return [
        LLMUse(
            purpose=p,
            calls=sums[f"llm:{p}:calls"],
            failures=sums[f"llm:{p}:failures"],
            prompt_tokens=sums[f"llm:{p}:prompt_tokens"],
            completion_tokens=sums[f"llm:{p}:completion_tokens"],
            ms=sums[f"llm:{p}:ms"],
        )
        for p in purposes
    ]


async def _sweeps(core: Core) -> list[Sweep]:
    raw = await core.scheduler.fleet.sweeps()
    out: list[Sweep] = []
    for job, blob in sorted(raw.items()):
        try:
            entry = json.loads(blob)
        except ValueError:
            continue  # one unreadable entry hides itself, not the page
        if not isinstance(entry, dict):
            continue
        at, worker = str(entry.pop("at", "")), str(entry.pop("worker", ""))
        out.append(Sweep(job, at, worker, entry))
    return out


async def _redis_memory(core: Core) -> tuple[int | None, int | None, int | None]:
    """used_memory, its peak and maxmemory (see ServerInfo.memory); all None when Redis
    cannot say."""
    try:
        return await core.store.info.memory()
    except StoreError:
        return None, None, None


def _checks(core: Core) -> list[tuple[str, str]]:
    """Doctor-like facts safe to show: where memory lives, which model, which secrets are
    set. Never a secret's value."""
    s = core.settings

    def is_set(value: object) -> str:
        return "set" if value is not None else "not set"

    llm = "offline (no model configured)" if core.llm.offline else s.llm.chat_model
    return [
        ("Memory", core.store.description),
        ("LLM", llm),
        ("OPENAI_API_KEY", is_set(s.llm.api_key)),
        ("DISCORD_TOKEN", is_set(s.discord.token)),
        ("SLACK_BOT_TOKEN", is_set(s.slack.bot_token)),
        ("SLACK_APP_TOKEN", is_set(s.slack.app_token)),
        ("SLACK_SIGNING_SECRET", is_set(s.slack.signing_secret)),
        ("DASHBOARD_TOKEN", is_set(s.dashboard.token)),
    ]


async def collect(
    core: Core, *, minutes: int = DEFAULT_WINDOW, now: datetime | None = None
) -> HealthReport:
    now = (now or datetime.now(UTC)).astimezone(UTC)
    minutes = max(1, min(minutes, 3 * 1440))  # buckets live three days
    rows = await read_minutes(core.metrics.store, minutes=minutes, now=now)
    sums = totals(rows)
    used, peak, maximum = await _redis_memory(core)
    return HealthReport(
        minutes=minutes,
        now=now,
        per_minute=[(stamp, row.get("messages", 0)) for stamp, row in rows],
        sums=sums,
        llm=_llm_use(sums),
        sweeps=await _sweeps(core),
        scopes=await core.repo.reads.scope_count(),
        redis_used_bytes=used,
        redis_peak_bytes=peak,
        redis_max_bytes=maximum,
        checks=_checks(core),
        embedding=await _embedding(core),
        recall=await read_recall_caches(core.store.client, core.store.keys),
    )


async def _embedding(core: Core) -> dict[str, float]:
    return await read_status(core.store.client, core.store.keys)


def human_bytes(n: int | None) -> str:
    if n is None:
        return "not available"
    units = ("B", "KiB", "MiB", "GiB", "TiB")
    exponent = min(int(math.log(n, 1024)) if n > 0 else 0, len(units) - 1)
    return f"{n / 1024**exponent:.1f} {units[exponent]}" if exponent else f"{n} B"
