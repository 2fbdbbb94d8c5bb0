"""What was deleted or edited on Slack while memorybot was away, caught up when it comes back
(bots/learn/slack_catch_up.py): ``run_slack`` itself (the real Bolt app over Socket Mode)
against the fake Slack, a real Core on the private Redis. "Away" is the time between two
runs: the first run stores messages, is stopped, the fake changes what the Web API shows
without sending any event (``delete_quietly``, ``edit_quietly``), and a second run over a
new Core (the same Redis) starts.

A run reports each catch-up it finished (``on_caught_up``); a test waits for that report, not
for time to pass.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from bots.learn.slack_catch_up import CatchUpReport
from bots.slack.bot import run_slack
from memory_core.bootstrap import Core
from memory_core.clock import ManualClock
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack import FakeSlack
from tests.helpers import CLI, CoreFactory, forgotten, quoting_facts, scope_values
from tests.slack_harness import (
    ALICE,
    BOB,
    BOT,
    C1,
    PHONE,
    SCOPE,
    SMALL,
    T1,
    quiet_replies,
    slack_settings,
)

pytestmark = pytest.mark.fake("slack")

C2, C3, C4 = "C2", "C3", "C4"
PERSON = f"slack:{T1}:user:{ALICE}"
CHATTER = "on the release plan: we keep the scope small, test early and ship on time"


# -- running the bot ------------------------------------------------------------------------
@dataclass
class Run:
    """One run of ``run_slack`` and the catch-ups it reported."""

    fake: FakeSlack
    core: Core
    reports: list[CatchUpReport] = field(default_factory=list)
    _reported: asyncio.Event = field(default_factory=asyncio.Event)

    def reported(self, report: CatchUpReport) -> None:
        self.reports.append(report)
        self._reported.set()

    async def caught_up(self, count: int = 1) -> CatchUpReport:
        """The ``count``-th catch-up of this run, once it finished."""
        async with asyncio.timeout(15):
            while len(self.reports) < count:
                self._reported.clear()
                await self._reported.wait()
        return self.reports[count - 1]

    async def say(
        self,
        text: str,
        *,
        user: str = ALICE,
        channel: str = C1,
        thread_ts: str | None = None,
        ts: str | None = None,
        private: bool = False,
    ) -> dict[str, Any]:
        """A message said while the bot is up, once it is stored."""
        event = self.fake.message_event(
            text=text,
            user_id=user,
            channel_id=channel,
            thread_ts=thread_ts,
            ts=ts,
            channel_type="group" if private else "channel",
        )
        await self.fake.socket_send_event(event=event)
        await stored(self.core, scope_of(event), event["ts"])
        return event

    async def mention(self, text: str, *, channel: str = C1) -> dict[str, Any]:
        """A question to the bot, once answered (in a thread under it)."""
        answered = len(self.fake.posted_messages)
        event = self.fake.app_mention_event(
            text=f"<@UBOT> {text}", user_id=ALICE, channel_id=channel
        )
        await self.fake.socket_send_event(event=event)
        await self.fake.wait_for_messages(count=answered + 1)
        await stored(self.core, scope_of(event), event["ts"])
        return event


@asynccontextmanager
async def running(fake: FakeSlack, core: Core) -> AsyncIterator[Run]:
    """``run_slack`` over ``core`` until the block ends; then it is stopped as on shutdown.
    Over Socket Mode unless the core's settings say HTTP (then the run only catches up: the
    tests do not know its port)."""
    run = Run(fake, core)
    opened = fake.socket_connections_opened
    task = asyncio.create_task(run_slack(core, on_caught_up=run.reported))
    try:
        if core.settings.slack.mode != "http":
            await fake.wait_for_socket_connections(count=opened + 1)
        yield run
    finally:
        task.cancel()
        with suppress(asyncio.CancelledError):
            await task
        await fake.wait_for(lambda: True if fake.open_socket_count == 0 else None)


def scope_of(event: dict[str, Any]) -> str:
    place = f"slack:{T1}:{event['channel']}"
    thread = event.get("thread_ts")
    return f"{place}:{thread}" if thread and thread != event["ts"] else place


async def stored(core: Core, scope: str, ts: str) -> None:
    async with asyncio.timeout(10):
        while ts not in {e.platform_id for e in await core.repo.reads.all_entries(scope)}:  # noqa: ASYNC110
            await asyncio.sleep(0.02)


async def texts(core: Core, scope: str = SCOPE) -> list[str]:
    return [e.text for e in await core.repo.reads.all_entries(scope) if e.role == "user"]


async def new_core(
    make_core: CoreFactory, fake: FakeSlack, *, mode: str = "auto", **extra: Any
) -> Core:
    """A core for one run, its clock at the real time (the fake's ts are the real time)."""
    clock = ManualClock(datetime.now(UTC))
    slack = slack_settings(fake, mode=mode, http_host="127.0.0.1", http_port=0)
    return await make_core(slack=slack, clock=clock, **extra)


# -- deletes --------------------------------------------------------------------------------
async def test_a_message_deleted_while_away_is_forgotten_with_its_facts(
    fake: FakeSlack, make_core: CoreFactory, fake_llm: FakeOpenAI, cli: CLI, clean_redis: str
) -> None:
    fake_llm.responder = quiet_replies(quoting_facts(PHONE))
    async with running(fake, await new_core(make_core, fake, memory=SMALL)) as first:
        await first.caught_up()  # (nothing to catch up yet)
        await first.say("the budget is 40k")
        pasted = await first.say(f"my number is {PHONE}, call me after lunch")
        for i in range(6):
            await first.say(f"bob {i} {CHATTER}", user=BOB)
        facts = [f.text for f in await first.core.repo.reads.facts(SCOPE)]
        assert any(PHONE in fact for fact in facts), facts
    shown = await cli("memory", "show", "--scope", SCOPE, REDIS_URL=clean_redis)
    assert "8 messages stored" in shown.out and PHONE in shown.out, shown.out

    fake.delete_quietly(pasted)  # while the bot is down: no event reaches it

    async with running(fake, await new_core(make_core, fake, memory=SMALL)) as second:
        report = await second.caught_up()
        core = second.core
        assert (report.places, report.forgotten, report.edited) == (1, 1, 0)
        assert pasted["ts"] not in {e.platform_id for e in await core.repo.reads.all_entries(SCOPE)}
        assert "the budget is 40k" in await texts(core)
        assert [v for v in await scope_values(core, SCOPE) if PHONE in v] == []
        assert [f.text for f in await core.repo.reads.facts(PERSON) if PHONE in f.text] == []
    shown = await cli("memory", "show", "--scope", SCOPE, REDIS_URL=clean_redis)
    assert shown.code == 0, shown.err
    assert "7 messages stored" in shown.out and PHONE not in shown.out, shown.out


async def test_a_thread_reply_and_a_thread_parent_deleted_while_away_are_forgotten(
    fake: FakeSlack, make_core: CoreFactory
) -> None:
    """A reply deleted (its thread's memory); a question the bot answered deleted (Slack
    leaves a tombstone: the channel's memory). The bot's answer, in the thread under the
    question, is not in the channel's history and stays, as it does live."""
    async with running(fake, await new_core(make_core, fake)) as first:
        asked = await first.mention("where do we meet on friday?")
        parent = await first.say("let's plan the offsite")
        thread = f"{SCOPE}:{parent['ts']}"
        kept = await first.say("ask carol about dates", user=BOB, thread_ts=parent["ts"])
        gone = await first.say("the door code is 4412", user=BOB, thread_ts=parent["ts"])
    assert [e.role for e in await first.core.repo.reads.all_entries(SCOPE)].count("assistant") == 1

    fake.delete_quietly(gone)
    assert fake.delete_quietly(asked)["message"]["subtype"] == "tombstone"

    async with running(fake, await new_core(make_core, fake)) as second:
        report = await second.caught_up()
        core = second.core
        assert (report.places, report.forgotten) == (2, 2)
        assert [(e.text, e.platform_id) for e in await core.repo.reads.all_entries(thread)] == [
            ("ask carol about dates", kept["ts"])
        ]
        log = await core.repo.reads.all_entries(SCOPE)
        assert [e.text for e in log if e.role == "user"] == ["let's plan the offsite"]
        assert [e.role for e in log].count("assistant") == 1  # the bot's answer stays
        assert [v for v in await scope_values(core, thread) if "4412" in v] == []


async def test_a_delete_missed_while_socket_mode_reconnects_is_caught_up(
    fake: FakeSlack, make_core: CoreFactory
) -> None:
    async with running(fake, await new_core(make_core, fake)) as run:
        await run.caught_up()
        gone = await run.say("my password hint is blue giraffe")
        await run.say("the budget is 40k")
        fake.delete_quietly(gone)  # its event lost with the connection
        clock = run.core.clock
        assert isinstance(clock, ManualClock)
        clock.set(datetime.now(UTC))
        await fake.socket_request_reconnect()
        report = await run.caught_up(2)
        assert report.forgotten == 1
        assert await texts(run.core) == ["the budget is 40k"]


# -- edits ----------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["socket", "http"])
async def test_a_message_edited_while_away_holds_only_its_new_text(
    fake: FakeSlack, make_core: CoreFactory, mode: str
) -> None:
    async with running(fake, await new_core(make_core, fake)) as first:
        said = await first.say(f"my number is {PHONE}, call me after lunch")
        same = await first.say("the budget is 40k")
    fake.edit_quietly(said, text=f"call <@{BOB}> after lunch")
    fake.edit_quietly(same, text="the budget is 40k")  # edited, to the same words

    async with running(fake, await new_core(make_core, fake, mode=mode)) as second:
        report = await second.caught_up()
        core = second.core
        assert (report.forgotten, report.edited) == (0, 1)
        log = sorted(await core.repo.reads.all_entries(SCOPE), key=lambda e: e.platform_id)
        assert [(e.text, e.platform_id, e.author_id) for e in log] == [
            ("call @Bob Builder after lunch", said["ts"], ALICE),
            ("the budget is 40k", same["ts"], ALICE),
        ]
        assert [v for v in await scope_values(core, SCOPE) if PHONE in v] == []


async def test_an_edit_made_live_during_the_catch_up_is_not_undone(
    fake: FakeSlack, make_core: CoreFactory
) -> None:
    """Edited while away, then again live while the catch-up is rendering what it read (a
    name lookup Slack makes wait): what the catch-up read is older than memory, and is
    left to the next one."""
    async with running(fake, await new_core(make_core, fake)) as first:
        said = await first.say("lunch at noon")
    fake.edit_quietly(said, text=f"lunch at one, ask <@{BOB}>")
    fake.rate_limit_next(method="users.info", retry_after=1)  # Bob's name: a second's wait

    async with running(fake, await new_core(make_core, fake)) as second:
        await fake.wait_for(
            lambda: [c for c in fake.calls_of("users.info") if c.status == 429] or None,
            description="the catch-up's name lookup, rate limited",
        )
        live = fake.message_changed_event(original=said, text="lunch at two")
        await fake.socket_send_event(event=live)
        async with asyncio.timeout(10):
            while await texts(second.core) != ["lunch at two"]:  # noqa: ASYNC110
                await asyncio.sleep(0.02)
        report = await second.caught_up()
        assert (report.edited, report.stale_edits) == (0, 1)
        assert await texts(second.core) == ["lunch at two"]


# -- the bounds -----------------------------------------------------------------------------
async def test_only_the_window_of_the_recently_active_places_is_read(
    fake: FakeSlack, make_core: CoreFactory
) -> None:
    """With a window of one hour: #general was active ten minutes ago, #random two hours ago.
    Everything is deleted while away; only #general's message of the last hour is forgotten,
    and nothing older was asked of Slack."""
    fake.add_channel(C2, "random")
    now = datetime.now(UTC)

    def ts(ago: timedelta) -> str:
        return f"{(now - ago).timestamp():.6f}"

    async with running(fake, await new_core(make_core, fake)) as first:
        old = await first.say("said two hours ago", ts=ts(timedelta(hours=2)))
        recent = await first.say("said ten minutes ago", ts=ts(timedelta(minutes=10)))
        elsewhere = await first.say("random, two hours ago", channel=C2, ts=ts(timedelta(hours=2)))
    for event in (old, recent, elsewhere):
        fake.delete_quietly(event)
    fake.calls.clear()

    core = await new_core(make_core, fake, bot={"catch_up_hours": 1})
    async with running(fake, core) as second:
        report = await second.caught_up()
    assert (report.places, report.forgotten) == (1, 1)
    assert await texts(core) == ["said two hours ago"]
    assert await texts(core, f"slack:{T1}:{C2}") == ["random, two hours ago"]
    [history] = fake.calls_of("conversations.history")
    assert history.params["channel"] == C1
    assert float(history.params["oldest"]) == pytest.approx(
        (core.clock.now() - timedelta(hours=1)).timestamp(), abs=1
    )
    assert float(history.params["oldest"]) > float(old["ts"])
    assert fake.calls_of("conversations.replies") == []


async def test_channels_deleted_or_the_bot_removed_from_while_away_are_forgotten(
    fake: FakeSlack, make_core: CoreFactory
) -> None:
    """#general deleted (channel_not_found): forgotten with its thread, as on channel_deleted.
    The bot removed from #random (not_in_channel) and from the private #secret
    (channel_not_found: Slack says the same of a deleted private channel): both forgotten
    with their threads, as when the bot is removed live (channel_left, group_left).
    #archive, archived meanwhile, keeps its memory."""
    fake.add_channel(C2, "random")
    fake.add_channel(C3, "secret", is_private=True)
    fake.add_channel(C4, "archive")
    async with running(fake, await new_core(make_core, fake)) as first:
        await first.say("archived, still there", channel=C4)
        parent = await first.say("general, soon deleted")
        await first.say("in its thread", thread_ts=parent["ts"], user=BOB)
        left = await first.say("random, the bot is removed", channel=C2)
        await first.say("in a thread of random", channel=C2, thread_ts=left["ts"], user=BOB)
        secret = await first.say("secret, the bot is removed", channel=C3, private=True)
        await first.say(
            "in a thread of secret", channel=C3, thread_ts=secret["ts"], user=BOB, private=True
        )
    fake.delete_channel(C1)
    fake.leave_channel(C2, BOT)  # (no channel_left reaches the app: it is away)
    fake.leave_channel(C3, BOT)
    fake.archive_channel(C4)
    fake.calls.clear()

    async with running(fake, await new_core(make_core, fake)) as second:
        report = await second.caught_up()
        core = second.core
    assert sorted(report.purged) == [SCOPE, f"slack:{T1}:{C2}", f"slack:{T1}:{C3}"]
    for gone in (SCOPE, f"{SCOPE}:{parent['ts']}", f"slack:{T1}:{C2}", f"slack:{T1}:{C3}"):
        assert await forgotten(core, gone), gone
    assert await forgotten(core, f"slack:{T1}:{C2}:{left['ts']}")
    assert await forgotten(core, f"slack:{T1}:{C3}:{secret['ts']}")
    assert await texts(core, f"slack:{T1}:{C4}") == ["archived, still there"]
    # One request a channel: one found gone (or closed to the bot) is not asked again.
    asked = [c.params["channel"] for c in fake.calls if c.method.startswith("conversations.")]
    assert sorted(c for c in asked if c in (C1, C2, C3)) == [C1, C2, C3]


# -- live messages meanwhile ----------------------------------------------------------------
async def test_a_live_message_is_answered_during_a_long_catch_up_and_shutdown_stops_it(
    fake: FakeSlack, make_core: CoreFactory
) -> None:
    """Two requests a minute: the second channel's history waits 30 s. A question asked
    meanwhile is stored and answered at once; stopping the bot ends the catch-up there."""
    fake.add_channel(C2, "random")
    async with running(fake, await new_core(make_core, fake)) as first:
        await first.say("random, said first", channel=C2)
        await first.say("general, said last")

    core = await new_core(make_core, fake, learn={"slack_requests_per_minute": 2})
    async with running(fake, core) as second:
        await fake.wait_for(
            lambda: fake.calls_of("conversations.history", ok_only=True) or None,
            description="the first history request",
        )
        started = time.monotonic()
        asked = await second.mention("what did we say?", channel=C2)  # read next, in 30 s
        assert time.monotonic() - started < 10
        assert len(fake.calls_of("conversations.history")) == 1  # still waiting its turn
        assert second.reports == []
        assert "@memorybot what did we say?" in await texts(core, f"slack:{T1}:{C2}")
        stopping = time.monotonic()
    assert time.monotonic() - stopping < 5
    assert len(fake.calls_of("conversations.history")) == 1
    [reply] = [m for m in fake.posted_messages if m.thread_ts == asked["ts"]]
    assert reply.channel == C2
