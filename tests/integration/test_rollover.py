"""Rollover is idempotent: twice, from two workers at once, or after a crash half-way, each
day and each week is appended exactly once; LLM outages lose nothing and catch up."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from datetime import timedelta
from pathlib import Path

import pytest

from memory_core.clock import ManualClock
from memory_core.errors import UnknownTimezone
from memory_core.models import IncomingMessage
from memorybot_testkit.converse import converse
from tests.fakes.openai_server import FakeOpenAI
from tests.helpers import (
    START,
    CoreFactory,
    conversation,
    feed,
    lock_expired,
    manual_maintenance,
    spawn_memorybot,
)

SCOPE = "console:team"


async def _setup_three_days(make_core: CoreFactory, clock: ManualClock, **kw: object):  # type: ignore[no-untyped-def]
    """Three days of messages stored without maintenance (as if every worker was down)."""
    core = await make_core(clock=clock, background=True, **kw)
    manual_maintenance(core)
    await feed(core, clock, SCOPE, conversation(START, days=3, per_day=30))
    return core


def _assert_each_once(days: list[str]) -> None:
    assert days == sorted(days)
    assert all(count == 1 for count in Counter(days).values()), days


async def test_rollover_twice_appends_each_day_once(make_core: CoreFactory) -> None:
    clock = ManualClock(START)
    core = await _setup_three_days(make_core, clock)
    clock.set(START + timedelta(days=3, hours=1))
    first = await core.maintenance.maintain(SCOPE)
    second = await core.maintenance.maintain(SCOPE)
    assert first.days_closed == 3 and second.days_closed == 0
    days = [d.day for d in await core.repo.reads.days(SCOPE)]
    assert days == ["2025-08-11", "2025-08-12", "2025-08-13"]


@pytest.mark.parametrize("use_lock", [True, False])
async def test_two_workers_at_once_append_each_day_once(
    make_core: CoreFactory, fake_llm: FakeOpenAI, use_lock: bool
) -> None:
    """Two cores (separate connections, like two processes) race on the same scope. Without
    the lock both do the LLM work, and the compare-and-set scripts still keep it exact."""
    clock = ManualClock(START)
    a = await _setup_three_days(make_core, clock)
    b = await make_core(clock=clock)
    fake_llm.delay = 0.01  # let the two interleave inside LLM calls
    clock.set(START + timedelta(days=9, hours=1))  # a week boundary is crossed too
    reports = await asyncio.gather(
        a.maintainer.run(SCOPE, lock=use_lock), b.maintainer.run(SCOPE, lock=use_lock)
    )
    await asyncio.gather(a.maintainer.run(SCOPE), b.maintainer.run(SCOPE))
    days = [d.day for d in await a.repo.reads.days(SCOPE)]
    _assert_each_once(days)
    assert days == ["2025-08-11", "2025-08-12", "2025-08-13"]
    weeks = [w.week for w in await a.repo.reads.weeks(SCOPE)]
    assert weeks == ["2025-08-11"]
    assert sum(r.days_closed for r in reports) == 3
    state = await a.repo.reads.state(SCOPE)
    assert not state.refresh_pending and not state.week_pending
    if use_lock:
        assert any(r.skipped for r in reports)


async def test_crash_after_a_day_is_closed_resumes(
    make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    """The tier refresh fails after the day was appended (a crash between the two steps):
    the next run refreshes without appending the day again."""
    clock = ManualClock(START)
    core = await _setup_three_days(make_core, clock, memory={"summary_attempts": 5})
    clock.set(START + timedelta(days=1, hours=1))
    fake_llm.down = True
    report = await core.maintenance.maintain(SCOPE)
    state = await core.repo.reads.state(SCOPE)
    assert report.failures == 1
    fake_llm.down = False
    assert (await core.repo.reads.days(SCOPE)) == [] and state.day == "2025-08-11"
    clock.advance(timedelta(hours=2))  # past the back-off
    await core.maintenance.maintain(SCOPE)
    assert [d.day for d in await core.repo.reads.days(SCOPE)] == ["2025-08-11"]
    # Now crash between "day appended" and "tiers refreshed".
    clock.set(START + timedelta(days=2, hours=1))
    fake_llm.fail_next(1, status=500, purposes=("refresh",))
    crashed = await core.maintenance.maintain(SCOPE)
    mid_state = await core.repo.reads.state(SCOPE)
    assert crashed.days_closed == 1 and crashed.failures == 1
    assert mid_state.refresh_pending
    clock.advance(timedelta(hours=2))
    resumed = await core.maintenance.maintain(SCOPE)
    assert resumed.days_closed == 0 and resumed.refreshes == 1
    _assert_each_once([d.day for d in await core.repo.reads.days(SCOPE)])
    assert [d.day for d in await core.repo.reads.days(SCOPE)] == ["2025-08-11", "2025-08-12"]
    assert not (await core.repo.reads.state(SCOPE)).refresh_pending


async def test_cancelled_mid_llm_call_then_resumes(
    make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    clock = ManualClock(START)
    core = await _setup_three_days(make_core, clock)
    clock.set(START + timedelta(days=3, hours=1))
    fake_llm.delay = 1.0
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(core.maintenance.maintain(SCOPE), timeout=0.3)
    fake_llm.delay = 0.0
    before = await core.repo.reads.days(SCOPE)
    report = await core.maintenance.maintain(SCOPE)
    assert report.days_closed + len(before) == 3
    _assert_each_once([d.day for d in await core.repo.reads.days(SCOPE)])


async def test_a_dead_workers_lock_expires(make_core: CoreFactory) -> None:
    clock = ManualClock(START)
    core = await _setup_three_days(make_core, clock)
    clock.set(START + timedelta(days=3, hours=1))
    # A worker that died holding the lock: its key lives until the TTL.
    await core.store.client.set(core.store.keys.scope(SCOPE).lock, "dead", px=300)
    assert (await core.maintenance.maintain(SCOPE)).skipped
    await lock_expired(core.store.client, core.store.keys.scope(SCOPE).lock)
    assert (await core.maintenance.maintain(SCOPE)).days_closed == 3


@pytest.mark.parametrize("attempts", [3, 1000])
async def test_llm_down_for_a_day_loses_nothing_and_catches_up(
    make_core: CoreFactory, fake_llm: FakeOpenAI, attempts: int
) -> None:
    """Day 2 with the LLM down: every message is kept; with few attempts the extractive
    summary stands in; with many, the LLM summarises day 2 once it is back on day 3."""
    clock = ManualClock(START)
    core = await make_core(
        clock=clock,
        memory={"summary_attempts": attempts, "retry_base_s": 600, "compact_min_messages": 10},
    )
    day1 = list(conversation(START, days=1, per_day=60, seed=1))
    await feed(core, clock, SCOPE, day1)
    fake_llm.down = True
    day2 = [
        (START + timedelta(days=1, minutes=10 * i), "Bob", f"outage note {i} " + "x y z " * 20)
        for i in range(60)
    ]
    await feed(core, clock, SCOPE, day2)
    assert await core.repo.reads.log_length(SCOPE) == 120
    fake_llm.down = False
    clock.set(START + timedelta(days=2, hours=1))
    await core.intake.accept(IncomingMessage(scope=SCOPE, text="back again", author="Carol"))
    days = await core.repo.reads.days(SCOPE)
    assert [d.day for d in days] == ["2025-08-11", "2025-08-12"]
    assert days[1].messages == 60, "every message of the outage day went into its summary"
    assert "outage note" in days[1].summary
    if attempts == 1000:
        assert days[1].summary.startswith("S:"), "the LLM wrote it once it was back"
    assert await core.repo.reads.log_length(SCOPE) == 121
    state = await core.repo.reads.state(SCOPE)
    assert state.day == "2025-08-13" and not state.refresh_pending
    assert state.failures == 0


async def test_idle_scope_costs_nothing(make_core: CoreFactory, fake_llm: FakeOpenAI) -> None:
    clock = ManualClock(START)
    core = await make_core(clock=clock)
    await feed(core, clock, SCOPE, conversation(START, days=1, per_day=5))
    clock.set(START + timedelta(days=1, hours=1))
    await core.maintenance.maintain(SCOPE)
    calls = fake_llm.count()
    for extra in range(2, 6):  # four idle days
        clock.set(START + timedelta(days=extra, hours=1))
        report = await core.maintenance.maintain(SCOPE)
        assert report.days_closed == 0
    assert fake_llm.count() == calls


async def _scopes_with_one_on_mars(make_core: CoreFactory, **kw: object):  # type: ignore[no-untyped-def]
    """Two scopes with a day of messages, and a third whose stored timezone does not exist
    (an imported or hand-edited state)."""
    clock = ManualClock(START)
    core = await make_core(clock=clock, **kw)
    manual_maintenance(core)
    for scope in ("console:earth", "console:moon", "console:mars"):
        await core.intake.accept(IncomingMessage(scope=scope, text="hello there", author="A"))
    await core.store.client.hset(core.store.keys.scope("console:mars").state, "tz", MARS)
    return core, clock


MARS = "Mars/Olympus"


async def test_a_scope_with_an_unknown_timezone_is_reported_and_the_rest_roll_over(
    make_core: CoreFactory, clean_redis: str, redis_target: object, tmp_path: Path
) -> None:
    core, _ = await _scopes_with_one_on_mars(make_core, offline=True)
    env = {"REDIS_URL": clean_redis}
    if getattr(redis_target, "cluster", False):
        env["MEMORYBOT_STORE__CLUSTER"] = "true"
    at = (START + timedelta(days=1, hours=1)).isoformat()
    proc = await spawn_memorybot(tmp_path, "rollover", "--at", at, "--json", env=env)
    out, err = await asyncio.wait_for(proc.communicate(), timeout=90)
    assert proc.returncode == 0, err.decode()
    report = json.loads(out)
    assert report["days_closed"] == 2
    [broken] = report["broken"]
    assert broken["scope"] == "console:mars" and MARS in broken["reason"]
    for scope in ("console:earth", "console:moon"):
        assert [d.day for d in await core.repo.reads.days(scope)] == ["2025-08-11"]
    assert await core.repo.reads.days("console:mars") == []
    # The sweep's marker is not left saying "enumerating": nobody waits on it.
    marker = await core.store.client.get(core.store.keys.fleet_sweep(core.scheduler.slot()))
    assert marker in (None, "done")
    proc = await spawn_memorybot(tmp_path, "rollover", "--at", at, env=env)
    out, err = await asyncio.wait_for(proc.communicate(), timeout=90)
    assert proc.returncode == 0, err.decode()
    assert f"console:mars: skipped, unknown timezone '{MARS}'" in err.decode()
    assert "1 scope skipped" in out.decode()
    proc = await spawn_memorybot(tmp_path, "rollover", "--at", at, "--scope", "mars", env=env)
    out, err = await asyncio.wait_for(proc.communicate(), timeout=90)
    assert proc.returncode == 1, "the one scope asked for could not be rolled over"
    assert MARS in err.decode()


async def test_maintenance_of_a_scope_with_an_unknown_timezone_reports_it(
    make_core: CoreFactory,
) -> None:
    core, clock = await _scopes_with_one_on_mars(make_core, offline=True)
    clock.set(START + timedelta(days=1, hours=1))
    with pytest.raises(UnknownTimezone, match=MARS):
        core.maintainer.due(await core.repo.reads.state("console:mars"), clock.now())
    report = await core.maintenance.maintain("console:mars")
    assert MARS in report.broken and report.days_closed == 0
    sweep = await core.scheduler.sweep()
    assert sweep.days_closed == 2
    assert [b["scope"] for b in sweep.broken] == ["console:mars"]


async def test_messages_to_a_scope_with_an_unknown_timezone_are_stored_and_answered(
    make_core: CoreFactory, fake_llm: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    """The reply path falls back to the default timezone (with a warning): a message is
    never refused, nor a reply lost, over a bad setting."""
    core, clock = await _scopes_with_one_on_mars(make_core)
    clock.set(START + timedelta(days=1, hours=1))  # a new local day: the lazy rollover check
    ask = IncomingMessage(scope="mars", text="what did I say?", author="A", direct=True)
    reply = await converse(core, ask)
    assert reply is not None and reply.kind == "llm"
    prompt = await core.replier.build_prompt(ask)
    assert prompt.tokens > 0
    offline = await make_core(clock=clock, offline=True)
    asked = IncomingMessage(scope="mars", text="what did I say?", author="A")
    assert "] A: what did I say?" in await offline.replier.offline_text(asked)
    assert [e.text for e in await core.repo.reads.all_entries("console:mars")][:2] == [
        "hello there",
        "what did I say?",
    ]
    assert any(MARS in r.getMessage() and "default" in r.getMessage() for r in caplog.records)


async def test_retention_drops_the_platform_ids_of_trimmed_messages(
    make_core: CoreFactory,
) -> None:
    """A scope keeps its messages' platform ids to store each once; those of messages that
    retention trimmed go in the same step, so the set does not grow for a channel's life."""
    clock = ManualClock(START)
    core = await make_core(clock=clock, offline=True, memory={"retention_days": 2})
    scope = "console:ids"
    for day in range(5):
        for i in range(3):
            clock.set(START + timedelta(days=day, hours=i))
            await core.intake.accept(
                IncomingMessage(
                    scope=scope, text=f"day {day} note {i}", author="A", platform_id=f"d{day}m{i}"
                )
            )
        clock.set(START + timedelta(days=day + 1, hours=-8))
        await core.scheduler.sweep(force=True)  # closes the day; trims past retention
    stored = await core.store.client.zrange(core.store.keys.scope(scope).ids, 0, -1)
    kept = {e.platform_id for e in await core.repo.reads.all_entries(scope)}
    assert 0 < len(kept) < 15, "retention trimmed some messages"
    assert set(stored) == kept
